"""The agent programs' seam (nginx_eval/agent/programs/) without running a CLI: the interface the
metering proxy relies on, and each program's reading of what its real CLI printed (Codex CLI
0.169.0 and Gemini CLI 0.61.0 against tests/openai_standin.py and tests/gemini_standin.py;
tests/test_agent_programs.py runs them)."""

import pytest

from nginx_eval.agent.programs import base, registry
from nginx_eval.agent.programs.claude import CLAUDE
from nginx_eval.agent.programs.codex import CODEX, config_toml
from nginx_eval.agent.programs.gemini import GEMINI, settings
from nginx_eval.core.errors import UserError
from nginx_eval.run.modes import Phase

CODEX_OK = """\
{"type":"thread.started","thread_id":"01a223af-4e89-78a2-ba38-fb4c110fc5de"}
{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for `gpt-5-codex` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."}}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Looking."}}
{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"Done."}}
{"type":"turn.completed","usage":{"input_tokens":19554,"cached_input_tokens":4442,"cache_write_input_tokens":0,"output_tokens":139,"reasoning_output_tokens":10}}
"""  # noqa: E501
CODEX_FAILED = """\
{"type":"thread.started","thread_id":"01a223af-81da-7051-8750-60609354616f"}
{"type":"turn.started"}
{"type":"error","message":"Reconnecting... 1/5 (MESSAGE)"}
{"type":"error","message":"MESSAGE"}
{"type":"turn.failed","error":{"message":"MESSAGE"}}
"""
CODEX_401 = (
    "unexpected status 401 Unauthorized: Incorrect API key provided, url: "
    "http://127.0.0.1:44449/v1/responses, request id: req_standin00006"
)
CODEX_429 = "exceeded retry limit, last status: 429 Too Many Requests, request id: req_standin00006"
CODEX_500 = "We’re currently experiencing high demand, which may cause temporary errors."
CODEX_503 = "Selected model is at capacity. Please try a different model."

GEMINI_OK = """{
  "session_id": "edcb4830-1903-4ed6-b5b7-50a1b1536745",
  "response": "Done.",
  "stats": {
    "models": {
      "gemini-2.5-pro": {
        "api": {"totalRequests": 2, "totalErrors": 0, "totalLatencyMs": 680, "errorsByType": {}},
        "tokens": {"input": 12318, "prompt": 24240, "candidates": 33, "total": 24279,
                   "cached": 11922, "thoughts": 6, "tool": 0}
      }
    }
  }
}"""
GEMINI_BAD_KEY = r"""YOLO mode is enabled. All tool calls will be automatically approved.
Error when talking to Gemini API Full report available at: /tmp/gemini-client-error.json _ApiError: {"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}
    at throwErrorIfNotOK (file:///opt/nginx-eval/gemini-cli/bundle/chunk-JDPZ4CE3.js:267833:24) {
  status: 400
}
{
  "session_id": "fa4ab6cc-4c4d-4335-a911-65c8c55d0eda",
  "error": {
    "type": "Error",
    "message": "{\"error\":{\"code\":400,\"message\":\"API key not valid. Please pass a valid API key.\",\"status\":\"INVALID_ARGUMENT\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":\"API_KEY_INVALID\",\"domain\":\"googleapis.com\"}]}}",
    "code": 400
  }
}
"""  # noqa: E501
GEMINI_NO_AUTH = """{
  "session_id": "ffe22fa4-9603-47ac-ad95-2f36692b9468",
  "error": {"type": "Error", "message": "Invalid auth method selected.", "code": 41}
}"""


def test_every_program_has_what_the_metering_proxy_needs():
    assert [(p.name, p.api) for p in registry.programs()] == [
        ("claude", "anthropic"),
        ("codex", "openai-responses"),
        ("gemini", "gemini"),
    ]
    assert [p.upstream({}) for p in registry.programs()] == [
        "https://api.anthropic.com",
        "https://api.openai.com/v1",
        "https://generativelanguage.googleapis.com",
    ]
    env = {"ANTHROPIC_BASE_URL": "a", "OPENAI_BASE_URL": "o", "GOOGLE_GEMINI_BASE_URL": "g"}
    assert [p.upstream(env) for p in registry.programs()] == ["a", "o", "g"]
    proxy = "http://127.0.0.1:9/v1"
    for p in registry.programs():
        assert p.endpoint_environment(proxy) == {p.base_url_variable: proxy}
        assert p.upstream(p.endpoint_environment(proxy)) == proxy
    assert CODEX.endpoint({"OPENAI_BASE_URL": "http://127.0.0.1:8765/v1"}) == "127.0.0.1:8765"
    assert GEMINI.endpoint({}) == "generativelanguage.googleapis.com:443"


def test_a_phase_names_its_program_and_an_unknown_one_is_an_error():
    assert registry.of_phase(Phase("solve", "codex exec {prompt}", program="codex")) is CODEX
    assert registry.of_phase(Phase("solve", "claude -p {prompt}")) is CLAUDE
    with pytest.raises(UserError, match="no agent program 'aider'; known: claude, codex, gemini"):
        registry.of_phase(Phase("solve", "aider {prompt}", program="aider"))
    # A phase of the default program keeps the fingerprint it had before the key existed.
    assert "program" not in Phase("solve", "claude -p x").fingerprint()
    assert Phase("solve", "codex x", program="codex").fingerprint()["program"] == "codex"


