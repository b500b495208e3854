"""The order in which builds start, and the names doit knows them by.

Policy, in one place (doit only starts tasks in the order their dependencies are listed, see
scheduling.py for how doit is made to keep that order):

- Build groups: tasks whose bases have the same auto/ tree (the build system) and configure flags.
  The tasks start one group after the other in turn, larger groups and header-changing fixes
  first (interleave_by_build_group), so that the two workers build different groups side by side
  and no long build is left for the end.
- Siblings: the first base build of a group is built clean; every other base starts from the
  published base of the commit closest to it (rebuild_cost), along a spanning tree of the group
  (sibling_tree, base_build_plan), and within a build from the closest one published by then
  (find_sibling).
- The results task's dependencies are listed in the order doit should start them (start_order).

Task names: ``base:<owner>+<name>/<commit12>-<flags8>`` per base build, shared by every mode and
run; ``build:<bench>/<mode>/<instance_id>`` per unit (the pipeline's unit name).
"""

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import jsonio
from ..core.gitcmd import changed_files, paths_changed_between, tree_id, tree_ids
from ..core.outcomes import BUILT
from ..core.records import BuildRecord
from ..core.tasknames import BUILD, GRADE, PATCH, PROVE, base_task_name, task_name
from .cache import EMPTY_PATCH_SHA, binary_path

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..run.benchmark import Task

# base_build_plan: [(base task name, a task with that base, the base task it starts from)].
BasePlan = list[tuple[str, "Task", str | None]]

# nginx's repository has no top-level configure: it runs auto/configure.
BUILD_SYSTEM_DIR = "auto"
# A changed header makes make recompile every object of its part of nginx (core, event, http...):
# its Makefile lets each object depend on all of that part's headers.
HEADER_REBUILD_COST = 50


# -- build groups ---------------------------------------------------------------------------------


def build_system_id(bare: Path, commit: str) -> str | None:
    """The git tree id of auto/: equal ids mean configure writes the same files."""
    return tree_id(bare, commit, BUILD_SYSTEM_DIR)


def build_system_ids(bare: Path, commits: Iterable[str]) -> dict[str, str]:
    """{commit: tree id of its auto/} in one git call; empty while the clone does not exist."""
    if not os.path.isdir(bare):
        return {}
    return tree_ids(bare, commits, BUILD_SYSTEM_DIR)


# A build group: (repository, the tree id of auto/ (or the commit), configure flags).
GroupKey = tuple[str, str, tuple[str, ...]]


def build_group_key(task: "Task", system_ids: Mapping[str, str]) -> GroupKey:
    return (
        task.repo,
        system_ids.get(task.base_commit, task.base_commit),
        tuple(task.configure_flags),
    )


def tasks_build_system_ids(layout: "Layout", tasks: Sequence["Task"]) -> dict[str, str]:
    ids: dict[str, str] = {}
    for repo in {t.repo for t in tasks}:
        ids.update(
            build_system_ids(
                layout.bare_repo(repo), [t.base_commit for t in tasks if t.repo == repo]
            )
        )
    return ids


def changed_paths(bare: Path, pairs: Sequence[tuple[str, str]]) -> list[list[str]] | None:
    """[the paths that differ between a and b for (a, b) in pairs], from one git call; None
    while the clone does not exist."""
    if not os.path.isdir(bare):
        return None
    if not pairs:
        return []
    return paths_changed_between(bare, pairs)


def rebuild_cost(paths: Iterable[str]) -> int:
    """About how many objects make recompiles when `paths` change."""
    return sum(HEADER_REBUILD_COST if p.endswith(".h") else 1 for p in paths)


def fixes_touching_headers(layout: "Layout", tasks: Sequence["Task"]) -> set[str]:
    """Instance ids of the tasks whose fix (base..fix) changes a header, from one git call per
    repository; empty while the clone does not exist. A changed header makes make recompile most
    of nginx (HEADER_REBUILD_COST), and patches for such a bug tend to touch the same headers:
    these builds are the long ones."""
    heavy: set[str] = set()
    for repo in {t.repo for t in tasks}:
        mine = [t for t in tasks if t.repo == repo]
        changed = changed_paths(
            layout.bare_repo(repo), [(t.base_commit, t.fix_commit) for t in mine]
        )
        if changed is None:
            continue
        heavy.update(
            t.instance_id
            for t, paths in zip(mine, changed, strict=True)
            if any(p.endswith(".h") for p in paths)
        )
    return heavy


