"""What the report compares and how: *arms* (a mode, or a mode family taken together), every
pair of arms compared on the tasks both have results for (McNemar and Newcombe for one run per
task, a permutation test and a bootstrap interval on per-task means with repeats; stats.py), Holm's
adjustment over the pairs, each comparison in a sentence, the power summary, and resolved rates by
area, by fix date and by test source (nginx-tests, or tests the project wrote: run/benchmark.py).
A task whose outcome is not scored in a mode (outcomes.NOT_SCORED) is in none of them for that
mode (report/modes.py: scored_table).
"""

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..core.outcomes import NOT_SCORED, RESOLVED
from ..run.benchmark import TEST_SOURCES, AnyTask
from . import stats
from .modes import cost_per_resolved, groups, rate_of, rounded, rounded_pair, scored_table

# Modes whose patch does not change from one run to the next: no variance within a task.
DETERMINISTIC_KINDS = ("gold", "none", "predictions")
# A mode's figures (modes.py: mode_summary), an arm (make_arms), a comparison (compare_pair).
Data = Mapping[str, Any]
# How a sentence quotes side "a" or "b" of a comparison.
Quote = Callable[[Data, str], str]


def _arm_scores(
    members: Sequence[Data], task_ids: Iterable[str]
) -> tuple[dict[str, list[int]], dict[str, float]]:
    """table: {iid: [1/0 per scored repeat]} over the tasks of the run (a missing result is left
    out, as in the resolved rate; scored_table); scores: {iid: mean over the repeats that have a
    scored result}, for the tasks with at least one (what pairs are compared on)."""
    table = scored_table(members, task_ids)
    scores: dict[str, float] = {}
    for i in task_ids:
        have = [
            1 if d["outcomes"][i] == RESOLVED else 0
            for d in members
            if i in d["outcomes"] and d["outcomes"][i] not in NOT_SCORED
        ]
        if have:
            scores[i] = sum(have) / len(have)
    return table, scores


def _arm_rate(
    table: Mapping[str, Sequence[int]], k: int
) -> tuple[float | None, Any, str, float | None]:
    """(rate, interval, interval method, clustered standard error) of an arm of k repeats."""
    if k == 1:
        resolved = sum(v[0] for v in table.values())
        return (
            rate_of(resolved, len(table)),
            rounded_pair(stats.wilson(resolved, len(table))),
            "wilson",
            None,
        )
    c = stats.clustered_mean(list(table.values()))
    return rounded(c["mean"]), rounded_pair(c["interval"]), "clustered by task", rounded(c["se"])


def make_arms(
    mode_data: Sequence[Data],
    rows: Mapping[str, Mapping[str, Data]],
    task_ids: Sequence[str],
    label: str | None = None,
) -> list[dict[str, Any]]:
    """What comparisons compare: each mode family (a mode and its repeats) as one arm; `label`
    (a run's name) keeps the seeds of two runs' arms apart."""
    arms: list[dict[str, Any]] = []
    for family, members in groups(mode_data).items():
        k = len(members)
        table, scores = _arm_scores(members, task_ids)
        rate, interval, how, se = _arm_rate(table, k)
        deterministic = all(d["kind"] in DETERMINISTIC_KINDS for d in members)
        within = (
            0.0
            if deterministic
            else (stats.within_task_variance(list(table.values())) if k > 1 else None)
        )
        name = family if k > 1 else members[0]["name"]
        cost = cost_per_resolved(
            {i: [rows[d["name"]][i] for d in members if i in rows[d["name"]]] for i in task_ids},
            stats.seed_for("cost", label or "", "arm", name),
        )
        arms.append(
            {
                "name": name,
                "label": f"{name} ({k} repeats)" if k > 1 else name,
                "modes": [d["name"] for d in members],
                "repeats": k,
                "table": table,
                "scores": scores,
                "rate": rate,
                "interval": interval,
                "interval_method": how,
                "se": se,
                "within_variance": within,
                "cost_per_resolved": cost,
                "commands": [r for d in members for r in d["ran"]][:1],
            }
        )
    return arms


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _interval_pp(interval: Sequence[float] | None) -> str:
    if interval is None:
        return "[—]"
    return f"[{stats.fmt_pp(interval[0])}, {stats.fmt_pp(interval[1])}]"


