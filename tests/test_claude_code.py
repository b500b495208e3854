"""claude_code.py and transcript/files.py on what the real Claude Code CLI printed and wrote
against the Anthropic stand-in (tests/claude_captures.py): result JSON, costs, sessions,
transcripts, slash commands and the status of a phase. And, on the same captures, what the CLI
itself prints, exits with, sends and keeps in those situations (as tests/test_claude_cli.py
does for the others): --continue here and elsewhere, a subagent on another model, a 401 the API
says not to retry, a bad key, a refused connection, an error that persists after the CLI's
retries and one that clears on them, a run killed at its time limit, an undefined slash
command and one defined in the workspace or the config directory."""

import json
import os
import signal

import claude_cli
import pytest
from anthropic_standin import DONE_TEXT, Fault, StandIn, call, say
from claude_captures import Recorder
from claude_cli import SONNET, USAGE_KEYS, sonnet_cost, summed

from nginx_eval.agent.programs import base
from nginx_eval.agent.programs import claude as cc
from nginx_eval.core import outcomes
from nginx_eval.transcript import files as ct

NO_RETRIES = {"CLAUDE_CODE_MAX_RETRIES": "0"}
TWO_RETRIES = {"CLAUDE_CODE_MAX_RETRIES": "2"}
PERSISTING = (500, 529, 429)
SLASH_COMMAND = "Fix the issue FIXCMD-9 with $ARGUMENTS.\n"
SCRIPT = {
    "MAIN-SUB": [
        [
            say("Looking."),
            call(
                "Agent",
                description="look around",
                prompt="Please do SUBTASK-7",
                subagent_type="general-purpose",
                model="haiku",
                run_in_background=False,
            ),
        ],
        [call("Bash", command="echo main > main.txt")],
        [say("Main done.")],
    ],
    "SUBTASK-7": [[call("Bash", command="echo from the subagent > sub.txt")], [say("Sub done.")]],
    "NEXT-22": [[call("Bash", command="cat main.txt > next.txt")], [say("Next done.")]],
    "SLOW-555": [[call("Bash", command="echo one")], [say("never")]],
    "FIXCMD-9": [[call("Bash", command="echo fixed > fixed.txt")], [say("Fixed via the command.")]],
    "LONG-6666": [[say("A long way.")]],
}


@pytest.fixture(scope="module")
def out(claude_program, tmp_path_factory):
    """Every capture these tests read, made once: {name: claude_captures.Capture}."""
    base = tmp_path_factory.mktemp("claude-output")
    captures = {}
    with StandIn(SCRIPT) as api:
        rec = Recorder(claude_program, api, base)
        ws = rec.workspace()
        captures["sub"] = rec.run("Start MAIN-SUB", cwd=ws)
        # Its first request meets a 500 twice: the CLI's own default retries clear it.
        api.faults = [Fault(status=500, times=2, marker="NEXT-22", turn=0)]
        captures["continued"] = rec.run("Now NEXT-22", "--continue", cwd=ws)
        api.faults = [Fault(status=500)]
        captures["continued_500"] = rec.run("Then THIRD-3333", "--continue", cwd=ws, env=NO_RETRIES)
        # An error that persists: CLAUDE_CODE_MAX_RETRIES=2, three requests in ~2.5 s instead
        # of 11 over ~3 minutes.
        for status in PERSISTING:
            api.faults = [Fault(status=status)]
            captures[f"api_{status}"] = rec.run("go", cwd=rec.workspace(), env=TWO_RETRIES)
        api.faults = [Fault(status=401, should_retry=False)]
        captures["auth_401"] = rec.run("go", cwd=rec.workspace())
        api.faults = []
        # One retry: a bare 401 is retried like a 5xx.
        captures["bad_key"] = rec.run(
            "go",
            cwd=rec.workspace(),
            env={"CLAUDE_CODE_MAX_RETRIES": "1", "ANTHROPIC_API_KEY": "sk-ant-bad"},
        )
        # No key and no login: answered at once, without a request.
        captures["no_login"] = rec.run(
            "go", cwd=rec.workspace(), env=dict(NO_RETRIES, ANTHROPIC_API_KEY="")
        )
        captures["plain_slash"] = rec.run("/fix-issue .issue.md", cwd=rec.workspace())
        # The command in the workspace, then (defined after the captures that need it
        # undefined) in the config directory.
        slash_ws = rec.workspace()
        for where, commands in (
            ("slash", slash_ws / ".claude" / "commands"),
            ("slash_config", rec.config / "commands"),
        ):
            commands.mkdir(parents=True)
            (commands / "fix-issue.md").write_text(SLASH_COMMAND)
            cwd = slash_ws if where == "slash" else rec.workspace()
            captures[where] = rec.run("/fix-issue these words", cwd=cwd)
        # A --continue where no session was: also the workspace whose path is past 200
        # characters.
        captures["lost"] = captures["long"] = rec.run(
            "More LONG-6666", "--continue", cwd=rec.workspace("x" * 150 + "/y_" * 40)
        )
        api.faults = [Fault(delay=60, marker="SLOW-555", turn=1)]
        captures["term"] = rec.killed("go SLOW-555", signal.SIGTERM, cwd=rec.workspace())
        captures["kill"] = rec.killed("go SLOW-555", signal.SIGKILL, cwd=rec.workspace())
    captures["refused"] = rec.run("go", cwd=rec.workspace(), env=NO_RETRIES)  # API is gone
    captures["config"] = rec.config
    return captures


