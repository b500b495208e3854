"""One report over two or three benchmarks: ``doit run report run=A cross=B`` (or ``cross=B,C``).

A run belongs to one benchmark (run/record.py); ``cross=B`` (``B,C``: nginx, Verified and Pro)
adds to run A's report.md and report.json a section that sets the runs side by side
(docs/report.md#two-benchmarks). A side may be either kind; a SWE-bench side is read with the
official harness's verdicts (evaluation.py), its modes not graded yet left out.
Per mode and benchmark: the resolved rate (Wilson) over the scored tasks, the mean agent time
and cost per task. Per pair of modes both runs have (not gold and none, the bounds): within each
benchmark the report's paired comparison (arms.compare_pair; Holm over that benchmark's pairs)
and the ratios of mean agent time and cost (stats.ratio_interval); pooled over all,
stats.cmh_paired (Holm over the pairs). A family with repeats is compared per benchmark only.

report.json's ``cross`` (null without cross=)::

    {"run", "other",
     "benchmarks": [{"run", "benchmark", "kind", "tasks"}],            # this run first
     "modes": [{"mode", "cells": [{"run", "benchmark", "graded": bool, "n", "resolved",
                                   "rate", "interval", "seconds_per_task", "cost_per_task"}]}],
     "pairs": [{"a", "b",
                "cells": [{"run", "benchmark", "tasks", "a_only", "b_only", "difference",
                           "interval", "p_value", "p_holm", "method",
                           "time_ratio": {"tasks", "ratio", "interval"} | null,
                           "cost_ratio": {"tasks", "ratio", "interval"} | null}],
                "pooled": stats.cmh_paired's fields, with "p_holm" | null}],
     "warnings": [str]}
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.layout import Layout
from ..run.benchmark import Benchmark
from ..run.record import cross_runs, other_run, run_tasks
from . import stats
from .arms import compare_pair, finish_comparisons, make_arms
from .data import graded_rows
from .modes import mode_summary, rounded, rounded_pair

BOUNDS = ("gold", "none")  # built-in baselines: in the modes table, not in the pairs


def side(layout: Layout, bench: Benchmark, tasks: list, modes: Mapping) -> dict:
    """One benchmark's side: {"run", "bench", "task_ids", "rows", "names", "data", "arms",
    "warnings"}, a SWE-bench run's rows graded by the official harness's reports."""
    task_ids = [t.instance_id for t in run_tasks(layout, bench, tasks)]
    names, rows, graded_warnings = graded_rows(layout, bench, list(modes), task_ids)
    data = {m: mode_summary(m, rows[m], task_ids, modes, {}) for m in names}
    arms = {a["name"]: a for a in make_arms(list(data.values()), rows, task_ids, label=layout.run)}
    return {
        "run": layout.run,
        "bench": bench,
        "task_ids": task_ids,
        "rows": rows,
        "names": names,
        "data": data,
        "arms": arms,
        "warnings": [f"run {layout.run}: {w}" for w in graded_warnings],
    }


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known) / len(known), 4) if known else None


def _mode_cell(s: Mapping[str, Any], arm: Mapping[str, Any] | None) -> dict[str, Any]:
    """A mode's figures on one side (None when that run has no graded results of it)."""
    cell: dict[str, Any] = {"run": s["run"], "benchmark": s["bench"].name}
    if arm is None:
        return dict(
            cell,
            graded=False,
            n=0,
            resolved=None,
            rate=None,
            interval=None,
            seconds_per_task=None,
            cost_per_task=None,
        )
    members = [s["data"][m] for m in arm["modes"]]
    return dict(
        cell,
        graded=True,
        n=len(arm["table"]),
        resolved=sum(sum(v) for v in arm["table"].values()) if arm["repeats"] == 1 else None,
        rate=arm["rate"],
        interval=arm["interval"],
        seconds_per_task=_mean([v for d in members for v in d["seconds_values"]]),
        cost_per_task=_mean([v for d in members for v in d["cost_values"]]),
    )


def _ratio(s: Mapping[str, Any], a: str, b: str, key: str, seed: int) -> dict[str, Any] | None:
    """Mean `key` (agent_seconds, cost_usd) of mode a over mode b on one side, on the tasks
    both have it for, with its bootstrap interval; None for a family or without such tasks."""
    if s["arms"][a]["repeats"] > 1 or s["arms"][b]["repeats"] > 1:
        return None
    ra, rb = s["rows"][a], s["rows"][b]
    ids = [
        i
        for i in s["task_ids"]
        if i in ra and i in rb and ra[i].get(key) is not None and rb[i].get(key) is not None
    ]
    if not ids:
        return None
    value, interval = stats.ratio_interval(
        [ra[i][key] for i in ids], [rb[i][key] for i in ids], seed
    )
    return {"tasks": len(ids), "ratio": rounded(value), "interval": rounded_pair(interval)}


