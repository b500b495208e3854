"""Entry points: dodo.py's loader, with user errors printed as one line and a non-zero exit.

Besides loading the tasks, the loader guards the run before doit opens its database:

- **One doit process per run.** Commands that execute tasks or change doit's database (everything
  but list, info, help, dumpdb, tabcompletion) hold two locks for the life of the process: the
  results directory of the run (``results/<run>/``, a directory flock, so that two caches cannot
  write one results directory) and ``<cache>/locks/run-<run>.lock`` (the run's workspaces and doit
  database, so that two results roots cannot share them). A second process is refused with one
  line naming the holder's pid. Runs of different names may proceed side by side: what they share
  in the cache (clones, test trees, builds) has per-entry locks. Workers that ``doit -n N`` forks
  inherit the locks; programs the tasks start do not.
- **Preflight** (agent/preflight.py). Before the first task of ``doit run``, every agent phase
  about to run must be able to start its program. Only doit's reporter sees which tasks were
  selected before the first one starts, so the check lives in ``Reporter.initialize`` (another
  ``--reporter`` skips it).
- **The toolchain.** Before the first task of ``doit run`` that builds or tests, the pinned
  toolchain (core/rootfs.py) must be there and match its manifest, or the command stops with one
  line: how to make it, or ``NGINX_EVAL_TOOLCHAIN=host`` for this machine's own tools.
- **Errors in tasks.** A task that fails on a user mistake (an unknown commit, a missing test file)
  is printed as one ``nginx-eval: error:`` line instead of a traceback.
- **Interrupts.** ``doit run`` installs SIGINT and SIGTERM handlers before it loads the tasks
  (procs.stop_on_signals): everything the run started is stopped, stderr gets one line
  (``report_interrupt``: the tasks the reporter saw finish, the commands stopped) instead of a
  traceback and doit's report of failed tasks, and doit exits with 128 + the signal.
"""

import atexit
import ctypes
import os
import sys
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doit.reporter import ConsoleReporter

from . import progress
from .agent.preflight import preflight
from .cluster import executor
from .core import jsonio, limits, procs, rootfs, runstate
from .core.errors import UserError, UserFailure, fail
from .core.locks import Busy, hold_until_exit
from .core.outcomes import INFRA_ERROR
from .core.tasknames import AGENT, BASE, BUILD, PROVE, STRICT, VALIDATE, task_name
from .doitext import cleaning, plugins, scheduling, slim
from .doitext.invocation import (
    READ_ONLY_COMMANDS,
    TASK_COMMANDS,
    command_targets,
    doit_command,
    reachable,
    track_tasks,
)
from .report import site as report_site
from .run.options import check_environment
from .run.record import bind_run, check_benchmark, check_has_results, check_is_run, read_run

if TYPE_CHECKING:
    from doit.task import Task

    from .core.layout import Layout
    from .pipeline import Context


def check_task_names(namespace: Mapping[str, Any], command: str, argv: list[str]) -> None:
    """A name the command gives doit that is no task is one line, before doit sees it."""
    from .pipeline import check_requested_tasks

    if command in TASK_COMMANDS:
        check_requested_tasks(
            namespace["NGINX_EVAL_CONTEXT"], list(namespace["task_stages"]()), command_targets(argv)
        )


# Targets that read a run or the machine and score nothing: they do not add to the run's record
# (nor do their subtasks: report:markdown, site:index).
NON_SCORING_TARGETS = ("report", "doctor", "power", "site")
# Of those, the ones that show a run: they need one with results (run/record.py).
READING_TARGETS = ("report", "power", "site")
# Of those, the ones that neither read nor write the run: the doctor checks the machine for the
# selected tasks of any benchmark (`doit run doctor bench=swebench-verified` after `doit run
# nginx:gold` in run default), so the run's benchmark does not bind it.
MACHINE_TARGETS = ("doctor",)


def check_run_benchmark(ctx: "Context", command: str, argv: list[str]) -> None:
    """check_benchmark, unless the command only asks the doctor (MACHINE_TARGETS)."""
    from .pipeline import expand_default

    targets = expand_default(ctx, command_targets(argv)) if command == "run" else []
    if targets and {t.split(":", 1)[0] for t in targets} <= set(MACHINE_TARGETS):
        return
    check_benchmark(ctx.layout, ctx.benchmark.name)


