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
  to run starts must be on PATH. Only doit's reporter sees which tasks were selected before the
  first one starts, so the check lives in ``Reporter.initialize`` (another ``--reporter`` skips it).
- **Errors in tasks.** A task that fails on a user mistake (an unknown commit, a missing test file)
  is printed as one ``nginx-eval: error:`` line instead of a traceback.
"""

import atexit
import os
import subprocess
import sys

from doit.reporter import ConsoleReporter

from . import jsonio, sandbox, scheduling
from .agent import agent_inputs, rendered_prompts
from .doitdb import forgotten
from .errors import UserError, UserFailure
from .locks import Busy, hold_until_exit
from .modes import command_program
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


def fail(error):
    sys.stderr.write(f"nginx-eval: error: {error}\n")
    sys.stderr.flush()
    raise SystemExit(2)


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


def command_targets(argv):
    """The task names `argv` (without the program name) asks doit to run: its words after the
    command that are neither options nor name=value."""
    args, targets, seen_command = list(argv), [], False
    while args:
        arg = args.pop(0)
        if arg in LOADER_OPTIONS_WITH_VALUE or arg in RUN_OPTIONS_WITH_VALUE:
            if args:
                args.pop(0)
        elif arg.startswith("-") or ("=" in arg and not arg.startswith("=")):
            continue
        elif not seen_command and arg in DOIT_COMMANDS:
            seen_command = True
        else:
            targets.append(arg)
    return targets


# Targets that read a run or the machine and score nothing: they do not add to the run's record.
NON_SCORING_TARGETS = ("report", "doctor")


def bind_to_run(ctx, argv):
    """Before any work of `doit run`: the run belongs to this benchmark (or the command is
    refused), and its record gains this command's tasks and modes (runrecord.py)."""
    targets = command_targets(argv) or [ctx.benchmark.name]
    if all(t in NON_SCORING_TARGETS for t in targets):
        return
    bench = ctx.benchmark.name
    modes = [m for m in ctx.modes if bench in targets or f"{bench}:{m}" in targets]
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
    reachable, todo = set(), list(selected)
    while todo:
        name = todo.pop()
        if name in reachable or name not in tasks:
            continue
        reachable.add(name)
        todo += list(tasks[name].task_dep) + list(tasks[name].setup_tasks)
    for bench, mode, task in ctx.agent_units():
        name = f"agent:{ctx.unit_name(bench, mode, task)}"
        if name not in reachable:
            continue
        inputs = agent_inputs(mode, task, rendered_prompts(ctx.layout.templates_dir, mode, task))
        if (jsonio.fresh_output(ctx.layout.agent_json(mode.name, task.instance_id), inputs)
                and not forgotten(ctx.layout, name)):
            continue
        yield mode, task


def preflight(ctx, tasks, selected):
    """Every agent phase about to run starts a program that exists (modes.command_program)."""
    checked = set()
    for mode, _task in agents_to_run(ctx, tasks, selected):
        if mode.family in checked:
            continue
        checked.add(mode.family)
        if sandbox.settings(mode):
            sandbox.check_available(mode, ctx.layout.modes_file)
        env = dict(os.environ, **dict(mode.env))
        for phase in mode.phases:
            program = command_program(phase.command, env)
            if program and not program_found(program, env):
                raise UserError(f"program {program!r} is not on PATH", file=ctx.layout.modes_file,
                                item=f"mode {mode.name} phase {phase.name}", field="command")


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

        def add_failure(self, task, fail_info):
            if isinstance(fail_info, UserFailure):
                # With -n N several tasks may hit the same mistake: say it once.
                if fail_info.message not in self.printed:
                    self.printed.add(fail_info.message)
                    sys.stderr.write(f"nginx-eval: error: {fail_info.message}\n")
                    sys.stderr.flush()
                return
            super().add_failure(task, fail_info)

    return Reporter


def load_dodo(root=None):
    from .pipeline import doit_tasks
    command = doit_command(sys.argv[1:])
    try:
        namespace = doit_tasks(root)
    except UserError as e:
        fail(e)
    ctx = namespace["NGINX_EVAL_CONTEXT"]
    if command not in READ_ONLY_COMMANDS:
        take_run_locks(ctx.layout)
        try:
            check_benchmark(ctx.layout, ctx.benchmark.name)
            if command == "run":
                bind_to_run(ctx, sys.argv[1:])
        except UserError as e:
            fail(e)
    if command == "run":
        scheduling.finish_chains_first()
    namespace["DOIT_CONFIG"]["reporter"] = reporter_for(ctx, command)
    return namespace
