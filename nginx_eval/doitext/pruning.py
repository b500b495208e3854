"""`doit run` hands doit only the tasks that may have work to do.

A no-op rerun of every mode on the shipped benchmark is thousands of tasks, and doit spends time
on each up-to-date task of its own (the Task, the dispatcher's node, a signature inspected for
every uptodate callable, the reporter) before any check of ours (docs/performance.md). So
before doit sees them, ``drop_settled`` asks each task dict the question doit would ask, with
the same functions, and leaves out those whose answer is already known to be "up to date":

- a task is *settled* when it has actions, no file_dep (doit's database would decide those), at
  least one uptodate entry and every entry says True (a bool, or a callable with its arguments;
  a shell command, a config_changed object or a callable that wants doit's `task` or `values`
  makes it unsettled), every target exists, and every task it depends on (task_dep) is settled
  too. doit checks a task only after its dependencies ran; a task whose dependencies are all
  settled runs nothing before it, so the answer now is the answer doit would get;
- settled tasks the command reaches are dropped, unless the command line names them, and the
  task_dep lists of the others forget them. Tasks the command does not reach (through task_dep,
  a group doit makes of a basename's subtasks, or a file_dep on another task's target) are
  dropped too: doit would make a Task of each (the site's pages: one per unit) and never run
  it. `doit run -a`, a pattern, a target file or a group that doit makes from
  subtasks (`doit run build`) drops nothing.

Freshness is still decided in one place, the stages' uptodate functions (stamps.py): this only
calls them earlier. ``shadow`` keeps the dependencies as they were, for what counts the units of
a command (progress.py); `doit list`, `info`, `forget` and `clean` see every task.
"""

import inspect
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .invocation import command_targets

# doit's magic arguments of an uptodate callable: only doit can give them.
MAGIC_PARAMETERS = ("task", "values")
# doit run options that make every task run (nothing is settled).
ALWAYS = ("-a", "--always-execute")


TaskDict = dict[str, Any]
# {function: whether doit would pass it `task` or `values`}: each function asked once per
# command (settling), its signature being the same for every task.
Wants = dict[object, bool]


def full_name(d: TaskDict) -> str:
    return f"{d['basename']}:{d['name']}" if d.get("name") else d["basename"]


def _wants_doit(function: Callable[..., Any], wants: Wants) -> bool:
    """Whether doit would pass `task` or `values` to the uptodate callable `function`."""
    key = getattr(function, "__func__", function)
    if key not in wants:
        try:
            names = list(inspect.signature(function).parameters)
        except (TypeError, ValueError):
            names = list(MAGIC_PARAMETERS)
        wants[key] = (names[:1] == ["task"]) or (names[1:2] == ["values"])
    return wants[key]


def _says_current(entry: Any, wants: Wants) -> bool | None:
    """True, False, or None (doit ignores the entry) for one uptodate entry; raises
    _Unsettled when only doit can answer it."""
    if entry is None or isinstance(entry, bool):
        return entry
    if isinstance(entry, tuple):
        function, args, kwargs = (list(entry) + [(), {}])[:3]
    elif callable(entry):
        function, args, kwargs = entry, (), {}
    else:
        raise _Unsettled()
    if not callable(function) or not inspect.isroutine(function) or _wants_doit(function, wants):
        raise _Unsettled()
    result = function(*args, **(kwargs or {}))
    return None if result is None else bool(result)


class _Unsettled(Exception):
    pass


def _own_answer(d: TaskDict, wants: Wants) -> bool:
    """Whether the task dict `d`, taken alone, is up to date in doit's eyes (see above)."""
    if not d.get("actions") or d.get("file_dep") or d.get("setup") or d.get("calc_dep"):
        return False
    answers = []
    try:
        for entry in d.get("uptodate") or ():
            answer = _says_current(entry, wants)
            if answer is not None:
                answers.append(answer)
    except _Unsettled:
        return False
    except Exception:  # doit will ask again and report it
        return False
    if not answers or not all(answers):
        return False
    return all(os.path.exists(t) for t in d.get("targets") or ())


