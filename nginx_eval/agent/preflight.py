"""The preflight of `doit run`: before the first task, the program each agent phase about to run
starts must be on PATH and must start (Claude Code's ``--version`` runs; its output is the version
agent.json records), in the sandbox the mode uses when it has one (another agent is looked up there
with bash's ``type``, never run). It also clears a stop that refused credentials left on the run
(gate.py), and runs the sandbox's self-test (selftest.py) before the first isolated agent. cli's
reporter runs it: only doit's reporter sees which tasks were selected."""

import os
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..core.errors import UserError
from ..core.tasknames import AGENT, task_name, unit_name
from ..doitext.invocation import reachable
from ..run.commandline import command_program
from ..run.record import note_self_test
from . import sandbox, selftest
from .claude_code import credentials_problem, is_claude_code, program_version, resolve_program
from .gate import clear_stop
from .selftest import endpoint_problem
from .stage import agent_finished

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..run.benchmark import AnyTask
    from ..run.context import StageContext
    from ..run.modes import Mode
    from .sandbox import Box


def program_found(program: str, env: Mapping[str, str]) -> bool:
    """Whether bash, run as the agent's phases are, finds `program` (on PATH, or a builtin)."""
    if "/" in program:
        # A relative path is resolved in the workspace, which does not exist yet.
        return not os.path.isabs(program) or os.access(program, os.X_OK)
    out = subprocess.run(
        ["bash", "-c", 'type -t -- "$1"', "bash", program], env=env, capture_output=True, text=True
    )
    return bool(out.stdout.strip())


def agents_to_run(
    ctx: "StageContext", tasks: Mapping[str, Any], selected: Iterable[str]
) -> Iterator[tuple["Mode", "AnyTask"]]:
    """(mode, task) of every agent task doit is about to run: reachable from the selected tasks,
    and without a finished agent.json for its current inputs (or forgotten)."""
    reachable_names = reachable(tasks, selected)
    for bench, mode, task in ctx.agent_units():
        name = task_name(AGENT, unit_name(bench, mode, task))
        if name not in reachable_names:
            continue
        if not agent_finished(ctx.layout, mode, task, name):
            yield mode, task


def program_problem(
    layout: "Layout",
    program: str,
    env: Mapping[str, str],
    box: "Box | None",
    reached: set[tuple[str, str]] | None = None,
) -> str | None:
    """Why `program` cannot start as a phase of a mode with sandbox settings `box` starts it,
    or None. A problem that is the machine's, not the mode's (no credentials, a model endpoint
    out of reach), is raised as a UserError of its own. reached: the (sandbox, endpoint) pairs
    already found reachable in this preflight, added to."""
    if not program_found(program, env):
        return f"program {program!r} is not on PATH"
    path = resolve_program(program, env)
    claude = is_claude_code(path)
    refused = credentials_problem(env) if claude else None
    if refused:
        # Not a mistake of modes.toml: said without naming a place in it.
        raise UserError(refused)
    if box and (path or "/" not in program):
        # A Claude Code program has a path (is_claude_code).
        probe = (
            [path, "--version"]
            if claude and path
            else ["bash", "-c", 'type -t -- "$1"', "bash", program]
        )
        problem = sandbox.start_problem(
            probe,
            hidden=sandbox.hidden_paths(layout),
            box=box,
            environ=env,
            programs=[path] if path else [],
            support=sandbox.write_support(layout.sandbox_support),
        )
        if problem:
            return f"program {program!r} does not start in the sandbox: {problem}"
    elif claude and not program_version(path, env, layout.agent_versions):
        return f"program {program!r} does not run: `{program} --version` printed no version"
    key = (repr(box), selftest.endpoint_url(env))
    if claude and key not in (reached if reached is not None else set()):
        problem = endpoint_problem(layout, box, env)
        if problem:
            raise UserError(f"{problem}; no agent started")
        if reached is not None:
            reached.add(key)
    return None


def self_test(layout: "Layout", box: "Box", env: Mapping[str, str]) -> None:
    """selftest.run, kept in run.json; UserError when it failed: an agent that could not build,
    run and reach what it changed would be scored on the sandbox."""
    result = selftest.run(layout, box, env)
    note_self_test(layout, result)
    if not result["ok"]:
        raise UserError(f"{result['failed']}; no agent started (docs/sandbox.md)")


def preflight(ctx: "StageContext", tasks: Mapping[str, Any], selected: Iterable[str]) -> None:
    """Every agent phase about to run starts a program that exists and runs
    (commandline.command_program), in its sandbox if it has one, after the sandbox's self-test
    (selftest.py) passed once."""
    clear_stop(ctx.layout)
    checked: set[str] = set()
    reached: set[tuple[str, str]] = set()
    tested = False
    for mode, _task in agents_to_run(ctx, tasks, selected):
        if mode.family in checked:
            continue
        checked.add(mode.family)
        box = sandbox.settings(mode)
        env = dict(os.environ, **dict(mode.env))
        if box:
            # Never a fallback to an unisolated run: no agent starts without its sandbox.
            sandbox.check_available(mode, ctx.layout.modes_file)
            if not tested:
                self_test(ctx.layout, box, env)
                tested = True
        for phase in mode.phases:
            program = command_program(phase.command, env)
            problem = program and program_problem(ctx.layout, program, env, box, reached)
            if problem:
                raise UserError(
                    problem,
                    file=ctx.layout.modes_file,
                    item=f"mode {mode.name} phase {phase.name}",
                    field="command",
                )
