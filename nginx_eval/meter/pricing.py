"""The price of a call, from genai-prices (pydantic's maintained table of model prices, pinned
in pyproject.toml): the API's own usage object goes through the library's extractor for that
API, which knows how each counts cached tokens (Anthropic's cache reads and writes apart from
input, with the 5-minute and 1-hour writes apart; OpenAI's and Gemini's cached tokens inside
input, Gemini's thoughts as output), then its price for the model on the call's date, tiers
included. The table is the one the installed version carries: it is never updated over the
network, so a run's prices are those of the version it records (``price_source``).

Which entry of the table prices a model, exact first, through the library's own match clauses:
``exact``, the entry whose id is the model; else ``alias``, an entry that names the model in an
``equals`` clause of its own (the table's maintainers list e.g. ``gpt-5-codex`` under
``gpt-5`` and ``gpt-5.2-codex`` under ``gpt-5.2``, at the published prices of those); else
``pattern``, the entry the library's lookup finds by a prefix, substring or regex clause (a
dated snapshot such as ``claude-sonnet-4-5-20250929``, which the Anthropic API answers with), an
entry that is not the model's own. A call's record names the entry (``priced_as``) and how it was
found (``price_match``); a model no entry matches is unpriced, its ``price_source`` saying so.
The library's lookup alone takes the first entry whose clauses match in the table's order, so
an entry's pattern could shadow another entry named exactly.
"""

import warnings
from datetime import datetime
from decimal import Decimal
from importlib.metadata import version
from typing import Any, NamedTuple

from .usage import ANTHROPIC, GEMINI, OPENAI

LIBRARY = "genai-prices"
# (provider id, extractor flavour, the key of the usage object, the key of the model) per API.
EXTRACTORS = {
    ANTHROPIC: ("anthropic", "default", "usage", "model"),
    OPENAI: ("openai", "responses", "usage", "model"),
    GEMINI: ("google", "default", "usageMetadata", "modelVersion"),
}
EXACT, ALIAS, PATTERN = "exact", "alias", "pattern"


class Price(NamedTuple):
    """One call's price: USD (None: no usage, or no entry for its model), where it came from
    ("genai-prices 0.2.3 (openai/gpt-5.2)", or why none), the entry that priced it
    ("openai/gpt-5.2") and how that entry was found (EXACT, ALIAS, PATTERN)."""

    cost_usd: float | None
    source: str
    priced_as: str | None = None
    match: str | None = None


def library_version() -> str:
    return version(LIBRARY)


def table() -> str:
    """What priced the calls: "genai-prices 0.2.3"."""
    return f"{LIBRARY} {library_version()}"


def equals_names(clause: Any) -> list[str]:
    """The names an entry's match clause takes as they are: its ``equals`` clauses, alone or
    under ``or`` (one under ``and`` is only a part of a condition)."""
    names = [clause.equals] if hasattr(clause, "equals") else []
    for sub in getattr(clause, "or_", None) or []:
        names += equals_names(sub)
    return [n.lower() for n in names]


def entry(provider: Any, model: str, providers: list[Any]) -> tuple[Any, str] | None:
    """(the table's entry for `model` at `provider`, how it was found), exact first (see the
    module docstring); None when no entry matches."""
    ref = model.lower()
    for kind, matches in (
        (EXACT, lambda m: m.id.lower() == ref),
        (ALIAS, lambda m: ref in equals_names(m.match)),
    ):
        found = next((m for m in provider.models if matches(m)), None)
        if found is not None:
            return found, kind
    found = provider.find_model(ref, all_providers=providers)
    return (found, PATTERN) if found is not None else None


def price(
    api: str, model: str | None, usage: dict[str, Any] | None, when: datetime | None = None
) -> Price:
    """The Price of one call; USD None when the call has no usage or the table has no entry
    that matches its model (the source then says why)."""
    if not usage:
        return Price(None, "no usage")
    if not model:
        return Price(None, f"{table()}: no model named")
    from genai_prices import data_snapshot  # here: its table takes a moment, only calls need it

    provider_id, flavour, usage_key, model_key = EXTRACTORS[api]
    snapshot = data_snapshot.get_snapshot()
    provider = snapshot.find_provider(None, provider_id, None)
    found = entry(provider, model, snapshot.providers)
    if found is None:
        return Price(None, f"{table()}: no entry for model {model!r} ({provider.id})")
    info, match = found
    try:
        with warnings.catch_warnings():
            # A usage detail the table does not price (a key newer than the table) only warns.
            warnings.simplefilter("ignore", UserWarning)
            _, extracted = provider.extract_usage(
                {usage_key: usage, model_key: model}, api_flavor=flavour
            )
            calc = info.calc_price(extracted, provider, genai_request_timestamp=when)
    except (LookupError, ValueError) as e:
        return Price(None, f"{table()}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    priced_as = f"{provider.id}/{info.id}"
    return Price(float(Decimal(calc.total_price)), f"{table()} ({priced_as})", priced_as, match)
