"""`doit clean`: what the clean actions removed, and one summary line instead of doit's output.

doit prints a line for every clean action of every selected task (hundreds for a run, none of them
saying what went), and nothing at the end. The clean actions (workspace.remove_workspace,
build/cache.py's remove_task_build and remove_base_build) record here what they removed and its size
on disk; the loader (cli.load_dodo) installs ``quiet_clean`` for the ``clean`` command, which hides
doit's per-action lines and the actions' own lines unless the command line has ``verbosity=2``
(``doit clean`` has no ``-v`` option, and doit parses a command's options before it reads dodo.py),
and prints one line when cleaning is done: ``nginx-eval: removed 2 workspaces, 11 builds, freed
214 MiB``.

With ``-n``/``--dry-run`` the actions remove nothing and the line says what would go.

doit offers no hook for this, so it wraps ``Clean.clean_tasks`` (doit 0.36, 0.37); if a later doit
lacks it, doit's own lines stay and the summary is printed at exit.
"""

import atexit
import os
import sys
from pathlib import Path
from typing import Any

from ..core import runstate

KINDS = (("workspace", "workspaces"), ("build", "builds"))


def disk_usage(path: str | Path) -> int:
    """Bytes the tree at `path` takes on disk (allocated blocks; each inode once), as du counts."""
    total, inodes = 0, set()
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [""] + dirnames + filenames:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in inodes:
                continue
            inodes.add((st.st_dev, st.st_ino))
            total += getattr(st, "st_blocks", 0) * 512 or st.st_size
    return total


def record(kind: str, path: str | Path) -> str | None:
    """Count `path` (a directory about to be removed) as one `kind` ("workspace" or "build")
    in the run's tally (core/runstate.py) and return the line to print for it; None when it
    does not exist or was counted already."""
    tally = runstate.current().cleaned
    if not os.path.isdir(path) or str(path) in tally.seen:
        return None
    size = disk_usage(path)
    tally.seen.add(str(path))
    tally.counts[kind] = tally.counts.get(kind, 0) + 1
    tally.bytes += size
    return f"{kind} {path} ({mib(size)})"


def mib(size: float) -> str:
    value = size / 2**20
    return f"{value:.0f} MiB" if value >= 10 or value == 0 else f"{value:.1f} MiB"


def summary(dryrun: bool = False) -> str:
    tally = runstate.current().cleaned
    counts = {kind: tally.counts.get(kind, 0) for kind, _ in KINDS}
    parts = [f"{counts[kind]} {kind if counts[kind] == 1 else plural}" for kind, plural in KINDS]
    if dryrun:
        return (
            f"nginx-eval: would remove {', '.join(parts)}, {mib(tally.bytes)} "
            "(dry run: nothing removed)"
        )
    return f"nginx-eval: removed {', '.join(parts)}, freed {mib(tally.bytes)}"


class _Discard:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def quiet_clean(verbose: bool) -> None:
    """Install the summary (and, unless `verbose`, the silence) for this `doit clean`."""
    from doit.cmd_clean import Clean

    clean_tasks = getattr(Clean, "clean_tasks", None)
    if clean_tasks is None:
        atexit.register(lambda: print(summary(), flush=True))
        return
    original = getattr(clean_tasks, "wrapped", clean_tasks)

    def clean_tasks_quietly(self: Any, tasks: Any, dryrun: bool, cleanforget: bool) -> None:
        out = self.outstream
        if not verbose:
            self.outstream = _Discard()
        try:
            original(self, tasks, dryrun, cleanforget)
        finally:
            self.outstream = out
        out.write(summary(dryrun) + "\n")
        out.flush()

    clean_tasks_quietly.wrapped = original  # type: ignore[attr-defined]
    Clean.clean_tasks = clean_tasks_quietly


def say(line: str | None, dryrun: bool) -> None:
    """A clean action's line for one removed item (shown with verbosity=2)."""
    if line:
        print(f"nginx-eval: {'would remove' if dryrun else 'removed'} {line}", file=sys.stdout)
