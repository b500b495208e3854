"""The quick loop's guard (conftest.py): a test outside the e2e marker that starts doit, make,
prove, the sandbox, the CLI or a Ray node fails, naming the program, wrappers included; so does
one whose code writes such a start out, also where it skips."""

import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import _GUARD, E2E_FIXTURES, e2e_program, written_e2e_start

PYTHON = sys.executable


@pytest.mark.parametrize(
    "argv, program",
    [
        (["make", "-j2"], "make"),
        (["/usr/bin/prove", "--norc", "-v", "a.t"], "prove"),
        ([PYTHON, "-m", "doit", "-f", "dodo.py", "run"], "doit"),
        (["sh", "-c", "make -C objs"], "make"),
        ([PYTHON, "-I", "-S", "/pkg/prove/namespaces.py", "prove", "--norc", "-v", "a.t"], "prove"),
        (["/venv/lib/ray/core/src/ray/raylet/raylet", "--node_ip_address=127.0.0.1"], "raylet"),
        ("claude", "claude"),
        (["git", "status"], None),
        (["perl", "-e", "1"], None),
        ([PYTHON, "-c", "print('prove')"], None),
        (["sh", "-c", "echo make"], None),
    ],
)
def test_the_programs_of_an_end_to_end_test_are_recognised(argv, program):
    assert e2e_program(argv) == program


def test_a_quick_test_that_starts_one_fails_naming_it():
    _GUARD["on"] = True
    try:
        with pytest.raises(AssertionError, match="this test starts make, so it is end to end"):
            subprocess.run(["make", "--version"], capture_output=True)
        assert subprocess.run(["true"]).returncode == 0
    finally:
        _GUARD["on"] = False


def _starts_doit(tmp_path):
    subprocess.run([sys.executable, "-m", "doit", "-f", str(tmp_path), "list"], check=True)


def _through_a_helper(tmp_path):
    _starts_doit(tmp_path)


def _through_a_name():
    argv = ["prove", "--norc", "-v", "a.t"]
    return subprocess.Popen(argv)


def _refused_or_quick():
    with pytest.raises(AssertionError):
        subprocess.run(["make", "--version"])
    subprocess.run(["git", "status"], check=False)
    subprocess.run([sys.executable, "-c", "print('make')"])


def test_a_start_written_in_a_test_is_found_through_its_helpers():
    """The guard's static half (conftest.written_e2e_start) finds what a test would start where
    it does not skip: written out, through a function of tests/ it calls, through a name."""
    line = _starts_doit.__code__.co_firstlineno + 1
    assert written_e2e_start(_starts_doit) == ("doit", f"test_e2e_marker.py:{line}")
    assert written_e2e_start(_through_a_helper) == ("doit", f"test_e2e_marker.py:{line}")
    assert written_e2e_start(_through_a_name)[0] == "prove"
    assert written_e2e_start(_refused_or_quick) is None


def modules_with_mirrors():
    """The test modules that read NGINX_EVAL_REPO_URL (their tests skip without mirrors),
    imported at collection, as pytest imports them (some start the sandbox to probe it)."""
    return [
        importlib.import_module(p.stem)
        for p in sorted(Path(__file__).parent.glob("test_*.py"))
        if 'environ.get("NGINX_EVAL_REPO_URL"' in p.read_text()
    ]


@pytest.mark.parametrize("mod", modules_with_mirrors(), ids=lambda m: m.__name__)
def test_the_quick_loop_with_mirrors_starts_no_doit(mod):
    """Issue 51, finding 17: with NGINX_EVAL_REPO_URL set, `pytest -m "not e2e"` ran 8 tests of
    test_real_nginx.py and test_full_mode.py that start doit (they skip without mirrors, so the
    guard never saw them start it). Each test of a module that reads the mirrors is end to end
    (E2E = True, its e2e mark, a fixture of E2E_FIXTURES) or writes no start."""
    quick = [
        f
        for name, f in vars(mod).items()
        if name.startswith("test_")
        and inspect.isfunction(f)
        and not getattr(mod, "E2E", False)
        and not any(m.name == "e2e" for m in getattr(f, "pytestmark", []))
        and not E2E_FIXTURES & set(inspect.signature(f).parameters)
    ]
    assert [(f.__name__, written_e2e_start(f)) for f in quick if written_e2e_start(f)] == []
