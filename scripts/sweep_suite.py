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
from nginx_eval.mining.stubs import write_candidates  # noqa: E402


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nginx", required=True)
    ap.add_argument("--tests", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--old")
    ap.add_argument("--since", default="2025-01-01")
    ap.add_argument("--new", default="HEAD")
    ap.add_argument(
        "--via",
        default="",
        help="comma-separated commits between --old and --new: "
        "each stretch between two neighbours is compared and bisected on its own, "
        "so a bug added and fixed between the ends is found too",
    )
    ap.add_argument("--tests-commit", default="HEAD")
    ap.add_argument(
        "--flag",
        action="append",
        default=[],
        help="a configure flag added to "
        "every build, e.g. --flag=--with-cc-opt=-fsanitize=address (use a --work "
        "of its own: builds are kept by commit)",
    )
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--files", help="comma-separated test files (default: every *.t)")
    ap.add_argument(
        "--out",
        help="also write the leads as a candidates file (task stubs; fixes "
        "already in --benchmark left out)",
    )
    ap.add_argument(
        "--benchmark", default=str(Path(__file__).resolve().parent.parent / "tasks" / "nginx.json")
    )
    args = ap.parse_args(argv)

    work = Path(args.work).resolve()
    layout = Layout(root=work, cache=work / "cache", results_root=work / "results")
    new = gitcmd.rev_parse(args.nginx, args.new)
    old = gitcmd.rev_parse(
        args.nginx, args.old or gitcmd.commit_before(args.nginx, new, args.since)
    )
    tests_commit = gitcmd.rev_parse(args.tests, args.tests_commit)
    tests_tree = work / "tests" / tests_commit
    if not tests_tree.is_dir():
        gitcmd.extract_tree(args.tests, tests_commit, tests_tree)
    files = args.files.split(",") if args.files else sorted(p.name for p in tests_tree.glob("*.t"))
    flags = sweep.suite_flags(tests_tree) + args.flag
    log(
        f"old {old[:12]}, new {new[:12]}, tests {tests_commit[:12]}, {len(files)} files, "
        f"flags {' '.join(flags)}"
    )
    ends = [old] + [gitcmd.rev_parse(args.nginx, v) for v in args.via.split(",") if v] + [new]
    out = sweep.Sweep(
        layout, args.nginx, tests_tree, tests_commit, work, flags, args.jobs, log
    ).run(ends, files)
    (work / "leads.json").write_text(json.dumps(out, indent=1) + "\n")
    if args.out:
        known = {t["fix_commit"] for t in json.loads(Path(args.benchmark).read_text())["tasks"]}
        stubs = sweep.candidate_stubs(out, known, args.nginx, args.tests)
        write_candidates(args.out, stubs)
        log(f"{len(stubs)} candidates written to {args.out}")
    for lead in out["leads"]:
        print(
            f"{lead['fix_date']} {lead['fix_commit'][:12]} {len(lead['assertions']):3} "
            f"{lead['subject'][:70]}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
