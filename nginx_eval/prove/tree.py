"""The nginx-tests tree: one per pinned test commit, extracted once and checked before each use.

The nginx-tests tree of each pinned test commit is extracted once into the cache
(``tests:<commit>``), made read-only and shared. Before each prove it is checked; an edited, added
or removed file gets the tree extracted again and a note in prove.json (prove/stage.py;
checks/validate.py checks it the same way). The check compares the tree with the test commit in
the bare clone (git, a scratch index), once: its stamp (``tests/<tree>.json``) then records each
file's size, mtime, ctime and inode, and a tree whose files all still have those is unchanged
without git, which would hash every file of the tree before every prove (docs/performance.md).
Writing a file changes its ctime, which nobody can set back (the binaries' quick check in
build/cache.py rests on the same).

An authored task's tree (run/benchmark.py) is the tree of its test commit plus its authored
files, a tree of its own named by ``Task.tests_tree_id`` (``tests:<commit>+<digest>``): the check
accepts those files, when their contents are the task's, and nothing else.

``tests/<tree>.json``: {"repo", "commit", "authored": {name: digest} (authored trees only),
"files": {path: [size, mtime_ns, ctime_ns, inode]}} ("files" missing: not checked by git since
it was extracted).
"""

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import inputs, jsonio
from ..core.gitcmd import GitError, extract_tree, scratch_index
from ..core.locks import locked
from ..core.stamps import TaskDict
from ..core.tasknames import TESTS, repo_task, tests_subtask
from ..core.trees import file_stats, remove_tree, set_write_bits
from ..run.benchmark import Task

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..run.context import StageContext

# An authored task's own test files: ((name, contents), ...) (run/benchmark.py: Task.authored).
Authored = Sequence[tuple[str, bytes]]


def tests_tree_changes(
    bare: Path, commit: str, tree: str | Path, authored: Authored = ()
) -> list[str]:
    """The paths in which `tree` differs from `commit` plus the `authored` files ((name, bytes)):
    edited, removed or added files, from git with a scratch index (the bare clone's objects are
    the reference, not a stamp) and, for the authored files, their contents."""
    own = dict(authored)
    try:
        with scratch_index(bare, tree, commit) as index:
            changed = {os.fsdecode(p) for p in set(index.modified() + index.untracked())}
    except GitError:
        return ["<the test commit cannot be read>"]
    changed -= set(own)
    for name, data in own.items():
        path = os.path.join(tree, name)
        try:
            with open(path, "rb") as f:
                same = f.read() == data
        except OSError:
            same = False
        if not same:
            changed.add(name)
    return sorted(changed)


def _stamp(repo: str, commit: str, authored: Authored) -> dict[str, Any]:
    authored_digests = {name: jsonio.digest(data) for name, data in authored}
    fields = {"repo": repo, "commit": commit, "authored": authored_digests}
    return inputs.canonical(fields, {"authored": {}})  # core/inputs.py


def _extract(
    layout: "Layout", repo: str, commit: str, authored: Authored = (), tree_id: str | None = None
) -> None:
    tree_id = tree_id or commit
    tree = layout.tests_tree(tree_id)
    for stale in tree.parent.glob(f".{tree_id}.tmp*"):
        remove_tree(stale, ignore_errors=True)
    tmp = tree.with_name(f".{tree_id}.tmp{os.getpid()}")
    extract_tree(layout.bare_repo(repo), commit, tmp)
    for name, data in authored:
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    set_write_bits(tmp, False)
    remove_tree(tree, ignore_errors=True)
    os.replace(tmp, tree)
    jsonio.write_json(layout.tests_stamp(tree_id), _stamp(repo, commit, authored))


def _unchanged_since_checked(layout: "Layout", tree_id: str, tree: Path) -> bool:
    """The tree's files are those git last found equal to the commit, with the same stat."""
    files = (jsonio.read_json(layout.tests_stamp(tree_id)) or {}).get("files")
    return files is not None and file_stats(tree) == files