def selecting_targets(ctx: "Context", targets: list[str]) -> list[str]:
    """The targets that select tasks for the run: the benchmark's own commands (`nginx`,
    `nginx:raw`, `nginx:validate`; a bare `doit` is spelled out as such by expand_default). A
    task named directly (`prove:nginx/gold/ID`, a stage such as `build`, a pattern) runs what
    it names and selects nothing: redoing one unit must not widen the run's denominator."""
    return [t for t in targets if t.split(":", 1)[0] == ctx.benchmark.name]


def bind_to_run(ctx: "Context", argv: list[str]) -> None:
    """Before any work of `doit run`: the run belongs to this benchmark (or the command is
    refused), and its record gains this command's selection, tasks and modes when the command
    selects (run/record.py). A candidates file runs only its validation
    (pipeline.check_candidates)."""
    from .pipeline import check_candidates, expand_default

    targets = expand_default(ctx, command_targets(argv))
    check_candidates(ctx, targets)
    stages = {t.split(":", 1)[0] for t in targets}
    if stages <= set(NON_SCORING_TARGETS):
        if stages & set(READING_TARGETS):
            check_has_results(ctx.layout, ctx.benchmark.name)
        return
    bench = ctx.benchmark.name
    selecting = selecting_targets(ctx, targets)
    modes = [
        m
        for m in ctx.modes
        if (bench in selecting and ctx.in_group(m)) or task_name(bench, m) in selecting
    ]
    new = read_run(ctx.layout) is None
    bind_run(
        ctx.layout,
        ctx.benchmark,
        ctx.tasks,
        modes,
        instances=ctx.selection["instances"] if ctx.selection else None,
        limit=ctx.selection["limit"] if ctx.selection else None,
        predictions=ctx.selection.get("predictions") if ctx.selection else None,
        selects=bool(selecting),
    )
    if new:
        # A first command stopped by an error before any result leaves no run behind.
        atexit.register(_remove_if_alone, ctx.layout.run_json)


def _remove_if_alone(record: Path) -> None:
    if record.exists() and [p.name for p in record.parent.iterdir()] == [record.name]:
        record.unlink()
        _remove_if_empty(record.parent)


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


def _hold(path: Path) -> None:
    try:
        hold_until_exit(path)
    except Busy as busy:
        pid = busy.pid if busy.pid is not None else "unknown"
        fail(f"another doit process is using {path} (pid {pid}); wait for it or stop it")


def take_run_locks(layout: "Layout") -> None:
    created = not layout.run_dir.exists()
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    _hold(layout.run_dir)
    if created:
        # A run stopped by an error before its first result leaves nothing under results/.
        atexit.register(_remove_if_empty, layout.run_dir)
    _hold(layout.lock(f"run-{layout.run}"))


def report_interrupt(signum: int, stopped: int) -> None:
    """The one line of a `doit run` stopped by SIGINT or SIGTERM (procs.stop_on_signals), on the
    real stderr (doit captures sys.stderr while an action runs): the tasks the run finished
    (its state counts them, core/runstate.py) and the commands stopped."""
    line = (
        f"nginx-eval: interrupted; {runstate.current().finished_tasks} units finished and "
        f"kept, {stopped} stopped\n"
    )
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (RuntimeError, OSError, ValueError):
            pass  # the handler interrupted a write to it
    os.write(2, line.encode())


def all_agents_failed(agent_tasks: Iterable["Task"]) -> str | None:
    """The line for a run whose agents all ended in infra_error (nothing was scored), or
    None. agent_tasks: the agent tasks doit ran in this run (their targets: agent.json)."""
    statuses = [
        (jsonio.read_json(Path(t.targets[0])) or {}).get("status") for t in agent_tasks if t.targets
    ]
    if statuses and all(s == INFRA_ERROR for s in statuses):
        return (
            f"all {len(statuses)} agent run(s) of this command ended in infra_error "
            f"(see the agent lines above): nothing was measured"
        )
    return None


