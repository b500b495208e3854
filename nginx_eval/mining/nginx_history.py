"""Reading the nginx history: the commits that may be a fix, and what each one adds.

``NginxHistory`` holds the code commits since a date (``{sha, date, day, subject, files, add,
rem, told}``: ``told`` the topic words of its message), its release tags and the commits of
each release window (``version_window``: from the previous mainline release to ``release-X.Y.Z``,
or HEAD when X.Y.Z is not released yet), and the directives and variables each commit adds to
nginx's tables (``names_added``) with when each name first came. ``candidates`` gives the
commits that may be the fix a test signal (nginx_eval/mining/suite_history.py) tests."""

import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from nginx_eval.core import gitcmd
from nginx_eval.mining.topics import words

RELEASE_RE = re.compile(r"^release-(\d+)\.(\d+)\.(\d+)$")
# Directives and variables a patch adds to nginx's tables; every name nginx's tables hold.
DIRECTIVE_RE = re.compile(r'^\+\s*\{\s*ngx_string\("([a-z][a-z0-9_]*)"\),\s*$')
CONF_FLAGS_RE = re.compile(r"^\+\s*NGX_\w*CONF")
VARIABLE_RE = re.compile(r'^\+\s*\{\s*ngx_string\("([a-z][a-z0-9_]*)"\),\s*NULL,')
NAME_RE = re.compile(r'ngx_string\("([a-z][a-z0-9_]*)"\)')


# An nginx commit as nginx_commits reads it ({sha, date, day, subject, files, add, rem}, and
# "told", the words of its message, in NginxHistory).
Commit = dict[str, Any]


def vkey(v: str) -> tuple[int, ...]:
    """ "X.Y.Z" as a tuple of numbers, to order versions by."""
    return tuple(int(x) for x in v.split("."))


def nginx_commits(git_dir: str | Path, since: str) -> list[Commit]:
    """[{sha, date, day, subject, files, add, rem}] for non-merge commits since `since` (day:
    the committer date, YYYY-MM-DD, a task's fix_date)."""
    return [
        {
            "sha": c["sha"],
            "date": c["time"],
            "day": c["day"],
            "subject": c["subject"],
            "files": [path for _, _, path in c["numstat"]],
            "add": sum(added or 0 for added, _, _ in c["numstat"]),
            "rem": sum(removed or 0 for _, removed, _ in c["numstat"]),
        }
        for c in gitcmd.commit_numstats(git_dir, since)
    ]


def is_code_commit(c: Mapping[str, Any]) -> bool:
    s = c["subject"].lower()
    if re.match(
        r"^(nginx-[\d.]+-release|version bump|year \d+|style|updated (openssl|pcre|zlib))", s
    ):
        return False
    if s.startswith(("gh:", "misc:", "contrib:", "readme", "win32:", "configure:")):
        return False
    code = [f for f in c["files"] if f.startswith("src/") and f.endswith((".c", ".h"))]
    if not code or code == ["src/core/nginx.h"]:
        return False
    return True


def code_files(c: Mapping[str, Any]) -> set[str]:
    """The C sources a commit touches, nginx.h (the version) left out."""
    return {
        f
        for f in c["files"]
        if f.startswith("src/") and f.endswith((".c", ".h")) and f != "src/core/nginx.h"
    }


def release_tags(git_dir: str | Path) -> dict[str, str]:
    """{"X.Y.Z": the commit of tag release-X.Y.Z}."""
    tags: dict[str, str] = {}
    for name, commit in gitcmd.tag_commits(git_dir).items():
        m = RELEASE_RE.match(name)
        if m:
            tags[".".join(m.groups())] = commit
    return tags


def version_window(
    git_dir: str | Path, tags: Mapping[str, str], version: str, cache: dict[str, set[str]]
) -> set[str]:
    """Set of nginx commit shas expected to contain the fix for `version`."""
    if version in cache:
        return cache[version]
    shas: set[str] = set()
    try:
        if version in tags:
            merged = [
                t[len("release-") :]
                for t in gitcmd.tags_merged_into(git_dir, f"release-{version}", "release-*")
            ]
            older = sorted(
                (v for v in merged if RELEASE_RE.match("release-" + v) and vkey(v) < vkey(version)),
                key=vkey,
            )
            rng = [f"release-{version}"] + ([f"^release-{older[-1]}"] if older else [])
        else:
            reach = [
                t[len("release-") :] for t in gitcmd.tags_merged_into(git_dir, "HEAD", "release-*")
            ]
            older = sorted((v for v in reach if vkey(v) < vkey(version)), key=vkey)
            rng = ["HEAD"] + ([f"^release-{older[-1]}"] if older else [])
        shas = set(gitcmd.non_merge_commits(git_dir, rng))
    except gitcmd.GitError:
        shas = set()
    cache[version] = shas
    return shas


