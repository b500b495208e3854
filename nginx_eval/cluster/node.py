"""What a unit's work knows of where it runs, and the unit's files as they travel
(executor.py, rayexec.py).

A work function runs either in the doit process or on a node for a coordinator elsewhere
(``on_node``). Between the two, a unit's files travel as ``{path relative to the unit's results
directory: bytes}`` (``read_unit_files``, ``write_unit_files``).
"""

import contextlib
import contextvars
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from ..core import jsonio


class UnitLost(Exception):
    """An agent run whose node was lost on every try (rayexec.RayBackend.run); errors: why,
    per try."""

    def __init__(self, errors: Sequence[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = list(errors)


# Whether this call works on a unit for a coordinator elsewhere (working_on_node).
_on_node: contextvars.ContextVar[bool] = contextvars.ContextVar("on_node", default=False)


def on_node() -> bool:
    """True inside a work function run for a coordinator on another machine (rayexec)."""
    return _on_node.get()


@contextlib.contextmanager
def working_on_node() -> Iterator[None]:
    """While the block runs a unit's work for a coordinator elsewhere (rayexec.run_on_node)."""
    token = _on_node.set(True)
    try:
        yield
    finally:
        _on_node.reset(token)


def read_unit_files(unit_dir: Path, names: Iterable[str]) -> dict[str, bytes]:
    """{relative path: bytes} of `names` under unit_dir, directories walked; absent ones left
    out (the work sees them absent too)."""
    out = {}
    for name in names:
        path = unit_dir / name.rstrip("/")
        if path.is_dir():
            for f in sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()):
                out[str(f.relative_to(unit_dir))] = f.read_bytes()
        elif path.is_file():
            out[name] = path.read_bytes()
    return out


def write_unit_files(unit_dir: Path, names: Iterable[str], files: Mapping[str, bytes]) -> None:
    """Replace `names` under unit_dir by `files` ({relative path: bytes}): what a node made
    replaces what was here, and nothing of an older run stays beside it."""
    for name in names:
        path = unit_dir / name.rstrip("/")
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    # The JSON records last: a record on disk means its files are there.
    for rel in sorted(files, key=lambda r: (r.endswith(".json") and "/" not in r, r)):
        target = unit_dir / rel
        if not target.resolve().is_relative_to(unit_dir.resolve()):
            raise ValueError(f"a node sent a file outside the unit's directory: {rel}")
        target.parent.mkdir(parents=True, exist_ok=True)
        jsonio.write_bytes(target, files[rel])
