"""executor=ray on a real two-node Ray cluster of this machine (ray.cluster_utils.Cluster).

Each node has a cache of its own (NGINX_EVAL_NODE_CACHE in its Ray processes' environment): the
nodes share nothing with each other or the coordinator but what travels with the units. Skipped
when Ray is not installed (`pip install -e '.[ray]'`).
"""

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import DODO, Project, without_timings

# Ray is imported where a cluster starts, not at collection: every xdist worker imports every
# test module, and Ray's import is most of a second of each.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="executor=ray needs Ray: pip install -e '.[ray]'",
)

# What only the clock decides. A build's kind (clean, sibling, incremental) depends on what the
# node's cache held before; from empty caches it is the local run's too, and it is compared.
TIMINGS = {"build_seconds", "agent_seconds"}
# Logs each compiler call: "<start> <end> <build tree>"; then runs the real compiler.
CC_LOGGER = """#!/bin/sh
start=$(date +%s.%N)
PATH="$REAL_PATH" cc "$@"; code=$?
echo "$start $(date +%s.%N) $(pwd)" >> "$CC_LOG"
exit $code
"""


class TwoNodes:
    """A head (the coordinator's node: no CPU, no agents) and two worker nodes."""

    NAMES = ("node-a", "node-b")

    def __init__(self, base):
        self.base = base
        wrappers = base / "bin"
        wrappers.mkdir(parents=True)
        (wrappers / "cc").write_text(CC_LOGGER)
        (wrappers / "cc").chmod(0o755)
        self.cc_log = base / "cc.log"
        # No dashboard: nothing here reads it, and it is a sixth of a cluster's start. No log
        # monitor (the coordinator takes no worker logs: log_to_driver=False) and no autoscaler
        # monitor (the nodes are added by hand): a processor second of each start.
        # No workers started ahead of a task: most would never run one here.
        head = {
            "num_cpus": 0,
            "env_vars": self.node_env("head"),
            "include_dashboard": False,
            "include_log_monitor": False,
            "no_monitor": True,
            "_system_config": {
                "enable_worker_prestart": False,
                "prestart_worker_first_driver": False,
            },
        }
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True, head_node_args=head)
        self.lost = []
        self.workers = [self.add_worker(name) for name in self.NAMES]
        self.cluster.wait_for_nodes()

    def add_worker(self, name):
        return self.cluster.add_node(
            num_cpus=1, resources={"agent": 2}, env_vars=self.node_env(name)
        )

    def node_env(self, name):
        path = os.environ["PATH"]
        return {
            "NGINX_EVAL_NODE_CACHE": str(self.base / name),
            "CC_LOG": str(self.cc_log),
            "REAL_PATH": path,
            "PATH": f"{self.base / 'bin'}:{path}",
        }

    def node_cache(self, worker):
        return self.base / self.NAMES[self.workers.index(worker)]

    def lose(self, worker):
        """Kills `worker`'s processes at once, as a machine that dies."""
        self.cluster.remove_node(worker, allow_graceful=False)
        self.lost.append(worker)

    def replace_lost(self):
        """A node of the same name (and cache directory) for each node lost, so the tests
        after find two worker nodes again: adding one costs a fifth of starting a cluster."""
        while self.lost:
            index = self.workers.index(self.lost.pop())
            self.workers[index] = self.add_worker(self.NAMES[index])
        self.cluster.wait_for_nodes()

    def fresh(self):
        """Its nodes' caches and the compiler log emptied, as on a cluster just started (its
        Ray processes stay: starting a cluster costs 10 s of processor)."""
        for name in self.NAMES:
            shutil.rmtree(self.base / name, ignore_errors=True)
        self.cc_log.unlink(missing_ok=True)
        return self

    def shutdown(self):
        self.cluster.shutdown()


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    """One cluster for the whole module: a cluster starts in 5 to 10 s. A node a test loses is
    replaced when the next test asks for the cluster (TwoNodes.replace_lost), not after the
    test: the module's last test to lose one (test_node_lost_mid_run) costs no replacement."""
    nodes = TwoNodes(tmp_path_factory.mktemp("ray"))
    try:
        yield nodes
    finally:
        nodes.shutdown()


@pytest.fixture
def cluster(shared_cluster):
    """The shared cluster with two worker nodes again (those lost before replaced)."""
    shared_cluster.replace_lost()
    return shared_cluster


