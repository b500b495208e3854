"""A stand-in for the Anthropic Messages API, so the test suite can drive the real Claude Code CLI.

It serves, on 127.0.0.1 at a free port, what the CLI may ask for: ``HEAD /`` (a probe),
``POST /v1/messages?beta=true`` streamed as server-sent events or, when the request does not ask
for a stream (the CLI's fallback after failed streams), as one JSON message, and
``/v1/messages/count_tokens``.

What it answers follows a *script*: ``{marker: [turn, turn, ...]}``. A request belongs to the
marker found in the text of its latest user message that holds any marker (tool results are not
searched), so a phase's prompt picks its turns, a ``--continue`` with the next phase's prompt picks
the next phase, and a subagent (the ``Agent`` tool's ``prompt``) is matched the same way. Which
turn is answered is the number of tool-result rounds after that message, never a counter: a
retried request gets the same answer. Past the last turn, or with no marker, it ends with a text.
A turn is a list of blocks made by ``say(text)`` and ``call(tool, **input)``::

    script = {"FIX-1": [[say("Let me look."), call("Read", file_path="/w/a.c")],
                        [call("Edit", file_path="/w/a.c", old_string="a", new_string="b")],
                        [say("Fixed.")]]}
    with StandIn(script, faults=[Fault(status=500, times=2)]) as api:
        env = {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": api.api_key}

Every response carries ``usage`` as a cached prompt would: the first request of a conversation
writes the system prompt and tools to the cache, each later one reads what the one before it
wrote and writes the previous assistant turn; the new user message is plain input (tokens are
characters / 4). ``api.requests`` records every request: time (monotonic), method, path, query,
model, stream, headers (lower-cased), body, the marker and turn it matched, the status and usage
answered, and when the answer ended (``answered``, monotonic: with ``time``, which requests were
in flight at once); ``api.messages_requests(marker)`` picks those of /v1/messages.

Faults (``Fault``) apply to the requests they match (all, or one marker, or one turn of it), the
first ``times`` of them or always: an HTTP error status with the API's error body, an ``error``
event in the middle of a stream (right after ``message_start``; a request without a stream is
answered normally), or a delay before the answer. A key other than ``api_key`` (``x-api-key`` or
a bearer token) gets the API's 401, ``invalid x-api-key``.
"""

import itertools
import json
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
DONE_TEXT = "(stand-in: nothing more scripted)"


def say(text):
    """A text block of an assistant turn."""
    return {"type": "text", "text": text}


def call(tool, **tool_input):
    """A tool call of an assistant turn, e.g. ``call("Bash", command="make")``."""
    return {"type": "tool_use", "name": tool, "input": tool_input}


@dataclass
class Fault:
    """What to do instead of (or before) a normal answer, for the requests it matches.

    status: HTTP error status to answer with (500, 529, 429, 401, ...), or None;
    mid_stream: answer 200, then an ``error`` event of this type ("overloaded_error") mid-stream;
    delay: seconds to wait before answering (also before an error);
    until: with delay, answer as soon as a request of this script marker has arrived, waiting at
      most delay seconds: two calls that hold each other so are in flight at once exactly when
      the program made them at the same time, however slowly each started; or a function,
      answer as soon as it returns true (a request that arrived at another stand-in);
    should_retry: sends ``x-should-retry: true/false`` with the error (None: no such header);
      the CLI honours it, e.g. a 401 without it is retried like a 5xx;
    times: how many matching requests it hits (None: every one);
    marker, turn: only requests of that script marker (and turn); None matches all.
    """

    status: int = None
    mid_stream: str = None
    delay: float = 0.0
    should_retry: bool = None
    times: int = None
    marker: str = None
    turn: int = None
    until: str = None
    hits: int = 0

    def takes(self, marker, turn):
        if self.marker is not None and self.marker != marker:
            return False
        if self.turn is not None and self.turn != turn:
            return False
        return self.times is None or self.hits < self.times