def names_added(patch: str) -> set[str]:
    """The directives and variables a patch adds to nginx's command and variable tables."""
    names: set[str] = set()
    previous = ""
    for line in patch.splitlines():
        m = DIRECTIVE_RE.match(previous)
        if m and CONF_FLAGS_RE.match(line):
            names.add(m.group(1))
        m = VARIABLE_RE.match(line)
        if m:
            names.add(m.group(1))
        previous = line
    return names


def introduced_names(git_dir: str | Path, since: str, oldest: str) -> dict[str, set[str]]:
    """{commit: the directive and variable names it adds} for the commits since `since` that
    add names nginx did not have at commit `oldest` (an http directive that a later commit
    adds to stream too is that commit's as well)."""
    known = set(NAME_RE.findall(gitcmd.matches_in_tree(git_dir, oldest, NAME_RE.pattern, "src")))
    introduced: dict[str, set[str]] = {}
    for sha, _, _, patch in gitcmd.commit_patches(git_dir, since, "src/*.c"):
        new = names_added(patch) - known
        if new:
            introduced[sha] = new
    return introduced


def first_added(
    introduced: Mapping[str, set[str]], commits: Iterable[Mapping[str, Any]]
) -> dict[str, float]:
    """{name: the time of the first of `commits` to add it} for the names of `introduced`."""
    times = {c["sha"]: c["date"] for c in commits}
    first: dict[str, float] = {}
    for sha, names in introduced.items():
        for name in names:
            first[name] = min(times.get(sha, math.inf), first.get(name, math.inf))
    return first


def referenced(sig: Mapping[str, Any], by_prefix: Mapping[str, Commit]) -> list[Commit]:
    """nginx commits named by abbreviated hash in the test commit (subject or added lines)."""
    out: list[Commit] = []
    for r in sig.get("refs", ()):
        c = by_prefix.get(r[:9])
        if c and c["sha"].startswith(r):
            out.append(c)
    return out


class NginxHistory:
    """The nginx side of the search: its code commits, by id and by abbreviated id, each with
    the words of its message ("told"); its release tags, with the commits of each release
    window asked of git once; the directives and variables each commit adds, and when each
    name first came."""

    def __init__(self, git_dir: str | Path, since: str) -> None:
        self.git_dir = git_dir
        commits = nginx_commits(git_dir, since)
        self.commits = [c for c in commits if is_code_commit(c)]
        self.by_sha = {c["sha"]: c for c in self.commits}
        self.by_prefix = {c["sha"][:9]: c for c in self.commits}
        self.tags = release_tags(git_dir)
        self._windows: dict[str, set[str]] = {}
        self.introduced = introduced_names(git_dir, since, commits[-1]["sha"]) if commits else {}
        messages = gitcmd.commit_messages(git_dir, since)
        for c in self.commits:
            c["told"] = words(messages.get(c["sha"], ""))  # what its message says it does
        self.introduced_at = first_added(self.introduced, commits)

    def candidates(self, sig: Mapping[str, Any], window_days: float) -> list[Commit]:
        """The commits that may be the fix a test signal tests: for a TODO guard the commits
        it names by hash, when it names any, else those of its versions' release windows; for
        other signals those of the days around the test commit and those it names by hash."""
        named = referenced(sig, self.by_prefix)
        if sig["kind"] == "todo":
            if named:
                return named  # "fixed in 3afd85e4b": no need to guess
            pool: set[str] = set()
            for v in sig["versions"]:
                pool |= version_window(self.git_dir, self.tags, v, self._windows)
            # In history order: a set's order changes with the hash seed, and the scores' ties
            # keep the order they are given in, so the output would change between runs.
            return [c for c in self.commits if c["sha"] in pool]
        lo, hi = sig["date"] - window_days * 86400, sig["date"] + 10 * 86400
        cands = [c for c in self.commits if lo <= c["date"] <= hi]
        return cands + [c for c in named if not lo <= c["date"] <= hi]
