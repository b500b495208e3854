"""The report's figures for each mode, and for each mode family (a mode and its repeats), from
the rows report/records.py reads: outcome counts, the resolved rate with its Wilson interval, agent
time, cost (per resolved task with a seeded bootstrap interval), tokens, patch sizes and overlap
with the gold patch; per family, the spread of the repeats' rates and pass@k.

A mode's denominator is the run's tasks less those whose outcome is not scored
(outcomes.NOT_SCORED: the agent's run ended in an infra error, or the budget left it not run):
those count in no rate, interval or comparison, and are counted apart. So does a task the mode
has no result for (not run yet in this run: `limit=1` after another mode's `limit=3`; a SWE-bench
prediction the official report gives no verdict): it says nothing of the mode, and scoring it 0
would read as failures the tasks the mode never tried (docs/report.md: the denominator).
A rate over no task is None (shown "—"), never a rate of 0.

Numbers are rounded here, once, to what report.json holds (4 decimals for rates, 3 for seconds).
"""

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.outcomes import NOT_SCORED, OUTCOMES, RESOLVED, UNRESOLVED
from ..run.modes import AgentMode, Mode
from . import stats
from .records import commands_that_ran, row_outcome

# A results.jsonl row; a mode's rows by instance id; a mode's figures (mode_summary).
Row = Mapping[str, Any]
Rows = Mapping[str, Row]
Data = Mapping[str, Any]

TOKEN_KINDS = ("input", "output")
CACHE_TOKEN_KINDS = ("cache_read", "cache_creation")


def rate_of(n: int, total: int) -> float | None:
    """n of total, rounded as report.json holds it; None of no task: "0 of 0" is no rate."""
    return round(n / total, 4) if total else None


def rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


def rounded_pair(
    interval: Sequence[float | None] | None, digits: int = 4
) -> list[float | None] | None:
    if interval is None:
        return None
    return [rounded(v, digits) for v in interval]


def family_of(name: str, modes: Mapping[str, Mode]) -> tuple[str, int]:
    """(family, repeat) of a mode: from its configuration, else from its name (``raw-r2``)."""
    if name in modes:
        return modes[name].family, modes[name].repeat
    head, sep, tail = name.rpartition("-r")
    if sep and tail.isdigit() and head:
        return head, int(tail)
    return name, 1


def _summary_numbers(values: Sequence[float | None]) -> dict[str, Any]:
    known = [v for v in values if v is not None]
    if not known:
        return {
            "n": 0,
            "total": None,
            "mean": None,
            "median": None,
            "min": None,
            "q1": None,
            "q3": None,
            "max": None,
        }
    quartiles = statistics.quantiles(known, n=4) if len(known) > 1 else [known[0]] * 3
    return {
        "n": len(known),
        "total": round(sum(known), 3),
        "mean": round(statistics.mean(known), 3),
        "median": round(statistics.median(known), 3),
        "min": round(min(known), 3),
        "q1": round(quartiles[0], 3),
        "q3": round(quartiles[2], 3),
        "max": round(max(known), 3),
    }


def cost_per_resolved(rows_by_task: Mapping[str, Sequence[Row]], seed: int) -> dict[str, Any]:
    """Cost per resolved task over the tasks with a cost, with its bootstrap interval. rows_by_task:
    {iid: [rows]} (the repeats of an arm, or one row)."""
    costs: list[float] = []
    resolved: list[float] = []
    for rows in rows_by_task.values():
        known = [r for r in rows if r.get("cost_usd") is not None]
        if not known:
            continue
        costs.append(sum(r["cost_usd"] for r in known))
        resolved.append(sum(1 for r in known if row_outcome(r) == RESOLVED))
    if not costs:
        return {"value": None, "interval": None, "tasks": 0}
    value, interval = stats.ratio_interval(costs, resolved, seed)
    return {"value": rounded(value), "interval": rounded_pair(interval), "tasks": len(costs)}


def _described(m: str, mode: Mode | None, modes: Mapping[str, Mode]) -> dict[str, Any]:
    """What the mode is: its family and repeat, kind, model and configured commands."""
    family, repeat = family_of(m, modes)
    return {
        "name": m,
        "family": family,
        "repeat": repeat,
        "kind": mode.kind
        if mode
        else ("predictions" if m == "file" else m if m in ("gold", "none") else "unknown"),
        "model": mode.model if mode else "",
        "description": mode.description if mode else "not in the current configuration",
        "commands": [(p.name, p.command) for p in mode.phases]
        if isinstance(mode, AgentMode)
        else [],
        "allow_hosts": list(mode.allow_hosts) if isinstance(mode, AgentMode) else [],
    }


