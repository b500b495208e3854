#!/usr/bin/env python3
"""Benchmark the limits per kind of work: one graph of 26 tasks x 4 modes, scored with `-n 2` and
with `-n 20 agents=16 builds=2`, one after the other in one run of this script; prints both wall
times and their ratio.

The four modes are gold, none and two agent modes whose agent is a stand-in that sleeps
(--agent-seconds, default 5; no API calls, it changes nothing). With `-n 2` the agents wait in
line behind each other and behind the builds; with `-n 20 agents=16 builds=2` sixteen agents
sleep at once while no more than two builds compile (limits.py).

Two benchmarks:
  - the fixture (tests/fixture_repos.py: a C program laid out like nginx) scaled up to --tasks
    tasks (default 26), copies of its two tasks under new ids: fast, and the default;
  - real nginx, the first --tasks tasks of tasks/nginx.json, when NGINX_EVAL_REPO_URL names
    local mirrors (`/srv/mirrors/{owner}+{name}/repo`) and --fixture is not given.

Each configuration gets a cache and results of its own under --workdir (default: a new directory
under /tmp): cold builds, an empty ccache. The clones are made first and are not measured. Both
runs must give every task a verdict in every mode, and the same verdicts.

    python scripts/bench_limits.py [--tasks 26] [--agent-seconds 5] [--fixture] [--workdir DIR]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from nginx_eval.core.tasknames import repo_task  # noqa: E402
from nginx_eval.run.benchmark import load_benchmark  # noqa: E402

AGENT_MODES = ("standin-a", "standin-b")
# The two configurations, as the issue states them: doit's -n alone, and a large -n under which
# the limits per kind decide.
CONFIGURATIONS = (
    ("n2", ["-n", "2", "-P", "thread"], []),
    ("limits", ["-n", "20", "-P", "thread"], ["agents=16", "builds=2"]),
)
# results.jsonl fields that are times or name where the run happened.
NOT_COMPARED = ("build_seconds", "agent_seconds", "run", "agent_commands")


def stand_in_modes(seconds):
    """modes.toml of the agent modes: each one phase that sleeps."""
    return "".join(
        f'[modes.{name}]\ndescription = "a stand-in agent that sleeps {seconds:g} s"\n'
        f'[[modes.{name}.phases]]\nname = "solve"\ntimeout = {int(seconds) + 60}\n'
        f'command = "sleep {seconds:g}"\n\n'
        for name in AGENT_MODES
    )


def fixture_project(work, count):
    """The fixture scaled up to `count` tasks: (project root, benchmark name, environment)."""
    import fixture_repos

    fx = fixture_repos.make_fixture(work / "fixture")
    originals = fx["tasks"]
    tasks = []
    for i in range(count):
        task = dict(originals[i % len(originals)])
        task["instance_id"] = f"{task['instance_id']}-{i + 1:02d}"
        task["problem_statement"] = f"{task['instance_id']}: the calculator prints wrong results."
        tasks.append(task)
    (fx["root"] / "tasks" / "tiny.json").write_text(
        json.dumps({"name": "tiny", "tasks": tasks}, indent=2)
    )
    return fx["root"], "tiny", fx["env"]


def nginx_project(work, count):
    """The first `count` tasks of tasks/nginx.json: (project root, benchmark name, environment)."""
    root = work / "project"
    (root / "tasks").mkdir(parents=True)
    data = json.loads((ROOT / "tasks" / "nginx.json").read_text())
    data["tasks"] = data["tasks"][:count]
    (root / "tasks" / "nginx.json").write_text(json.dumps(data, indent=2))
    return root, "nginx", dict(os.environ)


class LimitsBench:
    def __init__(self, args):
        self.args = args
        self.work = Path(args.workdir or tempfile.mkdtemp(prefix="nginx-eval-limits-")).resolve()
        self.work.mkdir(parents=True, exist_ok=True)
        make = fixture_project if args.fixture else nginx_project
        self.root, self.bench, env = make(self.work, args.tasks)
        (self.root / "modes.toml").write_text(stand_in_modes(args.agent_seconds))
        self.env = {k: v for k, v in env.items() if k != "AGENT"}
        self.env["NGINX_EVAL_ROOT"] = str(self.root)
        tasks = load_benchmark(self.root / "tasks" / f"{self.bench}.json").tasks
        self.repos = sorted({t.repo for t in tasks} | {t.test_repo for t in tasks})
        self.modes = ("gold", "none") + AGENT_MODES

    def doit(self, label, *args):
        env = dict(
            self.env,
            NGINX_EVAL_CACHE=str(self.work / label / "cache"),
            NGINX_EVAL_RESULTS=str(self.work / label / "results"),
        )
        argv = [sys.executable, "-m", "doit", "-f", str(ROOT / "dodo.py"), "run", *args]
        start = time.monotonic()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        seconds = time.monotonic() - start
        if proc.returncode != 0:
            sys.exit(
                f"doit run {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        return seconds

    def verdicts(self, label):
        """{(mode, instance id): results.jsonl row without times} of a configuration's run."""
        rows = {}
        for mode in self.modes:
            path = self.work / label / "results" / "default" / mode / "results.jsonl"
            for line in path.read_text().splitlines():
                row = json.loads(line)
                rows[(mode, row["instance_id"])] = {
                    k: v for k, v in row.items() if k not in NOT_COMPARED
                }
        return rows

    def run(self):
        print(
            f"workdir {self.work}; {self.args.tasks} tasks x {len(self.modes)} modes of "
            f"{self.bench}, stand-in agents sleep {self.args.agent_seconds:g} s",
            flush=True,
        )
        targets = [f"{self.bench}:{mode}" for mode in self.modes]
        times = {}
        for label, jobs, variables in CONFIGURATIONS:
            self.doit(label, *[repo_task(r) for r in self.repos])
            times[label] = self.doit(label, *jobs, *targets, *variables)
            print(f"  doit run {' '.join(jobs + variables)}: {times[label]:.1f} s", flush=True)
        first, second = (self.verdicts(label) for label, _, _ in CONFIGURATIONS)
        expected = self.args.tasks * len(self.modes)
        if len(first) != expected or first != second:
            sys.exit(
                f"the two runs disagree or miss units ({len(first)} and {len(second)} of "
                f"{expected} rows)"
            )
        self.report(times, expected)

    def report(self, times, units):
        ratio = times["n2"] / times["limits"]
        cpu = next(
            (
                line.split(":", 1)[1].strip()
                for line in open("/proc/cpuinfo")
                if line.startswith("model name")
            ),
            "?",
        )
        print(f"\nMachine: {os.cpu_count()} cores, {cpu}; {units} units, same verdicts\n")
        print("| configuration | wall time |\n|---|---|")
        for label, jobs, variables in CONFIGURATIONS:
            print(f"| `doit run {' '.join(jobs + variables)}` | {times[label]:.1f} s |")
        print(f"| ratio | {ratio:.1f}x |")
        (self.work / "bench_limits.json").write_text(
            json.dumps(
                {
                    "benchmark": self.bench,
                    "tasks": self.args.tasks,
                    "modes": list(self.modes),
                    "agent_seconds": self.args.agent_seconds,
                    "seconds": times,
                    "ratio": ratio,
                },
                indent=2,
            )
        )


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--tasks", type=int, default=26, help="tasks in the graph (default 26)")
    ap.add_argument(
        "--agent-seconds",
        type=float,
        default=5.0,
        help="how long each stand-in agent sleeps (default 5)",
    )
    ap.add_argument(
        "--fixture",
        action="store_true",
        help="the fixture even when NGINX_EVAL_REPO_URL names mirrors of nginx",
    )
    ap.add_argument("--workdir", help="where caches and results go (default: a new /tmp dir)")
    ap.add_argument("--keep", action="store_true", help="keep --workdir's default directory")
    args = ap.parse_args()
    # Real nginx needs local mirrors: cloning it from the network is not what is measured.
    args.fixture = args.fixture or not os.environ.get("NGINX_EVAL_REPO_URL")
    bench = LimitsBench(args)
    try:
        bench.run()
    finally:
        if not args.workdir and not args.keep:
            shutil.rmtree(bench.work, ignore_errors=True)


if __name__ == "__main__":
    main()
