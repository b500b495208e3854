"""`doit run` leaves settled tasks out of doit's list (doitext/pruning.py): a task whose uptodate
answers are all True, whose targets exist and whose dependencies are settled too. The answers are
the stages' own; a task behind one with work to do, a task named on the command line, and every
task of `doit run -a` stay."""

import os
import re

import pytest

from nginx_eval.doitext.pruning import drop_settled

ARGV = ["run", "all"]


def task(name, current=True, deps=(), targets=(), **extra):
    basename, _, sub = name.partition(":")
    return dict(
        {
            "basename": basename,
            "name": sub or None,
            "actions": [lambda: None],
            "uptodate": [(lambda answer: answer, [current])],
            "task_dep": list(deps),
            "targets": list(targets),
        },
        **extra,
    )


def names(dicts):
    return [
        f"{d['basename']}:{d['name']}" if d["name"] else d["basename"]
        for d in dicts
        if d["basename"] != "all"
    ]


def everything(dicts):
    """`dicts` and a group `all` that depends on each of them."""
    return dicts + [{"basename": "all", "name": None, "actions": None, "task_dep": names(dicts)}]


def test_a_task_is_settled_only_with_everything_before_it():
    dicts = [
        task("patch:u1"),
        task("build:u1", deps=["patch:u1"]),
        task("patch:u2", current=False),
        task("build:u2", deps=["patch:u2"]),
        {"basename": "all", "name": None, "actions": None, "task_dep": ["build:u1", "build:u2"]},
    ]
    kept, shadow = drop_settled(dicts, ARGV)
    # build:u2 says it is current, but its patch runs first and may change what it builds.
    assert names(kept) == ["patch:u2", "build:u2"]
    assert kept[-1]["task_dep"] == ["build:u2"]
    assert shadow == {"patch:u1": [], "build:u1": ["patch:u1"], "all": ["build:u1", "build:u2"]}


def test_only_what_doit_would_find_up_to_date_is_settled(tmp_path):
    made = tmp_path / "made.json"
    made.write_text("{}")
    dicts = [
        task("a:made", targets=[made]),
        task("a:missing", targets=[tmp_path / "none"]),
        task("a:file", file_dep=[str(made)]),
        task("a:no-answer", uptodate=[None]),
        task("a:shell", uptodate=["true"]),
        task("a:magic", uptodate=[(lambda task, values: True, [])]),
        task("a:raises", uptodate=[(lambda: 1 / 0, [])]),
        task("a:group", actions=None),
    ]
    kept, _ = drop_settled(everything(dicts), ARGV)
    assert names(kept) == [
        "a:missing",
        "a:file",
        "a:no-answer",
        "a:shell",
        "a:magic",
        "a:raises",
        "a:group",
    ]


def test_only_what_the_command_reaches_is_asked_and_named_tasks_stay(tmp_path):
    asked = []
    ask = lambda name: lambda: asked.append(name) or True
    dicts = everything([task(f"a:{n}", uptodate=[(ask(n), [])]) for n in "xyz"])
    # Named: kept; what the command does not reach is not asked, nor handed to doit (which
    # would make a Task of it and never run it).
    assert names(drop_settled(dicts, ["run", "a:x", "a:y"])[0]) == ["a:x", "a:y"]
    assert asked == []
    # With no task named, the default tasks are the command's.
    assert names(drop_settled(dicts, ["run"], ["all"])[0]) == []
    assert sorted(asked) == ["x", "y", "z"]


def test_a_group_doit_makes_and_the_maker_of_a_file_dep_are_reached(tmp_path):
    """A task_dep on a basename with subtasks reaches them (doit makes that group), and a file_dep
    reaches the task whose target it is (doit runs that task first)."""
    made = tmp_path / "made.json"
    dicts = [
        task("v:1", current=False),
        task("v:2", current=False),
        task("m:make", current=False, targets=[made]),
        task("r:use", current=False, file_dep=[str(made)]),
        task("x:other", current=False),
        {"basename": "top", "name": None, "actions": None, "task_dep": ["v", "r:use"]},
    ]
    kept, _ = drop_settled(dicts, ["run", "top"])
    assert sorted(d["basename"] + ":" + (d["name"] or "") for d in kept) == [
        "m:make",
        "r:use",
        "top:",
        "v:1",
        "v:2",
    ]
    # As doit's loader makes groups: a dict with name None replaces the group of the subtasks
    # yielded before it (`<bench>` runs its modes, not `<bench>:validate`) and gains those after.
    dicts = [
        task("b:validate", current=False),
        task("b:gold", current=False),
        {"basename": "b", "name": None, "actions": None, "task_dep": ["b:gold"]},
        task("b:later", current=False),
    ]
    kept, _ = drop_settled(dicts, ["run", "b"])
    assert sorted(d["basename"] + ":" + (d["name"] or "") for d in kept) == [
        "b:",
        "b:gold",
        "b:later",
    ]


def test_always_a_pattern_a_target_or_a_group_doit_makes_drop_nothing(tmp_path):
    made = tmp_path / "made.json"
    made.write_text("{}")
    dicts = everything([task("a:x"), task("a:y", targets=[made])])
    for argv in (["run", "-a", "all"], ["run", "a:*"], ["run", str(made)], ["run", "a"]):
        assert names(drop_settled(dicts, argv)[0]) == ["a:x", "a:y"], argv


@pytest.mark.reports
def test_a_rerun_hands_doit_only_the_units_with_work(project):
    project.doit("run", "tiny")
    proc, executed = project.doit("run", "tiny")
    assert executed == []
    # Settled units never reached doit ("-- name" lines are doit's up-to-date tasks), and the
    # summary still counts every task.
    assert not [line for line in proc.stdout.splitlines() if line.startswith("-- grade:")]
    assert re.search(r"^  gold +2 of 2 ", proc.stdout, re.M)
    # A unit whose grade is gone grades again, and only it; named, a settled task is doit's.
    os.unlink(project.task_dir("gold", "tiny-add") / "grade.json")
    proc, executed = project.doit("run", "tiny")
    assert [t for t in executed if t.startswith(("grade:", "prove:", "build:"))] == [
        "grade:tiny/gold/tiny-add"
    ]
    # Its progress line counts the settled units as finished: [N/N], all of the command's.
    line = next(ln for ln in proc.stdout.splitlines() if ln.endswith("tiny-add resolved"))
    done, total = line[1 : line.index("]")].split("/")
    assert done == total and int(total) > 2
    proc, executed = project.doit("run", "grade:tiny/none/tiny-mul")
    assert executed == [] and "-- grade:tiny/none/tiny-mul" in proc.stdout
