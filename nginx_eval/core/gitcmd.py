"""Every git command the harness runs, and the one environment git runs in.

Git runs through GitPython: its command layer (``Git.execute``) for the plumbing that streams
bytes (binary diffs, names and pathspecs on stdin, `git archive` into tar, a scratch index's
variables), its object model for clones and history (``Repo.clone_from``, ``iter_commits``).
No other module of the project starts git.

The environment (git_environment) is the same for every call:

- no system configuration, no terminal prompt (a clone that wants a password fails at once), a
  fixed author and committer;
- none of the inherited variables that point git at a repository or an index (REPOSITORY_VARS):
  doit started from a git hook would otherwise work on the project's own repository. GitPython
  starts every command from os.environ and only adds to it, so they leave this process's
  environment before git runs (forget_inherited_repository);
- discovery stops at the directory git runs in (GIT_CEILING_DIRECTORIES is its parent). The cache
  and the workspaces may lie inside the project's checkout: a command in a directory that is not
  (or no longer) a repository of its own fails instead of acting on the project.

Every function names its repository: `git_dir` is a git directory (a bare clone), passed as
--git-dir; a work tree is the directory git runs in. A command that fails raises GitError with
git's message, unless failure is one of the function's answers (None, a name left out).
"""

import errno
import os
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any, BinaryIO, NamedTuple

if TYPE_CHECKING:
    from git import Git, Repo
    from git.exc import GitCommandError


# What `git rev-parse --local-env-vars` lists: variables that choose the repository, its index,
# objects or configuration. Never inherited; only the functions below set them.
REPOSITORY_VARS = frozenset(
    (
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_OBJECT_DIRECTORY",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_GRAFT_FILE",
        "GIT_INDEX_FILE",
        "GIT_NO_REPLACE_OBJECTS",
        "GIT_REPLACE_REF_BASE",
        "GIT_PREFIX",
        "GIT_INTERNAL_SUPER_PREFIX",
        "GIT_SHALLOW_FILE",
        "GIT_COMMON_DIR",
    )
)
OBJECT_TYPES = ("blob", "tree", "commit", "tag")
# Record and field separators of the log formats below: no commit subject holds them.
_RECORD, _FIELD = "\x1e", "\x1f"


class GitError(RuntimeError):
    """A git command that failed; `stderr` is git's message."""

    def __init__(
        self, args: Iterable[object], returncode: int | str | None, stderr: str | bytes
    ) -> None:
        self.stderr = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
        super().__init__(
            f"git {' '.join(map(str, args))} failed (exit code {returncode}): {self.stderr.strip()}"
        )


def isolated_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables every git command gets on top of what it inherits, and `extra`."""
    env = {
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": "nginx-eval",
        "GIT_AUTHOR_EMAIL": "nginx-eval@localhost",
        "GIT_COMMITTER_NAME": "nginx-eval",
        "GIT_COMMITTER_EMAIL": "nginx-eval@localhost",
    }
    if extra:
        env.update(extra)
    return env


def git_environment(
    cwd: str | Path | None = None,
    extra: Mapping[str, str] | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of a git command run in `cwd` (default: the current directory):
    `base` (default: os.environ) without REPOSITORY_VARS, discovery stopped at `cwd`, and
    isolated_env(extra)."""
    inherited = os.environ if base is None else base
    env = {name: value for name, value in inherited.items() if name not in REPOSITORY_VARS}
    where = os.path.abspath(os.getcwd() if cwd is None else cwd)
    env["GIT_CEILING_DIRECTORIES"] = os.path.dirname(where)
    env.update(isolated_env(extra))
    return env


def forget_inherited_repository() -> None:
    """Drop REPOSITORY_VARS from this process's environment, where GitPython would pass them on
    to git (an environment given to a command only adds to os.environ). The harness itself never
    uses them: the commands that need them (ScratchIndex) set them."""
    for name in REPOSITORY_VARS & os.environ.keys():
        os.environ.pop(name, None)


class Result(NamedTuple):
    returncode: int
    stdout: bytes
    stderr: str