def _groups(dicts: list[TaskDict]) -> dict[str, list[str]]:
    """{basename: the task_dep of the group task doit makes of it}, as doit's loader makes it: a
    basename's subtasks form its group, unless a dict of that basename with name None is yielded,
    whose task_dep replaces what came before it and gains the subtasks yielded after it (so
    `<bench>`, yielded last, runs exactly its own task_dep)."""
    groups: dict[str, list[str]] = {}
    for d in dicts:
        if "basename" not in d or "name" not in d:
            continue
        if d["name"] is None:
            groups[d["basename"]] = list(d.get("task_dep") or ())
        else:
            groups.setdefault(d["basename"], []).append(full_name(d))
    return groups


def _reachable(
    by_name: dict[str, TaskDict], selected: list[str], groups: dict[str, list[str]]
) -> set[str]:
    """The names of the task dicts `selected` reaches: through task_dep (a group's as doit makes
    it, _groups) and file_dep (doit runs the task whose target a file_dep is first)."""
    makers = {str(t): name for name, d in by_name.items() for t in d.get("targets") or ()}
    seen: set[str] = set()
    todo = list(selected)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        d = by_name.get(name)
        if name in groups and (d is None or d.get("name") is None):
            todo += groups[name]
        elif d is not None:
            todo += list(d.get("task_dep") or ())
        if d is not None:
            todo += [makers[str(f)] for f in d.get("file_dep") or () if str(f) in makers]
    return seen & set(by_name)


def settling(
    dicts: list[TaskDict], argv: list[str], default_tasks: Sequence[str] = ()
) -> tuple[dict[str, TaskDict], set[str], Callable[[str], bool]] | None:
    """(by_name, reached, is_settled) for `doit run argv` over the task dicts `dicts` (a list):
    {name: dict}, the names of the dicts the command reaches (default_tasks: what it runs when
    it names none), and a function that says whether a task is settled (see above), each
    answer asked once. None when only doit knows what the command reaches: a pattern, a target
    file, a group that doit makes from subtasks."""
    words = command_targets(argv) or list(default_tasks)
    by_name = {full_name(d): d for d in dicts if "basename" in d}
    if any("*" in w for w in words) or not all(w in by_name for w in words):
        return None
    reached = _reachable(by_name, words, _groups(dicts))
    settled: dict[str, bool] = {}
    wants: Wants = {}

    def is_settled(name: str) -> bool:
        if name not in settled:
            d = by_name.get(name)
            settled[name] = False  # a cycle is doit's to report
            settled[name] = (
                d is not None
                and _own_answer(d, wants)
                and all(is_settled(dep) for dep in d.get("task_dep") or ())
            )
        return settled[name]

    return by_name, reached, is_settled


def own_answer(d: TaskDict, wants: Wants | None = None) -> bool:
    """Whether the task dict `d`, taken alone, is up to date (_own_answer); wants: what a
    caller asking of many tasks keeps of the functions' signatures (Wants)."""
    return _own_answer(d, {} if wants is None else wants)


def drop_settled(
    dicts: Iterable[TaskDict], argv: list[str], default_tasks: Sequence[str] = ()
) -> tuple[list[TaskDict], dict[str, list[str]]]:
    """(the task dicts doit needs for `doit run argv`, shadow): `dicts` without the settled
    tasks the command reaches (default_tasks: what it runs when it names none), and {task
    name: its task_dep as generated} for every task dropped or changed. Only the tasks the
    command reaches are asked: `doit run nginx:gold` asks nothing of the other modes."""
    dicts = list(dicts)
    found = None if any(a in ALWAYS for a in argv) else settling(dicts, argv, default_tasks)
    if found is None:
        return dicts, {}  # -a, a pattern, a target file or a group doit makes: as it is
    _, reached, is_settled = found
    named = set(command_targets(argv) or list(default_tasks))
    dropped = {name for name in reached if name not in named and is_settled(name)}
    shadow: dict[str, list[str]] = {}
    kept: list[TaskDict] = []
    for d in dicts:
        name = full_name(d) if "basename" in d else None
        deps = d.get("task_dep") or ()
        if name is not None and name not in reached:
            continue  # nothing the command runs needs it: doit need not make it
        if name is not None and name in dropped:
            shadow[name] = list(deps)
            continue
        if dropped.intersection(deps):
            if name is not None:
                shadow[name] = list(deps)
            d = dict(d, task_dep=[t for t in deps if t not in dropped])
        kept.append(d)
    return kept, shadow