def _time_and_cost(m: str, by_id: Rows, resolved: int) -> dict[str, Any]:
    """Agent seconds and cost of the mode's rows; `resolved`: how many it resolved."""
    costs: list[float] = [r["cost_usd"] for r in by_id.values() if r.get("cost_usd") is not None]
    cost = round(sum(costs), 4) if costs else None
    per_resolved = cost_per_resolved({i: [r] for i, r in by_id.items()}, stats.seed_for("cost", m))
    return {
        "seconds": _summary_numbers([r.get("agent_seconds") for r in by_id.values()]),
        "cost_usd": cost,
        "seconds_values": [
            r["agent_seconds"] for r in by_id.values() if r.get("agent_seconds") is not None
        ],
        "cost_values": costs,
        "cost_per_resolved": (round(cost / resolved, 4) if cost is not None and resolved else None),
        "cost_per_resolved_interval": per_resolved["interval"],
    }


def _token_totals(by_id: Rows) -> dict[str, int] | None:
    """{"input", "output"} summed over the rows that report them, plus "cache_read" and
    "cache_creation" when any row reports those; None when no row reports tokens."""
    tokens, has_tokens = {k: 0 for k in TOKEN_KINDS}, False
    for r in by_id.values():
        for k in TOKEN_KINDS + CACHE_TOKEN_KINDS:
            v = (r.get("tokens") or {}).get(k)
            if v is not None:
                tokens[k] = tokens.get(k, 0) + v
                has_tokens = True
    return tokens if has_tokens else None


def scored_table(members: Iterable[Data], task_ids: Iterable[str]) -> dict[str, list[int]]:
    """{iid: [1 or 0 per repeat whose outcome is scored]} of mode data `members` (a mode and its
    repeats): a missing result and a NOT_SCORED outcome are left out, and a task none of whose
    repeats is scored is not in the table."""
    table: dict[str, list[int]] = {}
    for i in task_ids:
        scores = [
            1 if d["outcomes"][i] == RESOLVED else 0
            for d in members
            if i in d["outcomes"] and d["outcomes"][i] not in NOT_SCORED
        ]
        if scores:
            table[i] = scores
    return table


