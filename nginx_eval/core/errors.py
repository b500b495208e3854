"""The one exception type for mistakes a user can fix (bad task file, unknown mode, ...), and
``fail``, the one way such a mistake ends the program (one ``nginx-eval: error:`` line), and the
"did you mean" hint such a line ends with."""

import difflib
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from doit.exceptions import TaskFailed

T = TypeVar("T")


class UserError(Exception):
    """A problem in the user's input; printed as one line, without a traceback."""

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        task: str | None = None,
        field: str | None = None,
        item: str | None = None,
    ) -> None:
        where = []
        if file:
            where.append(str(file))
        if task:
            where.append(f"task {task}")
        if item:
            where.append(item)
        if field:
            where.append(f"field {field}")
        prefix = ": ".join([", ".join(where)]) + ": " if where else ""
        super().__init__(prefix + message)
        self.file, self.task, self.field = file, task, field


class UserFailure(TaskFailed):
    """A doit task stopped by a UserError; cli.Reporter prints it as one line."""


def failing_on_user_error(func: Callable[..., T], *args: Any) -> T | UserFailure:
    """Call a doit action; a UserError becomes a UserFailure (one line, no traceback)."""
    try:
        return func(*args)
    except UserError as e:
        return UserFailure(str(e))


def fail(error: object) -> NoReturn:
    """Print `error` as one ``nginx-eval: error:`` line and exit with status 2."""
    sys.stderr.write(f"nginx-eval: error: {error}\n")
    sys.stderr.flush()
    raise SystemExit(2)


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate most like `word` (difflib), or None."""
    candidates = list(candidates)
    for w in (word, word.lower()):
        match = difflib.get_close_matches(w, candidates, n=1)
        if match:
            return match[0]
    return None


def did_you_mean(
    word: str, candidates: Iterable[str], show: Callable[[str], str] = lambda c: f"'{c}'"
) -> str:
    """ "; did you mean 'x'?" for the closest candidate, or ""."""
    match = closest(word, candidates)
    return f"; did you mean {show(match)}?" if match else ""
