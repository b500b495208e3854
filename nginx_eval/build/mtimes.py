"""Timestamps of a copied build tree: make must see every changed file, and prove that it did.

Timestamps are not trusted: a copied tree (``cp -a`` of a published one, mtimes kept) may hold
objects dated after the sources a patch changes (a clock stepped back, a cache from another host).
Before make, the files a patch or a sibling sync changed get an mtime later than every other file
of the tree (stamp_changed); after make, each changed source must be older than the objects that
read it and than objs/nginx (unproven), or build.py falls back to a clean build.
"""

import os
import stat
import time


def _tree_files(tree):
    for dirpath, _, filenames in os.walk(tree):
        for name in filenames:
            yield os.path.join(dirpath, name)


def _newest_other_mtime(tree, changed, now):
    """The newest mtime of the files of `tree` not in `changed`, after bringing those dated
    after `now` back to now."""
    newest = 0
    for path in _tree_files(tree):
        if path in changed:
            continue
        mtime = os.lstat(path).st_mtime_ns
        if mtime > now:
            os.utime(path, ns=(now, now), follow_symlinks=False)
            mtime = now
        newest = max(newest, mtime)
    return newest


def stamp_changed(tree, paths):
    """Give the changed files `paths` (relative to tree) an mtime later than every other file of
    the tree, whatever the copied mtimes say: the newest other mtime + 1 s, and at least now.
    Files dated after now (a clock stepped back, a cache from another host) are first brought
    back to now; otherwise the stamp would lie in the future and what make writes would look
    older than its sources. Then wait until the clock has passed the stamp, for the same reason."""
    tree = os.path.realpath(tree)
    changed = {os.path.join(tree, p) for p in paths}
    now = time.time_ns()
    stamp = max(_newest_other_mtime(tree, changed, now) + 1_000_000_000, now)
    for path in changed:
        # Regular files inside the tree only: a patch may add symlinks, to anywhere.
        if (os.path.realpath(path).startswith(tree + os.sep) and os.path.lexists(path)
                and stat.S_ISREG(os.lstat(path).st_mode)):
            os.utime(path, ns=(stamp, stamp), follow_symlinks=False)
    # File times come from a clock that may lag time.time_ns() by a tick: a margin of 20 ms.
    time.sleep(max(0, stamp + 20_000_000 - time.time_ns()) / 1e9)


def _mtime(path):
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def _dependency_readers(tree):
    """{source: [objects whose compile read it]} from the compiler's .d files (EXTRA_CC_OPT's
    -MD), paths relative to tree; None when the tree has no .d file (its Makefile does not pass
    the option on)."""
    tree = str(tree)
    relative = lambda p: os.path.relpath(os.path.normpath(os.path.join(tree, p)), tree)
    readers, found = {}, False
    for path in _tree_files(os.path.join(tree, "objs")):
        if not path.endswith(".d"):
            continue
        found = True
        with open(path, errors="replace") as f:
            # "objs/src/core/nginx.o: src/core/nginx.c src/core/ngx_config.h \<newline> ..."
            rule = f.read().replace("\\\n", " ").split("\n", 1)[0]
        target, _, deps = rule.partition(": ")
        for dep in deps.split():
            readers.setdefault(relative(dep), []).append(relative(target))
    return readers if found else None


def unproven(tree, paths):
    """Why the make that just ran may not have rebuilt what the changed files `paths` go into,
    or None. Each changed .c or .h file must be older than objs/nginx and than each object
    that reads it: its own (objs/<path>.o) and those whose .d file names it. Without .d files a
    header's readers are unknown and objs/nginx alone is checked. A source that no compile of
    this configuration reads (no object, no .d names it: src/os/win32/, a module left out) has
    nothing to prove."""
    sources = [p for p in paths if p.endswith((".c", ".h")) and os.path.isfile(tree / p)]
    readers = _dependency_readers(tree) if sources else None
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
