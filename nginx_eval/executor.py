"""Where a unit's heavy work runs: in the doit process (``executor=local``, the default) or on a
Ray cluster (``executor=ray``, rayexec.py).

doit is the coordinator either way: the task graph, doit's database, the inputs digests
(stamps.py), the budget (agent_limits.py) and ``results/`` live where ``doit run`` runs. Three
kinds of work may leave the machine, each a plain function of the stage's module with the
signature ``work(layout, *args)`` that reads and writes only its unit's results directory
(``layout.task_dir(mode, instance)``) and the layout's cache:

    kind     work                  reads (shipped in)          writes (shipped back)
    agent    agent.agent_unit      -                           agent.json, agent/
    build    build.build_unit      model.patch                 build.json, build.log
    prove    prove.prove_unit      build.json, model.patch     prove.json, tap/

``run`` calls it. Locally: in this process, on the run's layout, as before. On Ray: on some node,
on that node's own layout (its own clones, content-addressed builds and test trees, and a scratch
results directory), with the unit's input files sent as bytes and its output files sent back and
written here; nothing assumes a file system shared between the machines. The same keys give the
same builds, so a unit's record is the same wherever it ran (paths inside it name the node's
cache). ``on_node()`` tells a work function that it runs for a coordinator elsewhere (prove then
makes the build on its node when the node lacks it).
"""

import shutil
import threading

from . import jsonio
from .errors import UserError

EXECUTORS = ("local", "ray")
# The work of each kind, for the table above and the checks in run().
KINDS = ("agent", "build", "prove")

_state = {"name": "local", "backend": None}


class UnitLost(Exception):
    """An agent run whose node was lost on every try (rayexec.RayBackend.run); errors: why,
    per try."""

    def __init__(self, errors):
        super().__init__("; ".join(errors))
        self.errors = list(errors)
_node = threading.local()


def configure(layout, options):
    """Pick the executor of this ``doit run`` (cli.load_dodo): executor=ray connects to the
    cluster (RAY_ADDRESS, or a local one) once, before any task runs."""
    name = getattr(options, "executor", None) or "local"
    if name == "ray":
        try:
            from . import rayexec
        except ImportError:
            raise UserError("executor=ray needs Ray: pip install -e '.[ray]'")
        _state.update(name="ray", backend=rayexec.RayBackend.connect(layout, options))
    else:
        _state.update(name="local", backend=None)


def is_remote():
    """True when units run on a cluster: the coordinator holds records, not builds."""
    return _state["name"] != "local"


def on_node():
    """True inside a work function run for a coordinator on another machine (rayexec)."""
    return getattr(_node, "active", False)


def set_on_node(active):
    _node.active = active


def run(kind, work, layout, mode_name, iid, args, ship_in=(), ship_out=(), repos=()):
    """work(layout, *args) for unit (mode_name, iid), here or on a node; its return value.

    ship_in / ship_out: paths relative to the unit's results directory (a trailing "/" marks a
    directory) that the work reads / writes. repos: [(repo, {commit: [[instance, field]]})]
    the node's clones must hold before the work starts."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of work {kind!r}")
    if not is_remote():
        return work(layout, *args)
    return _state["backend"].run(kind, work, layout, mode_name, iid, args, list(ship_in),
                                 list(ship_out), list(repos))


# -- the files of a unit, as bytes: what travels between the coordinator and a node -------------

def read_unit_files(unit_dir, names):
    """{relative path: bytes} of `names` under unit_dir, directories walked; absent ones left
    out (the work sees them absent too)."""
    out = {}
    for name in names:
        path = unit_dir / name.rstrip("/")
        if path.is_dir():
            for f in sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()):
                out[str(f.relative_to(unit_dir))] = f.read_bytes()
        elif path.is_file():
            out[name] = path.read_bytes()
    return out


def write_unit_files(unit_dir, names, files):
    """Replace `names` under unit_dir by `files` ({relative path: bytes}): what a node made
    replaces what was here, and nothing of an older run stays beside it."""
    for name in names:
        path = unit_dir / name.rstrip("/")
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    # The JSON records last: a record on disk means its files are there.
    for rel in sorted(files, key=lambda r: (r.endswith(".json") and "/" not in r, r)):
        target = unit_dir / rel
        if not target.resolve().is_relative_to(unit_dir.resolve()):
            raise ValueError(f"a node sent a file outside the unit's directory: {rel}")
        target.parent.mkdir(parents=True, exist_ok=True)
        jsonio.write_bytes(target, files[rel])
