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
- **Preflight.** Before the first task of ``doit run``, the program each agent phase that is about
  to run starts must be on PATH and must start: Claude Code's ``--version`` runs (its output is
  the version agent.json records), in the sandbox the mode uses when it has one (another agent
  is looked up there with bash's ``type``, never run). It also clears a stop that refused
  credentials left on the run (agent_limits.py). Only doit's reporter sees which tasks were
  selected before the first one starts, so the check lives in ``Reporter.initialize`` (another
  ``--reporter`` skips it).
- **Errors in tasks.** A task that fails on a user mistake (an unknown commit, a missing test file)
  is printed as one ``nginx-eval: error:`` line instead of a traceback.
- **Interrupts.** ``doit run`` installs SIGINT and SIGTERM handlers before it loads the tasks
  (procs.stop_on_signals): everything the run started is stopped, stderr gets one line
  (``report_interrupt``: the tasks the reporter saw finish, the commands stopped) instead of a
  traceback and doit's report of failed tasks, and doit exits with 128 + the signal.
"""

import atexit
import functools
import os
import subprocess
import sys

from doit.reporter import ConsoleReporter

from . import cleaning, executor, limits, procs, progress, sandbox, scheduling
from .agent import agent_finished
from .agent_limits import clear_stop
from .claude_code import is_claude_code, program_version, resolve_program
from .errors import UserError, UserFailure, fail
from .locks import Busy, hold_until_exit
from .commandline import command_program
from .runrecord import bind_run, check_benchmark, read_run

# doit commands that only read: they take no lock, so they work while a run is going on.
READ_ONLY_COMMANDS = ("list", "info", "help", "dumpdb", "tabcompletion")
DOIT_COMMANDS = ("run", "clean", "forget", "ignore", "reset-dep", "strace") + READ_ONLY_COMMANDS
# doit's loader options, which may come before the command name; the first two take a value.
LOADER_OPTIONS_WITH_VALUE = ("-f", "--file", "-d", "--dir")
# Options of `doit run` whose value is the next word.
RUN_OPTIONS_WITH_VALUE = ("-n", "--process", "-P", "--parallel-type", "-o", "--output-file",
                          "-r", "--reporter", "-v", "--verbosity", "--db-file", "--dep-file",
                          "--backend", "--check_file_uptodate", "--failure-verbosity")


def doit_command(argv):
    """The doit command that `argv` (without the program name) runs; "run" when none is named,
    as doit decides."""
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in LOADER_OPTIONS_WITH_VALUE:
            if args:
                args.pop(0)
        elif arg.startswith("-") or ("=" in arg and not arg.startswith("=")):
            continue
        else:
            return arg if arg in DOIT_COMMANDS else "run"
    return "run"


@functools.lru_cache(maxsize=None)
def options_with_value(command):
    """The options of doit's `command` (and of its loader) whose value is the next word, read
    from doit's own option tables (`-n` takes a value in `run`, not in `clean`)."""
    from doit.cmd_base import DodoTaskLoader
    from doit.cmdparse import CmdOption
    from doit.doit_cmd import DoitMain
    found = set(LOADER_OPTIONS_WITH_VALUE) | (set(RUN_OPTIONS_WITH_VALUE) if command == "run"
                                              else set())
    cls = {c.get_name(): c for c in DoitMain.DOIT_CMDS}.get(command)
    for opt in (list(getattr(cls, "base_options", ())) + list(DodoTaskLoader.cmd_options)
                + list(getattr(cls, "cmd_options", ()))):
        opt = CmdOption(opt)
        if opt.type is not bool:
            found |= {name for name in (opt.short and f"-{opt.short}",
                                        opt.long and f"--{opt.long}") if name}
    return frozenset(found)


def command_targets(argv):
    """The task names `argv` (without the program name) asks doit to run: its words after the
    command that are neither options nor name=value."""
    args, targets, command = list(argv), [], None
    while args:
        arg = args.pop(0)
        if arg in options_with_value(command or "run"):
            if args:
                args.pop(0)
        elif arg.startswith("-") or ("=" in arg and not arg.startswith("=")):
            continue
        elif command is None and arg in DOIT_COMMANDS:
            command = arg
        else:
            targets.append(arg)
    return targets


# doit commands whose words are task names (checked by pipeline.check_requested_tasks).
TASK_COMMANDS = ("run", "info", "list", "forget", "clean", "ignore", "reset-dep")


def check_task_names(namespace, command, argv):
    """A name the command gives doit that is no task is one line, before doit sees it."""
    from .pipeline import check_requested_tasks
    if command in TASK_COMMANDS:
        check_requested_tasks(namespace["NGINX_EVAL_CONTEXT"], list(namespace["task_stages"]()),
                              command_targets(argv))


# Targets that read a run or the machine and score nothing: they do not add to the run's record
# (nor do their subtasks: report:markdown, site:index).
NON_SCORING_TARGETS = ("report", "doctor", "power", "site")


def bind_to_run(ctx, argv):
    """Before any work of `doit run`: the run belongs to this benchmark (or the command is
    refused), and its record gains this command's tasks and modes (runrecord.py). A candidates
    file runs only its validation (pipeline.check_candidates)."""
    from .pipeline import check_candidates, expand_default
    targets = expand_default(ctx, command_targets(argv))
    check_candidates(ctx, targets)
    if all(t.split(":", 1)[0] in NON_SCORING_TARGETS for t in targets):
        return
    bench = ctx.benchmark.name
    modes = [m for m in ctx.modes
             if (bench in targets and ctx.in_group(m)) or f"{bench}:{m}" in targets]
    new = read_run(ctx.layout) is None
    bind_run(ctx.layout, ctx.benchmark, ctx.tasks, modes, **(ctx.selection or {}))
    if new:
        # A first command stopped by an error before any result leaves no run behind.
        atexit.register(_remove_if_alone, ctx.layout.run_json)


def _remove_if_alone(record):
    if record.exists() and [p.name for p in record.parent.iterdir()] == [record.name]:
        record.unlink()
        _remove_if_empty(record.parent)


def _remove_if_empty(path):
    try:
        path.rmdir()
    except OSError:
        pass


def _hold(path):
    try:
        hold_until_exit(path)
    except Busy as busy:
        pid = busy.pid if busy.pid is not None else "unknown"
        fail(f"another doit process is using {path} (pid {pid}); wait for it or stop it")


def take_run_locks(layout):
    created = not layout.run_dir.exists()
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    _hold(layout.run_dir)
    if created:
        # A run stopped by an error before its first result leaves nothing under results/.
        atexit.register(_remove_if_empty, layout.run_dir)
    _hold(layout.lock(f"run-{layout.run}"))


def program_found(program, env):
    """Whether bash, run as the agent's phases are, finds `program` (on PATH, or a builtin)."""
    if "/" in program:
        # A relative path is resolved in the workspace, which does not exist yet.
        return not os.path.isabs(program) or os.access(program, os.X_OK)
    out = subprocess.run(["bash", "-c", 'type -t -- "$1"', "bash", program], env=env,
                         capture_output=True, text=True)
    return bool(out.stdout.strip())


def agents_to_run(ctx, tasks, selected):
    """(mode, task) of every agent task doit is about to run: reachable from the selected tasks,
    and without a finished agent.json for its current inputs (or forgotten)."""
    reachable = progress.reachable(tasks, selected)
    for bench, mode, task in ctx.agent_units():
        name = f"agent:{ctx.unit_name(bench, mode, task)}"
        if name not in reachable:
            continue
        if not agent_finished(ctx.layout, mode, task, name):
            yield mode, task


def program_problem(layout, program, env, box):
    """Why `program` cannot start as a phase of a mode with sandbox settings `box` starts it,
    or None."""
    if not program_found(program, env):
        return f"program {program!r} is not on PATH"
    path = resolve_program(program, env)
    claude = is_claude_code(path)
    if box and (path or "/" not in program):
        probe = [path, "--version"] if claude else ["bash", "-c", 'type -t -- "$1"', "bash",
                                                    program]
        problem = sandbox.start_problem(probe, hidden=sandbox.hidden_paths(layout), sandbox=box,
                                        environ=env, programs=[path] if path else [])
        return problem and f"program {program!r} does not start in the sandbox: {problem}"
    if claude and not program_version(path, env, layout.agent_versions):
        return f"program {program!r} does not run: `{program} --version` printed no version"
    return None


def preflight(ctx, tasks, selected):
    """Every agent phase about to run starts a program that exists and runs
    (commandline.command_program), in its sandbox if it has one."""
    clear_stop(ctx.layout)
    checked = set()
    for mode, _task in agents_to_run(ctx, tasks, selected):
        if mode.family in checked:
            continue
        checked.add(mode.family)
        box = sandbox.settings(mode)
        if box:
            sandbox.check_available(mode, ctx.layout.modes_file)
        env = dict(os.environ, **dict(mode.env))
        for phase in mode.phases:
            program = command_program(phase.command, env)
            problem = program and program_problem(ctx.layout, program, env, box)
            if problem:
                raise UserError(problem, file=ctx.layout.modes_file,
                                item=f"mode {mode.name} phase {phase.name}", field="command")


# Tasks with actions that doit executed successfully in this process: what an interrupt keeps.
_finished = {"tasks": 0}


def report_interrupt(signum, stopped):
    """The one line of a `doit run` stopped by SIGINT or SIGTERM (procs.stop_on_signals), on the
    real stderr (doit captures sys.stderr while an action runs)."""
    line = (f"nginx-eval: interrupted; {_finished['tasks']} units finished and kept, "
            f"{stopped} stopped\n")
    for stream in (sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (RuntimeError, OSError, ValueError):
            pass        # the handler interrupted a write to it
    os.write(2, line.encode())


def track_tasks():
    """procs.task_running around every task doit executes in this process (idempotent)."""
    from doit.runner import Runner
    current = Runner.execute_task
    if hasattr(current, "wrapped"):
        return

    def execute_task(self, task):
        with procs.task_running():
            return current(self, task)
    execute_task.wrapped = current
    Runner.execute_task = execute_task


def reporter_for(ctx, command):
    class Reporter(ConsoleReporter):
        """doit's console output, plus the preflight and one-line user errors."""

        def __init__(self, outstream, options):
            super().__init__(outstream, options)
            self.printed = set()

        def initialize(self, tasks, selected_tasks):
            super().initialize(tasks, selected_tasks)
            if command == "run":
                try:
                    preflight(ctx, tasks, selected_tasks)
                except UserError as e:
                    fail(e)

        def add_success(self, task):
            super().add_success(task)
            if task.actions:
                _finished["tasks"] += 1

        def add_failure(self, task, fail_info):
            if procs.interrupted():
                return      # a task the interrupt stopped: report_interrupt said it
            if isinstance(fail_info, UserFailure):
                # With -n N several tasks may hit the same mistake: say it once.
                if fail_info.message not in self.printed:
                    self.printed.add(fail_info.message)
                    sys.stderr.write(f"nginx-eval: error: {fail_info.message}\n")
                    sys.stderr.flush()
                return
            super().add_failure(task, fail_info)

        def runtime_error(self, msg):
            if not procs.interrupted():
                super().runtime_error(msg)

        def complete_run(self):
            if not procs.interrupted():
                super().complete_run()

    return progress.watching(Reporter, ctx, command)


def _refuse_processes(argv):
    for i, word in enumerate(argv):
        value = (argv[i + 1] if word in ("-P", "--parallel-type") and i + 1 < len(argv)
                 else word.split("=", 1)[1] if word.startswith("--parallel-type=") else None)
        if value and value != "thread":
            raise UserError(f"executor=ray runs doit's workers as threads: drop -P {value}")


def load_dodo(root=None):
    from .pipeline import doit_tasks
    command = doit_command(sys.argv[1:])
    if command == "run":
        # SIGINT and SIGTERM stop everything the run started, and say so in one line; the run's
        # directory of token files is known once the tasks are loaded.
        procs.stop_on_signals(None, report_interrupt)
    try:
        namespace = doit_tasks(root)
    except UserError as e:
        fail(e)
    ctx = namespace["NGINX_EVAL_CONTEXT"]
    if command == "run":
        procs.stop_on_signals(ctx.layout.running_dir, report_interrupt)
        track_tasks()
        limits.configure(ctx.layout, ctx.options)     # before doit forks its workers
        try:
            if ctx.options.executor == "ray":
                # One Ray driver: doit's workers must be its threads, never forked processes.
                _refuse_processes(sys.argv[1:])
            executor.configure(ctx.layout, ctx.options)
            if executor.is_remote():
                namespace["DOIT_CONFIG"]["par_type"] = "thread"
        except UserError as e:
            fail(e)
    if command in READ_ONLY_COMMANDS:
        try:
            check_task_names(namespace, command, sys.argv[1:])
        except UserError as e:
            fail(e)
    else:
        take_run_locks(ctx.layout)
        try:
            check_benchmark(ctx.layout, ctx.benchmark.name)
            check_task_names(namespace, command, sys.argv[1:])
            if command == "run":
                bind_to_run(ctx, sys.argv[1:])
        except UserError as e:
            fail(e)
    if command == "run":
        scheduling.finish_chains_first()
    if command == "clean":
        # One summary line; per-item lines with verbosity=2 (`doit clean` has no -v).
        cleaning.quiet_clean(verbose=ctx.options.verbosity == 2)
    namespace["DOIT_CONFIG"]["reporter"] = reporter_for(ctx, command)
    return namespace
