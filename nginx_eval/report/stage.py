"""Stage 9, report: ``results/<run>/report.md``, ``report.json``, ``report-chart.png`` and,
when some mode has agent time or cost, ``report-distributions.png``; with ``compare=OTHER``, also
``compare-<OTHER>.md|.json``.

Rendered from result files only, never by running anything: every mode of the run that has a
``results.jsonl`` (the modes of this invocation and any other mode dir on disk, such as an earlier
``predictions=`` run), the run's ``validation.json`` if there is one, the per-task ``build.json``
and ``prove.json`` (the compiler that built, the Perl and OpenSSL the tests ran with:
toolchain()), and the templates (``templates/report*.j2``). Two doit tasks render it:
``report:markdown`` (`doit run report run=NAME`, no dependencies; ``report`` is it and then the
run's site, report/site.py) and ``<bench>:report`` (part of `doit run nginx`, after every mode); a
`doit run` of some modes (`doit run nginx:gold`) renders it and the site at its end too
(progress.py), and ``power`` (`doit run power detect=10`) prints how many tasks or repeats a
difference needs. They are up to date when the digest of what the report is made from equals the
``inputs`` stored in report.json, so editing a template re-renders the report and nothing else.

Outcome of a cell: the ``outcome`` of the row in results.jsonl (core/outcomes.py's outcome(), the
one definition; computed from the row's other fields for rows written before it existed)::

    PASS  resolved             the agent's patch resolves the task (even after a timeout)
    ENV   env_error            the tests could not say (skipped file, missing module): untrusted
    TO    timeout              the agent hit its time limit
    ERR   agent_error          the agent failed or could not start
    PF    patch_failed         the patch does not apply
    CF    compile_failed       the patched tree does not build
    PART  partially_resolved   some but not all fail_to_pass assertions pass
    FAIL  unresolved
    INFRA  infra_error         not scored: the API or the network failed (after every retry)
    BUDGET not_run             not scored: the run's budget (max_cost) was spent before it started
    CONTAM contaminated        not scored: the fix reached the agent

A cell links to the task's grade.json and, when agent.json names one, to the agent's trajectory
(``<mode>/<id>/agent/trajectory.md``). The header names the agent CLI version(s) the run's agent
records name (agent.json's ``agent_version``); the time and cost table shows the tokens read from
and written to the prompt cache apart from the other input tokens when the records have them.

Statistics (stats.py names the methods and the libraries): a task scores 1 when resolved, else 0.
A mode's resolved rate counts every task of the run (a missing result scores 0) except those it
does not score (outcomes.NOT_SCORED: infra_error, not_run), which are counted apart and are in no
rate, interval or comparison, as SWE-bench leaves its error ids out; it has a Wilson 95%
interval. An *arm* is what comparisons compare: a mode, or a mode family (``raw``, ``raw-r2``,
..., from ``repeats = k`` in modes.toml) taken together, whose per-task score is the mean over its
repeats and whose interval uses the standard error clustered by task. Every pair of arms is
compared on the tasks both have results for (pairs with the baseline first, the baseline second);
p-values are adjusted with Holm's method over all pairs. ``cutoff=YYYY-MM-DD`` splits tasks by
their ``fix_date``; ``compare=OTHER`` compares each arm with the same arm in run OTHER;
``cross=OTHER`` sets this run beside run OTHER of the other benchmark (report/cross.py).

A SWE-bench run's rows get their outcome from the official harness's reports (report/
evaluation.py, which also says which report each mode is graded by and the grading command of
those that are not); an instance of a report's error_ids is ``eval_error`` (EVAL), not scored.

``report.json``::

    {"schema_version": 2, "run", "benchmark", "benchmark_sha256",
     "benchmark_version": the task file's version | null (unversioned),
     "result_versions": [{"version": str | null, "modes": {mode: tasks}}],   # the versions the
                        # results were graded under, oldest first (report_data.result_versions)
     "inputs",
     "tasks": [the run's task ids: every total_instances counts these], "benchmark_tasks": n,
     "level": 0.95, "alpha": 0.05, "seed": stats.SEED,
     "modes": {mode: {SWE-bench run report fields: "total_instances", "submitted_instances",
                      "completed_instances", "resolved_instances", "unresolved_instances",
                      "empty_patch_instances", "error_instances", "submitted_ids",
                      "completed_ids", "incomplete_ids", "resolved_ids", "unresolved_ids",
                      "empty_patch_ids", "error_ids"; and "outcomes": {instance_id: outcome},
                      "outcome_counts": {outcome: n},   # infra_error and not_run: agent
                                                        # modes only
                      agent modes only: "scored_instances" (the rate's denominator),
                      "infra_error_instances", "infra_error_ids", "not_run_instances",
                      "not_run_ids", "agent_versions": [str],
                      graded with rerun_failed=1 only: "verdict_changed_on_rerun_instances",
                      "verdict_changed_on_rerun_ids" (tasks whose verdict a rerun changed),
                      "resolved_rate": resolved / scored tasks | null (none scored),
                      "resolved_interval": [low, high] | null,     # Wilson, 95%
                      "cost_usd": total | null,
                      "cost_per_resolved": {"value": usd | null,
                                            "interval": [low, high | null] | null},
                                            # seeded bootstrap over tasks; high null: unbounded
                      "agent_seconds": {"n", "total", "mean", "median", "min", "q1", "q3", "max"},
                      "agent_commands": [{"commands": [[phase, command]], "model": str | null,
                                          "instance_ids": [...]}]}},
                      # the commands that ran (agent.json's command_template, via
                      # results.jsonl), one entry per distinct command line; [] for modes
                      # without an agent or records from before the field
     "families": {family: {"repeats", "resolved_rates", "mean", "min", "max", "stdev",
                           "pass_at_1", "pass_at_k", "k",
                           "se": clustered standard error | null,   # by task (Miller 2024)
                           "interval": [low, high] | null}},
     "arms": {arm: {"modes": [mode names], "repeats": k, "rate", "interval": [low, high] | null,
                    "interval_method": "wilson" | "clustered by task",
                    "cost_per_resolved": {"value", "interval"}}},
     "comparisons": [{"a", "b",               # arms; difference = rate(a) - rate(b)
                      "method": "mcnemar" (one run per task each) | "permutation" (repeats),
                      "tasks": n compared (both have results), "a_rate", "b_rate",
                      "difference", "interval": [low, high] | null,
                      "interval_method": "newcombe" | "bootstrap BCa" | ...,
                      "p_value", "p_holm",
                      mcnemar: "both", "a_only", "b_only", "neither", "discordance";
                      permutation: "a_better", "b_better", "ties", "sd",
                      "detectable": smallest difference detected with 80% power | null,
                      "sentence": the comparison in words}],
     "power": {"power": 0.8, "alpha": 0.05, "tasks", "median_detectable" | null,
               "min_detectable", "max_detectable", "comparisons": n, "estimable": n,
               "disagreeing": pairs that disagree on some task,
               "undetectable": [{"a", "b", "disagree", "tasks"}]},   # pairs that disagree
                                                                       # and detect nothing
     "swebench": null | {"evaluation_dir", "modes": [...]},   # a SWE-bench run's grading
                                        # (report/evaluation.py: Evaluation.modes)
     "cross": null | {...},             # cross=RUN: the section over two benchmarks (cross.py)
     "breakdowns": {"area": [{"label", "tasks", "cells": [{"arm", "resolved" (one run),
                                                            "rate", "interval"}]}],
                    "tests": [same as area, label "nginx-tests" | "authored"; only sources
                              with tasks],
                    "fix_date": {"cutoff": "YYYY-MM-DD" | null, "groups": [same as area]}},
     "figures": [the figure files report.md shows, beside it]}

``compare-<OTHER>.json`` (``doit run report run=A compare=B``): {"schema_version": 2, "run",
"other", "benchmark", "inputs", "tasks": [ids in both runs], "benchmark_sha256": {run: sha},
"benchmark_version": {run: version | null} (run.json's),
"arms": {arm: {run: {"rate", "interval", "repeats", "commands"}}}, "comparisons": [as above,
with "a" and "b" the two runs' arm, plus "arm", "only_here": [ids], "only_other": [ids]]}.

In SWE-bench's terms an *error* is an instance the evaluation could not judge: here env_error,
patch_failed, infra_error and not_run (the last two also outside the resolved rate's
denominator). A task with no row in a mode's results.jsonl is counted in total_instances only
(``incomplete_ids``): a ``predictions=`` file without a row for it, or a task not run yet.

The report's warnings list results graded under more than one version of the benchmark (or
another than the task file's now), and, by mode and task, every agent that did not complete
(agent error, timeout, infra error, with agent.json's reason; per mode, the tasks left by the
budget), environment errors, tasks not validated as valid, modes with missing tasks, modes whose
tasks ran different commands, and modes with tasks whose verdict a rerun of a failing test file
changed (rerun_failed=1).

Where each part lives: report/records.py reads the run's records; report/modes.py computes each
mode's and family's figures; report/arms.py the arms, comparisons, power summary and breakdowns;
report/data.py assembles what report.md shows and what report.json holds; report/markdown.py and
report/charts.py render it; report/compare.py compares two runs; report/power.py plans power. This
module says what the report is made from, when it is up to date, writes it, and yields its tasks.
"""

