"""Running untrusted or long commands: a time limit, and nothing left running afterwards.

Each command starts in a new session (its own process group) and carries a unique token in its
environment. At the limit the group gets SIGTERM, then SIGKILL; then every process that still carries
the token (children that escaped with setsid, daemons started by an agent) is killed too.
"""

import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass

TOKEN_VAR = "NGINX_EVAL_PROC_TOKEN"
GRACE_SECONDS = 3


@dataclass
class Outcome:
    exit_code: int | None
    seconds: float
    timed_out: bool


def _pids_with_token(token):
    needle = f"{TOKEN_VAR}={token}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


def _kill_all(pgid, token):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        for pid in _pids_with_token(token):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if sig == signal.SIGTERM:
            deadline = time.monotonic() + GRACE_SECONDS
            while time.monotonic() < deadline and (_group_alive(pgid) or _pids_with_token(token)):
                time.sleep(0.05)


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def run_limited(argv, *, cwd, env, timeout, stdout, stderr, stdin=subprocess.DEVNULL):
    """Run argv with a wall-clock limit; kill its whole process tree at the limit and on exit."""
    token = uuid.uuid4().hex
    env = dict(env, **{TOKEN_VAR: token})
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=stdout, stderr=stderr, stdin=stdin,
                            start_new_session=True)
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    except BaseException:
        _kill_all(proc.pid, token)
        proc.wait()
        raise
    # Also on a normal exit: background processes the command left behind must not outlive it.
    _kill_all(proc.pid, token)
    proc.wait()
    seconds = time.monotonic() - start
    return Outcome(exit_code=None if timed_out else proc.returncode, seconds=round(seconds, 3),
                   timed_out=timed_out)
