"""A stand-in for the Gemini API (generativelanguage), so the test suite can drive the real Gemini
CLI.

It serves, on 127.0.0.1 at a free port, ``POST /v1beta/models/<model>:streamGenerateContent``
(``?alt=sse``: server-sent ``data:`` chunks, each a GenerateContentResponse), the side calls
``:generateContent`` (one JSON response) and ``:countTokens``, and ``GET /v1beta/models``.

Its script is anthropic_standin's: ``{marker: [turn, ...]}``; a request belongs to the marker
found in the text of its latest user content that holds one (``functionResponse`` parts are not
searched), the turn being the number of user contents with a ``functionResponse`` after it. A
turn is a list of ``say(text)`` (a ``text`` part) and ``call(name, **args)`` (a ``functionCall``
part). A ``generateContent`` side call (the CLI's own checks: which model, who speaks next) is
answered SIDE_ANSWER, a JSON text, and counted apart (``api.side_requests()``).

Usage per streamed answer (``usageMetadata`` on its last chunk): ``promptTokenCount`` counts
system instruction, tools and contents (characters / 4); ``cachedContentTokenCount``, a subset
of it, is the system instruction and tools from the second request of a conversation on;
``candidatesTokenCount`` the answer, ``thoughtsTokenCount`` THOUGHTS apart from it.

Faults (anthropic_standin.Fault): an HTTP status with the API's error body (503: UNAVAILABLE,
"The model is overloaded"), a delay. A key other than ``api_key`` (``x-goog-api-key`` header or
``key`` query) gets the API's 400 API_KEY_INVALID, as the real API answers a bad key.
"""

import json
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from anthropic_standin import DONE_TEXT, Fault, Server, tokens

__all__ = ["DONE_TEXT", "Fault", "SIDE_ANSWER", "StandIn", "call", "locate", "say"]

THOUGHTS = 3
SIDE_ANSWER = json.dumps(
    {
        "reasoning": "stand-in",
        "next_speaker": "user",
        "model_choice": "flash",
        "complexity_reasoning": "stand-in",
        "complexity_score": 1,
    }
)
STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def say(text):
    return {"text": text}


def call(name, **args):
    return {"functionCall": {"name": name, "args": args}}


def content_text(content):
    return "\n".join(p.get("text", "") for p in content.get("parts") or [] if "text" in p)


def has_response(content):
    return any("functionResponse" in p for p in content.get("parts") or [])


def locate(script, contents):
    """(marker, turn) of a request's ``contents``; marker None if none holds one."""
    for index in range(len(contents) - 1, -1, -1):
        content = contents[index]
        if content.get("role") != "user" or has_response(content):
            continue
        found = [m for m in script if m in content_text(content)]
        if found:
            rounds = sum(
                1 for c in contents[index + 1 :] if c.get("role") == "user" and has_response(c)
            )
            return max(found, key=len), rounds
    return None, 0


def usage_of(body, parts):
    contents = body.get("contents") or []
    prefix = tokens(body.get("systemInstruction") or "") + tokens(body.get("tools") or [])
    prompt = prefix + tokens(contents)
    first = not any(has_response(c) for c in contents)
    out = tokens(parts)
    return {
        "promptTokenCount": prompt,
        "cachedContentTokenCount": 0 if first else prefix,
        "candidatesTokenCount": out,
        "thoughtsTokenCount": THOUGHTS,
        "totalTokenCount": prompt + out + THOUGHTS,
    }


