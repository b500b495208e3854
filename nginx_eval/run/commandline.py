"""A phase's command line (modes.toml's ``command``): its placeholders filled and shell-quoted,
``$AGENT`` put in as a shell would split it, the text a record shows, and the program it starts.

Placeholders (lower-case names in braces; every value is shell-quoted, other braces stay as
they are, so ${VAR:-default} works): {workspace} {issue_file} {prompt} {prompt_file}
{model} {instance_id} {log_dir} {phase}.

``with_program_option`` puts an option right after the program word of a command (the harness's
``--disallowedTools=...``, agent/stage.py): inside the default of ``${AGENT:-claude ...}`` when
AGENT is unset, never into AGENT's own words (another agent's command line is left as it is).

``$AGENT``: every unquoted ``$AGENT``, ``${AGENT}``, ``${AGENT:-default}`` (or ``-``, ``:=``,
``=``) in a command is replaced by the harness, before bash sees the command, with the words of
AGENT's value split as a shell would split a command line (quotes and backslashes honoured:
shlex.split), each shell-quoted; ``AGENT='sh -c "a b"'`` runs ``sh`` with the two arguments
``-c`` and ``a b``. Nothing else in AGENT's value is expanded ($VAR, globs, ~, $(...)). Other
variables, and a ``"$AGENT"`` in double quotes, are left to bash (render_command).
"""

import re
import shlex
from collections.abc import Mapping
from typing import Any

from ..core.errors import UserError

PLACEHOLDERS = (
    "workspace",
    "issue_file",
    "prompt",
    "prompt_file",
    "model",
    "instance_id",
    "log_dir",
    "phase",
    "agent_home",
)
AGENT_VARIABLE = "AGENT"


# {name} with a lower-case name is a placeholder; anything else (${VAR:-x}, JSON) is left alone.
PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


# $VAR, ${VAR}, ${VAR:-default}, ${VAR-default} (and := / =): what mode commands use to let the
# environment choose the agent. No nesting, no other expansions. Matched in a command before its
# placeholders are filled: a default may hold {model}.
COMMAND_VARIABLE = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])((?:\{[a-z_]+\}|[^}])*))?\}"
    r"|\$([A-Za-z_][A-Za-z0-9_]*)"
)
PROGRAM_UNKNOWN = re.compile(r"[$`(){}<>|;&*?\[\]]")
SENTINEL = "NGINXEVALPLACEHOLDER"


# Variables whose values a record never shows (they stay as written).
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.I)


def agent_words(value: str) -> str:
    """AGENT's value as bash is given it: its words (split as a shell splits a command line),
    each shell-quoted. UserError when a shell could not read it (an unbalanced quote)."""
    try:
        words = shlex.split(value)
    except ValueError as e:
        raise UserError(
            f"AGENT={value!r} is not a command line a shell can read: {e}", field="AGENT"
        ) from None
    return " ".join(shlex.quote(w) for w in words)


def variable_references(command: str) -> list[tuple[re.Match[str], bool]]:
    """(match of COMMAND_VARIABLE, in double quotes?) for each variable reference bash would expand
    in `command`: not in single quotes, not escaped."""
    refs: list[tuple[re.Match[str], bool]] = []
    i, single, double = 0, False, False
    while i < len(command):
        c = command[i]
        if single:
            single = c != "'"
        elif c == "\\":
            i += 2
            continue
        elif c == "'" and not double:
            single = True
        elif c == '"':
            double = not double
        elif c == "$":
            m = COMMAND_VARIABLE.match(command, i)
            if m:
                refs.append((m, double))
                i = m.end()
                continue
        i += 1
    return refs


def _default_applies(op: str | None, value: str | None) -> bool:
    return bool(op and (value is None or (op.startswith(":") and value == "")))


