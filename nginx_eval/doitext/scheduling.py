"""The order in which doit's workers pick tasks: finish a started chain before opening a new one.

doit's dispatcher explores the task graph breadth first, from a first-in first-out queue, and
stops exploring while a task that could run waits for a free worker, which leaves the processors
of a cold run idle. ``finish_chains_first(counts)`` changes three things:

- a task whose last dependency has just finished goes to the front of the queue, not behind every
  base build queued at the start: the builds and proves of a base start as soon as it is
  published, and a prove (which mostly waits on sockets and timers) overlaps the next clean build;
- every selected task (``doit run nginx:gold nginx:none nginx:file``) is explored first, not each
  only once the queue of the one before it is empty;
- a worker gets a task of a limited kind (base and unit builds, proves, agents: KIND_OF_STAGE)
  only while fewer of that kind are out than its limit (limits.py); the next ready task of another
  kind goes first, and a task held back waits behind those a finished task releases (a base's
  siblings and gold builds), so that no worker queues for a slot while a prove could run.

The set of tasks that runs and every dependency stay as they are; only the choice among tasks
that are ready changes. Which order is the build plan's policy, in build/plan.py: the order
builds start in (interleave_by_build_group), the base builds' spanning tree (base_build_plan) and
the order of the results task's dependencies (start_order).

doit offers no hook for this, so it wraps three methods of ``TaskDispatcher`` (doit 0.37; the
pin is checked by tests/test_doit_pin.py) and reads its ``ready`` queue. If a later doit lacks
them, doit's own order stays in place.
"""

from collections import Counter
from collections.abc import Callable, Generator
from typing import Any

from doit import control

from ..core import runstate
from ..core.tasknames import AGENT, BASE, BUILD, PROVE
from .wrapping import wrap_once

# The kind of work (limits.KINDS) of a task, by its basename.
KIND_OF_STAGE = {BASE: "build", BUILD: "build", PROVE: "prove", AGENT: "agent"}
HOLD_ON = "hold on"  # what the dispatcher says when no task can go until one is processed


def kind_of(node: Any) -> str | None:
    return KIND_OF_STAGE.get(node.task.name.partition(":")[0])


# doit's TaskDispatcher methods, as scheduling wraps them.
Method = Callable[..., Any]


def _limited(dispatcher_generator: Method) -> Method:
    """doit's dispatcher, holding back a task whose kind has as many tasks out (handed to a
    worker and not processed yet) as the run's dispatch_limits[kind] (core/runstate.py) until
    one of them is: other tasks go first meanwhile.

    doit's protocol: the runner sends the generator a processed node (or None) and gets the next
    node to give a worker, or HOLD_ON. A processed node goes to doit's generator first, and what
    doit's order then hands out (the tasks it just released first) before the nodes held back
    earlier: those go, oldest first, once doit's generator has nothing else ready."""

    def limited_dispatcher_generator(self: Any, selected_tasks: Any) -> Generator[Any, Any, None]:
        inner = dispatcher_generator(self, selected_tasks)
        limits = runstate.current().dispatch_limits
        out: Counter[str | None] = Counter()
        held: list[Any] = []
        inbox: list[Any] = []
        inner_waits = inner_done = False

        def has_room(node: Any) -> bool:
            kind = kind_of(node)
            return kind is None or kind not in limits or out[kind] < limits[kind]

        def returned(processed: Any) -> None:
            if isinstance(processed, control.ExecNode) and kind_of(processed):
                out[kind_of(processed)] -= 1
            if processed is not None and not inner_done:
                inbox.append(processed)

        while True:
            if not inner_done and (inbox or not inner_waits):
                try:
                    step = inner.send(inbox.pop(0) if inbox else None)
                except StopIteration:
                    inner_done = True
                    continue
                inner_waits = step == HOLD_ON
                if inner_waits:
                    continue
                kind = kind_of(step)
                if kind in limits and out[kind] >= limits[kind]:
                    held.append(step)
                    continue
            else:
                step = next((n for n in held if has_room(n)), None)
                if step is not None:
                    held.remove(step)
                elif inner_done and not held:
                    return
                else:
                    returned((yield HOLD_ON))
                    continue
            if kind_of(step):
                out[kind_of(step)] += 1
            returned((yield step))

    limited_dispatcher_generator.wrapped = dispatcher_generator  # type: ignore[attr-defined]
    return limited_dispatcher_generator


def _released_first(update_waiting: Method) -> Method:
    def update_waiting_released_first(self: Any, processed: Any) -> None:
        ready: Any = getattr(self, "ready", None)
        before = len(ready) if ready is not None else None
        update_waiting(self, processed)
        if before is None or not hasattr(ready, "extendleft"):
            return
        released = [ready.pop() for _ in range(len(ready) - before)]
        # pop() took them last first; extendleft reverses again, so they keep their order.
        ready.extendleft(released)

    update_waiting_released_first.wrapped = update_waiting  # type: ignore[attr-defined]
    return update_waiting_released_first


def _selected_first(get_next_node: Method) -> Method:
    def get_next_node_selected_first(self: Any, ready: Any, tasks_to_run: list[str]) -> Any:
        # tasks_to_run holds the selected tasks not explored yet, the next one last.
        while tasks_to_run:
            node = self._gen_node(None, tasks_to_run.pop())
            if node:
                return node
        return get_next_node(self, ready, tasks_to_run)

    get_next_node_selected_first.wrapped = get_next_node  # type: ignore[attr-defined]
    return get_next_node_selected_first


def finish_chains_first(counts: dict[str, int] | None = None) -> None:
    """Install the policy (idempotent); counts: {kind: limit} of the run (limits.py), the most
    tasks of each kind handed out at once, kept in the run's state."""
    runstate.current().dispatch_limits = dict(counts or {})
    for name, wrap in (
        ("_update_waiting", _released_first),
        ("_get_next_node", _selected_first),
        ("_dispatcher_generator", _limited),
    ):
        wrap_once(control.TaskDispatcher, name, wrap)