def compare_pair(
    a: Data,
    b: Data,
    task_ids: Iterable[str],
    seed_parts: Sequence[object],
    names: tuple[str, str] | None = None,
) -> dict[str, Any] | None:
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
    r.update(
        {
            "a": a_name,
            "b": b_name,
            "a_label": a["label"],
            "b_label": b["label"],
            "repeats_a": a["repeats"],
            "repeats_b": b["repeats"],
            "within_a": a["within_variance"],
            "within_b": b["within_variance"],
            "task_ids": common,
        }
    )
    return r


def finish_comparisons(
    comparisons: list[dict[str, Any]],
    total: int,
    quote: Quote = lambda c, side: f"`{c[side]}`",
) -> list[dict[str, Any]]:
    """Holm-adjusted p-values and a sentence for each comparison."""
    adjusted = stats.holm([c["p_value"] for c in comparisons])
    for c, p in zip(comparisons, adjusted, strict=True):
        c["p_holm"] = p
        c["sentence"] = sentence(c, total, len(comparisons), quote)
        for key in (
            "difference",
            "a_rate",
            "b_rate",
            "discordance",
            "sd",
            "detectable",
            "within_a",
            "within_b",
        ):
            if isinstance(c.get(key), float):
                c[key] = round(c[key], 4)
        for key in ("p_value", "p_holm"):
            c[key] = round(c[key], 8)
        c["interval"] = rounded_pair(c["interval"])
    return comparisons


def compare_arms(
    arms: Sequence[Data], task_ids: Sequence[str], baseline_arm: Data | None = None
) -> list[dict[str, Any]]:
    """Every pair of arms: those with the baseline first (the baseline second in each), then
    the others in the order of the modes."""
    pairs: list[tuple[Data, Data]] = [
        (a, baseline_arm) for a in arms if baseline_arm and a is not baseline_arm
    ]
    for i, a in enumerate(arms):
        for b in arms[i + 1 :]:
            if baseline_arm not in (a, b):
                pairs.append((a, b))
    out = []
    for a, b in pairs:
        c = compare_pair(a, b, task_ids, ("pair", a["name"], b["name"]))
        if c is not None:
            out.append(c)
    return finish_comparisons(out, len(task_ids))


def sentence(c: Data, total: int, how_many: int, quote: Quote) -> str:
    """The comparison in words, for a reader to quote."""
    a, b = quote(c, "a"), quote(c, "b")
    p_value = stats.fmt_p(c["p_value"])
    diff = (
        f"difference {stats.fmt_pp(c['difference'])} pp {_interval_pp(c['interval'])}, "
        f"p {p_value if p_value.startswith('<') else '= ' + p_value}"
    )
    if how_many > 1:
        diff += f" (Holm: {stats.fmt_p(c['p_holm'])})"
    if c["method"] == "mcnemar":
        text = (
            f"{a} resolves {_plural(c['a_only'], 'task')} {b} does not, {b} "
            f"{c['b_only']} that {a} does not; {diff}"
        )
    else:
        text = (
            f"{a} ({_plural(c['repeats_a'], 'run')} per task) resolves "
            f"{stats.fmt_pp(c['a_rate'], sign=False)}% of the tasks on average, {b} "
            f"({_plural(c['repeats_b'], 'run')}) {stats.fmt_pp(c['b_rate'], sign=False)}%; "
            f"{a} does better on {_plural(c['a_better'], 'task')}, {b} on {c['b_better']}; "
            f"{diff}"
        )
    if c["tasks"] < total:
        text += f"; on the {c['tasks']} of {total} tasks both have results for"
    return text + "."