class TextResult(NamedTuple):
    """A Result whose output is text (_query)."""

    returncode: int
    stdout: str
    stderr: str


@contextmanager
def _stdin(data: bytes | None) -> Iterator[BinaryIO | None]:
    """A file holding `data` for a command's stdin (GitPython's istream); None without data."""
    if data is None:
        yield None
        return
    with tempfile.TemporaryFile() as f:
        f.write(data)
        f.seek(0)
        yield f


def _gitpython() -> ModuleType:
    """GitPython, imported when the first git command runs, not with this module: its import
    would cost every doit command, `doit list` (which starts no git) included
    (docs/performance.md)."""
    import git
    import git.exc

    return git


def _command_layer(cwd: str | Path | None) -> "Git":
    """GitPython's Git running commands in the directory `cwd` (None: the current one)."""
    if cwd is not None and not os.path.isdir(cwd):
        # GitPython would run the command in the current directory instead, which may be the
        # project's own checkout.
        raise FileNotFoundError(errno.ENOENT, "no such directory", str(cwd))
    forget_inherited_repository()
    return _gitpython().Git(cwd)


def _execute(
    cwd: str | Path | None,
    argv: Sequence[str],
    env: Mapping[str, str],
    istream: BinaryIO | None = None,
    timeout: float | None = None,
) -> tuple[int, bytes, str]:
    """`argv` run by GitPython in `cwd` with the environment `env`, its standard input
    `istream`, killed after `timeout` seconds (None: no limit): (status, stdout as bytes,
    stderr as text); a failure is a status, not an exception."""
    status, out, err = _command_layer(cwd).execute(
        list(argv),
        istream=istream,
        env=env,
        kill_after_timeout=timeout,
        with_extended_output=True,
        with_exceptions=False,
        stdout_as_string=False,
        strip_newline_in_stdout=False,
    )
    return status, out, err


def _git(
    args: Iterable[object],
    cwd: str | Path | None = None,
    extra_env: Mapping[str, str] | None = None,
    input: bytes | None = None,
    check: bool = True,
) -> Result:
    """`git args` run in `cwd` with git_environment: a Result, output in bytes (stderr as text).
    check: GitError when git fails."""
    words = [str(a) for a in args]
    with _stdin(input) as istream:
        status, out, err = _execute(
            cwd, ["git", *words], git_environment(cwd, extra_env), istream=istream
        )
    if check and status != 0:
        raise GitError(words, status, err)
    return Result(status, out, err)


@contextmanager
def _repository(git_dir: str | Path) -> Iterator["Repo"]:
    """GitPython's Repo of the git directory `git_dir`, its commands in git_environment."""
    forget_inherited_repository()
    git = _gitpython()
    try:
        repo = git.Repo(git_dir)
    except (git.exc.InvalidGitRepositoryError, git.exc.NoSuchPathError) as e:
        raise GitError(["--git-dir", git_dir], 128, f"not a git repository: {e}") from None
    repo.git.update_environment(**git_environment(git_dir))
    try:
        yield repo
    except git.exc.GitCommandError as e:
        raise GitError(e.command[1:], e.status, _stderr_of(e)) from None
    finally:
        repo.close()


def _stderr_of(error: "GitCommandError") -> str:
    """git's own message in a GitCommandError (GitPython wraps it in "\n  stderr: '...'")."""
    text = str(error.stderr or "").strip()
    if text.startswith("stderr: '") and text.endswith("'"):
        text = text[len("stderr: '") : -1]
    return text


def _text(git_dir: str | Path, *args: str) -> str:
    """What `git --git-dir=<git_dir> args` prints, as text."""
    return _git([f"--git-dir={git_dir}", *args]).stdout.decode("utf-8", "replace")


# -- objects ---------------------------------------------------------------------------------------


