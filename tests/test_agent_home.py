"""The agent's home end to end (issue 36): the real Claude Code CLI in the shipped modes against
the stand-in API (tests/anthropic_standin.py), with an operator whose own Claude Code
configuration, in the CLAUDE_CONFIG_DIR of the test environment and in HOME's ~/.claude and
~/.claude.json, holds a memory line, a UserPromptSubmit hook, a settings variable, an MCP server
and a subagent. None of it may reach the model or the agent's shell; a mode's own agent_home
file does. And the web tools: closed on the command line of an isolated mode, open (and marked)
with web_tools = true.

The module's first tests read one run (`shipped`): the four shipped modes raw, impl
(plan-implement), full (plan-verify) and nlcmd (fix-command), and a plan-implement mode whose
implement phase keeps its state elsewhere, with that operator and the CLI as npm installs it.
On it: every shipped mode resolves the fixture task with the real CLI (issue 14), an npm-installed
CLI runs in the sandbox and continues its session, a lost --continue is an error, and the
operator's configuration reaches neither the model nor the agent's shell.
"""

import json
import os
import shutil
import time

import pytest
from anthropic_standin import StandIn, call
from claude_cli import SONNET
from conftest import SOURCE_ROOT, Project
from test_agent_claude import (
    COMMAND,
    IMPLEMENT,
    PLAN,
    RAW,
    SCRIPT,
    VERIFY,
    VERSION,
    ClaudeProject,
    assert_phase_paid_what_the_api_billed,
    needs_srt,
    npm_like_install,
    quick_mode,
    results_row,
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


def operator_of(project, claude_program, api):
    """The shipped modes, the operator's configuration in both places the CLI would look."""
    claude = ClaudeProject(project, claude_program, api)
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


@pytest.fixture
def operator(project, claude_program, anthropic_api):
    return operator_of(project, claude_program, anthropic_api)


# The shipped modes (mode: the markers of its phases' prompts, in order).
SHIPPED = {
    "raw": [RAW],
    "plan-implement": [PLAN, IMPLEMENT],
    "plan-verify": [PLAN, IMPLEMENT, VERIFY],
    "fix-command": [COMMAND],
}


@pytest.fixture(scope="module")
def shipped(claude_program, tmp_path_factory):
    """One `doit run` of the shipped modes and of `lost` (plan, then an implement phase whose
    --continue looks for the session elsewhere), that the tests up to the next section read:
    the operator's configuration in both places the CLI would look and a CLAUDE.md above the
    cache, each phase that may run Bash first showing its environment and trying to read the
    operator's files; the CLI as npm installs it (`npm_problem` says why not, where it cannot
    be)."""
    project = Project(tmp_path_factory.mktemp("shipped"))
    with StandIn() as api:
        claude = operator_of(project, claude_program, api)
        try:
            bin_dir = npm_like_install(claude_program, project.base / "npm-prefix")
            project.env["PATH"] = f"{bin_dir}{os.pathsep}{project.env['PATH']}"
            claude.npm_problem = None
        except pytest.skip.Exception as e:
            claude.npm_problem = str(e)
        # The CLI also reads a CLAUDE.md in every directory above its working directory: one
        # above the cache is hidden by the sandbox (unisolated it would reach the model;
        # docs/agents.md).
        (project.base / "CLAUDE.md").write_text("Say PARENT-MARK-above-the-cache.\n")
        # Isolated, the agent cannot read them either (in the requests if it could).
        files = " ".join(str(f) for f in claude.operator_files)
        claude.api.script = env_first(f"{ENV}; cat {files} 2>&1")
        claude.add_mode(quick_mode("lost", plan=True, continue_from_elsewhere=True))
        claude.run(*(f"tiny:{m}" for m in SHIPPED), "tiny:lost")
        yield claude


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


def turns(marker):
    """The turns of a phase with `marker` in the shipped run's script (env_first)."""
    return 2 if marker == PLAN else 3


def test_every_shipped_mode_resolves_a_task_with_the_real_cli(shipped):
    claude = shipped
    for mode, phase_markers in SHIPPED.items():
        agent = claude.agent(mode)
        assert (agent["status"], agent["error"], agent["agent_version"]) == (
            "completed",
            "",
            VERSION,
        ), mode
        assert [a["status"] for a in agent["attempts"]] == ["completed"]
        sessions = {p["session_id"] for p in agent["phases"]}
        assert len(sessions) == 1 and None not in sessions, mode  # --continue kept it
        for phase, marker in zip(agent["phases"], phase_markers, strict=True):
            assert (phase["is_error"], phase["terminal_reason"], phase["api_error_status"]) == (
                False,
                "completed",
                None,
            )
            assert phase["permission_denials"] == [] and phase["num_turns"] == turns(marker)
            # impl and full share markers: their requests differ by session.
            assert_phase_paid_what_the_api_billed(phase, claude.usages(marker, phase["session_id"]))
            assert claude.path(mode, phase["transcript"]).exists()
        assert agent["cost_usd"] == pytest.approx(
            sum(p["cost_usd"] for p in agent["phases"]), abs=1e-6
        )
        assert b"a + b" in claude.path(mode, "model.patch").read_bytes()
        assert claude.project.read(mode, "tiny-add", "grade.json")["status"] == "resolved"
        trajectory = claude.path(mode, agent["trajectory"]).read_text()
        assert "**Bash** command: `sed -i" in trajectory and "Fixing it." in trajectory
        # The same environment for all four: nginx-tests as of the base, beside the workspace.
        assert agent["tests_tree"]["commit"] == claude.project.commits["t_head"], mode
    verify = claude.path(
        "plan-verify", claude.agent("plan-verify")["phases"][2]["prompt_file"]
    ).read_text()
    tree = claude.project.cache / "agent-tests" / claude.project.commits["t_head"]
    assert f"`TEST_NGINX_BINARY=$PWD/objs/nginx prove -v -I {tree}/lib {tree}/<file>.t`" in verify
    transcript = claude.path("fix-command", claude.agent("fix-command")["phases"][0]["transcript"])
    assert "<command-name>/fix-issue</command-name>" in transcript.read_text()
    # Its workspace went once the patch was taken (patch.take_patch); the transcript above
    # shows the command was there for the CLI.
    ws = claude.project.cache / "workspaces" / "default" / "fix-command" / "tiny-add"
    assert not ws.exists() and not ws.with_suffix(".json").exists()
    # Nothing to do: no CLI starts (no request, no --version), well under a second of work.
    requests, versions = (
        len(claude.api.requests),
        list((claude.project.cache / "agent-versions").iterdir()),
    )
    start = time.monotonic()
    _, executed = claude.run(*(f"tiny:{m}" for m in SHIPPED))
    assert executed == [] and len(claude.api.requests) == requests
    assert list((claude.project.cache / "agent-versions").iterdir()) == versions
    print(f"no-op rerun of four modes: {time.monotonic() - start:.2f} s")


def test_in_the_sandbox_an_npm_installed_cli_runs_and_continues_its_session(shipped):
    if shipped.npm_problem:
        pytest.skip(shipped.npm_problem)
    claude = shipped
    agent = claude.agent("plan-implement")
    plan, implement = agent["phases"]
    assert agent["status"] == "completed" and agent["agent_version"] == VERSION
    assert plan["session_id"] == implement["session_id"]  # its home was writable
    assert (
        implement["transcript"]
        and claude.project.read("plan-implement", "tiny-add", "grade.json")["status"] == "resolved"
    )


def test_a_lost_continue_is_an_error(shipped):
    claude = shipped
    agent = claude.agent("lost")
    plan, implement = agent["phases"]
    assert agent["status"] == "error" and implement["exit_code"] == 0
    assert plan["session_id"] != implement["session_id"]
    assert agent["error"] == (
        f"phase implement: --continue started session "
        f"{implement['session_id']} instead of continuing "
        f"{plan['session_id']}: the earlier phases' conversation was lost"
    )
    assert results_row(claude.project, "lost")["agent_status"] == "error"


def test_no_mode_sees_the_operators_configuration_and_web_tools_are_closed(shipped):
    claude = shipped
    modes = dict(SHIPPED, lost=[PLAN, IMPLEMENT])
    claude.render(*(f"tiny:{m}" for m in modes))
    requests = claude.api.messages_requests()
    assert len(requests) >= 16
    assert leaks_in(requests) == []
    shells = env_results(requests).values()
    # raw, nlcmd: their phase; impl, lost: implement; full: implement and verify.
    assert len(shells) == 6
    assert not any("OPERATOR_SETTING" in s for s in shells)
    assert all("CLAUDE_CONFIG_DIR=" in s and "agent-homes" in s for s in shells)
    assert all(s.count("No such file or directory") == 3 for s in shells)
    for mode, markers in SHIPPED.items():
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
    lost = claude.agent("lost")
    assert (lost["web_tools"], lost["isolation"]) == (False, "srt")
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
    # The attempt alone: no grade is read.
    project.doit("run", "agent:tiny/login/tiny-add")
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