def tokens(usages):
    billed = summed(usages)
    return {t: billed[k] for t, k in cc.USAGE_KEYS.items()}


def test_the_result_json_is_read_whole_and_as_a_pretty_printed_document(out):
    stdout = out["sub"].run.stdout
    assert cc.parse_result(stdout) == json.loads(stdout)
    assert cc.parse_result(json.dumps(json.loads(stdout), indent=2)) == json.loads(stdout)
    assert cc.parse_result(out["term"].run.stdout) is None  # killed: no JSON at all
    assert cc.parse_result(out["kill"].run.stdout) is None


def test_result_fields(out):
    fields = cc.result_fields(out["sub"].result)
    assert fields == {
        "session_id": out["sub"].requests[-1]["headers"]["x-claude-code-session-id"],
        "is_error": False,
        "api_error_status": None,
        "terminal_reason": "completed",
        "permission_denials": [],
        "result": "Main done.",
        "num_turns": 3,
    }
    error = cc.result_fields(out["api_500"].result)
    assert (error["is_error"], error["api_error_status"], error["terminal_reason"]) == (
        True,
        500,
        "api_error",
    )
    assert error["result"].startswith("API Error: 500 stand-in fault 500.")
    assert cc.result_fields(None)["session_id"] is None


def test_a_phase_costs_every_model_of_model_usage_subagents_included(out):
    sub = out["sub"]
    usage, cumulative = cc.phase_usage(sub.result, sub.entries, {})
    haiku = next(q["model"] for q in sub.requests if q["marker"] == "SUBTASK-7")
    assert set(usage["models"]) == {SONNET, haiku} and usage["cost_source"] == "result"
    assert usage["tokens"] == tokens(sub.usages())  # main and subagent
    assert usage["models"][haiku] == dict(
        tokens(sub.usages("SUBTASK-7")), cost_usd=usage["models"][haiku]["cost_usd"]
    )
    assert usage["cost_usd"] == pytest.approx(sub.result["total_cost_usd"], rel=1e-9)
    # `usage` alone would have missed the subagent.
    assert sub.result["usage"]["input_tokens"] < usage["tokens"]["input"]
    assert cumulative == cc.models_of(sub.result["modelUsage"])