@pytest.fixture
def fresh_cluster(cluster):
    """The cluster with its nodes' caches empty, for a test that looks at builds."""
    return cluster.fresh()


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """A fixture project and its run of tiny with the local executor (run=local), which the
    runs on the cluster are compared with."""
    project = Project(tmp_path_factory.mktemp("project"))
    project.doit("run", "-n", "4", "tiny", "run=local")
    return project


@pytest.fixture(scope="module")
def run_on_cluster(local_run, shared_cluster):
    """The same project run on the cluster from empty node caches (run=onray), with builds=1
    and a doit thread for each unit that could run at once: what the first tests read. What
    the nodes held and the compiler log are taken as the run left them (a later test empties
    them)."""
    project = local_run
    shared_cluster.replace_lost()
    cluster = shared_cluster.fresh()
    builds_here = sorted((project.cache / "builds").glob("*/build.json"))
    project.doit(
        "run",
        "-n",
        "6",
        "tiny",
        "run=onray",
        "executor=ray",
        "builds=1",
        env=ray_env(project, cluster),
    )
    return SimpleNamespace(
        project=project,
        cluster=cluster,
        builds_here=builds_here,
        cc_log=cluster.cc_log.read_text(),
        node_builds=[
            list((cluster.node_cache(w) / "cache" / "builds").glob("*/build.json"))
            for w in cluster.workers
        ],
        node_workspaces=[
            list((cluster.node_cache(w) / "cache" / "workspaces").glob("*/*/*"))
            for w in cluster.workers
        ],
    )


def ray_env(project, nodes, **extra):
    return dict(
        project.env,
        RAY_ADDRESS=nodes.cluster.address,
        NGINX_EVAL_FORWARD="FAKE_AGENT_LOG,FLAKY_COUNTER,FAKE_AGENT,FAKE_AGENT_GATE_tiny_mul",
        **extra,
    )


def rows(project, run, mode):
    path = project.results / run / mode / "results.jsonl"
    return [
        without_timings(json.loads(line), TIMINGS | {"run"})
        for line in path.read_text().splitlines()
    ]


def grades(project, run):
    out = {}
    for path in sorted((project.results / run).glob("*/*/grade.json")):
        data = json.loads(path.read_text())
        out[str(path.relative_to(project.results / run))] = data
    return out


def units(project, run):
    return read_units(project.results / run / "ray-units.jsonl")


def without_inputs(grade):
    # grade.json's digest covers its input files, whose paths name the run's directory.
    return {k: v for k, v in grade.items() if k != "inputs"}


def test_ray_scores_like_local_on_both_nodes(run_on_cluster):
    project, cluster = run_on_cluster.project, run_on_cluster.cluster
    for mode in ("gold", "none", "fake"):
        assert rows(project, "onray", mode) == rows(project, "local", mode), mode
    local, remote = grades(project, "local"), grades(project, "onray")
    assert local.keys() == remote.keys()
    assert all(without_inputs(local[k]) == without_inputs(remote[k]) for k in local)
    ran = units(project, "onray")
    assert {u["kind"] for u in ran} == {"agent", "build", "prove"}
    assert len({u["node"] for u in ran}) == 2, "every unit ran on one node"
    # The builds are in the nodes' caches; the coordinator's has only the local run's.
    assert sorted((project.cache / "builds").glob("*/build.json")) == run_on_cluster.builds_here
    for builds, workspaces in zip(
        run_on_cluster.node_builds, run_on_cluster.node_workspaces, strict=True
    ):
        assert builds
        # A node's agent workspaces go once their diff is taken, as the coordinator's do.
        assert not workspaces
    # A second run on the cluster has nothing to do.
    _, executed = project.doit(
        "run", "tiny", "run=onray", "executor=ray", env=ray_env(project, cluster)
    )
    assert executed == []