def interleave_by_build_group(
    layout: "Layout",
    tasks: Sequence["Task"],
    system_ids: Mapping[str, str] | None = None,
    heavy: Collection[str] | None = None,
) -> list["Task"]:
    """The tasks in the order their builds should start: one task of each build group (same
    auto/ tree and flags) in turn. Base builds of one group take turns (see build.ensure_build),
    so tasks in benchmark order, where neighbours often share a group, would keep one of doit's
    workers waiting while the other builds; interleaved, the first round runs the groups' clean
    builds side by side and later rounds start from siblings.

    Longest work first, so that no long build is left for the end, when the other worker has
    nothing left to do: larger groups first (their first build unlocks the most sibling builds),
    and among groups of one size, and within a group, those whose fixes touch headers
    (fixes_touching_headers)."""
    groups: dict[GroupKey, list[Task]] = {}
    ids = tasks_build_system_ids(layout, tasks) if system_ids is None else system_ids
    heavy = fixes_touching_headers(layout, tasks) if heavy is None else heavy
    for t in tasks:
        groups.setdefault(build_group_key(t, ids), []).append(t)
    weight = lambda ts: (len(ts), sum(t.instance_id in heavy for t in ts))
    queues = [
        sorted(q, key=lambda t: t.instance_id not in heavy)
        for q in sorted(groups.values(), key=weight, reverse=True)
    ]
    ordered = []
    while queues:
        ordered += [q.pop(0) for q in queues]
        queues = [q for q in queues if q]
    return ordered


# -- siblings -------------------------------------------------------------------------------------


def find_sibling(
    layout: "Layout",
    bare: Path,
    base_commit: str,
    flags: Sequence[str],
    compiler: dict[str, str],
    system_id: str | None,
) -> BuildRecord | None:
    """A published base build of another commit with the same build system, flags and compiler,
    closest to base_commit (rebuild_cost): the starting point of a base build that skips
    configure."""
    best = None
    for record_path in layout.builds.glob("*/build.json"):
        rec = jsonio.read_json(record_path)
        if (
            not rec
            or rec.get("status") != BUILT
            or rec.get("patch_sha256") != EMPTY_PATCH_SHA
            or rec.get("configure_flags") != list(flags)
            or rec.get("compiler") != compiler
            or rec.get("build_system") != system_id
            or rec["base_commit"] == base_commit
            or not binary_path(layout, rec["key"]).is_file()
        ):
            continue
        cost = rebuild_cost(p for _, p in changed_files(bare, rec["base_commit"], base_commit))
        if best is None or cost < best[0]:
            best = (cost, rec)
    return best[1] if best else None


def sibling_tree(bare: Path, commits: list[str]) -> dict[str, str]:
    """{commit: the commit whose base build it should start from} for the base commits of one
    build group, commits[0] (built clean) the root: a minimum spanning tree by rebuild_cost,
    grown from the root (Prim), ties to the earlier commit in `commits`. Started from the root
    alone, a group whose commits fall into clusters rebuilt most of nginx once per base outside
    the root's cluster; along the tree, once per cluster. Empty while the clone does not exist."""
    pairs = [(a, b) for i, a in enumerate(commits) for b in commits[i + 1 :]]
    changed = changed_paths(bare, pairs)
    if changed is None:
        return {}
    cost = {}
    for (a, b), paths in zip(pairs, changed, strict=True):
        cost[a, b] = cost[b, a] = rebuild_cost(paths)
    parents, attached, rest = {}, commits[:1], commits[1:]
    while rest:
        _, i, parent = min((cost[a, b], i, a) for i, b in enumerate(rest) for a in attached)
        parents[rest[i]] = parent
        attached.append(rest.pop(i))
    return parents


