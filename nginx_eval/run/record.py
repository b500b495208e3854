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

import dataclasses
import datetime
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from .. import __version__
from ..core import rootfs
from ..core.errors import UserError, did_you_mean
from ..core.records import FORMAT_VERSION, RunJson, Selection, SelfTest, read_record, write_record
from .benchmark import load_benchmarks

if TYPE_CHECKING:
    from ..core.layout import Layout
    from .benchmark import AnyTask, Benchmark
    from .options import Options

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


# -- What is on disk of a run and of the runs its options name (modes_on_disk, is_run), so that
# baseline=, compare=, cross= and run= are checked before the pipeline is built: check_options
# (pipeline.load_context), check_is_run and check_has_results (cli.load_dodo).
def check_options(
    layout: "Layout", options: "Options", record: Mapping[str, Any], modes: Iterable[str]
) -> None:
    """The options that name a run, or a mode of one, hold for what is on disk: baseline= a mode
    of this run (run_modes: `modes` configured, recorded in `record`, with results), compare=
    another run with results, cross= a run of another benchmark. One line for the first that
    does not."""
    options.check_baseline(run_modes(layout, record, modes))
    check_compare(layout, options.compare)
    check_cross(layout, options.cross)


def run_modes(layout: "Layout", record: Mapping[str, Any], modes: Iterable[str]) -> set[str]:
    """The modes of the run: configured (`modes`), recorded in run.json, or with results."""
    return set(modes) | set(record.get("modes") or []) | set(modes_on_disk(layout, []))


def modes_on_disk(layout: "Layout", configured: Iterable[str]) -> list[str]:
    """Modes with a results.jsonl in the run: configured ones first (in their order), then the
    others."""
    found = (
        {p.parent.name for p in layout.run_dir.glob("*/results.jsonl")}
        if layout.run_dir.is_dir()
        else set()
    )
    ordered = [m for m in configured if m in found]
    return ordered + sorted(found - set(ordered))


def has_results(layout: "Layout") -> bool:
    """Whether a mode of the run has results (a results.jsonl): what a report compares."""
    return bool(modes_on_disk(layout, []))


def is_run(layout: "Layout") -> bool:
    """Whether the run exists: its record (run.json), a mode's results, or its workspaces."""
    return (
        read_run(layout) is not None
        or has_results(layout)
        or (layout.cache / "workspaces" / layout.run).is_dir()
    )


def runs_with_results(layout: "Layout") -> list[str]:
    """The names of the runs under the results root that have results, this one too."""
    root = layout.results_root
    names = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    return [n for n in names if has_results(dataclasses.replace(layout, run=n))]


def _others(layout: "Layout") -> str:
    others = runs_with_results(layout)
    return (
        f"runs with results: {', '.join(others)}"
        if others
        else "no run has results yet (`doit` scores gold and none)"
    )


def check_has_results(layout: "Layout", bench_name: str = "nginx") -> None:
    """A command that only reads the run (report, site, power) names a run in which some mode
    has results, or fails with one line naming it and the runs that have results: rendering a
    report of an empty run would create the run with it, and a run that holds only its task
    validation (`doit run <bench>:validate`) has no mode to show, compare or plan for."""
    if has_results(layout):
        return
    if read_run(layout) is not None:
        validated = " (it holds a task validation only)" if layout.validation_json.exists() else ""
        raise UserError(
            f"run={layout.run}: no mode has results in {layout.run_dir}{validated}: a report "
            f"compares modes; score one first (`doit run {bench_name}:gold run={layout.run}`)"
        )
    raise UserError(f"run={layout.run}: no results in {layout.run_dir}; {_others(layout)}")


def check_is_run(layout: "Layout") -> None:
    """`doit clean run=NAME` names a run that exists (is_run), as report and power do: a typo
    would otherwise clean nothing and say "removed 0 workspaces"."""
    if not is_run(layout):
        raise UserError(
            f"run={layout.run}: no such run (nothing in {layout.run_dir} or its cache); "
            f"{_others(layout)}"
        )


def other_layout(layout: "Layout", other: str) -> "Layout":
    """The layout of run `other` (same results root and cache)."""
    return dataclasses.replace(layout, run=other)


def check_compare(layout: "Layout", other: str | None) -> None:
    """compare=OTHER names another run with results."""
    if not other:
        return
    if other == layout.run:
        raise UserError(f"compare={other}: that is this run; name another run")
    theirs = other_layout(layout, other)
    if not modes_on_disk(theirs, []):
        runs = (
            sorted(
                p.name for p in layout.results_root.iterdir() if p.is_dir() and p.name != layout.run
            )
            if layout.results_root.is_dir()
            else []
        )
        raise UserError(
            f"compare={other}: no results in {theirs.run_dir}{did_you_mean(other, runs)}"
        )


def other_run(layout: "Layout", other: str) -> tuple["Layout", "Benchmark", RunJson]:
    """(layout, benchmark, record) of run `other`; UserError when it has no record or holds the
    same benchmark as this run (compare=OTHER compares two runs of one benchmark)."""
    theirs = dataclasses.replace(layout, run=other)
    record = read_run(theirs)
    if other == layout.run or record is None:
        raise UserError(
            f"cross={other}: "
            + (
                "that is this run; name a run of the other benchmark"
                if other == layout.run
                else f"no run.json in {theirs.run_dir}: not a run"
            )
        )
    benchmarks = load_benchmarks(layout.tasks_dir)
    if record["benchmark"] not in benchmarks:
        raise UserError(
            f"cross={other}: its benchmark {record['benchmark']!r} is not in {layout.tasks_dir}"
        )
    mine = read_run(layout)
    if mine and mine["benchmark"] == record["benchmark"]:
        raise UserError(
            f"cross={other}: it holds benchmark {record['benchmark']!r}, as this "
            f"run does; compare={other} compares two runs of one benchmark"
        )
    return theirs, benchmarks[record["benchmark"]], record


def cross_runs(other: str | None) -> list[str]:
    """The runs of cross=B or cross=B,C (one report over two or three benchmarks)."""
    return [o.strip() for o in (other or "").split(",") if o.strip()]


def check_cross(layout: "Layout", other: str | None) -> None:
    """cross=OTHER[,OTHER] names runs of other benchmarks than this run's and each other's
    (before any work)."""
    held: dict[str, str] = {}
    for run in cross_runs(other):
        _, bench, _ = other_run(layout, run)
        if bench.name in held:
            raise UserError(
                f"cross={other}: runs {held[bench.name]} and {run} both hold benchmark "
                f"{bench.name!r}; name one run of each other benchmark"
            )
        held[bench.name] = run
