"""The metering proxy (nginx_eval/meter/) on the wire, without an agent CLI: what it passes on
(streams as they come, keep-alive, chunked requests, gzip answers, the API's errors unchanged),
what it records (every call, attributed, priced by genai-prices, no credential anywhere), and the
prices of each API computed by hand from genai-prices' published prices. The usage parsing of
bodies the real CLIs sent is tested in test_meter_claude.py and test_meter_apis.py."""

import gzip
import http.client
import json
import socket
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from anthropic_standin import Fault, StandIn, say
from test_meter_apis import GPT52

from nginx_eval.meter import pricing, summary, usage
from nginx_eval.meter.proxy import (
    PHASE_HEADER,
    MeterProxy,
    redact_query,
    route,
    split_phase,
    upstream_target,
)

SECRET = "sk-ant-meter-secret-0123456789"
WHO = {"run": "default", "mode": "raw", "task": "tiny-add", "attempt": 1}
# genai-prices 0.2.3's published prices, USD per million tokens (its data for each model).
SONNET = {"input": 3.0, "output": 15.0, "cache_read": 0.30, "cache_write": 3.75}
GPT5 = {"input": 1.25, "output": 10.0, "cache_read": 0.125}
GEMINI_PRO = {"input": 1.25, "output": 10.0, "cache_read": 0.125}


class Upstream:
    """A scriptable HTTP/1.1 upstream on 127.0.0.1: `answer(handler, body)` answers each
    request; it counts the connections it accepted and keeps each request's head and body."""

    def __init__(self, answer):
        outer = self
        self.requests, self.connections = [], 0

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                outer.connections += 1
                super().setup()

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                outer.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
                answer(self, body)

            do_GET = do_HEAD = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def send(handler, status, body, headers=(), content_type="application/json"):
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    for k, v in headers:
        handler.send_header(k, v)
    handler.end_headers()
    handler.wfile.write(body)


def files_text(tmp_path):
    return "".join(gzip.decompress(p.read_bytes()).decode() for p in sorted(tmp_path.glob("*.gz")))


@pytest.fixture
def meter_of(tmp_path):
    started = []

    def make(upstreams):
        meter = MeterProxy(
            upstreams, WHO, tmp_path / "calls.jsonl.gz", tmp_path / "calls.bodies.jsonl.gz"
        ).start()
        meter.phase = "solve"
        started.append(meter)
        return meter

    yield make
    for meter in started:
        if not meter.closed:
            meter.stop()


def messages_body(stream, text="HELLO-1"):
    return json.dumps(
        {
            "model": "claude-sonnet-4-5",
            "stream": stream,
            "max_tokens": 100,
            "system": "You are a stand-in's client.",
            "messages": [{"role": "user", "content": text}],
        }
    )