def render_command(
    command: str,
    environ: Mapping[str, str],
    values: Mapping[str, Any] | None = None,
    shown: Mapping[str, str] | None = None,
    record: bool = False,
) -> str:
    """A phase command with AGENT's words in place of each unquoted $AGENT / ${AGENT...} (the
    default's text when AGENT is unset, or empty with ``:-``) and placeholders filled.

    values: placeholder values, shell-quoted in; a placeholder without one stays as written
    ({"model": ...} alone gives the command of the mode, the same for every task). shown:
    placeholder texts put in as they are (a record shows the prompt as its file). record: for a
    reader, not for bash: the other variables' values are put in too (as text; names that look
    secret stay as written)."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1)
        if shown and name in shown:
            return shown[name]
        return shlex.quote(str(values[name])) if values and name in values else m.group(0)

    def fill(text: str) -> str:
        return PLACEHOLDER.sub(one, text)

    out, pos = [], 0
    for m, quoted in variable_references(command):
        name, op, default = m.group(1) or m.group(4), m.group(2), m.group(3)
        is_agent = name == AGENT_VARIABLE and not quoted
        if not is_agent and not record:
            continue  # bash expands it
        out.append(fill(command[pos : m.start()]))
        pos = m.end()
        value = environ.get(name)
        if not is_agent and SECRET_NAME.search(name):
            out.append(fill(m.group(0)))
        elif _default_applies(op, value):
            out.append(render_command(default, environ, values, shown, record))
        elif is_agent:
            out.append(agent_words(value or ""))
        else:
            out.append(value or "")
    out.append(fill(command[pos:]))
    return "".join(out)


def command_program(command: str, environ: Mapping[str, str]) -> str | None:
    """The program a phase command starts: its first word once placeholders are filled and
    ${VAR:-default} is expanded with `environ`. None when only running it would tell (the word
    comes from a placeholder or a shell expansion this does not do). UserError for an AGENT a
    shell cannot read."""
    text = render_command(command, environ, {n: SENTINEL for n in PLACEHOLDERS}, record=True)
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    while words and (
        re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]) or words[0] in ("exec", "command")
    ):
        words.pop(0)
    if not words or SENTINEL in words[0] or PROGRAM_UNKNOWN.search(words[0]):
        return None
    return words[0]


# Where a word of a command line ends (unquoted): blanks and the shell's operators.
WORD_END = " \t\n;&|<>()"
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _word_end(text: str, i: int, end: int) -> int | None:
    """The end of the shell word starting at text[i] (quotes and backslashes honoured), before
    `end`; None for an unbalanced quote."""
    while i < end and text[i] not in WORD_END:
        if text[i] == "\\":
            i += 2
        elif text[i] in "'\"":
            close = text.find(text[i], i + 1)
            while text[i] == '"' and close > 0 and text[close - 1] == "\\":
                close = text.find('"', close + 1)
            if close < 0 or close >= end:
                return None
            i = close + 1
        else:
            i += 1
    return min(i, end)


def program_word_end(
    command: str, environ: Mapping[str, str], start: int = 0, end: int | None = None
) -> int | None:
    """The index in `command` where the word that names its program ends (as command_program
    finds it: VAR=value words, exec and command skipped; the default of an unquoted ${AGENT:-...}
    when AGENT is unset), or None when that word is not the command's own text: AGENT's value, a
    placeholder, another expansion."""
    end = len(command) if end is None else end
    i = start
    while True:
        while i < end and command[i] in " \t\n":
            i += 1
        m = COMMAND_VARIABLE.match(command, i)
        if m and m.end() <= end:
            name, op = m.group(1) or m.group(4), m.group(2)
            if name != AGENT_VARIABLE or not _default_applies(op, environ.get(name)):
                return None
            return program_word_end(command, environ, m.start(3), m.end(3))
        j = _word_end(command, i, end)
        if j is None or j == i:
            return None
        word = command[i:j]
        if ASSIGNMENT.match(word) or word in ("exec", "command"):
            i = j
            continue
        if "$" in word or "`" in word or PLACEHOLDER.search(word):
            return None
        return j


def with_program_option(command: str, environ: Mapping[str, str], option: str) -> str | None:
    """`command` (a phase's, as modes.toml has it) with `option` right after its program word,
    or None when the command does not name its program itself (program_word_end)."""
    at = program_word_end(command, environ)
    return None if at is None else f"{command[:at]} {option}{command[at:]}"