# Stages whose tasks run commands in the toolchain (core/rootfs.py).
TOOLCHAIN_STAGES = frozenset({BASE, BUILD, PROVE, STRICT, VALIDATE})


def toolchain_preflight(tasks: Mapping[str, "Task"], selected: Collection[str]) -> None:
    """Before the first task of `doit run`: when a build or a test is about to run, the pinned
    toolchain can be used (never a silent fallback to the host's own tools), or the command
    stops with one line saying how to make it or switch the pin off."""
    names = reachable(tasks, selected)
    if not any(name.split(":", 1)[0] in TOOLCHAIN_STAGES for name in names):
        return
    problem = rootfs.problem(rootfs.current())
    if problem:
        raise UserError(f"the pinned toolchain: {problem}")


def reporter_for(ctx: "Context", command: str) -> type:
    class Reporter(ConsoleReporter):
        """doit's console output, plus the preflight and one-line user errors."""

        def __init__(self, outstream: Any, options: Any) -> None:
            super().__init__(outstream, options)
            self.printed: set[str] = set()
            self.agents: list[Task] = []

        def initialize(self, tasks: Mapping[str, "Task"], selected_tasks: Collection[str]) -> None:
            super().initialize(tasks, selected_tasks)
            if command == "run":
                try:
                    toolchain_preflight(tasks, selected_tasks)
                    preflight(ctx, tasks, selected_tasks)
                except UserError as e:
                    fail(e)

        def add_success(self, task: "Task") -> None:
            super().add_success(task)
            if task.actions:
                runstate.current().finished_tasks += 1
            if task.name.startswith(f"{AGENT}:"):
                self.agents.append(task)

        def add_failure(self, task: "Task", fail_info: Any) -> None:
            if procs.interrupted():
                return  # a task the interrupt stopped: report_interrupt said it
            if isinstance(fail_info, UserFailure):
                # With -n N several tasks may hit the same mistake: say it once.
                if fail_info.message not in self.printed:
                    self.printed.add(fail_info.message)
                    sys.stderr.write(f"nginx-eval: error: {fail_info.message}\n")
                    sys.stderr.flush()
                return
            super().add_failure(task, fail_info)

        def runtime_error(self, msg: str) -> None:
            if not procs.interrupted():
                super().runtime_error(msg)

        def complete_run(self) -> None:
            if not procs.interrupted():
                super().complete_run()

    watched: Any = progress.watching(Reporter, ctx, command)

    class Checked(watched):
        def complete_run(self) -> None:
            super().complete_run()  # the summary lines first
            failed = not procs.interrupted() and all_agents_failed(self.agents)
            if failed:
                sys.stderr.write(f"nginx-eval: error: {failed}\n")
                sys.stderr.flush()
                raise SystemExit(1)  # doit has closed its database already

    return Checked


def _refuse_processes(argv: list[str]) -> None:
    for i, word in enumerate(argv):
        value = (
            argv[i + 1]
            if word in ("-P", "--parallel-type") and i + 1 < len(argv)
            else word.split("=", 1)[1]
            if word.startswith("--parallel-type=")
            else None
        )
        if value and value != "thread":
            raise UserError(f"executor=ray runs doit's workers as threads: drop -P {value}")


def use_the_machine(config: dict[str, Any], counts: dict[str, int]) -> None:
    """doit's defaults for `doit run` without -n and -P (DOIT_CONFIG; the command line's -n and
    -P still win, so -n 1 runs one unit at a time): as many workers as the limits per kind of
    work have slots ({kind: count}), as threads. The stages spend their time in the commands
    they start, so threads run them side by side without pickling a task per process."""
    config.setdefault("num_process", limits.worker_count(counts))
    config.setdefault("par_type", "thread")


# glibc's mallopt parameter for the number of malloc arenas (malloc.h).
M_ARENA_MAX = -8
MALLOC_ARENAS = 2