def test_calls_are_forwarded_recorded_and_priced_by_hand(meter_of, tmp_path):
    with StandIn({"HELLO-1": [[say("Hi, there.")]]}, api_key=SECRET) as api:
        meter = meter_of({"anthropic": api.url})
        conn = http.client.HTTPConnection("127.0.0.1", meter.port)
        answers = []
        for stream in (True, False):
            conn.request(
                "POST", "/v1/messages?beta=true", messages_body(stream), {"x-api-key": SECRET}
            )
            response = conn.getresponse()
            answers.append((response.status, response.read()))
        meter.stop()
    assert [s for s, _ in answers] == [200, 200]
    assert b"event: message_start" in answers[0][1] and b'"Hi, there."' in answers[1][1]
    billed = [r["usage"] for r in api.messages_requests()]
    assert len(meter.calls) == 2 and [c["call"] for c in meter.calls] == [1, 2]
    for call, u in zip(meter.calls, billed, strict=True):
        assert {k: call[k] for k in WHO} == WHO
        assert (call["phase"], call["program"], call["api"], call["status"]) == (
            "solve",
            "claude",
            "anthropic",
            200,
        )
        assert call["tokens"] == {
            "input": u["input_tokens"],
            "output": u["output_tokens"],
            "cache_read": u["cache_read_input_tokens"],
            "cache_write": u["cache_creation_input_tokens"],
            "reasoning": 0,
        }
        by_hand = (
            u["input_tokens"] * SONNET["input"]
            + u["output_tokens"] * SONNET["output"]
            + u["cache_read_input_tokens"] * SONNET["cache_read"]
            + u["cache_creation_input_tokens"] * SONNET["cache_write"]
        ) / 1e6
        assert call["cost_usd"] == pytest.approx(by_hand, rel=1e-12)
        assert call["price_source"] == "genai-prices 0.2.3 (anthropic/claude-sonnet-4-5)"
        assert (call["priced_as"], call["price_match"]) == ("anthropic/claude-sonnet-4-5", "exact")
        assert call["model"] == "claude-sonnet-4-5" and call["response_id"].startswith("msg_")
    assert meter.calls[0]["stream"] and not meter.calls[1]["stream"]
    # The files hold the same records, and each call's request and response.
    records = summary.read_calls(tmp_path / "calls.jsonl.gz")
    assert records == meter.calls
    bodies = [json.loads(line) for line in files_text(tmp_path).splitlines() if '"request"' in line]
    assert [b["call"] for b in bodies] == [1, 2]
    assert bodies[0]["request"]["headers"]["x-api-key"] == "[redacted]"
    assert "message_delta" in bodies[0]["response"]["body"]
    assert SECRET not in files_text(tmp_path)


def test_usage_of_each_api_counts_cached_tokens_once():
    anthropic = {
        "input_tokens": 100,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 200,
        "output_tokens": 50,
    }
    assert usage.anthropic_tokens(anthropic) == {
        "input": 100,
        "output": 50,
        "cache_read": 1000,
        "cache_write": 200,
        "reasoning": 0,
    }
    openai = {
        "input_tokens": 1300,
        "input_tokens_details": {"cached_tokens": 1000},
        "output_tokens": 50,
        "output_tokens_details": {"reasoning_tokens": 20},
    }
    assert usage.openai_tokens(openai) == {
        "input": 300,
        "output": 50,
        "cache_read": 1000,
        "cache_write": 0,
        "reasoning": 20,
    }
    gemini = {
        "promptTokenCount": 1300,
        "cachedContentTokenCount": 1000,
        "candidatesTokenCount": 30,
        "thoughtsTokenCount": 20,
    }
    assert usage.gemini_tokens(gemini) == {
        "input": 300,
        "output": 50,
        "cache_read": 1000,
        "cache_write": 0,
        "reasoning": 20,
    }
    # Priced by hand from the published prices: Anthropic's four counts apart; OpenAI's and
    # Gemini's cached tokens at the cache price and only there, reasoning as output.
    cost, source, _, _ = pricing.price("anthropic", "claude-sonnet-4-5", anthropic)
    assert cost == pytest.approx((100 * 3 + 1000 * 0.3 + 200 * 3.75 + 50 * 15) / 1e6, rel=1e-12)
    assert source == "genai-prices 0.2.3 (anthropic/claude-sonnet-4-5)"
    cost = pricing.price("openai-responses", "gpt-5", openai).cost_usd
    assert cost == pytest.approx(
        (300 * GPT5["input"] + 1000 * GPT5["cache_read"] + 50 * GPT5["output"]) / 1e6, rel=1e-12
    )
    cost = pricing.price("gemini", "gemini-2.5-pro", gemini).cost_usd
    assert cost == pytest.approx(
        (300 * GEMINI_PRO["input"] + 1000 * GEMINI_PRO["cache_read"] + 50 * GEMINI_PRO["output"])
        / 1e6,
        rel=1e-12,
    )
    # An hour-long cache write is dearer than a five-minute one: genai-prices' tiers.
    hour = dict(anthropic, cache_creation={"ephemeral_1h_input_tokens": 200})
    assert pricing.price("anthropic", "claude-sonnet-4-5", hour)[0] == pytest.approx(
        (100 * 3 + 1000 * 0.3 + 200 * 6.0 + 50 * 15) / 1e6, rel=1e-12
    )
    unknown = pricing.price("anthropic", "no-such-model-7", anthropic)
    assert unknown.cost_usd is None and "no-such-model-7" in unknown.source


