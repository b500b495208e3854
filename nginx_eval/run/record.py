"""What a run is: ``results/<run>/run.json``, written when a run first starts.

A run belongs to one benchmark: results of a second benchmark under the same run name would
share the modes' directories and the report's denominator, so a command that names another
benchmark than the run's is refused, with one line, before any work.

Every command that scores or validates the benchmark (``doit run nginx:raw``, ``doit run nginx``,
a bare ``doit``, ``nginx:validate``) adds its selection (``instances=``, ``limit=``, or the rows
of ``predictions=``; the whole benchmark without them) to the run's: the run's tasks are every
task some such command selected, and that is the report's denominator. A task named directly
(``doit run prove:nginx/gold/ID``, a stage such as ``doit run build``) selects nothing, so that
redoing one unit never widens the run (docs/running.md#a-run).

``run.json`` (core/records.py: RunJson)::

    {"schema_version": 1, "run", "benchmark": name, "benchmark_file": path relative to the
     project, "benchmark_sha256", "benchmark_version": the file's version | null (unversioned),
     "harness_version", "created", "updated",
     "selections": [{"instances": [ids] | null, "limit": n | null,
                     "predictions": file name, only with predictions=}],   # as given, each once
     "task_ids": [ids, in the benchmark's order], "modes": [names],
     "toolchain": {"name", "digest"}, the toolchain of the run's latest command (core/rootfs.py),
     "toolchains": [the same, every toolchain a command of the run used, each once],
     "sandbox_self_test": the last self-test of the agents' sandbox (records.SelfTest), absent
                          before the run's first isolated agent}
"""

import datetime
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, cast

from .. import __version__
from ..core import rootfs
from ..core.errors import UserError
from ..core.records import FORMAT_VERSION, RunJson, Selection, SelfTest, read_record, write_record

if TYPE_CHECKING:
    from ..core.layout import Layout
    from .benchmark import AnyTask, Benchmark

SCHEMA_VERSION = 1


def read_run(layout: "Layout") -> RunJson | None:
    """The run's record, or None before its first command."""
    record = read_record(layout.run_json)
    # A record of the run is a JSON object with a benchmark: RunJson from here on.
    return cast(RunJson, record) if isinstance(record, dict) and record.get("benchmark") else None


def check_benchmark(layout: "Layout", bench_name: str) -> None:
    """A command for benchmark `bench_name` in this run: refused if the run holds another."""
    record = read_run(layout)
    if record and record["benchmark"] != bench_name:
        raise UserError(
            f"run {layout.run!r} holds results of benchmark "
            f"{record['benchmark']!r} ({record['benchmark_file']}), not "
            f"{bench_name!r}: choose another run name (run=NAME)",
            field="run",
        )


def bind_run(
    layout: "Layout",
    bench: "Benchmark",
    tasks: Iterable["AnyTask"],
    modes: Iterable[str],
    instances: Iterable[str] | None = None,
    limit: int | None = None,
    predictions: str | None = None,
    *,
    selects: bool = True,
) -> RunJson:
    """Record that this command runs `tasks` (and `modes`) of `bench` in the run; return the
    record. selects=False (a task named directly): only the run's benchmark is recorded, and
    its selection, tasks and modes stay. Raises UserError when the run belongs to another
    benchmark."""
    check_benchmark(layout, bench.name)
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    record = read_run(layout) or cast(
        RunJson,
        {  # a new run's: the rest follows below
            "schema_version": SCHEMA_VERSION,
            "format_version": FORMAT_VERSION,
            "run": layout.run,
            "benchmark": bench.name,
            "benchmark_file": os.path.relpath(bench.path, layout.root),
            "created": now,
            "selections": [],
            "task_ids": [],
            "modes": [],
        },
    )
    before = dict(record)
    toolchain = rootfs.record(rootfs.current())
    record.update(
        {
            "benchmark_sha256": bench.digest,
            "benchmark_version": bench.version,
            "harness_version": __version__,
            "toolchain": toolchain,
            "toolchains": record.get("toolchains", [])
            + ([toolchain] if toolchain not in record.get("toolchains", []) else []),
        }
    )
    if selects:
        selection: Selection = {"instances": list(instances) if instances else None, "limit": limit}
        if predictions:
            selection["predictions"] = os.path.basename(predictions)
        chosen = set(record["task_ids"]) | {t.instance_id for t in tasks}
        record.update(
            {
                "selections": record["selections"]
                + ([selection] if selection not in record["selections"] else []),
                "task_ids": [t.instance_id for t in bench.tasks if t.instance_id in chosen],
                "modes": sorted(set(record["modes"]) | set(modes)),
            }
        )
    if record != before:
        record["updated"] = now
        write_record(layout.run_json, record)
    return record


def run_tasks(
    layout: "Layout", bench: "Benchmark", fallback: Iterable["AnyTask"]
) -> list["AnyTask"]:
    """The tasks of the run (its record's task_ids, in the benchmark's order); `fallback` for a
    run that has none yet."""
    record = read_run(layout)
    if not record or record["benchmark"] != bench.name:
        return list(fallback)
    wanted = set(record["task_ids"])
    return [t for t in bench.tasks if t.instance_id in wanted]


def note_self_test(layout: "Layout", result: SelfTest) -> None:
    """Keep the sandbox's latest self-test in run.json (before any agent of the command)."""
    record = read_run(layout)
    if record is not None:
        write_record(layout.run_json, {**record, "sandbox_self_test": result})
