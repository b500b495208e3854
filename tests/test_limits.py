"""Limits per kind of work (limits.py): agents=, builds= and proves= hold inside one `doit run`,
whatever doit's -n and -P, measured from the units' own start and end times; a waiter stops at
once on an interrupt; a slot dies with its process; bad values are one-line errors.
"""

import multiprocessing
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
from test_faults import marker, processes_with, start_doit, wait_until  # noqa: F401 (marker: a fixture)
from test_interrupt import assert_one_line, interrupt

from nginx_eval import cli
from nginx_eval.core import limits, procs, runstate
from nginx_eval.core.errors import UserError
from nginx_eval.core.layout import Layout
from nginx_eval.run.options import Options

IDS = ("tiny-add", "tiny-mul")


# -- the slots, in one process and across processes --------------------------------------------


@pytest.fixture
def configured(tmp_path, monkeypatch):
    """configured(**counts): the limits of a run in tmp_path, as cli.py turns them on (in the
    test's own run: conftest.py)."""
    layout = Layout(
        root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results", run="limits"
    )

    def configure(**counts):
        limits.configure(layout, Options(**counts))
        return layout

    return configure


def most_at_once(intervals):
    """The largest number of (start, end) intervals that overlap at one moment."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    return peak


def hold(kind, seconds, out):
    with limits.slot(kind):
        start = time.monotonic()
        time.sleep(seconds)
        out.append((start, time.monotonic()))


def holding(kind):
    """A thread that holds a `kind` slot until the returned event is set."""
    release, taken = threading.Event(), threading.Event()

    def run():
        with limits.slot(kind):
            taken.set()
            release.wait(30)

    holder = threading.Thread(target=run)
    holder.start()
    assert taken.wait(10)
    return holder, release


def test_default_counts_follow_the_cores():
    assert limits.default_counts(1) == {"agents": 8, "builds": 2, "proves": 4}
    assert limits.default_counts(2) == {"agents": 8, "builds": 2, "proves": 8}
    assert limits.default_counts(16) == {"agents": 8, "builds": 16, "proves": 64}


def test_counts_come_from_the_command_line_and_the_defaults(configured):
    assert limits.counts() == {}
    configured(agents=16, builds=1)
    assert limits.counts() == {"agent": 16, "build": 1, "prove": limits.default_counts()["proves"]}


def test_threads_share_the_slots_of_their_kind(configured):
    configured(agents=2, builds=1)
    spans = {"agent": [], "build": []}
    threads = [
        threading.Thread(target=hold, args=(kind, 0.3, spans[kind]))
        for kind in ("agent", "build")
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most_at_once(spans["agent"]) == 2
    assert most_at_once(spans["build"]) == 1
    # The kinds do not wait for each other: the first agents and the first build overlapped.
    assert min(e for _, e in spans["agent"]) > min(s for s, _ in spans["build"])


def _hold_in_a_process(path):
    with limits.slot("build"):
        start = time.time()
        time.sleep(0.3)
        with open(path, "a") as f:
            f.write(f"{start} {time.time()}\n")


def test_worker_processes_share_the_slots(configured, tmp_path):
    configured(builds=2)
    log = tmp_path / "spans"
    fork = multiprocessing.get_context("fork")  # as doit's -P process starts its workers
    workers = [fork.Process(target=_hold_in_a_process, args=(log,)) for _ in range(5)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
        assert w.exitcode == 0
    spans = [tuple(map(float, line.split())) for line in log.read_text().splitlines()]
    assert len(spans) == 5 and most_at_once(spans) == 2


def _hold_forever(ready):
    with limits.slot("build"):
        ready.touch()
        time.sleep(3600)


def test_a_slot_dies_with_its_process(configured, tmp_path):
    configured(builds=1)
    ready = tmp_path / "holding"
    holder = multiprocessing.get_context("fork").Process(target=_hold_forever, args=(ready,))
    holder.start()
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(holder.pid, signal.SIGKILL)  # as a lost worker dies: no finally runs
    holder.join(10)
    start = time.monotonic()
    with limits.slot("build"):
        assert time.monotonic() - start < 1


def test_an_interrupt_stops_a_waiter_at_once(configured, monkeypatch):
    configured(builds=1)
    holder, release = holding("build")
    spans, waiter_error = [], []

    def wait():
        try:
            with limits.slot("build"):
                spans.append("ran")
        except procs.Interrupted as e:
            waiter_error.append((e, time.monotonic()))

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.3)
    monkeypatch.setattr(runstate.current().interrupt, "stopping", True)
    stopped = time.monotonic()
    waiter.join(5)
    release.set()
    holder.join(5)
    assert spans == [] and waiter_error
    assert waiter_error[0][1] - stopped < 0.5


def test_a_stopwatch_leaves_out_the_waits_for_slots(configured):
    configured(builds=1)
    holder, release = holding("build")
    clock = limits.Stopwatch()
    threading.Timer(0.5, release.set).start()
    with limits.slot("build"):
        time.sleep(0.2)
    holder.join(5)
    assert 0.15 < clock.seconds() < 0.45


def test_without_a_run_nothing_is_limited():
    spans = []
    threads = [threading.Thread(target=hold, args=("build", 0.3, spans)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most_at_once(spans) == 3


def test_an_unknown_kind_is_a_mistake_of_the_caller():
    with pytest.raises(ValueError, match="unknown kind of work 'compile'"):
        with limits.slot("compile"):
            pass


# -- the variables ------------------------------------------------------------------------------


def test_the_three_variables_are_parsed_once():
    options = Options.parse({"agents": "16", "builds": " 2 ", "proves": "4"})
    assert (options.agents, options.builds, options.proves) == (16, 2, 4)
    assert (Options().agents, Options().builds, Options().proves) == (None, None, None)


@pytest.mark.parametrize(
    "name, value", [("agents", "0"), ("builds", "two"), ("proves", "-1"), ("builds", "1.5")]
)
def test_a_bad_limit_is_one_line(name, value):
    with pytest.raises(UserError) as e:
        Options.parse({name: value})
    assert str(e.value) == f"{name}={value}: must be a whole number >= 1"


def test_a_bad_limit_on_doits_command_line_is_one_error_line(project):
    proc, executed = project.doit("run", "-n", "4", "tiny:gold", "agents=0", check=False)
    assert proc.returncode != 0 and executed == []
    assert proc.stderr == "nginx-eval: error: agents=0: must be a whole number >= 1\n"


# -- real doit on the fixture benchmark ---------------------------------------------------------

# A compiler that says when it ran and where (the build's tree), and takes its time, so that
# builds that run side by side are seen to.
CC_WRAPPER = """#!/bin/sh
echo "start $$ $(date +%s.%N) $PWD" >> "$CC_LOG"
sleep 0.2
{real} "$@"
status=$?
echo "end $$ $(date +%s.%N) $PWD" >> "$CC_LOG"
exit $status
"""


def compiles_by_build(log):
    """{build tree: [(start, end) of each compiler run in it]} from CC_WRAPPER's log; runs
    outside a build (the harness asking `cc --version`) left out."""
    starts, spans = {}, {}
    for line in log.read_text().splitlines():
        what, pid, at, cwd = line.split(" ", 3)
        if "/builds/.tmp/" not in cwd:
            continue
        if what == "start":
            starts[pid] = float(at)
        else:
            spans.setdefault(cwd, []).append((starts.pop(pid), float(at)))
    return spans


def compiler_env(tmp_path):
    bin_dir = tmp_path / "cc-bin"
    bin_dir.mkdir()
    (bin_dir / "cc").write_text(CC_WRAPPER.format(real=shutil.which("cc")))
    (bin_dir / "cc").chmod(0o755)
    log = tmp_path / "cc.log"
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "CC_LOG": str(log)}, log


def distinct_builds_at_once(spans):
    """The most distinct build trees that had a compiler running at one moment."""
    events = sorted(
        [(s, 1, tree) for tree, runs in spans.items() for s, _ in runs]
        + [(e, -1, tree) for tree, runs in spans.items() for _, e in runs]
    )
    running, peak = {}, 0
    for _, step, tree in events:
        running[tree] = running.get(tree, 0) + step
        peak = max(peak, sum(1 for n in running.values() if n > 0))
    return peak


@pytest.mark.parametrize(
    "builds, parallel",
    [("1", ("-P", "process")), ("1", ("-P", "thread")), ("2", ("-P", "process"))],
)
def test_builds_never_compile_past_their_limit(project, tmp_path, builds, parallel):
    env, log = compiler_env(tmp_path)
    project.doit("run", "-n", "4", *parallel, "tiny:gold", f"builds={builds}", env=env)
    spans = compiles_by_build(log)
    # Two clean base builds (other flags) and two builds of the gold patches.
    assert len(spans) >= 3, spans
    if builds == "1":
        assert distinct_builds_at_once(spans) == 1
    else:
        # The control: with room for two, the two base builds do compile side by side.
        assert distinct_builds_at_once(spans) == 2
    for iid in IDS:
        assert project.read("gold", iid, "grade.json")["status"] == "resolved"


@pytest.mark.parametrize("workers, expected", [((), 2), (("-n", "1"), 1)])
def test_without_n_a_run_uses_the_machine_and_n_1_one_worker(project, tmp_path, workers, expected):
    # The two base builds (other flags) can compile side by side: without -n the run's
    # workers fill the build slots (2: the defaults on this machine, at least 2); -n 1 is one.
    env, log = compiler_env(tmp_path)
    project.doit("run", *workers, "tiny:gold", env=env)
    assert distinct_builds_at_once(compiles_by_build(log)) == expected
    for iid in IDS:
        assert project.read("gold", iid, "grade.json")["status"] == "resolved"


def test_the_default_workers_are_threads_one_per_slot():
    config = {}
    cli.use_the_machine(config, {"agent": 8, "build": 2, "prove": 4})
    assert config == {"num_process": 16, "par_type": "thread"}
    # What the command line or the executor already chose stays.
    config = {"par_type": "process", "num_process": 3}
    cli.use_the_machine(config, {"agent": 8, "build": 2, "prove": 4})
    assert config == {"par_type": "process", "num_process": 3}


# An agent that sleeps and says when, by its workspace.
SLEEPING_AGENT = """#!/bin/sh
echo "start $(date +%s.%N) $1" >> "$AGENT_SPANS"
sleep 2
echo "end $(date +%s.%N) $1" >> "$AGENT_SPANS"
"""


def sleeping_modes(project, tmp_path, count):
    agent = tmp_path / "sleeping-agent"
    agent.write_text(SLEEPING_AGENT)
    agent.chmod(0o755)
    # Unisolated: the spans file is outside the workspace, which the sandbox would hide.
    modes = "".join(
        f'[modes.sleep{i}]\nisolation = "none"\n[[modes.sleep{i}.phases]]\n'
        f'name = "solve"\n'
        f'timeout = 60\ncommand = "{agent} {{workspace}}"\n\n'
        for i in range(count)
    )
    (project.root / "modes.toml").write_text(modes)
    return tmp_path / "agent-spans"


def agent_spans(log):
    starts, spans = {}, []
    for line in log.read_text().splitlines():
        what, at, workspace = line.split(" ", 2)
        if what == "start":
            starts[workspace] = float(at)
        else:
            spans.append((starts.pop(workspace), float(at)))
    return spans


@pytest.mark.parametrize("parallel", [("-P", "process"), ("-P", "thread")])
def test_agents_run_at_most_their_limit_at_once(project, tmp_path, parallel):
    spans_log = sleeping_modes(project, tmp_path, 3)
    project.doit(
        "run", "-n", "6", *parallel, "agent", "agents=2", env={"AGENT_SPANS": str(spans_log)}
    )
    spans = agent_spans(spans_log)
    assert len(spans) == 6  # 3 modes x 2 tasks, all ready at once under -n 6
    assert most_at_once(spans) == 2


@pytest.mark.parametrize("parallel", [("-P", "process"), ("-P", "thread")])
def test_an_interrupt_stops_a_run_whose_agent_waits_for_its_turn(
    project, tmp_path, marker, parallel
):
    env = {"FAKE_AGENT": "hang", "FAKE_AGENT_MARKER": marker}
    for iid in IDS:
        env[f"FAKE_AGENT_GATE_{iid.replace('-', '_')}"] = str(tmp_path / f"gate-{iid}")
    # What the agents do not wait for is done first: else the free worker may be in a clone or
    # a base build when the interrupt comes, a second command stopped.
    project.doit("run", "repos", "tests", "base")
    proc = start_doit(project, "run", "-n", "2", *parallel, "tiny:fake", "agents=1", env=env)
    prompts = lambda: [
        iid
        for iid in IDS
        if (project.task_dir("fake", iid) / "agent" / "1-solve.prompt.md").exists()
    ]
    running = lambda: [iid for iid in IDS if (tmp_path / f"gate-{iid}.waiting").exists()]
    # One agent runs; the other waits for its turn (doit hands out no second agent task while
    # the one slot is taken: doitext/scheduling.py), with a worker free.
    wait_until(lambda: len(prompts()) == 1 and len(running()) == 1, proc, "one agent running")
    time.sleep(0.5)
    assert len(running()) == 1 and len(prompts()) == 1
    _, err = interrupt(proc)
    assert_one_line(err, stopped=1)
    assert processes_with(marker) == []
    assert project.agent_calls() == running()
    for iid in IDS:
        assert not (project.task_dir("fake", iid) / "agent.json").exists()
    assert not [p for p in Path(project.cache / "running").rglob("*") if p.is_file()]
