"""Stage 2b, the agent's tests: nginx-tests as of the base commit, read-only, beside the workspace.

A mode with ``tests = "base"`` (run/modes.py) gives its agent the tree of the last commit of the
task's test repository whose committer date is not after the base commit's (``last_commit_by``):
nothing nginx-tests learnt later, so none of the task's new assertions, unless they landed
before the fix (nginx-tests sometimes adds a test under a TODO guard first; the benchmark card
counts those tasks). An authored task gets the same: nginx-tests as of its base.

The tree is extracted once per nginx-tests commit into the cache (``Layout.agent_tests_tree``),
shared by every mode and task that has it, and never the grading tree (prove/tree.py), so nothing
an agent did to it reaches a verdict. It has no .git (git archive), so no later history can be read
from it; its write bits are off, and in the sandbox it is readable and not writable while the
rest of the cache stays hidden (agent/sandbox.srt_settings). Its path lies outside the
workspace, so it never enters the patch.

Stamp ``agent-tests/<commit>.json``: {"repo", "commit", "date" (the commit's committer date),
"files": {path: [size, mtime_ns, ctime_ns, inode]}}, recorded when the tree is extracted. Before
each agent attempt the tree's files are compared with it (``verified_tree``) and a tree that
differs is extracted again: writing a file changes its ctime, which nobody can set back.
"""

import os
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path

from ..core import jsonio
from ..core.errors import UserError
from ..core.gitcmd import commit_history, committer_times, extract_tree, file_at
from ..core.layout import Layout
from ..core.locks import locked
from ..core.records import TestsTree
from ..core.trees import file_stats, remove_tree, set_write_bits
from ..run.benchmark import AnyTask, Task


def last_commit_by(history: list[tuple[str, int, str]], moment: int) -> tuple[str, int, str] | None:
    """The (id, time, date) of `history` (gitcmd.commit_history: descendants first) with the
    latest committer time not after `moment` (epoch seconds), the first of equals; None if all
    are later."""
    best = None
    for entry in history:
        if entry[1] <= moment and (best is None or entry[1] > best[1]):
            best = entry
    return best


def trees_as_of(layout: Layout, tasks: Iterable[AnyTask]) -> dict[str, TestsTree | None]:
    """{instance id: {"repo", "commit", "date"}, the tree of its test repository as of its base
    commit, or None while a bare clone (or the base commit in it) is missing}: two git calls per
    repository, whatever the number of tasks. UserError for a task whose test repository has no
    commit that early."""
    tasks = list(tasks)
    found: dict[str, TestsTree | None] = {}
    times: dict[str, dict[str, int]] = {}
    histories: dict[str, list[tuple[str, int, str]]] = {}
    for t in tasks:
        code, tests = layout.bare_repo(t.repo), layout.bare_repo(t.test_repo)
        found[t.instance_id] = None
        if not (code / "HEAD").exists() or not (tests / "HEAD").exists():
            continue
        if t.repo not in times:
            times[t.repo] = committer_times(
                code, [u.base_commit for u in tasks if u.repo == t.repo]
            )
        if t.test_repo not in histories:
            histories[t.test_repo] = commit_history(tests)
        moment = times[t.repo].get(t.base_commit)
        if moment is None:
            continue
        last = last_commit_by(histories[t.test_repo], moment)
        if last is None:
            raise UserError(
                f"{t.test_repo} has no commit made on or before the committer date "
                "of base_commit: no tests tree as of the base",
                task=t.instance_id,
                field="base_commit",
            )
        found[t.instance_id] = TestsTree(repo=t.test_repo, commit=last[0], date=last[2])
    return found


def as_of(layout: Layout, task: AnyTask) -> TestsTree | None:
    """trees_as_of of one task."""
    return trees_as_of(layout, [task])[task.instance_id]


def needed(tree: TestsTree | None, task: AnyTask) -> TestsTree:
    """`tree` (a trees_as_of value of `task`); UserError when it is None: an agent of a mode
    with `tests` never starts without its tree."""
    if tree is None:
        raise UserError(
            f"no tests tree as of base_commit {task.base_commit}: the clones of "
            f"{task.repo} and {task.test_repo} must hold it",
            task=task.instance_id,
            field="tests",
        )
    return tree


def tree_present(layout: Layout, tree: TestsTree) -> bool:
    """The tree of `tree` (a trees_as_of value) and its stamp are there (the stamp is written
    once the tree is whole; verified_tree checks its files before each attempt)."""
    return (
        layout.agent_tests_stamp(tree["commit"]).exists()
        and layout.agent_tests_tree(tree["commit"]).is_dir()
    )


