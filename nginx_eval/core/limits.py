"""Separate limits per kind of work inside one ``doit run``: agent phases, builds and proves.

doit's ``-n N`` caps everything at once, but the three kinds of work wait on different things:
an agent phase on the API (minutes, almost no CPU), a build on the CPU, a prove on sockets and
timers (some CPU). ``agents=N builds=N proves=N`` (options.py) give each kind its own limit, so a
run can use ``-n 20`` for the agents while only ``builds=`` compiles share the cores. ``-n``
still caps the total; below it, the limit of the kind decides.

**Slots.** Each kind has N slots, the files ``<cache>/locks/slots-<run>/<kind>-<i>.lock``; a
command holds one with an exclusive ``flock`` while it runs (``slot``): each configure and make
step of a build (build/steps.py), each prove file run (prove/stage.py), each agent phase
(agent/stage.py). flock works between the threads of ``-P thread`` (each holder opens the file anew,
and flocks of separate opens exclude each other) and between the worker processes of ``-P process``,
and the kernel drops the lock when its process dies, so a killed worker never keeps a slot. A
command asks every slot without blocking, then polls: a waiter stops at once when the run is
interrupted (procs.stop_on_signals; a blocking flock would sleep through the interrupt in a worker
thread).

**Time.** A stage's time counts its work, not its place in the queue: ``Stopwatch`` measures
wall time minus this thread's waits for slots (build/stage.py's ``seconds``).

Outside ``doit run`` (unit tests calling a stage's functions, scripts/bench.py's naive loop)
nothing is configured and ``slot`` limits nothing. With ``executor=ray`` the work runs on the
cluster's nodes, and their slots come from one keeper for the whole cluster (``shared_slots``,
rayexec.SlotKeeper).
"""

import contextlib
import contextvars
import fcntl
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from . import procs, runstate

if TYPE_CHECKING:
    from .layout import Layout

# Kind of work -> the command-line variable that limits it.
KINDS = {"agent": "agents", "build": "builds", "prove": "proves"}
# How often a waiter asks the slots again (a little random: waiters do not move in step).
POLL_SECONDS = (0.05, 0.15)


class Given(Protocol):
    """The command line's limits (run/options.Options): agents=, builds=, proves=, None where
    not given. Core names no type of a higher layer."""

    @property
    def agents(self) -> int | None: ...
    @property
    def builds(self) -> int | None: ...
    @property
    def proves(self) -> int | None: ...


class SharedSlots(Protocol):
    """The slots of a cluster's run (rayexec.SharedSlots): a token for a free slot, or None."""

    def try_take(self, kind: str) -> str | None: ...
    def give_back(self, token: str) -> None: ...


# The cluster's slots while a node works on one unit (shared_slots); None: the run's own.
_shared: contextvars.ContextVar[SharedSlots | None] = contextvars.ContextVar(
    "shared_slots", default=None
)
# Seconds this thread (its context) has spent waiting for slots so far (Stopwatch).
_waited: contextvars.ContextVar[float] = contextvars.ContextVar("waited_seconds", default=0.0)


# The processors a test file of the shipped benchmark keeps busy while it runs: measured, its
# prove, perl and nginx used 0.29 CPU s per file over 29 files of 26 tasks whose wall time was
# 36 to 46 s (0.18 to 0.23 of a processor; scripts/bench.py prints it for every run). 0.25 leaves
# room for the harness and for builds beside the proves.
PROVE_CPU_SHARE = 0.25


def default_counts(cores: int | None = None) -> dict[str, int]:
    """{variable: count} when the command line names none, from the number of cores.

    agents: 8. An agent phase waits on the API and uses next to no CPU; what bounds it is the
      account's rate limit and the memory of the agent programs (a few hundred MB each), not
      the cores. 8 stays inside a common API tier; a bigger account sets agents= higher.
    builds: the cores, and at least 2. Each make already runs -j<cores>; a second build keeps
      the cores busy while the first runs its single-threaded configure or links.
    proves: the cores divided by PROVE_CPU_SHARE, four times the cores. A test file mostly
      waits on sockets and timers, and each has a network of its own (private_network.py)."""
    cores = cores or os.cpu_count() or 2
    return {"agents": 8, "builds": max(2, cores), "proves": round(cores / PROVE_CPU_SHARE)}


