"""Stage 9, report: ``results/<run>/report.md``, ``report.json``, ``report-chart.png`` and
``report-distributions.png``; with ``compare=OTHER``, also ``compare-<OTHER>.md|.json``.

Rendered from result files only, never by running anything: every mode of the run that has a
``results.jsonl`` (the modes of this invocation and any other mode dir on disk, such as an earlier
``predictions=`` run), the run's ``validation.json`` if there is one, the per-task ``build.json``
and ``prove.json`` (the compiler that built, the Perl and OpenSSL the tests ran with:
toolchain()), and the templates (``templates/report*.j2``). Two doit tasks render it: ``report``
(`doit run report run=NAME`, no dependencies) and ``<bench>:report`` (part of `doit run nginx`,
after every mode); a `doit run` of some modes (`doit run nginx:gold`) renders it at its end too
(progress.py), and ``power`` (`doit run power detect=10`) prints how many tasks or repeats a
difference needs. They are up to date when the digest of what the report is made from equals the
``inputs`` stored in report.json, so editing a template re-renders the report and nothing else.

Outcome of a cell: the ``outcome`` of the row in results.jsonl (summary.outcome(), the one
definition; computed from the row's other fields for rows written before it existed)::

    PASS  resolved             the agent's patch resolves the task (even after a timeout)
    ENV   env_error            the tests could not say (skipped file, missing module): untrusted
    TO    timeout              the agent hit its time limit
    ERR   agent_error          the agent failed or could not start
    PF    patch_failed         the patch does not apply
    CF    compile_failed       the patched tree does not build
    PART  partially_resolved   some but not all fail_to_pass assertions pass
    FAIL  unresolved

Statistics (stats.py names the methods and the libraries): a task scores 1 when resolved, else 0.
A mode's resolved rate counts every task of the run (a missing result scores 0) and has a Wilson
95% interval. An *arm* is what comparisons compare: a mode, or a mode family (``raw``, ``raw-r2``,
..., from ``repeats = k`` in modes.toml) taken together, whose per-task score is the mean over its
repeats and whose interval uses the standard error clustered by task. Every pair of arms is
compared on the tasks both have results for (pairs with the baseline first, the baseline second);
p-values are adjusted with Holm's method over all pairs. ``cutoff=YYYY-MM-DD`` splits tasks by
their ``fix_date``; ``compare=OTHER`` compares each arm with the same arm in run OTHER.

``report.json``::

    {"schema_version": 2, "run", "benchmark", "benchmark_sha256", "inputs",
     "tasks": [the run's task ids: every total_instances counts these], "benchmark_tasks": n,
     "level": 0.95, "alpha": 0.05, "seed": stats.SEED,
     "modes": {mode: {SWE-bench run report fields: "total_instances", "submitted_instances",
                      "completed_instances", "resolved_instances", "unresolved_instances",
                      "empty_patch_instances", "error_instances", "submitted_ids",
                      "completed_ids", "incomplete_ids", "resolved_ids", "unresolved_ids",
                      "empty_patch_ids", "error_ids"; and "outcomes": {instance_id: outcome},
                      "outcome_counts": {outcome: n},
                      "resolved_rate": resolved / total_instances,
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
               "comparisons": n},
     "breakdowns": {"area": [{"label", "tasks", "cells": [{"arm", "resolved" (one run),
                                                            "rate", "interval"}]}],
                    "fix_date": {"cutoff": "YYYY-MM-DD" | null, "groups": [same as area]}}}

``compare-<OTHER>.json`` (``doit run report run=A compare=B``): {"schema_version": 2, "run",
"other", "benchmark", "inputs", "tasks": [ids in both runs], "benchmark_sha256": {run: sha},
"arms": {arm: {run: {"rate", "interval", "repeats", "commands"}}}, "comparisons": [as above,
with "a" and "b" the two runs' arm, plus "arm", "only_here": [ids], "only_other": [ids]]}.

In SWE-bench's terms an *error* is an instance the evaluation could not judge: here env_error and
patch_failed. A task with no row in a mode's results.jsonl is counted in total_instances only
(``incomplete_ids``): a ``predictions=`` file without a row for it, or a task not run yet.

The report's warnings list, by mode and task, every agent that did not complete (agent error,
timeout, with agent.json's reason), environment errors, tasks not validated as valid, modes
with missing tasks, and modes whose tasks ran different commands.
"""

import dataclasses
import datetime
import math
import os
import statistics

import jinja2

from . import __version__, jsonio, stats
from .errors import UserError, failing_on_user_error
from .runrecord import read_run, run_tasks
from .summary import OUTCOMES, outcome  # noqa: F401  (report.outcome: the one definition)

CELL = {"resolved": "PASS", "partially_resolved": "PART", "unresolved": "FAIL",
        "compile_failed": "CF", "patch_failed": "PF", "timeout": "TO", "agent_error": "ERR",
        "env_error": "ENV"}
ERROR_OUTCOMES = ("env_error", "patch_failed")
CHART_NAME = "report-chart.png"
DISTRIBUTIONS_NAME = "report-distributions.png"
TEMPLATE = "report.md.j2"
COMPARE_TEMPLATE = "report-compare.md.j2"
SCHEMA_VERSION = 2
# Modes whose patch does not change from one run to the next: no variance within a task.
DETERMINISTIC_KINDS = ("gold", "none", "predictions")


def row_outcome(row):
    """The row's outcome as results.jsonl states it (older rows: computed the same way)."""
    return row["outcome"] if row.get("outcome") in OUTCOMES else outcome(row)


