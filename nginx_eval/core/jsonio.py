"""Small helpers for the JSON files that stages hand to each other, and for the small scripts the
harness installs into its cache (``install_executable``).

Every file is written atomically (temp file + rename), so a reader never sees half a file
and a killed run leaves either the old version or the new one. Its permission bits are those
any program's new file gets, 0666 less the umask (0644 under the usual 022): result files are
read by people and tools other than the harness (tempfile.mkstemp's 0600 made report.md and
grade.json unreadable to them).
"""

import hashlib
import json
import os
import secrets
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def write_json(path: str | Path, data: Any) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def write_text(path: str | Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def _temporary(path: Path) -> tuple[int, str]:
    """(fd, name) of a new file beside `path`, created as open() creates one (0666 less the
    umask, which the kernel applies: reading the umask would mean setting it, process-wide, while
    other threads create files)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = os.path.join(path.parent, f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue


def write_bytes(path: str | Path, data: bytes, mode: int | None = None, sync: bool = True) -> None:
    """Write `data` to `path` atomically. `mode`: the file's permission bits (else 0666 less
    the umask); `sync`: fsync before the rename (a page that is rendered again if a crash cuts
    it can skip it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _temporary(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def install_executable(path: str | Path, data: bytes) -> Path:
    """Make `path` an executable file holding `data` (bytes), unless it already is. The file is
    replaced whole, so threads and processes installing it at once never run a partial one."""
    path = Path(path)
    if path.is_file() and path.read_bytes() == data and os.access(path, os.X_OK):
        return path
    write_bytes(path, data, mode=0o755)
    return path


def write_jsonl(path: str | Path, rows: Iterable[Any]) -> None:
    write_text(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def read_json(path: str | Path, default: Any = None) -> Any:
    """Read a JSON file; `default` when it is missing or unreadable (a damaged file counts as
    absent)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return default


def read_jsonl(path: str | Path) -> list[Any]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def digest(value: Any) -> str:
    """A stable sha256 of any JSON-able value (or bytes): the key of caches and input stamps."""
    if isinstance(value, bytes):
        data = value
    else:
        data = json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(data).hexdigest()


# Digests of files this process has read, by what stat says of them (see file_digest).
_digests: dict[str, tuple[tuple[int, ...], str]] = {}
# A file changed less than this before the process started may change again within the same
# tick of the file system's clock, unseen by stat: its digest is never kept (git's "racy" rule).
RACY_NS = 1_000_000_000
_STARTED_NS = time.time_ns()


def file_digest(path: str | Path) -> str:
    """The sha256 of the file's contents. A no-op rerun asks for the same few thousand files
    many times (each stage's output is the next one's input); a digest is kept for a file whose
    inode, size, mtime and ctime are as they were, and that nothing changed since a second
    before this process started. Every write (a rename here, or a write in place) and even a
    utime() sets the ctime to now, so a file changed during the run is always read again."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    known = _digests.get(str(path))
    if known and known[0] == key:
        return known[1]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    value = h.hexdigest()
    if st.st_ctime_ns < _STARTED_NS - RACY_NS:
        _digests[str(path)] = (key, value)
    return value
