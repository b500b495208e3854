"""doit's database backend for nginx-eval (registered as the doit BACKEND plugin ``nginx_eval``).

The database is a disposable cache: every task's freshness is read from its own output
(stamps.py), so losing it, or a kill -9 before doit saved it, repeats nothing. This backend is
doit's SQLite one with three changes:

- a damaged file is moved aside and started afresh, with one line saying so, instead of stopping
  every command;
- ``doit forget TASK`` is remembered as a marker file until a run redoes TASK: every stage's
  freshness is its own stamp, not this database, so a forgotten row alone would redo nothing.
  pipeline.redo_forgotten makes a forgotten task out of date and answers the marker once its
  actions succeed; the agent and build stages, which trust their output even against
  ``doit run -a``, ask ``forgotten`` too;
- what doit saves of a task is written to the file as it comes (one row, committed at once,
  with WAL and synchronous=off), and neither what it saves nor what it reads is kept in memory:
  doit's SqliteDB keeps every task's row in a dict until the run ends, and loses them all to a
  kill (docs/performance.md). The last 2 rows read or written are kept (doit asks for a task's
  keys one at a time). A row that cannot be written (a full disk) is kept in memory, with one
  warning, and written when doit closes the database, as doit's own backend does.
"""

import hashlib
import os
import sqlite3
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doit.dependency import SqliteDB

if TYPE_CHECKING:
    from ..core.layout import Layout

# Rows kept after a read or write: doit asks for one task's keys together, and a results task's
# row (a state for each of its 591 files) is about 280 KiB decoded.
RECENT_ROWS = 2


def _marker_dir(db_path: str | Path) -> Path:
    return Path(str(db_path) + ".forgotten")


def _marker(db_path: str | Path, task_id: str) -> Path:
    return _marker_dir(db_path) / hashlib.sha256(task_id.encode()).hexdigest()


class DurableDB(SqliteDB):
    desc = "SQLite, rebuilt when damaged, remembers forgotten agents (nginx-eval)"

    def __init__(self, name: str, codec: Any, *, module_name: str | None = None) -> None:
        self._recent: OrderedDict[str, dict[str, Any]] = OrderedDict()
        os.makedirs(os.path.dirname(os.path.abspath(name)) or ".", exist_ok=True)
        try:
            super().__init__(name, codec, module_name=module_name)
            self._conn.execute("pragma journal_mode=wal")
            self._conn.execute("pragma synchronous=off")
            if self._conn.execute("pragma quick_check").fetchone()["quick_check"] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
        except Exception as e:  # doit wraps sqlite errors in its own exception type
            if "locked" in str(e) or "busy" in str(e):
                # Another process (doit list during a run) is writing: busy is not damaged.
                raise
            aside = f"{name}.damaged-{int(time.time())}"
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(name + suffix):
                    os.replace(name + suffix, aside + suffix)
            sys.stderr.write(
                f"nginx-eval: doit database {name} was damaged ({e}); moved to "
                f"{aside} and rebuilt from the result files\n"
            )
            super().__init__(name, codec, module_name=module_name)

    def _row(self, task_id: str) -> dict[str, Any]:
        """A task's row: unwritten (in _cache), read lately, or read now and remembered a while:
        doit asks for a task's keys one after the other (one per file_dep), and decoding the row
        for each made a rerun quadratic in a results task's thousand files."""
        data = self._cache.get(task_id)
        if data is None:
            data = self._recent.get(task_id)
        if data is None:
            data = self._remember(task_id, self._get_task_data(task_id))
        return data

    def _remember(self, task_id: str, data: dict[str, Any]) -> dict[str, Any]:
        self._recent[task_id] = data
        self._recent.move_to_end(task_id)
        while len(self._recent) > RECENT_ROWS:
            self._recent.popitem(last=False)
        return data

    def get(self, task_id: str, dependency: str) -> Any:
        return self._row(task_id).get(dependency)

    def set(self, task_id: str, dependency: str, value: Any) -> None:
        data = dict(self._row(task_id))
        data[dependency] = value
        try:
            self._conn.execute(
                "insert or replace into doit values (?,?)", (task_id, self.codec.encode(data))
            )
            self._conn.commit()
        except sqlite3.OperationalError as e:  # a full disk: kept in memory as doit would
            self._conn.rollback()
            if not self._dirty:
                sys.stderr.write(
                    f"nginx-eval: warning: doit database {self.name}: {e}; "
                    "what doit saves is kept in memory until the run ends\n"
                )
            self._cache[task_id] = data
            self._dirty.add(task_id)
        else:
            self._cache.pop(task_id, None)
            self._dirty.discard(task_id)
            self._remember(task_id, data)

    def in_(self, task_id: str) -> bool:
        return (
            task_id in self._cache
            or self._conn.execute("select task_id from doit where task_id=?", (task_id,)).fetchone()
            is not None
        )

    def remove(self, task_id: str) -> None:
        self._recent.pop(task_id, None)
        super().remove(task_id)
        self._conn.commit()
        marker = _marker(self.name, task_id)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(task_id + "\n")


def forgotten_tasks(layout: "Layout") -> set[str]:
    """The names of the tasks that ``doit forget`` asked for and no run has redone yet."""
    names: set[str] = set()
    try:
        markers = list(_marker_dir(layout.doit_db).iterdir())
    except FileNotFoundError:
        return names
    for marker in markers:
        try:
            names.add(marker.read_text().strip())
        except OSError:
            pass  # being answered by another process
    return names


def answer_forgotten(layout: "Layout", task_id: str) -> None:
    """A doit action after a forgotten task's own: the request is answered (None: doit takes
    False for a failure)."""
    consume_forgotten(layout, task_id)


def forgotten(layout: "Layout", task_id: str) -> bool:
    """Whether ``doit forget task_id`` is pending (without consuming it)."""
    return _marker(layout.doit_db, task_id).exists()


def consume_forgotten(layout: "Layout", task_id: str) -> bool:
    """True once after ``doit forget task_id``."""
    marker = _marker(layout.doit_db, task_id)
    try:
        marker.unlink()
        return True
    except FileNotFoundError:
        return False
