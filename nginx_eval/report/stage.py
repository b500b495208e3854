"""Stage 9, report: ``results/<run>/report.md``, ``report.json``, ``report-chart.png`` and,
when some mode has agent time or cost, ``report-distributions.png``; with ``compare=OTHER``, also
``compare-<OTHER>.md|.json``. What they hold, and their statistics: docs/report.md.

Rendered from result files only, never by running anything: every mode of the run that has a
``results.jsonl`` (the modes of this invocation and any other mode dir on disk), the run's
``validation.json`` if there is one, the per-task ``build.json`` and ``prove.json`` (the toolchain,
compiler, Perl and OpenSSL: records.toolchain) and ``agent/trajectory.atif.json`` (what the
agents did: process.py), a SWE-bench run's official reports (evaluation.py),
and the templates (``templates/report*.j2``). Two doit tasks render it: ``report:markdown`` (`doit
run report run=NAME`; ``report`` is it and then the site) and ``<bench>:report`` (part of `doit run
nginx`); a `doit run` of some modes renders it at its end too (progress.py), and ``power`` prints
how many tasks or repeats a difference needs (power.py). They are up to date when the digest of what
the report is made from (report_inputs) equals the ``inputs`` stored in report.json, so editing a
template re-renders the report and nothing else.

Schemas: core/records.py's ReportJson (``report.json``, the outcomes of core/outcomes.py) and
CompareJson (``compare-<OTHER>.json``); report.json's ``cross`` is report/cross.py's.

Where each part lives: records.py reads the run's records; modes.py computes each mode's and
family's figures; arms.py the arms, comparisons, power summary and breakdowns; data.py assembles
what report.md shows and what report.json holds; markdown.py and charts.py render it; compare.py
compares two runs. This module says what the report is made from, when it is up to date, writes
it, and yields its tasks.
"""

from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..core import inputs, jsonio, stamps
from ..core.console import say
from ..core.errors import failing_on_user_error
from ..core.layout import Layout
from ..core.records import CompareJson, read_record, write_record
from ..core.stamps import TaskDict
from ..run.benchmark import AnyTask, Benchmark
from ..run.modes import AgentMode, Mode
from ..run.record import cross_runs, modes_on_disk, other_layout, run_tasks
from .apart import run_apart
from .charts import draw_chart, draw_distributions
from .compare import collect_comparison
from .cross import collect_cross
from .data import SCHEMA_VERSION, collect, json_comparison, method_settings, report_json
from .evaluation import report_files
from .markdown import COMPARE_TEMPLATE, render
from .power import print_plan
from .records import toolchain_records, trajectory_records
from .site import SITE_TASK

if TYPE_CHECKING:
    from ..run.context import StageContext


# -- what the report is made from, and when it is up to date ---------------------------------------
def input_files(layout: Layout, configured: Sequence[str], templates_dir: Path) -> list[str]:
    """Every file the report is made from (the digest's input)."""
    names = modes_on_disk(layout, configured)
    files = [layout.results_jsonl(m) for m in names]
    if layout.validation_json.exists():
        files.append(layout.validation_json)
    files += toolchain_records(layout, names)
    files += trajectory_records(layout, names)  # the process figures' (process.py)
    files += report_files(layout)  # a SWE-bench run's official reports (evaluation.py)
    files += sorted(p for p in templates_dir.rglob("report*.j2"))
    return [str(f) for f in files]


def cross_files(layout: Layout, other: str, configured: Sequence[str]) -> list[str]:
    """What the cross-benchmark section reads of the runs of cross=`other` (cross.py)."""
    files = []
    for run in cross_runs(other):
        theirs = other_layout(layout, run)
        files += [theirs.results_jsonl(m) for m in modes_on_disk(theirs, configured)]
        files += [theirs.run_json] + report_files(theirs)
    return [str(f) for f in files]


# report_inputs' optional fields at the value that leaves them out (core/inputs.py): no mode
# allows a host, no cross-benchmark section.
REPORT_INPUT_DEFAULTS: dict[str, Any] = {"allow_hosts": {}, "cross": None}


