"""The machine kept busy while ``<bench>:validate load=cpu`` proves; the conditions recorded.

A test can race with nginx: an assertion that an earlier state of nginx can also satisfy or fail
(a reload not finished, a worker of the old configuration still answering, a log line not yet
written). On a quiet machine the later state nearly always wins; on a busy one (a user's first
run, with builds and proves side by side) it sometimes loses. ``load=cpu`` makes validation run
in such conditions: one CPU-bound process per core (``os.cpu_count()``), at the niceness of the
doit run (they inherit it), for as long as any validation unit of the run proves. The proves of
other tasks run beside a unit's own through doit's ``-n``.

**Who keeps the load.** Each unit, while it proves, runs a ``busy`` thread that tries the run's
load lock (``<cache>/locks/load-<run>.lock``, a non-blocking flock) every POLL_SECONDS. The unit
that holds it starts the processes, writes their pids beside the lock and stops them, by pid,
when its proves end; a unit still proving then takes the lock over. A load process also exits
by itself when its parent goes (a killed doit worker leaves none behind).

**What a unit records** (validate.py's ``conditions``, core/records.py: ValidationConditions):
the UTC date, the repeats, the load asked for and its processes, the cores, and two
measurements sampled every POLL_SECONDS while it proved: ``load_coverage``, the share of samples
in which every load process of the run was alive (None without load), and ``loadavg``, the mean
one-minute load average (os.getloadavg).
"""

import contextlib
import datetime
import fcntl
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.records import ValidationConditions

if TYPE_CHECKING:
    from ..core.layout import Layout

POLL_SECONDS = 0.5
# A load process: busy until its parent (the doit process or worker that started it) is gone.
HOG = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n    sum(range(100000))\n"


def load_processes(load: str) -> int:
    """How many CPU-bound processes `load` (options.LOADS) keeps running."""
    return (os.cpu_count() or 1) if load == "cpu" else 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _running(pids_file: Path, count: int) -> bool:
    """Whether the load processes the holder wrote down are all alive, `count` of them."""
    try:
        pids = [int(p) for p in pids_file.read_text().split()]
    except (OSError, ValueError):
        return False
    return len(pids) == count and all(_alive(p) for p in pids)


class _Keeper(threading.Thread):
    def __init__(self, layout: "Layout", load: str) -> None:
        super().__init__(daemon=True, name="validation-load")
        self.count = load_processes(load)
        self.lock_path = layout.lock(f"load-{layout.run}")
        self.pids_file = self.lock_path.with_suffix(".pids")
        self.done = threading.Event()
        self.samples = 0
        self.covered = 0
        self.loadavg: list[float] = []
        self._fd: int | None = None
        self._procs: list[subprocess.Popen[bytes]] = []

    def _take_over(self) -> None:
        """Hold the run's load lock and start the load processes, if no unit holds it."""
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return
        self._fd = fd
        self._procs = [
            subprocess.Popen([sys.executable, "-c", HOG], stdin=subprocess.DEVNULL)
            for _ in range(self.count)
        ]
        tmp = self.pids_file.with_suffix(f".{os.getpid()}.{threading.get_ident()}")
        tmp.write_text(" ".join(str(p.pid) for p in self._procs) + "\n")
        os.replace(tmp, self.pids_file)

    def _give_back(self) -> None:
        for proc in self._procs:
            proc.kill()
        for proc in self._procs:
            proc.wait()
        self._procs = []
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def run(self) -> None:
        try:
            while True:
                if self.count and self._fd is None:
                    self._take_over()
                self.samples += 1
                self.covered += bool(self.count) and _running(self.pids_file, self.count)
                self.loadavg.append(os.getloadavg()[0])
                if self.done.wait(POLL_SECONDS):
                    return
        finally:
            self._give_back()

    def sampled(self) -> tuple[float | None, float | None]:
        """(load_coverage, loadavg) of ValidationConditions."""
        return (
            round(self.covered / self.samples, 3) if self.count and self.samples else None,
            round(sum(self.loadavg) / len(self.loadavg), 2) if self.loadavg else None,
        )


def conditions(repeats: int, load: str) -> ValidationConditions:
    """A validation's conditions before its proves: what was asked, and of which machine (what
    is sampled while it proves None until busy ends)."""
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "repeats": repeats,
        "load": load,
        "load_processes": load_processes(load),
        "cores": os.cpu_count() or 1,
        "load_coverage": None,
        "loadavg": None,
    }


@contextlib.contextmanager
def busy(layout: "Layout", load: str, into: ValidationConditions) -> Iterator[None]:
    """While the block runs: the run's load kept (by this unit or another) and the machine
    sampled; `into` gets load_coverage and loadavg when it ends."""
    keeper = _Keeper(layout, load)
    keeper.start()
    try:
        yield
    finally:
        keeper.done.set()
        keeper.join()
        into["load_coverage"], into["loadavg"] = keeper.sampled()
