"""Stage 9, report: ``results/<run>/report.md``, ``report.json`` and ``report-chart.png``.

Rendered from result files only, never by running anything: every mode of the run that has a
``results.jsonl`` (the modes of this invocation and any other mode dir on disk, such as an earlier
``predictions=`` run), the run's ``validation.json`` if there is one, and the templates
(``templates/report.md.j2``). Two doit tasks render it: ``report`` (`doit run report run=NAME`,
no dependencies) and ``<bench>:report`` (part of `doit run nginx`, after every mode). Both are up
to date when the digest of what the report is made from equals the ``inputs`` stored in
report.json, so editing a template re-renders the report and nothing else.

Outcome of a cell, from the row in results.jsonl (first match wins)::

    PASS  resolved             the agent's patch resolves the task (even after a timeout)
    ENV   env_error            the tests could not say (skipped file, missing module): untrusted
    TO    timeout              the agent hit its time limit
    ERR   agent_error          the agent failed or could not start
    PF    patch_failed         the patch does not apply
    CF    compile_failed       the patched tree does not build
    PART  partially_resolved   some but not all fail_to_pass assertions pass
    FAIL  unresolved

``report.json``::

    {"schema_version": 1, "run", "benchmark", "benchmark_sha256", "inputs",
     "tasks": [the run's task ids: every total_instances counts these], "benchmark_tasks": n,
     "modes": {mode: {SWE-bench run report fields: "total_instances", "submitted_instances",
                      "completed_instances", "resolved_instances", "unresolved_instances",
                      "empty_patch_instances", "error_instances", "submitted_ids",
                      "completed_ids", "incomplete_ids", "resolved_ids", "unresolved_ids",
                      "empty_patch_ids", "error_ids"; and "outcomes": {instance_id: outcome}}},
     "families": {family: {"repeats", "resolved_rates", "mean", "min", "max", "stdev",
                           "pass_at_1", "pass_at_k"}}}

In SWE-bench's terms an *error* is an instance the evaluation could not judge: here env_error and
patch_failed. A task with no row in a mode's results.jsonl is counted in total_instances only.
"""

import datetime
import math
import os
import statistics
import subprocess
from functools import lru_cache

import jinja2

from . import __version__, jsonio
from .runrecord import run_tasks

OUTCOMES = ("resolved", "partially_resolved", "unresolved", "compile_failed", "patch_failed",
            "timeout", "agent_error", "env_error")
CELL = {"resolved": "PASS", "partially_resolved": "PART", "unresolved": "FAIL",
        "compile_failed": "CF", "patch_failed": "PF", "timeout": "TO", "agent_error": "ERR",
        "env_error": "ENV"}
ERROR_OUTCOMES = ("env_error", "patch_failed")
CHART_NAME = "report-chart.png"
TEMPLATE = "report.md.j2"


def outcome(row):
    if row.get("resolved"):
        return "resolved"
    if row.get("status") == "env_error":
        return "env_error"
    if row.get("agent_status") == "timeout":
        return "timeout"
    if row.get("agent_status") in ("failed", "error"):
        return "agent_error"
    if row.get("status") in OUTCOMES:
        return row["status"]
    return "unresolved"


# -- reading the run -------------------------------------------------------------------------------
def modes_on_disk(layout, configured):
    """Modes with a results.jsonl in the run: configured ones first (in their order), then others."""
    found = {p.parent.name for p in layout.run_dir.glob("*/results.jsonl")} \
        if layout.run_dir.is_dir() else set()
    ordered = [m for m in configured if m in found]
    return ordered + sorted(found - set(ordered))


def input_files(layout, configured, templates_dir):
    """Every file the report is made from (the digest's input)."""
    files = [layout.results_jsonl(m) for m in modes_on_disk(layout, configured)]
    if layout.validation_json.exists():
        files.append(layout.validation_json)
    files += sorted(p for p in templates_dir.rglob("report*.j2"))
    return [str(f) for f in files]