def few_malloc_arenas() -> None:
    """Threads that allocate at once each get a malloc arena of their own from glibc, up to
    8 per core, and every arena keeps what it once held: doit's twenty-odd worker threads
    raise the process's peak memory by a tenth (docs/performance.md).
    Called before doit starts its threads; elsewhere than glibc, nothing."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return  # the user's own setting
    try:
        ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, MALLOC_ARENAS)
    except (OSError, AttributeError):
        pass


def dry_run(namespace: dict, command: str) -> None:
    """`doit run ... dry_run=1`: the same checks as a run (the run's benchmark, the task names,
    a candidates file), then what the command would do (preview.py), and exit 0. It takes no
    lock and writes nothing, so it may look at a run that another process is running."""
    ctx = namespace["NGINX_EVAL_CONTEXT"]
    try:
        if command != "run":
            raise UserError(
                f"dry_run=1 is a variable of `doit run`, not of `doit {command}`"
                + (" (`doit clean -n` only counts)" if command == "clean" else "")
            )
        check_run_benchmark(ctx, command, sys.argv[1:])
        check_task_names(namespace, command, sys.argv[1:])
        from .pipeline import check_candidates, expand_default

        check_candidates(ctx, expand_default(ctx, command_targets(sys.argv[1:])))
        from .preview import print_preview

        print_preview(ctx, sys.argv[1:])
    except UserError as e:
        fail(e)
    raise SystemExit(0)


def load_dodo(root: str | Path | None = None) -> dict[str, Any]:
    from .pipeline import doit_tasks

    runstate.begin()  # this doit invocation's state: nothing of an earlier one in the process
    plugins.read_entry_points_once()  # doit's backends and reporters are still to be looked up
    command = doit_command(sys.argv[1:])
    if command == "run":
        few_malloc_arenas()
        # SIGINT and SIGTERM stop everything the run started, and say so in one line; the run's
        # directory of token files is known once the tasks are loaded.
        procs.stop_on_signals(None, report_interrupt)
    try:
        check_environment(os.environ)
        namespace = doit_tasks(root)
    except UserError as e:
        fail(e)
    ctx = namespace["NGINX_EVAL_CONTEXT"]
    if ctx.options.dry_run:
        dry_run(namespace, command)  # prints, and exits before doit opens its database
    if command == "run":
        procs.stop_on_signals(ctx.layout.running_dir, report_interrupt)
        track_tasks()
        limits.configure(ctx.layout, ctx.options)  # before doit forks its workers
        try:
            if ctx.options.executor == "ray":
                # One Ray driver: doit's workers must be its threads, never forked processes.
                _refuse_processes(sys.argv[1:])
            executor.configure(ctx.layout, ctx.options)
            if executor.is_remote():
                namespace["DOIT_CONFIG"]["par_type"] = "thread"
        except UserError as e:
            fail(e)
        use_the_machine(namespace["DOIT_CONFIG"], executor.slot_counts() or limits.counts())
    if command in READ_ONLY_COMMANDS:
        try:
            check_task_names(namespace, command, sys.argv[1:])
        except UserError as e:
            fail(e)
    else:
        if command == "clean":
            try:
                check_is_run(ctx.layout)  # before the lock creates results/<run>/
            except UserError as e:
                fail(e)
        take_run_locks(ctx.layout)
        # From here the command may change result files: the site's record of a complete
        # rendering goes, and only a run that changed none may trust it (progress.py).
        ctx.site_unchanged = report_site.take_completion(ctx.layout)
        try:
            check_run_benchmark(ctx, command, sys.argv[1:])
            check_task_names(namespace, command, sys.argv[1:])
            if command == "run":
                bind_to_run(ctx, sys.argv[1:])
            if command == "forget":
                from .pipeline import check_forget

                check_forget(list(namespace["task_stages"]()), sys.argv[1:])
        except UserError as e:
            fail(e)
    if command == "run":
        scheduling.finish_chains_first(executor.slot_counts() or limits.counts())
        slim.lighter_nodes()
    if command == "clean":
        # One summary line; per-item lines with verbosity=2 (`doit clean` has no -v).
        cleaning.quiet_clean(verbose=ctx.options.verbosity == 2)
    namespace["DOIT_CONFIG"]["reporter"] = reporter_for(ctx, command)
    return namespace
