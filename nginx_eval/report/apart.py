"""Rendering in a process of its own: the report's statistics and charts stay out of doit.

The report imports scipy, statsmodels and matplotlib (stats.py, charts.py). Imported into the doit
process, they would stay there for the rest of the run, doubling its peak memory
(docs/performance.md), and a worker thread still drawing at exit dies in matplotlib's abort().
``run_apart(function, *args)`` calls ``function(*args)`` in a new Python process of this same
package instead, as a command of the run (procs.run_limited: stopped on Ctrl-C like a build).
Its arguments travel pickled on stdin; a function of the package is pickled by its name, so the
child runs this package's code.

What the function prints goes to the caller's stdout. A UserError in the child is raised again in
the caller with its message (one ``nginx-eval: error:`` line, as in this process); any other
failure is a RuntimeError with the last lines of the child's stderr.
"""

import os
import pickle
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import Any

from ..core import procs
from ..core.errors import UserError
from ..core.layout import PACKAGE_DIR

# A report of thousands of units renders in seconds; this only bounds a hung child.
TIMEOUT_SECONDS = 3600
# The child's exit status for a UserError, whose message is its stderr.
USER_ERROR = 3


def run_apart(function: Callable[..., object], *args: Any) -> None:
    """function(*args) in a process of its own (see the module's docstring); returns nothing."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            filter(None, [str(PACKAGE_DIR.parent), os.environ.get("PYTHONPATH")])
        ),
    )
    sys.stdout.flush()
    with tempfile.TemporaryFile() as stdin, tempfile.TemporaryFile() as stderr:
        pickle.dump((function, args), stdin)
        stdin.seek(0)
        outcome = procs.run_limited(
            [sys.executable, "-m", __name__],
            cwd=os.getcwd(),
            env=env,
            timeout=TIMEOUT_SECONDS,
            stdin=stdin,
            stdout=None,
            stderr=stderr,
        )
        stderr.seek(0)
        said = stderr.read().decode(errors="replace")
    if outcome.exit_code == 0:
        return
    if outcome.exit_code == USER_ERROR:
        raise UserError(said.strip())
    ended = (
        f"timed out after {TIMEOUT_SECONDS} s"
        if outcome.timed_out
        else f"exited with {outcome.exit_code}"
    )
    tail = "\n".join(said.strip().splitlines()[-5:])
    raise RuntimeError(f"{getattr(function, '__name__', function)} {ended}: {tail}")


def main() -> int:
    function, args = pickle.load(sys.stdin.buffer)
    try:
        function(*args)
    except UserError as e:
        sys.stderr.write(str(e))
        return USER_ERROR
    except Exception:
        traceback.print_exc()
        return 1
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
