"""Stage 1, repositories: one bare clone per repository, holding every pinned commit.

The clone URL comes from NGINX_EVAL_REPO_URL (see layout.repo_url). A commit that is missing after a
fetch, a test file that does not exist at its task's test commit, and an authored test file
(benchmark.py) that has the name of a file at its test commit, are user errors naming the task
and the field. Workspaces depend on the clones of both repositories, so these errors stop a run
before any agent starts.

The stamp (layout.repo_stamp) records every commit and test file a clone was found to hold, over
every command; a unit is current while that covers what the selected tasks pin (holds_all), so
another limit=, instances=, run= or URL leaves it, and what follows it, as it is.
"""

import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import inputs, jsonio, stamps
from ..core.errors import UserError, failing_on_user_error
from ..core.gitcmd import (
    GitError,
    clone_bare,
    fetch,
    lookup_objects,
    missing_commits,
    missing_files,
    set_config,
)
from ..core.layout import repo_url
from ..core.locks import locked
from ..core.stamps import TaskDict
from ..core.tasknames import REPOS, repo_subtask

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..run.benchmark import AnyTask
    from ..run.context import StageContext

# {commit: [[instance id, field], ...]}: the tasks that pin each commit of a repository.
Commits = Mapping[str, list[list[str]]]
# {"<commit>:<path>": [instance ids]}: the test files of a repository the tasks name.
Files = Mapping[str, list[str]]


def needed_commits(tasks: Iterable["AnyTask"]) -> dict[str, dict[str, list[list[str]]]]:
    """{repo: {commit: [[instance id, field], ...]}} for every commit the tasks pin."""
    need: dict[str, dict[str, list[list[str]]]] = {}
    for t in tasks:
        for repo, field in (
            (t.repo, "base_commit"),
            (t.repo, "fix_commit"),
            (t.test_repo, "test_commit"),
        ):
            if not getattr(t, field):  # a SWE-bench task pins its base commit alone
                continue
            need.setdefault(repo, {}).setdefault(getattr(t, field), []).append(
                [t.instance_id, field]
            )
    return need


def needed_files(
    tasks: Iterable["AnyTask"], authored: bool = False
) -> dict[str, dict[str, list[str]]]:
    """{test repo: {"<test commit>:<test file>": [instance ids]}}: what prove will run from the
    test repository; with `authored`, the tasks' authored files instead, which must not be
    there (the tree is the test commit's plus them: no file of the suite is replaced)."""
    need: dict[str, dict[str, list[str]]] = {}
    for t in tasks:
        own = {name for name, _ in t.authored}
        for f in t.test_files:
            if (f in own) == authored:
                need.setdefault(t.test_repo, {}).setdefault(f"{t.test_commit}:{f}", []).append(
                    t.instance_id
                )
    return need


def _pinned_by(users: Iterable[list[str]]) -> tuple[str, str]:
    tasks = ", ".join(sorted({iid for iid, _ in users}))
    fields = ", ".join(sorted({field for _, field in users}))
    return tasks, fields