def wait_for(predicate, timeout=120, what="it"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def start_doit(project, env, *args):
    args = project.run_args(args)  # as conftest.Project.doit
    return subprocess.Popen(
        [sys.executable, "-m", "doit", "-f", str(DODO), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def concurrent_trees(cc_log):
    """The most build trees with a compiler running at the same moment, and how many trees
    there were, from the compiler log's text. Calls outside a build tree (`cc --version` for
    the compiler's identity) are no compiles."""
    calls = []
    for line in cc_log.splitlines():
        start, end, cwd = line.split(" ", 2)
        if "/cache/builds/" not in cwd:
            continue
        tree = cwd.split("/tree")[0]
        calls.append((float(start), float(end), tree))
    most = 0
    for start, _, _ in calls:
        most = max(most, len({t for s, e, t in calls if s <= start < e}))
    return most, len({t for _, _, t in calls})


def test_builds_limit_holds_in_a_run_on_the_cluster(run_on_cluster):
    """builds=1 with a CPU free on each node: never two builds compiling at once, as the
    compiler calls' own start and end times show. (doit hands out one build at a time here;
    that the nodes' slots come from one keeper is the next test's.)"""
    most, trees = concurrent_trees(run_on_cluster.cc_log)
    assert trees >= 4  # base builds and patched builds of both tasks, on the nodes
    assert most == 1


def hold_a_build_slot(layout, seconds):
    """A unit's work: hold a build slot for `seconds`; when it held it, by the node's clock."""
    from nginx_eval.core import limits

    with limits.slot("build"):
        start = time.time()
        time.sleep(seconds)
        return {"start": start, "end": time.time()}


def test_one_keeper_holds_the_builds_slots_of_every_node(fresh_cluster, tmp_path, monkeypatch):
    """Two build units sent at once with builds=1: each needs a whole CPU and each node has
    one, so Ray starts them on the two nodes together; the run's keeper lets one hold the slot
    at a time."""
    cluster = fresh_cluster
    import threading

    from ray import cloudpickle

    from nginx_eval.cluster.rayexec import RayBackend
    from nginx_eval.core.layout import Layout

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the nodes cannot import it
    monkeypatch.setenv("RAY_ADDRESS", cluster.cluster.address)
    layout = Layout(
        root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results", run="slots"
    )
    backend = RayBackend.connect(
        layout, SimpleNamespace(agent_retries=0, agents=1, builds=1, proves=1)
    )
    held = {}

    def send(iid):
        held[iid] = backend.run("build", hold_a_build_slot, layout, "gold", iid, (3,), [], [], [])

    try:
        threads = [threading.Thread(target=send, args=(iid,)) for iid in ("one", "two")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert sorted(held) == ["one", "two"]
        assert len({u["node"] for u in read_units(layout.ray_units_log)}) == 2
        first, second = sorted(held.values(), key=lambda h: h["start"])
        assert first["end"] <= second["start"]
    finally:
        import ray

        ray.shutdown()
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def read_units(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


# The agent units of fake on both tasks (and the workspaces they need): the tests of the agents
# alone start no Ray worker for builds and proves they do not read.
AGENTS = ("agent:tiny/fake/tiny-add", "agent:tiny/fake/tiny-mul")


def test_interrupt_stops_the_remote_agent(project, cluster):
    """Ctrl-C at the coordinator cancels the unit on its node: the agent's process is gone."""
    env = ray_env(project, cluster, FAKE_AGENT="hang")
    doit = start_doit(project, env, "run", "-n", "2", *AGENTS, "run=onray", "executor=ray")
    try:
        wait_for(lambda: len(project.agent_calls()) == 2, what="both agents")
        doit.send_signal(signal.SIGINT)
        out, err = doit.communicate(timeout=60)
    finally:
        if doit.poll() is None:
            os.killpg(doit.pid, signal.SIGKILL)
    assert doit.returncode != 0
    agent = str(project.agent)

    def agents_left():
        ps = subprocess.run(["pgrep", "-f", agent], capture_output=True, text=True)
        return ps.stdout.split()

    wait_for(lambda: not agents_left(), timeout=30, what="the remote agents to stop")
    assert not (project.results / "onray" / "fake" / "tiny-add" / "agent.json").exists()


def test_budget_holds_at_the_coordinator(project, cluster):
    """max_cost= counts what the agents that came back cost: once spent, none starts."""
    project.doit(
        "run",
        "-n",
        "1",
        *AGENTS,
        "run=onray",
        "executor=ray",
        "max_cost=0.2",
        env=ray_env(project, cluster),
    )
    statuses = sorted(
        project.read("fake", iid, "agent.json", run="onray")["status"]
        for iid in ("tiny-add", "tiny-mul")
    )
    assert statuses == ["completed", "not_run"]
    assert len(project.agent_calls()) == 1


def test_process_workers_are_refused_with_ray(project, cluster):
    """One Ray driver per run: doit's -P process would fork it."""
    proc, executed = project.doit(
        "run",
        "-n",
        "2",
        "-P",
        "process",
        "tiny",
        "executor=ray",
        check=False,
        env=ray_env(project, cluster),
    )
    assert proc.returncode != 0 and executed == []
    assert "executor=ray runs doit's workers as threads: drop -P process" in proc.stderr


def test_node_lost_mid_run(local_run, fresh_cluster):
    """The node running an agent dies: that agent runs again on the other node and its record
    lists the lost try; finished agents, builds and proves are kept, and the verdicts are the
    local executor's."""
    project, cluster = local_run, fresh_cluster
    calls_before = len(project.agent_calls())
    gate = project.base / "gate"
    env = ray_env(project, cluster, FAKE_AGENT_GATE_tiny_mul=str(gate))
    # Two doit threads: one waits on the gated agent, the other runs the rest (each unit in
    # flight at once is a Ray worker process of its own to start).
    doit = start_doit(project, env, "run", "-n", "2", "tiny", "run=lost", "executor=ray")
    try:
        wait_for(lambda: Path(str(gate) + ".waiting").exists(), what="the gated agent")
        # tiny-add's agent came back (it may have run on the node about to be lost).
        wait_for(
            lambda: (project.task_dir("fake", "tiny-add", "lost") / "agent.json").exists(),
            what="the other agent",
        )
        running = [
            w
            for w in cluster.workers
            if (
                cluster.node_cache(w) / "cache" / "workspaces" / "lost" / "fake" / "tiny-mul"
            ).is_dir()
        ]
        assert len(running) == 1
        cluster.lose(running[0])
        Path(str(gate) + ".waiting").unlink()
        wait_for(lambda: Path(str(gate) + ".waiting").exists(), what="the agent's second try")
        gate.write_text("")
        out, err = doit.communicate(timeout=300)
    finally:
        if doit.poll() is None:
            os.killpg(doit.pid, signal.SIGKILL)
    assert doit.returncode == 0, out + err
    for mode in ("gold", "none", "fake"):
        assert rows(project, "lost", mode) == rows(project, "local", mode), mode
    agent = project.read("fake", "tiny-mul", "agent.json", run="lost")
    assert [a["status"] for a in agent["attempts"]] == ["infra_error", "completed"]
    assert "lost" in agent["attempts"][0]["error"]
    # This run called tiny-add's agent once, tiny-mul's twice.
    calls = project.agent_calls()[calls_before:]
    assert calls.count("tiny-add") == 1
    assert calls.count("tiny-mul") == 2
    assert [
        a["status"] for a in project.read("fake", "tiny-add", "agent.json", run="lost")["attempts"]
    ] == ["completed"]
    lost = [u for u in units(project, "lost") if u["lost"]]
    assert [(u["kind"], u["instance_id"]) for u in lost] == [("agent", "tiny-mul")]


def test_forwarded_environment_keeps_node_settings_home():
    from nginx_eval.cluster.rayexec import forwarded_environment

    env = {
        "NGINX_EVAL_REPO_URL": "/m/{owner}+{name}",
        "NGINX_EVAL_CACHE": "/coord/cache",
        "NGINX_EVAL_NODE_CACHE": "/coord/node",
        "NGINX_EVAL_NODE_REPO_URL": "/x",
        "ANTHROPIC_API_KEY": "k",
        "AGENT": "claude",
        "HOME": "/root",
        "FOO": "1",
        "BAR": "2",
        "NGINX_EVAL_FORWARD": "FOO",
    }
    assert forwarded_environment(env) == {
        "NGINX_EVAL_REPO_URL": "/m/{owner}+{name}",
        "ANTHROPIC_API_KEY": "k",
        "AGENT": "claude",
        "FOO": "1",
        "NGINX_EVAL_FORWARD": "FOO",
    }


def test_the_agent_programs_credentials_and_endpoints_reach_the_nodes():
    from nginx_eval.agent.programs import registry
    from nginx_eval.cluster.rayexec import forwarded_environment

    env = {
        "OPENAI_API_KEY": "o",
        "OPENAI_BASE_URL": "http://gw/v1",
        "GEMINI_API_KEY": "g",
        "GOOGLE_GEMINI_BASE_URL": "http://gw",
        "CODEX_HOME": "/op/.codex",
        "HOME": "/root",
    }
    assert forwarded_environment(env) == {}
    assert forwarded_environment(env, prefixes=registry.forwarded_prefixes()) == {
        k: v for k, v in env.items() if k != "HOME"
    }