def _extract(layout: Layout, tree: TestsTree) -> None:
    path = layout.agent_tests_tree(tree["commit"])
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    for stale in path.parent.glob(f".{path.name}.tmp*"):
        remove_tree(stale, ignore_errors=True)
    extract_tree(layout.bare_repo(tree["repo"]), tree["commit"], tmp)
    set_write_bits(tmp, False)
    # No stamp while no whole tree is there (tree_present).
    layout.agent_tests_stamp(tree["commit"]).unlink(missing_ok=True)
    remove_tree(path, ignore_errors=True)
    os.replace(tmp, path)
    jsonio.write_json(layout.agent_tests_stamp(tree["commit"]), dict(tree, files=file_stats(path)))


def ensure_tree(layout: Layout, tree: TestsTree) -> Path:
    """The tree of `tree` (a trees_as_of value), extracted unless it is there."""
    path = layout.agent_tests_tree(tree["commit"])
    if not tree_present(layout, tree):
        with locked(layout.lock(f"agent-tests-{tree['commit']}")):
            if not tree_present(layout, tree):
                _extract(layout, tree)
    return path


def verified_tree(layout: Layout, tree: TestsTree) -> tuple[Path, list[str]]:
    """(path, [notes]): the tree of `tree`, extracted again if any file of it changed since it
    was extracted (a note says which)."""
    path = ensure_tree(layout, tree)
    stamp = layout.agent_tests_stamp(tree["commit"])
    if file_stats(path) == (jsonio.read_json(stamp) or {}).get("files"):
        return path, []
    with locked(layout.lock(f"agent-tests-{tree['commit']}")):
        files = (jsonio.read_json(stamp) or {}).get("files") or {}
        now = file_stats(path)
        changed = sorted(p for p in set(files) | set(now) if files.get(p) != now.get(p))
        if not changed:
            return path, []  # extracted again meanwhile
        _extract(layout, tree)
    return path, [
        f"the agent's tests tree {tree['commit'][:12]} had been changed "
        f"({', '.join(changed[:5])}{', ...' if len(changed) > 5 else ''}); "
        "extracted again"
    ]


# The assertions Test::Nginx adds at the end of every file (the library names them); the lines
# of a TODO guard, which nginx-tests adds to or takes from a test as fixes are released.
LIBRARY = "lib/Test/Nginx.pm"
LIBRARY_ASSERTIONS = ("no alerts", "no sanitizer errors")
TODO_GUARD = re.compile(r"TODO|todo_|^\s*\}\s*$")


def _lines(text: str, keep: Callable[[str], bool] = lambda line: True) -> list[str]:
    return [line.strip() for line in text.splitlines() if keep(line)]


def assertion_stands(
    ident: str, before: str | None, graded: str | None, library: str | None = None
) -> bool:
    """Whether the assertion `ident` ("<file>:<n> <description>") already stands where its
    file reads `before` (None: no such file) and the library `library`, for a task graded with
    the file `graded`: every line of `graded` that holds the description as a Perl string
    ('...' or "...") is in `before`, unchanged but for the spaces around it; for an assertion
    the library adds to every file, the library names it and `before` is `graded` apart from
    TODO guards. A description made at run time or written with escapes is not found: a task
    counted is one whose graded assertions an agent can read as they grade it, and the count a
    lower bound."""
    _, _, description = ident.partition(" ")
    if before is None or graded is None or not description:
        return False
    if description in LIBRARY_ASSERTIONS:
        unguarded = lambda line: not TODO_GUARD.search(line)
        return f"'{description}'" in (library or "") and _lines(before, unguarded) == _lines(
            graded, unguarded
        )
    held = lambda line: any(f"{q}{description}{q}" in line for q in "'\"")
    lines = set(_lines(graded, held))
    return bool(lines) and lines <= set(_lines(before))


def already_standing(layout: Layout, tasks: Iterable[Task]) -> dict[str, bool | None]:
    """{instance id: whether every fail_to_pass assertion of the task already stands in its
    tests tree as of the base (assertion_stands), or None while the clones are missing}, read
    from the bare clone of the test repository without running anything."""
    tasks = list(tasks)
    trees = trees_as_of(layout, tasks)
    standing: dict[str, bool | None] = {}
    for t in tasks:
        tree = trees[t.instance_id]
        if tree is None:
            standing[t.instance_id] = None
            continue
        bare, own = layout.bare_repo(tree["repo"]), dict(t.authored)
        standing[t.instance_id] = all(
            assertion_stands(
                ident,
                _read(bare, tree["commit"], name),
                _graded(bare, t.test_commit, own, name),
                _read(bare, tree["commit"], LIBRARY),
            )
            for ident in t.fail_to_pass
            for name in [ident.split(":", 1)[0]]
        )
    return standing


def _graded(bare: Path, test_commit: str, own: dict[str, bytes], name: str) -> str | None:
    """The test file `name` a task is graded with: the task's own copy (Task.authored), else the
    file as of its test commit."""
    if name in own:
        return own[name].decode("utf-8", "replace")
    return _read(bare, test_commit, name)


@lru_cache(maxsize=1024)
def _read(bare: Path, commit: str, path: str) -> str | None:
    data = file_at(bare, commit, path)
    return None if data is None else data.decode("utf-8", "replace")
