"""doitext/slim.py: doit's Tasks and dispatcher nodes keep what every task has alike once, read
the same as doit's own, refuse to change what is shared, and real doit runs (threads and
processes) run the same tasks in the same dependency order with them."""

import pickle
import subprocess
import sys
import textwrap
import tracemalloc

import pytest
from doit import control
from doit.dependency import Dependency, JSONCodec, SqliteDB
from doit.reporter import ConsoleReporter
from doit.runner import Runner
from doit.task import Task

from nginx_eval.doitext import slim


def noop():
    return True


def made(**fields):
    """A doit Task as the loader makes it, and its twin made a SlimTask."""
    fields.setdefault("actions", [(noop, [])])
    plain, twin = Task("stage:unit", **fields), Task("stage:unit", **fields)
    slim.slim([twin])
    return plain, twin


RICH = dict(
    file_dep=["in.txt"],
    task_dep=["other:x"],
    targets=["out.json"],
    uptodate=[(noop, [], {})],
    doc="a unit",
    verbosity=2,
)


@pytest.mark.parametrize("fields", [{}, RICH], ids=["bare", "rich"])
def test_a_slim_task_reads_as_the_task_doit_made(fields):
    plain, twin = made(**fields)
    assert type(twin) is slim.SlimTask and isinstance(twin, Task)
    for name, value in vars(plain).items():
        if name in ("_actions", "uptodate", "io"):
            continue
        assert getattr(twin, name) == value, name
    assert twin.io.capture == plain.io.capture
    assert [a for a in twin.actions] and twin.title() == plain.title()
    assert len(vars(twin)) <= 10 < len(vars(plain))


def test_what_is_shared_refuses_to_change_and_what_doit_changes_stays_per_task():
    _, one = made()
    _, other = made()
    assert one.teardown is other.teardown and one.calc_dep is other.calc_dep
    with pytest.raises(TypeError, match="shared by every slim doit task"):
        one.setup_tasks.append("x")
    with pytest.raises(TypeError, match="shared by every slim doit task"):
        one.file_dep.add("x")
    one.calc_dep.clear()  # doit empties an empty set: nothing changes
    one.calc_dep.update(set())
    assert one.values is not other.values and one.task_dep is not other.task_dep
    one.task_dep.append("implicit:maker")  # TaskControl does, for a file_dep's maker
    assert other.task_dep == []
    copy = one.calc_dep.copy()  # an ExecNode's own copy is a plain set
    copy.add("x")
    assert type(copy) is set


def test_a_task_with_calc_dep_stays_doits_and_update_deps_gives_a_slim_task_its_own():
    task = Task("stage:calc", [(noop, [])], calc_dep=["stage:other"])
    slim.slim([task])
    assert type(task) is Task
    _, twin = made()
    twin.update_deps({"file_dep": ["found.c"], "calc_dep": ["more"]})
    assert twin.file_dep == {"found.c"} and twin.calc_dep == {"more"}
    assert slim.EMPTY_SET == set() and slim.EMPTY_LIST == []


def test_pickling_sees_every_attribute_and_a_round_trip_keeps_the_task_small():
    plain, twin = made(**RICH)
    assert set(twin.pickle_safe_dict()) == set(plain.pickle_safe_dict())
    assert set(twin.__getstate__()) == set(plain.__getstate__())
    size = len(vars(twin))
    twin.update_from_pickle(twin.pickle_safe_dict())
    assert len(vars(twin)) == size
    back = pickle.loads(pickle.dumps(twin))
    assert type(back) is slim.SlimTask and back.name == twin.name
    assert back.file_dep == {"in.txt"}


def test_two_thousand_slim_tasks_take_less_than_half_the_memory():
    def measure(slimmed):
        tracemalloc.start()
        tasks = [
            Task(
                f"stage:{i}",
                [(noop, [i])],
                task_dep=[f"dep:{i}"],
                targets=[f"/r/{i}.json"],
                doc="a unit",
            )
            for i in range(2000)
        ]
        if slimmed:
            tasks = slim.slim(tasks)
        used = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return used

    assert measure(True) < 0.5 * measure(False)


