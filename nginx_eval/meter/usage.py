"""What a model call used, read from its bytes on the wire: the three APIs the proxy speaks.

- ``anthropic`` (Messages, ``/v1/messages``): a JSON message, or server-sent events whose
  ``message_start`` carries the message's id, model and usage so far and whose ``message_delta``
  carries the final counts. ``input_tokens``, ``cache_read_input_tokens`` and
  ``cache_creation_input_tokens`` are DISJOINT: each is billed at its own rate.
- ``openai-responses`` (Responses, ``/v1/responses``): a response object, or events ending in
  ``response.completed`` (``response.failed`` and ``response.incomplete`` carry usage too).
  ``input_tokens_details.cached_tokens`` is a SUBSET of ``input_tokens``, and
  ``output_tokens_details.reasoning_tokens`` a subset of ``output_tokens``.
- ``gemini`` (``/v1beta/models/<model>:generateContent`` or ``:streamGenerateContent``): a
  ``GenerateContentResponse``, a JSON array of them, or ``alt=sse`` events of them; the last
  ``usageMetadata`` counts the whole call. ``cachedContentTokenCount`` is a SUBSET of
  ``promptTokenCount``; ``thoughtsTokenCount`` is billed as output but is not in
  ``candidatesTokenCount``.

``Call.tokens`` puts the three in one vocabulary with DISJOINT counts, Anthropic's:
``input`` (uncached input), ``cache_read``, ``cache_write``, ``output`` (every billed output
token, reasoning included) and ``reasoning`` (the part of ``output`` that was reasoning).
``Call.usage`` keeps the API's own usage object, which pricing.py hands to genai-prices.
"""

import gzip
import json
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

ANTHROPIC, OPENAI, GEMINI = "anthropic", "openai-responses", "gemini"
APIS = (ANTHROPIC, OPENAI, GEMINI)
TOKEN_KINDS = ("input", "output", "cache_read", "cache_write", "reasoning")


@dataclass
class Call:
    """What one call's bytes say: its model, the API's usage object and the tokens it counts
    (None: no usage on the wire, e.g. an error or a side call), the response's id."""

    model: str | None = None
    usage: dict[str, Any] | None = None
    tokens: dict[str, int] | None = None
    response_id: str | None = None
    events: int = 0
    errors: list[str] = field(default_factory=list)


def decoded(body: bytes, encoding: str | None) -> bytes:
    """A body as sent, undone of its Content-Encoding (gzip, deflate); another encoding, or a
    broken one, is returned as it is (its usage will not be found)."""
    kind = (encoding or "").strip().lower()
    try:
        if kind in ("gzip", "x-gzip"):
            return gzip.decompress(body)
        if kind == "deflate":
            try:
                return zlib.decompress(body)
            except zlib.error:
                return zlib.decompress(body, -zlib.MAX_WBITS)  # raw deflate, as some servers send
    except (OSError, EOFError, zlib.error):
        return body
    return body


def sse_events(body: bytes) -> Iterator[tuple[str | None, Any]]:
    """(event name, parsed data) of each server-sent event in `body` whose data is JSON."""
    text = body.decode("utf-8", "replace").replace("\r\n", "\n")
    for block in text.split("\n\n"):
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        if not data:
            continue
        try:
            yield name, json.loads("\n".join(data))
        except ValueError:
            continue


def is_event_stream(content_type: str | None) -> bool:
    return (content_type or "").split(";")[0].strip().lower() == "text/event-stream"


def _json(body: bytes) -> Any:
    try:
        return json.loads(body.decode("utf-8", "replace"))
    except ValueError:
        return None


def _int(value: Any) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


# -- Anthropic Messages ------------------------------------------------------------------------


def anthropic_tokens(usage: Mapping[str, Any]) -> dict[str, int]:
    return {
        "input": _int(usage.get("input_tokens")),
        "output": _int(usage.get("output_tokens")),
        "cache_read": _int(usage.get("cache_read_input_tokens")),
        "cache_write": _int(usage.get("cache_creation_input_tokens")),
        "reasoning": 0,  # billed as output, not reported apart
    }


def anthropic_call(body: bytes, stream: bool) -> Call:
    call = Call()
    if not stream:
        data = _json(body)
        if isinstance(data, dict) and data.get("type") == "message":
            call.model, call.response_id = data.get("model"), data.get("id")
            if isinstance(data.get("usage"), dict):
                call.usage = dict(data["usage"])
        elif isinstance(data, dict) and data.get("type") == "error":
            call.errors.append(str((data.get("error") or {}).get("type")))
    else:
        usage: dict[str, Any] = {}
        for name, data in sse_events(body):
            call.events += 1
            kind = name or (data.get("type") if isinstance(data, dict) else None)
            if not isinstance(data, dict):
                continue
            if kind == "message_start" and isinstance(data.get("message"), dict):
                message = data["message"]
                call.model, call.response_id = message.get("model"), message.get("id")
                usage.update(message.get("usage") or {})
            elif kind == "message_delta" and isinstance(data.get("usage"), dict):
                # The final counts: output always, the input counts when the API repeats them.
                usage.update({k: v for k, v in data["usage"].items() if v is not None})
            elif kind == "error":
                call.errors.append(str((data.get("error") or {}).get("type")))
        call.usage = usage or None
    call.tokens = anthropic_tokens(call.usage) if call.usage else None
    return call


