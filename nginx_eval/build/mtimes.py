"""Timestamps of a copied build tree: make must see every changed file, and prove that it did.

Timestamps are not trusted: a copied tree (``cp -a`` of a published one, mtimes kept) may hold
objects dated after the sources a patch changes (a clock stepped back, a cache from another host).
Before make, the files a patch or a sibling sync changed are dated after every other file of the
tree and before anything make writes (stamp_changed); after make, each changed source must be
older than the objects that read it and than objs/nginx (unproven), or build/stage.py falls back
to a clean build.
"""

import os
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

# Between the other files, the changed ones and what make writes: more than the coarsest file
# system timestamp (FAT's 2 s; ext4, xfs and btrfs keep nanoseconds) and than the lag of the
# kernel's file clock behind time.time_ns() (a tick), so that each group is strictly newer than
# the one before it on any file system.
GAP_NS = 2_000_000_000


def _tree_files(tree: str) -> Iterator[str]:
    for dirpath, _, filenames in os.walk(tree):
        for name in filenames:
            yield os.path.join(dirpath, name)


def _other_mtimes(tree: str, changed: set[str], now: int) -> dict[str, int]:
    """{path: mtime} of the files of `tree` not in `changed`, after bringing those dated after
    `now` back to now (a clock stepped back, a cache from another host)."""
    mtimes = {}
    for path in _tree_files(tree):
        if path in changed:
            continue
        mtime = os.lstat(path).st_mtime_ns
        if mtime > now:
            os.utime(path, ns=(now, now), follow_symlinks=False)
            mtime = now
        mtimes[path] = mtime
    return mtimes


def stamp_changed(tree: str | Path, paths: Iterable[str]) -> None:
    """Date the changed files `paths` (relative to tree) GAP_NS before now, and every other file
    of the tree at least GAP_NS before them, whatever the copied mtimes say: make then rebuilds
    what the changed files go into, and what it writes is newer than they are.

    The other files keep their order (make's view of what is up to date among them): when the
    newest of them is too recent (a base built seconds ago, files dated after now), all of them
    move back by the same amount. Nothing waits for the clock: the stamps lie in the past."""
    tree = os.path.realpath(tree)
    changed = {os.path.join(tree, p) for p in paths}
    now = time.time_ns()
    stamp = now - GAP_NS
    others = _other_mtimes(tree, changed, now)
    shift = max(others.values(), default=0) - (stamp - GAP_NS)
    if shift > 0:
        for path, mtime in others.items():
            os.utime(path, ns=(mtime - shift, mtime - shift), follow_symlinks=False)
    for path in changed:
        # Regular files inside the tree only: a patch may add symlinks, to anywhere.
        if (
            os.path.realpath(path).startswith(tree + os.sep)
            and os.path.lexists(path)
            and stat.S_ISREG(os.lstat(path).st_mode)
        ):
            os.utime(path, ns=(stamp, stamp), follow_symlinks=False)


def _mtime(path: str | Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def _relative(tree: str, path: str) -> str | None:
    """`path` of a .d file relative to tree, or None outside it (the system's headers: no patch
    changes those). nginx's Makefile compiles from the tree's root, so its own paths are plain
    relative ones already; normalizing each of the tens of thousands of names in a tree's .d
    files would take most of a second."""
    if os.path.isabs(path):
        if not path.startswith(tree + os.sep):
            return None
        path = path[len(tree) + 1 :]
    if "./" in path or "//" in path:
        path = os.path.normpath(path)
        if path.startswith(".."):
            return None
    return path


def _dependency_readers(tree: str | Path, sources: Iterable[str]) -> dict[str, list[str]] | None:
    """{source: [objects whose compile read it]} for the `sources` (paths relative to tree) from
    the compiler's .d files (EXTRA_CC_OPT's -MD); None when the tree has no .d file (its
    Makefile does not pass the option on)."""
    tree, wanted = str(tree), set(sources)
    readers: dict[str, list[str]] = {}
    found = False
    for path in _tree_files(os.path.join(tree, "objs")):
        if not path.endswith(".d"):
            continue
        found = True
        with open(path, errors="replace") as f:
            # "objs/src/core/nginx.o: src/core/nginx.c src/core/ngx_config.h \<newline> ..."
            rule = f.read().replace("\\\n", " ").split("\n", 1)[0]
        target, _, deps = rule.partition(": ")
        # An object outside the tree (never one of nginx's Makefile) is none of this build's.
        reader = _relative(tree, target)
        for name in deps.split():
            dep = _relative(tree, name)
            if dep is not None and dep in wanted and reader is not None:
                readers.setdefault(dep, []).append(reader)
    return readers if found else None


def unproven(tree: Path, paths: Iterable[str]) -> str | None:
    """Why the make that just ran may not have rebuilt what the changed files `paths` go into,
    or None. Each changed .c or .h file must be older than objs/nginx and than each object
    that reads it: its own (objs/<path>.o) and those whose .d file names it. Without .d files a
    header's readers are unknown and objs/nginx alone is checked. A source that no compile of
    this configuration reads (no object, no .d names it: src/os/win32/, a module left out) has
    nothing to prove."""
    sources = [p for p in paths if p.endswith((".c", ".h")) and os.path.isfile(tree / p)]
    readers = _dependency_readers(tree, sources) if sources else None
    for src in sources:
        objects = list((readers or {}).get(src, []))
        own = f"objs/{src[:-2]}.o"
        if src.endswith(".c") and os.path.exists(tree / own):
            objects.append(own)
        if not objects and not (readers is None and src.endswith(".h")):
            continue
        changed_at = _mtime(tree / src)
        for target in objects + ["objs/nginx"]:
            if _mtime(tree / target) <= changed_at:
                return f"{target} is not newer than the changed {src}"
    return None
