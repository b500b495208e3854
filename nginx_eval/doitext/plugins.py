"""doit's look-ups of its plugins, served from one reading of the installed packages' entry
points.

doit finds its commands, loaders, database backends and reporters (nginx-eval's backend among
them, pyproject.toml) through ``importlib.metadata.entry_points(group=...)``, once per kind, and
each call reads the metadata of every installed distribution again. ``read_entry_points_once``
replaces doit's hook for that function (``doit.plugin.entry_points_impl``) by one that reads
them once per process and selects each group from that reading: the same entry points, in the
same order.
"""

import functools
from importlib import metadata
from typing import Any

import doit.plugin


@functools.cache
def installed_entry_points() -> Any:
    """Every installed distribution's entry points, read once per process (what
    ``entry_points()`` gives without arguments: its ``select`` is what it gives with them)."""
    return metadata.entry_points()


def _entry_points(**params: Any) -> metadata.EntryPoints:
    return installed_entry_points().select(**params)


def read_entry_points_once() -> None:
    """doit's later plugin look-ups in this process select from one reading."""
    doit.plugin.entry_points_impl = lambda: _entry_points
