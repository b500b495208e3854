#!/usr/bin/env python3
"""Time `doit list` on the shipped benchmark, as a newcomer's first command: each run a fresh
process, from start to exit, and print min, median and max of its wall and CPU seconds against
the target (a median under 1 s).

Python runs with its default bytecode cache, kept under the work directory
(PYTHONPYCACHEPREFIX), so that neither the checkout nor a PYTHONDONTWRITEBYTECODE in the
environment decides the figure; one run before the timed ones writes it. The cache and the
results are a new empty directory: `doit list` needs no clone (--cache DIR times it beside a
cache that has them).

    python scripts/bench_list.py [--runs N] [--cache DIR] [--bench NAME] [-- ARGS...]

ARGS replace `list` (e.g. `-- list --all`).
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 1.0


def timed_run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one `doit argv`; fails on a non-zero exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "doit", "-f", str(ROOT / "dodo.py"), *argv],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"doit {' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def spread(values: list[float]) -> str:
    return f"{min(values):.3f}  {statistics.median(values):.3f}  {max(values):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cache", help="NGINX_EVAL_CACHE for the runs (default: a new one)")
    parser.add_argument("--bench", default="nginx", help="bench=NAME (default nginx)")
    parser.add_argument("args", nargs="*", help="the doit command (default: list)")
    opts = parser.parse_args()
    argv = (opts.args or ["list"]) + [f"bench={opts.bench}"]
    with tempfile.TemporaryDirectory(prefix="bench-list-") as work:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONDONTWRITEBYTECODE", "NGINX_EVAL_ROOT")
        }
        env.update(
            PYTHONPYCACHEPREFIX=str(Path(work) / "pycache"),
            NGINX_EVAL_CACHE=opts.cache or str(Path(work) / "cache"),
            NGINX_EVAL_RESULTS=str(Path(work) / "results"),
        )
        timed_run(argv, env)  # writes the bytecode cache; not counted
        runs = [timed_run(argv, env) for _ in range(opts.runs)]
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    median = statistics.median(walls)
    print(f"doit {' '.join(argv)}: {opts.runs} runs, seconds min  median  max")
    print(f"  wall  {spread(walls)}")
    print(f"  cpu   {spread(cpus)}")
    verdict = "meets" if median < TARGET_SECONDS else "misses"
    print(
        f"  {verdict} the target: median wall under {TARGET_SECONDS:.0f} s "
        f"(on a busy machine wall exceeds cpu: compare the cpu row)"
    )


if __name__ == "__main__":
    main()