def run_in_process(tmp_path, tasks, selected):
    """doit's own Runner over `tasks`, with slim's dispatcher wrappers: (the dispatcher, the
    names of the tasks executed in order)."""
    slim.lighter_nodes()
    ran = []

    def work(name):
        def action():
            ran.append(name)

        return action

    tasks = [
        Task(name, [(work(name), [])] if name != "bad" else ["exit 1"], **fields)
        for name, fields in tasks
    ]
    tasks = slim.slim(tasks)
    taskcontrol = control.TaskControl(tasks)
    taskcontrol.process(selected)
    dep_manager = Dependency(SqliteDB, str(tmp_path / "db"), codec_cls=JSONCodec)
    reporter = ConsoleReporter(open(tmp_path / "out", "w"), {})
    dispatcher = taskcontrol.task_dispatcher()
    Runner(dep_manager, reporter, continue_=True).run_all(dispatcher)
    return dispatcher, ran


def test_finished_nodes_let_go_of_all_but_their_task_and_status(tmp_path):
    (tmp_path / "made.txt").write_text("x")
    dispatcher, ran = run_in_process(
        tmp_path,
        [
            ("a", {}),
            ("b", {"task_dep": ["a"], "targets": [str(tmp_path / "made.txt")]}),
            ("c", {"file_dep": [str(tmp_path / "made.txt")]}),  # doit adds task_dep b
            ("bad", {}),
            ("after_bad", {"task_dep": ["bad"]}),
        ],
        ["c", "after_bad"],
    )
    assert ran == ["a", "b", "c"]
    nodes = dispatcher.nodes
    assert {n: nodes[n].run_status for n in nodes} == {
        "a": "successful",
        "b": "successful",
        "c": "successful",
        "bad": "failure",
        "after_bad": "failure",
    }
    assert [n.task.name for n in nodes["after_bad"].bad_deps] == ["bad"]
    for node in nodes.values():
        assert node.waiting_me is slim.EMPTY_SET and node.ancestors is slim.EMPTY_LIST
        assert node.step() is None
    # a task that ran lets its action instances go; a failed one keeps them (doit prints their
    # output at the end), and doit makes them again when asked
    assert "_action_instances" not in vars(nodes["c"].task)
    assert vars(nodes["bad"].task)["_action_instances"]
    assert [str(a).rpartition(".")[2] for a in nodes["c"].task.actions] == ["action"]


DODO = textwrap.dedent("""
    import os
    from doit.loader import generate_tasks
    from nginx_eval.doitext import slim
    slim.lighter_nodes()
    LOG = os.environ["ORDER_LOG"]

    def step(name, target=None):
        def action():
            with open(LOG, "a") as f:
                f.write(name + "\\n")
            if target:
                with open(target, "w") as f:
                    f.write(name)
        return action

    def dicts():
        for i in range(20):
            yield {"basename": "one", "name": str(i), "targets": [f"one-{i}.txt"],
                   "actions": [step(f"one:{i}", f"one-{i}.txt")], "uptodate": [True]}
            # doit finds one:i, the maker of its file_dep, and runs it first
            yield {"basename": "two", "name": str(i), "actions": [step(f"two:{i}")],
                   "file_dep": [f"one-{i}.txt"]}

    def task_all():
        yield from slim.slim(generate_tasks("all", dicts()))
""")


@pytest.mark.e2e
@pytest.mark.parametrize("par_type", ["thread", "process"])
def test_a_real_doit_run_with_slim_tasks_keeps_every_dependency(tmp_path, par_type):
    (tmp_path / "dodo.py").write_text(DODO)
    log = tmp_path / "order.log"

    def doit_run():
        result = subprocess.run(
            [sys.executable, "-m", "doit", "-n", "3", "-P", par_type, "two"],
            cwd=tmp_path,
            env={"ORDER_LOG": str(log)},
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return log.read_text().split()

    order = doit_run()
    assert sorted(order) == sorted([f"{b}:{i}" for b in ("one", "two") for i in range(20)])
    assert all(order.index(f"one:{i}") < order.index(f"two:{i}") for i in range(20))
    assert doit_run() == order  # the second run finds every task up to date
