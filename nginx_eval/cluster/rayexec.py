"""``executor=ray``: each unit's agent run, build and prove as a Ray task, on any node.

Only executor.py imports this module, only when the run asks for Ray (``pip install -e
'.[ray]'``). ``ray.init()`` joins the cluster of ``RAY_ADDRESS`` or starts a local one; the doit
process stays the coordinator. Setting up a cluster: docs/running.md's "More than one machine".

- ``RESOURCES``: what a unit asks of its node. An agent run waits on the API: one ``agent`` (a
  custom resource each node declares as the API account allows) and no CPU; a build one CPU; a
  prove, which mostly waits on sockets and timers, half a CPU.
- ``node_layout``: a node's own files under ``$NGINX_EVAL_NODE_CACHE``: ``cache/`` (the same
  content keys as anywhere) and ``units/<coordinator>/`` (the scratch results of the units it
  runs for one coordinator); the work's environment is the node's with the coordinator's
  ``forwarded_environment`` on top.
- ``SlotKeeper``: one actor, started by the coordinator when it sends its first unit, hands out
  the slots of ``agents=``, ``builds=`` and ``proves=`` (limits.py) across the cluster, as the
  slot files do on one machine; slots of a node that died are taken back.
- Lost nodes: a build or prove is run again by Ray elsewhere (``SYSTEM_RETRIES``: repeatable, no
  money); an agent run becomes an ``infra_error`` attempt, tried again by agent/stage.py.
- Ctrl-C (procs.stop_on_signals) cancels the units in flight: Ray raises KeyboardInterrupt in the
  work, and procs.run_limited kills the command's process group on the node.

``results/<run>/ray-units.jsonl``, a row per unit run::

    {"kind", "mode", "instance_id", "node", "host", "started", "ended",   # the node's clock
     "lost": [str]}                   # the errors of earlier tries whose node died
"""

import contextlib
import io
import json
import os
import shutil
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError, TaskCancelledError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ..core import jsonio, limits, procs
from ..core.errors import UserError
from ..core.layout import Layout
from ..core.outcomes import INFRA_ERROR
from ..repositories.stage import ensure_repo
from ..run.options import Options
from . import node as nodework

RESOURCES: dict[str, dict[str, Any]] = {
    "agent": {"num_cpus": 0, "resources": {"agent": 1}},
    "build": {"num_cpus": 1},
    "prove": {"num_cpus": 0.5},
}
SYSTEM_RETRIES = 3
FORWARDED_PREFIXES = ("NGINX_EVAL_", "ANTHROPIC_", "CLAUDE_")
FORWARDED_NAMES = ("AGENT",)
COORDINATOR_ONLY = ("NGINX_EVAL_ROOT", "NGINX_EVAL_CACHE", "NGINX_EVAL_RESULTS")
FORWARD_VARIABLE = "NGINX_EVAL_FORWARD"
# A node's own settings: never sent from the coordinator (which may be a node too).
NODE_ONLY_PREFIX = "NGINX_EVAL_NODE_"
NODE_CACHE_VARIABLE = "NGINX_EVAL_NODE_CACHE"
NODE_REPO_URL_VARIABLE = "NGINX_EVAL_NODE_REPO_URL"
WAIT_SECONDS = 0.2  # how often a waiting coordinator thread looks for an interrupt


def is_node_lost(error: BaseException) -> bool:
    """A Ray error that says the node or the worker went away, not that the work failed."""
    return isinstance(error, RayError) and not isinstance(error, (RayTaskError, TaskCancelledError))


# -- the slots of the whole cluster -------------------------------------------------------------


@ray.remote(num_cpus=0)
class SlotKeeper:
    """The agents=, builds= and proves= slots of one run, for every node."""

    def __init__(self, counts: Mapping[str, int]) -> None:
        self.counts = dict(counts)
        self.held: dict[str, tuple[str, str]] = {}  # token -> (kind, node id)

    def _in_use(self, kind: str) -> int:
        return sum(1 for k, _ in self.held.values() if k == kind)

    def _free_dead_nodes(self) -> None:
        alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        for token, (_, node) in list(self.held.items()):
            if node not in alive:
                del self.held[token]

    def take(self, kind: str, node: str) -> str | None:
        """A token for a free slot of `kind`, or None."""
        if self._in_use(kind) >= self.counts[kind]:
            self._free_dead_nodes()
        if self._in_use(kind) >= self.counts[kind]:
            return None
        token = uuid.uuid4().hex
        self.held[token] = (kind, node)
        return token

    def give_back(self, token: str) -> None:
        self.held.pop(token, None)

    def counts_in_use(self) -> dict[str, int]:
        return {kind: self._in_use(kind) for kind in self.counts}