def report_inputs(
    layout: Layout,
    bench: Benchmark,
    tasks: Iterable[AnyTask],
    modes: Mapping[str, Mode],
    baseline: str | None,
    templates_dir: Path,
    cutoff: str | None = None,
    cross: str | None = None,
) -> str:
    """The digest of everything report.json is made from (stored as its "inputs")."""
    config: dict[str, Any] = {
        "benchmark_sha256": bench.digest,
        "baseline": baseline,
        "tasks": [t.instance_id for t in tasks],
        "modes": {n: m.to_json() for n, m in sorted(modes.items())},
        "version": __version__,
        "cutoff": cutoff,
        "methods": method_settings(),
        # the header names them
        "allow_hosts": {
            n: list(m.allow_hosts)
            for n, m in sorted(modes.items())
            if isinstance(m, AgentMode) and m.allow_hosts
        },
        "cross": cross or None,
    }
    files = input_files(layout, list(modes), templates_dir)
    if cross:
        files += cross_files(layout, cross, list(modes))
    return stamps.inputs_digest(inputs.canonical(config, REPORT_INPUT_DEFAULTS), files)


def comparison_inputs(
    layout: Layout,
    other: str,
    bench: Benchmark,
    tasks: Iterable[AnyTask],
    modes: Iterable[str],
    templates_dir: Path,
) -> str:
    """The digest of everything compare-<other>.json is made from (stored as its "inputs")."""
    theirs = other_layout(layout, other)
    files = [layout.results_jsonl(m) for m in modes_on_disk(layout, list(modes))]
    files += [theirs.results_jsonl(m) for m in modes_on_disk(theirs, list(modes))]
    files += [theirs.run_json] + report_files(layout) + report_files(theirs)
    files += sorted(p for p in templates_dir.rglob("report*.j2"))
    config = {
        "benchmark_sha256": bench.digest,
        "tasks": [t.instance_id for t in tasks],
        "other": other,
        "modes": sorted(modes),
        "version": __version__,
        "methods": method_settings(),
    }
    return stamps.inputs_digest(config, [str(f) for f in files])


def report_is_fresh(
    layout: Layout,
    bench: Benchmark,
    tasks: Sequence[AnyTask],
    modes: Mapping[str, Mode],
    baseline: str | None,
    templates_dir: Path,
    cutoff: str | None = None,
    compare: str | None = None,
    cross: str | None = None,
) -> bool:
    """doit uptodate: report.json was made from exactly what is on disk now, for the run's tasks
    (and the markdown and the figures it shows still exist); with `compare`, the comparison
    too."""
    made = read_record(layout.report_json) or {}
    tasks = run_tasks(layout, bench, tasks)
    # The figures report.md shows (report.json's "figures"; before the field, both charts).
    shown = made.get("figures", [layout.report_chart.name, layout.report_distributions.name])
    fresh = (
        made.get("inputs")
        == report_inputs(layout, bench, tasks, modes, baseline, templates_dir, cutoff, cross)
        and layout.report_md.exists()
        and all((layout.run_dir / name).exists() for name in shown)
    )
    if fresh and compare:
        other = read_record(layout.compare_json(compare)) or {}
        fresh = (
            other.get("inputs")
            == comparison_inputs(layout, compare, bench, tasks, modes, templates_dir)
            and layout.compare_md(compare).exists()
        )
    return fresh