def base_build_plan(
    layout: "Layout",
    tasks: Sequence["Task"],
    ids: Mapping[str, str] | None = None,
    build_order: Sequence["Task"] | None = None,
) -> BasePlan:
    """[(base task name, a task with that base, name of the base task it starts from or None)]
    in build order. The first base of a group (same auto/ tree and flags) is built clean; every
    other waits, as a doit dependency, for its parent in sibling_tree and then starts from it
    (or from a closer sibling published by then), side by side with other groups' builds: a
    worker never sits on the group's lock while another group's clean build could run. Without
    a clone yet (the first run), groups are unknown: every base is its own group, and the lock
    in build.ensure_build still makes the group's first build go first. ids, build_order: the
    tasks' build system ids and interleave_by_build_group's order, if known."""
    ids = tasks_build_system_ids(layout, tasks) if ids is None else ids
    order: list[str] = []
    groups: dict[GroupKey, list[str]] = {}
    task_of: dict[str, Task] = {}
    for t in build_order or interleave_by_build_group(layout, tasks, ids):
        name = base_task_name(t)
        if name not in task_of:
            task_of[name] = t
            order.append(name)
            groups.setdefault(build_group_key(t, ids), []).append(name)
    parent_of = {}
    for names in groups.values():
        bare = layout.bare_repo(task_of[names[0]].repo)
        by_commit = {task_of[n].base_commit: n for n in names}
        for commit, parent in sibling_tree(bare, list(by_commit)).items():
            parent_of[by_commit[commit]] = by_commit[parent]
    return [(name, task_of[name], parent_of.get(name)) for name in order]


# -- the order doit starts a mode's tasks in ------------------------------------------------------


def start_order(
    tests_tasks: Iterable[str], units: Sequence[str], plan: BasePlan, ids: Collection[str]
) -> list[str]:
    """The results task's dependencies, in the order doit should start them: `tests_tasks` (the
    test-tree tasks), then per stage the `units` (unit names, in build order), with the base
    builds of `plan` (base_build_plan) that tasks of `ids` wait for.

    doit explores this list breadth first (a task's dependencies after the task) and stops
    exploring while a task that could run waits for a free worker; a task it has not explored
    yet cannot start when its dependencies are done. So the tasks that only wait come first:
    test trees (milliseconds each), grades, proves, patches and the base builds that start from
    a sibling (they wait for it). The builds come last: through them doit reaches
    the clean base builds, which can start at once and hold it there. Within a stage, build
    order. doit adds a task for each file_dep too, but in the order of a set, which changes from
    one process to the next; listed here, they keep this order.
    """
    waiting_bases = [name for name, task, parent in plan if parent and task.instance_id in ids]
    return (
        list(tests_tasks)
        + [task_name(stage, u) for stage in (GRADE, PROVE, PATCH) for u in units]
        + waiting_bases
        + [task_name(BUILD, u) for u in units]
    )


# -- kept in the cache ----------------------------------------------------------------------------


def _plans_key(layout: "Layout", tasks: Sequence["Task"]) -> str | None:
    """The key of the plans of `tasks` in the cache, or None while a clone lacks one of their
    commits (its repos: task has not fetched them yet): git would answer for part of them."""
    for repo in {t.repo for t in tasks}:
        fetched = set((jsonio.read_json(layout.repo_stamp(repo)) or {}).get("commits") or ())
        wanted = {c for t in tasks if t.repo == repo for c in (t.base_commit, t.fix_commit)}
        if not wanted <= fetched or not os.path.isdir(layout.bare_repo(repo)):
            return None
    return jsonio.digest(
        {
            "planner": jsonio.file_digest(__file__),
            "tasks": [
                [t.instance_id, t.repo, t.base_commit, t.fix_commit, list(t.configure_flags)]
                for t in tasks
            ],
        }
    )


def build_plans(
    layout: "Layout", tasks: Sequence["Task"], keep: bool = True
) -> tuple[list["Task"], BasePlan]:
    """(interleave_by_build_group(layout, tasks), base_build_plan(layout, tasks)), kept in the
    cache (layout.build_plans) once the clones hold every commit of `tasks`: both follow from
    those commits alone (and this module's code, in the key), and asking git for them would
    cost every doit command on the shipped benchmark (docs/performance.md). keep=False (a dry
    run, which writes nothing): made or read, never written."""
    key = _plans_key(layout, tasks)
    by_id = {t.instance_id: t for t in tasks}
    kept = jsonio.read_json(layout.build_plans(key)) if key else None
    if kept:
        try:
            return (
                [by_id[i] for i in kept["order"]],
                [(name, by_id[i], parent) for name, i, parent in kept["plan"]],
            )
        except (KeyError, TypeError, ValueError):
            pass  # not what this code writes: made again below
    ids = tasks_build_system_ids(layout, tasks)
    order = interleave_by_build_group(layout, tasks, ids)
    plan = base_build_plan(layout, tasks, ids, order)
    if key and keep:
        jsonio.write_json(
            layout.build_plans(key),
            {
                "order": [t.instance_id for t in order],
                "plan": [[name, t.instance_id, parent] for name, t, parent in plan],
            },
        )
    return order, plan
