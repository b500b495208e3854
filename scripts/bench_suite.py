#!/usr/bin/env python3
"""How long the test suite takes: the quick loop and the whole suite, against their targets.

    python3 scripts/bench_suite.py                 # quick loop 3 times, whole suite once
    python3 scripts/bench_suite.py --quick 5 --whole 0
    python3 scripts/bench_suite.py --workers 2     # the whole suite with 2 workers instead

Each run is the command docs/development.md names (the whole suite's is .ci/run's), in a
process of its own; the figures are its wall time, the processor time of everything it started
(user + system, from the kernel's accounting of reaped children), the load average around it,
pytest's counts and the tests that failed. Targets (issue 38): quick loop under 60 s, whole
suite at most 300 s, on a quiet 2-core machine. Exits 1 when a measured median misses its target.
"""

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUICK = ["-m", "not e2e", "-n", "2"]
TARGETS = {"quick loop": 60.0, "whole suite": 300.0}
COUNTS = re.compile(r"^(\d+ (passed|failed).*) in [\d.]+s", re.M)


def whole_command(workers: int | None) -> list[str]:
    """The pytest command of .ci/run, with `workers` instead of its -n if given."""
    (line,) = [
        ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if "-m pytest" in ln
    ]
    words = line.split()
    if workers is not None:
        words[words.index("-n") + 1] = str(workers)
    return [sys.executable, *words[1:]]


def measure(argv: list[str]) -> dict:
    """One run of `argv` in the project root: wall s, processor s, loads, pytest's counts."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    counts = COUNTS.search(proc.stdout)
    failures = [ln for ln in proc.stdout.splitlines() if ln.startswith(("FAILED ", "ERROR "))]
    return {
        "wall": wall,
        "cpu": cpu,
        "load": (load, os.getloadavg()[0]),
        "status": proc.returncode,
        "counts": counts.group(1) if counts else proc.stdout.strip().splitlines()[-1:],
        "failures": failures,
    }


def report(name: str, runs: list[dict]) -> bool:
    walls = [r["wall"] for r in runs]
    median = statistics.median(walls)
    met = median <= TARGETS[name] and all(r["status"] == 0 for r in runs)
    print(
        f"{name}: {len(runs)} run(s), wall min {min(walls):.1f} s, median {median:.1f} s, "
        f"max {max(walls):.1f} s; processor {statistics.median(r['cpu'] for r in runs):.0f} s "
        f"(median); target {TARGETS[name]:.0f} s: {'met' if met else 'MISSED'}"
    )
    for r in runs:
        print(
            f"  {r['wall']:7.1f} s wall {r['cpu']:7.1f} s processor, load {r['load'][0]:.1f} -> "
            f"{r['load'][1]:.1f}, exit {r['status']}: {r['counts']}"
        )
        for line in r["failures"]:
            print(f"    {line}")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", type=int, default=3, help="runs of the quick loop")
    parser.add_argument("--whole", type=int, default=1, help="runs of the whole suite")
    parser.add_argument("--workers", type=int, help="pytest-xdist workers of the whole suite")
    args = parser.parse_args()
    print(f"{os.cpu_count()} processors; load {os.getloadavg()[0]:.1f} at the start")
    ok = True
    if args.quick:
        quick = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *QUICK, "tests"]
        ok &= report("quick loop", [measure(quick) for _ in range(args.quick)])
    if args.whole:
        whole = whole_command(args.workers)
        ok &= report("whole suite", [measure(whole) for _ in range(args.whole)])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
