"""Wrapping a method of doit's classes once, whoever else wraps it too (scheduling.py, slim.py).

A wrapper is a function ``wrap(method) -> replacement`` whose replacement carries the method it
wraps as ``.wrapped``; installing it again finds its replacement in that chain and does nothing.
"""

from collections.abc import Callable
from typing import Any

# A wrapper: given a method, its replacement, which carries the method as `.wrapped`.
Wrapper = Callable[[Any], Any]


def wraps(function: object, wrap: Wrapper) -> bool:
    """Whether `function` is, or wraps, a replacement made by `wrap` (by the replacement's name)."""
    name = wrap(lambda *args: None).__name__
    while function is not None:
        if getattr(function, "__name__", None) == name:
            return True
        function = getattr(function, "wrapped", None)
    return False


def wrap_once(cls: type, name: str, wrap: Wrapper) -> None:
    """cls.name = wrap(cls.name), unless it is wrapped by `wrap` already or cls has no `name`."""
    current = getattr(cls, name, None)
    if current is not None and not wraps(current, wrap):
        setattr(cls, name, wrap(current))