def lookup_objects(git_dir: str | Path, names: Iterable[str]) -> dict[str, tuple[str, str]]:
    """{name: (type, id)} for each of `names` (any revision: "<commit>:<path>", "<id>^{commit}")
    that names an object, from one `cat-file --batch-check`; the others are left out."""
    names = list(names)
    if not names:
        return {}
    out = _git(
        [f"--git-dir={git_dir}", "cat-file", "--batch-check"],
        input="".join(f"{name}\n" for name in names).encode(),
    ).stdout
    found = {}
    for name, line in zip(names, out.decode("utf-8", "replace").splitlines(), strict=True):
        # "<id> <type> <size>"; otherwise "<name> missing" (or "ambiguous"), the name may hold
        # spaces.
        fields = line.split()
        if len(fields) == 3 and fields[1] in OBJECT_TYPES and fields[2].isdigit():
            found[name] = (fields[1], fields[0])
    return found


def blobs_in_tree(git_dir: str | Path, commit: str, *pathspecs: str) -> dict[str, str]:
    """{path: blob id} of the files of `commit` (under `pathspecs`), from one `ls-tree -r`."""
    out = _git(
        [f"--git-dir={git_dir}", "ls-tree", "-r", "-z", "--full-tree", commit, "--", *pathspecs]
    ).stdout
    found = {}
    for entry in out.split(b"\0"):
        if entry:
            info, _, path = entry.partition(b"\t")
            _mode, kind, oid = info.decode().split()
            if kind == "blob":
                found[path.decode("utf-8", "replace")] = oid
    return found


def read_blobs(git_dir: str | Path, ids: Iterable[str]) -> dict[str, bytes]:
    """{id: contents} of the blobs `ids`, from one `cat-file --batch`."""
    ids = list(dict.fromkeys(ids))
    if not ids:
        return {}
    out = _git(
        [f"--git-dir={git_dir}", "cat-file", "--batch"],
        input="".join(f"{oid}\n" for oid in ids).encode(),
    ).stdout
    found, at = {}, 0
    for oid in ids:
        end = out.index(b"\n", at)
        header = out[at:end].split()  # "<id> <type> <size>", or "<id> missing"
        if len(header) != 3:
            raise GitError(["cat-file", "--batch", oid], 128, f"no object {oid}")
        size = int(header[2])
        found[oid] = out[end + 1 : end + 1 + size]
        at = end + 1 + size + 1  # the contents end with a newline of their own
    return found


def missing_commits(git_dir: str | Path, commits: Sequence[str]) -> list[str]:
    """The ids of `commits` that name no commit in the repository, in one git call."""
    found = lookup_objects(git_dir, [f"{c}^{{commit}}" for c in commits])
    return [c for c in commits if f"{c}^{{commit}}" not in found]


def missing_files(git_dir: str | Path, specs: Sequence[str]) -> list[str]:
    """The "<commit>:<path>" specs that name no file in the repository, in one git call."""
    found = lookup_objects(git_dir, specs)
    return [s for s in specs if found.get(s, ("",))[0] != "blob"]


def first_parent(git_dir: str | Path, commit: str) -> str | None:
    """The id of the first parent of `commit`, or None (a root commit, or no such commit)."""
    proc = _git(
        [f"--git-dir={git_dir}", "rev-parse", "--verify", "--quiet", f"{commit}^"], check=False
    )
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def is_ancestor(git_dir: str | Path, ancestor: str, commit: str) -> bool:
    """Whether `ancestor` is `commit` or one of its ancestors (False when either is unknown)."""
    return (
        _git(
            [f"--git-dir={git_dir}", "merge-base", "--is-ancestor", ancestor, commit], check=False
        ).returncode
        == 0
    )


def file_at(git_dir: str | Path, commit: str, path: str) -> bytes | None:
    """The bytes of the file `path` at `commit`, or None (no such file, commit or repository)."""
    proc = _git([f"--git-dir={git_dir}", "cat-file", "blob", f"{commit}:{path}"], check=False)
    return proc.stdout if proc.returncode == 0 else None