def _patch_figures(by_id: Rows, gold: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """Sizes of the mode's patches, and how far they touch the files the gold patch touches."""
    patches = [r.get("patch") or {} for r in by_id.values()]
    overlaps, covers = [], 0
    for i, r in by_id.items():
        want = set(gold.get(i) or [])
        have = set((r.get("patch") or {}).get("files") or [])
        if want:
            overlaps.append(len(want & have) / len(want))
            covers += want <= have
    return {
        "lines_added": sum(p.get("lines_added") or 0 for p in patches),
        "lines_removed": sum(p.get("lines_removed") or 0 for p in patches),
        "files_touched": sum(len(p.get("files") or []) for p in patches),
        "empty": sum(1 for p in patches if not p.get("files")),
        "gold_overlap": round(statistics.mean(overlaps), 4) if overlaps else None,
        "covers_gold": covers,
        "with_gold": len(overlaps),
    }


def _agent_facts(by_id: Rows, outcomes: Mapping[str, str]) -> dict[str, Any]:
    """Whether the mode's rows come from an agent, the CLI versions they name, their
    trajectories ({iid: path in the task's results dir}), and the tasks whose outcome is not
    scored ({outcome: [ids]})."""
    return {
        "has_agent": any(r.get("agent_status") is not None for r in by_id.values()),
        "agent_versions": sorted(
            {r["agent_version"] for r in by_id.values() if r.get("agent_version")}
        ),
        "trajectories": {i: r["trajectory"] for i, r in by_id.items() if r.get("trajectory")},
        "not_scored": {o: [i for i, v in outcomes.items() if v == o] for o in NOT_SCORED},
        "isolation": _isolation_facts(by_id),
    }


def _isolation_facts(by_id: Rows) -> dict[str, Any]:
    """What the mode's agents could reach and tried (agent.json's isolation, web_tools, blocked,
    flags): runs isolated and not, isolated runs whose web tools were open, refused connections
    per task, tasks flagged, tasks contaminated."""
    agents = {i: r for i, r in by_id.items() if r.get("isolation")}
    isolated = sorted(i for i, r in agents.items() if r["isolation"] != "none")
    return {
        "isolated": isolated,
        "unisolated": sorted(i for i, r in agents.items() if r["isolation"] == "none"),
        "web_tools": [i for i in isolated if agents[i].get("web_tools")],
        "blocked": {i: r["blocked"] for i, r in agents.items() if r.get("blocked")},
        "flagged": {i: r["flags"] for i, r in agents.items() if r.get("flags")},
        "contaminated": sorted(i for i, r in agents.items() if r.get("contaminated")),
    }


def _rerun_facts(by_id: Rows) -> dict[str, Any]:
    """Whether the mode was graded with reruns (rerun_failed=1), and the tasks whose verdict the
    rerun of a failing test file changed."""
    return {
        "reran": any("first_run_status" in r for r in by_id.values()),
        "verdict_changed_on_rerun": [
            i
            for i, r in by_id.items()
            if r.get("first_run_status", r.get("status")) != r.get("status")
        ],
    }


def mode_summary(
    m: str,
    by_id: Rows,
    task_ids: Sequence[str],
    modes: Mapping[str, Mode],
    gold: Mapping[str, Sequence[str]],
) -> dict[str, Any]:
    """The report's figures for one mode, from its rows."""
    outcomes = {i: row_outcome(r) for i, r in by_id.items()}
    counts = {o: sum(1 for v in outcomes.values() if v == o) for o in OUTCOMES}
    scored_rows = {i: r for i, r in by_id.items() if outcomes[i] not in NOT_SCORED}
    # The tasks the mode has a scored result for (see the module's docstring).
    total = len(scored_rows)
    mode = modes.get(m)
    return {
        **_described(m, mode, modes),
        "ran": commands_that_ran(by_id),
        "configured": mode is not None,
        "submitted": len(by_id),
        "missing": [i for i in task_ids if i not in by_id],
        "empty_ids": [i for i, r in scored_rows.items() if not (r.get("patch") or {}).get("files")],
        "outcomes": outcomes,
        "counts": counts,
        "scored": total,
        **_agent_facts(by_id, outcomes),
        **_rerun_facts(by_id),
        "rates": {o: rate_of(n, total) for o, n in counts.items() if o not in NOT_SCORED},
        "resolved_rate": rate_of(counts["resolved"], total),
        "resolved_interval": rounded_pair(stats.wilson(counts["resolved"], total)),
        **_time_and_cost(m, by_id, counts["resolved"]),
        "tokens": _token_totals(by_id),
        "patch": _patch_figures(scored_rows, gold),
        "strict": _strict_facts(by_id, outcomes, total),
    }


def _strict_facts(by_id: Rows, outcomes: Mapping[str, str], total: int) -> dict[str, Any]:
    """The strict verdict of the mode's rows (grade.json's strict, results.jsonl): whether any
    was judged, the strict rate over the same denominator as the resolved rate, and the
    resolved tasks that are not strict or could not be judged, with why."""
    resolved = [i for i, o in outcomes.items() if o == RESOLVED]
    strict = [i for i in resolved if by_id[i].get("strict") is True]
    why = lambda i: by_id[i].get("strict_reason") or ""
    return {
        # Judged: some resolved patch was (strict=0 leaves them all null), or none resolved
        # and the rows carry the verdict (false: not resolved).
        "judged": any(by_id[i].get("strict") is not None for i in resolved)
        or (not resolved and any(r.get("strict") is False for r in by_id.values())),
        "count": len(strict),
        "rate": rate_of(len(strict), total),
        "interval": rounded_pair(stats.wilson(len(strict), total)),
        "not_strict": [
            {"instance_id": i, "reason": why(i)}
            for i in resolved
            if by_id[i].get("strict") is False
        ],
        "unjudged": [
            {"instance_id": i, "reason": why(i)} for i in resolved if by_id[i].get("strict") is None
        ],
    }


def strict_view(mode: Data) -> dict[str, Any]:
    """The mode's data with "resolved" only where the patch is also strict: the report's paired
    comparisons of strict rates run on it."""
    strict = {
        i
        for i in mode["outcomes"]
        if i
        not in {e["instance_id"] for e in mode["strict"]["not_strict"] + mode["strict"]["unjudged"]}
    }
    outcomes = {
        i: (UNRESOLVED if o == RESOLVED and i not in strict else o)
        for i, o in mode["outcomes"].items()
    }
    return dict(mode, outcomes=outcomes)


def groups(mode_data: Iterable[Data]) -> dict[str, list[Data]]:
    """{family: [mode data, by repeat]}, in the order of their first mode."""
    out: dict[str, list[Data]] = {}
    for d in mode_data:
        out.setdefault(d["family"], []).append(d)
    for members in out.values():
        members.sort(key=lambda d: d["repeat"])
    return out


def families(mode_data: Iterable[Data], task_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """{family: the spread of its repeats' resolved rates, pass@k, the clustered interval} for
    each family with more than one repeat."""
    out: dict[str, dict[str, Any]] = {}
    for family, members in groups(mode_data).items():
        if len(members) < 2:
            continue
        rates = [d["resolved_rate"] for d in members]
        # A repeat that scored no task has no rate: the spread is over those that have one.
        known = [r for r in rates if r is not None]
        mean = round(statistics.mean(known), 4) if known else None
        table = scored_table(members, task_ids)
        any_resolved = sum(1 for scores in table.values() if any(scores))
        clustered = stats.clustered_mean(list(table.values()))
        out[family] = {
            "repeats": [d["name"] for d in members],
            "resolved_rates": rates,
            "mean": mean,
            "min": min(known, default=None),
            "max": max(known, default=None),
            "stdev": (
                round(statistics.stdev(known), 4) if len(known) > 1 else 0.0 if known else None
            ),
            "pass_at_1": mean,
            "pass_at_k": rate_of(any_resolved, len(table)),
            "k": len(members),
            "se": rounded(clustered["se"]),
            "interval": rounded_pair(clustered["interval"]),
        }
    return out