# -- OpenAI Responses --------------------------------------------------------------------------


def openai_tokens(usage: Mapping[str, Any]) -> dict[str, int]:
    details = usage.get("input_tokens_details") or {}
    cached, written = _int(details.get("cached_tokens")), _int(details.get("cache_write_tokens"))
    return {
        "input": max(0, _int(usage.get("input_tokens")) - cached - written),
        "output": _int(usage.get("output_tokens")),
        "cache_read": cached,
        "cache_write": written,
        "reasoning": _int((usage.get("output_tokens_details") or {}).get("reasoning_tokens")),
    }


FINAL_RESPONSE_EVENTS = ("response.completed", "response.failed", "response.incomplete")


def openai_call(body: bytes, stream: bool) -> Call:
    call, response = Call(), None
    if not stream:
        data = _json(body)
        if isinstance(data, dict) and data.get("object") == "response":
            response = data
        elif isinstance(data, dict) and isinstance(data.get("error"), dict):
            call.errors.append(str(data["error"].get("type") or data["error"].get("code")))
    else:
        for name, data in sse_events(body):
            call.events += 1
            if not isinstance(data, dict):
                continue
            kind = name or data.get("type")
            if kind == "response.created" and isinstance(data.get("response"), dict):
                response = response or data["response"]
            elif kind in FINAL_RESPONSE_EVENTS and isinstance(data.get("response"), dict):
                response = data["response"]
            elif kind == "error":
                call.errors.append(str(data.get("code") or data.get("message")))
    if response:
        call.model, call.response_id = response.get("model"), response.get("id")
        if isinstance(response.get("usage"), dict):
            call.usage = dict(response["usage"])
    call.tokens = openai_tokens(call.usage) if call.usage else None
    return call


# -- Gemini ------------------------------------------------------------------------------------


def gemini_tokens(usage: Mapping[str, Any]) -> dict[str, int]:
    cached = _int(usage.get("cachedContentTokenCount"))
    prompt = _int(usage.get("promptTokenCount")) + _int(usage.get("toolUsePromptTokenCount"))
    thoughts = _int(usage.get("thoughtsTokenCount"))
    return {
        "input": max(0, prompt - cached),
        "output": _int(usage.get("candidatesTokenCount")) + thoughts,
        "cache_read": cached,
        "cache_write": 0,
        "reasoning": thoughts,
    }


def gemini_model_of_path(path: str) -> str | None:
    """The model a Gemini path names: ``/v1beta/models/gemini-2.5-pro:streamGenerateContent``."""
    marker = "/models/"
    if marker not in path:
        return None
    return unquote(path.split(marker, 1)[1].split(":", 1)[0].split("/", 1)[0]) or None


def gemini_call(body: bytes, stream: bool, path: str = "") -> Call:
    call = Call(model=gemini_model_of_path(path))
    if stream:
        chunks: list[Any] = []
        for _, data in sse_events(body):
            call.events += 1
            chunks.append(data)
    else:
        data = _json(body)
        chunks = data if isinstance(data, list) else [data]
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        if isinstance(chunk.get("error"), dict):
            call.errors.append(str(chunk["error"].get("status") or chunk["error"].get("code")))
        if isinstance(chunk.get("usageMetadata"), dict):
            call.usage = dict(chunk["usageMetadata"])  # cumulative: the last one counts
        call.model = chunk.get("modelVersion") or call.model
        call.response_id = chunk.get("responseId") or call.response_id
    # countTokens answers {"totalTokens"}: a count, not a billed generation.
    if call.usage is not None and not any(
        k in call.usage for k in ("promptTokenCount", "candidatesTokenCount")
    ):
        call.usage = None
    call.tokens = gemini_tokens(call.usage) if call.usage else None
    return call


def parse_call(
    api: str, path: str, body: bytes, content_type: str | None, encoding: str | None = None
) -> Call:
    """What a response `body` (as received, with its Content-Type and Content-Encoding) of a
    call to `path` of `api` says it used."""
    raw = decoded(body, encoding)
    stream = is_event_stream(content_type)
    if api == ANTHROPIC:
        return anthropic_call(raw, stream)
    if api == OPENAI:
        return openai_call(raw, stream)
    if api == GEMINI:
        return gemini_call(raw, stream, path)
    return Call()


def request_model(api: str, path: str, body: bytes) -> str | None:
    """The model a request asks for (the answer's own, when it has one, wins)."""
    if api == GEMINI:
        return gemini_model_of_path(path)
    data = _json(body)
    return data.get("model") if isinstance(data, dict) else None


def request_streams(body: bytes) -> bool:
    data = _json(body)
    return bool(isinstance(data, dict) and data.get("stream"))