def shipped_models():
    """Every model the shipped modes.toml names: its modes' `models` tables (which
    NGINX_EVAL_MODELS replaces) and the phases' model names that are no role."""
    import tomllib

    from conftest import SOURCE_ROOT

    modes = tomllib.loads((SOURCE_ROOT / "modes.toml").read_text())["modes"]
    names = set()
    for mode in modes.values():
        roles = mode.get("models", {})
        names |= set(roles.values())
        for m in [mode.get("model")] + [p.get("model") for p in mode.get("phases", [])]:
            if m and m not in roles:
                names.add(m)
    return names


def test_each_model_is_priced_by_its_own_entry_or_says_which_priced_it():
    """Exact first through genai-prices' match clauses: a model with an entry of its own is
    priced by it; one the table lists under another entry by name (gpt-5.2-codex under gpt-5.2,
    at that entry's published prices) says so in priced_as and price_match "alias"; a dated
    snapshot the table takes by a prefix says "pattern"; an unknown model is unpriced, the
    source saying the table has no entry for it. The shipped modes' models are all priced."""
    openai = {
        "input_tokens": 1300,
        "input_tokens_details": {"cached_tokens": 1000},
        "output_tokens": 50,
        "output_tokens_details": {"reasoning_tokens": 20},
    }
    anthropic = {"input_tokens": 100, "output_tokens": 50}
    by_hand = {
        "gpt-5.2-codex": (300 * GPT52["input"] + 1000 * GPT52["cache_read"] + 50 * GPT52["output"])
        / 1e6,
        "claude-sonnet-4-5": (100 * SONNET["input"] + 50 * SONNET["output"]) / 1e6,
        "claude-opus-4-5": (100 * 5.0 + 50 * 25.0) / 1e6,
    }
    expected = {
        "gpt-5.2-codex": ("openai/gpt-5.2", "alias"),
        "claude-sonnet-4-5": ("anthropic/claude-sonnet-4-5", "exact"),
        "claude-opus-4-5": ("anthropic/claude-opus-4-5", "exact"),
    }
    assert shipped_models() == set(expected)
    for model, (entry, match) in expected.items():
        api, u = ("openai-responses", openai) if "gpt" in model else ("anthropic", anthropic)
        p = pricing.price(api, model, u)
        assert (p.priced_as, p.match) == (entry, match), (model, p)
        assert p.cost_usd == pytest.approx(by_hand[model], rel=1e-12), model
        assert p.source == f"{pricing.table()} ({entry})"
    # The test stand-ins' models: gpt-5-codex is listed under gpt-5, at gpt-5's prices.
    p = pricing.price("openai-responses", "gpt-5-codex", openai)
    assert (p.priced_as, p.match) == ("openai/gpt-5", "alias")
    assert p.cost_usd == pytest.approx(
        (300 * GPT5["input"] + 1000 * GPT5["cache_read"] + 50 * GPT5["output"]) / 1e6, rel=1e-12
    )
    assert pricing.price("openai-responses", "gpt-5", openai).match == "exact"
    assert pricing.price("gemini", "gemini-2.5-pro", {"promptTokenCount": 10})[2:] == (
        "google/gemini-2.5-pro",
        "exact",
    )
    # What the Anthropic API answers with: the dated snapshot, priced by the entry's prefix.
    dated = pricing.price("anthropic", "claude-sonnet-4-5-20250929", anthropic)
    assert (dated.priced_as, dated.match) == ("anthropic/claude-sonnet-4-5", "pattern")
    assert dated.cost_usd == pytest.approx(by_hand["claude-sonnet-4-5"], rel=1e-12)
    # No entry at all: unpriced, and the record says why, never another model's price.
    for api, model in (("openai-responses", "gpt-5-codex-mini"), ("anthropic", "claude-nova-9")):
        p = pricing.price(api, model, openai if "gpt" in model else anthropic)
        assert (p.cost_usd, p.priced_as, p.match) == (None, None, None)
        assert p.source.endswith(f"no entry for model {model!r} ({api.split('-')[0]})")


