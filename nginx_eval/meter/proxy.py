"""One metering proxy per agent attempt: an HTTP server on the host's 127.0.0.1 that every
program's base URL names, which forwards each call to the operator's real endpoint and records it.

Routing, by path, one port for the three APIs (usage.py): ``/v1/messages...`` is Anthropic's,
``/v1/responses...`` and ``/v1/models...`` OpenAI's, ``/v1beta/...`` Gemini's; anything else (the
Claude Code CLI's ``HEAD /`` probe) goes to the first API the proxy was given. A program's base
URL is ``base_url(api)``: OpenAI's clients add ``/responses`` to a base that ends in ``/v1``, the
others add the whole path, so OpenAI's base here is ``<proxy>/v1`` and that ``/v1`` is replaced
by the upstream's own base (``https://api.openai.com/v1``, or a gateway's URL and its path).

Forwarding (stdlib ``http.server`` to the client, ``http.client`` to the upstream, threads):
HTTP/1.1 keep-alive on both sides, request bodies by length or chunked, the answer passed on
piece by piece as it arrives (``read1``, flushed at once: a stream is not held back), status,
headers and body unchanged (a 429, 5xx or 401 reaches the CLI as the API sent it, its
``retry-after`` and ``x-should-retry`` too; gzip stays gzip); only hop-by-hop headers are the
proxy's own. An unreachable upstream is a 502 in the API's error shape. An ``https`` upstream is
reached through the operator's ``HTTPS_PROXY`` (CONNECT), unless ``NO_PROXY`` names it.

The record (records.py: CallRecord): a line per call in ``calls.jsonl.gz``, its request and
response in ``calls.bodies.jsonl.gz``, each line a gzip member of its own (a killed run leaves
every finished call readable). No credential reaches either: the headers that carry them
(``authorization``, ``x-api-key``, ``x-goog-api-key``, cookies) and a query's ``key=`` become
``[redacted]``, and their values are cut out of everything else in the record.
"""

import gzip
import http.client
import json
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from ..core.records import versioned
from . import pricing, usage
from .usage import ANTHROPIC, GEMINI, OPENAI

# A program whose home names its endpoint (Codex's config.toml) sends the base URL of its
# environment in this header (programs/codex.py): the phase it names counts a call whose path
# has no phase prefix (a Codex that another program started, in a phase running beside others).
# The proxy's own: it goes no further.
PHASE_HEADER = "x-nginx-eval-base-url"
HOP_HEADERS = frozenset(
    (
        PHASE_HEADER,
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    )
)
SECRET_HEADERS = frozenset(
    (
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "x-goog-api-key",
        "api-key",
        "cookie",
        "set-cookie",
    )
)
SECRET_QUERY = frozenset(("key", "api_key", "apikey", "access_token", "token"))
REDACTED = "[redacted]"
# A call that streams for long is normal (a model thinking); a silent upstream is not.
UPSTREAM_TIMEOUT = 900.0
PIECE = 65536
# Where each API's programs send their calls, and what their base URL adds to the path.
ROUTES = (
    ("/v1/messages", ANTHROPIC),
    ("/v1/responses", OPENAI),
    ("/v1/models", OPENAI),
    ("/v1beta/", GEMINI),
)
BASE_PATH = {ANTHROPIC: "", OPENAI: "/v1", GEMINI: ""}
PROGRAM_OF_API = {ANTHROPIC: "claude", OPENAI: "codex", GEMINI: "gemini"}
# A base URL may name the phase that uses it: /phase/<name>/... (phases that run at the same
# time share the attempt's proxy; each call is counted under the phase whose base URL it used).
PHASE_PREFIX = "/phase/"


def split_phase(path_and_query: str, default: str | None) -> tuple[str | None, str]:
    """(phase, the path less its phase prefix); the default phase when it has none."""
    if not path_and_query.startswith(PHASE_PREFIX):
        return default, path_and_query
    name, _, rest = path_and_query[len(PHASE_PREFIX) :].partition("/")
    return unquote(name) or default, "/" + rest


