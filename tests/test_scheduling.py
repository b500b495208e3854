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
""")


def start_order(tmp_path, finish_chains_first, par_type):
    (tmp_path / "dodo.py").write_text(DODO)
    log = tmp_path / f"order-{finish_chains_first}-{par_type}.log"
    env = {"PATH": "/usr/bin:/bin", "ORDER_LOG": str(log), "PYTHONPATH": ":".join(sys.path)}
    if finish_chains_first:
        env["FINISH_CHAINS_FIRST"] = "1"
    subprocess.run([sys.executable, "-m", "doit", "-f", str(tmp_path / "dodo.py"), "run",
                    "--db-file", str(tmp_path / f".doit-{finish_chains_first}-{par_type}"),
                    "-n", "2", "-P", par_type, "all"],
                   env=env, check=True, capture_output=True, cwd=tmp_path)
    return log.read_text().split()


@pytest.mark.parametrize("par_type", ["thread", "process"])
def test_a_released_task_starts_before_tasks_queued_earlier(tmp_path, par_type):
    # Workers: short and long1 start; when short ends, its worker takes after_short, released
    # by short, before long2 and long3, which were queued first.
    assert start_order(tmp_path, True, par_type) == \
        ["short", "long1", "after_short", "long2", "long3"]
    # doit's own order, for contrast: the released task waits behind everything queued.
    assert start_order(tmp_path, False, par_type) == \
        ["short", "long1", "long2", "long3", "after_short"]