def test_a_stream_passes_through_as_it_comes(meter_of):
    """Each event reaches the client before the upstream has sent the next: the proxy holds
    nothing back. Time to the first byte through the proxy and directly, 20 streams each."""
    gap = 0.3

    def stream(handler, body):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for i in range(3):
            data = f"event: ping\ndata: {json.dumps({'type': 'ping', 'i': i})}\n\n".encode()
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            handler.wfile.flush()
            if json.loads(body or b"{}").get("slow"):
                time.sleep(gap)
        handler.wfile.write(b"0\r\n\r\n")

    upstream = Upstream(stream)
    try:
        meter = meter_of({"anthropic": upstream.url})
        conn = http.client.HTTPConnection("127.0.0.1", meter.port)
        start = time.monotonic()
        conn.request("POST", "/v1/messages", json.dumps({"slow": True}))
        response = conn.getresponse()
        first = response.read1(65536)
        arrived = time.monotonic() - start
        rest = response.read()
        assert b'"i": 0' in first and b'"i": 2' not in first
        assert arrived < gap, f"the first event took {arrived:.3f} s: held back"
        assert rest.count(b"event: ping") == 2
        ttfb = {"proxy": [], "direct": []}
        for name, port in (("proxy", meter.port), ("direct", upstream.server.server_address[1])):
            c = http.client.HTTPConnection("127.0.0.1", port)
            for _ in range(20):
                t = time.monotonic()
                c.request("POST", "/v1/messages", "{}")
                r = c.getresponse()
                r.read1(65536)
                ttfb[name].append(time.monotonic() - t)
                r.read()
        added = statistics.median(ttfb["proxy"]) - statistics.median(ttfb["direct"])
        direct, proxied = (statistics.median(ttfb[k]) * 1e3 for k in ("direct", "proxy"))
        print(f"time to first byte, median of 20: direct {direct:.2f} ms, proxy {proxied:.2f} ms")
        assert added < 0.05
        assert upstream.connections == 3  # the slow stream, then one kept-alive connection each
    finally:
        upstream.close()


def test_keep_alive_chunked_requests_and_gzip_answers(meter_of, tmp_path):
    answer = {
        "id": "msg_gz",
        "type": "message",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "zipped"}],
        "usage": {"input_tokens": 10, "output_tokens": 4},
    }
    zipped = gzip.compress(json.dumps(answer).encode())

    def gz(handler, body):
        send(handler, 200, zipped, [("Content-Encoding", "gzip")])

    upstream = Upstream(gz)
    try:
        meter = meter_of({"anthropic": upstream.url})
        sock = socket.create_connection(("127.0.0.1", meter.port))
        body = messages_body(False).encode()
        head = (
            b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            b"Accept-Encoding: gzip\r\n\r\n"
        )
        chunked = b"".join(
            b"%x\r\n%s\r\n" % (len(body[i : i + 20]), body[i : i + 20])
            for i in range(0, len(body), 20)
        )
        conn = http.client.HTTPConnection("127.0.0.1", meter.port)
        conn.sock = sock
        for _ in range(2):  # the same client connection twice
            sock.sendall(head + chunked + b"0\r\n\r\n")
            response = http.client.HTTPResponse(sock)
            response.begin()
            assert response.status == 200 and response.getheader("Content-Encoding") == "gzip"
            assert response.read() == zipped  # unchanged: the client undoes its own encoding
        sock.close()
        meter.stop()
        assert [r["body"] for r in upstream.requests] == [body, body]
        assert upstream.connections == 1  # kept alive on both sides
        assert [c["tokens"]["input"] for c in meter.calls] == [10, 10]
        assert meter.calls[0]["cost_usd"] == pytest.approx((10 * 3 + 4 * 15) / 1e6, rel=1e-12)
        assert "zipped" in files_text(tmp_path)  # the record keeps the body readable
    finally:
        upstream.close()


