"""The sandbox's self-test (nginx_eval/agent/selftest.py): build, serve, reach, prove inside the
sandbox as a phase would, before any agent starts; its result in run.json, and no agent when it
fails (both read on one project's runs, `probed`)."""

import json
import os
import textwrap
import time

import pytest
from conftest import Project
from test_agent_claude import claude  # noqa: F401 (a fixture)
from test_sandbox import needs_srt

from nginx_eval.agent import selftest
from nginx_eval.core.layout import Layout

BOX = {"endpoint": "api.anthropic.com:443", "allow_hosts": [], "binds": []}


def broken_compiler(tmp_path):
    """A PATH whose first cc fails as a broken toolchain would."""
    bin_dir = tmp_path / "broken-bin"
    bin_dir.mkdir()
    cc = bin_dir / "cc"
    cc.write_text("#!/bin/sh\necho 'cc: this toolchain is broken on purpose' >&2\nexit 1\n")
    cc.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def test_failure_names_the_first_step_that_failed_or_did_not_report():
    steps = [
        {"step": "account", "ok": True, "detail": ""},
        {"step": "build", "ok": False, "detail": "cc: not found"},
    ]
    assert (
        selftest.failure(steps, "")
        == "the sandbox self-test could not build a C program with cc: cc: not found"
    )
    # A script that stopped without a word (srt refused to start): the next step, srt's line.
    assert selftest.failure(steps[:1], "bwrap: setting up uid map: Permission denied") == (
        "the sandbox self-test could not build a C program with cc: bwrap: setting up uid "
        "map: Permission denied"
    )
    assert (
        selftest.failure([], "")
        == "the sandbox self-test could not run as an ordinary user: no output"
    )
    ok = [{"step": s, "ok": True, "detail": ""} for s in selftest.STEPS]
    assert selftest.failure(ok, "") is None
    assert selftest.read_steps("noise\nok account\nnot ok build: cc: x: y\nok other\n") == [
        {"step": "account", "ok": True, "detail": ""},
        {"step": "build", "ok": False, "detail": "cc: x: y"},
    ]


@pytest.mark.e2e
@needs_srt
def test_the_self_test_passes_every_step_here(tmp_path):
    layout = Layout.from_env(root=tmp_path, environ={"NGINX_EVAL_CACHE": str(tmp_path / "c")})
    # The preflight's checks ride on the same sandbox start, in order, up to the first that fails.
    checks = {
        "program bash": selftest.probe_condition(["bash", "-c", 'type -t -- "$1"', "bash", "cc"]),
        "program none": selftest.probe_condition(["bash", "-c", "true"]),  # prints nothing
        "after": "true",
    }
    result, passed = selftest.run_with_checks(layout, BOX, dict(os.environ), checks)
    assert [(s["step"], s["ok"]) for s in result["steps"]] == [(s, True) for s in selftest.STEPS]
    assert result["ok"] and result["failed"] is None and 0 < result["seconds"] < 60
    assert passed == {"program bash"}


@pytest.mark.e2e
@needs_srt
def test_a_broken_compiler_fails_the_build_step_with_its_own_words(tmp_path):
    # The project root is hidden in the sandbox: the broken compiler lies outside it.
    layout = Layout.from_env(
        root=tmp_path / "project", environ={"NGINX_EVAL_CACHE": str(tmp_path / "c")}
    )
    env = dict(os.environ, PATH=broken_compiler(tmp_path))
    result, passed = selftest.run_with_checks(layout, BOX, env, {"after": "true"})
    assert not result["ok"] and [s["step"] for s in result["steps"]] == ["account", "build"]
    assert passed == set()  # no check runs after a failed self-test
    assert result["failed"] == (
        "the sandbox self-test could not build a C program with cc: "
        "cc: this toolchain is broken on purpose"
    )


