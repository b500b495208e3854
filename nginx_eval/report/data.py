"""The report's data: everything report.md shows, as plain data (collect(); also what the tests
check), the warnings it lists, and its slice that report.json holds (report_json(); the schema is
in report/stage.py's docstring). Built from report_records (reading), report_modes (figures per mode
and family) and report_arms (comparisons, power, breakdowns).
"""

import datetime
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .. import __version__
from ..core import jsonio
from ..core.layout import Layout
from ..core.outcomes import (
    ERROR,
    FAILED,
    INFRA_ERROR,
    NOT_JUDGED,
    NOT_SCORED,
    OUTCOMES,
    TABLE,
    TIMEOUT,
    UNFINISHED_AGENT,
)
from ..core.records import record_version
from ..run.benchmark import AnyTask, Benchmark, version_key
from ..run.modes import Mode
from ..run.record import modes_on_disk
from ..run.swebench import SWEBENCH
from ..run.swebench_pro import is_pro
from ..swebench.harness import WORKERS_NOTE, command_line
from ..swebench.pro import HARNESS_COMMIT as PRO_COMMIT
from ..swebench.pro import HARNESS_REPO as PRO_REPO
from ..swebench.pro import WORKERS_NOTE as PRO_WORKERS_NOTE
from ..swebench.stage import command_for
from . import stats
from .arms import breakdowns, compare_arms, make_arms, power_summary
from .charts import distribution_panels
from .evaluation import SCORED_OUTCOMES, Evaluation, evaluate
from .modes import families, mode_summary, strict_view
from .process import process_facts, read_processes
from .records import gold_files, read_rows, toolchain
from .workflow import workflow_facts

# The short form of each outcome: the per-task matrix's cells.
CELL: dict[str, str] = {o.name: o.cell for o in TABLE}
# How report.md counts the tasks a mode does not score: (one, several).
NOT_SCORED_WORDS = {
    "infra_error": ("infra error", "infra errors"),
    "not_run": ("left by the budget", "left by the budget"),
    "contaminated": ("contaminated", "contaminated"),
    "eval_error": ("evaluation error", "evaluation errors"),
}
# Why each is not scored, as the summary's note says it: "tasks ... whose agent run ..."
NOT_SCORED_WHY = {
    "infra_error": "ended in an infra error (the API or the network failed, after every retry)",
    "not_run": "was left by the budget (`max_cost`)",
    "contaminated": "was contaminated (the fix reached the agent)",
    "eval_error": "was not graded: the official harness's evaluation failed",
}
RUN_AGAIN_WORDS = {"infra_error": "the infra errors", "not_run": "the tasks left by the budget"}
SCHEMA_VERSION = 2


# A mode's figures (modes.py: mode_summary, with what collect adds), a results.jsonl row.
Data = Mapping[str, Any]
Row = Mapping[str, Any]


def method_settings() -> dict[str, Any]:
    """What the statistics depend on besides the files: part of the report's inputs."""
    return {
        "level": stats.LEVEL,
        "alpha": stats.ALPHA,
        "power": stats.POWER,
        "seed": stats.SEED,
        "resamples": stats.RESAMPLES,
        "schema": SCHEMA_VERSION,
    }


def _baseline(
    baseline: str | None, names: Sequence[str], rows: Mapping[str, Mapping[str, Row]]
) -> str | None:
    """The mode agent time is compared against: `baseline` when it has results, else the first
    agent mode, else none, else the first mode."""
    agent_modes = [
        m for m in names if any(r.get("agent_seconds") is not None for r in rows[m].values())
    ]
    if baseline not in names:
        baseline = (
            agent_modes[0]
            if agent_modes
            else ("none" if "none" in names else (names[0] if names else None))
        )
    return baseline


def _add_speed_vs_baseline(mode_data: Sequence[dict[str, Any]], baseline: str | None) -> None:
    by_name = {d["name"]: d for d in mode_data}
    base = by_name.get(baseline)
    for d in mode_data:
        mine, theirs = d["seconds"]["mean"], base["seconds"]["mean"] if base else None
        d["speed_vs_baseline"] = round(theirs / mine, 2) if mine and theirs else None