@pytest.mark.parametrize(
    "fault,headers",
    [
        (Fault(status=429), {"retry-after": "0"}),
        (Fault(status=529), {}),
        (Fault(status=500, should_retry=True), {"x-should-retry": "true"}),
        (Fault(status=401, should_retry=False), {"x-should-retry": "false"}),
    ],
)
def test_the_apis_errors_reach_the_client_unchanged(meter_of, fault, headers):
    with StandIn({}, faults=[fault], api_key=SECRET) as api:
        meter = meter_of({"anthropic": api.url})
        seen = []
        for port in (meter.port, api.server.server_address[1]):
            fault.hits = 0
            conn = http.client.HTTPConnection("127.0.0.1", port)
            conn.request("POST", "/v1/messages", messages_body(True), {"x-api-key": SECRET})
            r = conn.getresponse()
            body = json.loads(r.read())
            seen.append((r.status, {k: r.getheader(k) for k in headers}, body["error"]["type"]))
        meter.stop()
    assert seen[0] == seen[1] and seen[0][0] == fault.status and seen[0][1] == headers
    (call,) = meter.calls
    assert call["status"] == fault.status and call["tokens"] is None and call["cost_usd"] is None
    assert call["error"] == seen[0][2]


def test_an_upstream_out_of_reach_is_a_502_in_the_apis_shape(meter_of):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, never listening
    meter = meter_of({"anthropic": dead, "gemini": dead})
    conn = http.client.HTTPConnection("127.0.0.1", meter.port)
    conn.request("POST", "/v1/messages", messages_body(True))
    r = conn.getresponse()
    assert r.status == 502 and json.loads(r.read())["error"]["type"] == "api_error"
    conn.request("POST", "/v1beta/models/gemini-2.5-pro:generateContent", "{}")
    r = conn.getresponse()
    assert r.status == 502 and json.loads(r.read())["error"]["status"] == "UNAVAILABLE"
    meter.stop()
    assert [c["status"] for c in meter.calls] == [502, 502]
    assert meter.calls[0]["error"].startswith("upstream unreachable: ConnectionRefusedError")


def test_no_credential_reaches_a_record(meter_of, tmp_path):
    cookie = "session=cookie-secret-0123456789"

    def echo(handler, body):
        # An upstream that repeats what it was sent, and sets a cookie.
        send(
            handler,
            401,
            json.dumps(
                {"error": {"message": f"bad key {SECRET}", "seen": dict(handler.headers)}}
            ).encode(),
            [("Set-Cookie", "reply-cookie-secret-0123456789; Path=/")],
        )

    upstream = Upstream(echo)
    try:
        meter = meter_of(
            {
                "anthropic": upstream.url,
                "openai-responses": upstream.url + "/v1",
                "gemini": upstream.url,
            }
        )
        conn = http.client.HTTPConnection("127.0.0.1", meter.port)
        for path, headers in (
            ("/v1/messages", {"x-api-key": SECRET, "Cookie": cookie}),
            ("/v1/responses", {"Authorization": f"Bearer {SECRET}"}),
            (
                "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse",
                {"x-goog-api-key": SECRET},
            ),
            (f"/v1beta/models/gemini-2.5-pro:generateContent?key={SECRET}", {}),
        ):
            conn.request("POST", path, "{}", headers)
            r = conn.getresponse()
            assert r.status == 401 and SECRET.encode() in r.read()  # the client gets it all
        meter.stop()
        # The upstream got every credential as sent.
        assert upstream.requests[1]["headers"]["Authorization"] == f"Bearer {SECRET}"
        assert upstream.requests[3]["path"].endswith(f"?key={SECRET}")
        written = files_text(tmp_path)
        for secret in (SECRET, "cookie-secret-0123456789", "reply-cookie-secret-0123456789"):
            assert secret not in written and secret not in json.dumps(meter.calls)
        assert "[redacted]" in written and meter.calls[3]["path"].endswith("key=%5Bredacted%5D")
        assert [c["program"] for c in meter.calls] == ["claude", "codex", "gemini", "gemini"]
    finally:
        upstream.close()