# -- writing --------------------------------------------------------------------------------------
def compare_record(data: Mapping[str, Any], inputs: str) -> CompareJson:
    """compare-<other>.json of report/compare.py's collect_comparison data (its "date" is
    report.md's only)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "inputs": inputs,
        "version": data["version"],
        "run": data["run"],
        "other": data["other"],
        "benchmark": data["benchmark"],
        "benchmark_sha256": data["benchmark_sha256"],
        "benchmark_version": data["benchmark_version"],
        "tasks": data["tasks"],
        "run_tasks": data["run_tasks"],
        "other_tasks": data["other_tasks"],
        "arms": data["arms"],
        "only": data["only"],
        "unpaired": data["unpaired"],
        "comparisons": [json_comparison(c) for c in data["comparisons"]],
        "level": data["level"],
        "alpha": data["alpha"],
    }


def write_comparison(
    layout: Layout,
    other: str,
    bench: Benchmark,
    tasks: Sequence[AnyTask],
    modes: Mapping[str, Mode],
    templates_dir: Path,
) -> dict[str, Any]:
    """compare-<other>.md and .json: this run's arms against run `other`'s."""
    tasks = run_tasks(layout, bench, tasks)
    inputs = comparison_inputs(layout, other, bench, tasks, modes, templates_dir)
    data = collect_comparison(layout, other, bench, tasks, modes)
    jsonio.write_text(
        layout.compare_md(other),
        render(data, templates_dir, COMPARE_TEMPLATE, layout.compiled_templates),
    )
    write_record(layout.compare_json(other), compare_record(data, inputs))
    say(f"comparison: {layout.compare_md(other)}")
    return data


def write_report(
    layout: Layout,
    bench: Benchmark,
    tasks: Sequence[AnyTask],
    modes: Mapping[str, Mode],
    baseline: str | None,
    templates_dir: Path,
    cutoff: str | None = None,
    compare: str | None = None,
    cross: str | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """report.md, report.json and the charts (and the comparison with run `compare`; with
    `cross`, the section over this run's benchmark and run `cross`'s, cross.py). tasks: the
    command's selection, for a run without run.json; otherwise the run's tasks."""
    tasks = run_tasks(layout, bench, tasks)
    inputs = report_inputs(layout, bench, tasks, modes, baseline, templates_dir, cutoff, cross)
    data = collect(layout, bench, tasks, modes, baseline, cutoff=cutoff)
    if cross:
        data["cross"] = collect_cross(layout, bench, tasks, modes, cross)
        data["warnings"] += data["cross"]["warnings"]
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    draw_chart(data, layout.report_chart)
    draw_distributions(data, layout.report_distributions)  # none without agent figures
    jsonio.write_text(
        layout.report_md, render(data, templates_dir, compiled=layout.compiled_templates)
    )
    write_record(layout.report_json, report_json(layout, bench, inputs, data))
    if not quiet:
        say(f"report: {layout.report_md}")
    if compare:
        write_comparison(layout, compare, bench, tasks, modes, templates_dir)
    return data


def render_report(*args: Any) -> None:
    """doit action: write_report in a process of its own (apart.py: the statistics and charts
    stay out of doit), returning nothing (a dict would go to doit's database)."""
    run_apart(write_report, *args)


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    """``report:markdown``, ``report`` (it and the site), ``<bench>:report`` (after every mode of
    the benchmark; the site then comes at the end of the run, progress.py) and ``power``."""
    options = ctx.options
    baseline = options.baseline if options else None  # checked against the run's modes
    cutoff = options.cutoff if options else None
    compare = options.compare if options else None
    cross = options.cross if options else None
    args = [
        ctx.layout,
        ctx.benchmark,
        ctx.tasks,
        ctx.modes,
        baseline,
        ctx.layout.templates_dir,
        cutoff,
        compare,
        cross,
    ]
    fresh = (report_is_fresh, list(args))
    # The official SWE-bench reports the report reads, in the run's evaluation directory (and
    # the cross run's): no task makes them, so they are file dependencies; a report that comes
    # later is seen by the digest check. No file_dep on results.jsonl: they are targets of the
    # modes' tasks, and a file_dep on them would make `doit run report` run the modes.
    # Freshness is the digest check above, evaluated when the task is reached, after its
    # task_dep.
    reports = report_files(ctx.layout) + [
        f for run in cross_runs(cross) for f in report_files(other_layout(ctx.layout, run))
    ]
    common = {
        "actions": [(failing_on_user_error, [render_report, *args])],
        "uptodate": [fresh],
        "file_dep": [str(f) for f in reports],
        "verbosity": 2,
    }
    yield dict(
        common,
        basename="report",
        name="markdown",
        doc="render results/<run>/report.md from the run's result files (runs nothing else)",
    )
    # What users run: the report, then the site that shows it (report/site.py), whose index
    # reads report.json. Yielded after its subtask, it replaces the group doit made of it.
    yield {
        "basename": "report",
        "name": None,
        "task_dep": ["report:markdown", SITE_TASK],
        "doc": "render results/<run>/report.md and the site results/<run>/site/ from the "
        "run's result files (runs nothing else)",
    }
    after_modes = {
        "basename": ctx.benchmark.name,
        "name": "report",
        "doc": f"the report, after every mode of {ctx.benchmark.name}",
        "task_dep": [f"{ctx.benchmark.name}:{m.name}" for m in ctx.group_mode_list()],
    }
    # report=0: the run ends with its modes; `doit run report` renders the report later.
    yield (
        dict(common, **after_modes)
        if not options or options.report
        else {
            **after_modes,
            "actions": [],
        }
    )
    detect = tuple(d / 100 for d in (options.detect if options and options.detect else ()))
    yield {
        "basename": "power",
        "doc": "how many tasks (or repeats) a difference of detect=D points needs, from "
        "this run's results (runs nothing else)",
        "actions": [
            (
                failing_on_user_error,
                [
                    run_apart,
                    print_plan,
                    ctx.layout,
                    ctx.benchmark,
                    ctx.tasks,
                    ctx.modes,
                    baseline,
                    detect,
                ],
            )
        ],
        "uptodate": [False],
        "verbosity": 2,
    }
