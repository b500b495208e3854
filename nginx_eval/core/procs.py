"""Running untrusted or long commands: a time limit, and nothing left running afterwards.

Each command starts in a new session (its own process group) and carries a unique token in its
environment. At the limit the group gets SIGTERM, then SIGKILL; then every process that still
carries the token (children that escaped with setsid, daemons started by an agent) is killed too
(proctree.py finds and stops them; this module decides which commands, and when).

When doit itself is killed (kill -9, a lost machine session), nobody is left to do that. So a caller
can name a token file: the token is written there while the command runs, and the next run of the
same unit calls ``kill_leftovers`` on it before it starts again. A process that clears its own
environment and leaves its session escapes all of this but a PID namespace of the command's own,
emptied when its first process ends (sandbox.py, prove/namespaces.py, core/rootfs.py).

**Interrupts.** ``stop_on_signals`` (cli.py, for ``doit run``) makes SIGINT and SIGTERM stop
everything the run started, in every parallel mode of doit. Each process keeps a registry of the
commands it runs (token, process group; in the run's state, core/runstate.py), and while the
handlers are installed every command has a token file that also names its process group and the doit
process it belongs to (commands without a token file of their own get one under
``<running>/.other/``). The doit process, on a signal: stops its worker processes (which, on SIGTERM
or on a terminal's SIGINT, stop their own commands and exit at once: they never write a result after
their command was stopped), stops every command of its registry and of its token files as the time
limit does (SIGTERM to the process group and to the token's carriers, SIGKILL after GRACE_SECONDS),
and exits through SystemExit: doit closes its database, nothing of the interrupted units is written
(a thread whose command was stopped gets ``Interrupted``, and no new command starts), and what
finished stays.
"""

import atexit
import contextlib
import multiprocessing
import os
import select
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from resource import struct_rusage
from types import FrameType
from typing import IO, Any

from . import runstate
from .proctree import (
    GRACE_SECONDS,
    TOKEN_VAR,
    kill_command,
    pids_with_token,
    stop_children_first,
    stop_commands,
    stop_inside_first,
)


@dataclass
class Outcome:
    exit_code: int | None
    seconds: float
    timed_out: bool
    # User plus system CPU time of the command and the children it waited for (make's
    # compilers, prove's nginx); None when the kernel could not say (see _wait_exit).
    cpu_seconds: float | None = None


class Interrupted(KeyboardInterrupt):
    """Raised by run_limited in a thread of an interrupted doit (see the module's docstring):
    its command was stopped, or would have started after the interrupt. doit's thread workers
    take it quietly, like the KeyboardInterrupt it is."""


# How long an interrupted doit waits for its other threads to finish the task they run.
THREAD_GRACE_SECONDS = 5


def interrupted() -> bool:
    """Whether this process is stopping on SIGINT or SIGTERM (stop_on_signals)."""
    return runstate.current().interrupt.stopping


def _write_token_file(path: str | Path, token: str, pgid: int | None = None) -> None:
    """`token pgid owner`: the token, the command's process group ("-" before it starts) and
    the pid of the doit process it belongs to. Written whole (rename), so that a reader never
    sees half of it."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    owner = runstate.current().interrupt.main_pid or os.getpid()
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(f"{token} {pgid or '-'} {owner}\n")
    os.replace(tmp, path)


def _read_token_file(path: str) -> tuple[str, int | None, int | None] | None:
    """(token, pgid or None, owner pid or None); a token file of an earlier version holds the
    token alone. None when there is none."""
    try:
        fields = open(path, encoding="ascii").read().split()
    except (OSError, UnicodeDecodeError):
        return None
    if not fields:
        return None
    number = lambda i: int(fields[i]) if len(fields) > i and fields[i].isdigit() else None
    return fields[0], number(1), number(2)


def kill_leftovers(token_file: str | Path) -> None:
    """Kill what a run_limited of an earlier, killed harness process left running (see above)."""
    try:
        fields = open(token_file, encoding="ascii").read().split()
    except (FileNotFoundError, UnicodeDecodeError):
        return
    token = fields[0] if fields else ""
    # No SIGTERM first: these processes outlived their time limit already.
    for pid in pids_with_token(token) if token else ():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    Path(token_file).unlink(missing_ok=True)


def run_query(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> "subprocess.CompletedProcess[str]":
    """A short command that answers in text (a version, a probe, a check): no standard input,
    its output and errors captured as text, at most `timeout` seconds (then
    subprocess.TimeoutExpired, as subprocess.run raises it). For the long commands of the
    pipeline, run_limited."""
    return subprocess.run(
        list(argv),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def run_limited(
    argv: Sequence[str],
    *,
    cwd: str | Path | None,
    env: Mapping[str, str],
    timeout: float,
    stdout: int | IO[Any] | None,
    stderr: int | IO[Any] | None,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    token_file: str | Path | None = None,
    children_first: bool = False,
    inside_first: bool = False,
) -> Outcome:
    """Run argv with a wall-clock limit; kill its whole process tree at the limit and on exit.
    token_file: where the token stays while the command runs (see kill_leftovers).
    children_first: at the limit, stop what the command started before the command itself, so
    that it can write what it has (prove keeps the TAP of a file until the file ends, when its
    output is not a terminal).
    inside_first: at the limit, stop what runs inside the command's sandbox before the sandbox
    (proctree.stop_inside_first).
    After an interrupt (stop_on_signals) it starts nothing and raises Interrupted instead of
    returning: the caller must not take a stopped command's outcome for a result."""
    if interrupted():
        raise Interrupted()
    token = uuid.uuid4().hex
    env = dict(env, **{TOKEN_VAR: token})
    token_file = _claim_token_file(token, token_file)
    start = time.monotonic()
    proc = _start_registered(
        argv, token, token_file, cwd=cwd, env=env, stdout=stdout, stderr=stderr, stdin=stdin
    )
    timed_out, usage = _wait_limited(proc, token, token_file, timeout, children_first, inside_first)
    # Also on a normal exit: background processes the command left behind must not outlive it.
    _end(proc, token, token_file)
    if interrupted():
        raise Interrupted()
    seconds = time.monotonic() - start
    cpu = round(usage.ru_utime + usage.ru_stime, 3) if usage else None
    return Outcome(
        exit_code=None if timed_out else proc.returncode,
        seconds=round(seconds, 3),
        timed_out=timed_out,
        cpu_seconds=cpu,
    )


