"""Directory trees the harness makes read-only (published builds, test trees) or that an agent
may leave read-only (workspaces), their files' stat, and their removal."""

import contextlib
import os
import shutil
import stat
from pathlib import Path


def set_write_bits(path: str | Path, writable: bool, dirs_only: bool = False) -> None:
    """Add the owner's write bit (writable) or remove everyone's under path, symlinks left alone."""
    for dirpath, _, filenames in os.walk(path):
        names = [dirpath] + ([] if dirs_only else [os.path.join(dirpath, f) for f in filenames])
        for name in names:
            mode = os.lstat(name).st_mode
            if stat.S_ISLNK(mode):
                continue
            mode = stat.S_IMODE(mode)
            os.chmod(
                name,
                mode | stat.S_IWUSR
                if writable
                else mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH),
            )


def file_stats(tree: str | Path) -> dict[str, list[int]]:
    """{path relative to tree: [size, mtime_ns, ctime_ns, inode]} of every file and link: what a
    tree's stamp records, so that a tree whose files all still have them is unchanged (writing a
    file changes its ctime, which nobody can set back)."""
    stats = {}
    for dirpath, _, filenames in os.walk(tree):
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            stats[os.path.relpath(path, tree)] = [
                st.st_size,
                st.st_mtime_ns,
                st.st_ctime_ns,
                st.st_ino,
            ]
    return stats


def remove_tree(path: str | Path, ignore_errors: bool = False) -> None:
    """Remove the tree at `path` (a link or a file: unlinked; missing: nothing), read-only
    directories too: removing an entry needs the write bit of its directory back.
    ignore_errors: what cannot be removed stays (the build cache, which tries again later)."""
    if not os.path.lexists(path):
        return
    if os.path.islink(path) or not os.path.isdir(path):
        with contextlib.suppress(*((OSError,) if ignore_errors else ())):
            os.unlink(path)
        return
    with contextlib.suppress(OSError):
        set_write_bits(path, True, dirs_only=True)
    shutil.rmtree(path, ignore_errors=ignore_errors)
