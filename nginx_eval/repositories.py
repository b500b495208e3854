"""Stage 1, repositories: one bare clone per repository, holding every pinned commit.

The clone URL comes from NGINX_EVAL_REPO_URL (see layout.repo_url). A commit that is missing after a
fetch is a user error naming the task that pins it.
"""

import os
import shutil

import git
from doit.tools import config_changed

from . import jsonio
from .errors import UserError
from .gitcmd import git_in, has_commit, isolated_env
from .layout import repo_url
from .locks import locked


def needed_commits(tasks):
    """{repo: {commit: [instance ids]}} for every commit the tasks pin."""
    need = {}
    for t in tasks:
        for repo, sha in ((t.repo, t.base_commit), (t.repo, t.fix_commit),
                          (t.test_repo, t.test_commit)):
            need.setdefault(repo, {}).setdefault(sha, []).append(t.instance_id)
    return need


def ensure_repo(layout, repo, commits):
    """Make the bare clone of `repo` hold `commits` ({sha: [instance ids]}); write its stamp."""
    path = layout.bare_repo(repo)
    url = repo_url(repo)
    with locked(layout.lock("repo-" + repo.replace("/", "+"))):
        if not (path / "HEAD").exists():
            tmp = path.with_name(path.name + f".tmp{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                git.Repo.clone_from(url, str(tmp), bare=True, env=isolated_env())
            except git.GitCommandError as e:
                raise UserError(f"cannot clone {url}: {e.stderr.strip()}", field="repo")
            os.replace(tmp, path)
        g = git_in(path)
        # Workspaces fetch single commits from this clone by hash.
        g.config("uploadpack.allowAnySHA1InWant", "true")
        missing = [c for c in commits if not has_commit(path, c)]
        if missing:
            try:
                g.fetch("--quiet", url, *missing)
            except git.GitCommandError:
                # Servers that refuse fetching by hash: bring every ref instead.
                g.fetch("--quiet", url, "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")
            missing = [c for c in missing if not has_commit(path, c)]
        if missing:
            sha = missing[0]
            raise UserError(f"commit {sha} does not exist in {repo} ({url})",
                            task=", ".join(commits[sha]), field="commit")
    jsonio.write_json(layout.repo_stamp(repo), {"repo": repo, "url": url,
                                                "commits": sorted(commits)})


def gen_tasks(ctx):
    for repo, commits in sorted(needed_commits(ctx.all_tasks).items()):
        yield {
            "basename": "repos",
            "name": repo.replace("/", "+"),
            "doc": f"bare clone of {repo} with every pinned commit",
            "actions": [(ensure_repo, [ctx.layout, repo, commits])],
            "targets": [str(ctx.layout.repo_stamp(repo))],
            "uptodate": [config_changed({"url": repo_url(repo), "commits": sorted(commits)}),
                         (layout_has_repo, [ctx.layout, repo])],
            "verbosity": 2,
        }


def layout_has_repo(layout, repo):
    return (layout.bare_repo(repo) / "HEAD").exists()


def repo_task(repo):
    return "repos:" + repo.replace("/", "+")
