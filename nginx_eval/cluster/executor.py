"""Where a unit's heavy work runs: in the doit process (``executor=local``, the default) or on a
Ray cluster (``executor=ray``, rayexec.py).

doit is the coordinator either way: the task graph, doit's database, the inputs digests
(stamps.py), the budget (agent/gate.py) and ``results/`` live where ``doit run`` runs. Three
kinds of work may leave the machine, each a plain function of the stage's module with the
signature ``work(layout, *args)`` that reads and writes only its unit's results directory
(``layout.task_dir(mode, instance)``) and the layout's cache:

    kind     work                  reads (shipped in)          writes (shipped back)
    agent    agent.agent_unit      -                           agent.json, agent/
    build    build.build_unit      model.patch                 build.json, build.log
    prove    prove.prove_unit      build.json, model.patch     prove.json, tap/

``run`` calls it. Locally: in this process, on the run's layout. On Ray: on some node,
on that node's own layout (its own clones, content-addressed builds and test trees, and a scratch
results directory), with the unit's input files sent as bytes and its output files sent back and
written here; nothing assumes a file system shared between the machines. The same keys give the
same builds, so a unit's record is the same wherever it ran (paths inside it name the node's
cache). ``on_node()`` tells a work function that it runs for a coordinator elsewhere (prove then
makes the build on its node when the node lacks it).
"""

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..core import runstate
from ..core.errors import UserError

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..run.options import Options

# The work of each kind, for the table above and the checks in run().
KINDS = ("agent", "build", "prove")


def configure(layout: "Layout", options: "Options") -> None:
    """Pick the executor of this ``doit run`` (cli.load_dodo): executor=ray connects to the
    cluster (RAY_ADDRESS, or a local one) once, before any task runs; the run's state keeps it."""
    run = runstate.current()
    name = getattr(options, "executor", None) or "local"
    if name == "ray":
        try:
            from . import rayexec
        except ImportError as e:
            raise UserError("executor=ray needs Ray: pip install -e '.[ray]'") from e
        run.executor, run.backend = "ray", rayexec.RayBackend.connect(layout, options)
    else:
        run.executor, run.backend = "local", None


def slot_counts() -> dict[str, int] | None:
    """{kind: count} of the cluster's slots with executor=ray (they count its CPUs); None here,
    where limits.counts() has them."""
    backend = runstate.current().backend
    return backend.counts if backend is not None else None


def is_remote() -> bool:
    """True when units run on a cluster: the coordinator holds records, not builds."""
    return runstate.current().executor != "local"


def run(
    kind: str,
    work: Callable[..., Any],
    layout: "Layout",
    mode_name: str,
    iid: str,
    args: Sequence[Any],
    ship_in: Iterable[str] = (),
    ship_out: Iterable[str] = (),
    repos: Iterable[Any] = (),
    forward: Iterable[str] = (),
) -> Any:
    """work(layout, *args) for unit (mode_name, iid), here or on a node; its return value.

    ship_in / ship_out: paths relative to the unit's results directory (a trailing "/" marks a
    directory) that the work reads / writes. repos: [(repo, {commit: [[instance, field]]})]
    the node's clones must hold before the work starts. forward: prefixes of more variables
    the work needs on a node (the agent programs' credentials and endpoints)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of work {kind!r}")
    backend = runstate.current().backend
    if backend is None:  # executor=local
        return work(layout, *args)
    return backend.run(
        kind,
        work,
        layout,
        mode_name,
        iid,
        args,
        list(ship_in),
        list(ship_out),
        list(repos),
        tuple(forward),
    )