def not_scored_text(mode: Data) -> str:
    """ "1 infra error, 2 left by the budget": a mode's tasks outside its denominator ("0")."""
    parts = []
    for o in NOT_SCORED:
        n = len(mode["not_scored"][o])
        if n:
            parts.append(f"{n} {NOT_SCORED_WORDS[o][n != 1]}")
    return ", ".join(parts) or "0"


def not_scored_note(present: Sequence[str]) -> str:
    """Why the tasks of "not scored" are left out, for the outcomes `present` in the run only,
    and which of them the next `doit run` runs again (infra errors and the budget's, never a
    contaminated run: outcomes.UNFINISHED_AGENT)."""
    if not present:
        return ""
    why = [NOT_SCORED_WHY[o] for o in present]
    text = (
        f"whose agent run {', '.join(why[:-1])} or {why[-1]}"
        if len(why) > 1
        else f"whose agent run {why[0]}"
    )
    text += "; they count in no rate, interval or comparison"
    again = [o for o in present if o in UNFINISHED_AGENT]
    if again:
        what = "them" if again == present else " and ".join(RUN_AGAIN_WORDS[o] for o in again)
        text += f", and the next `doit run` runs {what} again"
    return text


def _agent_versions(mode_data: Iterable[Data]) -> str | None:
    """The agent CLI versions the run's agent records name: "v" when one, else "v (modes)"
    joined by "; "; None when no record names one."""
    modes_of: dict[str, list[str]] = {}
    for d in mode_data:
        for v in d["agent_versions"]:
            modes_of.setdefault(v, []).append(d["name"])
    if len(modes_of) < 2:
        return next(iter(modes_of), None)
    return "; ".join(f"{v} ({', '.join(ms)})" for v, ms in sorted(modes_of.items()))


def _display_facts(mode_data: Sequence[dict[str, Any]], kind: str | None = None) -> dict[str, Any]:
    """What report.md shows only when the run has it (so that a run without agents renders as
    before): the outcomes it does not score, cache token columns, the agent CLI versions,
    trajectory links; and each mode's "not_scored_text" for the summary table. kind: the
    benchmark's; a SWE-bench run's columns are the outcomes its rows can have (evaluation.py's
    SCORED_OUTCOMES: no build, prove or partial credit here), and any other one a row has."""
    for d in mode_data:
        d["not_scored_text"] = not_scored_text(d)
    present = [o for o in NOT_SCORED if any(d["not_scored"][o] for d in mode_data)]
    return {
        "outcomes": [
            o
            for o in OUTCOMES
            if o not in NOT_SCORED
            and (
                kind != SWEBENCH
                or o in SCORED_OUTCOMES
                or any(d["counts"].get(o) for d in mode_data)
            )
        ],
        "not_scored_outcomes": present,
        "not_scored_note": not_scored_note(present),
        "not_scored_words": NOT_SCORED_WORDS,
        # A mode has no result for some of the run's tasks (not run yet): the "no result" column.
        "no_result": any(d["missing"] for d in mode_data),
        "agents": any(d["has_agent"] for d in mode_data),
        "resolved_any": any(d["counts"]["resolved"] for d in mode_data),
        "cache_tokens": any(
            k in (d["tokens"] or {}) for d in mode_data for k in ("cache_read", "cache_creation")
        ),
        "agent_version": _agent_versions(mode_data),
        "trajectories": any(d["trajectories"] for d in mode_data),
        "isolation": any(
            d["isolation"]["isolated"] or d["isolation"]["unisolated"] for d in mode_data
        ),
        "unisolated_modes": [d["name"] for d in mode_data if d["isolation"]["unisolated"]],
        "web_tools_modes": [d["name"] for d in mode_data if d["isolation"]["web_tools"]],
        # Hosts an isolated mode may reach besides the model API (its allow_hosts, as configured)
        "allowed_hosts": {
            d["name"]: d["allow_hosts"]
            for d in mode_data
            if d["allow_hosts"] and d["isolation"]["isolated"]
        },
    }


def _benchmark_facts(layout: Layout, bench: Benchmark, total: int) -> dict[str, Any]:
    return {
        "name": bench.name,
        "kind": bench.kind,
        "file": os.path.relpath(bench.path, layout.root),
        "sha256": bench.digest,
        "version": bench.version,
        "tasks": total,
        "benchmark_tasks": len(bench.tasks),
        "subset": total < len(bench.tasks),
    }