from .. import __version__
from ..core import jsonio, stamps
from ..core.console import say
from ..core.errors import failing_on_user_error
from ..run.record import run_tasks
from .apart import run_apart
from .charts import draw_chart, draw_distributions
from .compare import collect_comparison, other_layout
from .cross import collect_cross
from .data import SCHEMA_VERSION, collect, json_comparison, method_settings, report_json
from .evaluation import report_files
from .markdown import COMPARE_TEMPLATE, render
from .power import print_plan
from .records import modes_on_disk, toolchain_records
from .site import SITE_TASK


# -- what the report is made from, and when it is up to date ---------------------------------------
def input_files(layout, configured, templates_dir):
    """Every file the report is made from (the digest's input)."""
    names = modes_on_disk(layout, configured)
    files = [layout.results_jsonl(m) for m in names]
    if layout.validation_json.exists():
        files.append(layout.validation_json)
    files += toolchain_records(layout, names)
    files += report_files(layout)  # a SWE-bench run's official reports (evaluation.py)
    files += sorted(p for p in templates_dir.rglob("report*.j2"))
    return [str(f) for f in files]


def cross_files(layout, other, configured):
    """What the cross-benchmark section reads of run `other` (cross.py)."""
    theirs = other_layout(layout, other)
    return [
        str(f)
        for f in [theirs.results_jsonl(m) for m in modes_on_disk(theirs, configured)]
        + [theirs.run_json]
        + report_files(theirs)
    ]