class SharedSlots:
    """limits.py's slots, asked of the run's SlotKeeper (on a node)."""

    def __init__(self, keeper: Any, node: str) -> None:
        self.keeper, self.node = keeper, node

    def try_take(self, kind: str) -> str | None:
        return ray.get(self.keeper.take.remote(kind, self.node))

    def give_back(self, token: str) -> None:
        ray.get(self.keeper.give_back.remote(token))


# -- on a node ---------------------------------------------------------------------------------


def node_layout(run: str, coordinator: str) -> Layout:
    base = Path(
        os.environ.get(NODE_CACHE_VARIABLE) or Path.home() / ".cache" / "nginx-eval-node"
    ).resolve()
    return Layout(
        root=base / "project",
        cache=base / "cache",
        results_root=base / "units" / coordinator,
        run=run,
    )


@contextlib.contextmanager
def _work_environment(environ: Mapping[str, str]) -> Iterator[None]:
    """The node's environment with the coordinator's forwarded variables, for one unit (a Ray
    worker runs one task at a time), and the node's own repository URL template if it has one."""
    saved = dict(os.environ)
    own_url = os.environ.get(NODE_REPO_URL_VARIABLE)
    os.environ.update(environ)
    if own_url:
        os.environ["NGINX_EVAL_REPO_URL"] = own_url
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run_on_node(
    kind: str,
    work: Callable[..., Any],
    run: str,
    coordinator: str,
    mode_name: str,
    iid: str,
    args: Sequence[Any],
    files_in: Mapping[str, bytes],
    ship_out: Iterable[str],
    repos: Iterable[Any],
    environ: Mapping[str, str],
    keeper: Any,
) -> dict[str, Any]:
    """The Ray task of one unit (see RayBackend.run): its return value, output files, the
    lines it printed on stderr, and where and when it ran."""
    started = time.time()
    node = ray.get_runtime_context().get_node_id()
    layout = node_layout(run, coordinator)
    printed = io.StringIO()
    with (
        _work_environment(environ),
        contextlib.redirect_stderr(printed),
        nodework.working_on_node(),
        limits.shared_slots(SharedSlots(keeper, node)),
    ):
        for repo, commits in repos:
            ensure_repo(layout, repo, commits)
        unit = layout.task_dir(mode_name, iid)
        shutil.rmtree(unit, ignore_errors=True)
        unit.mkdir(parents=True)
        nodework.write_unit_files(unit, [], files_in)
        value = work(layout, *args)
        files = nodework.read_unit_files(unit, ship_out)
    return {
        "value": value,
        "files": files,
        "stderr": printed.getvalue(),
        "node": node,
        "host": socket.gethostname(),
        "started": started,
        "ended": time.time(),
    }


# ray's annotations of remote() cover functions of up to ten arguments; run_on_node has twelve.
_remote_unit: Any = ray.remote(run_on_node)  # type: ignore[arg-type]


# -- at the coordinator ------------------------------------------------------------------------


def forwarded_environment(
    environ: Mapping[str, str] | None = None, prefixes: Iterable[str] = ()
) -> dict[str, str]:
    """What the work sees of the coordinator's environment: its ``NGINX_EVAL_*``,
    ``ANTHROPIC_*``, ``CLAUDE_*`` and ``AGENT``, except the three that name the coordinator's
    directories and the node's own ``NGINX_EVAL_NODE_*``; NGINX_EVAL_FORWARD=NAME,NAME adds
    other variables (an agent program's own settings), and so do `prefixes` (the agent stage's:
    its programs' credentials and endpoints, agent/programs/registry.py)."""
    env = os.environ if environ is None else environ
    extra = {n.strip() for n in env.get(FORWARD_VARIABLE, "").split(",") if n.strip()}
    return {
        k: v
        for k, v in env.items()
        if (
            k.startswith(FORWARDED_PREFIXES + tuple(prefixes)) or k in FORWARDED_NAMES or k in extra
        )
        and k not in COORDINATOR_ONLY
        and not k.startswith(NODE_ONLY_PREFIX)
    }


def cluster_cpus() -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


