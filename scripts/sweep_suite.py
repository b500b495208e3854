#!/usr/bin/env python3
"""Find fixes by running one nginx-tests tree against nginx at two commits (the whole suite),
then bisecting each assertion that turned from failing to passing (nginx_eval/mining/sweep.py).

Offline: reads two local git directories (bare mirrors are fine). Writes, under --work:
builds/<commit>/ (one nginx per commit, every module the suite asks for that builds here),
tap/<commit>/ (prove -v output per file; kept, so a rerun only runs what is missing) and
leads.json: per flipped assertion, the first commit at which it passes, with that commit's
subject and date. A lead becomes a candidate task only after validation (repeats) and reading.

Usage:
    python scripts/sweep_suite.py --nginx <git dir> --tests <git dir> --work /tmp/sweep \\
        [--old COMMIT | --since 2025-01-01] [--new COMMIT] [--tests-commit COMMIT] [--jobs 3]
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from nginx_eval.core import gitcmd  # noqa: E402
from nginx_eval.core.layout import Layout  # noqa: E402
from nginx_eval.mining import sweep  # noqa: E402
from nginx_eval.mining.nginx_history import nginx_commits  # noqa: E402
from nginx_eval.mining.stubs import stub_for, write_candidates  # noqa: E402


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def first_parent_commits(git_dir, old, new):
    """Commits from `old` to `new` on new's first-parent line that touch the code (src/, auto/),
    oldest first, `old` and `new` included."""
    out = gitcmd._text(git_dir, "rev-list", "--first-parent", "--reverse",
                       f"{old}..{new}", "--", "src", "auto")
    chain = [old] + out.split()
    return chain if chain[-1] == new else chain + [new]


def commit_before(git_dir, rev, day):
    return gitcmd._text(git_dir, "rev-list", "--first-parent", "-1", f"--before={day}",
                        rev).strip()


def write_stubs(args, out):
    """A candidates file of the leads whose fix is not in the benchmark yet: base the fix's first
    parent, the sweep's test commit, the files of its flipped assertions."""
    known = {t["fix_commit"] for t in json.loads(Path(args.benchmark).read_text())["tasks"]}
    since = gitcmd._text(args.nginx, "log", "-1", "--format=%cI", out["old"]).strip()
    history = {c["sha"]: c for c in nginx_commits(args.nginx, since)}
    stubs = []
    for lead in out["leads"]:
        if lead["fix_commit"] in known:
            continue
        files = sorted({a.split(":", 1)[0] for a in lead["assertions"]})
        stub = stub_for(history[lead["fix_commit"]], out["tests_commit"], files, args.nginx,
                        args.tests, f"suite sweep: {len(lead['assertions'])} assertions turn "
                        f"passing here; fix: {lead['subject']}")
        if stub:
            stubs.append(stub)
    write_candidates(args.out, stubs)
    log(f"{len(stubs)} candidates written to {args.out}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nginx", required=True)
    ap.add_argument("--tests", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--old")
    ap.add_argument("--since", default="2025-01-01")
    ap.add_argument("--new", default="HEAD")
    ap.add_argument("--via", default="", help="comma-separated commits between --old and --new: "
                    "each stretch between two neighbours is compared and bisected on its own, "
                    "so a bug added and fixed between the ends is found too")
    ap.add_argument("--tests-commit", default="HEAD")
    ap.add_argument("--flag", action="append", default=[], help="a configure flag added to "
                    "every build, e.g. --flag=--with-cc-opt=-fsanitize=address (use a --work "
                    "of its own: builds are kept by commit)")
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--files", help="comma-separated test files (default: every *.t)")
    ap.add_argument("--out", help="also write the leads as a candidates file (task stubs; fixes "
                    "already in --benchmark left out)")
    ap.add_argument("--benchmark", default=str(Path(__file__).resolve().parent.parent
                                               / "tasks" / "nginx.json"))
    args = ap.parse_args(argv)

    work = Path(args.work).resolve()
    layout = Layout(root=work, cache=work / "cache", results_root=work / "results")
    new = gitcmd._text(args.nginx, "rev-parse", args.new).strip()
    old = args.old or commit_before(args.nginx, new, args.since)
    old = gitcmd._text(args.nginx, "rev-parse", old).strip()
    tests_commit = gitcmd._text(args.tests, "rev-parse", args.tests_commit).strip()
    tests_tree = work / "tests" / tests_commit
    if not tests_tree.is_dir():
        gitcmd.extract_tree(args.tests, tests_commit, tests_tree)
    files = args.files.split(",") if args.files else sorted(
        p.name for p in tests_tree.glob("*.t"))
    flags = sweep.suite_flags(tests_tree) + args.flag
    log(f"old {old[:12]}, new {new[:12]}, tests {tests_commit[:12]}, {len(files)} files, "
        f"flags {' '.join(flags)}")

    def results_at(commit, names):
        binary = sweep.build_nginx(layout, args.nginx, commit, work / "builds", flags, log)
        if binary is None:
            return None
        tap_dir = work / "tap" / tests_commit[:12] / commit[:12]
        t0 = time.time()
        sweep.run_files(layout, tests_tree, binary, names, tap_dir, args.jobs)
        log(f"{commit[:12]}: {len(names)} files in {time.time() - t0:.0f} s")
        return sweep.outcomes(tap_dir, names)

    def probe(commit, targets):
        res = results_at(commit, sorted({f for f, _ in targets}))
        if res is None:                 # a commit that does not build: treat as not yet fixed
            return set()
        return {(f, i) for f, i in targets if f in res and res[f].results.get(i) is True}

    ends = [old] + [gitcmd._text(args.nginx, "rev-parse", v).strip()
                    for v in args.via.split(",") if v] + [new]

    def running_at(commit, names):
        res = results_at(commit, sorted(names))
        return set() if res is None else {f for f in names if sweep.runs(res.get(f))}

    found, flipped = {}, []
    for lo, hi in zip(ends, ends[1:]):
        at_lo, at_hi = results_at(lo, files), results_at(hi, files)
        if at_lo is None or at_hi is None:
            log(f"{lo[:12]} or {hi[:12]} does not build: stretch skipped")
            continue
        chain = first_parent_commits(args.nginx, lo, hi)
        stretch = sweep.flips(at_lo, at_hi)
        log(f"{len(stretch)} assertions fail at {lo[:12]} and pass at {hi[:12]}; "
            f"bisecting over {len(chain)} code commits")
        found.update({(t, lo): c for t, c in sweep.bisect(chain, stretch, probe).items()})
        flipped += stretch
        # A file that starts running in this stretch (what it tests arrived): compare it from
        # the commit where it first runs, so that a fix to the new code before `hi` is found.
        starting = sweep.starts_running(at_lo, at_hi)
        first_run = sweep.bisect(chain, starting, running_at)
        for start in sorted(set(first_run.values()), key=chain.index):
            names = sorted(f for f, c in first_run.items() if c == start)
            late = sweep.flips(results_at(start, names),
                               {f: at_hi[f] for f in names})
            log(f"{len(names)} files first run at {start[:12]}: {len(late)} assertions "
                f"fail there and pass at {hi[:12]}")
            sub = chain[chain.index(start):]
            found.update({(t, start): c for t, c in sweep.bisect(sub, late, probe).items()})
            flipped += late
    leads = {}
    for ((f, ident), _), commit in sorted(found.items(), key=lambda kv: kv[0]):
        info = gitcmd._text(args.nginx, "log", "-1", "--format=%cs%x1f%s", commit).strip()
        day, subject = info.split("\x1f", 1)
        lead = leads.setdefault(commit, {"fix_commit": commit, "fix_date": day,
                                         "subject": subject, "assertions": []})
        if ident not in lead["assertions"]:
            lead["assertions"].append(ident)
    out = {"old": old, "new": new, "via": ends[1:-1], "tests_commit": tests_commit, "flags": flags,
           "files": len(files), "flipped": len(flipped),
           "leads": sorted(leads.values(), key=lambda lead: lead["fix_date"])}
    (work / "leads.json").write_text(json.dumps(out, indent=1) + "\n")
    if args.out:
        write_stubs(args, out)
    for lead in out["leads"]:
        print(f"{lead['fix_date']} {lead['fix_commit'][:12]} {len(lead['assertions']):3} "
              f"{lead['subject'][:70]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
