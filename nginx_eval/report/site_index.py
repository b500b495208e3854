"""The index of the run's site (site.py), as plain data for ``templates/site/index.html.j2``:
the report's summary table and a matrix of tasks by modes.

The figures are report.json's (report.py writes it first; nothing is computed again here): per
mode the outcome counts, the resolved rate with its interval, the cost. A cell of the matrix is
the unit's outcome in report.json, its strict verdict when its grade.json has one (report_site_task
.strict_verdict), and a mark when its agent.json records flags or blocked network attempts. The
cell links to the unit's page. A unit that is not scored (outcomes.NOT_SCORED) shows no strict
verdict, and its cell's title says why it is not scored (site_task.not_scored: the agent's error
line).

Rows carry what the page's filters and sort use: the task's area, its fix-date split (``recent``:
fixed on or after the cutoff, ``older``, or ``undated``) and how much the modes disagree. Modes
disagree on a task when some resolve it and others do not; gold and none are left out of that
(they resolve every task and none by construction) unless fewer than two other modes remain. The
disagreement of a task is the smaller of the two sides (two of four modes resolving it disagree
more than one of four), then the number of distinct outcomes.
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core import jsonio
from ..core.layout import Layout
from ..core.outcomes import NOT_SCORED, OUTCOMES, RESOLVED
from ..core.records import read_record
from ..run.benchmark import AnyTask
from .data import CELL
from .site_task import link, not_scored, strict_verdict

REFERENCE_MODES = ("gold", "none")


def split_of(task: AnyTask, cutoff: str) -> str:
    if not task.fix_date:
        return "undated"
    return "recent" if task.fix_date >= cutoff else "older"


def compared_modes(modes: Sequence[str]) -> list[str]:
    """The modes whose disagreement sorts the matrix (see the module docstring)."""
    others = [m for m in modes if m not in REFERENCE_MODES]
    return others if len(others) >= 2 else list(modes)


def disagreement(outcomes: Iterable[str | None]) -> tuple[int, int, int]:
    """(resolved, compared, score) of a task's outcomes in the compared modes; unscored and
    missing outcomes are left out. score: 0 when the modes agree, else (the smaller side, the
    number of distinct outcomes) folded into one sortable number."""
    scored = [o for o in outcomes if o and o not in NOT_SCORED]
    resolved = sum(o == RESOLVED for o in scored)
    smaller = min(resolved, len(scored) - resolved)
    return resolved, len(scored), (smaller * 100 + len(set(scored))) if smaller else 0


def unit_marks(agent: Mapping[str, Any] | None) -> list[str]:
    """Marks of a unit's agent record: "flags" and "blocked" when isolation recorded any."""
    marks: list[str] = []
    if (agent or {}).get("flags"):
        marks.append("flags")
    if any(p.get("blocked") for p in (agent or {}).get("phases") or [] if isinstance(p, dict)):
        marks.append("blocked")
    return marks


def summary_rows(report: Mapping[str, Any], modes: Iterable[str]) -> list[dict[str, Any]]:
    """One row per mode, from report.json: counts per outcome, not scored, the resolved rate and
    its interval, the cost."""
    rows: list[dict[str, Any]] = []
    for m in modes:
        entry = (report.get("modes") or {}).get(m)
        if not entry:
            continue
        counts = entry.get("outcome_counts") or {}
        rows.append(
            {
                "mode": m,
                "counts": counts,
                "not_scored": sum(counts.get(o, 0) for o in NOT_SCORED),
                "scored": entry.get("scored_instances", entry.get("total_instances")),
                "total": entry.get("total_instances"),
                "missing": len(entry.get("incomplete_ids") or []),
                "resolved": entry.get("resolved_instances"),
                "rate": entry.get("resolved_rate"),
                "interval": entry.get("resolved_interval"),
                "cost_usd": entry.get("cost_usd"),
            }
        )
    return rows


def index_context(
    layout: Layout,
    tasks: Sequence[AnyTask],
    modes: Sequence[str],
    cutoff: str,
    report: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What templates/site/index.html.j2 shows (also the index's inputs: every value here is
    JSON-able). `tasks`: the run's tasks; `modes`: the run's modes (those with results);
    `report`: report.json (read from the run when None)."""
    report = jsonio.read_json(layout.report_json) or {} if report is None else report
    outcomes = {m: ((report.get("modes") or {}).get(m) or {}).get("outcomes") or {} for m in modes}
    compared = compared_modes(modes)
    index = layout.site_index
    rows: list[dict[str, Any]] = []
    for task in tasks:
        iid = task.instance_id
        cells: list[dict[str, Any]] = []
        for m in modes:
            o = outcomes[m].get(iid)
            page = layout.site_page(m, iid)
            unit = layout.task_dir(m, iid).is_dir()
            grade = read_record(layout.grade_json(m, iid)) if unit else None
            agent = read_record(layout.agent_json(m, iid)) if unit else None
            unscored = not_scored(o, agent)
            strict = None if unscored else strict_verdict(grade)
            cells.append(
                {
                    "mode": m,
                    "outcome": o,
                    "code": CELL.get(o, "?") if o else "—",
                    "why": unscored["why"] if unscored else None,
                    "strict": strict,
                    "strict_code": CELL.get(strict, strict) if strict is not None else None,
                    "href": link(page, index) if unit else None,
                    "marks": unit_marks(agent),
                }
            )
        resolved, n, score = disagreement([outcomes[m].get(iid) for m in compared])
        rows.append(
            {
                "instance_id": iid,
                "area": task.area or "(no area)",
                "fix_date": task.fix_date,
                "split": split_of(task, cutoff),
                "resolved": resolved,
                "compared": n,
                "disagree": score,
                "cells": cells,
            }
        )
    # The scored outcomes that occur (resolved always); the others are one "not scored" column.
    shown = [
        o
        for o in OUTCOMES
        if o not in NOT_SCORED
        and (o == RESOLVED or any((r["counts"].get(o) or 0) for r in summary_rows(report, modes)))
    ]
    return {
        "run": layout.run,
        "root": "",
        "benchmark": report.get("benchmark"),
        "level": report.get("level", 0.95),
        "tasks": len(tasks),
        "modes": list(modes),
        "compared": compared,
        "cutoff": cutoff,
        "summary": summary_rows(report, modes),
        "outcomes": shown,
        "cell": CELL,
        "not_scored_outcomes": list(NOT_SCORED),
        "areas": sorted({r["area"] for r in rows}),
        "splits": [s for s in ("recent", "older", "undated") if any(r["split"] == s for r in rows)],
        "rows": rows,
        "report_md": link(layout.report_md, index) if layout.report_md.exists() else None,
        "report_json": link(layout.report_json, index) if layout.report_json.exists() else None,
        "chart": link(layout.report_chart, index) if layout.report_chart.exists() else None,
        "marks": any(c["marks"] for r in rows for c in r["cells"]),
        "strict": any(c["strict"] for r in rows for c in r["cells"]),
    }