class RayBackend:
    """executor.py's backend for executor=ray: sends units to the cluster, one Ray task each."""

    def __init__(
        self, here: Any, coordinator: str, agent_retries: int, counts: dict[str, int]
    ) -> None:
        self.here, self.coordinator, self.agent_retries = here, coordinator, agent_retries
        self.counts = counts  # {kind: slots across the cluster}
        self.log_lock = threading.Lock()
        self._keeper: Any = None
        self._keeper_lock = threading.Lock()

    @property
    def keeper(self) -> Any:
        """The run's SlotKeeper, started by the first unit that is sent: an actor is a worker
        process of its own, which a run with nothing to do never needs."""
        with self._keeper_lock:
            if self._keeper is None:
                # ray.remote made the class an actor class, which its annotations do not say.
                self._keeper = SlotKeeper.options(scheduling_strategy=self.here).remote(  # type: ignore[attr-defined]
                    self.counts
                )
            return self._keeper

    @classmethod
    def connect(cls, layout: Layout, options: Options) -> "RayBackend":
        if not ray.is_initialized():
            init: dict[str, Any] = dict(
                log_to_driver=False, include_dashboard=False, logging_level="warning"
            )
            if not os.environ.get("RAY_ADDRESS"):
                # A cluster of this machine alone: as many agent slots as agents= allows.
                init["resources"] = {"agent": limits.chosen_counts(options)["agent"]}
            ray.init(**init)
        if not ray.cluster_resources().get("agent"):
            raise UserError(
                "the Ray cluster declares no 'agent' resource, so no agent run "
                "could start: start its nodes with ray start "
                "--resources='{\"agent\": 8}' (as many as the API allows per node)"
            )
        counts = limits.chosen_counts(options, cores=cluster_cpus())
        # On the coordinator's node: it lives as long as the run, whichever other node is lost.
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        coordinator = jsonio.digest([socket.gethostname(), str(layout.results_root)])[:16]
        return cls(here, coordinator, options.agent_retries, counts)

    def run(
        self,
        kind: str,
        work: Callable[..., Any],
        layout: Layout,
        mode_name: str,
        iid: str,
        args: Sequence[Any],
        ship_in: Iterable[str],
        ship_out: Iterable[str],
        repos: Iterable[Any],
        forward: Iterable[str] = (),
    ) -> Any:
        unit_dir = layout.task_dir(mode_name, iid)
        files_in = nodework.read_unit_files(unit_dir, ship_in)
        lost: list[str] = []
        while True:
            ref = _remote_unit.options(
                **RESOURCES[kind],
                max_retries=0 if kind == "agent" else SYSTEM_RETRIES,
                retry_exceptions=False,
            ).remote(
                kind,
                work,
                layout.run,
                self.coordinator,
                mode_name,
                iid,
                args,
                files_in,
                ship_out,
                repos,
                forwarded_environment(prefixes=forward),
                self.keeper,
            )
            try:
                result = self._wait(ref)
                break
            except RayError as e:
                if not is_node_lost(e) or kind != "agent":
                    raise
                lost.append(f"the node running it was lost: {str(e).strip().splitlines()[0]}")
                if len(lost) > self.agent_retries:
                    raise nodework.UnitLost(lost) from e
        sys.stderr.write(result["stderr"])
        sys.stderr.flush()
        nodework.write_unit_files(unit_dir, ship_out, result["files"])
        self._log(layout, kind, mode_name, iid, result, lost)
        value = result["value"]
        if lost and (value.get("record") or {}).get("attempts") is not None:
            # agent.json lists the tries whose node was lost before the one that came back.
            value["record"]["attempts"][:0] = [
                {"status": INFRA_ERROR, "error": why, "logs": None, "cost_usd": None}
                for why in lost
            ]
        return value

    @staticmethod
    def _wait(ref: Any) -> Any:
        while True:
            ready, _ = ray.wait([ref], timeout=WAIT_SECONDS)
            if ready:
                try:
                    return ray.get(ref)
                except RayTaskError as e:
                    # The work's own exception (UserError, RuntimeError...), as if it ran here.
                    raise e.as_instanceof_cause() from None
            if procs.interrupted():
                # KeyboardInterrupt in the work: run_limited kills its command's process group.
                ray.cancel(ref, recursive=True)
                raise procs.Interrupted()

    def _log(
        self,
        layout: Layout,
        kind: str,
        mode_name: str,
        iid: str,
        result: Mapping[str, Any],
        lost: list[str],
    ) -> None:
        row = {
            "kind": kind,
            "mode": mode_name,
            "instance_id": iid,
            "node": result["node"],
            "host": result["host"],
            "started": result["started"],
            "ended": result["ended"],
            "lost": lost,
        }
        with self.log_lock:
            path = layout.ray_units_log
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as f:
                f.write(json.dumps(row, sort_keys=True) + "\n")
