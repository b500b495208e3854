#!/usr/bin/env python3
"""Propose candidate nginx-eval tasks from the histories of nginx and nginx-tests.

Offline: reads two local git directories (bare mirrors are fine) and writes a candidates file:
task stubs in the benchmark schema (fail_to_pass / pass_to_pass empty, problem_statement "TODO")
under a top-level ``"candidates": true``, which the loader accepts for validation only
(nginx_eval/run/benchmark.py). Written as ``tasks/<name>.json``, it is validated with
``doit run <name>:validate``; scripts/promote_tasks.py then adds the valid stubs, with their
derived assertions and a statement each, to a benchmark file.

Signals, from strongest to weakest:

1. TODO guards. An nginx-tests commit adds ``local $TODO = ... unless $t->has_version('X.Y.Z')``
   (or ``todo_skip`` / ``todo_alerts`` / ``plan(skip_all)`` conditioned on ``has_version``): the
   fix is expected in nginx X.Y.Z, so the nginx commits between the previous mainline release and
   ``release-X.Y.Z`` (or HEAD when X.Y.Z is not released yet) are the candidates, wherever in
   that window they sit. A guard that holds only with another SSL library
   (``if $t->has_module('AWS-LC') and !$t->has_version(...)``) is no signal: the harness builds
   with OpenSSL, where such assertions pass or fail whatever the fix.
2. Abbreviated nginx commit hashes quoted in the test commit ("fixed in 3afd85e4b"): for a TODO
   guard, the only candidates. Shared ticket numbers ("ticket #1234") in the subjects of a test
   commit and an nginx commit.
3. Topic similarity alone (test commits that add or change .t files, nginx commits within a few
   weeks), which finds fixes whose tests landed without a TODO guard.

Candidates are scored (score) by topic words shared between the test side (commit subject, file
names less their area prefix; the assertions and comments a guard covers, kept lines too; the
other assertion texts) and the nginx side (subject and touched file names, more weakly its
message), the area of the test file versus the subject prefix ("HTTP/2:") and the share of the
touched sources in that area, the directives and variables a commit adds (used by the test:
evidence; none used: a feature the test does not exercise), and date proximity (weak within a
release window). Portability commits (BoringSSL, win32, select) and refactorings lose points.
A commit older than a directive or variable the test uses is dropped (its build could not run
the test), and one that an earlier candidate of about its score precedes in the same sources
loses points (its base would already hold that fix). The top few per test signal are kept;
a stub's notes give its rank among its test's candidates ("#1 for its test").

A stub's configure_flags and perl_modules are what its test files need, read by
nginx_eval/mining/testsuite.py as the doctor reads them: the flags that build every module their
has() calls name (with --with-stream / --with-mail for a stream or mail module), the non-core Perl
modules they load or call.

The work is done in nginx_eval/mining/ (its __init__ names each module's part); this script
parses the command line and runs it.

Usage:
    python scripts/mine_tasks.py --nginx <git dir> --tests <git dir> --out tasks/candidates.json \
        [--since 2020-01-01] [--limit N] [--per-signal K]
"""

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

# The nginx_eval next to this script, whichever one is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from nginx_eval.mining.nginx_history import NginxHistory  # noqa: E402
from nginx_eval.mining.scoring import best_proposals  # noqa: E402
from nginx_eval.mining.stubs import print_candidates, task_stub, write_candidates  # noqa: E402
from nginx_eval.mining.suite_history import test_signals  # noqa: E402


def parse_args(argv):
    """The command line's options (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nginx", required=True, help="git dir of nginx")
    ap.add_argument("--tests", required=True, help="git dir of nginx-tests")
    ap.add_argument("--out", required=True)
    ap.add_argument("--since", default="2020-01-01")
    ap.add_argument("--limit", type=int, default=0, help="keep at most N candidates (0: all)")
    ap.add_argument(
        "--per-signal", type=int, default=4, help="candidate fixes kept per test signal"
    )
    ap.add_argument("--min-score", type=float, default=4.0)
    ap.add_argument(
        "--window-days",
        type=int,
        default=45,
        help="date window for signals without a version guard",
    )
    return ap.parse_args(argv)


def main(argv=None):
    """Mine the two histories and write the candidates file; 0."""
    args = parse_args(argv)
    t0 = time.time()
    since_ts = datetime.fromisoformat(args.since).replace(tzinfo=UTC).timestamp()
    # A fix may land well before the test commit that checks it: nginx from 200 days earlier.
    early = datetime.fromtimestamp(since_ts - 200 * 86400, UTC).strftime("%Y-%m-%d")
    history = NginxHistory(args.nginx, early)
    signals = test_signals(args.tests, args.since)
    stubs, rows = [], []
    for p in best_proposals(signals, history, args):
        stub = task_stub(p, args.nginx, args.tests)
        if stub is not None:
            stubs.append(stub)
            rows.append((p["_score"], p["_sig"]["kind"], p["_commit"]["subject"]))
    write_candidates(args.out, stubs)
    print_candidates(stubs, rows)
    print(
        f"{len(stubs)} candidates from {len(signals)} test signals, "
        f"{len(history.commits)} nginx commits, in {time.time() - t0:.1f} s -> {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
