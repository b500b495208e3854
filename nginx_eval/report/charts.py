"""The report's charts, drawn with matplotlib from collect()'s data (report_data.py):
``report-chart.png`` (resolved rate and cost per resolved task per arm, with 95% intervals) and
``report-distributions.png`` (agent time and cost per task, per mode). The PNGs carry no timestamp
or software tag, so the same result files give the same bytes.
"""

import os


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


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    return plt


def draw_chart(data, path):
    """Resolved rate per arm with its 95% interval, and cost per resolved task with its
    interval, side by side, as a PNG (no timestamp in it)."""
    plt = _pyplot()
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
    import numpy as np
    plt = _pyplot()
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