def ensure_repo(
    layout: "Layout",
    repo: str,
    commits: Commits,
    files: Files | None = None,
    source: str | Path | None = None,
    inputs: str | None = None,
    authored: Files | None = None,
) -> None:
    """Make the bare clone of `repo` hold `commits` ({sha: [[instance id, field]]}) and `files`
    ({"<commit>:<path>": [instance ids]}, test files), and not `authored` (the same, authored
    test files); write its stamp (with `inputs`, the stamps.py digest of what was asked).
    source: the benchmark file, named in errors."""
    path = layout.bare_repo(repo)
    url = repo_url(repo)
    files, authored = files or {}, authored or {}
    with locked(layout.lock("repo-" + repo.replace("/", "+"))):
        existed = (path / "HEAD").exists()
        if not existed:
            tmp = path.with_name(path.name + f".tmp{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                clone_bare(url, tmp)
            except GitError as e:
                raise UserError(f"cannot clone {url}: {e.stderr.strip()}", field="repo") from None
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
            raise UserError(
                f"commit {sha} is missing from the clone of {repo}, also after "
                f"fetching it from {url}",
                file=source,
                task=tasks,
                field=fields,
            )
        absent = missing_files(path, sorted(files))
        if absent:
            commit, name = absent[0].split(":", 1)
            raise UserError(
                f"{name} does not exist in {repo} at test_commit {commit}",
                file=source,
                task=", ".join(sorted(set(files[absent[0]]))),
                field="test_files",
            )
        present = sorted(lookup_objects(path, sorted(authored)))
        if present:
            commit, name = present[0].split(":", 1)
            raise UserError(
                f"the authored test file {name} has the name of a file of {repo} at "
                f"test_commit {commit}: rename it (an authored file is added to "
                "the tree, never put in place of one)",
                file=source,
                task=", ".join(sorted(set(authored[present[0]]))),
                field="test_files",
            )
    # What the clone is known to hold: this command's commits and files and those of every
    # command before (a clone only gains commits), so that a later selection of fewer or other
    # tasks finds them recorded (holds_all) and neither the clone nor what follows it is stale.
    before = _recorded(layout, repo) if existed else {}
    jsonio.write_json(
        layout.repo_stamp(repo),
        {
            "repo": repo,
            "url": url,
            "inputs": inputs,
            "commits": sorted(set(before.get("commits", ())) | set(commits)),
            "files": sorted(set(before.get("files", ())) | set(files)),
            "authored": sorted(set(before.get("authored", ())) | set(authored)),
        },
    )


def _recorded(layout: "Layout", repo: str) -> dict[str, list[str]]:
    """The commits, test files and authored names the stamp of `repo` records as checked."""
    stamp = jsonio.read_json(layout.repo_stamp(repo))
    if not isinstance(stamp, dict):
        return {}
    return {key: [str(v) for v in stamp.get(key) or ()] for key in ("commits", "files", "authored")}


def holds_all(
    layout: "Layout",
    repo: str,
    commits: Iterable[str],
    files: Iterable[str],
    authored: Iterable[str],
) -> bool:
    """doit uptodate of repos:<owner>+<name>: the clone is there and its stamp records every
    commit and test file the selected tasks need as present, and every authored file's name as
    absent. A change of limit=, instances=, run= or NGINX_EVAL_REPO_URL that needs nothing new
    leaves it current (where to fetch from matters only for what is missing)."""
    if not layout_has_repo(layout, repo):
        return False
    known = _recorded(layout, repo)
    return (
        set(commits) <= set(known.get("commits", ()))
        and set(files) <= set(known.get("files", ()))
        and set(authored) <= set(known.get("authored", ()))
    )


def clone_task(
    layout: "Layout",
    repo: str,
    commits: Commits,
    files: Files,
    authored: Files,
    source: str | Path,
    config: Any,
    input_files: list[str],
) -> None:
    """The doit action of repos:<owner>+<name> (stamps.stage_task)."""
    ensure_repo(
        layout, repo, commits, files, source, stamps.inputs_digest(config, input_files), authored
    )


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    files, own = needed_files(ctx.tasks), needed_files(ctx.tasks, authored=True)
    benchmark = ctx.benchmark
    for repo, commits in sorted(needed_commits(ctx.tasks).items()):
        repo_files, repo_own = files.get(repo, {}), own.get(repo, {})
        fields = {
            "url": repo_url(repo),
            "commits": sorted(commits),
            "files": sorted(repo_files),
            "authored": sorted(repo_own),
        }
        config = inputs.canonical(fields, {"authored": []})  # core/inputs.py
        task = stamps.stage_task(
            basename=REPOS,
            name=repo_subtask(repo),
            doc=f"bare clone of {repo} with every pinned commit",
            action=failing_on_user_error,
            args=[clone_task, ctx.layout, repo, commits, repo_files, repo_own, benchmark.path],
            config=config,
            targets=[ctx.layout.repo_stamp(repo)],
            verbosity=2,
        )
        # Not the stamp's digest of this selection (stamps.is_current): what the clone holds.
        task["uptodate"] = [
            (
                holds_all,
                [ctx.layout, repo, sorted(commits), sorted(repo_files), sorted(repo_own)],
            )
        ]
        yield task


def layout_has_repo(layout: "Layout", repo: str) -> bool:
    return (layout.bare_repo(repo) / "HEAD").exists()