def held(standin, fault):
    """Wait as `fault` says (delay, until) at `standin`; True: the stand-in is stopping."""
    deadline = time.monotonic() + fault.delay
    while fault.until is not None and time.monotonic() < deadline:
        if callable(fault.until):
            if fault.until():
                return False
        elif any(r.get("marker") == fault.until for r in list(standin.requests)):
            return False
        if standin.stopping.wait(0.05):
            return True
    return fault.until is None and standin.stopping.wait(fault.delay)


def tokens(obj):
    """A token count for anything JSON-able: about four characters a token, at least one."""
    text = obj if isinstance(obj, str) else json.dumps(obj)
    return max(1, len(text) // 4)


def message_text(message):
    """The text blocks of a message (tool results and tool calls left out)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if b.get("type") == "text")


def has_tool_result(message):
    content = message.get("content")
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def locate(script, messages):
    """(marker, turn) of a conversation: see the module docstring. marker is None if none."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") != "user":
            continue
        text = message_text(messages[index])
        found = [m for m in script if m in text]
        if found:
            rounds = sum(
                1 for m in messages[index + 1 :] if m.get("role") == "user" and has_tool_result(m)
            )
            return max(found, key=len), rounds
    return None, 0


def cached_usage(body, content):
    """Usage as a prompt cached at every request's last message would report it."""
    messages = body.get("messages") or []
    prefix = tokens(body.get("system") or "") + tokens(body.get("tools") or [])
    if len(messages) <= 1:
        read, written = 0, prefix
    else:
        read, written = prefix + tokens(messages[:-2]), tokens(messages[-2])
    return {
        "input_tokens": tokens(messages[-1:]),
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
        "output_tokens": tokens(content),
    }


class Server:
    """What every stand-in API here shares: a server on 127.0.0.1 at a free port answering with
    `handler`, its script, faults, key and records, ids, and how faults are taken. Use as a
    context manager, or start() and stop()."""

    def __init__(self, handler, name, script=None, faults=(), api_key=""):
        self.script = dict(script or {})
        self.faults = list(faults)
        self.api_key = api_key
        self.requests = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.ids = itertools.count(1)
        self.server = _Server(("127.0.0.1", 0), handler)
        self.server.standin = self
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # A short poll: stop() waits for it, once per test.
        self.thread = threading.Thread(
            target=self.server.serve_forever, args=(0.05,), daemon=True, name=name
        )

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()  # ends delays at once
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def next_id(self, prefix):
        with self.lock:
            return f"{prefix}_standin{next(self.ids):05d}"

    def held(self, fault):
        return held(self, fault)

    def fault_for(self, marker, turn):
        with self.lock:
            for fault in self.faults:
                if fault.takes(marker, turn):
                    fault.hits += 1
                    return fault
        return None


class StandIn(Server):
    """The Anthropic API's stand-in (see the module docstring)."""

    def __init__(self, script=None, faults=(), api_key="sk-ant-standin-key"):
        super().__init__(_Handler, "anthropic-standin", script, faults, api_key)

    def messages_requests(self, marker=...):
        """The recorded POSTs to /v1/messages, optionally only those of one marker."""
        return [
            r
            for r in list(self.requests)
            if r["path"] == "/v1/messages" and (marker is ... or r["marker"] == marker)
        ]

    def answer(self, body, marker, turn):
        """The assistant message for a request: its content, stop reason and usage."""
        turns = self.script.get(marker, [])
        blocks = turns[turn] if turn < len(turns) else [say(DONE_TEXT)]
        content = [
            dict(b, id=self.next_id("toolu")) if b["type"] == "tool_use" else dict(b)
            for b in blocks
        ]
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        return {
            "id": self.next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model", ""),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": cached_usage(body, content),
        }


class _Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A CLI killed at its time limit hangs up mid-answer: that is expected, not a failure.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class AnsweredHandler(BaseHTTPRequestHandler):
    """A stand-in's handler whose POST (`post`, setting `current` to the request's record)
    records when its answer was written or the request given up: with "time", what shows which
    requests were in flight at once."""

    current: dict | None = None

    def do_POST(self):
        self.current = None
        try:
            self.post()
        finally:
            if self.current is not None:
                self.current["answered"] = time.monotonic()


