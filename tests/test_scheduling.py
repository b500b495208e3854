"""doit's choice among ready tasks: with scheduling.finish_chains_first, a task whose dependency
has just finished starts before tasks that were queued earlier (scheduling.py says why).

Real doit runs the tasks on two workers, and no task's length is left to the clock: each task
writes its name to a log when it starts and finishes only once a given number of tasks have
started (FINISH_AFTER). So exactly one worker is free whenever doit picks a task (after the first
two), every pick is logged before the next task finishes, and the log is the order doit chose.
"""

import json
import subprocess
import sys
import textwrap

import pytest
from test_limits import most_at_once

# Every test here starts doit, make, prove, the sandbox or the CLI (conftest.py).
E2E = True

DODO = textwrap.dedent("""
    import os, time
    if os.environ.get("FINISH_CHAINS_FIRST"):
        from nginx_eval.doitext import scheduling
        scheduling.finish_chains_first()

    LOG = os.environ["ORDER_LOG"]
    TASKS = 5       # tasks with an action: short, after_short, long1, long2, long3
    # short ends first, once both workers have started; long1 once short's worker has started
    # its next task. A task started later ends once the task after it has started (the last
    # when every task has): then one worker at a time is free, and doit's pick is logged
    # before the next one.
    FINISH_AFTER = {"short": 2, "long1": 3}
    # Only if doit's order were broken enough that no task can start: finish anyway, and the
    # test's comparison of orders tells what happened.
    GIVE_UP_SECONDS = 60

    def started():
        with open(LOG) as f:
            return f.read().split()

    def work(name):
        def action():
            fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(fd, (name + "\\n").encode())
            os.close(fd)
            position = started().index(name) + 1
            wanted = FINISH_AFTER.get(name, min(position + 1, TASKS))
            deadline = time.monotonic() + GIVE_UP_SECONDS
            while len(started()) < wanted and time.monotonic() < deadline:
                time.sleep(0.005)
        return action

    def task_short():
        return {"actions": [work("short")]}

    def task_after_short():
        return {"actions": [work("after_short")], "task_dep": ["short"]}

    def task_long():
        for name in ("long1", "long2", "long3"):
            yield {"name": name, "actions": [work(name)]}

    def task_all():
        return {"actions": None,
                "task_dep": ["after_short", "short", "long:long1", "long:long2", "long:long3"]}

    # Two selected tasks, shaped like two modes: the second waits for a task that the first
    # reaches one level down (as a mode's proves wait for base builds reached through builds).
    def task_first():
        return {"actions": None, "task_dep": ["builds"]}

    def task_builds():
        return {"actions": None,
                "task_dep": ["short", "long:long1", "long:long2", "long:long3"]}

    def task_second():
        return {"actions": None, "task_dep": ["after_short"]}
""")


def start_order(tmp_path, finish_chains_first, par_type, selected=("all",)):
    (tmp_path / "dodo.py").write_text(DODO)
    log = tmp_path / f"order-{finish_chains_first}-{par_type}.log"
    env = {"PATH": "/usr/bin:/bin", "ORDER_LOG": str(log), "PYTHONPATH": ":".join(sys.path)}
    if finish_chains_first:
        env["FINISH_CHAINS_FIRST"] = "1"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "doit",
            "-f",
            str(tmp_path / "dodo.py"),
            "run",
            "--db-file",
            str(tmp_path / f".doit-{finish_chains_first}-{par_type}"),
            "-n",
            "2",
            "-P",
            par_type,
            *selected,
        ],
        env=env,
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    started = log.read_text().split()
    # The two workers start their first tasks at the same moment: either may write first.
    return sorted(started[:2]) + started[2:]


@pytest.mark.parametrize("par_type", ["thread", "process"])
def test_a_released_task_starts_before_tasks_queued_earlier(tmp_path, par_type):
    # Workers: short and long1 start; when short ends, its worker takes after_short, released
    # by short, before long2 and long3, which were queued first.
    assert start_order(tmp_path, True, par_type) == [
        "long1",
        "short",
        "after_short",
        "long2",
        "long3",
    ]
    # doit's own order, for contrast: the released task waits behind everything queued.
    assert start_order(tmp_path, False, par_type) == [
        "long1",
        "short",
        "long2",
        "long3",
        "after_short",
    ]


def test_every_selected_task_is_explored_before_the_first_one_runs(tmp_path):
    # doit alone explores `second` only when everything of `first` has started.
    assert start_order(tmp_path, False, "thread", ("first", "second")) == [
        "long1",
        "short",
        "long2",
        "long3",
        "after_short",
    ]
    assert start_order(tmp_path, True, "thread", ("first", "second")) == [
        "long1",
        "short",
        "after_short",
        "long2",
        "long3",
    ]


KINDS_DODO = textwrap.dedent("""
    import json, os, time
    from nginx_eval.doitext import scheduling
    scheduling.finish_chains_first(json.loads(os.environ["LIMITS"]))

    def work(name):
        def action():
            with open(os.environ["SPANS_LOG"], "a") as f:
                f.write(f"start {name} {time.monotonic()}\\n")
            time.sleep(0.4)
            with open(os.environ["SPANS_LOG"], "a") as f:
                f.write(f"end {name} {time.monotonic()}\\n")
        return action

    def task_build():
        for name in ("a", "b", "c"):
            yield {"name": name, "actions": [work(f"build:{name}")]}
        # Released by build:a, as a base's sibling or gold build is by the base.
        yield {"name": "a2", "actions": [work("build:a2")], "task_dep": ["build:a"]}

    def task_prove():
        yield {"name": "a", "actions": [work("prove:a")], "task_dep": ["build:a"]}

    def task_all():
        return {"actions": None,
                "task_dep": ["build:a", "build:b", "build:c", "build:a2", "prove:a"]}
""")


def spans(tmp_path, limits):
    (tmp_path / "dodo.py").write_text(KINDS_DODO)
    log = tmp_path / f"spans-{len(limits)}.log"
    env = {
        "PATH": "/usr/bin:/bin",
        "SPANS_LOG": str(log),
        "LIMITS": json.dumps(limits),
        "PYTHONPATH": ":".join(sys.path),
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "doit",
            "-f",
            str(tmp_path / "dodo.py"),
            "run",
            "--db-file",
            str(tmp_path / f".doit-{len(limits)}"),
            "-n",
            "3",
            "-P",
            "thread",
            "all",
        ],
        env=env,
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    found = {}
    for line in log.read_text().splitlines():
        what, name, at = line.split()
        found.setdefault(name, {})[what] = float(at)
    return {name: (s["start"], s["end"]) for name, s in found.items()}


def test_a_kind_at_its_limit_waits_and_other_kinds_go_first(tmp_path):
    # builds=1 and three workers: one build at a time, and the prove released by the first
    # build runs beside the second instead of queueing behind the builds for a worker.
    limited = spans(tmp_path, {"build": 1})
    builds = [limited[f"build:{n}"] for n in ("a", "b", "c", "a2")]
    assert most_at_once(builds) == 1
    assert limited["prove:a"][0] < max(end for _, end in builds)
    # The build that build:a released goes before those waiting since the start: a started
    # chain is finished first.
    assert limited["build:a2"][0] < min(limited["build:b"][0], limited["build:c"][0])
    # Without a limit, the three workers take the three builds at once.
    free = spans(tmp_path, {})
    assert most_at_once([free[f"build:{n}"] for n in "abc"]) == 3