def collect(
    layout: Layout,
    bench: Benchmark,
    tasks: Sequence[AnyTask],
    modes: Mapping[str, Mode],
    baseline: str | None = None,
    validation: Mapping[str, Any] | None = None,
    cutoff: str | None = None,
) -> dict[str, Any]:
    """Everything the template shows, as plain data (also what the tests check)."""
    names = modes_on_disk(layout, list(modes))
    task_ids = [t.instance_id for t in tasks]
    rows = read_rows(layout, names, task_ids)
    evaluation = graded_by_harness(layout, bench, rows)
    if evaluation:
        rows, names = evaluation.rows, [n for n in names if n in evaluation.rows]
    total = len(task_ids)
    gold = gold_files(layout, tasks)
    if validation is None:
        validation = jsonio.read_json(layout.validation_json) or {}
        for entry in validation.values():  # {instance_id: record}, each with its version
            record_version(layout.validation_json, entry)
    baseline = _baseline(baseline, names, rows)
    mode_data = [mode_summary(m, rows[m], task_ids, modes, gold) for m in names]
    _add_speed_vs_baseline(mode_data, baseline)
    arms = make_arms(mode_data, rows, task_ids)
    baseline_arm = next((a for a in arms if baseline in a["modes"]), None)
    comparisons = compare_arms(arms, task_ids, baseline_arm)
    strict_judged = strict_was_judged(mode_data)
    panels = [key for key, _, _ in distribution_panels({"modes": mode_data})]
    strict_comparisons = []
    if strict_judged:
        # A mode left unjudged (gold by default) has no strict rate to compare.
        judged = [strict_view(d) for d in mode_data if d["strict"]["judged"]]
        strict_arms = make_arms(judged, rows, task_ids, "strict")
        strict_base = next((a for a in strict_arms if baseline in a["modes"]), None)
        strict_comparisons = compare_arms(strict_arms, task_ids, strict_base)
    return {
        "date": datetime.date.today().isoformat(),
        "version": __version__,
        "run": layout.run,
        "benchmark": _benchmark_facts(layout, bench, total),
        "repositories": _repositories(tasks),
        "toolchain": toolchain(layout, names),
        "baseline": baseline,
        "baseline_arm": baseline_arm["name"] if baseline_arm else None,
        **_display_facts(mode_data, bench.kind),
        "cell": CELL,
        "modes": mode_data,
        "task_ids": task_ids,
        "matrix": [
            {
                "instance_id": i,
                "gold_files": gold.get(i),
                "cells": [
                    _cell(d, i, "model.patch" if evaluation else "grade.json") for d in mode_data
                ],
            }
            for i in task_ids
        ],
        "families": families(mode_data, task_ids),
        "arms": arms,
        "comparisons": comparisons,
        "strict_judged": strict_judged,
        "strict_comparisons": strict_comparisons,
        "power": power_summary(comparisons, total),
        "breakdowns": breakdowns(arms, tasks, cutoff),
        "level": stats.LEVEL,
        "alpha": stats.ALPHA,
        "power_target": stats.POWER,
        "result_versions": result_versions(rows),
        "warnings": (
            _version_warnings(result_versions(rows), bench, layout)
            + (evaluation.warnings if evaluation else [])
            + _warnings(mode_data, rows, validation, task_ids)
        ),
        "swebench": swebench_facts(layout, evaluation, bench),
        "workflow": workflow_facts(rows, names),
        "process": process_facts(rows, names, read_processes(layout, rows)),
        "cross": None,
        "validation": _verdict_counts(validation, task_ids),
        "chart": layout.report_chart.name,
        "chart_costs": any(a["cost_per_resolved"]["value"] is not None for a in arms),
        # None: no mode has agent time or cost, and no figure is drawn (charts.py)
        "distributions": layout.report_distributions.name if panels else None,
        "distributions_shows": " and ".join(
            unit
            for key, unit in (("seconds_values", "time"), ("cost_values", "cost"))
            if key in panels
        ),
    }


def strict_was_judged(mode_data: Sequence[Data]) -> bool:
    """Whether the run judged strictness: some mode has a strict verdict, and the resolved
    patches were not all left unjudged by strict=0 or strict_gold=0 (whose unresolved rows
    still say "not strict": a report would compare a strict rate of 0 with rates nobody
    judged)."""
    off = ("not judged (strict=0)", "not judged (strict_gold=0)")
    resolved = [e for d in mode_data for e in d["strict"]["unjudged"] + d["strict"]["not_strict"]]
    strict = sum(d["strict"]["count"] for d in mode_data)
    if not strict and resolved and all(e["reason"] in off for e in resolved):
        return False
    return any(d["strict"]["judged"] for d in mode_data)


