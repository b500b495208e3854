"""core/proctree.py through procs.run_limited: what a command leaves behind does not outlive
it, and a command that ended clean costs one look at /proc."""

import os
import subprocess
import time

from nginx_eval.core import procs, proctree


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False


def _run(tmp_path, script):
    return procs.run_limited(
        ["sh", "-c", script],
        cwd=tmp_path,
        env=dict(os.environ),
        timeout=30,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _left_behind(tmp_path, launcher):
    """The pid of the sleeper a command started with `launcher` and left running as it exited."""
    pidfile = tmp_path / "pid"
    outcome = _run(
        tmp_path,
        f"{launcher} sh -c 'echo $$ > {pidfile}.new && mv {pidfile}.new {pidfile} && exec sleep 60'"
        f" & while [ ! -s {pidfile} ]; do sleep 0.01; done; exit 0",
    )
    assert outcome.exit_code == 0 and not outcome.timed_out
    return int(pidfile.read_text())


def _gone(pid):
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _alive(pid)


def test_a_process_left_in_the_commands_group_is_stopped(tmp_path):
    assert _gone(_left_behind(tmp_path, ""))


def test_a_process_that_left_the_group_is_stopped_by_its_token(tmp_path):
    assert _gone(_left_behind(tmp_path, "setsid"))


def test_a_command_that_ended_clean_is_looked_for_once(tmp_path, monkeypatch):
    looks = []
    real = proctree.pids_with_token
    monkeypatch.setattr(proctree, "pids_with_token", lambda t: looks.append(t) or real(t))
    outcome = _run(tmp_path, "exit 3")
    assert outcome.exit_code == 3
    assert len(looks) == 1