def test_with_continue_a_phase_pays_its_own_requests_not_the_sessions(out):
    _, after_sub = cc.phase_usage(out["sub"].result, out["sub"].entries, {})
    continued = out["continued"]
    usage, after = cc.phase_usage(continued.result, continued.entries, after_sub)
    assert continued.result["session_id"] == out["sub"].result["session_id"]
    assert list(usage["models"]) == [SONNET]  # the subagent's model paid nothing new
    assert usage["tokens"] == tokens(continued.usages())
    assert usage["cost_usd"] == pytest.approx(sonnet_cost(continued.usages()), rel=1e-9)
    # An error later in the session repeats the session's figures: it cost nothing new.
    failed = out["continued_500"]
    assert failed.result["total_cost_usd"] == continued.result["total_cost_usd"]
    usage, _ = cc.phase_usage(failed.result, failed.entries, after)
    assert (usage["cost_usd"], usage["tokens"], usage["models"]) == (
        0,
        dict.fromkeys(base.TOKENS, 0),
        {},
    )


def test_a_killed_phase_is_priced_from_its_transcript(out):
    term = out["term"]
    (first,) = term.usages()[:1]
    assert len(term.usages()) == 1  # the second answer never came
    usage, _ = cc.phase_usage(None, term.entries, {})
    assert usage["cost_source"] == "transcript" and usage["tokens"] == tokens([first])
    assert usage["cost_usd"] == pytest.approx(sonnet_cost([first]), rel=1e-9)
    assert ct.session_of(term.entries) == term.requests[-1]["headers"]["x-claude-code-session-id"]
    # SIGKILL: no cost-state line, so the tokens only.
    kill = out["kill"]
    usage, _ = cc.phase_usage(None, kill.entries, {})
    assert usage["tokens"] == tokens(kill.usages()[:1]) and usage["cost_usd"] is None
    assert usage["models"] == {SONNET: dict(tokens(kill.usages()[:1]), cost_usd=None)}
    assert cc.phase_usage(None, [], {})[0] == {
        "cost_usd": None,
        "tokens": None,
        "models": {},
        "cost_source": None,
    }


@pytest.mark.parametrize(
    "name, status, text",
    [
        ("sub", outcomes.COMPLETED, ""),
        ("api_500", outcomes.INFRA_ERROR, "exit code 1: API Error: 500 stand-in fault 500."),
        ("refused", outcomes.INFRA_ERROR, "exit code 1: API Error: Connection refused"),
        ("auth_401", base.AUTH, "exit code 1: Failed to authenticate. API Error: 401"),
        ("bad_key", base.AUTH, "exit code 1: Invalid API key"),
        ("no_login", base.AUTH, "exit code 1: Not logged in"),
        ("plain_slash", outcomes.COMPLETED, ""),
    ],
)
def test_classify_reads_the_cli_result(out, name, status, text):
    capture = out[name]
    got_status, reason = cc.classify(capture.result, capture.run.exit_code)
    assert got_status == status and reason.startswith(text), reason
    if name == "refused":
        assert "ECONNREFUSED" in reason


def test_credentials_are_checked_before_any_agent_starts(tmp_path):
    config = tmp_path / "config"
    config.mkdir()
    bare = {"CLAUDE_CONFIG_DIR": str(config)}
    assert "set ANTHROPIC_API_KEY" in cc.credentials_problem(bare)
    assert cc.credentials_problem(dict(bare, ANTHROPIC_API_KEY="sk-ant-x")) is None
    (config / ".credentials.json").write_text("{}")  # a login
    assert cc.credentials_problem(bare) is None


def test_an_agent_that_prints_no_result_is_judged_by_its_exit_code():
    assert cc.classify(None, 0) == (outcomes.COMPLETED, "")
    assert cc.classify(None, 127) == (outcomes.ERROR, "command not found (exit 127)")
    assert cc.classify(None, 3) == (outcomes.FAILED, "exit code 3")
    assert cc.phase_status(True, 4.0, None, None, [], None, None) == (
        outcomes.TIMEOUT,
        "timed out after 4 s",
    )


