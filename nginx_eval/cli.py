"""Entry points: dodo.py's loader, with user errors printed as one line and a non-zero exit."""

import sys

from .errors import UserError


def fail(error):
    sys.stderr.write(f"nginx-eval: error: {error}\n")
    sys.stderr.flush()
    raise SystemExit(2)


def load_dodo(root=None):
    from .pipeline import doit_tasks
    try:
        return doit_tasks(root)
    except UserError as e:
        fail(e)
