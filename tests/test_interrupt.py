"""Ctrl-C and SIGTERM during `doit run`: every agent, build and prove the run started is stopped,
doit says so in one line and exits non-zero, nothing of the stopped units is written, and the
next `doit run` redoes exactly those units (an agent that never finished runs again).
"""

import os
import re
import signal
import time
from pathlib import Path

import pytest
from test_faults import marker, processes_with, start_doit, wait_until  # noqa: F401 (marker: a fixture)

IDS = ("tiny-add", "tiny-mul")
PARALLEL = {"serial": ("-n", "1"), "processes": ("-n", "2"), "threads": ("-n", "2", "-P", "thread")}
LINE = re.compile(r"nginx-eval: interrupted; (\d+) units finished and kept, (\d+) stopped")
EXIT_SECONDS = 10  # the grace period of the commands (procs.GRACE_SECONDS) and some


def interrupt(proc, sig=signal.SIGINT, group=False):
    """Send `sig` to doit alone (or to its process group, as a terminal's Ctrl-C does); return
    (stdout, stderr) once it has exited."""
    start = time.monotonic()
    if group:
        os.killpg(proc.pid, sig)
    else:
        os.kill(proc.pid, sig)
    out, err = proc.communicate(timeout=60)
    assert time.monotonic() - start < EXIT_SECONDS, err
    assert proc.returncode == 128 + sig, (proc.returncode, out, err)
    return out, err


def assert_one_line(err, stopped):
    """stderr is the one line of the interrupt, with the number of stopped commands: no
    traceback, nothing else."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and LINE.fullmatch(lines[0]), err
    assert int(LINE.fullmatch(lines[0]).group(2)) == stopped, err
    return int(LINE.fullmatch(lines[0]).group(1))


def token_files(project):
    running = project.cache / "running"
    return [p for p in running.rglob("*") if p.is_file()] if running.exists() else []


def start_hanging_agents(project, tmp_path, marker, parallel):
    """`doit run tiny:fake` whose agents hang; returns (doit, ids of the agents running), once
    as many agents run as doit has workers."""
    env = {"FAKE_AGENT": "hang", "FAKE_AGENT_MARKER": marker}
    for iid in IDS:
        env[f"FAKE_AGENT_GATE_{iid.replace('-', '_')}"] = str(tmp_path / f"gate-{iid}")
    proc = start_doit(project, "run", *PARALLEL[parallel], "tiny:fake", env=env)
    expected = 1 if parallel == "serial" else 2
    running = lambda: [iid for iid in IDS if (tmp_path / f"gate-{iid}.waiting").exists()]
    wait_until(lambda: len(running()) >= expected, proc, f"{expected} agents running")
    time.sleep(0.2)  # let run_limited finish writing its token file
    return proc, running()


def assert_rerun_redoes_the_stopped_agents(project, marker, killed):
    """Nothing of the stopped agents was kept; the next run runs them (and only they had run
    before), and every task gets the verdict of a clean run."""
    for iid in IDS:
        assert not (project.task_dir("fake", iid) / "agent.json").exists()
    assert token_files(project) == []
    assert sorted(project.agent_calls()) == sorted(killed)
    project.doit("run", "tiny:fake", env={"FAKE_AGENT": "fix", "FAKE_AGENT_MARKER": marker})
    assert sorted(project.agent_calls()) == sorted(killed + list(IDS))
    for iid in IDS:
        assert project.read("fake", iid, "agent.json")["status"] == "completed"
        assert project.read("fake", iid, "grade.json")["status"] == "resolved"
    _, executed = project.doit("run", "tiny:fake")
    assert executed == []


@pytest.mark.parametrize("parallel", list(PARALLEL))
def test_sigint_to_doit_stops_every_agent(project, tmp_path, marker, parallel):
    proc, killed = start_hanging_agents(project, tmp_path, marker, parallel)
    _, err = interrupt(proc)
    finished = assert_one_line(err, stopped=len(killed))
    assert finished > 0  # the clones, at least
    assert processes_with(marker) == []
    assert_rerun_redoes_the_stopped_agents(project, marker, killed)


@pytest.mark.parametrize(
    "sig, group",
    [(signal.SIGINT, True), (signal.SIGTERM, False)],
    ids=["ctrl-c-to-the-process-group", "sigterm"],
)
def test_ctrl_c_and_sigterm_stop_every_agent(project, tmp_path, marker, sig, group):
    proc, killed = start_hanging_agents(project, tmp_path, marker, "processes")
    _, err = interrupt(proc, sig, group=group)
    assert_one_line(err, stopped=2)
    assert processes_with(marker) == []
    assert_rerun_redoes_the_stopped_agents(project, marker, killed)


# make that never ends: a process in its own session beside it (as a compiler server would be),
# and a file that says it started. It carries FAKE_AGENT_MARKER (the build's environment is doit's).
FAKE_MAKE = """#!/bin/sh
: > "$FAKE_MAKE_STARTED.$$"
setsid sleep 3600 &
exec sleep 3600
"""


@pytest.mark.parametrize("parallel", ["processes", "threads"])
def test_interrupt_during_make_stops_the_builds(project, tmp_path, marker, parallel):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "make").write_text(FAKE_MAKE)
    (bin_dir / "make").chmod(0o755)
    started = tmp_path / "make-started"
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_MAKE_STARTED": str(started),
        "FAKE_AGENT_MARKER": marker,
    }
    proc = start_doit(project, "run", *PARALLEL[parallel], "tiny:gold", env=env)
    # tiny-add and tiny-mul have other configure flags: two base builds, side by side.
    makes = lambda: list(tmp_path.glob("make-started.*"))
    wait_until(lambda: len(makes()) == 2, proc, "two makes running")
    time.sleep(0.2)
    _, err = interrupt(proc)
    assert_one_line(err, stopped=2)
    assert processes_with(marker) == []
    # A stopped build is no verdict, not even an environment error: nothing published, nothing
    # recorded as failed, no result.
    builds = project.cache / "builds"
    assert list(builds.glob("*/build.json")) == [] and not (builds / ".failed").exists()
    assert list(project.results.glob("default/gold/*/build.json")) == []
    assert token_files(project) == []
    project.doit("run", "tiny:gold", env={"FAKE_AGENT_MARKER": marker})
    for iid in IDS:
        assert project.read("gold", iid, "grade.json")["status"] == "resolved"
    assert list(Path(builds / ".tmp").glob("*")) == []
