"""Stage 1, repositories: one bare clone per repository, holding every pinned commit.

The clone URL comes from NGINX_EVAL_REPO_URL (see layout.repo_url). A commit that is missing after a
fetch, and a test file that does not exist at its task's test commit, are user errors naming the
task and the field. Workspaces depend on the clones of both repositories, so these errors stop a run
before any agent starts.
"""

import os
import shutil

from .core import jsonio, stamps
from .core.errors import UserError, failing_on_user_error
from .core.gitcmd import GitError, clone_bare, fetch, missing_commits, missing_files, set_config
from .core.layout import repo_url
from .core.locks import locked
from .core.tasknames import REPOS, repo_subtask


def needed_commits(tasks):
    """{repo: {commit: [[instance id, field], ...]}} for every commit the tasks pin."""
    need = {}
    for t in tasks:
        for repo, field in ((t.repo, "base_commit"), (t.repo, "fix_commit"),
                            (t.test_repo, "test_commit")):
            need.setdefault(repo, {}).setdefault(getattr(t, field), []).append(
                [t.instance_id, field])
    return need


def needed_files(tasks):
    """{test repo: {"<test commit>:<test file>": [instance ids]}}: what prove will run."""
    need = {}
    for t in tasks:
        for f in t.test_files:
            need.setdefault(t.test_repo, {}).setdefault(f"{t.test_commit}:{f}", []).append(
                t.instance_id)
    return need


def _pinned_by(users):
    tasks = ", ".join(sorted({iid for iid, _ in users}))
    fields = ", ".join(sorted({field for _, field in users}))
    return tasks, fields


def ensure_repo(layout, repo, commits, files=None, source=None, inputs=None):
    """Make the bare clone of `repo` hold `commits` ({sha: [[instance id, field]]}) and `files`
    ({"<commit>:<path>": [instance ids]}, test files); write its stamp (with `inputs`, the
    stamps.py digest of what was asked). source: the benchmark file, named in errors."""
    path = layout.bare_repo(repo)
    url = repo_url(repo)
    with locked(layout.lock("repo-" + repo.replace("/", "+"))):
        if not (path / "HEAD").exists():
            tmp = path.with_name(path.name + f".tmp{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                clone_bare(url, tmp)
            except GitError as e:
                raise UserError(f"cannot clone {url}: {e.stderr.strip()}", field="repo")
            os.replace(tmp, path)
        # Workspaces fetch single commits from this clone by hash.
        set_config(path, "uploadpack.allowAnySHA1InWant", "true")
        missing = missing_commits(path, list(commits))
        if missing:
            try:
                fetch(path, url, missing)
            except GitError:
                # Servers that refuse fetching by hash: bring every ref instead.
                fetch(path, url, ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"])
            missing = missing_commits(path, missing)
        if missing:
            sha = missing[0]
            tasks, fields = _pinned_by(commits[sha])
            raise UserError(f"commit {sha} is missing from the clone of {repo}, also after "
                            f"fetching it from {url}", file=source, task=tasks, field=fields)
        absent = missing_files(path, sorted(files or {}))
        if absent:
            commit, name = absent[0].split(":", 1)
            raise UserError(f"{name} does not exist in {repo} at test_commit {commit}",
                            file=source, task=", ".join(sorted(set(files[absent[0]]))),
                            field="test_files")
    jsonio.write_json(layout.repo_stamp(repo), {"repo": repo, "url": url, "inputs": inputs,
                                                "commits": sorted(commits)})


def clone_task(layout, repo, commits, files, source, config, input_files):
    """The doit action of repos:<owner>+<name> (stamps.stage_task)."""
    ensure_repo(layout, repo, commits, files, source, stamps.inputs_digest(config, input_files))


def gen_tasks(ctx):
    files = needed_files(ctx.tasks)
    for repo, commits in sorted(needed_commits(ctx.tasks).items()):
        repo_files = files.get(repo, {})
        yield stamps.stage_task(
            basename=REPOS, name=repo_subtask(repo),
            doc=f"bare clone of {repo} with every pinned commit",
            action=failing_on_user_error,
            args=[clone_task, ctx.layout, repo, commits, repo_files, ctx.benchmark.path],
            config={"url": repo_url(repo), "commits": sorted(commits),
                    "files": sorted(repo_files)},
            targets=[ctx.layout.repo_stamp(repo)],
            also_current=[(layout_has_repo, [ctx.layout, repo])], verbosity=2)


def layout_has_repo(layout, repo):
    return (layout.bare_repo(repo) / "HEAD").exists()
