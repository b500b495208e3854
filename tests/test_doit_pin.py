"""doit is pinned because nginx-eval reaches into its internals (nginx_eval/doitext/); these
tests fail first when a doit outside the pin is installed, when an internal we wrap changed its
shape, or when a module outside doitext/ starts to lean on one."""

import ast
import inspect
import re
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from doit import cmd_clean, control, dependency, doit_cmd, runner
from packaging.specifiers import SpecifierSet

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
PACKAGE = PYPROJECT.parent / "nginx_eval"
# doit's modules that are not its API for task authors and loaders: what doitext/ wraps.
INTERNALS = (
    "doit.dependency",
    "doit.control",
    "doit.runner",
    "doit.cmd_base",
    "doit.cmd_clean",
    "doit.cmdparse",
    "doit.doit_cmd",
)


def doit_pin():
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    (spec,) = [d for d in deps if re.match(r"doit\b", d)]
    return SpecifierSet(spec[len("doit") :])


def test_pin_is_an_upper_and_lower_bound_and_holds_the_installed_doit():
    pin = doit_pin()
    assert any(s.operator in ("<", "<=", "==", "~=") for s in pin), (
        f"doit is not pinned above: {pin}"
    )
    assert version("doit") in pin


def params(function):
    return list(inspect.signature(function).parameters)


def test_the_dispatcher_methods_scheduling_wraps():
    # scheduling.finish_chains_first wraps these two and reads `ready` and `_gen_node`.
    assert params(control.TaskDispatcher._update_waiting) == ["self", "processed"]
    assert params(control.TaskDispatcher._get_next_node) == ["self", "ready", "tasks_to_run"]
    assert params(control.TaskDispatcher._gen_node) == ["self", "parent", "task_name"]
    assert "self.ready" in inspect.getsource(control.TaskDispatcher)
    # ... and wraps the generator that hands out the nodes ("hold on" while none can go).
    assert params(control.TaskDispatcher._dispatcher_generator) == ["self", "selected_tasks"]
    assert "self._dispatcher_generator(" in inspect.getsource(control.TaskDispatcher.__init__)
    assert '"hold on"' in inspect.getsource(control.TaskDispatcher._dispatcher_generator)
    assert isinstance(control.ExecNode, type)


def test_only_doitext_imports_doits_internals():
    users = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                if isinstance(node, ast.ImportFrom) and node.module
                else []
            )
            if any(n in INTERNALS for n in names):
                users.add(path.relative_to(PACKAGE).parts[0])
    assert users == {"doitext"}


def test_the_database_internals_the_backend_uses(tmp_path):
    # DurableDB passes module_name (0.37's backend plugin call), sets pragmas and commits a
    # forget through _conn, and names its marker after `name`.
    assert "module_name" in params(dependency.SqliteDB.__init__)
    db = dependency.SqliteDB(str(tmp_path / "db"), dependency.JSONCodec())
    assert {"_conn", "name"} <= set(vars(db))
    assert params(dependency.SqliteDB.remove) == ["self", "task_id"]


def test_the_clean_and_runner_methods_cleaning_and_invocation_wrap():
    assert params(cmd_clean.Clean.clean_tasks) == ["self", "tasks", "dryrun", "cleanforget"]
    assert params(runner.Runner.execute_task) == ["self", "task"]


def test_the_task_and_node_attributes_slim_keeps_once():
    # slim.DEFAULTS names attributes Task.__init__ sets; SlimTask overrides the methods that
    # read a task's __dict__; the node wrappers replace these ExecNode attributes.
    from doit.task import Task

    from nginx_eval.doitext import slim

    made = vars(Task("a:b", [(print, [])]))
    assert set(slim.DEFAULTS) <= set(made)
    assert {"name", "_actions", "task_dep", "uptodate", "targets", "values", "doc"} <= set(made)
    for method in ("pickle_safe_dict", "update_from_pickle", "__getstate__", "update_deps"):
        assert "__dict__" in inspect.getsource(getattr(Task, method)) or method == "update_deps"
    node = control.ExecNode(Task("a:b", [(print, [])]), None)
    assert {
        "task_dep",
        "ancestors",
        "calc_dep",
        "wait_run",
        "wait_run_calc",
        "waiting_me",
        "generator",
        "run_status",
    } <= set(vars(node))
    assert "next(self.generator)" in inspect.getsource(control.ExecNode.step)


@pytest.fixture
def own_dodo_module(monkeypatch):
    """doit imports a dodo file as the module `dodo` (importlib.import_module) and puts its
    directory first on sys.path: a case of its own imports its own dodo.py, and leaves neither
    behind. Without this every case after the first ran the first case's module, whose file
    pytest had removed with its passed test's directory (`inspect` then cannot read the task
    functions' source; pytest 9.0 happened to hand the next case a directory of the same name)."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = sys.modules.pop("dodo", None)
    yield
    sys.modules.pop("dodo", None)
    if before is not None:
        sys.modules["dodo"] = before


@pytest.mark.parametrize(
    "argv",
    [
        ["list", "run=a", "limit=2", "limit=3", "instances=x, y"],
        ["-f", "{dodo}", "list", "bench=tiny", "--all"],
        ["-d", "{dir}", "list", "=odd", "empty="],
        ["list", "-f", "{dodo}", "run=b"],  # after the command, -f is no loader option
    ],
)
def test_the_variables_doit_takes_are_those_invocation_reads(
    tmp_path, monkeypatch, capsys, request, own_dodo_module, argv
):
    # command_line_variables asks doit's public get_var about the name of every word that may be
    # a variable: doit holds exactly those it took, whatever its command line looked like.
    from doit.cmd_base import DodoTaskLoader
    from doit.doit_cmd import DoitMain

    from nginx_eval.doitext.invocation import command_line_variables

    dodo = tmp_path / "dodo.py"
    # A task named after the case: the case lists its own dodo.py, not one doit imported before.
    task = "case_" + request.node.callspec.id
    dodo.write_text(f"def task_{task}():\n    return {{'actions': None}}\n")
    argv = [w.format(dodo=dodo, dir=tmp_path) for w in argv]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(doit_cmd, "_CMDLINE_VARS", None)  # doit's own, restored after the test
    assert DoitMain(DodoTaskLoader()).run(argv) == 0
    assert capsys.readouterr().out.split() == [task]
    assert command_line_variables(argv) == doit_cmd._CMDLINE_VARS
    assert list(command_line_variables(argv)) == list(doit_cmd._CMDLINE_VARS)
