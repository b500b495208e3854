"""The proxy's records added up: what a phase, an attempt or a run was metered at
(core/records.py: Metered). Pure."""

import gzip
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from ..core.records import Metered, record_version
from .usage import TOKEN_KINDS


def totals(calls: Iterable[Mapping[str, Any]]) -> Metered:
    """{"calls", "billed_calls", "unpriced_calls", "cost_usd", "tokens", "models"} of the
    records: cost None when a call with tokens has no price (a model the table does not know),
    so that a partial sum never passes for the whole; "models": the same figures per model and
    program, and the price table's entry that priced the model (pricing.py)."""
    calls = list(calls)
    billed = [c for c in calls if c.get("tokens")]
    unpriced = [c for c in billed if c.get("cost_usd") is None]
    models: dict[str, dict[str, Any]] = {}
    for c in billed:
        m = models.setdefault(
            str(c.get("model")),
            {"program": c.get("program"), "calls": 0, "cost_usd": 0.0, "unpriced_calls": 0}
            | {"priced_as": None, "price_match": None}
            | {k: 0 for k in TOKEN_KINDS},
        )
        m["calls"] += 1
        if c.get("priced_as") and not m["priced_as"]:
            m["priced_as"], m["price_match"] = c["priced_as"], c.get("price_match")
        for k in TOKEN_KINDS:
            m[k] += int(c["tokens"].get(k) or 0)
        if c.get("cost_usd") is None:
            m["unpriced_calls"] += 1
        else:
            m["cost_usd"] = round(m["cost_usd"] + c["cost_usd"], 10)
    for m in models.values():
        if m["unpriced_calls"]:
            m["cost_usd"] = None
    # Metered's fields; its token and model figures are built by kind (TOKEN_KINDS) above.
    return cast(
        Metered,
        {
            "calls": len(calls),
            "billed_calls": len(billed),
            "unpriced_calls": len(unpriced),
            "cost_usd": None if unpriced else round(sum(c["cost_usd"] for c in billed), 10),
            "tokens": {k: sum(int(c["tokens"].get(k) or 0) for c in billed) for k in TOKEN_KINDS},
            "models": models,
        },
    )


def read_calls(path: str | Path) -> list[dict[str, Any]]:
    """The records of a calls.jsonl.gz (a line cut short by a killed run is left out)."""
    try:
        text = gzip.open(path, "rt", encoding="utf-8").read()
    except (OSError, EOFError):
        return []
    out = []
    for line in text.splitlines():
        try:
            call = json.loads(line)
        except ValueError:
            continue
        record_version(path, call)  # one a later nginx-eval wrote: refused
        out.append(call)
    return out


def relative_difference(metered: float | None, own: float | None) -> float | None:
    """|metered - own| / metered (None when either is unknown; 0 when both are 0)."""
    if metered is None or own is None:
        return None
    if metered == 0:
        return 0.0 if own == 0 else 1.0
    return abs(metered - own) / metered
