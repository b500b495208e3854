#!/usr/bin/env python3
"""Where the whole suite's processor time goes: per test and per module, every process counted.

    python3 scripts/suite_cpu.py [--out cpu.json] [--top 40] [--tests PATH ...] [-- OPTION ...]

Runs .ci/run's pytest command with this file as a pytest plugin: each pytest-xdist worker moves
itself into a control group of its own (cgroup v1 ``cpuacct``, or v2's ``cpu.stat``), so every
process a test starts (doit, the compiler, prove, the agent CLIs, Ray's daemons) is counted with
it, which ``--durations`` (wall time) and the kernel's per-child accounting (reaped children
only) do not give. A test's figure is the group's usage across its setup, call and teardown, so a
module-scoped fixture counts in the first test that asks for it. Needs root (the cgroup
filesystem) and a machine quiet enough that the wall times mean something; the processor times
hold under load. Writes ``[[nodeid, cpu_seconds, wall_seconds], ...]`` to --out and prints the
heaviest tests and modules.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
V1 = Path("/sys/fs/cgroup/cpuacct")
V2 = Path("/sys/fs/cgroup")
# Two measurements at once need groups of their own: SUITE_CPU_GROUP names this one's.
GROUP = os.environ.get("SUITE_CPU_GROUP", "nginx-eval-suite-cpu")
ROWS_DIR = "SUITE_CPU_ROWS_DIR"  # where each worker writes its rows


def group_dir(worker: str) -> Path:
    """The worker's control group, v1 when the cpuacct hierarchy is mounted, else v2."""
    if V1.is_dir():
        return V1 / GROUP / worker
    return V2 / GROUP / worker


def usage_seconds(group: Path) -> float:
    """Processor time the group has used, in seconds."""
    v1 = group / "cpuacct.usage"
    if v1.exists():
        return int(v1.read_text()) / 1e9
    for line in (group / "cpu.stat").read_text().splitlines():
        key, value = line.split()
        if key == "usage_usec":
            return int(value) / 1e6
    raise RuntimeError(f"{group}: no usage_usec in cpu.stat")


# The plugin's half: loaded into each worker by `-p suite_cpu`.
_state: dict = {"rows": []}


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or not os.environ.get(ROWS_DIR):
        return
    group = group_dir(worker)
    group.mkdir(parents=True, exist_ok=True)
    (group / "cgroup.procs").write_text(str(os.getpid()))
    _state["group"] = group


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    group = _state.get("group")
    if group is None:
        yield
        return
    cpu, wall = usage_seconds(group), time.monotonic()
    yield
    _state["rows"].append((item.nodeid, usage_seconds(group) - cpu, time.monotonic() - wall))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _state.get("group") is not None:
        out = Path(os.environ[ROWS_DIR]) / f"{os.environ['PYTEST_XDIST_WORKER']}.json"
        out.write_text(json.dumps(_state["rows"]))


# The script's half.
def suite_command(tests: list[str], extra: list[str]) -> list[str]:
    """.ci/run's pytest command with this plugin, `extra` added and `tests` for its paths."""
    (line,) = [
        ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if "-m pytest" in ln
    ]
    words = line.split()
    return [sys.executable, *words[1:-1], "-p", "suite_cpu", *extra, *tests]


def summary(rows: list[list], top: int) -> str:
    total = sum(r[1] for r in rows)
    modules: Counter[str] = Counter()
    for nodeid, cpu, _ in rows:
        modules[nodeid.split("::")[0]] += cpu
    lines = [f"{len(rows)} tests, {total:.0f} s of processor time", "", "heaviest tests:"]
    for nodeid, cpu, wall in sorted(rows, key=lambda r: -r[1])[:top]:
        lines.append(f"  {cpu:7.1f} s  ({wall:6.1f} s wall)  {nodeid}")
    lines += ["", "heaviest modules:"]
    lines += [f"  {cpu:7.1f} s  {module}" for module, cpu in modules.most_common(top)]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("suite-cpu.json"))
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--tests", nargs="+", default=["tests"], help="test paths (tests)")
    parser.add_argument("extra", nargs="*", help="more pytest options (after --)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("suite_cpu: needs root, to make control groups", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as rows_dir:
        env = dict(os.environ, **{ROWS_DIR: rows_dir})
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(Path(__file__).parent), env.get("PYTHONPATH")) if p
        )
        start = time.monotonic()
        proc = subprocess.run(suite_command(args.tests, args.extra), cwd=ROOT, env=env)
        wall = time.monotonic() - start
        rows = [
            row for f in sorted(Path(rows_dir).glob("*.json")) for row in json.loads(f.read_text())
        ]
    args.out.write_text(json.dumps(rows))
    print(f"pytest exited {proc.returncode} after {wall:.1f} s")
    print(summary(rows, args.top))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
