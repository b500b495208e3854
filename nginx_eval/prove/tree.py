"""The nginx-tests tree: one per pinned test commit, extracted once and checked before each use.

The nginx-tests tree of each pinned test commit is extracted once into the cache
(``tests:<commit>``), made read-only and shared. Before each prove it is checked; an edited, added
or removed file gets the tree extracted again and a note in prove.json (prove/stage.py; checks/validate.py
checks it the same way). The check compares the tree with the test commit in the bare clone (git,
a scratch index), once: its stamp (``tests/<commit>.json``) then records each file's size,
mtime, ctime and inode, and a tree whose files all still have those is unchanged without git.
Writing a file changes its ctime, which nobody can set back (the binaries' quick check in
build/cache.py rests on the same); git hashed every file of the tree, 0.12 to 0.16 s of CPU
before every prove.

``tests/<commit>.json``: {"repo", "commit", "files": {path: [size, mtime_ns, ctime_ns, inode]}}
("files" missing: not checked by git since it was extracted).
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


def _file_stats(tree):
    """{path relative to tree: [size, mtime_ns, ctime_ns, inode]} of every file and link."""
    stats = {}
    for dirpath, _, filenames in os.walk(tree):
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            stats[os.path.relpath(path, tree)] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                                                  st.st_ino]
    return stats


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


def _unchanged_since_checked(layout, commit, tree):
    """The tree's files are those git last found equal to the commit, with the same stat."""
    files = (jsonio.read_json(layout.tests_stamp(commit)) or {}).get("files")
    return files is not None and _file_stats(tree) == files


def _record_checked(layout, repo, commit, tree):
    """After git found the tree equal to the commit (under the tree's lock): its files' stat."""
    jsonio.write_json(layout.tests_stamp(commit),
                      {"repo": repo, "commit": commit, "files": _file_stats(tree)})


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
    if _unchanged_since_checked(layout, commit, tree):
        return tree, []
    with locked(layout.lock(f"tests-{commit}")):
        if _unchanged_since_checked(layout, commit, tree):
            return tree, []         # another prove checked it meanwhile
        changes = tests_tree_changes(layout.bare_repo(repo), commit, tree)
        if changes:
            _extract(layout, repo, commit)
        _record_checked(layout, repo, commit, tree)
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
