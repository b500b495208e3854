"""A phase's conversation read from what went over the wire: the metering proxy's record of each
call's request and response (``agent/calls.bodies.jsonl.gz``, meter/proxy.py), the one source
every program has in the same form. transcript/atif.py turns it into the phase's ATIF
trajectory for a program whose own session logs it does not read (Codex CLI, Gemini CLI).

Each answered call (HTTP 200 with usage) of the phase and program is one agent turn: its text,
reasoning and tool calls as the API sent them (OpenAI Responses: the ``response.output_item.done``
items, else the final response's ``output``; Gemini: the parts of every streamed chunk). A tool
call's result is what the program sent back in a later request (``function_call_output`` by
``call_id``; a ``functionResponse`` by its id, else by name in order). Pure but for reading the
file.
"""

import gzip
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..meter.usage import GEMINI, OPENAI, sse_events
from ..transcript.atif import Conversation, Turn


def read_bodies(path: str | Path) -> dict[int, dict[str, Any]]:
    """The bodies of an attempt's calls, by call number (a line cut short is left out)."""
    try:
        text = gzip.open(path, "rt", encoding="utf-8").read()
    except (OSError, EOFError):
        return {}
    out: dict[int, dict[str, Any]] = {}
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("call"), int):
            out[record["call"]] = record
    return out


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        parsed = _json(value)
        return parsed if isinstance(parsed, dict) else {"input": value}
    return dict(value) if isinstance(value, dict) else {}


def _openai_turn(response_body: str) -> Turn:
    items: list[dict[str, Any]] = []
    final: list[dict[str, Any]] = []
    events = list(sse_events(response_body.encode()))
    if not events:  # an answer that was not streamed
        data = _json(response_body)
        events = [("response.completed", {"response": data})] if isinstance(data, dict) else []
    for name, data in events:
        if not isinstance(data, dict):
            continue
        kind = name or data.get("type")
        if kind == "response.output_item.done" and isinstance(data.get("item"), dict):
            items.append(data["item"])
        elif kind == "response.completed" and isinstance(data.get("response"), dict):
            final = [i for i in data["response"].get("output") or [] if isinstance(i, dict)]
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in items or final:
        kind = item.get("type")
        if kind == "message":
            text += [c.get("text") or "" for c in item.get("content") or [] if isinstance(c, dict)]
        elif kind == "reasoning":
            reasoning += [s.get("text") or "" for s in item.get("summary") or []]
        elif kind in ("function_call", "custom_tool_call"):
            calls.append(
                {
                    "id": str(item.get("call_id") or item.get("id") or ""),
                    "name": str(item.get("name") or kind),
                    "arguments": _arguments(item.get("arguments", item.get("input"))),
                }
            )
    return Turn(
        "agent",
        "\n".join(t for t in text if t),
        reasoning="\n".join(reasoning) or None,
        tool_calls=calls,
    )


def _openai_results(request_body: str) -> dict[str, str]:
    body = _json(request_body)
    items = body.get("input") if isinstance(body, dict) else None
    out: dict[str, str] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") in (
            "function_call_output",
            "custom_tool_call_output",
        ):
            output = item.get("output")
            out[str(item.get("call_id"))] = (
                output if isinstance(output, str) else json.dumps(output)
            )
    return out


def _gemini_turn(response_body: str) -> Turn:
    chunks = [data for _, data in sse_events(response_body.encode())]
    if not chunks:
        data = _json(response_body)
        chunks = data if isinstance(data, list) else [data]
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        for candidate in chunk.get("candidates") or []:
            for part in (candidate.get("content") or {}).get("parts") or []:
                if "functionCall" in part:
                    call = part["functionCall"]
                    calls.append(
                        {
                            "id": str(call.get("id") or f"{call.get('name')}-{len(calls) + 1}"),
                            "name": str(call.get("name")),
                            "arguments": _arguments(call.get("args")),
                        }
                    )
                elif part.get("thought") and part.get("text"):
                    reasoning.append(part["text"])
                elif part.get("text"):
                    text.append(part["text"])
    return Turn("agent", "".join(text), reasoning="".join(reasoning) or None, tool_calls=calls)


def _gemini_results(request_body: str) -> list[dict[str, Any]]:
    """The functionResponse parts of the request's last user content, in order."""
    body = _json(request_body)
    contents = body.get("contents") if isinstance(body, dict) else None
    for content in reversed(contents if isinstance(contents, list) else []):
        parts = content.get("parts") or [] if isinstance(content, dict) else []
        found = [p["functionResponse"] for p in parts if "functionResponse" in p]
        if found:
            return found
    return []


def conversation(
    agent: str,
    api: str,
    calls: Iterable[Mapping[str, Any]],
    bodies: Mapping[int, Mapping[str, Any]],
) -> Conversation:
    """The conversation of `calls` (the proxy's records of one phase and program, in order) from
    their bodies: a turn per answered call, each tool call's result from a later request."""
    turns: list[Turn] = []
    requests: list[str] = []
    for call in calls:
        exchange = bodies.get(int(call.get("call") or 0))
        if not exchange or not call.get("tokens") or call.get("status") != 200:
            continue
        requests.append(str(exchange["request"].get("body") or ""))
        body = str(exchange["response"].get("body") or "")
        turn = _openai_turn(body) if api == OPENAI else _gemini_turn(body)
        turn.model, turn.response_id = call.get("model"), call.get("response_id")
        turn.timestamp = call.get("ended")
        turns.append(turn)
    for i, turn in enumerate(turns):
        later = requests[i + 1 :]
        if not turn.tool_calls or not later:
            continue
        if api == OPENAI:
            outputs = _openai_results(later[0])
            turn.results = [
                {"call_id": c["id"], "content": outputs[c["id"]], "subagent": None}
                for c in turn.tool_calls
                if c["id"] in outputs
            ]
        elif api == GEMINI:
            answered = _gemini_results(later[0])
            for c in turn.tool_calls:
                match = next(
                    (r for r in answered if r.get("id") == c["id"] or r.get("name") == c["name"]),
                    None,
                )
                if match is not None:
                    answered.remove(match)
                    content = json.dumps(match.get("response"), ensure_ascii=False)
                    turn.results.append({"call_id": c["id"], "content": content, "subagent": None})
    return Conversation(agent, None, turns)
