"""report/process.py's figures from what the real programs sent back: Claude Code, Codex CLI and
Gemini CLI (the pinned versions) run against their stand-in APIs in a git workspace, each asked
to run a TAP test that fails, write a source file with its own editing tool, and build with
make; the attempt's ATIF trajectory is made as agent/stage.py makes it (Claude Code's from its
transcript, the others' from the metering proxy's record of their calls, agent/wire.py) and
must show all four behaviours, the edit timed within the run."""

import os
import subprocess
import time

import gemini_standin
import openai_standin
import pytest
from anthropic_standin import call, say
from claude_captures import Recorder

from nginx_eval.agent import wire
from nginx_eval.agent.programs import registry
from nginx_eval.agent.stage import phase_time
from nginx_eval.meter.proxy import MeterProxy
from nginx_eval.report.process import attempt_process
from nginx_eval.transcript import atif

E2E = True  # its fixtures are chosen per program (request.getfixturevalue)
TEST = "perl t/a.t"
PATCH = "*** Begin Patch\n*** Add File: src/b.c\n+int b;\n*** End Patch\n"
WHO = {"run": "default", "mode": "m", "task": "t", "attempt": 1}


def workspace(path):
    """A git workspace with a TAP test that fails and a Makefile whose build does nothing."""
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "t").mkdir()
    (path / "src").mkdir()
    (path / "t" / "a.t").write_text('print "1..1\\nnot ok 1 - add\\n"; exit 1;\n')
    (path / "Makefile").write_text("all:\n\ttrue\n")
    return path


def trajectory(conversation, began):
    phase = {"name": "solve", "status": "completed", "prompt": "p", "conversation": conversation}
    return atif.attempt_trajectory("r", {"name": "m"}, [dict(phase, started_at=began)], [])


def claude_run(request, tmp_path, marker):
    program = request.getfixturevalue("claude_program")
    api = request.getfixturevalue("anthropic_api")
    api.script = {
        marker: [
            [call("Bash", command=TEST)],
            [call("Write", file_path="src/b.c", content="int b;\n")],
            [call("Bash", command="make")],
            [say("Done.")],
        ]
    }
    rec = Recorder(program, api, tmp_path / "claude")
    ws = workspace(tmp_path / "ws")
    capture = rec.run(f"Please {marker}", cwd=ws)
    return ws, atif.claude_conversation(capture.entries)


def other_run(request, tmp_path, marker, name):
    """Codex or Gemini through a metering proxy, as the agent stage runs them."""
    program = registry.named(name)
    path = request.getfixturevalue(f"{name}_program")
    api = request.getfixturevalue("openai_api" if name == "codex" else "gemini_api")
    standin = openai_standin if name == "codex" else gemini_standin
    if name == "codex":
        turns = [
            [standin.call("exec_command", cmd=TEST)],
            [standin.call("exec_command", cmd=f"apply_patch <<'EOF'\n{PATCH}EOF")],
            [standin.call("exec_command", cmd="make")],
        ]
    else:
        turns = [
            [standin.call("run_shell_command", command=TEST)],
            [standin.call("write_file", file_path="src/b.c", content="int b;\n")],
            [standin.call("run_shell_command", command="make")],
        ]
    api.script = {marker: turns + [[standin.say("Done.")]]}
    ws, home = workspace(tmp_path / "ws"), tmp_path / "home"
    home.mkdir()
    upstream = api.url + ("/v1" if name == "codex" else "")
    meter = MeterProxy(
        {program.api: upstream}, WHO, tmp_path / "calls.jsonl.gz", tmp_path / "bodies.jsonl.gz"
    ).start()
    meter.phase = "solve"
    base = meter.base_url(program.api)
    try:
        if name == "codex":
            (home / "config.toml").write_text(
                'model_provider = "meter"\nweb_search = "disabled"\n'
                "check_for_update_on_startup = false\n[analytics]\nenabled = false\n"
                f'[model_providers.meter]\nname = "meter"\nbase_url = "{base}"\n'
                'env_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
            )
            env = {"CODEX_HOME": str(home), "OPENAI_API_KEY": api.api_key}
            argv = [path, "exec", "--json", "--skip-git-repo-check", "-s", "danger-full-access"]
            argv += ["-m", "gpt-5", f"{marker} please"]
        else:
            (home / ".gemini").mkdir()
            (home / ".gemini" / "settings.json").write_text(
                '{"security": {"auth": {"selectedType": "gemini-api-key"}}}'
            )
            env = {
                "HOME": str(home),
                "GEMINI_API_KEY": api.api_key,
                "GOOGLE_GEMINI_BASE_URL": base,
                "GEMINI_CLI_TRUST_WORKSPACE": "true",
                # One Node.js process, as the agent stage starts it (programs/gemini.py).
                "GEMINI_CLI_NO_RELAUNCH": "true",
            }
            argv = [path, "-p", f"{marker} please", "--output-format", "json"]
            argv += ["--approval-mode", "yolo", "-m", "gemini-2.5-pro"]
        proc = subprocess.run(
            argv,
            cwd=ws,
            env=dict(os.environ, **env),
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    finally:
        meter.stop()
    assert proc.returncode == 0, proc.stderr[-2000:]
    calls = [c for c in meter.calls if c.get("phase") == "solve"]
    bodies = wire.read_bodies(tmp_path / "bodies.jsonl.gz")
    return ws, wire.conversation(name, program.api, calls, bodies)


@pytest.mark.parametrize("name", ["claude", "codex", "gemini"])
def test_each_program_reproduces_edits_and_builds_as_its_trajectory_says(request, tmp_path, name):
    began = time.time()
    marker = f"PROCESS-{name.upper()}"
    if name == "claude":
        ws, conversation = claude_run(request, tmp_path, marker)
    else:
        ws, conversation = other_run(request, tmp_path, marker, name)
    seconds = time.time() - began
    assert (ws / "src" / "b.c").read_text() == "int b;\n"  # the edit happened
    figures = attempt_process(trajectory(conversation, phase_time(began, 0.0)))
    assert {k: v for k, v in figures.items() if k != "seconds_to_first_edit"} == {
        "built": True,
        "tested": True,
        "failed_test_before_edit": True,
        "edited": True,
    }
    assert 0 < figures["seconds_to_first_edit"] < seconds