def test_codex_reads_its_json_events():
    result = CODEX.parse_result(CODEX_OK)
    assert result["session_id"] == "01a223af-4e89-78a2-ba38-fb4c110fc5de"
    assert (result["is_error"], result["num_turns"], result["result"]) == (False, 1, "Done.")
    assert CODEX.classify(result, 0) == ("completed", "")
    usage, _ = CODEX.phase_usage(result, [], {})
    assert usage["tokens"] == {
        "input": 19554 - 4442,
        "output": 139,
        "cache_read": 4442,
        "cache_creation": 0,
    }
    assert usage["cost_usd"] is None
    assert CODEX.parse_result("not codex") is None


@pytest.mark.parametrize(
    "message, status",
    [
        (CODEX_401, base.AUTH),
        (CODEX_429, "infra_error"),
        (CODEX_500, "infra_error"),
        (CODEX_503, "infra_error"),
        ("something else", "failed"),
    ],
)
def test_codex_errors_are_classified(message, status):
    result = CODEX.parse_result(CODEX_FAILED.replace("MESSAGE", message))
    assert result["is_error"] and CODEX.classify(result, 1)[0] == status


def test_codex_tokens_come_from_the_session_transcript_less_the_earlier_phases():
    entries = [
        {"type": "turn_context", "payload": {"model": "gpt-5-codex"}},
        {
            "type": "event_msg",
            "payload": {
                "type": "token_count",
                "info": {
                    "total_token_usage": {
                        "input_tokens": 300,
                        "cached_input_tokens": 100,
                        "output_tokens": 30,
                    }
                },
            },
        },
    ]
    before = {"gpt-5-codex": {"input": 150, "output": 10, "cache_read": 50, "cache_creation": 0}}
    usage, now = CODEX.phase_usage(None, entries, before)
    assert usage["tokens"] == {"input": 50, "output": 20, "cache_read": 50, "cache_creation": 0}
    assert now["gpt-5-codex"]["input"] == 200 and usage["cost_source"] == "transcript"


def test_codex_home_closes_the_web_search_and_names_the_endpoint():
    closed = config_toml("http://127.0.0.1:9/v1", web_tools=False, retries=0)
    assert 'web_search = "disabled"' in closed and 'wire_api = "responses"' in closed
    assert 'base_url = "http://127.0.0.1:9/v1"' in closed and "stream_max_retries = 0" in closed
    assert "[analytics]\nenabled = false" in closed
    assert 'web_search = "live"' in config_toml("x", web_tools=True)


def test_gemini_reads_its_result_and_its_errors():
    result = GEMINI.parse_result(GEMINI_OK)
    assert (result["session_id"], result["is_error"], result["num_turns"]) == (
        "edcb4830-1903-4ed6-b5b7-50a1b1536745",
        False,
        2,
    )
    assert GEMINI.classify(result, 0) == ("completed", "")
    usage, _ = GEMINI.phase_usage(result, [], {})
    assert usage["tokens"] == {
        "input": 24240 - 11922,
        "output": 33 + 6,
        "cache_read": 11922,
        "cache_creation": 0,
    }
    bad = GEMINI.parse_result(GEMINI_BAD_KEY)
    assert bad["api_error_status"] == 400 and GEMINI.classify(bad, 144)[0] == base.AUTH
    assert GEMINI.classify(GEMINI.parse_result(GEMINI_NO_AUTH), 41)[0] == base.AUTH
    overloaded = GEMINI_NO_AUTH.replace(
        '"Invalid auth method selected.", "code": 41',
        '"The model is overloaded. (503)", "code": 503',
    )
    assert GEMINI.classify(GEMINI.parse_result(overloaded), 1)[0] == "infra_error"


def test_gemini_settings_close_its_web_tools():
    closed = settings(web_tools=False, login=False, retries=0)
    assert closed["tools"] == {"exclude": ["google_web_search", "web_fetch"]}
    assert closed["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert closed["general"]["maxAttempts"] == 1
    assert "tools" not in settings(web_tools=True, login=True)


def test_every_programs_own_folder_stays_out_of_the_patch():
    from nginx_eval.workspace.stage import HARNESS_FILES

    assert all(f"{path}/" in HARNESS_FILES for p in registry.programs() for path in p.own_paths)


def test_each_program_asks_for_its_key_with_a_request_that_costs_nothing():
    env = {
        "ANTHROPIC_API_KEY": "a",
        "OPENAI_API_KEY": "o",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "GEMINI_API_KEY": "g",
    }
    assert [p.key_probe(env) for p in registry.programs()] == [
        (
            "https://api.anthropic.com/v1/models",
            {"x-api-key": "a", "anthropic-version": "2023-06-01"},
        ),
        ("http://127.0.0.1:9/v1/models", {"Authorization": "Bearer o"}),
        ("https://generativelanguage.googleapis.com/v1beta/models", {"x-goog-api-key": "g"}),
    ]
    assert [p.key_probe({}) for p in registry.programs()] == [None, None, None]