class StandIn(Server):
    """The server (see the module docstring). Use as a context manager."""

    def __init__(self, script=None, faults=(), api_key="gemini-standin-key"):
        super().__init__(_Handler, "gemini-standin", script, faults, api_key)

    def stream_requests(self, marker=...):
        return [
            r
            for r in list(self.requests)
            if r["method_name"] == "streamGenerateContent"
            and (marker is ... or r["marker"] == marker)
        ]

    def side_requests(self):
        return [r for r in list(self.requests) if r["method_name"] != "streamGenerateContent"]

    def answer(self, body, marker, turn):
        turns = self.script.get(marker, [])
        parts = [dict(p) for p in (turns[turn] if turn < len(turns) else [say(DONE_TEXT)])]
        return parts, usage_of(body, parts)


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        record = self.record({})
        if not self.key_ok(record):
            return self.send_error_json(
                400, "API key not valid. Please pass a valid API key.", record, "API_KEY_INVALID"
            )
        if record["path"].rstrip("/") == "/v1beta/models":
            return self.send_json(200, {"models": []}, record)
        self.send_error_json(404, f"no such path {record['path']}", record)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = {}
        record = self.record(body)
        api = self.server.standin
        model, _, method = record["path"].rpartition("/")[2].partition(":")
        record.update(model=model, method_name=method)
        if not record["path"].startswith("/v1beta/models/") or not method:
            return self.send_error_json(404, f"no such path {record['path']}", record)
        if not self.key_ok(record):
            return self.send_error_json(
                400, "API key not valid. Please pass a valid API key.", record, "API_KEY_INVALID"
            )
        if method == "countTokens":
            return self.send_json(200, {"totalTokens": tokens(body)}, record)
        if method == "generateContent":
            parts = [say(SIDE_ANSWER)]
            usage = usage_of(body, parts)
            record["usage"] = usage
            return self.send_json(200, self.chunk(parts, usage, model), record)
        if method != "streamGenerateContent":
            return self.send_error_json(404, f"no such method {method}", record)
        marker, turn = locate(api.script, body.get("contents") or [])
        record.update(marker=marker, turn=turn)
        fault = api.fault_for(marker, turn)
        if fault and fault.delay and api.stopping.wait(fault.delay):
            return
        if fault and fault.status:
            text = "The model is overloaded." if fault.status == 503 else "stand-in fault"
            return self.send_error_json(fault.status, f"{text} ({fault.status})", record)
        parts, usage = api.answer(body, marker, turn)
        record["usage"] = usage
        self.stream(parts, usage, model, record)

    def key_ok(self, record):
        query_key = (parse_qs(record["query"]).get("key") or [""])[0]
        return (self.headers.get("x-goog-api-key") or query_key) == self.server.standin.api_key

    def chunk(self, parts, usage, model):
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": usage,
            "modelVersion": model,
            "responseId": f"standin-{time.monotonic_ns()}",
        }

    def record(self, body):
        api = self.server.standin
        parts = urlsplit(self.path)
        record = {
            "time": time.monotonic(),
            "method": self.command,
            "method_name": None,
            "path": parts.path,
            "query": parts.query,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "model": None,
            "body": body,
            "marker": None,
            "turn": None,
            "status": None,
            "usage": None,
        }
        with api.lock:
            api.requests.append(record)
        return record

    def send_json(self, status, data, record=None):
        payload = json.dumps(data).encode()
        if record is not None:
            record["status"] = status
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def send_error_json(self, status, message, record=None, reason=None):
        error = {"code": status, "message": message, "status": STATUSES.get(status, "UNKNOWN")}
        if reason:
            error["details"] = [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": reason,
                    "domain": "googleapis.com",
                }
            ]
        self.send_json(status, {"error": error}, record)

    def stream(self, parts, usage, model, record):
        record["status"] = 200
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        # The text first, without usage; then the calls with the finish reason and the usage,
        # as the API sends a turn in chunks.
        texts = [p for p in parts if "text" in p]
        if texts:
            first = self.chunk(texts, None, model)
            del first["usageMetadata"]
            first["candidates"][0].pop("finishReason")
            self.data(first)
        rest = [p for p in parts if "text" not in p] or [{"text": ""}]
        self.data(self.chunk(rest, usage, model))

    def data(self, payload):
        self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
        self.wfile.flush()