def test_a_slash_command_counts_only_when_the_cli_expanded_it(out):
    assert cc.slash_command("/fix-issue .issue.md\n") == "fix-issue"
    assert cc.slash_command("/frontend:test") == "frontend:test"
    assert cc.slash_command("Fix the /bug") is None
    plain, slash = out["plain_slash"], out["slash"]
    # The pinned CLI sends an undefined command to the model as text: one paid turn.
    assert plain.result["num_turns"] == 1 and plain.result["total_cost_usd"] > 0
    assert not ct.command_ran(plain.entries, "fix-issue")
    assert cc.phase_status(False, 60, 0, plain.result, plain.entries, "fix-issue", None) == (
        outcomes.ERROR,
        "the CLI did not run /fix-issue: no <command-name>/fix-issue</command-name> "
        "in its transcript",
    )
    assert ct.command_ran(slash.entries, "fix-issue")
    assert cc.phase_status(False, 60, 0, slash.result, slash.entries, "fix-issue", None) == (
        outcomes.COMPLETED,
        "",
    )


def test_where_a_command_is_defined(tmp_path):
    ws, config = tmp_path / "ws", tmp_path / "config"
    assert cc.command_file("fix-issue", ws, config) is None
    assert cc.undefined_command("fix-issue", ws, config) == (
        f"/fix-issue is not defined (no fix-issue.md in the workspace's .claude/commands/ or "
        f"in {config}/commands/); not run, since the CLI would send it to the model as plain "
        f"text"
    )
    (config / "commands" / "frontend").mkdir(parents=True)
    (config / "commands" / "frontend" / "test.md").write_text("x")
    assert cc.command_file("frontend:test", ws, config) == config / "commands/frontend/test.md"
    (ws / ".claude" / "commands").mkdir(parents=True)
    (ws / ".claude" / "commands" / "fix-issue.md").write_text("x")
    assert cc.undefined_command("fix-issue", ws, config) is None


def test_a_lost_continue_is_told_by_its_session_id(out):
    lost, sub = out["lost"], out["sub"]
    assert lost.run.exit_code == 0 and lost.result["is_error"] is False  # silently new
    assert cc.continues_session("claude --allowedTools Read --continue -p {prompt}")
    assert cc.continues_session("claude -c -p {prompt}")
    assert not cc.continues_session("claude -p '--continue is a word of the prompt'")
    assert base.session_problem(True, sub.result["session_id"], lost.result["session_id"]) == (
        f"--continue started session {lost.result['session_id']} instead of continuing "
        f"{sub.result['session_id']}: the earlier phases' conversation was lost"
    )
    assert (
        base.session_problem(True, sub.result["session_id"], out["continued"].result["session_id"])
        is None
    )
    assert base.session_problem(False, sub.result["session_id"], lost.result["session_id"]) is None


def test_transcripts_are_found_for_long_workspace_paths_too(out):
    long = out["long"]
    assert len(str(long.workspace)) > 200 and long.entries
    assert ct.session_of(long.entries) == long.result["session_id"]
    assert "*" in ct.project_glob(long.workspace)
    # A phase's lines are what it added: the continued phase's do not repeat the first's.
    assert ct.session_of(out["continued"].entries) == out["sub"].result["session_id"]
    first_ids = {e.get("uuid") for e in out["sub"].entries}
    assert not first_ids & {e.get("uuid") for e in out["continued"].entries} - {None}
    assert any(e.get("agentId") for e in out["sub"].entries)  # its subagent's lines
    assert ct.config_dir({"CLAUDE_CONFIG_DIR": "/x"}) == ct.Path("/x")
    assert ct.config_dir({"HOME": "/home/u"}) == ct.Path("/home/u/.claude")


def test_the_version_is_read_once_per_program_file(claude_program, tmp_path):
    cache = tmp_path / "versions"
    link = tmp_path / "claude"
    link.symlink_to(claude_program)
    assert cc.is_claude_code(str(link)) and cc.is_claude_code(claude_program)
    version = cc.program_version(str(link), dict(os.environ), cache)
    assert version.endswith(" (Claude Code)")
    (entry,) = cache.iterdir()
    assert json.loads(entry.read_text())["version"] == version
    # Another agent is never started to ask for its version: it may do anything.
    other = tmp_path / "agent"
    other.write_text(f"#!/bin/sh\ntouch {tmp_path}/ran\n")
    other.chmod(0o755)
    assert not cc.is_claude_code(str(other))
    assert cc.program_version(str(other), dict(os.environ), cache) is None
    assert not (tmp_path / "ran").exists()
    assert base.resolve_program("agent", {"PATH": str(tmp_path)}) == str(other)
    assert base.resolve_program("./agent", {"PATH": str(tmp_path)}) is None