def stand_in_mode(project):
    (project.root / "modes.toml").write_text(
        textwrap.dedent("""\
        [modes.probe]
        [[modes.probe.phases]]
        name = "solve"
        timeout = 120
        command = "echo agent ran > ran.txt"
        """)
    )


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """The stand-in mode (an isolated phase that writes a file) run on one project, three times:
    first (its agent starts after a passed self-test), again with nothing to do, then with its
    agent forgotten and a broken compiler first on PATH. What each left is kept in `seen`:
    run.json, agent.json, doit's output and the tasks it executed."""
    project = Project(tmp_path_factory.mktemp("probed"))
    stand_in_mode(project)
    seen = {}

    def run_json():
        return json.loads((project.results / "default" / "run.json").read_text())

    project.doit("run", "tiny:probe", "instances=tiny-add")
    seen["first"] = (run_json(), project.read("probe", "tiny-add", "agent.json"))
    _, executed = project.doit("run", "tiny:probe", "instances=tiny-add")
    seen["again"] = (run_json(), executed)
    project.doit("forget", "agent:tiny/probe/tiny-add")
    broken = project.base / "broken"
    broken.mkdir()
    proc, executed = project.doit(
        "run",
        "tiny:probe",
        "instances=tiny-add",
        check=False,
        env={"PATH": broken_compiler(broken)},
    )
    seen["broken"] = (run_json(), project.read("probe", "tiny-add", "agent.json"), proc, executed)
    return seen


@pytest.mark.e2e
@needs_srt
def test_a_run_that_starts_agents_keeps_the_passed_self_test_in_run_json(probed):
    run, agent = probed["first"]
    assert run["sandbox_self_test"]["ok"] is True
    assert [s["step"] for s in run["sandbox_self_test"]["steps"]] == list(selftest.STEPS)
    assert agent["status"] == "completed"
    # A rerun with nothing to do starts no agent, and so no self-test.
    checked = run["sandbox_self_test"]["checked"]
    run, executed = probed["again"]
    assert not any(e.startswith("agent:") for e in executed)
    assert run["sandbox_self_test"]["checked"] == checked


@pytest.mark.e2e
@needs_srt
def test_no_agent_starts_when_the_self_test_fails_and_run_json_says_why(probed):
    _, before = probed["first"]
    run, after, proc, executed = probed["broken"]
    assert proc.returncode != 0 and not any(e.startswith("agent:") for e in executed)
    (line,) = proc.stderr.splitlines()
    assert line == (
        "nginx-eval: error: the sandbox self-test could not build a C program with "
        "cc: cc: this toolchain is broken on purpose; no agent started "
        "(docs/sandbox.md)"
    )
    assert run["sandbox_self_test"]["ok"] is False
    assert after == before


def free_port():
    import socket

    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


@needs_srt
def test_a_model_endpoint_out_of_reach_stops_the_run_in_seconds_with_one_line(claude):
    port = free_port()
    start = time.monotonic()
    proc, executed = claude.run(
        "tiny:raw", check=False, env={"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}"}
    )
    assert time.monotonic() - start < 60
    assert proc.returncode != 0 and not any(e.startswith("agent:") for e in executed)
    (line,) = proc.stderr.splitlines()
    # The sandbox reaches the preflight's metering proxy, as a phase does; the proxy, on this
    # machine, cannot reach the upstream: that leg is named.
    assert line.startswith(
        f"nginx-eval: error: Claude Code: the model endpoint http://127.0.0.1:{port} "
        "(ANTHROPIC_BASE_URL) cannot be reached from this machine: (7) Failed to connect"
    ), line
    assert line.endswith("; no agent started")
    assert claude.api.requests == []


@needs_srt
def test_a_reachable_endpoint_passes_and_missing_credentials_are_not_blamed_on_modes_toml(claude):
    # The stand-in answers the check (any HTTP status means reachable), then the agent runs.
    claude.run("tiny:raw")
    assert claude.agent("raw")["status"] == "completed"
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
        claude.project.env.pop(name, None)
    claude.project.doit("forget", "agent:tiny/raw/tiny-add")
    proc, _ = claude.run("tiny:raw", check=False)
    (line,) = proc.stderr.splitlines()
    assert line.startswith(
        "nginx-eval: error: Claude Code has no credentials: set ANTHROPIC_API_KEY"
    ), line