def disagreements(c: Data) -> int:
    """The tasks on which the two arms of a comparison disagree: one resolves and the other does
    not (one run per task), or their mean scores differ (repeats)."""
    return c["a_only"] + c["b_only"] if c["method"] == "mcnemar" else c["a_better"] + c["b_better"]


def power_summary(comparisons: Sequence[Data], total: int) -> dict[str, Any]:
    """The smallest differences the comparisons detect with the target power, summarised;
    "undetectable": the pairs that disagree on some task and still detect no difference (what
    report.md says when no pair detects one), {"a", "b" (labels), "disagree", "tasks"}."""
    found = [c["detectable"] for c in comparisons if c.get("detectable") is not None]
    return {
        "power": stats.POWER,
        "alpha": stats.ALPHA,
        "tasks": total,
        "comparisons": len(comparisons),
        "estimable": len(found),
        "median_detectable": rounded(statistics.median(found)) if found else None,
        "min_detectable": rounded(min(found)) if found else None,
        "max_detectable": rounded(max(found)) if found else None,
        "disagreeing": sum(1 for c in comparisons if disagreements(c)),
        "undetectable": [
            {
                "a": c["a_label"],
                "b": c["b_label"],
                "disagree": disagreements(c),
                "tasks": c["tasks"],
            }
            for c in comparisons
            if c.get("detectable") is None and disagreements(c)
        ],
    }


def _group_cells(arms: Sequence[Data], ids: Sequence[str]) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = []
    for arm in arms:
        scored = [i for i in ids if i in arm["table"]]
        if arm["repeats"] == 1:
            k = sum(arm["table"][i][0] for i in scored)
            cells.append(
                {
                    "arm": arm["name"],
                    "resolved": k,
                    "tasks": len(scored),
                    "rate": rate_of(k, len(scored)),
                    "interval": rounded_pair(stats.wilson(k, len(scored))),
                }
            )
        else:
            c = stats.clustered_mean([arm["table"][i] for i in scored])
            cells.append(
                {
                    "arm": arm["name"],
                    "resolved": None,
                    "tasks": len(scored),
                    "rate": rounded(c["mean"]),
                    "interval": rounded_pair(c["interval"]),
                }
            )
    return cells


def breakdowns(
    arms: Sequence[Data], tasks: Iterable[AnyTask], cutoff: str | None = None
) -> dict[str, Any]:
    """Resolved rates with intervals per area, per test source, and before / on or after
    `cutoff` by fix date."""
    by_area: dict[str, list[str]] = {}
    by_source: dict[str, list[str]] = {source: [] for source in TEST_SOURCES}
    for t in tasks:
        by_area.setdefault(t.area or "(no area)", []).append(t.instance_id)
        by_source.setdefault(t.tests, []).append(t.instance_id)  # swe-bench: its own
    area = [
        {"label": label, "tasks": len(ids), "cells": _group_cells(arms, ids)}
        for label, ids in sorted(by_area.items())
    ]
    # Authored tests are the project's own: their tasks are kept apart from the suite's, whose
    # tests nginx's developers wrote with the fix.
    source = [
        {"label": label, "tasks": len(ids), "cells": _group_cells(arms, ids)}
        for label, ids in by_source.items()
        if ids
    ]
    groups_by_date = []
    if cutoff:
        split: dict[str, list[str]] = {
            f"fixed before {cutoff}": [],
            f"fixed on or after {cutoff}": [],
            "no fix date": [],
        }
        for t in tasks:
            key = (
                "no fix date"
                if not t.fix_date
                else f"fixed before {cutoff}"
                if t.fix_date < cutoff
                else f"fixed on or after {cutoff}"
            )
            split[key].append(t.instance_id)
        groups_by_date = [
            {"label": label, "tasks": len(ids), "cells": _group_cells(arms, ids)}
            for label, ids in split.items()
            if ids
        ]
    return {"area": area, "tests": source, "fix_date": {"cutoff": cutoff, "groups": groups_by_date}}
