"""Running untrusted or long commands: a time limit, and nothing left running afterwards.

Each command starts in a new session (its own process group) and carries a unique token in its
environment. At the limit the group gets SIGTERM, then SIGKILL; then every process that still carries
the token (children that escaped with setsid, daemons started by an agent) is killed too.

When doit itself is killed (kill -9, a lost machine session), nobody is left to do that. So a caller
can name a token file: the token is written there while the command runs, and the next run of the
same unit calls ``kill_leftovers`` on it before it starts again. A process that clears its own
environment and leaves its session escapes all of this; only a sandbox with its own PID namespace
(sandbox.py) catches that one.
"""

import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

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


def _kill_all(proc, token):
    pgid = proc.pid
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
            # poll() reaps the leader: a zombie leader keeps its group alive for killpg.
            while time.monotonic() < deadline and (proc.poll() is None or _group_alive(pgid)
                                                   or _pids_with_token(token)):
                time.sleep(0.05)


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def kill_leftovers(token_file):
    """Kill what a run_limited of an earlier, killed harness process left running (see above)."""
    try:
        token = open(token_file, encoding="ascii").read().strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return
    # No SIGTERM first: these processes outlived their time limit already.
    for pid in _pids_with_token(token) if token else ():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    Path(token_file).unlink(missing_ok=True)


def _stop_children_first(proc, token):
    """Stop everything the command started, then give the command itself a moment to finish."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _pids_with_token(token):
            if pid != proc.pid:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        try:
            proc.wait(timeout=GRACE_SECONDS)
            return
        except subprocess.TimeoutExpired:
            pass


def run_limited(argv, *, cwd, env, timeout, stdout, stderr, stdin=subprocess.DEVNULL,
                token_file=None, children_first=False):
    """Run argv with a wall-clock limit; kill its whole process tree at the limit and on exit.
    token_file: where the token stays while the command runs (see kill_leftovers).
    children_first: at the limit, stop what the command started before the command itself, so
    that it can write what it has (prove keeps the TAP of a file until the file ends, when its
    output is not a terminal)."""
    token = uuid.uuid4().hex
    env = dict(env, **{TOKEN_VAR: token})
    if token_file:
        kill_leftovers(token_file)
        os.makedirs(os.path.dirname(token_file), exist_ok=True)
        with open(token_file, "w", encoding="ascii") as f:
            f.write(token + "\n")
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=stdout, stderr=stderr, stdin=stdin,
                            start_new_session=True)
    timed_out = False
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        if children_first:
            _stop_children_first(proc, token)
    except BaseException:
        _kill_all(proc, token)
        proc.wait()
        if token_file:
            Path(token_file).unlink(missing_ok=True)
        raise
    # Also on a normal exit: background processes the command left behind must not outlive it.
    _kill_all(proc, token)
    proc.wait()
    if token_file:
        Path(token_file).unlink(missing_ok=True)
    seconds = time.monotonic() - start
    return Outcome(exit_code=None if timed_out else proc.returncode, seconds=round(seconds, 3),
                   timed_out=timed_out)
