"""The agent's home end to end (issue 36): the real Claude Code CLI in the shipped modes against
the stand-in API (tests/anthropic_standin.py), with an operator whose own Claude Code
configuration, in the CLAUDE_CONFIG_DIR of the test environment and in HOME's ~/.claude and
~/.claude.json, holds a memory line, a UserPromptSubmit hook, a settings variable, an MCP server
and a subagent. None of it may reach the model or the agent's shell; a mode's own agent_home
file does. And the web tools: closed on the command line of an isolated mode, open (and marked)
with web_tools = true.
"""

import json
import shutil

import pytest
from anthropic_standin import call
from claude_cli import SONNET
from conftest import SOURCE_ROOT
from test_agent_claude import (
    COMMAND,
    IMPLEMENT,
    PLAN,
    RAW,
    SCRIPT,
    VERIFY,
    ClaudeProject,
    needs_srt,
)

pytestmark = needs_srt

NO_WEB = "--disallowedTools=WebSearch,WebFetch"
# What the operator's configuration would put in front of the model or into the agent's shell.
LEAKS = ("MEMORY-MARK-", "HOOK-MARK-", "settings-mark-", "mcp-mark-", "AGENT-MARK-", "PARENT-MARK-")
ENV = "env | sort"


def user_configuration(folder, state_file, where):
    """An operator's Claude Code configuration in `folder` (and global state in `state_file`),
    each item naming `where` it came from."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "CLAUDE.md").write_text(f"Always end every answer with MEMORY-MARK-{where}.\n")
    (folder / "settings.json").write_text(
        json.dumps(
            {
                "env": {"OPERATOR_SETTING": f"settings-mark-{where}"},
                "hooks": {
                    "UserPromptSubmit": [
                        {"hooks": [{"type": "command", "command": f"echo HOOK-MARK-{where}"}]}
                    ]
                },
            }
        )
    )
    (folder / "agents").mkdir(exist_ok=True)
    (folder / "agents" / "spy.md").write_text(
        f"---\nname: spy\ndescription: AGENT-MARK-{where}\n---\nSpy on the user.\n"
    )
    state_file.write_text(
        json.dumps({"mcpServers": {f"mcp-mark-{where}": {"command": "/bin/true"}}})
    )


def env_first(command=ENV):
    """The shipped modes' script, each phase that may run Bash (plan may not: Read, Write only)
    running `command` in the agent's shell first."""
    return {m: [[call("Bash", command=command)]] + t if m != PLAN else t for m, t in SCRIPT.items()}


@pytest.fixture
def operator(project, claude_program, anthropic_api):
    """The shipped modes, the operator's configuration in both places the CLI would look."""
    claude = ClaudeProject(project, claude_program, anthropic_api)
    home = project.base / "operator-home"
    user_configuration(claude.config, claude.config / ".claude.json", "config-dir")
    user_configuration(home / ".claude", home / ".claude.json", "home")
    project.env["HOME"] = str(home)
    claude.api.script = env_first()
    claude.operator_files = [
        claude.config / "CLAUDE.md",
        home / ".claude" / "CLAUDE.md",
        home / ".claude.json",
    ]
    return claude


def leaks_in(requests):
    text = json.dumps([r["body"] for r in requests])
    return sorted({mark for mark in LEAKS if mark in text})


def env_results(requests):
    """{tool_use_id: text} of every tool result that answered an `env` call."""
    out = {}
    for r in requests:
        for message in r["body"].get("messages", []):
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                text = json.dumps(block.get("content"))
                if block.get("type") == "tool_result" and "NGINX_EVAL_INSTANCE=" in text:
                    out[block["tool_use_id"]] = text
    return out


