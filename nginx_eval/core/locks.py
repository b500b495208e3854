"""Advisory file locks for cache entries shared by parallel doit workers and processes, and the
locks a doit process holds for its whole life on the run it works on (see cli.py)."""

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(path: str | Path, *, blocking: bool = True) -> Iterator[None]:
    """Hold an exclusive flock on `path`; with blocking=False raise BlockingIOError when held."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        yield
    finally:
        os.close(fd)


# Locks this process holds until it exits: {real path: fd}. A second request for the same path
# from this process must not take it again: flock would refuse a second descriptor of our own.
_held: dict[str, int] = {}


class Busy(Exception):
    """Another process holds the lock; .pid is its process id (None when it cannot be told)."""

    def __init__(self, path: str | Path, pid: int | None) -> None:
        super().__init__(f"{path} is locked by pid {pid}")
        self.path, self.pid = path, pid


def hold_until_exit(path: str | Path) -> None:
    """Take an exclusive flock on `path` (a directory, or a file created if needed) that lasts as
    long as this process, or raise Busy. Worker processes doit forks inherit the descriptor, and
    with it the lock; programs the tasks start do not (Python opens it close-on-exec)."""
    key = os.path.realpath(path)
    if key in _held:
        return
    if not os.path.isdir(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    flags = os.O_RDONLY if os.path.isdir(path) else os.O_RDWR | os.O_CREAT
    fd = os.open(path, flags, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Busy(path, holder_pid(path)) from None
    _held[key] = fd


def holder_pid(path: str | Path) -> int | None:
    """The pid holding a flock on `path`, from /proc/locks (Linux), or None."""
    try:
        st = os.stat(path)
        with open("/proc/locks", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4078 fe:00:2156063 0 EOF"; waiters have "->" after the number.
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == inode:
            return int(fields[4]) if fields[4].isdigit() else None
    return None