def commands_that_ran(rows):
    """[{"commands": [(phase, command)], "model", "instance_ids"}] for each distinct command line
    (and model) the rows' agents ran, the most common first."""
    seen = {}
    for iid, r in rows.items():
        if not r.get("agent_commands"):
            continue
        key = (tuple(tuple(c) for c in r["agent_commands"]), r.get("agent_model"))
        seen.setdefault(key, []).append(iid)
    return [{"commands": list(k[0]), "model": k[1], "instance_ids": ids}
            for k, ids in sorted(seen.items(), key=lambda kv: -len(kv[1]))]


# -- reading the run -------------------------------------------------------------------------------
def modes_on_disk(layout, configured):
    """Modes with a results.jsonl in the run: configured ones first (in their order), then others."""
    found = {p.parent.name for p in layout.run_dir.glob("*/results.jsonl")} \
        if layout.run_dir.is_dir() else set()
    ordered = [m for m in configured if m in found]
    return ordered + sorted(found - set(ordered))


def input_files(layout, configured, templates_dir):
    """Every file the report is made from (the digest's input)."""
    names = modes_on_disk(layout, configured)
    files = [layout.results_jsonl(m) for m in names]
    if layout.validation_json.exists():
        files.append(layout.validation_json)
    files += toolchain_records(layout, names)
    files += sorted(p for p in templates_dir.rglob("report*.j2"))
    return [str(f) for f in files]


def _method_settings():
    """What the statistics depend on besides the files: part of the report's inputs."""
    return {"level": stats.LEVEL, "alpha": stats.ALPHA, "power": stats.POWER, "seed": stats.SEED,
            "resamples": stats.RESAMPLES, "schema": SCHEMA_VERSION}


def report_inputs(layout, bench, tasks, modes, baseline, templates_dir, cutoff=None):
    config = {"benchmark_sha256": bench.digest, "baseline": baseline,
              "tasks": [t.instance_id for t in tasks],
              "modes": {n: m.to_json() for n, m in sorted(modes.items())}, "version": __version__,
              "cutoff": cutoff, "methods": _method_settings()}
    return jsonio.inputs_digest(config, input_files(layout, list(modes), templates_dir))


def report_is_fresh(layout, bench, tasks, modes, baseline, templates_dir, cutoff=None,
                    compare=None):
    """doit uptodate: report.json was made from exactly what is on disk now, for the run's tasks
    (and the charts and markdown still exist); with `compare`, the comparison too."""
    made = jsonio.read_json(layout.report_json) or {}
    tasks = run_tasks(layout, bench, tasks)
    fresh = (made.get("inputs") == report_inputs(layout, bench, tasks, modes, baseline,
                                                 templates_dir, cutoff)
             and layout.report_md.exists() and layout.report_chart.exists()
             and layout.report_distributions.exists())
    if fresh and compare:
        other = jsonio.read_json(layout.compare_json(compare)) or {}
        fresh = (other.get("inputs") == comparison_inputs(layout, compare, bench, tasks, modes,
                                                          templates_dir)
                 and layout.compare_md(compare).exists())
    return fresh


def family_of(name, modes):
    if name in modes:
        return modes[name].family, modes[name].repeat
    head, sep, tail = name.rpartition("-r")
    if sep and tail.isdigit() and head:
        return head, int(tail)
    return name, 1


def toolchain_records(layout, names):
    """The per-task records the toolchain comes from, of every mode in `names`: build.json (its
    "compiler", build.py) and prove.json (its "versions" of Perl and OpenSSL, prove.py)."""
    return [p for m in names for record in ("build.json", "prove.json")
            for p in sorted(layout.mode_dir(m).glob(f"*/{record}"))]


def toolchain(layout, names):
    """{"compiler", "perl", "openssl"}: what built nginx and ran the tests, as the run's records
    say (never asked of this machine: a report rendered elsewhere names the same), each distinct
    value once, "; " between; "not recorded" when no record has it (records from before the field),
    "not found" when the records say the program did not answer."""
    values = {"compiler": [], "perl": [], "openssl": []}
    for path in toolchain_records(layout, names):
        rec = jsonio.read_json(path) or {}
        if path.name == "build.json" and isinstance(rec.get("compiler"), dict):
            values["compiler"].append(rec["compiler"].get("version") or rec["compiler"].get("cc"))
        elif path.name == "prove.json" and isinstance(rec.get("versions"), dict):
            for key in ("perl", "openssl"):
                values[key].append(rec["versions"].get(key))
    out = {}
    for key, found in values.items():
        known = list(dict.fromkeys(v for v in found if v))
        out[key] = "; ".join(known) if known else ("not found" if found else "not recorded")
    return out


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


def _round(value, digits=4):
    return None if value is None else round(float(value), digits)


def _pair(interval, digits=4):
    if interval is None:
        return None
    return [_round(v, digits) for v in interval]


def _summary_numbers(values):
    values = [v for v in values if v is not None]
    if not values:
        return {"n": 0, "total": None, "mean": None, "median": None, "min": None, "q1": None,
                "q3": None, "max": None}
    quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return {"n": len(values), "total": round(sum(values), 3),
            "mean": round(statistics.mean(values), 3),
            "median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "q1": round(quartiles[0], 3), "q3": round(quartiles[2], 3),
            "max": round(max(values), 3)}


def read_rows(layout, names, task_ids):
    """{mode: {instance_id: results.jsonl row}} for the run's tasks. Rows of tasks outside the
    run's selection (none, since results.jsonl holds only the run's tasks) would change the
    denominator: they are left out."""
    wanted = set(task_ids)
    return {m: {r["instance_id"]: r for r in jsonio.read_jsonl(layout.results_jsonl(m))
                if r["instance_id"] in wanted}
            for m in names}


