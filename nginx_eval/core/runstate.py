"""What one doit invocation remembers while it runs, in one object instead of the modules' globals.

The front begins a run once per doit invocation (``begin``, cli.load_dodo) and the parts that
remember something reach it through ``current()``: the commands it started and its interrupt
(procs.py), its slots (limits.py), where its units run (cluster/executor.py), the dispatcher's
limits (doitext/scheduling.py), what ``doit clean`` removed (doitext/cleaning.py), the builds that
failed in it (build/cache.py) and the tasks it finished (cli.py). Two runs in one process (the
tests) each start clean. doit's worker processes (``-P process``) are forked with a copy of the
run, as of everything else; they write to their copy only.

Outside a doit run (unit tests, scripts) the state of a run that was never begun holds the
defaults: nothing limited, nothing interrupted, units run here.

What stays in a module, per process, is named in tests/test_run_state.py (ALLOWED) with its reason;
per-call context (the unit a thread works on, the slots of a Ray node's unit) is a ContextVar.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from .records import BuildRecord

if TYPE_CHECKING:
    from .layout import Layout


class UnitBackend(Protocol):
    """Where units run when not in this process (cluster/rayexec.RayBackend)."""

    counts: dict[str, int]  # {kind: slots across the cluster}

    def run(
        self,
        kind: str,
        work: Callable[..., Any],
        layout: "Layout",
        mode_name: str,
        iid: str,
        args: Sequence[Any],
        ship_in: list[str],
        ship_out: list[str],
        repos: list[Any],
        forward: tuple[str, ...] = (),
    ) -> Any: ...


@dataclass
class Interrupt:
    """The SIGINT and SIGTERM handlers' state (procs.stop_on_signals)."""

    running_dir: str | None = None  # the run's directory of token files
    main_pid: int | None = None  # the doit process (not a worker it forked)
    report: Callable[[int, int], None] | None = None  # says what was stopped, once
    stopping: bool = False  # an interrupt is being handled
    starting: bool = False  # the main thread is starting a command
    deferred: int | None = None  # a signal that waits for that command to be registered


@dataclass
class CleanTally:
    """What `doit clean` removed, or would remove (doitext/cleaning.py)."""

    counts: dict[str, int] = field(default_factory=dict)  # {kind: items}
    bytes: int = 0
    seen: set[str] = field(default_factory=set)  # paths counted already


@dataclass
class RunState:
    # procs.py: the commands this process runs, {token: (process group, pid that started it)};
    # a worker process inherits its parent's entries, and only its own are its to stop.
    commands: dict[str, tuple[int, int]] = field(default_factory=dict)
    # procs.py: threads of this process that run a doit task (task_running).
    busy_threads: set[int] = field(default_factory=set)
    interrupt: Interrupt = field(default_factory=Interrupt)
    # limits.py: the run's slots, its Layout and {kind: count}; no Layout: nothing limited.
    slots_layout: "Layout | None" = None
    slot_counts: dict[str, int] = field(default_factory=dict)
    # cluster/executor.py: where units run, "local" or "ray", and the backend of "ray".
    executor: str = "local"
    backend: UnitBackend | None = None
    # doitext/scheduling.py: {kind: most tasks of it handed out at once}; empty: none held back.
    dispatch_limits: dict[str, int] = field(default_factory=dict)
    # doitext/cleaning.py
    cleaned: CleanTally = field(default_factory=CleanTally)
    # build/cache.py: {(cache, key): env_error record} of the builds that failed in this run; the
    # next run tries them again, this one does not.
    failed_builds: dict[tuple[str, str], BuildRecord] = field(default_factory=dict)
    # cli.py: tasks with actions that doit executed successfully (what an interrupt keeps).
    finished_tasks: int = 0
    # agent/sandbox.py: (srt program, PATH) pairs a sandbox of this run started with (the
    # preflight's self-test): no other start of theirs needs probing (sandbox_problem).
    srt_started: set[tuple[str, str]] = field(default_factory=set)


# The run of this process: the one module-level reference to a run's state (begin replaces it).
_current = RunState()


def begin() -> RunState:
    """A clean state for the doit invocation about to load its tasks (cli.load_dodo)."""
    global _current
    _current = RunState()
    return _current


def current() -> RunState:
    """The state of this process's run (see the module's docstring)."""
    return _current