def matches_in_tree(git_dir: str | Path, commit: str, pattern: str, *pathspecs: str) -> str:
    """The parts of lines of `commit`'s files (under `pathspecs`) that match the extended
    regular expression `pattern`, one a line (git grep -o); "" when none does."""
    proc = _git(
        [
            f"--git-dir={git_dir}",
            "grep",
            "-h",
            "-o",
            "-I",
            "-E",
            "-e",
            pattern,
            commit,
            "--",
            *pathspecs,
        ],
        check=False,
    )
    if proc.returncode not in (0, 1):  # 1: nothing matched
        raise GitError(["grep", pattern, commit], proc.returncode, proc.stderr)
    return proc.stdout.decode("utf-8", "replace")


def lines_in_tree(git_dir: str | Path, commit: str, lines: Sequence[str]) -> list[str]:
    """Those of `lines` (fixed strings) that some file of `commit` contains."""
    if not lines:
        return []
    args = [f"--git-dir={git_dir}", "grep", "-h", "-o", "-I", "-F"]
    for line in lines:
        args += ["-e", line]
    proc = _git(args + [commit], check=False)
    if proc.returncode not in (0, 1):
        raise GitError(["grep", "-F", commit], proc.returncode, proc.stderr)
    found = set(proc.stdout.decode("utf-8", "replace").splitlines())
    return [line for line in lines if line in found]


# -- clones and workspaces -------------------------------------------------------------------------


def clone_bare(url: str, dest: str | Path) -> None:
    """A bare clone of `url` at `dest`."""
    dest = os.path.abspath(dest)
    parent = os.path.dirname(dest)
    os.makedirs(parent, exist_ok=True)
    forget_inherited_repository()
    git = _gitpython()
    try:
        git.Repo.clone_from(url, dest, bare=True, env=git_environment(parent)).close()
    except git.exc.GitCommandError as e:
        raise GitError(e.command[1:], e.status, _stderr_of(e)) from None


def remote_problem(url: str, timeout: float = 60) -> str | None:
    """Why `git ls-remote` cannot list the branches of `url` (git's first "fatal:" line), or
    None: whether a clone of `url` would start."""
    with tempfile.TemporaryDirectory() as where:  # no repository around it to be found
        try:
            status, _, err = _execute(
                where, ["git", "ls-remote", "--heads", url], git_environment(where), timeout=timeout
            )
        except OSError as e:
            return str(e)
    if status == 0:
        return None
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith("fatal:")]
    return (fatal or lines or [f"git ls-remote exited with {status}"])[0]


def fetch(git_dir: str | Path, source: str | Path, refspecs: Iterable[str]) -> None:
    """Fetch `refspecs` (commit ids too, where `source` allows it) from `source`."""
    _git([f"--git-dir={git_dir}", "fetch", "--quiet", source, *refspecs])


def set_config(git_dir: str | Path, name: str, value: str) -> None:
    _git([f"--git-dir={git_dir}", "config", name, value])


def init_repository(path: str | Path) -> None:
    """Make the directory `path` an empty repository."""
    _git(["init", "--quiet"], cwd=path)


# Where new_repository_at writes its pack (pack-objects adds -<hash>.pack and .idx).
PACK_PREFIX = ".git/objects/pack/pack"


def new_repository_at(
    path: str | Path,
    source: str | Path,
    commit: str,
    branch: str,
    config: Mapping[str, str] | None = None,
) -> None:
    """Make the empty directory `path` a repository on `branch` at `commit` of the local
    repository `source`: it holds that commit and its ancestors only, and no tag, FETCH_HEAD or
    reflog entry says where they came from. config: {name: value} for its .git/config."""

    def run(*args: str | Path) -> None:
        _git(args, cwd=path)

    run("init", "--quiet", "--initial-branch", branch)
    sha = _git(["rev-parse", "--verify", f"{commit}^{{commit}}"], cwd=source).stdout.strip()
    # The source packs what the commit reaches, its index beside it, straight into the new
    # repository: a fetch's receiving side would hash every object of the history again
    # (index-pack), ten times the processor time of the packing (docs/performance.md).
    _git(
        [
            "pack-objects",
            "--revs",
            "--quiet",
            "--delta-base-offset",
            Path(path).absolute() / PACK_PREFIX,
        ],
        cwd=source,
        input=sha + b"\n",
    )
    run("checkout", "--quiet", "-B", branch, sha.decode())
    for name, value in (config or {}).items():
        run("config", name, value)
    (Path(path) / ".git" / "FETCH_HEAD").unlink(missing_ok=True)
    run("reflog", "expire", "--expire=now", "--all")


