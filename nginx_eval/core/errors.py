"""The one exception type for mistakes a user can fix (bad task file, unknown mode, ...), and
``fail``, the one way such a mistake ends the program (one ``nginx-eval: error:`` line)."""

import sys

from doit.exceptions import TaskFailed


class UserError(Exception):
    """A problem in the user's input; printed as one line, without a traceback."""

    def __init__(self, message, *, file=None, task=None, field=None, item=None):
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


def failing_on_user_error(func, *args):
    """Call a doit action; a UserError becomes a UserFailure (one line, no traceback)."""
    try:
        return func(*args)
    except UserError as e:
        return UserFailure(str(e))


def fail(error):
    """Print `error` as one ``nginx-eval: error:`` line and exit with status 2."""
    sys.stderr.write(f"nginx-eval: error: {error}\n")
    sys.stderr.flush()
    raise SystemExit(2)