def report_inputs(layout, bench, tasks, modes, baseline, templates_dir):
    config = {"benchmark_sha256": bench.digest, "baseline": baseline,
              "tasks": [t.instance_id for t in tasks],
              "modes": {n: m.to_json() for n, m in sorted(modes.items())}, "version": __version__}
    return jsonio.inputs_digest(config, input_files(layout, list(modes), templates_dir))


def report_is_fresh(layout, bench, tasks, modes, baseline, templates_dir):
    """doit uptodate: report.json was made from exactly what is on disk now, for the run's tasks
    (and the chart and markdown still exist)."""
    made = jsonio.read_json(layout.report_json) or {}
    tasks = run_tasks(layout, bench, tasks)
    return (made.get("inputs") == report_inputs(layout, bench, tasks, modes, baseline,
                                                templates_dir)
            and layout.report_md.exists() and layout.report_chart.exists())


def family_of(name, modes):
    if name in modes:
        return modes[name].family, modes[name].repeat
    head, sep, tail = name.rpartition("-r")
    if sep and tail.isdigit() and head:
        return head, int(tail)
    return name, 1


@lru_cache(maxsize=1)
def toolchain():
    def first_line(argv, pick=lambda out: out.splitlines()[0] if out else "?"):
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return "not found"
        return pick(out)
    return {"compiler": first_line(["cc", "--version"]),
            "perl": first_line(["perl", "-e", "print $^V"]),
            "openssl": first_line(["openssl", "version"]),
            "prove": first_line(["prove", "--version"])}


def gold_files(layout, bench_tasks):
    """{instance_id: files the fix commit touches}, from the gold mode's results if it ran, else
    from the bare clone."""
    files = {}
    gold = layout.results_jsonl("gold")
    if gold.exists():
        for row in jsonio.read_jsonl(gold):
            files[row["instance_id"]] = list((row.get("patch") or {}).get("files") or [])
    from .patch import gold_diff, patch_stats
    for task in bench_tasks:
        bare = layout.bare_repo(task.repo)
        if task.instance_id not in files and bare.is_dir():
            try:
                diff = gold_diff(bare, task.base_commit, task.fix_commit)
            except Exception:       # a clone without the fix commit: no overlap figure
                continue
            files[task.instance_id] = patch_stats(diff)["files"]
    return files


def _rate(n, total):
    return round(n / total, 4) if total else 0.0


def _summary_numbers(values):
    values = [v for v in values if v is not None]
    if not values:
        return {"n": 0, "total": None, "mean": None, "median": None}
    return {"n": len(values), "total": round(sum(values), 3),
            "mean": round(statistics.mean(values), 3), "median": round(statistics.median(values), 3)}