def _claim_token_file(token: str, token_file: str | Path | None) -> str | Path | None:
    """The token file of a command about to start, holding its token: `token_file`, or one under
    the run's running directory while the interrupt handlers are installed, or None. Whatever
    an earlier, killed run left under that name is killed first."""
    running_dir = runstate.current().interrupt.running_dir
    if token_file is None and running_dir:
        token_file = os.path.join(running_dir, ".other", token)
    if token_file:
        kill_leftovers(token_file)
        _write_token_file(token_file, token)
    return token_file


def _start_registered(
    argv: Sequence[str], token: str, token_file: str | Path | None, **popen_args: Any
) -> "subprocess.Popen[bytes]":
    """Start argv in a session of its own and register it (the run's commands, its token file).

    A signal handled while the main thread starts a command waits until the command is
    registered (_on_signal): between fork and exec it carries no token yet, nobody could find it."""
    run = runstate.current()
    main_thread = threading.current_thread() is threading.main_thread()
    try:
        if main_thread:
            run.interrupt.starting = True
        try:
            proc = subprocess.Popen(argv, start_new_session=True, **popen_args)
        except BaseException:
            if token_file:
                Path(token_file).unlink(missing_ok=True)
            raise
        run.commands[token] = (proc.pid, os.getpid())
        if token_file:
            _write_token_file(token_file, token, proc.pid)
    finally:
        if main_thread:
            run.interrupt.starting = False
            if run.interrupt.deferred:
                _on_signal(run.interrupt.deferred, None)
    return proc


def _wait_exit(proc: "subprocess.Popen[bytes]", timeout: float) -> struct_rusage | None:
    """Wait up to `timeout` seconds for the command to exit and reap it: its resource usage
    (os.wait4), or None when it was reaped without one. Raises subprocess.TimeoutExpired.

    Popen.wait(timeout) polls with sleeps, the last of which every prove file and build step
    would add to its time; a pidfd wakes the wait the moment the command exits. Where the kernel
    has no pidfd (before Linux 5.3), Popen.wait does it."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        proc.wait(timeout=timeout)
        return None
    try:
        if not select.select([fd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        _, status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:
        proc.wait()  # reaped by Popen meanwhile: no usage to read
        return None
    finally:
        os.close(fd)
    # Popen answers wait() and poll() from returncode once it is set.
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage


def _wait_limited(
    proc: "subprocess.Popen[bytes]",
    token: str,
    token_file: str | Path | None,
    timeout: float,
    children_first: bool,
    inside_first: bool = False,
) -> tuple[bool, struct_rusage | None]:
    """Wait for the command up to `timeout` seconds: (whether it reached the limit, its resource
    usage or None). When anything else ends the wait (Interrupted, KeyboardInterrupt), the
    command is ended first."""
    try:
        if interrupted():  # interrupted while another thread started it
            raise Interrupted()
        usage = _wait_exit(proc, timeout)
    except subprocess.TimeoutExpired:
        if children_first:
            stop_children_first(proc, token)
        elif inside_first:
            stop_inside_first(proc, token)
        return True, None
    except BaseException:
        _end(proc, token, token_file)
        raise
    return False, usage


def _end(proc: "subprocess.Popen[bytes]", token: str, token_file: str | Path | None) -> None:
    """Kill what is left of the command's processes, reap it and forget it."""
    kill_command(proc, token)
    proc.wait()
    _forget(token, token_file)