def extract_tree(
    git_dir: str | Path,
    commit: str,
    dest: str | Path,
    paths: Iterable[str | Path] = (),
    touch: bool = False,
) -> None:
    """Write the files of `commit` (or just `paths`) into `dest` with git archive | tar.

    touch=True gives the files the current time instead of the commit's, so make sees them as
    newer than objects built earlier.
    """
    os.makedirs(dest, exist_ok=True)
    args = [f"--git-dir={git_dir}", "archive", "--format=tar", commit, "--", *map(str, paths)]
    tar = ["tar", "-x", "-C", str(dest)] + (["--touch"] if touch else [])
    # git's stdout goes straight into tar (the process GitPython started, not a copy in Python).
    # The handle stays referenced until git has ended: dropping it kills git.
    handle = _command_layer(None).execute(["git", *args], as_process=True, env=git_environment())
    archive = handle.proc
    assert archive and archive.stdout and archive.stderr  # as_process: git is running
    try:
        untar = subprocess.run(tar, stdin=archive.stdout)
    finally:
        archive.stdout.close()
        status = archive.wait()
    # A failed archive fails tar too: git's message says why.
    if status != 0:
        raise GitError(args, status, archive.stderr.read())
    archive.stderr.close()
    untar.check_returncode()


# -- diffs -----------------------------------------------------------------------------------------


def gold_diff(git_dir: str | Path, base: str, fix: str) -> bytes:
    """The fix's patch: the diff from `base` to `fix`, binary files included, full blob ids."""
    return _git([f"--git-dir={git_dir}", "diff", "--binary", "--full-index", base, fix]).stdout


def gold_diffs(git_dir: str | Path, pairs: Sequence[tuple[str, str]]) -> list[bytes]:
    """gold_diff of each (base, fix) of `pairs` (full commit ids), in order, from one `diff-tree
    --stdin` whatever their number: a line "<fix> <base>" asks for the diff from base to fix,
    and the output gives each diff after a line holding the fix's id alone, which no line of a
    patch can be (a binary patch's lines are 1 + 5k characters long). Renames are found as
    `git diff` finds them (-M, diff.renames' default)."""
    if not pairs:
        return []
    out = _git(
        [f"--git-dir={git_dir}", "diff-tree", "-p", "-M", "--binary", "--full-index", "--always"]
        + ["--stdin"],
        input="".join(f"{fix} {base}\n" for base, fix in pairs).encode(),
    ).stdout
    diffs, at = [], 0
    for i, (_, fix) in enumerate(pairs):
        header = fix.encode() + b"\n"
        if not out.startswith(header, at):
            raise GitError(["diff-tree", "--stdin", fix], 128, f"no diff for {fix}")
        start = at + len(header)
        if i + 1 < len(pairs):
            at = out.find(b"\n" + pairs[i + 1][1].encode() + b"\n", start - 1) + 1
            if at == 0:
                raise GitError(["diff-tree", "--stdin", pairs[i + 1][1]], 128, "no diff")
        else:
            at = len(out)
        diffs.append(out[start:at])
    return diffs


