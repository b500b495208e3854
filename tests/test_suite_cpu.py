"""scripts/suite_cpu.py: the command it runs and what it prints (no suite run here)."""

import sys

from conftest import SOURCE_ROOT, script_module


def suite_cpu():
    return script_module("suite_cpu")


def test_the_command_is_ci_runs_with_the_plugin_and_the_paths_asked_for():
    script = suite_cpu()
    ci = [ln for ln in (SOURCE_ROOT / ".ci" / "run").read_text().splitlines() if "-m pytest" in ln]
    (line,) = ci
    words = line.split()
    command = script.suite_command(["tests/test_grade.py"], ["-x"])
    assert command[0] == sys.executable
    assert command[1:-4] == words[1:-1]  # .ci/run's options, its workers among them
    assert command[-4:] == ["-p", "suite_cpu", "-x", "tests/test_grade.py"]
    assert script.suite_command(["tests"], [])[-1] == words[-1] == "tests"


def test_the_summary_sums_modules_and_orders_by_processor_time():
    rows = [
        ["tests/test_a.py::test_one", 1.5, 3.0],
        ["tests/test_b.py::test_two", 4.0, 4.5],
        ["tests/test_a.py::test_three", 3.0, 9.0],
    ]
    text = suite_cpu().summary(rows, top=2)
    lines = text.splitlines()
    assert lines[0] == "3 tests, 8 s of processor time"
    heaviest = lines[lines.index("heaviest tests:") + 1 :][:2]
    assert [ln.split()[-1] for ln in heaviest] == [
        "tests/test_b.py::test_two",
        "tests/test_a.py::test_three",
    ]
    modules = lines[lines.index("heaviest modules:") + 1 :]
    assert modules == ["      4.5 s  tests/test_a.py", "      4.0 s  tests/test_b.py"]
