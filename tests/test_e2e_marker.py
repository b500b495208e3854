"""The quick loop's guard (conftest.py): a test outside the e2e marker that starts doit, make,
prove, the sandbox, the CLI or a Ray node fails, naming the program, wrappers included."""

import subprocess
import sys

import pytest
from conftest import _GUARD, e2e_program

PYTHON = sys.executable


@pytest.mark.parametrize(
    "argv, program",
    [
        (["make", "-j2"], "make"),
        (["/usr/bin/prove", "--norc", "-v", "a.t"], "prove"),
        ([PYTHON, "-m", "doit", "-f", "dodo.py", "run"], "doit"),
        (["sh", "-c", "make -C objs"], "make"),
        ([PYTHON, "-I", "-S", "/pkg/prove/netns.py", "prove", "--norc", "-v", "a.t"], "prove"),
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
