"""Finding fixes by running the whole test suite across the nginx history: the third source of
candidates, beside test signals (suite_history.py) and topic matches (scoring.py).

Why: those sources pair an nginx commit with the test commit that came with it. A fix whose test
landed without a TODO guard, under an unrelated subject, or in a file an older commit created, is
never paired, and most recent fixes are such. Running one test tree (normally the newest) against
nginx at two commits finds each assertion the history between them turned from failing to
passing, whatever the commits say; bisecting over the code commits in between names the commit.

The steps, each a plain function:

    suite_flags(tests_dir)          configure flags that let as many files as possible run
    build_nginx(git_dir, commit, builds_dir, flags)   objs/nginx of a commit (ccache, reused)
    run_files(layout, tests_tree, binary, files, tap_dir, jobs)   prove -v each file, as the
                                    harness does (prove.run_prove_files)
    outcomes(tap_dir, files)        {file: FileResult} of the TAP written
    flips(old, new)                 assertions that fail at the old commit and pass at the new
    starts_running(old, new)        files that run at the new commit only (a feature arrived)
    bisect(commits, targets, probe) the first commit at which each target assertion passes
    Sweep(...).run(ends, files)     the above over each stretch between neighbours of `ends`:
                                    leads.json (scripts/sweep_suite.py writes it)
    candidate_stubs(leads, ...)     task stubs of the leads not in the benchmark yet

A flip is a lead, not a task: the commit bisection names may be a feature (the test needs what
it adds), a flaky assertion or a fix; validation (validate.py, repeats) and a reader decide.
"""

import shutil
import subprocess
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path
from typing import Any, TypeGuard

from nginx_eval.build.toolchain import build_env, configure_argv, in_toolchain
from nginx_eval.core import gitcmd
from nginx_eval.core.gitcmd import commit_facts, first_parent_commits
from nginx_eval.core.layout import Layout
from nginx_eval.mining.nginx_history import nginx_commits
from nginx_eval.mining.stubs import stub_for
from nginx_eval.mining.testsuite import configure_flags_for, requirements_in_order
from nginx_eval.prove.stage import run_prove_files
from nginx_eval.prove.tap import FileResult, assertion_number, parse_tap

# Modules a build here cannot have (no library in setup-debian.sh) or that change every file's
# startup (perl loads the build's own Perl module).
LEFT_OUT_FLAGS = frozenset(
    {
        "--with-http_perl_module",
        "--with-http_geoip_module",
        "--with-stream_geoip_module",
        "--with-debug",
        "--with-http_spdy_module",
        "--with-file-aio",
        "--with-compat",
    }
)
FILE_TIMEOUT = 240  # seconds per test file: the slowest take about 35 s
# What bisection steps over: the commits that change nginx's code.
CODE_PATHS = ("src", "auto")


# A file's assertion ("file.t:N name"), and what a sweep prints its progress with.
Target = tuple[str, str]
Log = Callable[[str], None]


def suite_flags(tests_dir: str | Path) -> list[str]:
    """Configure flags for every module the suite's files ask for with has(), less LEFT_OUT."""
    names: list[str] = []
    for path in sorted(Path(tests_dir).glob("*.t")):
        names += requirements_in_order(path.read_text(errors="replace"))["nginx_modules"]
    flags = configure_flags_for(dict.fromkeys(names))
    return [f for f in flags if f not in LEFT_OUT_FLAGS] + ["--with-threads"] * (
        "--with-threads" not in flags
    )


def build_nginx(
    layout: Layout,
    git_dir: str | Path,
    commit: str,
    builds_dir: str | Path,
    flags: Sequence[str],
    log: Log | None = None,
) -> Path | None:
    """objs/nginx of `commit` configured with `flags`, built once under builds_dir/<commit> with
    the harness's toolchain (toolchain.py: configure's command line, make through ccache); None
    when it does not build (builds_dir/<commit>/build.log says why)."""
    tree = Path(builds_dir) / commit
    binary = tree / "objs" / "nginx"
    if binary.is_file():
        return binary
    if tree.exists():
        shutil.rmtree(tree)
    gitcmd.extract_tree(git_dir, commit, tree)
    env = build_env(layout, tree)
    # Each step in the toolchain the harness builds with (build/toolchain.py: in_toolchain).
    configure, configure_env = in_toolchain(configure_argv(flags), tree, env)
    make, make_env = in_toolchain(["make", "-j2"], tree, env)
    with open(tree / "build.log", "wb") as out:

        def run(argv: list[str], step_env: Mapping[str, str]) -> int:
            return subprocess.run(
                argv, cwd=tree, env=step_env, stdout=out, stderr=subprocess.STDOUT
            ).returncode

        if run(configure, configure_env) == 0:
            run(make, make_env)
    if log:
        log(f"build {commit[:12]}: {'ok' if binary.is_file() else 'FAILED, see build.log'}")
    return binary if binary.is_file() else None


