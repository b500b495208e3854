"""The report's charts, drawn with matplotlib from collect()'s data (report/data.py):
``report-chart.png`` (resolved rate and, when an arm has one, cost per resolved task per arm,
with 95% intervals) and
``report-distributions.png`` (agent time and cost per task, per mode: only the panels some mode
has values for, and no figure at all when none has, as in a run of gold and none). A panel or a
figure with nothing in it is not drawn: report.md would link to an empty picture. The PNGs carry
no timestamp or software tag, so the same result files give the same bytes.
"""

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


def _errors(
    values: Iterable[tuple[float | None, Sequence[Any] | None]],
) -> list[list[float]]:
    """Asymmetric error bar lengths for matplotlib from (value, interval) pairs."""
    low: list[float] = []
    high: list[float] = []
    for v, ci in values:
        if v is None or ci is None:
            low.append(0.0)
            high.append(0.0)
        else:
            low.append(max(0.0, v - ci[0]))
            high.append(max(0.0, (ci[1] if ci[1] is not None else v) - v))
    return [low, high]


def _save(fig: Any, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", metadata={"Software": None})
    os.replace(tmp, path)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    return plt


def draw_chart(data: Mapping[str, Any], path: Path) -> None:
    """Resolved rate per arm with its 95% interval, and beside it cost per resolved task with
    its interval, as a PNG (no timestamp in it). Without a cost per resolved task in any arm (a
    run of gold and none) the cost panel would be empty: the chart is the rate panel alone."""
    plt = _pyplot()
    arms = data["arms"]
    names = [a["name"] + (f" (×{a['repeats']})" if a["repeats"] > 1 else "") for a in arms]
    # An arm that scored no task has no rate (None): no bar, and "—" beside where it would be.
    rates = [100 * a["rate"] if a["rate"] is not None else None for a in arms]
    rate_errors = _errors(
        [
            (r, [100 * v for v in a["interval"]] if a["interval"] else None)
            for r, a in zip(rates, arms, strict=True)
        ]
    )
    known = [a["cost_per_resolved"]["value"] for a in arms]
    with_costs = any(k is not None for k in known)
    fig, axes = plt.subplots(
        1, 2 if with_costs else 1, figsize=(9 if with_costs else 4.5, 3.4), dpi=100, squeeze=False
    )
    left = axes[0][0]
    left.bar(
        names,
        [r or 0.0 for r in rates],
        color="#4a7ab5",
        yerr=rate_errors,
        capsize=4,
        ecolor="#222222",
    )
    left.set_ylim(0, 105)
    left.set_ylabel("resolved (%)")
    left.set_title("Resolved rate, 95% interval")
    for x, v in enumerate(rates):
        left.annotate(
            "—" if v is None else f"{v:.0f}%",
            (x, v or 0.0),
            ha="left",
            va="bottom",
            fontsize=8,
            xytext=(3, 0),
            textcoords="offset points",
        )
    if with_costs:
        _cost_panel(axes[0][1], arms, names, known)
    for ax in axes[0]:
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _cost_panel(
    ax: Any,
    arms: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    known: Sequence[float | None],
) -> None:
    costs = [c or 0.0 for c in known]
    cost_errors = _errors(
        [(a["cost_per_resolved"]["value"], a["cost_per_resolved"]["interval"]) for a in arms]
    )
    ax.bar(names, costs, color="#c8803a", yerr=cost_errors, capsize=4, ecolor="#222222")
    top = max([c + e for c, e in zip(costs, cost_errors[1], strict=True)] + [0.0])
    ax.set_ylim(0, top * 1.2 or 1.0)
    ax.set_ylabel("USD")
    ax.set_title("Cost per resolved task (— none)")
    for x, (v, k) in enumerate(zip(costs, known, strict=True)):
        ax.annotate(
            "—" if k is None else f"${v:.2f}",
            (x, v),
            ha="left",
            va="bottom",
            fontsize=8,
            xytext=(3, 0),
            textcoords="offset points",
        )


DISTRIBUTION_PANELS = (
    ("seconds_values", "Agent time per task", "seconds"),
    ("cost_values", "Agent cost per task", "USD"),
)


def distribution_panels(data: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The panels of report-distributions.png that some mode has values for (none: no figure)."""
    return [p for p in DISTRIBUTION_PANELS if any(m[p[0]] for m in data["modes"])]


def draw_distributions(data: Mapping[str, Any], path: Path) -> bool:
    """Agent time and cost per task, per mode: a box plot with every task as a point, one panel
    for each of the two that some mode has values for. Without either, no figure (and the one
    an earlier rendering left is removed); returns whether it was drawn."""
    import numpy as np

    panels = distribution_panels(data)
    if not panels:
        path.unlink(missing_ok=True)
        return False
    plt = _pyplot()
    fig, axes = plt.subplots(
        1, len(panels), figsize=(4.5 * len(panels), 3.4), dpi=100, squeeze=False
    )
    for ax, (key, title, unit) in zip(axes[0], panels, strict=True):
        shown = [m for m in data["modes"] if m[key]]
        ax.set_title(title)
        ax.set_ylabel(unit)
        values = [m[key] for m in shown]
        ax.boxplot(values, widths=0.5, showfliers=False)
        for x, vs in enumerate(values, 1):
            # Spread the points sideways by rank, not at random: the same files, the same image.
            offsets = np.linspace(-0.15, 0.15, len(vs)) if len(vs) > 1 else [0.0]
            ax.scatter([x + o for o in offsets], vs, s=10, color="#4a7ab5", alpha=0.7, zorder=3)
        ax.set_xticks(range(1, len(shown) + 1), [m["name"] for m in shown], rotation=30, fontsize=8)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return True
