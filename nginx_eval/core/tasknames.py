"""The names of doit's tasks, spelled once: ``<basename>:<name>``, as `doit list` shows them.

A unit is one task of the benchmark in one mode, ``<bench>/<mode>/<instance id>`` (unit_name);
each of UNIT_STAGES has a task per unit: ``task_name(GRADE, unit)`` is ``grade:nginx/raw/<id>``."""

import sys
from collections.abc import Iterable
from typing import Protocol

from . import jsonio

REPOS, TESTS, BASE = "repos", "tests", "base"
UNIT_STAGES = WORKSPACE, AGENT, PATCH, BUILD, PROVE, STRICT, GRADE = (
    "workspace",
    "agent",
    "patch",
    "build",
    "prove",
    "strict",
    "grade",
)
RESULTS, VALIDATE, VALIDATION = "results", "validate", "validation"


# What a name is made of, as the run's types (run/benchmark.py, run/modes.py) have it: core
# names no type of a higher layer.
class Named(Protocol):
    """A benchmark or a mode: its name."""

    @property
    def name(self) -> str: ...


class Instance(Protocol):
    """A task of either kind: its instance id."""

    @property
    def instance_id(self) -> str: ...


class HasTestsTree(Protocol):
    """A task whose test files run from a tests tree (benchmark.Task)."""

    @property
    def tests_tree_id(self) -> str: ...


class BaseBuild(Protocol):
    """A task with a base build: its repository, base commit and configure flags."""

    @property
    def repo(self) -> str: ...
    @property
    def base_commit(self) -> str: ...
    @property
    def configure_flags(self) -> Iterable[str]: ...


def task_name(basename: str, name: str) -> str:
    # One string per name, however many tasks depend on it: a run of six modes spells some
    # 25,000 names for 7,300 tasks (2 MiB of the doit process, 1.4 MiB of it copies).
    return sys.intern(f"{basename}:{name}")


def repo_subtask(repo: str) -> str:
    return repo.replace("/", "+")


def repo_task(repo: str) -> str:
    return task_name(REPOS, repo_subtask(repo))


def tests_subtask(tree_id: str) -> str:
    """A test tree's task: its commit, and the digest of an authored task's files after a +
    (benchmark.Task.tests_tree_id), each cut to 12."""
    commit, plus, authored = tree_id.partition("+")
    return commit[:12] + plus + authored[:12]


def tests_task_name(tree_id: str) -> str:
    return task_name(TESTS, tests_subtask(tree_id))


def tests_task_names(tasks: Iterable[HasTestsTree]) -> list[str]:
    """The names of the test-tree tasks of `tasks`, each once, in their order."""
    return list(dict.fromkeys(tests_task_name(t.tests_tree_id) for t in tasks))


def base_subtask(task: BaseBuild) -> str:
    """The base build of `task`: its commit and configure flags."""
    flags = jsonio.digest(list(task.configure_flags))[:8]
    return f"{repo_subtask(task.repo)}/{task.base_commit[:12]}-{flags}"


def base_task_name(task: BaseBuild) -> str:
    return task_name(BASE, base_subtask(task))


def unit_name(bench: Named, mode: Named, task: Instance) -> str:
    return f"{bench.name}/{mode.name}/{task.instance_id}"


def unit_of(name: str) -> tuple[str, str] | None:
    """(mode, instance id) of a unit stage's task name, else None."""
    stage, sep, rest = name.partition(":")
    if not sep or stage not in UNIT_STAGES:
        return None
    parts = rest.split("/")
    return (parts[1], parts[2]) if len(parts) == 3 else None


def results_subtask(bench_name: str, mode_name: str) -> str:
    return f"{bench_name}/{mode_name}"


def results_task_name(bench_name: str, mode_name: str) -> str:
    return task_name(RESULTS, results_subtask(bench_name, mode_name))


def validate_subtask(bench_name: str, instance_id: str) -> str:
    return f"{bench_name}/{instance_id}"


def validate_task_name(bench_name: str, instance_id: str) -> str:
    return task_name(VALIDATE, validate_subtask(bench_name, instance_id))