def graded_by_harness(layout: Layout, bench: Benchmark, rows: dict) -> Evaluation | None:
    """A SWE-bench run's rows with the official harness's verdicts (evaluation.py); None for an
    nginx run, whose rows are graded already."""
    if bench.kind != SWEBENCH:
        return None
    commands = {
        m: command_line(command_for(layout, bench, m))
        for m in rows
        if layout.predictions_jsonl(m).exists()
    }
    return evaluate(layout, bench, rows, commands)


def graded_rows(
    layout: Layout, bench: Benchmark, modes: list, task_ids: list
) -> tuple[list[str], dict[str, dict[str, dict[str, Any]]], list[str]]:
    """(names, rows, warnings): the modes of `modes` with results in the run of `layout`, their
    rows of `task_ids` as the report reads them (a SWE-bench run's graded by the official
    harness's reports, graded_by_harness, with only the modes those reports grade), and the
    lines that grading warns of."""
    names = modes_on_disk(layout, list(modes))
    rows = read_rows(layout, names, task_ids)
    evaluation = graded_by_harness(layout, bench, rows)
    if evaluation:
        rows = evaluation.rows
    return [n for n in names if n in rows], rows, list(evaluation.warnings if evaluation else [])


def swebench_facts(
    layout: Layout, evaluation: Evaluation | None, bench: Benchmark | None = None
) -> dict[str, Any] | None:
    """What the report says of a SWE-bench run's grading (report-benchmarks.md.j2), or None;
    "pro": graded by the SWE-bench Pro harness (swebench/pro.py)."""
    if evaluation is None:
        return None
    pro = bench is not None and is_pro(bench.dataset)
    return {
        "evaluation_dir": os.path.relpath(layout.evaluation_dir, layout.run_dir),
        "modes": evaluation.modes,
        "local": local_facts(layout, evaluation),
        "workers_note": PRO_WORKERS_NOTE if pro else WORKERS_NOTE,
        "pro": pro,
        "harness_repo": f"{PRO_REPO} at {PRO_COMMIT[:7]}",
    }


def local_facts(layout: Layout, evaluation: Evaluation) -> list[dict[str, Any]]:
    """Per mode with local verdicts (swe_local=1; swebench/verdict.py, read from results.jsonl):
    {"mode", "verdicts": {status: n}, "differ": [ids whose local verdict is not the official
    one's, where the official harness graded them]}. Empty when no unit has one."""
    out = []
    for m in evaluation.modes:
        path = layout.results_jsonl(m["mode"])
        rows = (
            [r for r in jsonio.read_jsonl(path) if r.get("local_status")] if path.exists() else []
        )
        if not rows:
            continue
        official = evaluation.rows.get(m["mode"], {})
        differ = sorted(
            r["instance_id"]
            for r in rows
            if r.get("local_resolved") is not None
            and (official.get(r["instance_id"]) or {}).get("outcome") in ("resolved", "unresolved")
            and (official[r["instance_id"]]["outcome"] == "resolved") != r["local_resolved"]
        )
        out.append(
            {
                "mode": m["mode"],
                "verdicts": dict(Counter(r["local_status"] for r in rows)),
                "differ": differ,
            }
        )
    return out


def _cell(mode: Data, iid: str, target: str = "grade.json") -> dict[str, Any]:
    """A matrix cell; target: the file it links to (a SWE-bench unit has no grade.json here:
    its patch)."""
    o = mode["outcomes"].get(iid)
    trajectory = mode["trajectories"].get(iid)
    return {
        "mode": mode["name"],
        "outcome": o,
        "code": CELL[o] if o else "—",
        "link": f"{mode['name']}/{iid}/{target}" if o else None,
        "trajectory": f"{mode['name']}/{iid}/{trajectory}" if o and trajectory else None,
    }