def collect(layout, bench, tasks, modes, baseline=None, validation=None):
    """Everything the template shows, as plain data (also what the tests check)."""
    names = modes_on_disk(layout, list(modes))
    task_ids = [t.instance_id for t in tasks]
    # Rows of tasks outside the run's selection (none, since results.jsonl holds only the run's
    # tasks) would change the denominator: they are left out.
    rows = {m: {r["instance_id"]: r for r in jsonio.read_jsonl(layout.results_jsonl(m))
                if r["instance_id"] in set(task_ids)}
            for m in names}
    total = len(task_ids)
    gold = gold_files(layout, tasks)
    validation = validation if validation is not None else (jsonio.read_json(layout.validation_json) or {})
    agent_modes = [m for m in names if any(r.get("agent_seconds") is not None
                                           for r in rows[m].values())]
    if baseline not in names:
        baseline = agent_modes[0] if agent_modes else ("none" if "none" in names else
                                                       (names[0] if names else None))

    mode_data = []
    for m in names:
        by_id = rows[m]
        outcomes = {i: outcome(r) for i, r in by_id.items()}
        counts = {o: sum(1 for v in outcomes.values() if v == o) for o in OUTCOMES}
        seconds = _summary_numbers([r.get("agent_seconds") for r in by_id.values()])
        costs = [r.get("cost_usd") for r in by_id.values() if r.get("cost_usd") is not None]
        cost = round(sum(costs), 4) if costs else None
        tokens = {"input": 0, "output": 0}
        has_tokens = False
        for r in by_id.values():
            for k in tokens:
                v = (r.get("tokens") or {}).get(k)
                if v is not None:
                    tokens[k] += v
                    has_tokens = True
        patches = [r.get("patch") or {} for r in by_id.values()]
        overlaps, covers = [], 0
        for i, r in by_id.items():
            want = set(gold.get(i) or [])
            have = set((r.get("patch") or {}).get("files") or [])
            if want:
                overlaps.append(len(want & have) / len(want))
                covers += want <= have
        mode = modes.get(m)
        family, repeat = family_of(m, modes)
        mode_data.append({
            "name": m, "family": family, "repeat": repeat,
            "kind": mode.kind if mode else "unknown",
            "model": mode.model if mode else "",
            "description": mode.description if mode else "not in the current configuration",
            "commands": [(p.name, p.command) for p in mode.phases] if mode else [],
            "configured": mode is not None,
            "submitted": len(by_id), "missing": [i for i in task_ids if i not in by_id],
            "empty_ids": [i for i, r in by_id.items() if not (r.get("patch") or {}).get("files")],
            "outcomes": outcomes, "counts": counts,
            "rates": {o: _rate(n, total) for o, n in counts.items()},
            "resolved_rate": _rate(counts["resolved"], total),
            "seconds": seconds, "cost_usd": cost,
            "cost_per_resolved": (round(cost / counts["resolved"], 4)
                                  if cost is not None and counts["resolved"] else None),
            "tokens": tokens if has_tokens else None,
            "patch": {
                "lines_added": sum(p.get("lines_added") or 0 for p in patches),
                "lines_removed": sum(p.get("lines_removed") or 0 for p in patches),
                "files_touched": sum(len(p.get("files") or []) for p in patches),
                "empty": sum(1 for p in patches if not p.get("files")),
                "gold_overlap": round(statistics.mean(overlaps), 4) if overlaps else None,
                "covers_gold": covers, "with_gold": len(overlaps),
            },
        })
    by_name = {d["name"]: d for d in mode_data}
    base = by_name.get(baseline)
    for d in mode_data:
        mine, theirs = d["seconds"]["mean"], base["seconds"]["mean"] if base else None
        d["speed_vs_baseline"] = (round(theirs / mine, 2) if mine and theirs else None)

    return {
        "date": datetime.date.today().isoformat(), "version": __version__, "run": layout.run,
        "benchmark": {"name": bench.name, "file": os.path.relpath(bench.path, layout.root),
                      "sha256": bench.digest, "tasks": total,
                      "benchmark_tasks": len(bench.tasks), "subset": total < len(bench.tasks)},
        "repositories": _repositories(tasks),
        "toolchain": toolchain(), "baseline": baseline,
        "outcomes": OUTCOMES, "cell": CELL,
        "modes": mode_data, "task_ids": task_ids,
        "matrix": [{"instance_id": i, "gold_files": gold.get(i),
                    "cells": [_cell(d, i) for d in mode_data]} for i in task_ids],
        "families": _families(mode_data, task_ids),
        "warnings": _warnings(mode_data, rows, validation, task_ids),
        "validation": _verdict_counts(validation, task_ids),
        "chart": CHART_NAME,
    }


def _cell(mode, iid):
    o = mode["outcomes"].get(iid)
    return {"mode": mode["name"], "outcome": o, "code": CELL[o] if o else "—",
            "link": f"{mode['name']}/{iid}/grade.json" if o else None}


