"""Advisory file locks for cache entries shared by parallel doit workers and processes."""

import contextlib
import fcntl
import os


@contextlib.contextmanager
def locked(path, *, blocking=True):
    """Hold an exclusive flock on `path`; with blocking=False raise BlockingIOError when held."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        yield
    finally:
        os.close(fd)
