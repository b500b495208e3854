"""The real Claude Code CLI driven against the Anthropic stand-in: what it prints, exits with,
sends and keeps in each situation the harness must handle (issue 14).

These tests pin what the version setup-debian.sh installs does; where that differs from what
earlier 2.1.x versions did, the test says so.
"""

import json
import os
import re
import signal
import subprocess
import time

import claude_cli
import pytest
from anthropic_standin import DONE_TEXT, Fault, call, say
from claude_cli import SONNET, USAGE_KEYS, sonnet_cost, summed

SESSION_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_a_missing_cli_is_a_skip_only_where_npm_cannot_fetch_it(tmp_path, monkeypatch):
    monkeypatch.delenv("NGINX_EVAL_CLAUDE", raising=False)
    monkeypatch.setenv("NGINX_EVAL_CLAUDE_PREFIX", str(tmp_path / "prefix"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    assert claude_cli.find_or_install() == (
        None,
        "the Claude Code CLI is not installed, and npm is not either",
    )
    npm = bin_dir / "npm"  # an npm whose registry is out of reach
    npm.write_text("#!/bin/sh\necho 'npm error code ENOTFOUND' >&2\nexit 1\n")
    npm.chmod(0o755)
    version = claude_cli.setup_setting("CLAUDE_CODE_VERSION")
    assert claude_cli.find_or_install() == (
        None,
        (
            "the Claude Code CLI is not installed, and npm cannot fetch "
            f"@anthropic-ai/claude-code@{version}: npm error code ENOTFOUND"
        ),
    )
    monkeypatch.setenv("NGINX_EVAL_CLAUDE", str(tmp_path / "no-such-claude"))
    with pytest.raises(RuntimeError, match="NGINX_EVAL_CLAUDE=.* is not a program"):
        claude_cli.find_or_install()


class Cli:
    """The CLI, the stand-in, a git workspace and a config directory of one test."""

    def __init__(self, program, api, base):
        self.program, self.api = program, api
        self.config = base / "claude-config"
        self.config.mkdir()
        self.ws = self.workspace(base / "ws_one.x")

    @staticmethod
    def workspace(path):
        path.mkdir()
        subprocess.run(["git", "init", "-q", str(path)], check=True)
        (path / "a.txt").write_text("hello\n")
        return path

    def run(self, prompt, *flags, cwd=None, env=None, **kw):
        environment = claude_cli.environment(self.api, self.config, **(env or {}))
        return claude_cli.run(self.program, environment, cwd or self.ws, prompt, *flags, **kw)

    def transcript(self, session_id, cwd=None):
        return claude_cli.project_dir(self.config, cwd or self.ws) / f"{session_id}.jsonl"


@pytest.fixture
def cli(claude_program, anthropic_api, tmp_path):
    return Cli(claude_program, anthropic_api, tmp_path)


def test_version_is_the_pinned_one_where_setup_installs_it(claude_program):
    out = subprocess.run([claude_program, "--version"], capture_output=True, text=True)
    assert re.fullmatch(r"\d+\.\d+\.\d+ \(Claude Code\)\n", out.stdout)
    if claude_program.startswith(str(claude_cli.install_prefix()) + "/"):
        assert out.stdout.split()[0] == claude_cli.setup_setting("CLAUDE_CODE_VERSION")


def test_scripted_edit_and_bash_change_the_workspace_and_the_json_adds_up(cli):
    a = cli.ws / "a.txt"
    cli.api.script = {
        "FIX-EDIT": [
            [say("Reading."), call("Read", file_path=str(a))],
            [call("Edit", file_path=str(a), old_string="hello", new_string="bye")],
            [call("Bash", command="echo built > b.txt")],
            [say("All done.")],
        ]
    }
    run = cli.run("Please fix FIX-EDIT")
    assert run.exit_code == 0, run.stderr
    assert a.read_text() == "bye\n" and (cli.ws / "b.txt").read_text() == "built\n"
    r = run.result
    assert (r["type"], r["subtype"], r["is_error"], r["api_error_status"]) == (
        "result",
        "success",
        False,
        None,
    )
    assert (r["num_turns"], r["result"], r["stop_reason"], r["terminal_reason"]) == (
        4,
        "All done.",
        "end_turn",
        "completed",
    )
    assert r["permission_denials"] == [] and SESSION_ID.match(r["session_id"])
    requests = cli.api.messages_requests("FIX-EDIT")
    assert [q["turn"] for q in requests] == [0, 1, 2, 3]
    assert all(q["query"] == "beta=true" and q["stream"] and q["model"] == SONNET for q in requests)
    headers = requests[0]["headers"]
    assert headers["x-api-key"] == cli.api.api_key
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["user-agent"].startswith("claude-cli/")
    assert headers["x-claude-code-session-id"] == r["session_id"]
    usages = [q["usage"] for q in requests]
    assert {k: r["usage"][k] for k in USAGE_KEYS} == summed(usages)
    assert list(r["modelUsage"]) == [SONNET]
    per_model = r["modelUsage"][SONNET]
    assert (
        per_model["inputTokens"],
        per_model["outputTokens"],
        per_model["cacheReadInputTokens"],
        per_model["cacheCreationInputTokens"],
    ) == tuple(
        summed(usages)[k]
        for k in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        )
    )
    assert r["total_cost_usd"] == pytest.approx(sonnet_cost(usages), rel=1e-9)
    assert per_model["costUSD"] == pytest.approx(r["total_cost_usd"], rel=1e-9)
    # The transcript: one line per content block, usage on each, counted once per message.
    transcript = cli.transcript(r["session_id"])
    assert claude_cli.transcript_usage(transcript) == {SONNET: summed(usages)}
    lines = [json.loads(x) for x in transcript.read_text().splitlines()]
    assert sum(1 for x in lines if x.get("type") == "assistant") == 5  # 4 messages, 5 blocks
    cost_state = [x for x in lines if x.get("type") == "cost-state"]
    assert cost_state[-1]["totalCostUSD"] == r["total_cost_usd"]


def test_continue_resumes_the_session_here_and_starts_a_new_one_elsewhere(cli, tmp_path):
    cli.api.script = {
        "PLAN-1": [
            [call("Write", file_path=str(cli.ws / "plan.md"), content="the plan\n")],
            [say("Planned.")],
        ],
        "IMPL-2": [[call("Bash", command="cat plan.md > impl.txt")], [say("Implemented.")]],
    }
    plan = cli.run("Plan it: PLAN-1")
    implement = cli.run("Now implement IMPL-2", "--continue")
    assert plan.exit_code == implement.exit_code == 0
    assert implement.result["session_id"] == plan.result["session_id"]
    assert (cli.ws / "impl.txt").read_text() == "the plan\n"
    first = cli.api.messages_requests("IMPL-2")[0]["body"]["messages"]
    assert "PLAN-1" in json.dumps(first[0]) and [m["role"] for m in first] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    # usage is this invocation's own; total_cost_usd and modelUsage are the session's so far
    # (earlier 2.1.x reported the invocation's own cost): summing the phases would count twice.
    own = [q["usage"] for q in cli.api.messages_requests("IMPL-2")]
    assert {k: implement.result["usage"][k] for k in USAGE_KEYS} == summed(own)
    assert implement.result["total_cost_usd"] == pytest.approx(
        plan.result["total_cost_usd"] + sonnet_cost(own), rel=1e-9
    )
    plan_tokens = plan.result["modelUsage"][SONNET]["inputTokens"]
    assert (
        implement.result["modelUsage"][SONNET]["inputTokens"]
        == plan_tokens + summed(own)["input_tokens"]
    )
    elsewhere = Cli.workspace(tmp_path / "elsewhere")
    lost = cli.run("Now implement IMPL-2", "--continue", cwd=elsewhere)
    assert lost.exit_code == 0 and lost.result["is_error"] is False  # silently a new one
    assert lost.result["session_id"] != plan.result["session_id"]
    assert len(cli.api.messages_requests("IMPL-2")[-2]["body"]["messages"]) == 1


@pytest.mark.parametrize(
    "status, result",
    [
        (500, "API Error: 500 stand-in fault 500."),
        (529, "API Error: 529 stand-in fault 529."),
        (429, "API Error: Request rejected (429) · stand-in fault 429"),
    ],
    ids=["500", "529", "429"],
)
def test_an_error_that_persists_fails_after_the_cli_retries(cli, status, result):
    cli.api.faults = [Fault(status=status)]
    # CLAUDE_CODE_MAX_RETRIES=2: three requests in ~2.5 s, instead of 11 over ~3 minutes.
    run = cli.run("go", env={"CLAUDE_CODE_MAX_RETRIES": "2"})
    r = run.result
    assert run.exit_code == 1
    assert (r["subtype"], r["is_error"], r["api_error_status"], r["terminal_reason"]) == (
        "success",
        True,
        status,
        "api_error",
    )
    assert r["result"].startswith(result)
    assert (r["num_turns"], r["total_cost_usd"], r["modelUsage"]) == (1, 0, {})
    assert len(cli.api.messages_requests()) == 3


def test_an_error_that_clears_on_retry_completes(cli):
    cli.api.script = {"RETRY-1": [[say("fine")]]}
    cli.api.faults = [Fault(status=500, times=2)]
    run = cli.run("go RETRY-1")  # the CLI's own default retries
    assert run.exit_code == 0 and run.result["is_error"] is False
    assert run.result["result"] == "fine" and run.seconds < 30
    assert [q["status"] for q in cli.api.messages_requests()] == [500, 500, 200]
    assert run.result["total_cost_usd"] > 0


def test_a_refused_connection_is_an_api_error_without_a_status(cli):
    cli.api.stop()
    run = cli.run("go", env={"CLAUDE_CODE_MAX_RETRIES": "1"})
    r = run.result
    assert run.exit_code == 1 and r["is_error"] is True and r["api_error_status"] is None
    assert r["terminal_reason"] == "api_error" and "ECONNREFUSED" in r["result"]


def test_a_401_the_api_says_not_to_retry_fails_at_once(cli):
    cli.api.faults = [Fault(status=401, should_retry=False)]
    run = cli.run("go")
    r = run.result
    assert run.exit_code == 1 and run.seconds < 20
    assert (r["is_error"], r["api_error_status"], r["terminal_reason"]) == (True, 401, "api_error")
    assert r["result"] == "Failed to authenticate. API Error: 401 stand-in fault 401"
    assert len(cli.api.messages_requests()) == 1


def test_a_bad_key_is_retried_like_a_5xx_when_the_api_does_not_say_otherwise(cli):
    # Earlier 2.1.x failed within a second; this version retries a bare 401 (11 requests,
    # ~3 minutes) unless CLAUDE_CODE_MAX_RETRIES is set or the answer says x-should-retry: false.
    run = cli.run("go", env={"CLAUDE_CODE_MAX_RETRIES": "1", "ANTHROPIC_API_KEY": "sk-ant-bad"})
    assert run.exit_code == 1 and run.result["api_error_status"] == 401
    assert run.result["result"] == "Invalid API key · Fix external API key"
    assert [q["status"] for q in cli.api.messages_requests()] == [401, 401]


def test_mid_stream_errors_are_retried_and_end_in_a_non_streaming_request(cli):
    cli.api.script = {"CUT-1": [[say("whole")]]}
    cli.api.faults = [Fault(mid_stream="overloaded_error", times=2)]
    retried = cli.run("go CUT-1")
    assert retried.exit_code == 0 and retried.result["result"] == "whole"
    assert [q["stream"] for q in cli.api.messages_requests()] == [True, True, True]
    cli.api.faults = [Fault(mid_stream="api_error")]
    fallback = cli.run("go CUT-1")
    assert fallback.exit_code == 0 and fallback.result["result"] == "whole"
    assert [q["stream"] for q in cli.api.messages_requests()][3:] == [True, False]


def test_a_subagent_on_another_model_shows_only_in_model_usage(cli):
    cli.api.script = {
        "MAIN-SUB": [
            [
                call(
                    "Agent",
                    description="look around",
                    prompt="Please do SUBTASK-7",
                    subagent_type="general-purpose",
                    model="haiku",
                    run_in_background=False,
                )
            ],
            [say("Main done.")],
        ],
        "SUBTASK-7": [[call("Bash", command="echo sub > sub.txt")], [say("Sub done.")]],
    }
    run = cli.run("Start MAIN-SUB")
    r = run.result
    assert run.exit_code == 0 and (cli.ws / "sub.txt").exists()
    sub_requests = cli.api.messages_requests("SUBTASK-7")
    sub_model = sub_requests[0]["model"]
    assert "haiku" in sub_model and len(sub_requests) == 2
    assert set(r["modelUsage"]) == {SONNET, sub_model}
    main = [q["usage"] for q in cli.api.messages_requests("MAIN-SUB")]
    assert {k: r["usage"][k] for k in USAGE_KEYS} == summed(main)  # usage: main model only
    assert (
        r["modelUsage"][sub_model]["inputTokens"]
        == summed([q["usage"] for q in sub_requests])["input_tokens"]
    )
    assert r["total_cost_usd"] == pytest.approx(
        sum(m["costUSD"] for m in r["modelUsage"].values()), rel=1e-9
    )
    assert r["subagent_stats"]["spawned"] == r["subagent_stats"]["completed"] == 1
    # The subagent keeps a transcript of its own beside the session's.
    sessions = cli.transcript(r["session_id"]).with_suffix("")
    (sub_transcript,) = (sessions / "subagents").glob("agent-*.jsonl")
    assert set(claude_cli.transcript_usage(sub_transcript)) == {sub_model}


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["TERM", "KILL"])
def test_a_run_killed_at_its_time_limit_leaves_its_usage_in_the_transcript(cli, stop):
    cli.api.script = {"SLOW-3": [[call("Bash", command="echo one > one.txt")], [say("never")]]}
    cli.api.faults = [Fault(delay=60, marker="SLOW-3", turn=1)]
    environment = claude_cli.environment(cli.api, cli.config)
    proc = subprocess.Popen(
        [
            cli.program,
            "-p",
            "go SLOW-3",
            "--output-format",
            "json",
            "--allowedTools",
            claude_cli.TOOLS,
            "--model",
            SONNET,
        ],
        cwd=cli.ws,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while len(cli.api.messages_requests()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(proc.pid, stop)
    stdout, _ = proc.communicate(timeout=30)
    assert stdout == "" and proc.returncode in (-stop, 128 + stop)
    (transcript,) = claude_cli.project_dir(cli.config, cli.ws).glob("*.jsonl")
    first = cli.api.messages_requests()[0]["usage"]
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


def test_an_undefined_slash_command_goes_to_the_model_as_plain_text(cli):
    # Earlier 2.1.x answered "Unknown command: /fix-issue" with num_turns 0 and no API call.
    run = cli.run("/fix-issue")
    r = run.result
    assert run.exit_code == 0 and r["is_error"] is False
    assert (r["num_turns"], r["result"]) == (1, DONE_TEXT) and r["total_cost_usd"] > 0
    (request,) = cli.api.messages_requests()
    prompt = request["body"]["messages"][-1]["content"][-1]["text"]
    assert prompt == "/fix-issue" and request["marker"] is None
    assert "<command-name>" not in json.dumps(request["body"]["messages"])


@pytest.mark.parametrize("where", ["config", "workspace"])
def test_a_defined_slash_command_runs_its_text(cli, where):
    commands = cli.config / "commands" if where == "config" else cli.ws / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "fix-issue.md").write_text("Fix the issue FIXCMD-9 with $ARGUMENTS.\n")
    cli.api.script = {
        "FIXCMD-9": [
            [call("Bash", command="echo fixed > fixed.txt")],
            [say("Fixed via the command.")],
        ]
    }
    run = cli.run("/fix-issue these words")
    assert run.exit_code == 0 and run.result["num_turns"] == 2
    assert run.result["result"] == "Fixed via the command."
    assert (cli.ws / "fixed.txt").exists()
    sent = json.dumps(cli.api.messages_requests("FIXCMD-9")[0]["body"]["messages"][0])
    assert "<command-name>/fix-issue</command-name>" in sent
    assert "Fix the issue FIXCMD-9 with these words." in sent