def chosen_counts(options: Given, cores: int | None = None) -> dict[str, int]:
    """{kind: count}: those of `options` (agents=, builds=, proves=), the defaults of `cores`
    for those not given."""
    defaults = default_counts(cores)
    return {kind: getattr(options, name, None) or defaults[name] for kind, name in KINDS.items()}


# Workers beyond one per slot: for the quick tasks between the limited ones (patch, grade,
# results), which would otherwise wait for a build or a prove to end before they can release
# the next one.
SPARE_WORKERS = 2


def worker_count(counts: dict[str, int]) -> int:
    """doit's number of workers (``-n``) when the command line gives none: one per slot of each
    kind ({kind: count}), so that every slot can be busy at once, and SPARE_WORKERS. doit's
    default, one worker, runs one unit at a time whatever the limits allow; the dispatcher
    hands out no more tasks of a kind than its slots (doitext/scheduling.py), so no worker
    sits waiting for a slot."""
    return sum(counts.values()) + SPARE_WORKERS


def configure(layout: "Layout", options: Given) -> None:
    """Turn the limits on for this doit process and the workers it forks (cli.py, `doit run`)."""
    run = runstate.current()
    run.slots_layout, run.slot_counts = layout, chosen_counts(options)


@contextlib.contextmanager
def shared_slots(shared: SharedSlots) -> Iterator[None]:
    """On a node of executor=ray (rayexec.py), while it works on one unit: take the slots from
    `shared` (its try_take(kind) -> token or None, give_back(token)), the run's slots across
    the cluster."""
    token = _shared.set(shared)
    try:
        yield
    finally:
        _shared.reset(token)


def counts() -> dict[str, int]:
    """{kind: count} of this run; {} outside `doit run`."""
    run = runstate.current()
    return dict(run.slot_counts) if run.slots_layout else {}


def slot_path(layout: "Layout", kind: str, index: int) -> Path:
    return layout.lock(f"slots-{layout.run}/{kind}-{index}")


def _try_slot(path: Path) -> int | None:
    """An open descriptor holding the flock on `path`, or None when another holder has it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _acquire(layout: "Layout", kind: str) -> int:
    """The descriptor of a free slot of `kind`, once there is one; Interrupted if the run is
    interrupted first."""
    count = runstate.current().slot_counts[kind]
    paths = [slot_path(layout, kind, i) for i in range(count)]
    os.makedirs(paths[0].parent, exist_ok=True)
    while True:
        if procs.interrupted():
            raise procs.Interrupted()
        for path in paths:
            fd = _try_slot(path)
            if fd is not None:
                return fd
        time.sleep(random.uniform(*POLL_SECONDS))


def waited_seconds() -> float:
    """The seconds this thread has waited for slots, in total (see Stopwatch)."""
    return _waited.get()


@contextlib.contextmanager
def slot(kind: str) -> Iterator[None]:
    """Hold one of this run's `kind` slots ("agent", "build", "prove") while the block runs;
    no limit outside `doit run`. Raises procs.Interrupted when the run is interrupted while it
    waits."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of work {kind!r} (known: {', '.join(KINDS)})")
    shared = _shared.get()
    if shared:
        with _shared_slot(shared, kind):
            yield
        return
    layout = runstate.current().slots_layout
    if not layout:
        yield
        return
    start = time.monotonic()
    fd = _acquire(layout, kind)
    _waited.set(waited_seconds() + time.monotonic() - start)
    try:
        yield
    finally:
        # Unlock before closing: a process forked meanwhile may share the descriptor.
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextlib.contextmanager
def _shared_slot(shared: SharedSlots, kind: str) -> Iterator[None]:
    """A slot of the cluster's (shared_slots), polled like the slot files."""
    start = time.monotonic()
    while True:
        token = shared.try_take(kind)
        if token is not None:
            break
        time.sleep(random.uniform(*POLL_SECONDS))
    _waited.set(waited_seconds() + time.monotonic() - start)
    try:
        yield
    finally:
        shared.give_back(token)


class Stopwatch:
    """Wall time since it was made, minus what this thread waited for slots meanwhile."""

    def __init__(self) -> None:
        self.start, self.waited = time.monotonic(), waited_seconds()

    def seconds(self) -> float:
        return time.monotonic() - self.start - (waited_seconds() - self.waited)
