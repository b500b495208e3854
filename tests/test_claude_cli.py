"""The real Claude Code CLI driven against the Anthropic stand-in: what it prints, exits with,
sends and keeps in each situation the harness must handle (issue 14).

These tests pin what the version setup-debian.sh installs does; where that differs from what
earlier 2.1.x versions did, the test says so. The situations tests/test_claude_code.py captures
once for its own tests (--continue here and elsewhere, a subagent on another model, a 401, a bad
key, a refused connection, an error that persists after the CLI's retries and one that clears
on them, a run killed at its time limit, an undefined slash command and one defined in the
workspace or the config directory) are checked there, on those captures.
"""

import json
import re
import subprocess

import claude_cli
import pytest
from anthropic_standin import Fault, call, say
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
