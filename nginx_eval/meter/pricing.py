"""The price of a call, from genai-prices (pydantic's maintained table of model prices, pinned
in pyproject.toml): the API's own usage object goes through the library's extractor for that
API, which knows how each counts cached tokens (Anthropic's cache reads and writes apart from
input, with the 5-minute and 1-hour writes apart; OpenAI's and Gemini's cached tokens inside
input, Gemini's thoughts as output), then its price for the model on the call's date, tiers
included. The table is the one the installed version carries: it is never updated over the
network, so a run's prices are those of the version it records (``price_source``).
"""

import warnings
from datetime import datetime
from decimal import Decimal
from importlib.metadata import version
from typing import Any

from .usage import ANTHROPIC, GEMINI, OPENAI

LIBRARY = "genai-prices"
# (provider id, extractor flavour, the key of the usage object, the key of the model) per API.
EXTRACTORS = {
    ANTHROPIC: ("anthropic", "default", "usage", "model"),
    OPENAI: ("openai", "responses", "usage", "model"),
    GEMINI: ("google", "default", "usageMetadata", "modelVersion"),
}


def library_version() -> str:
    return version(LIBRARY)


def table() -> str:
    """What priced the calls: "genai-prices 0.2.3"."""
    return f"{LIBRARY} {library_version()}"


def price(
    api: str, model: str | None, usage: dict[str, Any] | None, when: datetime | None = None
) -> tuple[float | None, str]:
    """(USD, where the price came from) of one call; USD None when the call has no usage or
    the table has no price for its model (the source then says why)."""
    if not usage:
        return None, "no usage"
    if not model:
        return None, f"{table()}: no model named"
    import genai_prices  # imported here: its table takes a moment, and only calls need it

    provider, flavour, usage_key, model_key = EXTRACTORS[api]
    try:
        with warnings.catch_warnings():
            # A usage detail the table does not price (a key newer than the table) only warns.
            warnings.simplefilter("ignore", UserWarning)
            extracted = genai_prices.extract_usage(
                {usage_key: usage, model_key: model}, provider_id=provider, api_flavor=flavour
            )
            calc = genai_prices.calc_price(
                extracted.usage, model, provider_id=provider, genai_request_timestamp=when
            )
    except (LookupError, ValueError) as e:
        return None, f"{table()}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    return float(Decimal(calc.total_price)), f"{table()} ({calc.provider.id}/{calc.model.id})"