def _cost_per_resolved(rows_by_task, seed):
    """Cost per resolved task over the tasks with a cost, with its bootstrap interval. rows_by_task:
    {iid: [rows]} (the repeats of an arm, or one row)."""
    costs, resolved = [], []
    for rows in rows_by_task.values():
        known = [r for r in rows if r.get("cost_usd") is not None]
        if not known:
            continue
        costs.append(sum(r["cost_usd"] for r in known))
        resolved.append(sum(1 for r in known if row_outcome(r) == "resolved"))
    if not costs:
        return {"value": None, "interval": None, "tasks": 0}
    value, interval = stats.ratio_interval(costs, resolved, seed)
    return {"value": _round(value), "interval": _pair(interval), "tasks": len(costs)}


def mode_summary(m, by_id, task_ids, modes, gold):
    """The report's figures for one mode, from its rows."""
    total = len(task_ids)
    outcomes = {i: row_outcome(r) for i, r in by_id.items()}
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
    per_resolved = _cost_per_resolved({i: [r] for i, r in by_id.items()},
                                      stats.seed_for("cost", m))
    return {
        "name": m, "family": family, "repeat": repeat,
        "kind": mode.kind if mode else ("predictions" if m == "file" else
                                        m if m in ("gold", "none") else "unknown"),
        "model": mode.model if mode else "",
        "description": mode.description if mode else "not in the current configuration",
        "commands": [(p.name, p.command) for p in mode.phases] if mode else [],
        "ran": commands_that_ran(by_id),
        "configured": mode is not None,
        "submitted": len(by_id), "missing": [i for i in task_ids if i not in by_id],
        "empty_ids": [i for i, r in by_id.items() if not (r.get("patch") or {}).get("files")],
        "outcomes": outcomes, "counts": counts,
        "rates": {o: _rate(n, total) for o, n in counts.items()},
        "resolved_rate": _rate(counts["resolved"], total),
        "resolved_interval": _pair(stats.wilson(counts["resolved"], total)),
        "seconds": seconds, "cost_usd": cost,
        "seconds_values": [r["agent_seconds"] for r in by_id.values()
                           if r.get("agent_seconds") is not None],
        "cost_values": costs,
        "cost_per_resolved": (round(cost / counts["resolved"], 4)
                              if cost is not None and counts["resolved"] else None),
        "cost_per_resolved_interval": per_resolved["interval"],
        "tokens": tokens if has_tokens else None,
        "patch": {
            "lines_added": sum(p.get("lines_added") or 0 for p in patches),
            "lines_removed": sum(p.get("lines_removed") or 0 for p in patches),
            "files_touched": sum(len(p.get("files") or []) for p in patches),
            "empty": sum(1 for p in patches if not p.get("files")),
            "gold_overlap": round(statistics.mean(overlaps), 4) if overlaps else None,
            "covers_gold": covers, "with_gold": len(overlaps),
        },
    }