class ScratchIndex:
    """A throw-away index over the directory `work_tree`, filled from a commit of the repository
    `git_dir` (scratch_index). It compares the directory with the commit without reading the
    directory's own .git (an agent may have rewritten it) and without changing the repository:
    new blobs go to a scratch object store whose alternate is the repository's. Paths are bytes,
    relative to `work_tree`."""

    def __init__(self, git_dir: str | Path, work_tree: str | Path, scratch: str) -> None:
        self.work_tree = str(work_tree)
        self._env = {
            "GIT_DIR": str(git_dir),
            "GIT_WORK_TREE": self.work_tree,
            "GIT_INDEX_FILE": os.path.join(scratch, "index"),
            "GIT_OBJECT_DIRECTORY": os.path.join(scratch, "objects"),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.path.join(str(git_dir), "objects"),
        }

    def _run(self, *args: str | bytes, input: bytes | None = None) -> bytes:
        return _git(args, cwd=self.work_tree, extra_env=self._env, input=input).stdout

    def untracked(self, *pathspecs: str | bytes, standard_excludes: bool = False) -> list[bytes]:
        """Files of the directory the index does not hold (ignored ones unless
        standard_excludes: .gitignore, info/exclude)."""
        out = self._run(
            "ls-files",
            "-z",
            "--others",
            *(["--exclude-standard"] if standard_excludes else []),
            "--",
            *pathspecs,
        )
        return [p for p in out.split(b"\0") if p]

    def modified(self, *pathspecs: str | bytes) -> list[bytes]:
        """Files whose content in the directory differs from the index (removed ones too)."""
        out = self._run("diff", "--name-only", "--no-renames", "-z", "--", *pathspecs)
        return [p for p in out.split(b"\0") if p]

    def add_tracked(self, *pathspecs: str | bytes) -> None:
        """Take the directory's version of the files the index holds (removals too)."""
        self._run("add", "-u", "--", *pathspecs)

    def add_new(self, paths: Iterable[bytes]) -> None:
        """Add the files `paths` (bytes, taken literally)."""
        self._run(
            "--literal-pathspecs",
            "add",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            input=b"\0".join(paths),
        )

    def diff(self, commit: str) -> bytes:
        """The patch from `commit` to the index, binary files included, full blob ids."""
        return self._run("diff", "--cached", "--binary", "--full-index", commit)


@contextmanager
def scratch_index(
    git_dir: str | Path, work_tree: str | Path, commit: str
) -> Iterator[ScratchIndex]:
    """A ScratchIndex holding `commit`, removed on exit; GitError when `commit` cannot be read."""
    with tempfile.TemporaryDirectory(prefix="nginx-eval-index-") as scratch:
        os.makedirs(os.path.join(scratch, "objects"))
        index = ScratchIndex(git_dir, work_tree, scratch)
        index._run("read-tree", commit)
        yield index


# -- history (scripts/mine_tasks.py) ---------------------------------------------------------------
# Only the task miner asks these. They stay here all the same: every git command is in this module,
# in its one environment.