def _repositories(tasks: Iterable[AnyTask]) -> list[dict[str, Any]]:
    repos: dict[str, dict[str, Any]] = {}
    for t in tasks:
        r = repos.setdefault(t.repo, {"repo": t.repo, "role": "source", "commits": set()})
        r["commits"].update(c for c in (t.base_commit, t.fix_commit) if c)
        if not t.test_commit:  # a SWE-bench task: its tests are in its own repository
            continue
        tr = repos.setdefault(t.test_repo, {"repo": t.test_repo, "role": "tests", "commits": set()})
        tr["commits"].add(t.test_commit)
    return [dict(r, commits=len(r["commits"])) for r in repos.values()]


def _verdict_counts(
    validation: Mapping[str, Any] | None, task_ids: Iterable[str]
) -> dict[str, int]:
    counts: dict[str, int] = {}
    for iid in task_ids:
        verdict = (
            (validation.get(iid) or {}).get("verdict", "not validated") if validation else None
        )
        if verdict:
            counts[verdict] = counts.get(verdict, 0) + 1
    return counts


def result_versions(rows: Mapping[str, Mapping[str, Row]]) -> list[dict[str, Any]]:
    """[{"version", "modes": {mode: tasks}}]: the benchmark versions the results were graded
    under (grade.json's, through results.jsonl; None: unversioned, or graded before the file had
    a version), oldest first."""
    found: dict[str | None, dict[str, int]] = {}
    for mode, by_id in rows.items():
        for row in by_id.values():
            modes = found.setdefault(row.get("benchmark_version"), {})
            modes[mode] = modes.get(mode, 0) + 1
    order = sorted(found, key=lambda v: (v is not None, version_key(v) if v else (0, 0)))
    return [{"version": v, "modes": found[v]} for v in order]


def _version_warnings(
    versions: Sequence[Mapping[str, Any]], bench: Benchmark, layout: Layout
) -> list[str]:
    """One warning when the results were graded under more than one version of the benchmark,
    or under another version than the task file's now: they are not results of one benchmark."""
    said = lambda v: f"version {v}" if v else "an unversioned task file"
    if not versions or [v["version"] for v in versions] == [bench.version]:
        return []
    where = "; ".join(
        f"{said(v['version'])} ({', '.join(f'{m}: {n}' for m, n in v['modes'].items())} "
        f"task{'s' if sum(v['modes'].values()) != 1 else ''})"
        for v in versions
    )
    file = os.path.relpath(bench.path, layout.root)
    if len(versions) > 1:
        head = f"results graded under {len(versions)} versions of the benchmark: {where}"
    else:
        head = f"results graded under {where}"
    return [
        f"{head}; the task file is now {said(bench.version)} (its changelog: `{file}`): "
        f"they are not results of one benchmark; run the modes again to grade every task "
        f"under {said(bench.version)}"
    ]


def _validation_warnings(
    validation: Mapping[str, Any] | None, task_ids: Iterable[str]
) -> list[str]:
    warnings: list[str] = []
    for iid in task_ids:
        v = (validation or {}).get(iid)
        if v and v.get("verdict") != "valid":
            warnings.append(
                f"{iid}: validation verdict `{v.get('verdict')}` "
                f"({'; '.join(v.get('reasons') or [])}): its cells are not evidence"
            )
        if v and v.get("unstable_base"):
            warnings.append(
                f"{iid}: without the fix, ungraded assertions varied across repeats: "
                f"{', '.join(v['unstable_base'][:3])}"
            )
    return warnings


# The metered cost and the one the program reports of itself may differ by rounding; more than
# this is a price or a count one of them has wrong.
COST_TOLERANCE = 0.01


def _row_warnings(mode: str, iid: str, row: Row) -> list[str]:
    """Environment errors of a row, an agent that did not complete, and a program's own cost
    that is not the metered one."""
    warnings = [f"{mode} / {iid}: environment error: {err}" for err in row.get("env_errors") or []]
    difference = row.get("cost_difference")
    if difference is not None and difference > COST_TOLERANCE:
        usd = lambda v: "an unknown" if v is None else f"{v:.6f} USD"
        warnings.append(
            f"{mode} / {iid}: the metered cost ({usd(row.get('cost_usd'))}) and the agent's own "
            f"({usd(row.get('self_reported_cost_usd'))}) differ by {difference:.1%} (over "
            f"{COST_TOLERANCE:.0%}); the report counts the metered one"
        )
    status = row.get("agent_status")
    if row.get("contaminated"):
        warnings.append(
            f"{mode} / {iid}: contaminated, not scored: the fix reached the agent "
            f"(see agent.json flags)"
        )
    if status == INFRA_ERROR:
        warnings.append(
            f"{mode} / {iid}: infra error, not scored: {row.get('agent_error') or status}"
        )
    elif status in (TIMEOUT, FAILED, ERROR):
        why = row.get("agent_error") or status
        what = "agent timeout" if status == TIMEOUT else "agent error"
        if row.get("resolved"):
            warnings.append(
                f"{mode} / {iid}: resolved although the agent ended with `{status}` ({why})"
            )
        else:
            warnings.append(f"{mode} / {iid}: {what}: {why}")
    return warnings


