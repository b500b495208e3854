"""The nginx-tests tree: one per pinned test commit, extracted once and checked before each use.

The nginx-tests tree of each pinned test commit is extracted once into the cache
(``tests:<commit>``), made read-only and shared. Before each prove it is compared with the test
commit in the bare clone (git, a scratch index); an edited, added or removed file gets the tree
extracted again and a note in prove.json (prove.py; validate.py checks it the same way).
"""

import os

from ..core import jsonio
from ..core.trees import remove_tree, set_write_bits
from ..core.gitcmd import GitError, extract_tree, scratch_index
from ..core.locks import locked
from ..core.tasknames import TESTS, repo_task, tests_subtask


def tests_tree_changes(bare, commit, tree):
    """The paths in which `tree` differs from `commit` (edited, removed or added files), from
    git with a scratch index: the bare clone's objects are the reference, not a stamp."""
    try:
        with scratch_index(bare, tree, commit) as index:
            return sorted(os.fsdecode(p) for p in set(index.modified() + index.untracked()))
    except GitError:
        return ["<the test commit cannot be read>"]


def _extract(layout, repo, commit):
    tree = layout.tests_tree(commit)
    for stale in tree.parent.glob(f".{commit}.tmp*"):
        remove_tree(stale, ignore_errors=True)
    tmp = tree.with_name(f".{commit}.tmp{os.getpid()}")
    extract_tree(layout.bare_repo(repo), commit, tmp)
    set_write_bits(tmp, False)
    remove_tree(tree, ignore_errors=True)
    os.replace(tmp, tree)
    jsonio.write_json(layout.tests_stamp(commit), {"repo": repo, "commit": commit})


def tests_tree_present(layout, commit):
    """doit uptodate of tests:<commit>: the tree and its stamp are there (a tree is never
    changed in place; verified_tests_tree checks its contents before each prove)."""
    return bool(jsonio.read_json(layout.tests_stamp(commit))) and layout.tests_tree(commit).is_dir()


def extract_tests(layout, repo, commit):
    if tests_tree_present(layout, commit):
        return
    # Runs of other names share this tree: under the lock, no process replaces a tree another
    # one is proving in, and temporary trees of killed extractions are discarded.
    with locked(layout.lock(f"tests-{commit}")):
        if tests_tree_present(layout, commit):
            return
        _extract(layout, repo, commit)


def verified_tests_tree(layout, repo, commit):
    """The test tree of `commit`, extracted again if anything changed it; [notes]."""
    extract_tests(layout, repo, commit)
    tree = layout.tests_tree(commit)
    changes = tests_tree_changes(layout.bare_repo(repo), commit, tree)
    if not changes:
        return tree, []
    with locked(layout.lock(f"tests-{commit}")):
        changes = tests_tree_changes(layout.bare_repo(repo), commit, tree)
        if changes:
            _extract(layout, repo, commit)
    if not changes:
        return tree, []
    return tree, [f"the nginx-tests tree of {commit[:12]} had been changed "
                  f"({', '.join(changes[:5])}{', ...' if len(changes) > 5 else ''}); "
                  f"extracted again"]


def gen_tasks(ctx):
    """The `tests:<commit>` tasks, one per pinned test commit of the benchmark (prove.gen_tasks
    yields them before its own)."""
    commits = {}
    for t in ctx.tasks:
        commits.setdefault(t.test_commit, t.test_repo)
    for commit, repo in sorted(commits.items()):
        yield {
            "basename": TESTS,
            "name": tests_subtask(commit),
            "doc": f"{repo} tree at {commit}",
            "actions": [(extract_tests, [ctx.layout, repo, commit])],
            "targets": [str(ctx.layout.tests_stamp(commit))],
            "task_dep": [repo_task(repo)],
            "uptodate": [(tests_tree_present, [ctx.layout, commit])],
        }