def _pair_cells(sides: Sequence[Mapping[str, Any]], a: str, b: str) -> list[dict[str, Any]]:
    """Per side: the paired comparison (or None) and the time and cost ratios."""
    cells = []
    for s in sides:
        c = compare_pair(s["arms"][a], s["arms"][b], s["task_ids"], ("cross", s["run"], a, b))
        cells.append(
            {
                "run": s["run"],
                "benchmark": s["bench"].name,
                "comparison": c,
                "time_ratio": _ratio(
                    s, a, b, "agent_seconds", stats.seed_for("cross", s["run"], a, b, "time")
                ),
                "cost_ratio": _ratio(
                    s, a, b, "cost_usd", stats.seed_for("cross", s["run"], a, b, "cost")
                ),
            }
        )
    return cells


def _pooled(
    sides: Sequence[Mapping[str, Any]], cells: Sequence[Mapping[str, Any]], a: str, b: str
) -> dict[str, Any] | None:
    """stats.cmh_paired over all sides, or None for a family or a side without a comparison."""
    strata: list[tuple[list[int], list[int]]] = []
    for s, cell in zip(sides, cells, strict=True):
        c = cell["comparison"]
        if c is None or c["method"] != "mcnemar":
            return None
        strata.append(
            (
                [int(s["arms"][a]["scores"][i]) for i in c["task_ids"]],
                [int(s["arms"][b]["scores"][i]) for i in c["task_ids"]],
            )
        )
    return stats.cmh_paired(strata)


def _finish(sides: Sequence[Mapping[str, Any]], pairs: Sequence[Mapping[str, Any]]) -> None:
    """Holm over each side's comparisons and over the pooled tests; numbers rounded once."""
    for k, s in enumerate(sides):
        done = [p["cells"][k]["comparison"] for p in pairs if p["cells"][k]["comparison"]]
        finish_comparisons(done, len(s["task_ids"]))
    pooled = [p["pooled"] for p in pairs if p["pooled"]]
    for pool, adjusted in zip(pooled, stats.holm([q["p_value"] for q in pooled]), strict=True):
        pool["p_holm"] = round(adjusted, 8)
        for key in ("difference", "statistic", "p_value", "p_exact", "odds_ratio", "homogeneity_p"):
            if isinstance(pool.get(key), float):
                pool[key] = round(pool[key], 8 if key.startswith(("p", "homog")) else 4)
        pool["interval"] = rounded_pair(pool["interval"])
        pool["odds_ratio_interval"] = rounded_pair(pool["odds_ratio_interval"])


def _comparison_fields(c: Mapping[str, Any] | None) -> dict[str, Any]:
    if c is None:
        return {
            "tasks": 0,
            "a_only": None,
            "b_only": None,
            "difference": None,
            "interval": None,
            "p_value": None,
            "p_holm": None,
            "method": None,
        }
    return {
        "tasks": c["tasks"],
        "a_only": c.get("a_only", c.get("a_better")),
        "b_only": c.get("b_only", c.get("b_better")),
        "difference": c["difference"],
        "interval": c["interval"],
        "p_value": c["p_value"],
        "p_holm": c["p_holm"],
        "method": c["method"],
    }


def collect_cross(
    layout: Layout, bench: Benchmark, tasks: list, modes: Mapping, other: str
) -> dict:
    """The cross-benchmark section's data (module docstring), this run first."""
    sides = [side(layout, bench, tasks, modes)]
    for run in cross_runs(other):
        theirs, their_bench, _ = other_run(layout, run)
        sides.append(side(theirs, their_bench, [], modes))
    names = list(dict.fromkeys(n for s in sides for n in s["arms"]))
    rows = [{"mode": n, "cells": [_mode_cell(s, s["arms"].get(n)) for s in sides]} for n in names]
    pairs = []
    shared = [n for n in names if n not in BOUNDS and all(n in s["arms"] for s in sides)]
    for i, a in enumerate(shared):
        for b in shared[i + 1 :]:
            cells = _pair_cells(sides, a, b)
            pairs.append({"a": a, "b": b, "cells": cells, "pooled": _pooled(sides, cells, a, b)})
    _finish(sides, pairs)
    for p in pairs:
        p["cells"] = [
            dict(
                {
                    "run": c["run"],
                    "benchmark": c["benchmark"],
                    "time_ratio": c["time_ratio"],
                    "cost_ratio": c["cost_ratio"],
                },
                **_comparison_fields(c["comparison"]),
            )
            for c in p["cells"]
        ]
    return {
        "run": layout.run,
        "other": other,
        "benchmarks": [
            {
                "run": s["run"],
                "benchmark": s["bench"].name,
                "kind": s["bench"].kind,
                "tasks": len(s["task_ids"]),
            }
            for s in sides
        ],
        "modes": rows,
        "pairs": pairs,
        "warnings": [w for s in sides[1:] for w in s["warnings"]],
    }
