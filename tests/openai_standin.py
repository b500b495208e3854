"""A stand-in for the OpenAI Responses API, so the test suite can drive the real Codex CLI.

It serves, on 127.0.0.1 at a free port, ``POST /v1/responses`` streamed as server-sent events
(``response.created``, a ``response.output_item.done`` per output item, ``response.completed``
with the usage), or as one JSON response when the request asks for no stream, and
``GET /v1/models`` (an empty list; a bad key's 401, as the preflight asks it). Any other
path is a 404, recorded.

Its script is anthropic_standin's: ``{marker: [turn, ...]}``, a request belonging to the marker
found in its latest user message that holds one (``input`` items of role user; tool outputs are
not searched), the turn being the number of ``function_call_output`` items after that message.
A turn is a list of ``say(text)`` (a ``message`` item with ``output_text``) and
``call(name, **arguments)`` (a ``function_call`` item, arguments as a JSON string); Codex CLI
0.169.0 runs shell commands through ``exec_command`` with ``{"cmd": "..."}``.

Usage per response: ``input_tokens`` counts instructions, tools and input (characters / 4);
``input_tokens_details.cached_tokens``, a subset of it, is the instructions and tools from the
second request of a conversation on (as a prompt cache would); ``output_tokens`` includes
``output_tokens_details.reasoning_tokens`` (REASONING per response).

Faults (anthropic_standin.Fault): an HTTP status with the API's error body (429 with
``retry-after: 0``), a ``mid_stream`` error event (``response.failed`` after
``response.created``), a delay (``until`` as anthropic_standin's). A bearer token other than
``api_key`` gets the API's 401.
``api.requests`` records every request as anthropic_standin's does (``answered`` too).
"""

import itertools
import json
import time
from urllib.parse import urlsplit

from anthropic_standin import DONE_TEXT, AnsweredHandler, Fault, Server, held, tokens

__all__ = ["DONE_TEXT", "Fault", "StandIn", "call", "locate", "say"]

REASONING = 5
ERROR_CODES = {
    401: ("invalid_request_error", "invalid_api_key"),
    429: ("rate_limit_exceeded", "rate_limit_exceeded"),
    500: ("server_error", "server_error"),
    503: ("server_error", "server_is_overloaded"),
}


def say(text):
    return {"type": "say", "text": text}


def call(name, **arguments):
    return {"type": "call", "name": name, "arguments": arguments}


def item_text(item):
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(
        c.get("text", "") for c in content or [] if isinstance(c, dict) and "text" in c
    )


def locate(script, items):
    """(marker, turn) of a request's ``input`` items; marker None if none holds one."""
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        if item.get("role") != "user":
            continue
        found = [m for m in script if m in item_text(item)]
        if found:
            rounds = sum(1 for i in items[index + 1 :] if i.get("type") == "function_call_output")
            return max(found, key=len), rounds
    return None, 0


def usage_of(body, output):
    items = body.get("input") or []
    prefix = tokens(body.get("instructions") or "") + tokens(body.get("tools") or [])
    total = prefix + tokens(items)
    first = not any(i.get("type") == "function_call_output" for i in items)
    out = tokens(output) + REASONING
    return {
        "input_tokens": total,
        "input_tokens_details": {"cached_tokens": 0 if first else prefix},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": REASONING},
        "total_tokens": total + out,
    }


class StandIn(Server):
    """The server (see the module docstring). Use as a context manager."""

    def __init__(self, script=None, faults=(), api_key="sk-openai-standin-key"):
        super().__init__(_Handler, "openai-standin", script, faults, api_key)

    def responses_requests(self, marker=...):
        return [
            r
            for r in list(self.requests)
            if r["path"] == "/v1/responses" and (marker is ... or r["marker"] == marker)
        ]

    def answer(self, body, marker, turn):
        turns = self.script.get(marker, [])
        blocks = turns[turn] if turn < len(turns) else [say(DONE_TEXT)]
        output = []
        for b in blocks:
            if b["type"] == "say":
                output.append(
                    {
                        "type": "message",
                        "id": self.next_id("msg"),
                        "status": "completed",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": b["text"], "annotations": []}],
                    }
                )
            else:
                output.append(
                    {
                        "type": "function_call",
                        "id": self.next_id("fc"),
                        "status": "completed",
                        "call_id": self.next_id("call"),
                        "name": b["name"],
                        "arguments": json.dumps(b["arguments"]),
                    }
                )
        return {
            "id": self.next_id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": body.get("model", ""),
            "output": output,
            "usage": usage_of(body, output),
        }


class _Handler(AnsweredHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        record = self.record({})
        if self.headers.get("authorization", "") != f"Bearer {self.server.standin.api_key}":
            return self.send_error_json(401, "Incorrect API key provided", record)
        if record["path"] == "/v1/models":
            return self.send_json(200, {"object": "list", "data": [], "models": []}, record)
        self.send_error_json(404, f"no such path {record['path']}", record)

    def post(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = {}
        record = self.record(body)
        api = self.server.standin
        if record["path"] != "/v1/responses":
            return self.send_error_json(404, f"no such path {record['path']}", record)
        if self.headers.get("authorization", "") != f"Bearer {api.api_key}":
            return self.send_error_json(401, "Incorrect API key provided", record)
        marker, turn = locate(api.script, body.get("input") or [])
        record.update(marker=marker, turn=turn)
        fault = api.fault_for(marker, turn)
        if fault and fault.delay and held(api, fault):
            return
        if fault and fault.status:
            return self.send_error_json(fault.status, f"stand-in fault {fault.status}", record)
        response = api.answer(body, marker, turn)
        record["usage"] = response["usage"]
        if body.get("stream"):
            self.stream(response, record, fault.mid_stream if fault else None)
        else:
            self.send_json(200, response, record)

    def record(self, body):
        api = self.server.standin
        parts = urlsplit(self.path)
        record = {
            "time": time.monotonic(),
            "method": self.command,
            "path": parts.path,
            "query": parts.query,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "model": body.get("model"),
            "stream": body.get("stream"),
            "body": body,
            "marker": None,
            "turn": None,
            "status": None,
            "usage": None,
            "answered": None,
        }
        with api.lock:
            api.requests.append(record)
        self.current = record
        return record

    def send_json(self, status, data, record=None, headers=()):
        payload = json.dumps(data).encode()
        if record is not None:
            record["status"] = status
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-request-id", self.server.standin.next_id("req"))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def send_error_json(self, status, message, record=None):
        kind, code = ERROR_CODES.get(status, ("invalid_request_error", None))
        headers = [("retry-after", "0")] if status == 429 else []
        error = {"message": message, "type": kind, "param": None, "code": code}
        self.send_json(status, {"error": error}, record, headers)

    def stream(self, response, record, error_type):
        record["status"] = 200
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        sequence = itertools.count()
        started = dict(response, status="in_progress", output=[], usage=None)
        self.event("response.created", {"response": started}, sequence)
        if error_type:
            record["status"] = f"200, then {error_type}"
            failed = dict(
                started,
                status="failed",
                error={"code": error_type, "message": "stand-in mid-stream fault"},
            )
            return self.event("response.failed", {"response": failed}, sequence)
        for index, item in enumerate(response["output"]):
            self.event("response.output_item.done", {"output_index": index, "item": item}, sequence)
        self.event("response.completed", {"response": response}, sequence)

    def event(self, name, data, sequence):
        payload = dict(data, type=name, sequence_number=next(sequence))
        self.wfile.write(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode())
        self.wfile.flush()
