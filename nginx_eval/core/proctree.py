"""Finding and stopping the processes of one command: its process group, and every process that
carries its token.

run_limited (procs.py) starts each command in a session of its own (its process group) with a
unique token in its environment (TOKEN_VAR). What leaves the group (setsid, a daemon an agent
starts) keeps the token, and /proc shows it. Stopping is SIGTERM to both, up to GRACE_SECONDS for
everything to end, then SIGKILL. Which commands to stop, and when, is procs.py's business.
"""

import os
import signal
import subprocess
import time
from collections.abc import Collection, Mapping
from typing import Any

TOKEN_VAR = "NGINX_EVAL_PROC_TOKEN"
GRACE_SECONDS = 3


def pids_with_token(token: str) -> list[int]:
    """The pids of the processes, other than this one, whose environment carries `token`."""
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


def _live_processes(tokens: Collection[str]) -> tuple[dict[str, list[int]], set[int]]:
    """({token: [pids of live processes carrying it]}, {pgids of live processes}) from one
    look at /proc; zombies do not count (they are dead, only not reaped yet)."""
    needles = {f"{TOKEN_VAR}={t}".encode(): t for t in tokens}
    carriers: dict[str, list[int]] = {t: [] for t in tokens}
    groups: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[0] == b"Z":
                continue
            groups.add(int(fields[2]))
            if needles:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    for item in f.read().split(b"\0"):
                        if item in needles:
                            carriers[needles[item]].append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return carriers, groups


def stop_commands(commands: Mapping[str, int | None], grace: float = GRACE_SECONDS) -> None:
    """What kill_command does at the time limit, for many commands at once and without their
    Popen objects: SIGTERM to each command's process group and to every process carrying its
    token, up to `grace` seconds for all of them to end, then SIGKILL. commands: {token: pgid
    or None}."""
    if not commands:
        return
    deadline = time.monotonic() + grace
    for sig in (signal.SIGTERM, signal.SIGKILL):
        carriers, groups = _live_processes(commands)
        for token, pgid in commands.items():
            if pgid and pgid in groups:
                try:
                    os.killpg(pgid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            for pid in carriers[token]:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        while sig == signal.SIGTERM and time.monotonic() < deadline:
            carriers, groups = _live_processes(commands)
            if not any(carriers.values()) and not any(g in groups for g in commands.values()):
                return
            time.sleep(0.05)


def kill_command(proc: "subprocess.Popen[Any]", token: str) -> None:
    """SIGTERM to the command's process group (proc: its Popen, the leader) and to every
    process carrying its token, up to GRACE_SECONDS for all of them to end, then SIGKILL."""
    pgid = proc.pid
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        carriers = pids_with_token(token)
        for pid in carriers:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if sig == signal.SIGTERM:
            # The usual end: the command has exited and left nothing behind. Nothing is left to
            # wait for or to kill, and the look at /proc the SIGKILL round would take again
            # (the dearest part of stopping a command) would find nothing either.
            if not carriers and proc.poll() is not None and not _group_alive(pgid):
                return
            deadline = time.monotonic() + GRACE_SECONDS
            # poll() reaps the leader: a zombie leader keeps its group alive for killpg.
            while time.monotonic() < deadline and (
                proc.poll() is None or _group_alive(pgid) or pids_with_token(token)
            ):
                time.sleep(0.05)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def stop_children_first(proc: "subprocess.Popen[Any]", token: str) -> None:
    """Stop everything the command started, then give the command itself a moment to finish."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids_with_token(token):
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


# Set by the command a sandbox starts (sandbox.INNER) for itself and what it starts: the agent's
# processes, as opposed to the sandbox's own (bubblewrap, its proxy bridges, its seccomp helper).
INSIDE_VAR = "NGINX_EVAL_INSIDE"
# How long an isolated agent may take to end after its SIGTERM: the CLI writes its cost then.
INSIDE_GRACE_SECONDS = 10


def _carries(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def stop_inside_first(
    proc: "subprocess.Popen[Any]", token: str, grace: float = INSIDE_GRACE_SECONDS
) -> None:
    """SIGTERM to the agent's processes inside the command's sandbox (those carrying
    INSIDE_VAR), not to the sandbox: bubblewrap, or a process between it and the agent, killed
    first would take the agent with it before it writes what it has. Up to `grace` seconds for
    the command to end; the caller then stops what is left as usual."""
    inside = f"{INSIDE_VAR}=1".encode()
    for pid in pids_with_token(token):
        if pid != proc.pid and _carries(pid, inside):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