def collect(layout, bench, tasks, modes, baseline=None, validation=None, cutoff=None):
    """Everything the template shows, as plain data (also what the tests check)."""
    names = modes_on_disk(layout, list(modes))
    task_ids = [t.instance_id for t in tasks]
    rows = read_rows(layout, names, task_ids)
    total = len(task_ids)
    gold = gold_files(layout, tasks)
    validation = validation if validation is not None else (jsonio.read_json(layout.validation_json) or {})
    agent_modes = [m for m in names if any(r.get("agent_seconds") is not None
                                           for r in rows[m].values())]
    if baseline not in names:
        baseline = agent_modes[0] if agent_modes else ("none" if "none" in names else
                                                       (names[0] if names else None))

    mode_data = [mode_summary(m, rows[m], task_ids, modes, gold) for m in names]
    by_name = {d["name"]: d for d in mode_data}
    base = by_name.get(baseline)
    for d in mode_data:
        mine, theirs = d["seconds"]["mean"], base["seconds"]["mean"] if base else None
        d["speed_vs_baseline"] = (round(theirs / mine, 2) if mine and theirs else None)

    arms = make_arms(mode_data, rows, task_ids)
    baseline_arm = next((a for a in arms if baseline in a["modes"]), None)
    comparisons = compare_arms(arms, task_ids, baseline_arm)
    return {
        "date": datetime.date.today().isoformat(), "version": __version__, "run": layout.run,
        "benchmark": {"name": bench.name, "file": os.path.relpath(bench.path, layout.root),
                      "sha256": bench.digest, "tasks": total,
                      "benchmark_tasks": len(bench.tasks), "subset": total < len(bench.tasks)},
        "repositories": _repositories(tasks),
        "toolchain": toolchain(layout, names), "baseline": baseline,
        "baseline_arm": baseline_arm["name"] if baseline_arm else None,
        "outcomes": OUTCOMES, "cell": CELL,
        "modes": mode_data, "task_ids": task_ids,
        "matrix": [{"instance_id": i, "gold_files": gold.get(i),
                    "cells": [_cell(d, i) for d in mode_data]} for i in task_ids],
        "families": _families(mode_data, task_ids),
        "arms": arms, "comparisons": comparisons,
        "power": power_summary(comparisons, total),
        "breakdowns": breakdowns(arms, tasks, cutoff),
        "level": stats.LEVEL, "alpha": stats.ALPHA, "power_target": stats.POWER,
        "warnings": _warnings(mode_data, rows, validation, task_ids),
        "validation": _verdict_counts(validation, task_ids),
        "chart": CHART_NAME, "distributions": DISTRIBUTIONS_NAME,
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


def _groups(mode_data):
    """{family: [mode data, by repeat]}, in the order of their first mode."""
    groups = {}
    for d in mode_data:
        groups.setdefault(d["family"], []).append(d)
    for members in groups.values():
        members.sort(key=lambda d: d["repeat"])
    return groups


def _families(mode_data, task_ids):
    out = {}
    for family, members in _groups(mode_data).items():
        if len(members) < 2:
            continue
        rates = [d["resolved_rate"] for d in members]
        any_resolved = sum(1 for i in task_ids
                           if any(d["outcomes"].get(i) == "resolved" for d in members))
        clustered = stats.clustered_mean([[1 if d["outcomes"].get(i) == "resolved" else 0
                                           for d in members] for i in task_ids])
        out[family] = {
            "repeats": [d["name"] for d in members], "resolved_rates": rates,
            "mean": round(statistics.mean(rates), 4), "min": min(rates), "max": max(rates),
            "stdev": round(statistics.stdev(rates), 4) if len(rates) > 1 else 0.0,
            "pass_at_1": round(statistics.mean(rates), 4),
            "pass_at_k": _rate(any_resolved, len(task_ids)), "k": len(members),
            "se": _round(clustered["se"]), "interval": _pair(clustered["interval"]),
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
        if len(d["ran"]) > 1:
            warnings.append(f"mode {d['name']}: its tasks ran {len(d['ran'])} different "
                            f"commands (see Modes)")
        for iid, row in rows[d["name"]].items():
            for err in row.get("env_errors") or []:
                warnings.append(f"{d['name']} / {iid}: environment error: {err}")
            status = row.get("agent_status")
            if status in ("timeout", "failed", "error"):
                why = row.get("agent_error") or status
                what = "agent timeout" if status == "timeout" else "agent error"
                if row.get("resolved"):
                    warnings.append(f"{d['name']} / {iid}: resolved although the agent ended "
                                    f"with `{status}` ({why})")
                else:
                    warnings.append(f"{d['name']} / {iid}: {what}: {why}")
    return warnings


# -- arms, comparisons, power, breakdowns ----------------------------------------------------------
def make_arms(mode_data, rows, task_ids, label=None):
    """What comparisons compare: each mode family (a mode and its repeats) as one arm.

    table: {iid: [1/0 per repeat]} over every task of the run (a missing result scores 0, as in
    the resolved rate); scores: {iid: mean over the repeats that have a result}, for the tasks
    with at least one (what pairs are compared on)."""
    arms = []
    for family, members in _groups(mode_data).items():
        k = len(members)
        table = {i: [1 if d["outcomes"].get(i) == "resolved" else 0 for d in members]
                 for i in task_ids}
        scores = {}
        for i in task_ids:
            have = [1 if d["outcomes"][i] == "resolved" else 0 for d in members
                    if i in d["outcomes"]]
            if have:
                scores[i] = sum(have) / len(have)
        if k == 1:
            resolved = sum(v[0] for v in table.values())
            rate = _rate(resolved, len(task_ids))
            interval, how, se = _pair(stats.wilson(resolved, len(task_ids))), "wilson", None
        else:
            c = stats.clustered_mean(list(table.values()))
            rate, interval, how, se = (_round(c["mean"]), _pair(c["interval"]),
                                       "clustered by task", _round(c["se"]))
        deterministic = all(d["kind"] in DETERMINISTIC_KINDS for d in members)
        within = 0.0 if deterministic else (stats.within_task_variance(list(table.values()))
                                            if k > 1 else None)
        name = family if k > 1 else members[0]["name"]
        cost = _cost_per_resolved(
            {i: [rows[d["name"]][i] for d in members if i in rows[d["name"]]] for i in task_ids},
            stats.seed_for("cost", label or "", "arm", name))
        arms.append({
            "name": name, "label": f"{name} ({k} repeats)" if k > 1 else name,
            "modes": [d["name"] for d in members], "repeats": k, "table": table,
            "scores": scores, "rate": rate, "interval": interval, "interval_method": how,
            "se": se, "within_variance": within, "cost_per_resolved": cost,
            "commands": [r for d in members for r in d["ran"]][:1],
        })
    return arms


def _plural(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _interval_pp(interval):
    if interval is None:
        return "[—]"
    return f"[{stats.fmt_pp(interval[0])}, {stats.fmt_pp(interval[1])}]"


def compare_pair(a, b, task_ids, seed_parts, names=None):
    """The paired comparison of arms a and b (rate(a) - rate(b)) on the tasks both have scores
    for; None when they share no task."""
    common = [i for i in task_ids if i in a["scores"] and i in b["scores"]]
    if not common:
        return None
    x = [a["scores"][i] for i in common]
    y = [b["scores"][i] for i in common]
    if a["repeats"] == 1 and b["repeats"] == 1:
        r = stats.paired_binary(x, y)
        r["interval_method"] = "newcombe"
    else:
        r = stats.paired_scores(x, y, stats.seed_for(*seed_parts))
    a_name, b_name = names or (a["name"], b["name"])
    r.update({"a": a_name, "b": b_name, "a_label": a["label"], "b_label": b["label"],
              "repeats_a": a["repeats"], "repeats_b": b["repeats"],
              "within_a": a["within_variance"], "within_b": b["within_variance"],
              "task_ids": common})
    return r


def _finish(comparisons, total, quote=lambda c, side: f"`{c[side]}`"):
    """Holm-adjusted p-values and a sentence for each comparison."""
    adjusted = stats.holm([c["p_value"] for c in comparisons])
    for c, p in zip(comparisons, adjusted):
        c["p_holm"] = p
        c["sentence"] = sentence(c, total, len(comparisons), quote)
        for key in ("difference", "a_rate", "b_rate", "discordance", "sd", "detectable",
                    "within_a", "within_b"):
            if isinstance(c.get(key), float):
                c[key] = round(c[key], 4)
        for key in ("p_value", "p_holm"):
            c[key] = round(c[key], 8)
        c["interval"] = _pair(c["interval"])
    return comparisons


def compare_arms(arms, task_ids, baseline_arm=None):
    """Every pair of arms: those with the baseline first (the baseline second in each), then
    the others in the order of the modes."""
    pairs = [(a, baseline_arm) for a in arms if baseline_arm and a is not baseline_arm]
    for i, a in enumerate(arms):
        for b in arms[i + 1:]:
            if baseline_arm not in (a, b):
                pairs.append((a, b))
    out = []
    for a, b in pairs:
        c = compare_pair(a, b, task_ids, ("pair", a["name"], b["name"]))
        if c is not None:
            out.append(c)
    return _finish(out, len(task_ids))


def sentence(c, total, how_many, quote):
    """The comparison in words, for a reader to quote."""
    a, b = quote(c, "a"), quote(c, "b")
    p_value = stats.fmt_p(c["p_value"])
    diff = (f"difference {stats.fmt_pp(c['difference'])} pp {_interval_pp(c['interval'])}, "
            f"p {p_value if p_value.startswith('<') else '= ' + p_value}")
    if how_many > 1:
        diff += f" (Holm: {stats.fmt_p(c['p_holm'])})"
    if c["method"] == "mcnemar":
        text = (f"{a} resolves {_plural(c['a_only'], 'task')} {b} does not, {b} "
                f"{c['b_only']} that {a} does not; {diff}")
    else:
        text = (f"{a} ({_plural(c['repeats_a'], 'run')} per task) resolves "
                f"{stats.fmt_pp(c['a_rate'], sign=False)}% of the tasks on average, {b} "
                f"({_plural(c['repeats_b'], 'run')}) {stats.fmt_pp(c['b_rate'], sign=False)}%; "
                f"{a} does better on {_plural(c['a_better'], 'task')}, {b} on {c['b_better']}; "
                f"{diff}")
    if c["tasks"] < total:
        text += f"; on the {c['tasks']} of {total} tasks both have results for"
    return text + "."


def power_summary(comparisons, total):
    found = [c["detectable"] for c in comparisons if c.get("detectable") is not None]
    return {"power": stats.POWER, "alpha": stats.ALPHA, "tasks": total,
            "comparisons": len(comparisons), "estimable": len(found),
            "median_detectable": _round(statistics.median(found)) if found else None,
            "min_detectable": _round(min(found)) if found else None,
            "max_detectable": _round(max(found)) if found else None}


def _group_cells(arms, ids):
    cells = []
    for arm in arms:
        if arm["repeats"] == 1:
            k = sum(arm["table"][i][0] for i in ids)
            cells.append({"arm": arm["name"], "resolved": k, "tasks": len(ids),
                          "rate": _rate(k, len(ids)),
                          "interval": _pair(stats.wilson(k, len(ids)))})
        else:
            c = stats.clustered_mean([arm["table"][i] for i in ids])
            cells.append({"arm": arm["name"], "resolved": None, "tasks": len(ids),
                          "rate": _round(c["mean"]), "interval": _pair(c["interval"])})
    return cells


def breakdowns(arms, tasks, cutoff=None):
    """Resolved rates with intervals per area, and before / on or after `cutoff` by fix date."""
    by_area = {}
    for t in tasks:
        by_area.setdefault(t.area or "(no area)", []).append(t.instance_id)
    area = [{"label": label, "tasks": len(ids), "cells": _group_cells(arms, ids)}
            for label, ids in sorted(by_area.items())]
    groups = []
    if cutoff:
        split = {f"fixed before {cutoff}": [], f"fixed on or after {cutoff}": [],
                 "no fix date": []}
        for t in tasks:
            key = ("no fix date" if not t.fix_date else
                   f"fixed before {cutoff}" if t.fix_date < cutoff else
                   f"fixed on or after {cutoff}")
            split[key].append(t.instance_id)
        groups = [{"label": label, "tasks": len(ids), "cells": _group_cells(arms, ids)}
                  for label, ids in split.items() if ids]
    return {"area": area, "fix_date": {"cutoff": cutoff, "groups": groups}}


# -- power planning (`doit run power`) -------------------------------------------------------------
PLAN_REPEATS = (1, 2, 3, 5, 10)


def plan(comparison, difference):
    """How many tasks (and, where the repeats tell the variance within a task, how many repeats)
    a comparison like this one needs to detect `difference` (a rate difference, 0.1 = 10 pp)."""
    c = comparison
    out = {"a": c["a"], "b": c["b"], "difference": difference, "tasks_now": c["tasks"]}
    if c["method"] == "mcnemar":
        out["discordance"] = c["discordance"]
        out["tasks_needed"] = stats.mcnemar_tasks_needed(difference, c["discordance"])
        # One run per task cannot tell the variation within a task from that between tasks.
        out["by_repeats"] = None
    else:
        out["sd"] = c["sd"]
        out["tasks_needed"] = stats.paired_tasks_needed(difference, c["sd"])
        out["by_repeats"] = stats.paired_plan(c["sd"], c["repeats_a"], c["repeats_b"],
                                              c["within_a"], c["within_b"], difference,
                                              PLAN_REPEATS)
    return out


def plan_lines(data, differences):
    """The lines `doit run power` prints."""
    lines = [f"power: run {data['run']}, {data['benchmark']['tasks']} tasks; "
             f"{100 * stats.POWER:.0f}% power, two-sided {100 * stats.ALPHA:.0f}% "
             f"(exact McNemar test for modes run once per task; paired t approximation of "
             f"the per-task mean scores with repeats)"]
    if not data["comparisons"]:
        lines.append("power: no two modes with results for the same tasks in this run: nothing "
                     "to plan from (run a second mode first)")
        return lines
    for c in data["comparisons"]:
        head = f"{c['a_label']} vs {c['b_label']}"
        if c["method"] == "mcnemar":
            head += (f": they disagree on {c['a_only'] + c['b_only']} of {c['tasks']} tasks "
                     f"(discordance {100 * c['discordance']:.0f}%)")
        else:
            head += f": per-task differences have sd {100 * c['sd']:.0f} pp" if c["sd"] else ""
        now = c.get("detectable")
        head += (f"; with {c['tasks']} tasks it detects {stats.fmt_pp(now, sign=False)} pp"
                 if now is not None else f"; with {c['tasks']} tasks no difference is detectable")
        lines.append(head)
        for d in differences:
            p = plan(c, d)
            need = p["tasks_needed"]
            text = (f"  to detect {100 * d:g} pp: "
                    + (f"about {need} tasks" if need else
                       "cannot tell (no disagreement observed between them)"))
            if p["by_repeats"]:
                text += "; with k repeats of each: " + ", ".join(
                    f"k={k}: {n} tasks" for k, n in p["by_repeats"].items() if n)
            elif not (c["within_a"] == 0.0 and c["within_b"] == 0.0):
                once = [c[side] for side, w in (("a", c["within_a"]), ("b", c["within_b"]))
                        if w is None]
                text += (f"; repeats: cannot tell from one run per task of {' and '.join(once)} "
                         f"(`repeats = k` in modes.toml measures the variation within a task)")
            lines.append(text)
    return lines


def print_plan(layout, bench, tasks, modes, baseline, differences):
    tasks = run_tasks(layout, bench, tasks)
    data = collect(layout, bench, tasks, modes, baseline)
    for line in plan_lines(data, differences or (0.05, 0.10)):
        print(line)


# -- comparing two runs ----------------------------------------------------------------------------
def other_layout(layout, other):
    return dataclasses.replace(layout, run=other)


def check_compare(layout, other):
    """compare=OTHER names another run with results."""
    if not other:
        return
    if other == layout.run:
        raise UserError(f"compare={other}: that is this run; name another run")
    theirs = other_layout(layout, other)
    if not modes_on_disk(theirs, []):
        runs = sorted(p.name for p in layout.results_root.iterdir()
                      if p.is_dir() and p.name != layout.run) \
            if layout.results_root.is_dir() else []
        from .options import did_you_mean
        raise UserError(f"compare={other}: no results in {theirs.run_dir}"
                        f"{did_you_mean(other, runs)}")


def _other_tasks(theirs, bench):
    record = read_run(theirs)
    if record and record["benchmark"] != bench.name:
        raise UserError(f"compare={theirs.run}: run {theirs.run!r} holds benchmark "
                        f"{record['benchmark']!r}, this run {bench.name!r}: no tasks in common")
    if record:
        return set(record["task_ids"]), record.get("benchmark_sha256")
    ids = set()
    for m in modes_on_disk(theirs, []):
        ids |= {r["instance_id"] for r in jsonio.read_jsonl(theirs.results_jsonl(m))}
    return ids, None


def comparison_inputs(layout, other, bench, tasks, modes, templates_dir):
    theirs = other_layout(layout, other)
    files = [layout.results_jsonl(m) for m in modes_on_disk(layout, list(modes))]
    files += [theirs.results_jsonl(m) for m in modes_on_disk(theirs, list(modes))]
    files += [theirs.run_json]
    files += sorted(p for p in templates_dir.rglob("report*.j2"))
    config = {"benchmark_sha256": bench.digest, "tasks": [t.instance_id for t in tasks],
              "other": other, "modes": sorted(modes), "version": __version__,
              "methods": _method_settings()}
    return jsonio.inputs_digest(config, [str(f) for f in files])


def collect_comparison(layout, other, bench, tasks, modes):
    """The same arms in this run and run `other`, paired on the tasks both runs have."""
    theirs = other_layout(layout, other)
    their_ids, their_sha = _other_tasks(theirs, bench)
    task_ids = [t.instance_id for t in tasks if t.instance_id in their_ids]
    sides = {}
    for side, lay in (("here", layout), ("there", theirs)):
        names = modes_on_disk(lay, list(modes))
        rows = read_rows(lay, names, task_ids)
        data = [mode_summary(m, rows[m], task_ids, modes, {}) for m in names]
        sides[side] = {a["name"]: a for a in make_arms(data, rows, task_ids, label=lay.run)}
    common = [n for n in sides["here"] if n in sides["there"]]
    comparisons = []
    for name in common:
        c = compare_pair(sides["here"][name], sides["there"][name], task_ids,
                         ("runs", layout.run, other, name),
                         names=(f"{name}@{layout.run}", f"{name}@{other}"))
        if c is None:
            continue
        here, there = sides["here"][name]["scores"], sides["there"][name]["scores"]
        c.update({"arm": name,
                  "only_here": [i for i in c["task_ids"] if here[i] == 1 and there[i] == 0],
                  "only_other": [i for i in c["task_ids"] if there[i] == 1 and here[i] == 0]})
        comparisons.append(c)
    _finish(comparisons, len(task_ids))
    arms = {n: {side: {k: sides[side][n][k] for k in ("rate", "interval", "interval_method",
                                                       "repeats", "modes", "commands")}
                for side in ("here", "there")} for n in common}
    only = {"here": [n for n in sides["here"] if n not in common],
            "there": [n for n in sides["there"] if n not in common]}
    return {"date": datetime.date.today().isoformat(), "version": __version__,
            "run": layout.run, "other": other, "benchmark": bench.name,
            "benchmark_sha256": {layout.run: bench.digest, other: their_sha},
            "tasks": task_ids, "run_tasks": len(tasks), "other_tasks": len(their_ids),
            "arms": arms, "only": only, "comparisons": comparisons,
            "level": stats.LEVEL, "alpha": stats.ALPHA}


def write_comparison(layout, other, bench, tasks, modes, templates_dir):
    tasks = run_tasks(layout, bench, tasks)
    inputs = comparison_inputs(layout, other, bench, tasks, modes, templates_dir)
    data = collect_comparison(layout, other, bench, tasks, modes)
    jsonio.write_text(layout.compare_md(other), render(data, templates_dir, COMPARE_TEMPLATE))
    jsonio.write_json(layout.compare_json(other), {
        "schema_version": SCHEMA_VERSION, "inputs": inputs,
        **{k: v for k, v in data.items() if k not in ("date", "comparisons")},
        "comparisons": [_json_comparison(c) for c in data["comparisons"]]})
    print(f"comparison: {layout.compare_md(other)}")
    return data


# -- writing ---------------------------------------------------------------------------------------
def _errors(values):
    """Asymmetric error bar lengths for matplotlib from (value, interval) pairs."""
    low, high = [], []
    for v, ci in values:
        if v is None or ci is None:
            low.append(0.0)
            high.append(0.0)
        else:
            low.append(max(0.0, v - ci[0]))
            high.append(max(0.0, (ci[1] if ci[1] is not None else v) - v))
    return [low, high]


def _save(fig, path):
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", metadata={"Software": None})
    os.replace(tmp, path)


def draw_chart(data, path):
    """Resolved rate per arm with its 95% interval, and cost per resolved task with its
    interval, side by side, as a PNG (no timestamp in it)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    arms = data["arms"]
    names = [a["name"] + (f" (×{a['repeats']})" if a["repeats"] > 1 else "") for a in arms]
    rates = [100 * a["rate"] for a in arms]
    rate_errors = _errors([(100 * a["rate"], [100 * v for v in a["interval"]]
                            if a["interval"] else None) for a in arms])
    known = [a["cost_per_resolved"]["value"] for a in arms]
    costs = [c or 0.0 for c in known]
    cost_errors = _errors([(a["cost_per_resolved"]["value"], a["cost_per_resolved"]["interval"])
                           for a in arms])
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=100)
    left.bar(names, rates, color="#4a7ab5", yerr=rate_errors, capsize=4, ecolor="#222222")
    left.set_ylim(0, 105)
    left.set_ylabel("resolved (%)")
    left.set_title("Resolved rate, 95% interval")
    right.bar(names, costs, color="#c8803a", yerr=cost_errors, capsize=4, ecolor="#222222")
    top = max([c + e for c, e in zip(costs, cost_errors[1])] + [0.0])
    right.set_ylim(0, top * 1.2 or 1.0)
    right.set_ylabel("USD")
    right.set_title("Cost per resolved task (— none)")
    for x, v in enumerate(rates):
        left.annotate(f"{v:.0f}%", (x, v), ha="left", va="bottom", fontsize=8,
                      xytext=(3, 0), textcoords="offset points")
    for x, (v, k) in enumerate(zip(costs, known)):
        right.annotate("—" if k is None else f"${v:.2f}", (x, v), ha="left", va="bottom",
                       fontsize=8, xytext=(3, 0), textcoords="offset points")
    for ax in (left, right):
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def draw_distributions(data, path):
    """Agent time and cost per task, per mode: a box plot with every task as a point."""
    import matplotlib
    matplotlib.use("Agg")
    import numpy as np
    from matplotlib import pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), dpi=100)
    panels = (("seconds_values", "Agent time per task", "seconds"),
              ("cost_values", "Agent cost per task", "USD"))
    for ax, (key, title, unit) in zip(axes, panels):
        shown = [m for m in data["modes"] if m[key]]
        ax.set_title(title)
        ax.set_ylabel(unit)
        if not shown:
            ax.text(0.5, 0.5, "none reported", ha="center", va="center",
                    transform=ax.transAxes, color="#666666")
            ax.set_xticks([])
            continue
        values = [m[key] for m in shown]
        ax.boxplot(values, widths=0.5, showfliers=False)
        for x, vs in enumerate(values, 1):
            # Spread the points sideways by rank, not at random: the same files, the same image.
            offsets = np.linspace(-0.15, 0.15, len(vs)) if len(vs) > 1 else [0.0]
            ax.scatter([x + o for o in offsets], vs, s=10, color="#4a7ab5", alpha=0.7, zorder=3)
        ax.set_xticks(range(1, len(shown) + 1), [m["name"] for m in shown], rotation=30,
                      fontsize=8)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _fmt(value, unit="", digits=1):
    if value is None:
        return "—"
    if isinstance(value, float) and math.isnan(value):
        return "—"
    return f"{value:,.{digits}f}{unit}" if isinstance(value, float) else f"{value:,}{unit}"


def _ci_pct(interval, digits=1):
    """[low, high] of a rate, in percent."""
    if not interval:
        return "—"
    return f"[{100 * interval[0]:.{digits}f}, {100 * interval[1]:.{digits}f}]"


def _ci_usd(interval):
    if not interval:
        return "—"
    low, high = interval
    return (f"[${low:,.2f}, " if low is not None else "[—, ") + \
        (f"${high:,.2f}]" if high is not None else "unbounded]")


def render(data, templates_dir, template=TEMPLATE):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir)),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _fmt
    env.filters["pct"] = lambda v: "—" if v is None else f"{100 * v:.1f}%"
    env.filters["usd"] = lambda v, d=2: "—" if v is None else f"${v:,.{d}f}"
    env.filters["cellsafe"] = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
    env.filters["ci"] = _ci_pct
    env.filters["ci_usd"] = _ci_usd
    env.filters["pp"] = lambda v, d=1, sign=True: stats.fmt_pp(v, d, sign)
    env.filters["ci_pp"] = lambda ci, d=1: ("—" if not ci else
                                            f"[{stats.fmt_pp(ci[0], d)}, {stats.fmt_pp(ci[1], d)}]")
    env.filters["p"] = stats.fmt_p
    return env.get_template(template).render(**data)


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
        "agent_commands": [{"commands": [list(c) for c in r["commands"]], "model": r["model"],
                            "instance_ids": sorted(r["instance_ids"])} for r in mode["ran"]],
    }


def mode_json(mode):
    """A mode's entry in report.json: SWE-bench's fields plus the report's figures."""
    return {**swebench_report(mode),
            "outcome_counts": dict(mode["counts"]),
            "resolved_rate": mode["resolved_rate"],
            "resolved_interval": mode["resolved_interval"],
            "cost_usd": mode["cost_usd"],
            "cost_per_resolved": {"value": mode["cost_per_resolved"],
                                  "interval": mode["cost_per_resolved_interval"]},
            "agent_seconds": mode["seconds"]}


def _json_comparison(c):
    keep = ("a", "b", "arm", "method", "tasks", "a_rate", "b_rate", "difference", "interval",
            "interval_method", "p_value", "p_holm", "both", "a_only", "b_only", "neither",
            "discordance", "a_better", "b_better", "ties", "sd", "detectable", "sentence",
            "only_here", "only_other", "repeats_a", "repeats_b")
    return {k: c[k] for k in keep if k in c}


def report_json(layout, bench, inputs, data):
    arms = {a["name"]: {"modes": a["modes"], "repeats": a["repeats"], "rate": a["rate"],
                        "interval": a["interval"], "interval_method": a["interval_method"],
                        "cost_per_resolved": {k: a["cost_per_resolved"][k]
                                              for k in ("value", "interval")}}
            for a in data["arms"]}
    return {
        "schema_version": SCHEMA_VERSION, "run": layout.run, "benchmark": bench.name,
        "benchmark_sha256": bench.digest, "inputs": inputs,
        "tasks": data["task_ids"], "benchmark_tasks": len(bench.tasks),
        "level": stats.LEVEL, "alpha": stats.ALPHA, "seed": stats.SEED,
        "modes": {d["name"]: mode_json(d) for d in data["modes"]},
        "families": data["families"], "arms": arms,
        "comparisons": [_json_comparison(c) for c in data["comparisons"]],
        "power": data["power"], "breakdowns": data["breakdowns"]}


def write_report(layout, bench, tasks, modes, baseline, templates_dir, cutoff=None,
                 compare=None, quiet=False):
    """tasks: the command's selection, for a run without run.json; otherwise the run's tasks."""
    tasks = run_tasks(layout, bench, tasks)
    inputs = report_inputs(layout, bench, tasks, modes, baseline, templates_dir, cutoff)
    data = collect(layout, bench, tasks, modes, baseline, cutoff=cutoff)
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    draw_chart(data, layout.report_chart)
    draw_distributions(data, layout.report_distributions)
    jsonio.write_text(layout.report_md, render(data, templates_dir))
    jsonio.write_json(layout.report_json, report_json(layout, bench, inputs, data))
    if not quiet:
        print(f"report: {layout.report_md}")
    if compare:
        write_comparison(layout, compare, bench, tasks, modes, templates_dir)
    return data


def render_report(*args):
    """doit action: write_report, returning nothing (a dict would go to doit's database)."""
    write_report(*args)


def gen_tasks(ctx):
    options = ctx.options
    baseline = options.baseline if options else None   # checked against the run's modes
    cutoff = options.cutoff if options else None
    compare = options.compare if options else None
    args = [ctx.layout, ctx.benchmark, ctx.tasks, ctx.modes, baseline, ctx.layout.templates_dir,
            cutoff, compare]
    fresh = (report_is_fresh, list(args))
    common = {"actions": [(failing_on_user_error, [render_report, *args])], "uptodate": [fresh],
              "verbosity": 2}
    # No file_dep: results.jsonl are targets of the modes' tasks, and a file_dep on them would
    # make `doit run report` run the modes. Freshness is the digest check above, evaluated when
    # the task is reached, after its task_dep.
    yield dict(common, basename="report",
               doc="render results/<run>/report.md from the run's result files (runs nothing else)")
    yield dict(common, basename=ctx.benchmark.name, name="report",
               doc=f"the report, after every mode of {ctx.benchmark.name}",
               task_dep=[f"{ctx.benchmark.name}:{m.name}" for m in ctx.group_mode_list()])
    detect = tuple(d / 100 for d in (options.detect if options and options.detect else ()))
    yield {"basename": "power",
           "doc": "how many tasks (or repeats) a difference of detect=D points needs, from "
                  "this run's results (runs nothing else)",
           "actions": [(failing_on_user_error,
                        [print_plan, ctx.layout, ctx.benchmark, ctx.tasks, ctx.modes, baseline,
                         detect])],
           "uptodate": [False], "verbosity": 2}
