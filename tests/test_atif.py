"""transcript/atif.py's trajectories that no Claude Code transcript makes: a phase whose program
left none (another agent, or a phase not run), a conversation of another program's turns, and
an attempt of no phase; each valid by harbor's own validator. The trajectories of real Claude
Code transcripts, metrics from the proxy included, are tested in test_meter_claude.py."""

from harbor.utils.trajectory_validator import TrajectoryValidator

from nginx_eval.transcript.atif import Conversation, Turn, attempt_trajectory

AGENT = {"name": "nginx-eval mode m", "version": "1.0", "model_name": None}


def valid(trajectory):
    validator = TrajectoryValidator()
    assert validator.validate(trajectory), validator.get_errors()
    return trajectory


def test_a_phase_without_a_transcript_is_its_prompt():
    root = valid(
        attempt_trajectory(
            "r/m/t/attempt-1",
            AGENT,
            [{"name": "solve", "status": "completed", "prompt": "Fix it.", "conversation": None}],
            [],
        )
    )
    assert "model_name" not in root["agent"]
    (phase,) = root["subagent_trajectories"]
    assert phase["steps"] == [{"step_id": 1, "source": "user", "message": "Fix it."}]
    assert root["final_metrics"]["total_cost_usd"] == 0


def test_another_programs_turns_take_the_proxys_metrics():
    tokens = {"input": 10, "output": 5, "cache_read": 90, "cache_write": 0, "reasoning": 2}
    conversation = Conversation(
        "codex",
        "thread-1",
        [
            Turn("user", "Fix it."),
            Turn(
                "agent",
                "",
                model="gpt-5",
                response_id="resp_1",
                tool_calls=[{"id": "c1", "name": "exec_command", "arguments": {"cmd": "make"}}],
                results=[{"call_id": "c1", "content": "ok", "subagent": None}],
            ),
            Turn("agent", "Done.", model="gpt-5", response_id="resp_2"),
        ],
    )
    calls = [
        {"response_id": "resp_1", "tokens": tokens, "cost_usd": 0.5, "call": 1},
        {"response_id": None, "tokens": None, "cost_usd": None, "call": 2},  # a 429, retried
        {"response_id": "resp_2", "tokens": tokens, "cost_usd": 0.25, "call": 3},
    ]
    root = valid(
        attempt_trajectory(
            "r/m/t/attempt-2",
            AGENT,
            [{"name": "solve", "status": "completed", "conversation": conversation}],
            calls,
        )
    )
    (phase,) = root["subagent_trajectories"]
    assert phase["agent"] == {"name": "codex", "version": "1.0", "model_name": "gpt-5"}
    step = phase["steps"][1]
    assert step["metrics"]["prompt_tokens"] == 100 and step["metrics"]["cached_tokens"] == 90
    assert step["observation"]["results"] == [{"content": "ok", "source_call_id": "c1"}]
    assert phase["final_metrics"]["total_cost_usd"] == 0.75
    assert root["final_metrics"]["extra"] == {"calls": 3, "billed_calls": 2, "unpriced_calls": 0}


def test_an_attempt_of_no_phase_is_still_a_trajectory():
    root = valid(attempt_trajectory("r/m/t/attempt-1", AGENT, [], []))
    assert root["steps"] == [{"step_id": 1, "source": "system", "message": "no phase ran"}]