def route(path: str, headers: Mapping[str, str], default: str) -> str:
    """The API a request is for (see the module docstring)."""
    for prefix, api in ROUTES:
        if path.startswith(prefix):
            if prefix == "/v1/models" and "anthropic-version" in headers:
                return ANTHROPIC  # Anthropic's model list, same path
            return api
    return default


def upstream_target(upstream: str, api: str, path_and_query: str) -> tuple[str, str, str]:
    """(scheme, host[:port], path?query) the request goes to: the upstream base URL's path,
    then the request's path less what base_url(api) added."""
    base = urlsplit(upstream if "://" in upstream else f"https://{upstream}")
    strip = BASE_PATH[api]
    rest = (
        path_and_query[len(strip) :]
        if strip and path_and_query.startswith(strip)
        else path_and_query
    )
    return base.scheme or "https", base.netloc, base.path.rstrip("/") + rest


def redact_query(path_and_query: str, secrets: set[str]) -> str:
    parts = urlsplit(path_and_query)
    if not parts.query:
        return path_and_query
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    kept = []
    for k, v in pairs:
        if k.lower() in SECRET_QUERY:
            secrets.add(v)
            v = REDACTED
        kept.append((k, v))
    return parts.path + "?" + urlencode(kept, safe="/:,")


def redacted_headers(headers: Mapping[str, str] | list[tuple[str, str]], secrets: set[str]) -> dict:
    """Headers as a record keeps them: the ones that carry credentials replaced, their values
    (and a bearer token's token alone) remembered to be cut out of everything else."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: dict[str, str] = {}
    for name, value in items:
        low = name.lower()
        if low in SECRET_HEADERS:
            if value:
                secrets.add(value)
                scheme, _, token = value.partition(" ")
                if token and scheme.lower() in ("bearer", "basic"):
                    secrets.add(token)
                for part in value.split(";"):  # cookies: each value apart
                    secrets.add(part.strip().partition("=")[2])
            value = REDACTED
        out[low] = value if low not in out else out[low] + ", " + value
    return out


def no_proxy(host: str, names: str) -> bool:
    """Whether NO_PROXY's `names` (comma-separated: hosts, .domains, host:port, *) name `host`."""
    host = host.lower().strip("[]")
    for name in (n.strip().lower() for n in names.split(",")):
        name = name.rsplit(":", 1)[0] if name.count(":") == 1 else name
        name = name.lstrip("*").lstrip(".") if name != "*" else name
        if name == "*" or (name and (host == name or host.endswith("." + name))):
            return True
    return False


def scrub(text: str, secrets: set[str]) -> str:
    for s in sorted((s for s in secrets if len(s) >= 8), key=len, reverse=True):
        text = text.replace(s, REDACTED)
    return text


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Exchange:
    """One call as it went by: its record so far and its raw bytes, made into the call's lines
    by the meter's writer (MeterProxy.finish), off the call's path."""

    record: dict[str, Any]
    api: str
    path: str  # as sent, credentials and all: never written
    shown_path: str
    request_headers: dict[str, str]
    body: bytes
    secrets: set[str]
    close: Callable[[], None]
    received: list[bytes] = field(default_factory=list)
    response_headers: list[tuple[str, str]] = field(default_factory=list)