def test_routes_and_upstream_paths():
    assert route("/v1/messages", {}, "gemini") == "anthropic"
    assert route("/v1/messages/count_tokens", {}, "gemini") == "anthropic"
    assert route("/v1/responses", {}, "anthropic") == "openai-responses"
    assert route("/v1/models", {}, "anthropic") == "openai-responses"
    assert route("/v1/models", {"anthropic-version": "2023-06-01"}, "gemini") == "anthropic"
    assert route("/v1beta/models/x:streamGenerateContent", {}, "anthropic") == "gemini"
    assert route("/", {}, "anthropic") == "anthropic"  # Claude Code's HEAD probe
    # An OpenAI client adds /responses to the base it was given (<proxy>/v1): the upstream's base
    # (a gateway with a path of its own too) takes that /v1's place.
    assert upstream_target("https://api.openai.com/v1", "openai-responses", "/v1/responses") == (
        "https",
        "api.openai.com",
        "/v1/responses",
    )
    assert upstream_target("http://gw:4000/openai/v1", "openai-responses", "/v1/responses?x=1") == (
        "http",
        "gw:4000",
        "/openai/v1/responses?x=1",
    )
    assert upstream_target("http://gw:4000/anthropic/", "anthropic", "/v1/messages?beta=true") == (
        "http",
        "gw:4000",
        "/anthropic/v1/messages?beta=true",
    )
    # Phases that run at once name themselves in their base URLs; the rest is routed as before.
    assert split_phase("/phase/critique/v1/messages?beta=true", "x") == (
        "critique",
        "/v1/messages?beta=true",
    )
    assert split_phase("/phase/a%20b/v1/responses", None) == ("a b", "/v1/responses")
    assert split_phase("/v1/messages", "implement") == ("implement", "/v1/messages")
    secrets = set()
    assert redact_query("/m:gen?alt=sse&key=abc", secrets) == "/m:gen?alt=sse&key=%5Bredacted%5D"
    assert secrets == {"abc"}


def test_a_call_names_its_phase_by_its_path_else_by_the_base_url_header(meter_of):
    """The phase prefix of the path first; without one, the phase of the base URL a program
    sends in PHASE_HEADER (Codex, whose home names the proxy without a phase); without either,
    the attempt's current phase. The header is the proxy's: the upstream never sees it."""
    answer = json.dumps({"id": "resp_1", "model": "gpt-5", "output": [], "usage": None})
    upstream = Upstream(lambda handler, body: send(handler, 200, answer.encode()))
    try:
        meter = meter_of({"openai-responses": upstream.url + "/v1"})
        meter.phase = "current"
        named = f"http://127.0.0.1:{meter.port}/phase/from%20header/v1"
        conn = http.client.HTTPConnection("127.0.0.1", meter.port)
        for path, headers in (
            ("/phase/from-path/v1/responses", {PHASE_HEADER: named}),
            ("/v1/responses", {PHASE_HEADER: named}),
            ("/v1/responses", {PHASE_HEADER: f"http://127.0.0.1:{meter.port}/v1"}),
            ("/v1/responses", {}),
        ):
            conn.request("POST", path, json.dumps({"model": "gpt-5", "input": "x"}), headers)
            assert conn.getresponse().read() == answer.encode()
        meter.stop()
    finally:
        upstream.close()
    assert [c["phase"] for c in meter.calls] == ["from-path", "from header", "current", "current"]
    assert [r["path"] for r in upstream.requests] == ["/v1/responses"] * 4
    assert not any(PHASE_HEADER in {k.lower() for k in r["headers"]} for r in upstream.requests), (
        upstream.requests
    )


def test_a_call_open_when_the_attempt_ends_is_recorded_unfinished(meter_of):
    release = threading.Event()

    def hang(handler, body):
        release.wait(10)

    upstream = Upstream(hang)
    try:
        meter = meter_of({"anthropic": upstream.url})
        client = socket.create_connection(("127.0.0.1", meter.port))
        client.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        for _ in range(100):
            if upstream.requests:
                break
            time.sleep(0.02)
        start = time.monotonic()
        meter.stop()
        assert time.monotonic() - start < 2  # stop does not wait for the upstream
        (call,) = meter.calls
        assert call["error"] == "unfinished" and call["status"] is None and call["ended"]
        client.close()
    finally:
        release.set()
        upstream.close()