def report_inputs(layout, bench, tasks, modes, baseline, templates_dir, cutoff=None, cross=None):
    """The digest of everything report.json is made from (stored as its "inputs")."""
    config = {
        "benchmark_sha256": bench.digest,
        "baseline": baseline,
        "tasks": [t.instance_id for t in tasks],
        "modes": {n: m.to_json() for n, m in sorted(modes.items())},
        "version": __version__,
        "cutoff": cutoff,
        "methods": method_settings(),
    }
    hosts = {n: list(m.allow_hosts) for n, m in sorted(modes.items()) if m.allow_hosts}
    if hosts:
        # The header names them; only when some mode has them, so that other reports keep
        # their digest.
        config["allow_hosts"] = hosts
    files = input_files(layout, list(modes), templates_dir)
    if cross:  # only then: the digest of a report without it stays what it was
        config["cross"] = cross
        files += cross_files(layout, cross, list(modes))
    return stamps.inputs_digest(config, files)


def comparison_inputs(layout, other, bench, tasks, modes, templates_dir):
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
    layout, bench, tasks, modes, baseline, templates_dir, cutoff=None, compare=None, cross=None
):
    """doit uptodate: report.json was made from exactly what is on disk now, for the run's tasks
    (and the markdown and the figures it shows still exist); with `compare`, the comparison
    too."""
    made = jsonio.read_json(layout.report_json) or {}
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
        other = jsonio.read_json(layout.compare_json(compare)) or {}
        fresh = (
            other.get("inputs")
            == comparison_inputs(layout, compare, bench, tasks, modes, templates_dir)
            and layout.compare_md(compare).exists()
        )
    return fresh


# -- writing --------------------------------------------------------------------------------------
def write_comparison(layout, other, bench, tasks, modes, templates_dir):
    """compare-<other>.md and .json: this run's arms against run `other`'s."""
    tasks = run_tasks(layout, bench, tasks)
    inputs = comparison_inputs(layout, other, bench, tasks, modes, templates_dir)
    data = collect_comparison(layout, other, bench, tasks, modes)
    jsonio.write_text(layout.compare_md(other), render(data, templates_dir, COMPARE_TEMPLATE))
    jsonio.write_json(
        layout.compare_json(other),
        {
            "schema_version": SCHEMA_VERSION,
            "inputs": inputs,
            **{k: v for k, v in data.items() if k not in ("date", "comparisons")},
            "comparisons": [json_comparison(c) for c in data["comparisons"]],
        },
    )
    say(f"comparison: {layout.compare_md(other)}")
    return data


def write_report(
    layout,
    bench,
    tasks,
    modes,
    baseline,
    templates_dir,
    cutoff=None,
    compare=None,
    cross=None,
    quiet=False,
):
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
    jsonio.write_text(layout.report_md, render(data, templates_dir))
    jsonio.write_json(layout.report_json, report_json(layout, bench, inputs, data))
    if not quiet:
        say(f"report: {layout.report_md}")
    if compare:
        write_comparison(layout, compare, bench, tasks, modes, templates_dir)
    return data


def render_report(*args):
    """doit action: write_report in a process of its own (apart.py: the statistics and charts
    stay out of doit), returning nothing (a dict would go to doit's database)."""
    run_apart(write_report, *args)


def gen_tasks(ctx):
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
    reports = report_files(ctx.layout) + (
        report_files(other_layout(ctx.layout, cross)) if cross else []
    )
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
    yield dict(
        common,
        basename=ctx.benchmark.name,
        name="report",
        doc=f"the report, after every mode of {ctx.benchmark.name}",
        task_dep=[f"{ctx.benchmark.name}:{m.name}" for m in ctx.group_mode_list()],
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