class MeterProxy:
    """The proxy of one attempt. ``start()`` it before the attempt's first phase, set ``phase``
    before each phase, ``stop()`` it after the last; ``calls`` holds the records so far (a
    call's record is made by a writer thread once its answer has been passed on, so that
    reading, pricing and compressing it never delay a call).

    upstreams: {api: the operator's base URL for it} (the first is where other paths go);
    attribution: {run, mode, task, attempt} put in every record; calls_file, bodies_file: where
    the records go (None: kept in memory only); environ: the operator's, for their HTTPS proxy
    (outbound_proxy)."""

    def __init__(
        self,
        upstreams: Mapping[str, str],
        attribution: Mapping[str, Any],
        calls_file: str | Path | None = None,
        bodies_file: str | Path | None = None,
        host: str = "127.0.0.1",
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.upstreams = dict(upstreams)
        self.environ = dict(environ or {})
        self.default_api = next(iter(self.upstreams), ANTHROPIC)
        self.attribution = dict(attribution)
        self.calls_file, self.bodies_file = calls_file, bodies_file
        self.phase: str | None = None
        self.calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.numbers = iter(range(1, 1 << 62))
        self.in_flight: dict[int, Exchange] = {}
        self.closed = False
        self.finished: queue.Queue[Exchange | None] = queue.Queue()
        self.writer = threading.Thread(target=self._write_all, daemon=True, name="meter-writer")
        self.server = _Server((host, 0), _Handler)
        self.server.meter = self
        self.host, self.port = host, self.server.server_address[1]
        self.thread = threading.Thread(
            target=self.server.serve_forever, args=(0.1,), daemon=True, name="meter-proxy"
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def endpoint(self) -> str:
        """host:port, as the sandbox's allowed model endpoint."""
        return f"{self.host}:{self.port}"

    def base_url(self, api: str) -> str:
        """The base URL a program of `api` is given (see the module docstring)."""
        return self.url + BASE_PATH[api]

    def phase_base_url(self, api: str, phase: str) -> str:
        """base_url for a program of phase `phase` (PHASE_PREFIX)."""
        return f"{self.url}{PHASE_PREFIX}{quote(phase, safe='')}{BASE_PATH[api]}"

    def outbound_proxy(self, scheme: str, netloc: str) -> str | None:
        """host:port of the operator's HTTPS proxy (HTTPS_PROXY of their environment, unless
        NO_PROXY names the host) for an https upstream, as the CLI itself would have used it;
        None: connect directly (an http upstream, a gateway on their network, always does)."""
        env = {k.lower(): v for k, v in self.environ.items()}
        url = env.get("https_proxy") or env.get("all_proxy")
        if scheme != "https" or not url:
            return None
        host = urlsplit(f"//{netloc}").hostname or ""
        if no_proxy(host, env.get("no_proxy", "")):
            return None
        parts = urlsplit(url if "://" in url else f"http://{url}")
        return f"{parts.hostname}:{parts.port or 80}" if parts.hostname else None

    def start(self) -> "MeterProxy":
        self.writer.start()
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, and return once every call is recorded; a call still open (a CLI
        killed mid-answer, an upstream that never answered) is recorded as it stands, its
        upstream connection closed."""
        self.server.shutdown()
        self.server.server_close()
        with self.lock:
            self.closed = True
            left = list(self.in_flight.values())
            self.in_flight.clear()
        for exchange in left:
            exchange.close()
            exchange.record.update(
                ended=now_iso(), error=exchange.record.get("error") or "unfinished"
            )
            self.finished.put(exchange)
        self.finished.put(None)
        self.writer.join()

    def __enter__(self) -> "MeterProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- records ---------------------------------------------------------------------------

    def open_call(self, exchange: Exchange) -> None:
        with self.lock:
            exchange.record["call"] = next(self.numbers)
            self.in_flight[exchange.record["call"]] = exchange

    def close_call(self, exchange: Exchange) -> None:
        with self.lock:
            if self.in_flight.pop(exchange.record["call"], None) is None:
                return  # stop() has it already
        self.finished.put(exchange)

    def _write_all(self) -> None:
        while True:
            exchange = self.finished.get()
            if exchange is None:
                return
            try:
                self.finish(exchange)
            except Exception as e:  # a record lost is told, never the proxy's end
                print(
                    f"nginx-eval: warning: the meter could not record a call: {e!r}",
                    file=sys.stderr,
                )

    def finish(self, x: Exchange) -> None:
        """The call's record completed from its bytes (usage.py, pricing.py) and written."""
        record, content = x.record, b"".join(x.received)
        names = {k.lower(): v for k, v in x.response_headers}
        parsed = usage.parse_call(
            x.api, x.path, content, names.get("content-type"), names.get("content-encoding")
        )
        model = parsed.model or usage.request_model(x.api, x.path, x.body)
        started = datetime.fromisoformat(record["started"].replace("Z", "+00:00"))
        priced = pricing.price(x.api, model, parsed.usage, started)
        record.update(
            model=model,
            stream=usage.request_streams(x.body),
            response_id=parsed.response_id,
            tokens=parsed.tokens,
            cost_usd=priced.cost_usd,
            price_source=priced.source if parsed.usage else None,
            priced_as=priced.priced_as,
            price_match=priced.match,
        )
        if parsed.errors and not record["error"]:
            record["error"] = ", ".join(parsed.errors)
        bodies = {
            "call": record["call"],
            "request": {
                "method": record["method"],
                "path": x.shown_path,
                "headers": x.request_headers,
                "body": x.body.decode("utf-8", "replace"),
            },
            "response": {
                "status": record["status"],
                "headers": redacted_headers(x.response_headers, x.secrets),
                "body": usage.decoded(content, names.get("content-encoding")).decode(
                    "utf-8", "replace"
                ),
            },
        }
        line = scrub(json.dumps(versioned(record), sort_keys=True), x.secrets)
        text = scrub(json.dumps(bodies, sort_keys=True), x.secrets)
        if self.calls_file:
            with gzip.open(self.calls_file, "ab") as f:
                f.write(line.encode() + b"\n")
        if self.bodies_file:
            with gzip.open(self.bodies_file, "ab") as f:
                f.write(text.encode() + b"\n")
        with self.lock:
            self.calls.append(json.loads(line))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() does not wait for a stream a killed CLI left open
    meter: MeterProxy

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up is recorded with its call; nothing to log (no headers)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    upstream: http.client.HTTPConnection | None = None
    upstream_key: tuple[str, str] | None = None

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the records are the log, with their credentials taken out

    def setup(self) -> None:
        super().setup()
        # A stream is many small writes: none may wait for the one before it to be acknowledged.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def finish(self) -> None:
        super().finish()
        if self.upstream is not None:
            self.upstream.close()

    def request_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def close_upstream(self) -> None:
        if self.upstream is not None:
            self.upstream.close()

    def connection_to(self, scheme: str, netloc: str) -> http.client.HTTPConnection:
        if self.upstream is None or self.upstream_key != (scheme, netloc):
            if self.upstream is not None:
                self.upstream.close()
            through = self.server.meter.outbound_proxy(scheme, netloc)
            if scheme == "https":
                self.upstream = http.client.HTTPSConnection(
                    through or netloc, timeout=UPSTREAM_TIMEOUT
                )
                if through:  # CONNECT through the operator's proxy, TLS with the API inside
                    self.upstream.set_tunnel(netloc)
            else:
                self.upstream = http.client.HTTPConnection(netloc, timeout=UPSTREAM_TIMEOUT)
            self.upstream_key = (scheme, netloc)
        return self.upstream

    def forward(self) -> None:
        meter = self.server.meter
        phase, self.path = split_phase(self.path, None)
        if phase is None:  # else the base URL its environment gave it names it, if any
            named = urlsplit(self.headers.get(PHASE_HEADER) or "").path
            phase = split_phase(named, None)[0]
        phase = phase or meter.phase
        body = self.request_body()
        api = route(
            urlsplit(self.path).path,
            {k.lower(): v for k, v in self.headers.items()},
            meter.default_api,
        )
        secrets: set[str] = set()
        request_headers = redacted_headers(self.headers.items(), secrets)
        shown_path = redact_query(self.path, secrets)
        clock = time.monotonic()
        record: dict[str, Any] = dict(
            meter.attribution,
            phase=phase,
            program=PROGRAM_OF_API[api],
            api=api,
            method=self.command,
            path=shown_path,
            model=None,
            stream=False,
            started=now_iso(),
            ended=None,
            status=None,
            first_byte_ms=None,
            seconds=None,
            request_bytes=len(body),
            response_bytes=0,
            response_id=None,
            tokens=None,
            cost_usd=None,
            price_source=None,
            priced_as=None,
            price_match=None,
            error=None,
        )
        exchange = Exchange(
            record, api, self.path, shown_path, request_headers, body, secrets, self.close_upstream
        )
        scheme, netloc, target = upstream_target(meter.upstreams[api], api, self.path)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
        headers["Host"] = netloc
        if body or self.command in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = str(len(body))
        meter.open_call(exchange)
        try:
            response = self.send_upstream(scheme, netloc, target, body, headers)
        except (OSError, http.client.HTTPException) as e:
            record.update(status=502, error=f"upstream unreachable: {type(e).__name__}: {e}")
            self.answer_unreachable(api, str(e))
        else:
            record["status"] = response.status
            exchange.response_headers = response.getheaders()
            self.pass_on(response, exchange.received, record, clock)
        record.update(ended=now_iso(), seconds=round(time.monotonic() - clock, 4))
        meter.close_call(exchange)

    def send_upstream(
        self, scheme: str, netloc: str, target: str, body: bytes, headers: dict[str, str]
    ) -> http.client.HTTPResponse:
        """The upstream's response; a kept-alive connection the upstream closed meanwhile is
        opened again once."""
        for fresh in (False, True):
            connection = self.connection_to(scheme, netloc)
            reused = connection.sock is not None
            try:
                connection.request(self.command, target, body=body, headers=headers)
                return connection.getresponse()
            except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
                connection.close()
                if fresh or not reused:
                    raise
        raise AssertionError("unreachable")

    def pass_on(
        self,
        response: http.client.HTTPResponse,
        received: list[bytes],
        record: dict[str, Any],
        clock: float,
    ) -> None:
        """The upstream's answer to the client, piece by piece as it comes."""
        self.send_response_only(response.status, response.reason)
        length = response.getheader("Content-Length")
        bodiless = self.command == "HEAD" or response.status in (204, 304) or response.status < 200
        for name, value in response.getheaders():
            if name.lower() not in HOP_HEADERS:
                self.send_header(name, value)
        # An HTTP/1.0 client cannot read chunks: it reads to the end of the connection.
        chunked = not bodiless and length is None and self.request_version != "HTTP/1.0"
        if not bodiless and length is None and not chunked:
            self.close_connection = True
        if bodiless and length is not None:
            self.send_header("Content-Length", length)
        elif length is not None:
            self.send_header("Content-Length", length)
        elif chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while not bodiless:
                piece = response.read1(PIECE)
                if not piece:
                    break
                if record["first_byte_ms"] is None:
                    record["first_byte_ms"] = round((time.monotonic() - clock) * 1000, 2)
                received.append(piece)
                record["response_bytes"] += len(piece)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                self.wfile.flush()
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            # Done with it: read1 leaves a response of known length open at its end, and
            # the kept-alive connection cannot send the next request until it is closed.
            response.close()
        except (OSError, http.client.HTTPException) as e:
            # The client hung up (a CLI killed at its limit) or the upstream broke off.
            record["error"] = f"stream cut: {type(e).__name__}"
            self.close_connection = True
            if self.upstream is not None:
                self.upstream.close()
        if response.will_close and self.upstream is not None:
            self.upstream.close()

    do_GET = do_POST = do_HEAD = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = forward

    def answer_unreachable(self, api: str, why: str) -> None:
        message = f"nginx-eval meter: the upstream endpoint could not be reached: {why}"
        if api == ANTHROPIC:
            data: Any = {"type": "error", "error": {"type": "api_error", "message": message}}
        elif api == GEMINI:
            data = {"error": {"code": 502, "message": message, "status": "UNAVAILABLE"}}
        else:
            data = {"error": {"type": "server_error", "message": message, "code": None}}
        payload = json.dumps(data).encode()
        try:
            self.send_response_only(502)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()
        except OSError:
            self.close_connection = True