def test_totals_never_pass_a_partial_sum_for_the_whole():
    calls = [
        {
            "model": "a",
            "program": "claude",
            "tokens": dict.fromkeys(usage.TOKEN_KINDS, 1),
            "cost_usd": 0.5,
        },
        {
            "model": "b",
            "program": "codex",
            "tokens": dict.fromkeys(usage.TOKEN_KINDS, 2),
            "cost_usd": None,
        },
        {"model": None, "program": "claude", "tokens": None, "cost_usd": None},
    ]
    t = summary.totals(calls)
    assert (t["calls"], t["billed_calls"], t["unpriced_calls"], t["cost_usd"]) == (3, 2, 1, None)
    assert t["tokens"] == dict.fromkeys(usage.TOKEN_KINDS, 3)
    assert t["models"]["a"]["cost_usd"] == 0.5 and t["models"]["b"]["cost_usd"] is None
    assert summary.totals(calls[:1])["cost_usd"] == 0.5
    assert summary.relative_difference(1.0, 1.02) == pytest.approx(0.02)
    assert summary.relative_difference(None, 1.0) is None


def test_the_report_warns_when_a_programs_own_cost_is_over_one_percent_off():
    from nginx_eval.report.data import _row_warnings

    row = {"cost_usd": 0.100000, "self_reported_cost_usd": 0.102, "cost_difference": 0.02}
    assert _row_warnings("raw", "tiny-add", row) == [
        "raw / tiny-add: the metered cost (0.100000 USD) and the agent's own (0.102000 USD) "
        "differ by 2.0% (over 1%); the report counts the metered one"
    ]
    assert _row_warnings("raw", "tiny-add", dict(row, cost_difference=0.009)) == []
    assert _row_warnings("raw", "tiny-add", dict(row, cost_difference=None)) == []
    (unknown,) = _row_warnings("raw", "tiny-add", dict(row, self_reported_cost_usd=None))
    assert "agent's own (an unknown)" in unknown


def test_an_error_in_the_middle_of_a_stream_is_passed_on_and_recorded(meter_of):
    with StandIn({}, faults=[Fault(mid_stream="overloaded_error")], api_key=SECRET) as api:
        meter = meter_of({"anthropic": api.url})
        conn = http.client.HTTPConnection("127.0.0.1", meter.port)
        conn.request("POST", "/v1/messages", messages_body(True), {"x-api-key": SECRET})
        r = conn.getresponse()
        text = r.read()
        meter.stop()
    assert r.status == 200 and b"event: error" in text and b"overloaded_error" in text
    (call,) = meter.calls
    assert (call["status"], call["error"]) == (200, "overloaded_error")
    # What message_start counted: the input, and the one output token it announced.
    assert call["tokens"]["output"] == 1 and call["tokens"]["input"] > 0


def test_an_https_upstream_is_reached_through_the_operators_proxy():
    connects = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)

    def operator_proxy():
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            connects.append(client.recv(4096).split(b"\r\n", 1)[0])
            client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
            client.close()

    threading.Thread(target=operator_proxy, daemon=True).start()
    port = listener.getsockname()[1]
    try:
        environ = {"HTTPS_PROXY": f"http://127.0.0.1:{port}", "NO_PROXY": "localhost,.internal"}
        meter = MeterProxy({"anthropic": "https://api.anthropic.example"}, WHO, environ=environ)
        meter.start()
        conn = http.client.HTTPConnection("127.0.0.1", meter.port)
        conn.request("POST", "/v1/messages", messages_body(True))
        r = conn.getresponse()
        assert r.status == 502 and b"Tunnel connection failed: 403" in r.read()
        meter.stop()
        assert [c.rsplit(b" ", 1)[0] for c in connects] == [b"CONNECT api.anthropic.example:443"]
        assert meter.outbound_proxy("https", "gw.internal:443") is None  # NO_PROXY
        assert meter.outbound_proxy("http", "api.anthropic.example") is None
    finally:
        listener.close()
