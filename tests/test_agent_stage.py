"""agent/stage.py's phase_command and mode_inputs: Claude Code's web tools closed on the command
line of an isolated mode, and in its agents' inputs only where that changes what ran before."""

import pytest

from nginx_eval.agent import stage
from nginx_eval.core.layout import Layout
from nginx_eval.run.modes import parse_modes

SHIPPED = (
    "${AGENT:-claude --allowedTools Bash,Read --output-format json --model {model} -p} {prompt}"
)


@pytest.fixture
def claude_on_path(tmp_path, monkeypatch):
    """A `claude` that answers --version, first on PATH; no AGENT."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text('#!/bin/sh\necho "2.1.330 (Claude Code)"\n')
    (bin_dir / "claude").chmod(0o755)
    (bin_dir / "other-agent").write_text("#!/bin/sh\n")
    (bin_dir / "other-agent").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.delenv("AGENT", raising=False)
    return tmp_path


def mode(**keys):
    command = keys.pop("command", SHIPPED)
    return parse_modes(
        {"modes": {"m": dict(keys, model="x", phases=[{"name": "solve", "command": command}])}},
        "m.toml",
    )["m"]


def test_an_isolated_claude_code_phase_gets_the_web_tools_closed(claude_on_path):
    import os

    env = dict(os.environ)
    command, web = stage.phase_command(mode(), mode().phases[0], env)
    assert web is False and command.startswith(
        "${AGENT:-claude --disallowedTools=WebSearch,WebFetch --allowedTools "
    )
    assert stage.web_tools_open(mode(), env) is False
    # Allowed by the mode, unisolated, or AGENT's own command line: as it was, and open.
    for m, environ in (
        (mode(web_tools=True), env),
        (mode(isolation="none"), env),
        (mode(), dict(env, AGENT="claude -p")),
    ):
        assert stage.phase_command(m, m.phases[0], environ) == (SHIPPED, True)
        assert stage.web_tools_open(m, environ) is True
    # Another agent: nothing the harness knows to close.
    other = mode(command="other-agent {prompt}")
    assert stage.phase_command(other, other.phases[0], env) == ("other-agent {prompt}", None)
    assert stage.web_tools_open(other, dict(env, AGENT="other-agent")) is None
    assert stage.web_tools_open(mode(), dict(env, AGENT="other-agent")) is None


@pytest.mark.e2e
def test_closing_the_web_tools_is_an_input_only_where_it_changes_the_run(claude_on_path):
    layout = Layout(
        root=claude_on_path, cache=claude_on_path / "cache", results_root=claude_on_path / "results"
    )
    closed = stage.mode_inputs(layout, mode())
    assert closed["no_web_tools"] == {
        "option": "--disallowedTools=WebSearch,WebFetch",
        "phases": ["solve"],
    }
    assert closed["agent_version"] == "2.1.330 (Claude Code)"
    # Modes whose agents run what they ran before keep the inputs (and digests) they had.
    for m in (mode(web_tools=True), mode(isolation="none"), mode(command="other-agent {prompt}")):
        assert "no_web_tools" not in stage.mode_inputs(layout, m)
    assert {k: v for k, v in closed.items() if k != "no_web_tools"} == stage.mode_inputs(
        layout, mode(web_tools=True)
    )