def _warnings(
    mode_data: Sequence[Data],
    rows: Mapping[str, Mapping[str, Row]],
    validation: Mapping[str, Any] | None,
    task_ids: Sequence[str],
) -> list[str]:
    warnings = _validation_warnings(validation, task_ids)
    for d in mode_data:
        if d["missing"]:
            warnings.append(
                f"mode {d['name']}: no result for {len(d['missing'])} of "
                f"{len(task_ids)} tasks ({', '.join(d['missing'][:5])}"
                f"{', ...' if len(d['missing']) > 5 else ''}): not run in this run, so "
                f'in none of its rates, intervals or breakdowns ("no result" in Summary)'
            )
        if not d["configured"]:
            warnings.append(
                f"mode {d['name']}: results on disk from a mode that is not in the "
                f"current configuration"
            )
        left = d["not_scored"]["not_run"]
        if left:
            warnings.append(
                f"mode {d['name']}: {len(left)} of {len(task_ids)} tasks left by the "
                f"budget (max_cost), not scored ({', '.join(left[:5])}"
                f"{', ...' if len(left) > 5 else ''})"
            )
        changed = d["verdict_changed_on_rerun"]
        if changed:
            warnings.append(
                f"mode {d['name']}: {len(changed)} of {len(task_ids)} tasks changed "
                f"verdict when a failing test file ran again (rerun_failed=1): "
                f"{', '.join(changed[:5])}{', ...' if len(changed) > 5 else ''}"
            )
        if len(d["ran"]) > 1:
            warnings.append(
                f"mode {d['name']}: its tasks ran {len(d['ran'])} different commands (see Modes)"
            )
        for iid, row in rows[d["name"]].items():
            warnings += _row_warnings(d["name"], iid, row)
    return warnings


# -- report.json -----------------------------------------------------------------------------------
def swebench_report(mode: Data) -> dict[str, Any]:
    """A mode's counts and ids under the names of SWE-bench's run report."""
    ids = lambda *os_: sorted(i for i, o in mode["outcomes"].items() if o in os_)
    submitted = sorted(mode["outcomes"])
    errors = ids(*NOT_JUDGED)
    completed = [i for i in submitted if i not in errors]
    resolved = ids("resolved")
    empty = sorted(mode["empty_ids"])
    return {
        "total_instances": len(submitted) + len(mode["missing"]),
        "submitted_instances": len(submitted),
        "completed_instances": len(completed),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(completed) - len(resolved),
        "empty_patch_instances": len(empty),
        "error_instances": len(errors),
        "submitted_ids": submitted,
        "completed_ids": completed,
        "incomplete_ids": sorted(mode["missing"]),
        "resolved_ids": resolved,
        "unresolved_ids": [i for i in completed if i not in resolved],
        "empty_patch_ids": empty,
        "error_ids": errors,
        "outcomes": dict(sorted(mode["outcomes"].items())),
        "agent_commands": [
            {
                "commands": [list(c) for c in r["commands"]],
                "model": r["model"],
                "instance_ids": sorted(r["instance_ids"]),
            }
            for r in mode["ran"]
        ],
    }


def agent_json(mode: Data) -> dict[str, Any]:
    """A mode's agent figures in report.json, for a mode whose rows come from an agent: the
    denominator, the tasks it does not score (counted apart), the CLI versions."""
    if not mode["has_agent"]:
        return {}
    out = {"scored_instances": mode["scored"]}
    for o in NOT_SCORED:
        out[f"{o}_instances"] = len(mode["not_scored"][o])
        out[f"{o}_ids"] = sorted(mode["not_scored"][o])
    out["agent_versions"] = mode["agent_versions"]
    iso = mode["isolation"]
    out["isolation"] = {
        "isolated_instances": len(iso["isolated"]),
        "unisolated_ids": iso["unisolated"],
        "web_tools_ids": iso["web_tools"],
        "blocked_connections": sum(iso["blocked"].values()),
        "blocked_ids": sorted(iso["blocked"]),
        "flagged_ids": sorted(iso["flagged"]),
        "contaminated_ids": iso["contaminated"],
    }
    return out


