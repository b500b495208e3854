"""How nginx-eval reads a doit command line and follows doit's run: which command, task names and
variables `argv` gives (from doit's own option tables and variables), the tasks a selection
reaches, and a hook around every task doit executes."""

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core import procs

# doit commands that only read: they take no lock, so they work while a run is going on.
READ_ONLY_COMMANDS = ("list", "info", "help", "dumpdb", "tabcompletion")
DOIT_COMMANDS = ("run", "clean", "forget", "ignore", "reset-dep", "strace") + READ_ONLY_COMMANDS
# doit's loader options, which may come before the command name; the first two take a value.
LOADER_OPTIONS_WITH_VALUE = ("-f", "--file", "-d", "--dir")
# Options of `doit run` whose value is the next word.
RUN_OPTIONS_WITH_VALUE = (
    "-n",
    "--process",
    "-P",
    "--parallel-type",
    "-o",
    "--output-file",
    "-r",
    "--reporter",
    "-v",
    "--verbosity",
    "--db-file",
    "--dep-file",
    "--backend",
    "--check_file_uptodate",
    "--failure-verbosity",
)


def doit_command(argv: Sequence[str]) -> str:
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


@functools.cache
def options_with_value(command: str) -> frozenset[str]:
    """The options of doit's `command` (and of its loader) whose value is the next word, read
    from doit's own option tables (`-n` takes a value in `run`, not in `clean`)."""
    from doit.cmd_base import DodoTaskLoader
    from doit.cmdparse import CmdOption
    from doit.doit_cmd import DoitMain

    found = set(LOADER_OPTIONS_WITH_VALUE) | (
        set(RUN_OPTIONS_WITH_VALUE) if command == "run" else set()
    )
    cls = {c.get_name(): c for c in DoitMain.DOIT_CMDS}.get(command)
    for opt in (
        list(getattr(cls, "base_options", ()))
        + list(DodoTaskLoader.cmd_options)
        + list(getattr(cls, "cmd_options", ()))
    ):
        opt = CmdOption(opt)
        if opt.type is not bool:
            found |= {
                name
                for name in (opt.short and f"-{opt.short}", opt.long and f"--{opt.long}")
                if name
            }
    return frozenset(found)


def command_targets(argv: Sequence[str]) -> list[str]:
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


# Options of `doit list` that change only how the commands it lists are printed.
LIST_LAYOUT_OPTIONS = ("-q", "--quiet", "--template", "--sort")


def lists_commands_only(argv: list[str]) -> bool:
    """Whether `argv` is a plain `doit list`: the tasks that are no subtask and not private,
    with no status, no dependencies and no task named (options that change only how they are
    printed aside)."""
    if doit_command(argv) != "list" or command_targets(argv):
        return False
    words = list(argv)
    while words:
        word = words.pop(0)
        if word in LOADER_OPTIONS_WITH_VALUE or word in ("--template", "--sort"):
            if words:
                words.pop(0)  # its value
        elif word.startswith("-") and word.split("=", 1)[0] not in LIST_LAYOUT_OPTIONS:
            return False
    return True


# doit commands whose words are task names (checked by pipeline.check_requested_tasks).
TASK_COMMANDS = ("run", "info", "list", "forget", "clean", "ignore", "reset-dep")


def command_line_variables(argv: Sequence[str]) -> dict[str, str]:
    """{name: value} of every variable doit took from its command line `argv` (without the
    program name), in the order given, read through doit's public get_var. doit lists them
    nowhere, so the names are those of the words it may take for one (no leading "-", a "=");
    a name it holds no value of (the value of an option, `argv` not read by doit) is left out."""
    from doit import get_var

    names = dict.fromkeys(w.split("=", 1)[0] for w in argv if not w.startswith("-") and "=" in w)
    found = {name: get_var(name) for name in names}
    return {name: value for name, value in found.items() if value is not None}


def reachable(
    tasks: Mapping[str, Any],
    selected: Iterable[str],
    shadow: Mapping[str, Sequence[str]] | None = None,
) -> set[str]:
    """The names of the doit tasks `selected` reaches through task_dep and setup_tasks
    (tasks: doit's {name: Task}); shadow: {name: task_dep} of tasks left out of doit's list or
    changed (pruning.drop_settled), whose names count too."""
    shadow = shadow or {}
    seen: set[str] = set()
    todo = list(selected)
    while todo:
        name = todo.pop()
        if name in seen or (name not in tasks and name not in shadow):
            continue
        seen.add(name)
        task = tasks.get(name)
        if name in shadow:
            todo += list(shadow[name])
        elif task is not None:
            todo += list(task.task_dep)
        todo += list(task.setup_tasks) if task else []
    return seen


def track_tasks() -> None:
    """procs.task_running around every task doit executes in this process (idempotent)."""
    from doit.runner import Runner

    current = Runner.execute_task
    if hasattr(current, "wrapped"):
        return

    def execute_task(self: Any, task: Any) -> Any:
        with procs.task_running():
            return current(self, task)

    execute_task.wrapped = current  # type: ignore[attr-defined]
    Runner.execute_task = execute_task