def _repositories(tasks):
    repos = {}
    for t in tasks:
        r = repos.setdefault(t.repo, {"repo": t.repo, "role": "source", "commits": set()})
        r["commits"].update((t.base_commit, t.fix_commit))
        tr = repos.setdefault(t.test_repo, {"repo": t.test_repo, "role": "tests", "commits": set()})
        tr["commits"].add(t.test_commit)
    return [dict(r, commits=len(r["commits"])) for r in repos.values()]


def _families(mode_data, task_ids):
    groups = {}
    for d in mode_data:
        groups.setdefault(d["family"], []).append(d)
    out = {}
    for family, members in groups.items():
        if len(members) < 2:
            continue
        members.sort(key=lambda d: d["repeat"])
        rates = [d["resolved_rate"] for d in members]
        any_resolved = sum(1 for i in task_ids
                           if any(d["outcomes"].get(i) == "resolved" for d in members))
        out[family] = {
            "repeats": [d["name"] for d in members], "resolved_rates": rates,
            "mean": round(statistics.mean(rates), 4), "min": min(rates), "max": max(rates),
            "stdev": round(statistics.stdev(rates), 4) if len(rates) > 1 else 0.0,
            "pass_at_1": round(statistics.mean(rates), 4),
            "pass_at_k": _rate(any_resolved, len(task_ids)), "k": len(members),
        }
    return out


def _verdict_counts(validation, task_ids):
    counts = {}
    for iid in task_ids:
        verdict = (validation.get(iid) or {}).get("verdict", "not validated") if validation else None
        if verdict:
            counts[verdict] = counts.get(verdict, 0) + 1
    return counts


def _warnings(mode_data, rows, validation, task_ids):
    warnings = []
    for iid in task_ids:
        v = (validation or {}).get(iid)
        if v and v.get("verdict") != "valid":
            warnings.append(f"{iid}: validation verdict `{v.get('verdict')}` "
                            f"({'; '.join(v.get('reasons') or [])}): its cells are not evidence")
        if v and v.get("unstable_base"):
            warnings.append(f"{iid}: without the fix, ungraded assertions varied across repeats: "
                            f"{', '.join(v['unstable_base'][:3])}")
    for d in mode_data:
        if d["missing"]:
            warnings.append(f"mode {d['name']}: no result for {len(d['missing'])} of "
                            f"{len(task_ids)} tasks ({', '.join(d['missing'][:5])}"
                            f"{', ...' if len(d['missing']) > 5 else ''}); counted as not resolved")
        if not d["configured"]:
            warnings.append(f"mode {d['name']}: results on disk from a mode that is not in the "
                            f"current configuration")
        for iid, row in rows[d["name"]].items():
            for err in row.get("env_errors") or []:
                warnings.append(f"{d['name']} / {iid}: environment error: {err}")
            if row.get("resolved") and row.get("agent_status") in ("timeout", "failed", "error"):
                warnings.append(f"{d['name']} / {iid}: resolved although the agent ended with "
                                f"`{row['agent_status']}`")
    return warnings