def rerun_json(mode: Data) -> dict[str, Any]:
    """A mode graded with rerun_failed=1: how many of its tasks the rerun changed the verdict
    of, and which."""
    if not mode["reran"]:
        return {}
    changed = sorted(mode["verdict_changed_on_rerun"])
    return {
        "verdict_changed_on_rerun_instances": len(changed),
        "verdict_changed_on_rerun_ids": changed,
    }


def mode_json(mode: Data, strict_judged: bool = True) -> dict[str, Any]:
    """A mode's entry in report.json: SWE-bench's fields plus the report's figures (the strict
    rate only when the run judged strictness: strict_was_judged)."""
    judged = strict_judged and mode["strict"]["judged"]
    return {
        **swebench_report(mode),
        "outcome_counts": {
            o: n for o, n in mode["counts"].items() if o not in NOT_SCORED or mode["has_agent"]
        },
        **agent_json(mode),
        **rerun_json(mode),
        "resolved_rate": mode["resolved_rate"],
        "resolved_interval": mode["resolved_interval"],
        "strict_rate": mode["strict"]["rate"] if judged else None,
        "strict_interval": mode["strict"]["interval"] if judged else None,
        "not_strict": mode["strict"]["not_strict"],
        "strict_unjudged": mode["strict"]["unjudged"],
        "cost_usd": mode["cost_usd"],
        "cost_per_resolved": {
            "value": mode["cost_per_resolved"],
            "interval": mode["cost_per_resolved_interval"],
        },
        "agent_seconds": mode["seconds"],
    }


def json_comparison(c: Data) -> dict[str, Any]:
    """A comparison's fields that report.json and compare-<OTHER>.json hold."""
    keep = (
        "a",
        "b",
        "arm",
        "method",
        "tasks",
        "a_rate",
        "b_rate",
        "difference",
        "interval",
        "interval_method",
        "p_value",
        "p_holm",
        "both",
        "a_only",
        "b_only",
        "neither",
        "discordance",
        "a_better",
        "b_better",
        "ties",
        "sd",
        "detectable",
        "sentence",
        "only_here",
        "only_other",
        "repeats_a",
        "repeats_b",
    )
    return {k: c[k] for k in keep if k in c}


def report_json(layout: Layout, bench: Benchmark, inputs: str, data: Data) -> dict[str, Any]:
    """report.json from collect()'s data and the digest of the report's inputs."""
    arms = {
        a["name"]: {
            "modes": a["modes"],
            "repeats": a["repeats"],
            "rate": a["rate"],
            "interval": a["interval"],
            "interval_method": a["interval_method"],
            "cost_per_resolved": {k: a["cost_per_resolved"][k] for k in ("value", "interval")},
        }
        for a in data["arms"]
    }
    return {
        "schema_version": SCHEMA_VERSION,
        "run": layout.run,
        "benchmark": bench.name,
        "benchmark_sha256": bench.digest,
        "benchmark_version": bench.version,
        "result_versions": data["result_versions"],
        "inputs": inputs,
        "tasks": data["task_ids"],
        "benchmark_tasks": len(bench.tasks),
        "level": stats.LEVEL,
        "alpha": stats.ALPHA,
        "seed": stats.SEED,
        "modes": {d["name"]: mode_json(d, data["strict_judged"]) for d in data["modes"]},
        "families": data["families"],
        "arms": arms,
        "comparisons": [json_comparison(c) for c in data["comparisons"]],
        "power": data["power"],
        "breakdowns": data["breakdowns"],
        "figures": figures(data),
        "swebench": data["swebench"],
        "cross": data["cross"],
        **({"workflow": data["workflow"]} if data.get("workflow") else {}),
        **({"process": data["process"]} if data.get("process") else {}),
    }


def figures(data: Data) -> list[str]:
    """The names of the figures report.md shows (files beside it)."""
    return [data["chart"]] + ([data["distributions"]] if data["distributions"] else [])