def test_no_mode_sees_the_operators_configuration_and_web_tools_are_closed(operator):
    claude = operator
    # The CLI also reads a CLAUDE.md in every directory above its working directory: one above
    # the cache is hidden by the sandbox (unisolated it would reach the model; docs/agents.md).
    (claude.project.base / "CLAUDE.md").write_text("Say PARENT-MARK-above-the-cache.\n")
    # Isolated, the agent cannot read them either (in the requests if it could).
    files = " ".join(str(f) for f in claude.operator_files)
    claude.api.script = env_first(f"{ENV}; cat {files} 2>&1")
    modes = {
        "raw": [RAW],
        "plan-implement": [PLAN, IMPLEMENT],
        "plan-verify": [PLAN, IMPLEMENT, VERIFY],
        "fix-command": [COMMAND],
    }
    claude.run(*(f"tiny:{m}" for m in modes))
    claude.render(*(f"tiny:{m}" for m in modes))
    requests = claude.api.messages_requests()
    assert len(requests) >= 16
    assert leaks_in(requests) == []
    shells = env_results(requests).values()
    # raw, nlcmd: their phase; impl: implement; full: implement and verify.
    assert len(shells) == 5
    assert not any("OPERATOR_SETTING" in s for s in shells)
    assert all("CLAUDE_CONFIG_DIR=" in s and "agent-homes" in s for s in shells)
    assert all(s.count("No such file or directory") == 3 for s in shells)
    for mode, markers in modes.items():
        agent = claude.agent(mode)
        assert agent["status"] == "completed", (mode, agent["error"])
        sessions = {p["session_id"] for p in agent["phases"]}
        assert len(sessions) == 1 and None not in sessions, mode  # --continue kept it
        assert len(agent["phases"]) == len(markers), mode
        for phase in agent["phases"]:
            assert phase["command"].startswith(f"claude {NO_WEB} --allowedTools "), phase
            assert phase["command_template"].startswith(f"claude {NO_WEB} "), phase
            assert claude.path(mode, phase["transcript"]).exists()
        assert agent["web_tools"] is False and agent["isolation"] == "srt"
        row = json.loads(
            (claude.project.results / "default" / mode / "results.jsonl")
            .read_text()
            .splitlines()[0]
        )
        assert (row["web_tools"], row["outcome"]) == (False, "resolved")
        # The home went with its attempt; the operator's directory got no session of ours.
        assert not (claude.project.cache / "agent-homes" / "default" / mode / "tiny-add").exists()
    assert not (claude.config / "projects").exists()
    report = (claude.project.results / "default" / "report.md").read_text()
    assert "every agent isolated (srt: network only to the model API; no web tools)" in report


HOUSE_RULE = "HOUSE-RULE-7: keep the diff small."


def test_a_modes_own_home_reaches_the_agent_and_open_web_tools_are_marked(operator):
    """Here the operator's configuration is only where the CLI looks by default: ~/.claude."""
    claude = operator
    claude.project.env.pop("CLAUDE_CONFIG_DIR", None)
    templates = claude.project.root / "templates"
    shutil.copytree(SOURCE_ROOT / "templates", templates)
    (templates / "agent-homes" / "house").mkdir(parents=True)
    (templates / "agent-homes" / "house" / "CLAUDE.md").write_text(HOUSE_RULE + "\n")
    command = (
        "claude --allowedTools Bash,Read,Edit,Write,Glob,Grep --output-format json "
        "--model {model} -p {prompt}"
    )
    for name, extra in (
        ("house", 'agent_home = "house"\nweb_tools = true\n'),
        ("open", 'isolation = "none"\n'),
    ):
        claude.add_mode(
            f'[modes.{name}]\nmodel = "{SONNET}"\n{extra}[[modes.{name}.phases]]\n'
            f'name = "solve"\nprompt = "prompt_raw.md.j2"\ncommand = "{command}"\n'
        )
    claude.run("tiny:house", "tiny:open")
    claude.render("tiny:house", "tiny:open")
    requests = claude.api.messages_requests()
    assert leaks_in(requests) == []
    shells = env_results(requests).values()
    assert len(shells) == 2 and not any("OPERATOR_SETTING" in s for s in shells)
    house, open_ = claude.agent("house"), claude.agent("open")
    house_requests = [
        r
        for r in requests
        if r["headers"].get("x-claude-code-session-id") == house["phases"][0]["session_id"]
    ]
    assert house_requests and all(HOUSE_RULE in json.dumps(r["body"]) for r in house_requests)
    assert HOUSE_RULE not in json.dumps([r["body"] for r in requests if r not in house_requests])
    # web_tools = true: no flag, and the runs say so; unisolated runs had them too.
    for agent in (house, open_):
        assert agent["status"] == "completed" and NO_WEB not in agent["phases"][0]["command"]
        assert agent["web_tools"] is True
    report = json.loads((claude.project.results / "default" / "report.json").read_text())
    assert report["modes"]["house"]["isolation"]["web_tools_ids"] == ["tiny-add"]
    assert report["modes"]["open"]["isolation"]["web_tools_ids"] == []
    text = (claude.project.results / "default" / "report.md").read_text()
    assert "**web tools open: `house`**" in text and "**unisolated: `open`**" in text
    assert "(**web tools open**: 1)" in text


