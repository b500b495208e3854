"""The order in which doit's workers pick tasks: finish a started chain before opening a new one.

doit's dispatcher explores the task graph breadth first, from a first-in first-out queue, and
stops exploring while a task that could run waits for a free worker. Two consequences cost a
cold run of the shipped benchmark tens of seconds with the processors idle:

- A task whose last dependency has just finished goes to the back of the queue, behind every
  base build queued at the start: every prove waited until the last build was done, and then the
  workers only waited for nginx-tests. ``finish_chains_first`` puts such a task at the front, so
  the builds and proves of a base start as soon as it is published, and a prove (which mostly
  waits on sockets and timers) overlaps the next clean build.
- Several selected tasks (``doit run nginx:gold nginx:none nginx:file``) are explored one after
  the other, the second only once the queue of the first is empty, that is after the first
  mode's last clean base build has started: the other modes' proves of already published bases
  could not start before. ``finish_chains_first`` explores all selected tasks first.

The set of tasks that runs and every dependency stay as they were; only the choice among tasks
that are ready changes. This module only makes doit keep an order; which order is the build
plan's policy, in buildplan.py: the order builds start in (interleave_by_build_group), the base
builds' spanning tree (base_build_plan) and the order of the results task's dependencies
(start_order).

doit offers no hook for this, so it wraps two methods of ``TaskDispatcher`` (doit 0.37; the pin is checked by tests/test_doit_pin.py). If a
later doit lacks them, doit's own order stays in place.
"""

from doit import control


def _released_first(update_waiting):
    def update_waiting_released_first(self, processed):
        ready = getattr(self, "ready", None)
        before = len(ready) if ready is not None else None
        update_waiting(self, processed)
        if before is None or not hasattr(ready, "extendleft"):
            return
        released = [ready.pop() for _ in range(len(ready) - before)]
        # pop() took them last first; extendleft reverses again, so they keep their order.
        ready.extendleft(released)
    update_waiting_released_first.wrapped = update_waiting
    return update_waiting_released_first


def _selected_first(get_next_node):
    def get_next_node_selected_first(self, ready, tasks_to_run):
        # tasks_to_run holds the selected tasks not explored yet, the next one last.
        while tasks_to_run:
            node = self._gen_node(None, tasks_to_run.pop())
            if node:
                return node
        return get_next_node(self, ready, tasks_to_run)
    get_next_node_selected_first.wrapped = get_next_node
    return get_next_node_selected_first


def finish_chains_first():
    """Install the policy (idempotent)."""
    for name, wrap in (("_update_waiting", _released_first), ("_get_next_node", _selected_first)):
        current = getattr(control.TaskDispatcher, name, None)
        if current is not None and not hasattr(current, "wrapped"):
            setattr(control.TaskDispatcher, name, wrap(current))