# -- writing ---------------------------------------------------------------------------------------
def draw_chart(data, path):
    """Resolved rate and cost per mode, side by side, as a PNG (no timestamp in it)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    names = [d["name"] for d in data["modes"]]
    rates = [100 * d["resolved_rate"] for d in data["modes"]]
    known = [d["cost_usd"] for d in data["modes"]]
    costs = [c or 0.0 for c in known]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2), dpi=100)
    left.bar(names, rates, color="#4a7ab5")
    left.set_ylim(0, 100)
    left.set_ylabel("resolved (%)")
    left.set_title("Resolved rate")
    right.bar(names, costs, color="#c8803a")
    right.set_ylim(0, max(costs + [0.0]) * 1.2 or 1.0)
    right.set_ylabel("USD")
    right.set_title("Agent cost, total (— none reported)")
    for x, v in enumerate(rates):
        left.annotate(f"{v:.0f}%", (x, v), ha="center", va="bottom", fontsize=8)
    for x, (v, k) in enumerate(zip(costs, known)):
        right.annotate("—" if k is None else f"${v:.2f}", (x, v), ha="center", va="bottom",
                       fontsize=8)
    for ax in (left, right):
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", metadata={"Software": None})
    plt.close(fig)
    os.replace(tmp, path)


def _fmt(value, unit="", digits=1):
    if value is None:
        return "—"
    if isinstance(value, float) and math.isnan(value):
        return "—"
    return f"{value:,.{digits}f}{unit}" if isinstance(value, float) else f"{value:,}{unit}"


def render(data, templates_dir):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir)),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _fmt
    env.filters["pct"] = lambda v: "—" if v is None else f"{100 * v:.1f}%"
    env.filters["usd"] = lambda v, d=2: "—" if v is None else f"${v:,.{d}f}"
    env.filters["cellsafe"] = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
    return env.get_template(TEMPLATE).render(**data)


def swebench_report(mode):
    ids = lambda *os_: sorted(i for i, o in mode["outcomes"].items() if o in os_)
    submitted = sorted(mode["outcomes"])
    errors = ids(*ERROR_OUTCOMES)
    completed = [i for i in submitted if i not in errors]
    resolved = ids("resolved")
    empty = sorted(mode["empty_ids"])
    return {
        "total_instances": len(submitted) + len(mode["missing"]),
        "submitted_instances": len(submitted), "completed_instances": len(completed),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(completed) - len(resolved),
        "empty_patch_instances": len(empty), "error_instances": len(errors),
        "submitted_ids": submitted, "completed_ids": completed,
        "incomplete_ids": sorted(mode["missing"]), "resolved_ids": resolved,
        "unresolved_ids": [i for i in completed if i not in resolved],
        "empty_patch_ids": empty, "error_ids": errors,
        "outcomes": dict(sorted(mode["outcomes"].items())),
    }


def write_report(layout, bench, tasks, modes, baseline, templates_dir):
    """tasks: the command's selection, for a run without run.json; otherwise the run's tasks."""
    tasks = run_tasks(layout, bench, tasks)
    inputs = report_inputs(layout, bench, tasks, modes, baseline, templates_dir)
    data = collect(layout, bench, tasks, modes, baseline)
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    draw_chart(data, layout.report_chart)
    jsonio.write_text(layout.report_md, render(data, templates_dir))
    jsonio.write_json(layout.report_json, {
        "schema_version": 1, "run": layout.run, "benchmark": bench.name,
        "benchmark_sha256": bench.digest, "inputs": inputs,
        "tasks": data["task_ids"], "benchmark_tasks": len(bench.tasks),
        "modes": {d["name"]: swebench_report(d) for d in data["modes"]},
        "families": data["families"]})
    print(f"report: {layout.report_md}")


def gen_tasks(ctx):
    from doit import get_var
    baseline = get_var("baseline") or None
    args = [ctx.layout, ctx.benchmark, ctx.tasks, ctx.modes, baseline, ctx.layout.templates_dir]
    fresh = (report_is_fresh, [ctx.layout, ctx.benchmark, ctx.tasks, ctx.modes, baseline,
                               ctx.layout.templates_dir])
    common = {"actions": [(write_report, args)], "uptodate": [fresh], "verbosity": 2}
    # No file_dep: results.jsonl are targets of the modes' tasks, and a file_dep on them would
    # make `doit run report` run the modes. Freshness is the digest check above, evaluated when
    # the task is reached, after its task_dep.
    yield dict(common, basename="report",
               doc="render results/<run>/report.md from the run's result files (runs nothing else)")
    yield dict(common, basename=ctx.benchmark.name, name="report",
               doc=f"the report, after every mode of {ctx.benchmark.name}",
               task_dep=[f"{ctx.benchmark.name}:{m.name}" for m in ctx.mode_list()])