def _forget(token: str, token_file: str | Path | None) -> None:
    runstate.current().commands.pop(token, None)
    if token_file:
        Path(token_file).unlink(missing_ok=True)


# -- interrupts ------------------------------------------------------------------------------


def stop_on_signals(running_dir: str | Path | None, report: Callable[[int, int], None]) -> None:
    """Install the SIGINT and SIGTERM handlers of a `doit run` process (see the module's
    docstring). running_dir: the run's directory of token files (None until the tasks are
    loaded, which starts no command). report(signum, stopped) is called in the doit process
    once everything is stopped, before it exits with 128 + signum; stopped is the number of
    commands it stopped. Call it from the main thread of the doit process, before doit starts
    its workers (they inherit the handlers); again to name the directory."""
    if threading.current_thread() is not threading.main_thread():
        return  # doit run from a thread of a program of its own: its signals
    if signal.getsignal(signal.SIGINT) is not _on_signal:
        atexit.register(_ignore_signals)
    stop = runstate.current().interrupt
    stop.running_dir = str(running_dir) if running_dir else None
    stop.report = report
    stop.main_pid = os.getpid() if multiprocessing.parent_process() is None else None
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)


def _ignore_signals() -> None:
    """At exit, when everything is done: Python's finalization would put SIGINT and SIGTERM back
    to their default actions, and a Ctrl-C in its last moments would kill the process with the
    signal (no exit code of doit's); ignored, they leave the run's outcome alone."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


@contextlib.contextmanager
def task_running() -> Iterator[None]:
    """Around the execution of a doit task (cli.py): an interrupted doit process lets the other
    threads that run one (-P thread) finish it before it exits. Those whose command it stopped
    end at once (Interrupted); the others write a finished unit. A thread still running at exit
    is stopped wherever it is, which a C++ library (matplotlib, drawing the report's chart)
    answers with abort()."""
    ident, busy = threading.get_ident(), runstate.current().busy_threads
    busy.add(ident)
    try:
        yield
    finally:
        busy.discard(ident)


def _own_commands() -> dict[str, int | None]:
    """{token: pgid} of the commands this process started and still runs."""
    commands = dict(runstate.current().commands)
    return {token: pgid for token, (pgid, pid) in commands.items() if pid == os.getpid()}


def _token_files() -> dict[str, tuple[str, int | None]]:
    """{path: (token, pgid)} of the token files of commands of this doit process (its threads and
    its workers): those of an earlier, killed doit are left to kill_leftovers."""
    found = {}
    for dirpath, _, names in os.walk(runstate.current().interrupt.running_dir or "/nonexistent"):
        for name in names:
            if name.endswith(".tmp"):
                continue
            path = os.path.join(dirpath, name)
            fields = _read_token_file(path)
            if fields and fields[2] == os.getpid():
                found[path] = fields[:2]
    return found


def _on_signal(signum: int, frame: FrameType | None) -> None:
    run = runstate.current()
    stop = run.interrupt
    if stop.starting and threading.current_thread() is threading.main_thread():
        # The main thread is starting a command (run_limited): handled once it is registered.
        stop.stopping = True
        stop.deferred = signum
        return
    if stop.stopping and not stop.deferred:
        return  # a second Ctrl-C while the first one is being handled
    stop.stopping, stop.deferred = True, None
    if os.getpid() != stop.main_pid:
        # A worker process of doit (-P process): its commands, then out, without a result.
        stop_commands(_own_commands())
        os._exit(128 + signum)
    commands = _own_commands()
    commands.update(_token_files().values())
    workers = multiprocessing.active_children()
    for worker in workers:
        if worker.pid is None:  # never started (active_children lists started ones)
            continue
        try:
            os.kill(worker.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + GRACE_SECONDS + 2
    stop_commands(commands)
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            worker.kill()
            worker.join(1)
    # Whatever a worker started before it stopped; then nothing of this run is left.
    files = _token_files()
    late = dict(_own_commands(), **dict(files.values()))
    stop_commands(late)
    for path in files:
        Path(path).unlink(missing_ok=True)
    deadline = time.monotonic() + THREAD_GRACE_SECONDS
    while run.busy_threads - {threading.get_ident()} and time.monotonic() < deadline:
        time.sleep(0.05)
    if stop.report:
        stop.report(signum, len(set(commands) | set(late)))
    raise SystemExit(128 + signum)
