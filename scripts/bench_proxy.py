#!/usr/bin/env python3
"""What the metering proxy (nginx_eval/meter/proxy.py) adds to a model call, and its memory.

    python3 scripts/bench_proxy.py [--calls 200] [--context-kb 100]

The upstream is the test suite's Anthropic stand-in (tests/anthropic_standin.py), answering a
streamed /v1/messages call as the API does (server-sent events, usage in message_start and
message_delta); each request carries a conversation of --context-kb kilobytes, as an agent's
later turns do. The proxy runs in a process of its own, as it records (gzip files, prices from
genai-prices) in an agent attempt. Calls alternate between the stand-in directly and through the
proxy (the client's connection to the proxy kept alive; the stand-in, HTTP/1.0, closes each of
its connections, so both ways connect to it anew per call); a call's time is from sending the
request to its last byte. Prints, over the calls after a warm-up of 10 each: the median and
90th percentile of each way, of the paired difference (the proxy's added latency per call) and
of the time to the first byte; and the proxy process's peak resident memory (VmHWM) before and
after the calls.
"""

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from anthropic_standin import StandIn, call, say  # noqa: E402

SERVE = """
import sys
from nginx_eval.meter.proxy import MeterProxy
meter = MeterProxy({"anthropic": sys.argv[1]},
                   {"run": "bench", "mode": "m", "task": "t", "attempt": 1},
                   sys.argv[2] + "/calls.jsonl.gz", sys.argv[2] + "/calls.bodies.jsonl.gz").start()
meter.phase = "solve"
print(meter.port, flush=True)
sys.stdin.read()
meter.stop()
print(len(meter.calls), flush=True)
"""
MARKER = "BENCH-CALL"
WARM_UP = 10


def peak_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def body(context_kb):
    history = []
    chunk = "x" * 1000
    for i in range(context_kb):
        history.append({"role": "user" if i % 2 == 0 else "assistant", "content": chunk})
    history.append({"role": "user", "content": f"{MARKER} go"})
    if history[-2]["role"] == "user":
        history.insert(-1, {"role": "assistant", "content": "ok"})
    return json.dumps(
        {
            "model": "claude-sonnet-4-5",
            "stream": True,
            "max_tokens": 32000,
            "system": "You are the bench's agent.",
            "messages": history,
        }
    ).encode()


def one_call(conn, payload, key):
    start = time.monotonic()
    conn.request(
        "POST",
        "/v1/messages?beta=true",
        payload,
        {"x-api-key": key, "content-type": "application/json"},
    )
    response = conn.getresponse()
    first = response.read1(65536)
    ttfb = time.monotonic() - start
    rest = response.read()
    assert response.status == 200 and b"message_stop" in first + rest, response.status
    return time.monotonic() - start, ttfb


def summary(name, values):
    ms = numpy.array(values) * 1000
    return (
        f"{name:<28} median {numpy.median(ms):8.3f} ms   p90 {numpy.percentile(ms, 90):8.3f} ms"
        f"   (n={len(ms)})"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls each way (default 200)")
    parser.add_argument("--context-kb", type=int, default=100)
    args = parser.parse_args()
    script = {MARKER: [[say("Looking at it."), call("Bash", command="make")]]}
    payload = body(args.context_kb)
    with StandIn(script) as api, tempfile.TemporaryDirectory() as out:
        proxy = subprocess.Popen(
            [sys.executable, "-c", SERVE, api.url, out],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
        port = int(proxy.stdout.readline())
        idle_kib = peak_kib(proxy.pid)
        direct = http.client.HTTPConnection("127.0.0.1", api.server.server_address[1])
        proxied = http.client.HTTPConnection("127.0.0.1", port)
        times = {"direct": [], "proxy": []}
        firsts = {"direct": [], "proxy": []}
        for i in range(args.calls + WARM_UP):
            for name, conn in (("direct", direct), ("proxy", proxied)):
                total, ttfb = one_call(conn, payload, api.api_key)
                if i >= WARM_UP:
                    times[name].append(total)
                    firsts[name].append(ttfb)
        busy_kib = peak_kib(proxy.pid)
        proxy.stdin.close()
        recorded = int(proxy.stdout.readline())
        proxy.wait(timeout=30)
        sizes = {p.name: p.stat().st_size for p in Path(out).iterdir()}
    added = numpy.array(times["proxy"]) - numpy.array(times["direct"])
    print(
        f"{args.calls} streamed calls each way after {WARM_UP} to warm up, "
        f"{len(payload) / 1024:.0f} KiB request bodies; the proxy recorded {recorded} calls "
        f"({', '.join(f'{k} {v / 1024:.0f} KiB' for k, v in sorted(sizes.items()))})"
    )
    print(summary("direct, whole call", times["direct"]))
    print(summary("through the proxy", times["proxy"]))
    print(summary("added by the proxy", added))
    print(summary("first byte, direct", firsts["direct"]))
    print(summary("first byte, proxy", firsts["proxy"]))
    idle, busy = idle_kib / 1024, busy_kib / 1024
    print(f"proxy process peak RSS: {idle:.1f} MiB started, {busy:.1f} MiB after the calls")


if __name__ == "__main__":
    main()
