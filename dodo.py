"""doit entry point: `doit run nginx:raw run=NAME` (see nginx_eval/pipeline.py for the task
names)."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The package next to this file, whatever else is installed: doit has imported nginx_eval before
# reading this file (its database backend, the doit.BACKEND plugin nginx_eval.doitext.backend,
# from the installed copy, e.g. another clone's editable install), so that copy is forgotten here
# and this directory goes first on sys.path.
sys.path[:] = [HERE] + [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
for _name, _module in list(sys.modules.items()):
    if _name == "nginx_eval" or _name.startswith("nginx_eval."):
        if not os.path.abspath(getattr(_module, "__file__", None) or "").startswith(
            os.path.join(HERE, "nginx_eval", "")
        ):
            del sys.modules[_name]

from nginx_eval.cli import load_dodo  # noqa: E402

globals().update(load_dodo(HERE))