def _count(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def commit_numstats(git_dir: str | Path, since: str) -> list[dict[str, Any]]:
    """The non-merge commits since `since`, newest first: [{"sha", "time" (committer, epoch s),
    "day" (committer date, YYYY-MM-DD), "subject", "numstat": [(added, removed, path)]}], with
    None for the lines of a binary file; a renamed file is a deletion and an addition."""
    out = _text(
        git_dir,
        "log",
        "--no-merges",
        f"--since={since}",
        "--numstat",
        "--no-renames",
        f"--format={_RECORD}%H{_FIELD}%ct{_FIELD}%cs{_FIELD}%s",
    )
    commits = []
    for record in out.split(_RECORD)[1:]:
        head, _, body = record.partition("\n")
        sha, time, day, subject = head.split(_FIELD, 3)
        numstat = [
            (_count(parts[0]), _count(parts[1]), parts[2])
            for parts in (line.split("\t") for line in body.splitlines())
            if len(parts) == 3
        ]
        commits.append(
            {"sha": sha, "time": int(time), "day": day, "subject": subject, "numstat": numstat}
        )
    return commits


def commit_patches(
    git_dir: str | Path, since: str, *pathspecs: str
) -> list[tuple[str, int, str, str]]:
    """The non-merge commits since `since` that change `pathspecs`, newest first: [(sha, time
    (committer, epoch s), subject, their patch as text)], 3 lines of context, no renames."""
    out = _text(
        git_dir,
        "log",
        "--no-merges",
        f"--since={since}",
        "-p",
        "--unified=3",
        "--no-renames",
        f"--format={_RECORD}%H{_FIELD}%ct{_FIELD}%s",
        "--",
        *pathspecs,
    )
    commits = []
    for record in out.split(_RECORD)[1:]:
        head, _, body = record.partition("\n")
        sha, time, subject = head.split(_FIELD, 2)
        commits.append((sha, int(time), subject, body))
    return commits


def commit_messages(git_dir: str | Path, since: str) -> dict[str, str]:
    """{id: its message without the subject line} of the non-merge commits since `since`."""
    out = _text(
        git_dir, "log", "--no-merges", f"--since={since}", f"--format={_RECORD}%H{_FIELD}%b"
    )
    return dict(record.split(_FIELD, 1) for record in out.split(_RECORD)[1:])


def tag_commits(git_dir: str | Path) -> dict[str, str]:
    """{tag name: id of the commit it names (an annotated tag's target)}."""
    out = _text(
        git_dir,
        "for-each-ref",
        "--format=%(refname:short) %(*objectname) %(objectname)",
        "refs/tags",
    )
    tags = {}
    for line in out.splitlines():
        parts = line.split()
        tags[parts[0]] = parts[1] if len(parts) == 3 else parts[-1]
    return tags


def tags_merged_into(git_dir: str | Path, rev: str, pattern: str) -> list[str]:
    """The names of the tags matching `pattern` whose commits `rev` contains."""
    return _text(git_dir, "tag", "--merged", rev, "--list", pattern).split()


def non_merge_commits(git_dir: str | Path, revs: Iterable[str]) -> list[str]:
    """The ids of the non-merge commits of `git rev-list revs` ("^<rev>" leaves out)."""
    with _repository(git_dir) as repo:
        # GitPython hands a list on to rev-list whole; its annotation names one revision.
        return [
            c.hexsha
            for c in repo.iter_commits(
                list(revs),  # type: ignore[arg-type]
                no_merges=True,
            )
        ]


def rev_parse(git_dir: str | Path, rev: str) -> str:
    """The id of the commit `rev` names."""
    from gitdb.exc import BadName, BadObject  # GitPython's own dependency (_gitpython)

    with _repository(git_dir) as repo:
        try:
            return repo.commit(rev).hexsha
        except (BadName, BadObject, ValueError) as e:
            raise GitError(["rev-parse", rev], 128, f"unknown revision: {e}") from None


def commit_before(git_dir: str | Path, rev: str, day: str) -> str:
    """The last commit on `rev`'s first-parent line made before `day` (YYYY-MM-DD); "" when
    there is none."""
    with _repository(git_dir) as repo:
        found = next(repo.iter_commits(rev, first_parent=True, max_count=1, before=day), None)
        return found.hexsha if found else ""


def first_parent_commits(git_dir: str | Path, old: str, new: str, *pathspecs: str) -> list[str]:
    """The commits after `old` up to `new` on new's first-parent line that change `pathspecs`,
    oldest first."""
    with _repository(git_dir) as repo:
        return [
            c.hexsha
            for c in repo.iter_commits(
                f"{old}..{new}", list(pathspecs), first_parent=True, reverse=True
            )
        ]


def committer_times(git_dir: str | Path, commits: Iterable[str]) -> dict[str, int]:
    """{commit: its committer time, epoch seconds} of those of `commits` (full ids) the
    repository holds, from two git calls whatever their number."""
    commits = list(dict.fromkeys(commits))
    known = lookup_objects(git_dir, [f"{c}^{{commit}}" for c in commits])
    present = [c for c in commits if f"{c}^{{commit}}" in known]
    if not present:
        return {}
    out = _text(git_dir, "log", "--no-walk=unsorted", f"--format=%H{_FIELD}%ct", *present)
    times = dict(line.split(_FIELD) for line in out.splitlines() if line)
    return {c: int(times[c]) for c in present if c in times}


def commit_history(git_dir: str | Path, rev: str = "HEAD") -> list[tuple[str, int, str]]:
    """[(id, committer time in epoch seconds, committer date in strict ISO 8601)] of `rev` and
    its ancestors, every commit before its parents (--topo-order)."""
    out = _text(git_dir, "log", "--topo-order", f"--format=%H{_FIELD}%ct{_FIELD}%cI", rev)
    return [
        (sha, int(time), date)
        for sha, time, date in (line.split(_FIELD) for line in out.splitlines() if line)
    ]


def commit_facts(git_dir: str | Path, commit: str) -> dict[str, str]:
    """{"day": committer date YYYY-MM-DD, "time": committer time in strict ISO 8601, "subject"}
    of `commit`."""
    out = _text(git_dir, "log", "-1", f"--format=%cs{_FIELD}%cI{_FIELD}%s", commit).strip()
    # Not strict: strip() also takes the separator before an empty subject (to Python, "\x1f" is
    # whitespace), which leaves the subject out.
    return dict(zip(("day", "time", "subject"), out.split(_FIELD, 2), strict=False))


# Queries of the build stage (build/stage.py, build/plan.py): through _git, in git_environment(),
# for their stdin and stdout.


def _query(
    git_dir: str | Path, args: Sequence[str], stdin: str | None = None, check: bool = False
) -> TextResult:
    proc = _git(
        [f"--git-dir={git_dir}", *args],
        check=check,
        input=stdin.encode() if isinstance(stdin, str) else stdin,
    )
    return TextResult(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr)


def tree_id(git_dir: str | Path, commit: str, path: str) -> str | None:
    """The id of the tree at `path` in `commit`, or None when it has none."""
    out = _query(git_dir, ["rev-parse", "--verify", "--quiet", f"{commit}:{path}"])
    return out.stdout.strip() if out.returncode == 0 else None


def tree_ids(git_dir: str | Path, commits: Iterable[str], path: str) -> dict[str, str]:
    """{commit: id of the tree at `path` in it} for those of `commits` that have one, from one
    git call."""
    try:
        found = lookup_objects(git_dir, [f"{c}:{path}" for c in commits])
    except GitError:
        return {}
    trees = {c: found.get(f"{c}:{path}", ("", "")) for c in commits}
    return {c: object_id for c, (kind, object_id) in trees.items() if kind == "tree"}


def paths_changed_between(git_dir: str | Path, pairs: Sequence[tuple[str, str]]) -> list[list[str]]:
    """[the paths that differ between a and b for (a, b) in pairs], from one git call."""
    out = _query(
        git_dir,
        ["diff-tree", "-r", "--name-only", "--always", "--stdin"],
        stdin="".join(f"{a} {b}\n" for a, b in pairs),
    ).stdout.splitlines()
    # For each pair, in order, diff-tree prints the first commit (--always: even when nothing
    # differs), then the changed paths.
    result: list[list[str]] = []
    i = 0
    for line in out:
        if i < len(pairs) and line == pairs[i][0]:
            result.append([])
            i += 1
        elif result:
            result[-1].append(line)
    return result + [[] for _ in range(len(pairs) - len(result))]


def changed_files(git_dir: str | Path, a: str, b: str) -> list[tuple[str, str]]:
    """[(status letter, path)] of the files that differ between commits a and b, a rename as a
    deletion and an addition."""
    out = _git(
        [f"--git-dir={git_dir}", "diff", "--no-renames", "--name-status", "-z", a, b]
    ).stdout.split(b"\0")
    pairs = [out[i : i + 2] for i in range(0, len(out) - 1, 2)]
    return [(status.decode(), os.fsdecode(path)) for status, path in pairs]


def apply_argv(patch_file: str | Path) -> list[str]:
    """git apply of a -p1 patch, run in the tree it patches (apply_patch)."""
    return ["git", "apply", "--whitespace=nowarn", "-p1", str(patch_file)]


def apply_patch(
    tree: str | Path, patch_file: str | Path, env: Mapping[str, str], log: IO[bytes], timeout: float
) -> tuple[int, bool]:
    """Apply the -p1 patch `patch_file` to `tree` in the build's environment `env` (build_env,
    toolchain.py: git_environment of the tree), git's output appended to the binary file `log`;
    killed after `timeout` seconds. (exit code, whether it timed out)."""
    start = time.monotonic()
    status, out, err = _execute(tree, apply_argv(patch_file), env, timeout=timeout)
    log.write(out + (err + "\n").encode("utf-8", "surrogateescape") if err else out)
    return status, status != 0 and time.monotonic() - start >= timeout