def run_files(
    layout: Layout,
    tests_tree: str | Path,
    binary: Path,
    files: Iterable[str],
    tap_dir: str | Path,
    jobs: int = 2,
) -> None:
    """prove -v each of `files` against `binary`, `jobs` at a time; TAP under tap_dir. Files
    whose TAP is already there are not run again."""
    out = Path(tap_dir)
    todo = [f for f in files if not (out / f"{f}.tap").is_file()]
    with ThreadPoolExecutor(jobs) as pool:
        list(
            pool.map(
                lambda f: run_prove_files(layout, Path(tests_tree), binary, [f], FILE_TIMEOUT, out),
                todo,
            )
        )


def outcomes(tap_dir: str | Path, files: Iterable[str]) -> dict[str, FileResult]:
    """{file: FileResult} of the TAP under tap_dir."""
    return {
        f: parse_tap(f, (Path(tap_dir) / f"{f}.tap").read_text(errors="replace"))
        for f in files
        if (Path(tap_dir) / f"{f}.tap").is_file()
    }


def runs(result: FileResult | None) -> TypeGuard[FileResult]:
    """Whether a file ran to its end with a stream that can be trusted (not skipped whole)."""
    return (
        result is not None
        and result.complete
        and not result.skip_all
        and not result.tampered
        and not result.bailed_out
    )


def starts_running(old: Mapping[str, FileResult], new: Mapping[str, FileResult]) -> list[str]:
    """Files that did not run at the old commit (skipped: what they test did not exist yet; or
    died) and ran at the new one. Their assertions are no flips of these two commits, but a bug
    in what arrived in between, fixed before the new commit, is a flip from the commit where
    the file first runs (Sweep.stretch)."""
    return sorted(f for f, after in new.items() if runs(after) and f in old and not runs(old[f]))


def flips(old: Mapping[str, FileResult], new: Mapping[str, FileResult]) -> list[Target]:
    """[(file, assertion id)] that failed at the old commit (ran and failed, TODO or not, or was
    a todo_skip) and passed at the new one. A file must have run to its end at both, and the id
    (number and name) must be the same at both: the same assertion, not a renumbered file."""
    found: list[Target] = []
    for f, before in sorted(old.items()):
        after = new.get(f)
        if not runs(before) or not runs(after):
            continue
        for ident, passed in before.results.items():
            if passed is not False:
                continue
            # A todo_skip ("not ok N # TODO & SKIP reason": a version known to crash is not
            # run) prints no name: the assertion of the same number is the one it stood for.
            if ident == f"{f}:{assertion_number(ident)}":
                ident = after.numbers.get(assertion_number(ident), ident)
            if after.results.get(ident) is True:
                found.append((f, ident))
    return found


def bisect(
    commits: Sequence[str],
    targets: Iterable[Any],
    probe: Callable[[str, list[Any]], Collection[Any]],
) -> dict[Any, str]:
    """{target: the first commit of `commits` at which it holds}, for targets that do not hold
    at commits[0] and hold at commits[-1]. probe(commit, targets) -> the set of targets that hold
    at that commit; one probe answers for every target in the range, so targets that flipped
    at the same commit cost one search."""
    found: dict[Any, str] = {}

    def search(lo: int, hi: int, group: list[Any]) -> None:
        if not group:
            return
        if hi - lo <= 1:
            for t in group:
                found[t] = commits[hi]
            return
        mid = (lo + hi) // 2
        held = probe(commits[mid], group)
        search(lo, mid, [t for t in group if t in held])
        search(mid, hi, [t for t in group if t not in held])

    search(0, len(commits) - 1, list(targets))
    return found