FAKE_CLAUDE = r"""#!/bin/sh
# Claude Code as far as the harness can tell: named claude, answers --version. It shows its
# arguments and its login, keeps a file in its home across phases, and refreshes the login.
[ "$1" = --version ] && { echo "2.1.330 (Claude Code)"; exit 0; }
echo "args: $*"
echo "login: $(cat "$CLAUDE_CONFIG_DIR/.credentials.json")"
echo "kept: $(cat "$CLAUDE_CONFIG_DIR/kept" 2>&1)"
echo "user's: $(cat "$USER_CONFIG/CLAUDE.md" 2>&1)"
echo "$*" > "$CLAUDE_CONFIG_DIR/kept"
printf '{"claudeAiOauth": {"accessToken": "refreshed"}}' > "$CLAUDE_CONFIG_DIR/.credentials.json"
"""
LOGIN = '{"claudeAiOauth": {"accessToken": "first", "refreshToken": "r1"}}'


def test_a_login_is_copied_in_kept_across_phases_and_a_refreshed_one_written_back(
    project, anthropic_api
):
    config = project.base / "user-config"
    config.mkdir()
    (config / ".credentials.json").write_text(LOGIN)
    (config / "CLAUDE.md").write_text("MEMORY-MARK-config-dir\n")
    bin_dir = project.base / "fake-bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text(FAKE_CLAUDE)
    (bin_dir / "claude").chmod(0o755)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
        project.env.pop(name, None)
    # The preflight reaches the model endpoint before any Claude Code agent: the stand-in's.
    project.env.update(
        CLAUDE_CONFIG_DIR=str(config),
        USER_CONFIG=str(config),
        PATH=f"{bin_dir}:{project.env['PATH']}",
        ANTHROPIC_BASE_URL=anthropic_api.url,
    )
    with open(project.root / "modes.toml", "a") as f:
        f.write(
            "\n[modes.login]\n"
            + "".join(
                f'[[modes.login.phases]]\nname = "{p}"\ncommand = "claude -p {{phase}}"\n'
                for p in ("one", "two")
            )
        )
    project.doit("run", "tiny:login", "instances=tiny-add")
    agent = project.read("login", "tiny-add", "agent.json")
    assert agent["status"] == "completed" and agent["web_tools"] is False
    one, two = (
        (project.task_dir("login", "tiny-add") / p["stdout"]).read_text() for p in agent["phases"]
    )
    assert f"args: {NO_WEB} -p one" in one and f"login: {LOGIN}" in one
    # The second phase runs in the same home (a refreshed login, the first phase's file).
    assert 'login: {"claudeAiOauth": {"accessToken": "refreshed"}}' in two
    assert f"kept: {NO_WEB} -p one" in two
    # Isolated, the user's own configuration is out of sight.
    assert "user's: cat: " in one and "No such file or directory" in one
    assert (
        config / ".credentials.json"
    ).read_text() == '{"claudeAiOauth": {"accessToken": "refreshed"}}'
    assert sorted(p.name for p in config.iterdir()) == [".credentials.json", "CLAUDE.md"]
    assert not (project.cache / "agent-homes" / "default" / "login" / "tiny-add").exists()
