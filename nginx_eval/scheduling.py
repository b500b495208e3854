"""The order in which doit's workers pick tasks: finish a started chain before opening a new one.

doit's dispatcher keeps a first-in first-out queue of tasks to look at. The task lists of the
pipeline put every base build in it at the start (doit learns the whole graph before the first
task runs), and a task whose last dependency has just finished goes to the back of that queue.
So with ``-n 2`` every clean base build ran before the first gold build, and every prove waited
until the last build was done: ~20 s at the end of a cold run of the shipped benchmark in which
the workers only waited for nginx-tests, with the processors idle.

``finish_chains_first`` puts such released tasks at the front instead: as soon as a base build is
published, the builds and proves of its patches run, and a prove (which mostly waits for sockets
and timers) overlaps the next clean build instead of queueing behind it. The set of tasks that
runs, and every dependency, stay as they were; only the choice among tasks that are ready changes.

doit offers no hook for this, so it wraps ``TaskDispatcher._update_waiting`` (doit 0.36). If a
later doit changes that method, the wrapper leaves doit's own order in place.
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


def finish_chains_first():
    """Install the policy (idempotent)."""
    current = getattr(control.TaskDispatcher, "_update_waiting", None)
    if current is None or hasattr(current, "wrapped"):
        return
    control.TaskDispatcher._update_waiting = _released_first(current)
