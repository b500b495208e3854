"""report.md and compare-<OTHER>.md from their data: the Jinja environment over ``templates/``
and the filters the templates format numbers with (counts, percentages, dollars, intervals,
percentage points, p-values). A missing value shows as "—" everywhere.
"""

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2

from . import stats

TEMPLATE = "report.md.j2"
COMPARE_TEMPLATE = "report-compare.md.j2"


def _fmt(value: float | None, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and math.isnan(value):
        return "—"
    return f"{value:,.{digits}f}{unit}" if isinstance(value, float) else f"{value:,}{unit}"


def _ci_pct(interval: Sequence[float] | None, digits: int = 1) -> str:
    """[low, high] of a rate, in percent."""
    if not interval:
        return "—"
    return f"[{100 * interval[0]:.{digits}f}, {100 * interval[1]:.{digits}f}]"


def _ci_ratio(interval: Sequence[float | None] | None) -> str:
    """[low, high] of a ratio of times or costs ("unbounded": a resample with nothing below)."""
    if not interval:
        return "—"
    low, high = interval
    return (f"[{low:,.2f}×, " if low is not None else "[—, ") + (
        f"{high:,.2f}×]" if high is not None else "unbounded]"
    )


def usd(value: float | None) -> str:
    """Dollars to the cent, and to a hundredth of a cent under a dollar: an agent call of a few
    cents, or a task's cost with a cheap model, would otherwise show as $0.02 or $0.00."""
    if value is None:
        return "—"
    return f"${value:,.2f}" if abs(value) >= 1 or value == 0 else f"${value:,.4f}"


def _ci_usd(interval: Sequence[float | None] | None) -> str:
    if not interval:
        return "—"
    low, high = interval
    return (f"[{usd(low)}, " if low is not None else "[—, ") + (
        f"{usd(high)}]" if high is not None else "unbounded]"
    )


def compiled_cache(directory: Path | None) -> jinja2.BytecodeCache | None:
    """Jinja's cache of compiled templates in `directory` (None: none): compiling the report's
    templates costs more than rendering them, and a run renders them again after every batch."""
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    return jinja2.FileSystemBytecodeCache(str(directory))


def render(
    data: dict[str, Any],
    templates_dir: str | Path,
    template: str = TEMPLATE,
    compiled: Path | None = None,
) -> str:
    """The markdown of `template` (in templates_dir) filled with `data`; `compiled`: the
    directory of compiled templates (Layout.compiled_templates)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir)),
        bytecode_cache=compiled_cache(compiled),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _fmt
    env.filters["pct"] = lambda v: "—" if v is None else f"{100 * v:.1f}%"
    env.filters["usd"] = usd
    env.filters["cellsafe"] = lambda s: str(s).replace("|", "\\|").replace("\n", " ")
    env.filters["ci"] = _ci_pct
    env.filters["ci_usd"] = _ci_usd
    env.filters["ci_ratio"] = _ci_ratio
    env.filters["pp"] = lambda v, d=1, sign=True: stats.fmt_pp(v, d, sign)
    env.filters["ci_pp"] = lambda ci, d=1: (
        "—" if not ci else f"[{stats.fmt_pp(ci[0], d)}, {stats.fmt_pp(ci[1], d)}]"
    )
    env.filters["p"] = stats.fmt_p
    return env.get_template(template).render(**data)
