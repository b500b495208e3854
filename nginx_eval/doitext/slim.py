"""doit's Task objects, with what every task of the pipeline has alike kept once.

A run of six modes on the shipped benchmark hands doit thousands of tasks, and doit's Task keeps
34 attributes in each instance: a dictionary, and next to it nine empty lists, sets and dicts
and an IOConfig, before anything of ours. Most of those attributes are the same for every task
here: no clean or teardown actions, no parameters, no calc_dep, output captured. ``slim`` makes
each Task a ``SlimTask``, which keeps those values on the class, and gives the instance a
dictionary of only what differs (name, actions, dependencies, targets, uptodate, doc, values),
so that the doit process's peak memory stays under its target (docs/performance.md).

What is kept once must never change under doit. doit changes a task's file_dep, calc_dep and
wild_dep only through calc_dep results (Task.update_deps), so a task with calc_dep keeps them
of its own and ``update_deps`` gives a slim task its own copies first; every other container
kept once refuses changes (a doit that changed one would stop with a TypeError naming it, not
share a change between tasks). ``values``, which doit fills as a task runs, stays per task.
The attributes are doit 0.37's (tests/test_doit_pin.py pins that version).
"""

from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from doit import control
from doit.task import IOConfig, Task

from .wrapping import wrap_once

# A method of doit's TaskDispatcher, and what replaces it.
Method = Callable[..., Any]


class _Shared:
    """A container kept once for every slim task: changing it is an error."""

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(
            "a container shared by every slim doit task cannot change (nginx_eval/doitext/slim.py)"
        )

    def clear(self) -> None:
        if self:
            self._refuse()  # emptying an empty container changes nothing: doit does it


class SharedList(_Shared, list):
    append = extend = insert = remove = pop = sort = reverse = _Shared._refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _Shared._refuse


class SharedSet(_Shared, set):
    # set.copy() of it is a plain set (doit's ExecNode copies calc_dep, then changes its copy).
    add = discard = remove = pop = _Shared._refuse

    def update(self, *others: Iterable[Any]) -> None:
        if any(others):
            self._refuse()  # adding nothing changes nothing: doit does it

    difference_update = intersection_update = symmetric_difference_update = _Shared._refuse
    __ior__ = __iand__ = __isub__ = __ixor__ = _Shared._refuse


class SharedDict(_Shared, dict):
    pop = popitem = setdefault = __setitem__ = __delitem__ = __ior__ = _Shared._refuse

    def update(self, *others: Any, **more: Any) -> None:
        if any(others) or more:
            self._refuse()


EMPTY_LIST, EMPTY_SET, EMPTY_DICT = SharedList(), SharedSet(), SharedDict()

# {attribute: its value on the class}: what Task.__init__ gives a task that sets nothing.
DEFAULTS = {
    "params": (),
    "creator_params": EMPTY_LIST,
    "options": None,
    "pos_arg": None,
    "pos_arg_val": None,
    "setup_tasks": EMPTY_LIST,
    "io": IOConfig({}),
    "_action_instances": None,
    "dep_changed": None,
    "file_dep": EMPTY_SET,
    "wild_dep": EMPTY_LIST,
    "calc_dep": EMPTY_SET,
    "loader": None,
    "getargs": EMPTY_DICT,
    "value_savers": EMPTY_LIST,
    "subtask_of": None,
    "has_subtask": False,
    "result": None,
    "verbosity": None,
    "custom_title": None,
    "cfg_values": None,
    "_remove_targets": False,
    "clean_actions": EMPTY_LIST,
    "teardown": EMPTY_LIST,
    "watch": (),
    "meta": None,
    "executed": False,
}
# Not among them: task_dep (TaskControl appends the makers of a task's file_dep to it), uptodate,
# targets and values, which are seldom empty or change as the task runs.
_CONTAINERS = (list, tuple, set, dict)


class SlimTask(Task):
    """A doit Task whose attributes equal to DEFAULTS live on the class (see the module)."""

    def unslimmed(self) -> Task:
        """A plain doit Task with every attribute in its instance, as doit made it: for doit's
        code that reads a task's __dict__ (pickling for `-P process`)."""
        task = Task.__new__(Task)
        task.__dict__ = dict(DEFAULTS, **self.__dict__)
        return task

    def __getstate__(self) -> dict[str, Any]:
        return self.unslimmed().__getstate__()

    def pickle_safe_dict(self) -> dict[str, Any]:
        return self.unslimmed().pickle_safe_dict()

    def update_from_pickle(self, pickle_obj: dict[str, Any]) -> None:
        # doit's runners hand a worker the task as pickle_safe_dict() and write it back with
        # __dict__.update: every attribute in the instance again, the task as large as before.
        for name, value in pickle_obj.items():
            if name in DEFAULTS and _is_default(name, value):
                self.__dict__.pop(name, None)
            else:
                setattr(self, name, value)

    def update_deps(self, deps: dict[str, Any]) -> None:
        for name, kind in (("file_dep", set), ("calc_dep", set), ("wild_dep", list)):
            if name not in self.__dict__:
                setattr(self, name, kind())
        super().update_deps(deps)


