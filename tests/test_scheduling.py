"""doit's choice among ready tasks: with scheduling.finish_chains_first, a task whose dependency
has just finished starts before tasks that were queued earlier (scheduling.py says why)."""

import subprocess
import sys
import textwrap

import pytest

DODO = textwrap.dedent("""
    import os, time
    if os.environ.get("FINISH_CHAINS_FIRST"):
        from nginx_eval import scheduling
        scheduling.finish_chains_first()

    def work(name, seconds):
        def action():
            with open(os.environ["ORDER_LOG"], "a") as f:
                f.write(name + "\\n")
            time.sleep(seconds)
        return action

    def task_short():
        return {"actions": [work("short", 0.1)]}

    def task_after_short():
        return {"actions": [work("after_short", 0)], "task_dep": ["short"]}

    def task_long():
        for name in ("long1", "long2", "long3"):
            yield {"name": name, "actions": [work(name, 0.8)]}

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
    subprocess.run([sys.executable, "-m", "doit", "-f", str(tmp_path / "dodo.py"), "run",
                    "--db-file", str(tmp_path / f".doit-{finish_chains_first}-{par_type}"),
                    "-n", "2", "-P", par_type, *selected],
                   env=env, check=True, capture_output=True, cwd=tmp_path)
    started = log.read_text().split()
    # The two workers start their first tasks at the same moment: either may write first.
    return sorted(started[:2]) + started[2:]


@pytest.mark.parametrize("par_type", ["thread", "process"])
def test_a_released_task_starts_before_tasks_queued_earlier(tmp_path, par_type):
    # Workers: short and long1 start; when short ends, its worker takes after_short, released
    # by short, before long2 and long3, which were queued first.
    assert start_order(tmp_path, True, par_type) == \
        ["long1", "short", "after_short", "long2", "long3"]
    # doit's own order, for contrast: the released task waits behind everything queued.
    assert start_order(tmp_path, False, par_type) == \
        ["long1", "short", "long2", "long3", "after_short"]


def test_every_selected_task_is_explored_before_the_first_one_runs(tmp_path):
    # doit alone explores `second` only when everything of `first` has started.
    assert start_order(tmp_path, False, "thread", ("first", "second")) == \
        ["long1", "short", "long2", "long3", "after_short"]
    assert start_order(tmp_path, True, "thread", ("first", "second")) == \
        ["long1", "short", "after_short", "long2", "long3"]
