"""Power planning (``doit run power detect=D``): from this run's comparisons (report/arms.py),
how many tasks, and where the repeats tell the variation within a task how many repeats, a
difference of D percentage points needs to be detected with 80% power (stats.py's formulas).
Prints, writes nothing.
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.console import say
from ..core.layout import Layout
from ..run.benchmark import AnyTask, Benchmark
from ..run.modes import Mode
from ..run.record import run_tasks
from . import stats
from .data import collect

PLAN_REPEATS = (1, 2, 3, 5, 10)


def plan(comparison: dict[str, Any], difference: float) -> dict[str, Any]:
    """How many tasks (and, where the repeats tell the variance within a task, how many repeats)
    a comparison like this one needs to detect `difference` (a rate difference, 0.1 = 10 pp)."""
    c = comparison
    out: dict[str, Any] = {
        "a": c["a"],
        "b": c["b"],
        "difference": difference,
        "tasks_now": c["tasks"],
    }
    if c["method"] == "mcnemar":
        out["discordance"] = c["discordance"]
        out["tasks_needed"] = stats.mcnemar_tasks_needed(difference, c["discordance"])
        # One run per task cannot tell the variation within a task from that between tasks.
        out["by_repeats"] = None
    else:
        out["sd"] = c["sd"]
        out["tasks_needed"] = stats.paired_tasks_needed(difference, c["sd"])
        out["by_repeats"] = stats.paired_plan(
            c["sd"],
            c["repeats_a"],
            c["repeats_b"],
            c["within_a"],
            c["within_b"],
            difference,
            PLAN_REPEATS,
        )
    return out


def _comparison_line(c: dict[str, Any]) -> str:
    """What a comparison observed, and the difference it detects with its tasks now."""
    head = f"{c['a_label']} vs {c['b_label']}"
    if c["method"] == "mcnemar":
        head += (
            f": they disagree on {c['a_only'] + c['b_only']} of {c['tasks']} tasks "
            f"(discordance {100 * c['discordance']:.0f}%)"
        )
    else:
        head += f": per-task differences have sd {100 * c['sd']:.0f} pp" if c["sd"] else ""
    now = c.get("detectable")
    head += (
        f"; with {c['tasks']} tasks it detects {stats.fmt_pp(now, sign=False)} pp"
        if now is not None
        else f"; with {c['tasks']} tasks no difference is detectable"
    )
    return head


def _plan_line(c: dict[str, Any], difference: float) -> str:
    """The tasks (and repeats) a comparison like `c` needs to detect `difference`."""
    p = plan(c, difference)
    need = p["tasks_needed"]
    text = f"  to detect {100 * difference:g} pp: " + (
        f"about {need} tasks" if need else "cannot tell (no disagreement observed between them)"
    )
    if p["by_repeats"]:
        text += "; with k repeats of each: " + ", ".join(
            f"k={k}: {n} tasks" for k, n in p["by_repeats"].items() if n
        )
    elif not (c["within_a"] == 0.0 and c["within_b"] == 0.0):
        once = [c[side] for side, w in (("a", c["within_a"]), ("b", c["within_b"])) if w is None]
        text += (
            f"; repeats: cannot tell from one run per task of {' and '.join(once)} "
            f"(`repeats = k` in modes.toml measures the variation within a task)"
        )
    return text


def plan_lines(data: dict[str, Any], differences: Sequence[float]) -> list[str]:
    """The lines `doit run power` prints."""
    lines = [
        f"power: run {data['run']}, {data['benchmark']['tasks']} tasks; "
        f"{100 * stats.POWER:.0f}% power, two-sided {100 * stats.ALPHA:.0f}% "
        f"(exact McNemar test for modes run once per task; paired t approximation of "
        f"the per-task mean scores with repeats)"
    ]
    if not data["comparisons"]:
        lines.append(
            "power: no two modes with results for the same tasks in this run: nothing "
            "to plan from (run a second mode first)"
        )
        return lines
    for c in data["comparisons"]:
        lines.append(_comparison_line(c))
        lines += [_plan_line(c, d) for d in differences]
    return lines


def print_plan(
    layout: Layout,
    bench: Benchmark,
    tasks: Iterable[AnyTask],
    modes: Mapping[str, Mode],
    baseline: str | None,
    differences: Sequence[float],
) -> None:
    """doit action of ``power``: the plan for `differences` (default 5 and 10 pp)."""
    tasks = run_tasks(layout, bench, tasks)
    data = collect(layout, bench, tasks, modes, baseline)
    say(*plan_lines(data, differences or (0.05, 0.10)))
