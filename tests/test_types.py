"""mypy finds no error in the package, with pyproject.toml's configuration: every function comes
typed (disallow_untyped_defs, for the whole package: no override exempts a module), and every
body is checked (check_untyped_defs). ruff (its
[tool.ruff]) finds nothing to report and nothing to reformat in the code .ci/run checks, and
each of its two commands fails on a tree with a file it does not accept."""

import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib
import typing

import pytest
from conftest import SOURCE_ROOT

from nginx_eval.core import outcomes

# What .ci/run hands ruff: the package, the tests, the scripts and the doit entry point.
RUFF_PATHS = ("nginx_eval", "tests", "scripts", "dodo.py")
RUFF_COMMANDS = {"check": ("check",), "format": ("format", "--check")}
# A module ruff check refuses (B905: zip without strict=) that is formatted as ruff formats.
NOT_LINT_CLEAN = "PAIRS = list(zip([1, 2], [3, 4]))\n"
# A module ruff check accepts (no selected rule looks at the spaces) that ruff would reformat.
NOT_FORMATTED = "PAIRS = list(zip([1, 2],[3, 4], strict=True))\n"
CLEAN = '"""A module ruff accepts as it is."""\n'


def test_mypy_finds_no_error_in_the_package():
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed: pip install -e '.[test]' (scripts/setup-debian.sh)")
    # Its cache (.mypy_cache/ at the root, ignored by git) makes a run after the first one take
    # seconds; the first takes about half a minute.
    proc = mypy_on(SOURCE_ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success: no issues found" in proc.stdout, proc.stdout


def mypy_on(root, *options):
    """`mypy OPTIONS nginx_eval` in `root`, with its pyproject.toml and its package first."""
    return subprocess.run(
        [sys.executable, "-m", "mypy", *options, "nginx_eval"],
        cwd=root,
        env=dict(os.environ, PYTHONPATH=str(root)),
        capture_output=True,
        text=True,
        timeout=300,
    )


def mypy_config():
    return tomllib.loads((SOURCE_ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def test_every_function_is_typed_and_every_body_checked():
    config = mypy_config()
    for setting in ("disallow_untyped_defs", "disallow_incomplete_defs", "check_untyped_defs"):
        assert config.get(setting) is True, setting
    exempt = set()
    for override in config.get("overrides", []):
        assert override.get("check_untyped_defs", True) is True, override["module"]
        if override.get("disallow_untyped_defs", True) is False or (
            override.get("disallow_incomplete_defs", True) is False
        ):
            modules = override["module"]
            exempt |= {modules} if isinstance(modules, str) else set(modules)
    assert not exempt, sorted(exempt)


def test_mypy_refuses_a_new_unannotated_function(tmp_path):
    """A module the package gains, with one function that has no annotations: mypy, run with the
    project's configuration as the test above runs it, names it."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed: pip install -e '.[test]' (scripts/setup-debian.sh)")
    shutil.copy(SOURCE_ROOT / "pyproject.toml", tmp_path)
    package = tmp_path / "nginx_eval"
    package.mkdir()
    (package / "__init__.py").write_text('"""The package."""\n')
    (package / "added.py").write_text(
        '"""A new module."""\n\n\ndef typed(x: int) -> int:\n    return x\n\n\n'
        "def untyped(x):\n    return x\n"
    )
    proc = mypy_on(tmp_path, "--cache-dir", str(tmp_path / "cache"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "nginx_eval/added.py:8: error: Function is missing a type annotation" in proc.stdout, (
        proc.stdout
    )
    assert "Found 1 error in 1 file" in proc.stdout, proc.stdout


def test_mypy_refuses_a_record_written_as_a_plain_dict(tmp_path):
    """core/records.write_record takes only the records' TypedDicts: a stage that writes a dict
    of its own, or misspells a field of one, fails mypy (before, any mapping passed)."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed: pip install -e '.[test]' (scripts/setup-debian.sh)")
    (tmp_path / "stage.py").write_text(
        "from nginx_eval.core.records import PatchJson, write_record\n\n"
        'write_record("patch.json", {"inputs": "x"})\n'
        "def write(record: PatchJson) -> None:\n"
        '    write_record("patch.json", {**record, "sha": "x"})\n'
    )
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "", "--ignore-missing-imports"]
        + ["--cache-dir", str(tmp_path / "cache"), "stage.py"],
        cwd=tmp_path,
        env=dict(os.environ, MYPYPATH=str(SOURCE_ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert 'stage.py:3: error: Argument 2 to "write_record" has incompatible type' in proc.stdout
    assert "stage.py:5: error:" in proc.stdout, proc.stdout
    assert "Found 2 errors in 1 file" in proc.stdout, proc.stdout


def ruff(root, command):
    """`python3 -m ruff <command> RUFF_PATHS` in `root`, with the pyproject.toml found there."""
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed: pip install -e '.[test]' (scripts/setup-debian.sh)")
    return subprocess.run(
        [sys.executable, "-m", "ruff", *RUFF_COMMANDS[command], "--no-cache", *RUFF_PATHS],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ci_runs_both_ruff_commands_on_these_paths():
    ci = (SOURCE_ROOT / ".ci" / "run").read_text()
    for args in RUFF_COMMANDS.values():
        assert f"python3 -m ruff {' '.join(args + RUFF_PATHS)}\n" in ci, args


@pytest.mark.parametrize("command", sorted(RUFF_COMMANDS))
def test_ruff_accepts_the_tree(command):
    proc = ruff(SOURCE_ROOT, command)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def tree_with(tmp_path, where, text):
    """A copy of the project's ruff configuration with a clean file in each of RUFF_PATHS and
    `text` as the file at `where`."""
    shutil.copy(SOURCE_ROOT / "pyproject.toml", tmp_path)
    for path in RUFF_PATHS:
        if path.endswith(".py"):
            (tmp_path / path).write_text(CLEAN)
        else:
            (tmp_path / path).mkdir()
            (tmp_path / path / "clean.py").write_text(CLEAN)
    target = tmp_path / where
    target.write_text(text)
    return tmp_path, target.relative_to(tmp_path)


@pytest.mark.parametrize("where", ["nginx_eval/bad.py", "tests/test_bad.py", "scripts/bad.py"])
def test_ruff_check_fails_on_a_file_it_refuses(tmp_path, where):
    root, bad = tree_with(tmp_path, where, NOT_LINT_CLEAN)
    proc = ruff(root, "check")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{bad}:1:" in proc.stdout and "B905" in proc.stdout, proc.stdout
    # The other command has nothing to say about it: each catches its own kind of fault.
    assert ruff(root, "format").returncode == 0


@pytest.mark.parametrize("where", ["nginx_eval/bad.py", "tests/test_bad.py", "dodo.py"])
def test_ruff_format_check_fails_on_a_file_it_would_reformat(tmp_path, where):
    root, bad = tree_with(tmp_path, where, NOT_FORMATTED)
    proc = ruff(root, "format")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert str(bad) in proc.stdout and "1 file would be reformatted" in proc.stdout, proc.stdout
    assert ruff(root, "check").returncode == 0


def test_each_vocabulary_is_its_type():
    """core/outcomes.py's word lists and the Literal types that annotate fields holding them
    name the same words (OUTCOMES in the order of the report's columns)."""
    assert outcomes.OUTCOMES == typing.get_args(outcomes.OutcomeName)
    assert tuple(outcomes.UNFINISHED_AGENT) == typing.get_args(outcomes.UnfinishedStatus)
    assert set(outcomes.UNFINISHED_AGENT) <= set(outcomes.AGENT_STATUSES)
    assert set(outcomes.UNFINISHED_AGENT) <= set(outcomes.GRADE_STATUSES)
    assert set(outcomes.GRADE_STATUSES) <= set(outcomes.OUTCOMES)
    build = set(typing.get_args(outcomes.BuildStatus)) - {outcomes.BUILT}
    assert build <= set(outcomes.GRADE_STATUSES)