for _name, _value in DEFAULTS.items():
    setattr(SlimTask, _name, _value)


def _is_default(name: str, value: object) -> bool:
    default = DEFAULTS[name]
    if isinstance(default, IOConfig):
        return isinstance(value, IOConfig) and vars(value) == vars(default)
    if isinstance(default, _CONTAINERS):
        return (
            isinstance(value, _CONTAINERS)
            and not value
            and (isinstance(value, (set, frozenset)) == isinstance(default, (set, frozenset)))
        )
    return value is default


def slim(tasks: Iterable[Task]) -> list[Task]:
    """The doit Tasks `tasks` (an iterable), each made a SlimTask in place, as a list. A task
    with calc_dep, or of a class other than doit's Task, is left as it is."""
    tasks = list(tasks)
    for task in tasks:
        if type(task) is not Task or task.calc_dep:
            continue
        own = {
            name: value
            for name, value in vars(task).items()
            if name not in DEFAULTS or not _is_default(name, value)
        }
        task.__class__ = SlimTask
        task.__dict__ = own
    return tasks


# -- doit's dispatcher nodes ---------------------------------------------------------------------
# doit's dispatcher makes an ExecNode for every task it reaches, at the start of a run nearly all
# of them, about 2 KB each (four sets, four lists, two suspended generators): 12 MiB at the start
# of that run (tracemalloc), kept to its end. A node whose task has no calc_dep never adds to its
# calc_dep or wait_run_calc, so those two are shared from the start; once its task has a final
# status, doit reads only the node's task and run_status (a node that still waits for it looks at
# nothing else), so the rest is let go.
FINAL = ("successful", "up-to-date", "failure", "ignore")
_ENDED = iter(())  # an exhausted generator: what the node's own would say next (nothing)


def _lighter_nodes(gen_node: Method) -> Method:
    def gen_node_lighter(self: Any, parent: Any, task_name: str) -> Any:
        made = task_name not in self.nodes
        node = gen_node(self, parent, task_name)
        if made and node is not None and not node.calc_dep and not node.wait_run_calc:
            node.calc_dep = node.wait_run_calc = EMPTY_SET
        return node

    gen_node_lighter.wrapped = gen_node  # type: ignore[attr-defined]
    return gen_node_lighter


def _shed_when_final(update_waiting: Method) -> Method:
    def update_waiting_and_shed(self: Any, processed: Any) -> None:
        update_waiting(self, processed)
        if (
            processed is not None
            and processed.run_status in FINAL
            and not processed.task.setup_tasks
            and not processed.wait_run
            and not processed.wait_run_calc
        ):
            processed.task_dep = processed.ancestors = EMPTY_LIST
            processed.calc_dep = processed.wait_run = processed.wait_run_calc = EMPTY_SET
            processed.waiting_me = EMPTY_SET
            processed.generator = _ENDED
            if processed.run_status != "failure":
                _let_go(processed.task)

    update_waiting_and_shed.wrapped = update_waiting  # type: ignore[attr-defined]
    return update_waiting_and_shed


def _let_go(task: Task) -> None:
    """A slim task that ran keeps what it had before, and its result and values: its action
    instances go (doit makes them again from _actions if asked; only a failed task's are read
    later, for their output), and so do the options and result doit set to nothing: what doit's
    run added to the instance dictionary."""
    if type(task) is SlimTask:
        task.__dict__ = {
            name: value
            for name, value in vars(task).items()
            if name != "_action_instances"
            and not (name == "options" and value == {} and not task.params)
            and (name not in DEFAULTS or not _is_default(name, value))
        }


def lighter_nodes() -> None:
    """Install the two wrappers above on doit's TaskDispatcher (idempotent)."""
    wrap_once(control.TaskDispatcher, "_gen_node", _lighter_nodes)
    wrap_once(control.TaskDispatcher, "_update_waiting", _shed_when_final)