# -- what the CLI itself prints, exits with, sends and keeps (issue 14), on the captures ---------


def messages(capture):
    """The capture's requests to /v1/messages."""
    return [q for q in capture.requests if q["path"] == "/v1/messages"]


def test_continue_resumes_the_session_here_and_starts_a_new_one_elsewhere(out):
    first_phase, implement, lost = out["sub"], out["continued"], out["lost"]
    assert first_phase.run.exit_code == implement.run.exit_code == 0
    assert implement.result["session_id"] == first_phase.result["session_id"]
    assert (first_phase.workspace / "next.txt").read_text() == "main\n"
    first = messages(implement)[0]["body"]["messages"]
    # The whole conversation: the prompt, three answers and the two tool results between them.
    assert "MAIN-SUB" in json.dumps(first[0]) and [m["role"] for m in first] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    # usage is this invocation's own; total_cost_usd and modelUsage are the session's so far
    # (earlier 2.1.x reported the invocation's own cost): summing the phases would count twice.
    own = implement.usages()
    assert {k: implement.result["usage"][k] for k in USAGE_KEYS} == summed(own)
    assert implement.result["total_cost_usd"] == pytest.approx(
        first_phase.result["total_cost_usd"] + sonnet_cost(own), rel=1e-9
    )
    first_tokens = first_phase.result["modelUsage"][SONNET]["inputTokens"]
    assert (
        implement.result["modelUsage"][SONNET]["inputTokens"]
        == first_tokens + summed(own)["input_tokens"]
    )
    assert lost.run.exit_code == 0 and lost.result["is_error"] is False  # silently a new one
    assert lost.result["session_id"] != first_phase.result["session_id"]
    assert len(messages(lost)[0]["body"]["messages"]) == 1


def test_a_401_the_api_says_not_to_retry_fails_at_once(out):
    capture = out["auth_401"]
    r = capture.result
    assert capture.run.exit_code == 1 and capture.run.seconds < 20
    assert (r["is_error"], r["api_error_status"], r["terminal_reason"]) == (True, 401, "api_error")
    assert r["result"] == "Failed to authenticate. API Error: 401 stand-in fault 401"
    assert len(messages(capture)) == 1


def test_a_bad_key_is_retried_like_a_5xx_when_the_api_does_not_say_otherwise(out):
    # Earlier 2.1.x failed within a second; this version retries a bare 401 (11 requests,
    # ~3 minutes) unless CLAUDE_CODE_MAX_RETRIES is set or the answer says x-should-retry: false.
    capture = out["bad_key"]
    assert capture.run.exit_code == 1 and capture.result["api_error_status"] == 401
    assert capture.result["result"] == "Invalid API key · Fix external API key"
    assert [q["status"] for q in messages(capture)] == [401, 401]


def test_a_refused_connection_is_an_api_error_without_a_status(out):
    capture = out["refused"]
    r = capture.result
    assert capture.run.exit_code == 1 and r["is_error"] is True and r["api_error_status"] is None
    assert r["terminal_reason"] == "api_error" and "ECONNREFUSED" in r["result"]


