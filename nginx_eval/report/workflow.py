"""The report's workflow section (issue 50): for each mode whose agent ran more than one phase or
a loop, its time and cost per phase (the planner's share: every phase but the loop's), its loop
statistics (iterations, how loops ended, tasks resolved without the marker ever written), and the
time and cost ratios between the users' modes (nlcmd over full, full over impl) on the tasks
both ran, with a seeded bootstrap interval over tasks (stats.ratio_interval, scipy.stats); and
for each step up the users' ladder (raw to impl, impl to full, full to nlcmd) each mode's cost
per resolved task and the marginal cost per extra resolved task, (cost_b - cost_a) /
(resolved_b - resolved_a) summed over the tasks both scored with a cost, with the same
bootstrap (undefined, "no extra task resolved", when b resolved no more than a).

Read from results.jsonl rows: ``phase_figures`` (one entry per call: name, program, model,
seconds, cost_usd, fallback, loop) and ``loop`` (agent.json's, core/records.py: LoopRecord).
"""

from collections import Counter
from typing import Any

from ..core.outcomes import NOT_SCORED, RESOLVED
from . import stats
from .modes import cost_per_resolved, rounded, rounded_pair
from .records import row_outcome

# (a, b): a's time and cost over b's, the comparisons the users' own reports make.
PAIRS = (("nlcmd", "full"), ("full", "impl"))
# (a, b): what b's extra resolved tasks cost over a's, the cheaper mode first.
STEPS = (("raw", "impl"), ("impl", "full"), ("full", "nlcmd"))


def _sum(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known), 6) if known else None


def _share(part: float | None, whole: float | None) -> float | None:
    return rounded(part / whole) if part is not None and whole else None


def mode_workflow(name: str, by_id: dict[str, dict]) -> dict[str, Any] | None:
    """One mode's phases and loops, or None when its rows have neither (one-call modes)."""
    calls = [(iid, c) for iid, r in by_id.items() for c in (r.get("phase_figures") or [])]
    loops = {iid: r["loop"] for iid, r in by_id.items() if r.get("loop")}
    if len({c["name"] for _, c in calls}) < 2 and not loops:
        return None
    phases: dict[str, dict[str, Any]] = {}
    for iid, c in calls:
        p = phases.setdefault(
            c["name"],
            {"name": c["name"], "calls": 0, "tasks": set(), "seconds": [], "cost": [], "ran": []},
        )
        p["calls"] += 1
        p["tasks"].add(iid)
        p["seconds"].append(c.get("seconds"))
        p["cost"].append(c.get("cost_usd"))
        p["ran"].append(f"{c.get('program') or 'agent'} {c.get('model') or ''}".strip())
        p["loop"] = bool(c.get("loop"))
    total_seconds = _sum([c.get("seconds") for _, c in calls])
    total_cost = _sum([c.get("cost_usd") for _, c in calls])
    rows = []
    for p in phases.values():
        seconds, cost = _sum(p["seconds"]), _sum(p["cost"])
        rows.append(
            {
                "name": p["name"],
                "loop": p["loop"],
                "calls": p["calls"],
                "tasks": len(p["tasks"]),
                "seconds": seconds,
                "cost_usd": cost,
                "time_share": _share(seconds, total_seconds),
                "cost_share": _share(cost, total_cost),
                "ran": dict(Counter(p["ran"])),
            }
        )
    planner = [r for r in rows if not r["loop"]] if loops else []
    planner_seconds = _sum([r["seconds"] for r in planner])
    planner_cost = _sum([r["cost_usd"] for r in planner])
    ended = Counter(str(loop["ended"]) for loop in loops.values())
    unmarked = sorted(
        iid for iid, loop in loops.items() if not loop.get("marker") and by_id[iid].get("resolved")
    )
    return {
        "name": name,
        "phases": rows,
        "planner": (
            {
                "seconds": planner_seconds,
                "cost_usd": planner_cost,
                "time_share": _share(planner_seconds, total_seconds),
                "cost_share": _share(planner_cost, total_cost),
            }
            if planner
            else None
        ),
        "loops": (
            {
                "tasks": len(loops),
                "iterations_mean": rounded(
                    sum(loop["iterations"] for loop in loops.values()) / len(loops)
                ),
                "iterations_max": max(loop["iterations"] for loop in loops.values()),
                "ended": dict(sorted(ended.items())),
                "resolved_without_marker": unmarked,
            }
            if loops
            else None
        ),
    }