def _record_checked(
    layout: "Layout", repo: str, commit: str, authored: Authored, tree_id: str, tree: Path
) -> None:
    """After git found the tree equal to the commit (under the tree's lock): its files' stat."""
    jsonio.write_json(
        layout.tests_stamp(tree_id), dict(_stamp(repo, commit, authored), files=file_stats(tree))
    )


def tests_tree_present(layout: "Layout", tree_id: str) -> bool:
    """doit uptodate of tests:<tree>: the tree and its stamp are there (a tree is never
    changed in place; verified_tests_tree checks its contents before each prove)."""
    return (
        bool(jsonio.read_json(layout.tests_stamp(tree_id))) and layout.tests_tree(tree_id).is_dir()
    )


def extract_tests(
    layout: "Layout", repo: str, commit: str, authored: Authored = (), tree_id: str | None = None
) -> None:
    tree_id = tree_id or commit
    if tests_tree_present(layout, tree_id):
        return
    # Runs of other names share this tree: under the lock, no process replaces a tree another
    # one is proving in, and temporary trees of killed extractions are discarded.
    with locked(layout.lock(f"tests-{tree_id}")):
        if tests_tree_present(layout, tree_id):
            return
        _extract(layout, repo, commit, authored, tree_id)


def verified_tests_tree(
    layout: "Layout", repo: str, commit: str, authored: Authored = (), tree_id: str | None = None
) -> tuple[Path, list[str]]:
    """The test tree of `commit` (with an authored task's files: `authored` and its `tree_id`,
    task_tests_tree), extracted again if anything changed it; [notes]."""
    tree_id = tree_id or commit
    extract_tests(layout, repo, commit, authored, tree_id)
    tree = layout.tests_tree(tree_id)
    if _unchanged_since_checked(layout, tree_id, tree):
        return tree, []
    with locked(layout.lock(f"tests-{tree_id}")):
        if _unchanged_since_checked(layout, tree_id, tree):
            return tree, []  # another prove checked it meanwhile
        changes = tests_tree_changes(layout.bare_repo(repo), commit, tree, authored)
        if changes:
            _extract(layout, repo, commit, authored, tree_id)
        _record_checked(layout, repo, commit, authored, tree_id, tree)
    if not changes:
        return tree, []
    return tree, [
        f"the test tree {tree_id[:12]}{' (with authored files)' if authored else ''}"
        f" had been changed ({', '.join(changes[:5])}"
        f"{', ...' if len(changes) > 5 else ''}); extracted again"
    ]


def task_tests_tree(layout: "Layout", task: "Task") -> tuple[Path, list[str]]:
    """verified_tests_tree of a task's own test tree (its authored files with it)."""
    return verified_tests_tree(
        layout, task.test_repo, task.test_commit, task.authored, task.tests_tree_id
    )


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    """The `tests:<tree>` tasks, one per test tree of the benchmark: per pinned test commit,
    and per set of authored files (prove/stage.gen_tasks yields them before its own)."""
    trees: dict[str, Task] = {}
    for t in ctx.tasks:
        if isinstance(t, Task):  # a SWE-bench task has no tree here (pipeline.STAGES_OF_KIND)
            trees.setdefault(t.tests_tree_id, t)
    for tree_id, t in sorted(trees.items()):
        what = f" with {', '.join(n for n, _ in t.authored)}" if t.authored else ""
        yield {
            "basename": TESTS,
            "name": tests_subtask(tree_id),
            "doc": f"{t.test_repo} tree at {t.test_commit}{what}",
            "actions": [
                (extract_tests, [ctx.layout, t.test_repo, t.test_commit, t.authored, tree_id])
            ],
            "targets": [str(ctx.layout.tests_stamp(tree_id))],
            "task_dep": [repo_task(t.test_repo)],
            "uptodate": [(tests_tree_present, [ctx.layout, tree_id])],
        }