def test_a_subagent_on_another_model_shows_only_in_model_usage(out):
    sub = out["sub"]
    r = sub.result
    assert sub.run.exit_code == 0 and (sub.workspace / "sub.txt").exists()
    sub_requests = [q for q in messages(sub) if q["marker"] == "SUBTASK-7"]
    sub_model = sub_requests[0]["model"]
    assert "haiku" in sub_model and len(sub_requests) == 2
    assert set(r["modelUsage"]) == {SONNET, sub_model}
    assert {k: r["usage"][k] for k in USAGE_KEYS} == summed(sub.usages("MAIN-SUB"))  # main only
    assert (
        r["modelUsage"][sub_model]["inputTokens"]
        == summed([q["usage"] for q in sub_requests])["input_tokens"]
    )
    assert r["total_cost_usd"] == pytest.approx(
        sum(m["costUSD"] for m in r["modelUsage"].values()), rel=1e-9
    )
    assert r["subagent_stats"]["spawned"] == r["subagent_stats"]["completed"] == 1
    # The subagent keeps a transcript of its own beside the session's.
    sessions = claude_cli.project_dir(out["config"], sub.workspace) / r["session_id"]
    (sub_transcript,) = (sessions / "subagents").glob("agent-*.jsonl")
    assert set(claude_cli.transcript_usage(sub_transcript)) == {sub_model}


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["TERM", "KILL"])
def test_a_run_killed_at_its_time_limit_leaves_its_usage_in_the_transcript(out, stop):
    capture = out["term" if stop == signal.SIGTERM else "kill"]
    assert capture.run.stdout == "" and capture.run.exit_code in (-stop, 128 + stop)
    (transcript,) = claude_cli.project_dir(out["config"], capture.workspace).glob("*.jsonl")
    first = messages(capture)[0]["usage"]
    assert claude_cli.transcript_usage(transcript) == {SONNET: first}
    cost_states = [
        x
        for x in map(json.loads, transcript.read_text().splitlines())
        if x.get("type") == "cost-state"
    ]
    # SIGTERM lets it write its cost; after SIGKILL only the per-message usage is there.
    assert len(cost_states) == (1 if stop == signal.SIGTERM else 0)
    if cost_states:
        assert cost_states[0]["totalCostUSD"] == pytest.approx(sonnet_cost([first]), rel=1e-9)


def test_an_undefined_slash_command_goes_to_the_model_as_plain_text(out):
    # Earlier 2.1.x answered "Unknown command: /fix-issue" with num_turns 0 and no API call.
    plain = out["plain_slash"]
    r = plain.result
    assert plain.run.exit_code == 0 and r["is_error"] is False
    assert (r["num_turns"], r["result"]) == (1, DONE_TEXT) and r["total_cost_usd"] > 0
    (request,) = messages(plain)
    prompt = request["body"]["messages"][-1]["content"][-1]["text"]
    assert prompt == "/fix-issue .issue.md" and request["marker"] is None
    assert "<command-name>" not in json.dumps(request["body"]["messages"])


@pytest.mark.parametrize(
    "status, result",
    [
        (500, "API Error: 500 stand-in fault 500."),
        (529, "API Error: 529 stand-in fault 529."),
        (429, "API Error: Request rejected (429) · stand-in fault 429"),
    ],
    ids=["500", "529", "429"],
)
def test_an_error_that_persists_fails_after_the_cli_retries(out, status, result):
    capture = out[f"api_{status}"]  # CLAUDE_CODE_MAX_RETRIES=2
    r = capture.result
    assert capture.run.exit_code == 1
    assert (r["subtype"], r["is_error"], r["api_error_status"], r["terminal_reason"]) == (
        "success",
        True,
        status,
        "api_error",
    )
    assert r["result"].startswith(result)
    assert (r["num_turns"], r["total_cost_usd"], r["modelUsage"]) == (1, 0, {})
    assert len(messages(capture)) == 3


@pytest.mark.parametrize("where", ["config", "workspace"])
def test_a_defined_slash_command_runs_its_text(out, where):
    capture = out["slash_config" if where == "config" else "slash"]
    assert capture.run.exit_code == 0 and capture.result["num_turns"] == 2
    assert capture.result["result"] == "Fixed via the command."
    assert (capture.workspace / "fixed.txt").exists()
    sent = json.dumps(messages(capture)[0]["body"]["messages"][0])
    assert "<command-name>/fix-issue</command-name>" in sent
    assert "Fix the issue FIXCMD-9 with these words." in sent


def test_an_error_that_clears_on_retry_completes(out):
    capture = out["continued"]  # two 500s, then the CLI's own default retries went through
    assert capture.run.exit_code == 0 and capture.result["is_error"] is False
    assert capture.result["result"] == "Next done." and capture.run.seconds < 30
    assert [q["status"] for q in messages(capture)] == [500, 500, 200, 200]
    assert capture.result["total_cost_usd"] > 0