class _Handler(AnsweredHandler):
    """One request; the response ends when the connection closes (HTTP/1.0 semantics)."""

    def log_message(self, *args):
        pass  # the records are the log

    def do_HEAD(self):
        self.record({})["status"] = 200
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        record = self.record({})
        api = self.server.standin
        if record["path"].split("?")[0] != "/v1/models":
            return self.send_error_json(404, "not found")
        # The model list, as the API answers it: 401 for a key it does not take (the
        # preflight's check of the key, agent/preflight.py: key_problem).
        if (
            self.headers.get("x-api-key", "") != api.api_key
            and self.headers.get("authorization", "") != f"Bearer {api.api_key}"
        ):
            return self.send_error_json(401, "invalid x-api-key", record)
        # It answers any model asked for: the list names none.
        return self.send_json(200, {"data": [], "has_more": False}, record)

    def post(self):
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = {}
        record = self.record(body)
        path = record["path"]
        api = self.server.standin
        if path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return self.send_error_json(404, f"no such path {path}", record)
        if (
            self.headers.get("x-api-key", "") != api.api_key
            and self.headers.get("authorization", "") != f"Bearer {api.api_key}"
        ):
            return self.send_error_json(401, "invalid x-api-key", record)
        if path.endswith("count_tokens"):
            return self.send_json(200, {"input_tokens": tokens(body)}, record)
        marker, turn = locate(api.script, body.get("messages") or [])
        record.update(marker=marker, turn=turn)
        fault = api.fault_for(marker, turn)
        if fault and fault.delay and api.held(fault):
            return
        if fault and fault.status:
            return self.send_error_json(
                fault.status, f"stand-in fault {fault.status}", record, fault.should_retry
            )
        message = api.answer(body, marker, turn)
        record["usage"] = message["usage"]
        if body.get("stream"):
            self.stream(message, record, fault.mid_stream if fault else None)
        else:
            self.send_json(200, message, record)

    def record(self, body):
        api = self.server.standin
        record = {
            "time": time.monotonic(),
            "method": self.command,
            "path": urlsplit(self.path).path,
            "query": urlsplit(self.path).query,
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
        self.send_header("request-id", self.server.standin.next_id("req"))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def send_error_json(self, status, message, record=None, should_retry=None):
        kind = ERROR_TYPES.get(status, "api_error")
        # A real 429 names its wait in retry-after; 0 keeps injected ones quick.
        headers = [("retry-after", "0")] if status == 429 else []
        if should_retry is not None:
            headers.append(("x-should-retry", str(should_retry).lower()))
        self.send_json(
            status, {"type": "error", "error": {"type": kind, "message": message}}, record, headers
        )

    def stream(self, message, record, error_type):
        record["status"] = 200
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("request-id", self.server.standin.next_id("req"))
        self.end_headers()
        start = dict(
            message, content=[], stop_reason=None, usage=dict(message["usage"], output_tokens=1)
        )
        self.event("message_start", {"message": start})
        if error_type:
            record["status"] = f"200, then {error_type}"
            return self.event(
                "error", {"error": {"type": error_type, "message": "stand-in mid-stream fault"}}
            )
        for index, block in enumerate(message["content"]):
            self.stream_block(index, block)
        self.event(
            "message_delta",
            {
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": message["usage"],
            },
        )
        self.event("message_stop", {})

    def stream_block(self, index, block):
        if block["type"] == "text":
            self.event(
                "content_block_start",
                {"index": index, "content_block": {"type": "text", "text": ""}},
            )
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            self.event(
                "content_block_start", {"index": index, "content_block": dict(block, input={})}
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        self.event("content_block_delta", {"index": index, "delta": delta})
        self.event("content_block_stop", {"index": index})

    def event(self, name, data):
        frame = f"event: {name}\ndata: {json.dumps(dict(data, type=name))}\n\n"
        self.wfile.write(frame.encode())
        self.wfile.flush()
