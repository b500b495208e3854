"""The Anthropic stand-in (tests/anthropic_standin.py) on its own, over real HTTP: what it
streams, answers and records, and the faults it injects. tests/test_claude_cli.py drives the real
Claude Code CLI against it."""

import json
import time
import urllib.request
from urllib.error import HTTPError

from anthropic_standin import DONE_TEXT, Fault, StandIn, call, locate, say
from claude_cli import SONNET, USAGE_KEYS


def post(api, body, key=None):
    """(status, headers, raw body) of a POST /v1/messages?beta=true to the stand-in."""
    request = urllib.request.Request(
        f"{api.url}/v1/messages?beta=true",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"x-api-key": key or api.api_key, "content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def sse_events(raw):
    """[(event name, data)] of a server-sent event stream."""
    events = []
    for frame in raw.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in frame.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def user(text):
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def tool_round(tool_id="t1"):
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": tool_id,
                    "content": "MARK-B echoed by a tool",
                }
            ],
        },
    ]


def test_locate_takes_the_latest_prompt_with_a_marker_and_counts_tool_rounds():
    script = {"MARK-A": [], "MARK-B": []}
    assert locate(script, [user("do MARK-A")]) == ("MARK-A", 0)
    assert locate(script, [user("do MARK-A"), *tool_round()]) == ("MARK-A", 1)
    # --continue: the next phase's prompt follows the whole earlier conversation.
    conversation = [user("do MARK-A"), *tool_round("t1"), user("now MARK-B"), *tool_round("t2")]
    assert locate(script, conversation) == ("MARK-B", 1)
    assert locate(script, [user("no marker here")]) == (None, 0)


def test_streams_text_and_tool_calls_as_the_messages_api_does():
    script = {"MARK-S": [[say("Looking."), call("Bash", command="ls -l")]]}
    with StandIn(script) as api:
        status, headers, raw = post(
            api, {"model": SONNET, "stream": True, "messages": [user("go MARK-S")]}
        )
    assert status == 200 and headers["Content-Type"] == "text/event-stream"
    events = sse_events(raw)
    assert [name for name, _ in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[2][1]["delta"] == {"type": "text_delta", "text": "Looking."}
    tool = events[4][1]["content_block"]
    assert (tool["type"], tool["name"], tool["input"]) == ("tool_use", "Bash", {})
    assert json.loads(events[5][1]["delta"]["partial_json"]) == {"command": "ls -l"}
    delta = events[7][1]
    assert delta["delta"]["stop_reason"] == "tool_use"
    assert set(USAGE_KEYS) <= set(delta["usage"])
    assert api.requests[0]["usage"] == delta["usage"]
    assert (api.requests[0]["marker"], api.requests[0]["turn"]) == ("MARK-S", 0)


def test_answers_a_request_without_stream_with_one_json_message():
    with StandIn({"MARK-J": [[say("Plain.")]]}) as api:
        status, _, raw = post(api, {"model": SONNET, "messages": [user("go MARK-J")]})
        _, _, after = post(api, {"model": SONNET, "messages": [user("go MARK-J"), *tool_round()]})
    message = json.loads(raw)
    assert status == 200 and message["content"] == [say("Plain.")]
    assert message["stop_reason"] == "end_turn" and message["model"] == SONNET
    assert json.loads(after)["content"] == [say(DONE_TEXT)]  # past the script's end


def test_usage_looks_like_a_cached_prompt():
    with StandIn({"MARK-U": [[say("a")], [say("b")]]}) as api:
        system = {"system": [{"type": "text", "text": "x" * 4000}], "tools": []}
        post(api, dict(system, model=SONNET, messages=[user("go MARK-U")]))
        post(api, dict(system, model=SONNET, messages=[user("go MARK-U"), *tool_round()]))
    first, second = (r["usage"] for r in api.requests)
    assert first["cache_read_input_tokens"] == 0 and first["cache_creation_input_tokens"] > 1000
    assert second["cache_read_input_tokens"] > first["cache_creation_input_tokens"]
    assert 0 < second["cache_creation_input_tokens"] < 100


def test_injects_http_errors_mid_stream_errors_delays_and_checks_the_key():
    faults = [
        Fault(status=529, times=1),
        Fault(status=401, should_retry=False, times=1),
        Fault(mid_stream="overloaded_error", times=1),
        Fault(delay=0.5, times=1),
    ]
    body = {"model": SONNET, "stream": True, "messages": [user("hi")]}
    with StandIn(faults=faults) as api:
        overloaded = post(api, body)
        refused = post(api, body)
        cut = post(api, body)
        start = time.monotonic()
        delayed = post(api, body)
        waited = time.monotonic() - start
        wrong_key = post(api, body, key="sk-wrong")
        head = urllib.request.urlopen(urllib.request.Request(api.url + "/", method="HEAD"))
    assert overloaded[0] == 529
    assert json.loads(overloaded[2])["error"]["type"] == "overloaded_error"
    assert refused[0] == 401 and refused[1]["x-should-retry"] == "false"
    assert [name for name, _ in sse_events(cut[2])] == ["message_start", "error"]
    assert delayed[0] == 200 and waited >= 0.5
    assert wrong_key[0] == 401
    assert json.loads(wrong_key[2])["error"]["type"] == "authentication_error"
    assert head.status == 200
    assert [r["status"] for r in api.requests] == [
        529,
        401,
        "200, then overloaded_error",
        200,
        401,
        200,
    ]