class Sweep:
    """One sweep: a test tree (`tests_tree`, of `tests_commit`) run against nginx commits of the
    git directory `nginx`, built with `flags` under work/builds/, TAP under work/tap/ (kept: a
    rerun only runs what is missing)."""

    def __init__(
        self,
        layout: Layout,
        nginx: str | Path,
        tests_tree: str | Path,
        tests_commit: str,
        work: str | Path,
        flags: Sequence[str],
        jobs: int,
        log: Log,
    ) -> None:
        self.layout, self.nginx, self.tests_tree = layout, nginx, tests_tree
        self.tests_commit, self.work, self.flags = tests_commit, Path(work), flags
        self.jobs, self.log = jobs, log

    def results_at(self, commit: str, names: Sequence[str]) -> dict[str, FileResult] | None:
        """{file: FileResult} of `names` at `commit`, or None when the commit does not build."""
        binary = build_nginx(
            self.layout, self.nginx, commit, self.work / "builds", self.flags, self.log
        )
        if binary is None:
            return None
        tap_dir = self.work / "tap" / self.tests_commit[:12] / commit[:12]
        t0 = time.time()
        run_files(self.layout, self.tests_tree, binary, names, tap_dir, self.jobs)
        self.log(f"{commit[:12]}: {len(names)} files in {time.time() - t0:.0f} s")
        return outcomes(tap_dir, names)

    def probe(self, commit: str, targets: Iterable[Target]) -> set[Target]:
        """The (file, assertion) targets that pass at `commit` (bisect's probe)."""
        res = self.results_at(commit, sorted({f for f, _ in targets}))
        if res is None:  # a commit that does not build: treat as not yet fixed
            return set()
        return {(f, i) for f, i in targets if f in res and res[f].results.get(i) is True}

    def running_at(self, commit: str, names: Iterable[str]) -> set[str]:
        """The files of `names` that run at `commit` (bisect's probe for starts_running)."""
        res = self.results_at(commit, sorted(names))
        return set() if res is None else {f for f in names if runs(res.get(f))}

    def stretch(
        self, lo: str, hi: str, files: Sequence[str]
    ) -> tuple[dict[tuple[Target, str], str], list[Target]] | None:
        """({(target, lo or the commit a file first runs at): fix commit}, flipped targets) of
        the code commits from `lo` to `hi`; None when either end does not build."""
        at_lo, at_hi = self.results_at(lo, files), self.results_at(hi, files)
        if at_lo is None or at_hi is None:
            return None
        chain = [lo] + first_parent_commits(self.nginx, lo, hi, *CODE_PATHS)
        chain = chain if chain[-1] == hi else chain + [hi]
        flipped = flips(at_lo, at_hi)
        self.log(
            f"{len(flipped)} assertions fail at {lo[:12]} and pass at {hi[:12]}; "
            f"bisecting over {len(chain)} code commits"
        )
        found = {(t, lo): c for t, c in bisect(chain, flipped, self.probe).items()}
        # A file that starts running in this stretch (what it tests arrived): compare it from
        # the commit where it first runs, so that a fix to the new code before `hi` is found.
        first_run = bisect(chain, starts_running(at_lo, at_hi), self.running_at)
        for start in sorted(set(first_run.values()), key=chain.index):
            names = sorted(f for f, c in first_run.items() if c == start)
            at_start = self.results_at(start, names)
            # The files run at `start` (running_at found them running there): it builds.
            assert at_start is not None
            late = flips(at_start, {f: at_hi[f] for f in names})
            self.log(
                f"{len(names)} files first run at {start[:12]}: {len(late)} assertions "
                f"fail there and pass at {hi[:12]}"
            )
            sub = chain[chain.index(start) :]
            found.update({(t, start): c for t, c in bisect(sub, late, self.probe).items()})
            flipped += late
        return found, flipped

    def run(self, ends: Sequence[str], files: Sequence[str]) -> dict[str, Any]:
        """leads.json of a sweep over the stretches between neighbours of `ends` (commit ids,
        oldest first): per fix commit its date, subject and the assertions it turned passing."""
        found: dict[tuple[Target, str], str] = {}
        flipped: list[Target] = []
        for lo, hi in pairwise(ends):
            result = self.stretch(lo, hi, files)
            if result is None:
                self.log(f"{lo[:12]} or {hi[:12]} does not build: stretch skipped")
                continue
            found.update(result[0])
            flipped += result[1]
        leads: dict[str, dict[str, Any]] = {}
        for ((_, ident), _), commit in sorted(found.items(), key=lambda kv: kv[0]):
            facts = commit_facts(self.nginx, commit)
            lead = leads.setdefault(
                commit,
                {
                    "fix_commit": commit,
                    "fix_date": facts["day"],
                    "subject": facts["subject"],
                    "assertions": [],
                },
            )
            if ident not in lead["assertions"]:
                lead["assertions"].append(ident)
        return {
            "old": ends[0],
            "new": ends[-1],
            "via": ends[1:-1],
            "tests_commit": self.tests_commit,
            "flags": self.flags,
            "files": len(files),
            "flipped": len(flipped),
            "leads": sorted(leads.values(), key=lambda lead: lead["fix_date"]),
        }


def candidate_stubs(
    leads: Mapping[str, Any], known: Collection[str], nginx: str | Path, tests: str | Path
) -> list[dict[str, Any]]:
    """Task stubs (stubs.stub_for) of the leads whose fix is not in `known` (fix commits): base
    the fix's first parent, the sweep's test commit, the files of its flipped assertions."""
    since = commit_facts(nginx, leads["old"])["time"]
    history = {c["sha"]: c for c in nginx_commits(nginx, since)}
    stubs: list[dict[str, Any]] = []
    for lead in leads["leads"]:
        if lead["fix_commit"] in known:
            continue
        files = sorted({a.split(":", 1)[0] for a in lead["assertions"]})
        stub = stub_for(
            history[lead["fix_commit"]],
            leads["tests_commit"],
            files,
            nginx,
            tests,
            f"suite sweep: {len(lead['assertions'])} assertions turn passing here; "
            f"fix: {lead['subject']}",
        )
        if stub:
            stubs.append(stub)
    return stubs