def _ratio(ra: dict, rb: dict, key: str, seed: int) -> dict[str, Any] | None:
    ids = sorted(i for i in ra if i in rb and ra[i].get(key) is not None and rb[i].get(key))
    if not ids:
        return None
    value, interval = stats.ratio_interval(
        [ra[i][key] for i in ids], [rb[i][key] for i in ids], seed
    )
    return {"tasks": len(ids), "ratio": rounded(value), "interval": rounded_pair(interval)}


def _resolved(row: dict) -> int:
    return int(row_outcome(row) == RESOLVED)


def marginal_cost(a: str, b: str, ra: dict, rb: dict) -> dict[str, Any] | None:
    """b over a on the tasks both scored with a cost: their costs, resolved tasks, costs per
    resolved task and the marginal cost per extra resolved task (module docstring); None when
    no task is shared."""
    ids = sorted(
        i
        for i in ra
        if i in rb
        and all(
            r[i].get("cost_usd") is not None and row_outcome(r[i]) not in NOT_SCORED
            for r in (ra, rb)
        )
    )
    if not ids:
        return None
    cost_a = [ra[i]["cost_usd"] for i in ids]
    cost_b = [rb[i]["cost_usd"] for i in ids]
    extra = [_resolved(rb[i]) - _resolved(ra[i]) for i in ids]
    value, interval = stats.ratio_interval(
        [y - x for x, y in zip(cost_a, cost_b, strict=True)],
        extra,
        stats.seed_for("marginal", a, b),
    )
    per_a = cost_per_resolved({i: [ra[i]] for i in ids}, stats.seed_for("marginal", a, b, a))
    per_b = cost_per_resolved({i: [rb[i]] for i in ids}, stats.seed_for("marginal", a, b, b))
    return {
        "a": a,
        "b": b,
        "tasks": len(ids),
        "cost_a": rounded(sum(cost_a), 6),
        "cost_b": rounded(sum(cost_b), 6),
        "resolved_a": sum(_resolved(ra[i]) for i in ids),
        "resolved_b": sum(_resolved(rb[i]) for i in ids),
        "per_resolved_a": {k: per_a[k] for k in ("value", "interval")},
        "per_resolved_b": {k: per_b[k] for k in ("value", "interval")},
        "extra_resolved": sum(extra),
        "marginal": rounded(value),
        "marginal_interval": rounded_pair(interval),
    }


def workflow_facts(rows: dict[str, dict[str, dict]], names: list[str]) -> dict[str, Any] | None:
    """The section's data (module docstring), or None when no mode has phases to show."""
    modes = [w for w in (mode_workflow(m, rows[m]) for m in names) if w]
    pairs = []
    for a, b in PAIRS:
        if a in rows and b in rows:
            time = _ratio(rows[a], rows[b], "agent_seconds", stats.seed_for("workflow", a, b, "t"))
            cost = _ratio(rows[a], rows[b], "cost_usd", stats.seed_for("workflow", a, b, "c"))
            if time or cost:
                pairs.append({"a": a, "b": b, "time": time, "cost": cost})
    steps = [
        m
        for a, b in STEPS
        if a in rows and b in rows
        for m in [marginal_cost(a, b, rows[a], rows[b])]
        if m
    ]
    if not modes and not pairs and not steps:
        return None
    return {"modes": modes, "pairs": pairs, "marginal": steps}
