"""The agent programs the harness knows, by modes.toml's name (``program = "codex"``): a program
is added here and in a module of its own (base.py says what it answers)."""

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.errors import UserError
from ...run.commandline import command_program
from .base import Program, resolve_program
from .claude import CLAUDE
from .codex import CODEX
from .gemini import GEMINI

if TYPE_CHECKING:
    from ...run.modes import Phase

# Claude Code first: the default program, and the one whose home is the attempt's home itself
# (its preparation makes that directory afresh before the others put theirs inside).
PROGRAMS: dict[str, Program] = {p.name: p for p in (CLAUDE, CODEX, GEMINI)}


def named(name: str) -> Program:
    return PROGRAMS[name]


def programs() -> Iterator[Program]:
    return iter(PROGRAMS.values())


def of_path(path: str | None) -> Program | None:
    """The program a resolved path is, or None (another agent)."""
    return next((p for p in PROGRAMS.values() if p.identifies(path)), None)


def forwarded_prefixes() -> tuple[str, ...]:
    """The prefixes of every program's variables (credentials, endpoints) a Ray node needs."""
    return tuple(dict.fromkeys(x for p in PROGRAMS.values() for x in p.forwarded_prefixes))


def of_phase(phase: "Phase", modes_file: str | Path | None = None, where: str = "") -> Program:
    """The program a phase names (modes.toml's ``program``, Claude Code by default); UserError
    naming the mode, the phase and the key for a name no program has."""
    try:
        return PROGRAMS[phase.program]
    except KeyError:
        raise UserError(
            f"no agent program {phase.program!r}; known: {', '.join(PROGRAMS)}",
            file=modes_file,
            item=where or f"phase {phase.name}",
            field="program",
        ) from None


def running(phase: "Phase", command: str, environ: Mapping[str, str]) -> Program | None:
    """The program a phase's command runs: the one the phase names, when the command's first
    word is that program; None for another agent (AGENT, the generic escape hatch)."""
    program = of_phase(phase)
    path = resolve_program(command_program(command, environ), environ)
    return program if program.identifies(path) else None
