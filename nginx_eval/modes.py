"""Agent modes, from ``modes.toml`` at the project root, plus the built-in baselines.

Schema::

    [modes.<name>]
    description = "..."              # optional, shown in the report
    model = "..."                    # optional, fills {model}
    env = { VAR = "value" }          # optional, extra environment for every phase
    sandbox = true                   # optional: run the agent in bubblewrap (see sandbox.py)
    network = false                  # optional, in the sandbox: no network
    sandbox_binds = ["~/.npm"]       # optional, in the sandbox: more read-write paths

    repeats = 3                      # optional: also runs <name>-r2, <name>-r3 (for pass@k)

    [[modes.<name>.phases]]          # one or more, run in order in the same workspace
    name = "solve"
    command = "claude -p {prompt} ..."   # run with bash -c in the workspace
    timeout = 1800                   # seconds; the whole process group is killed past it
    prompt = "prompt.md.j2"          # optional template in templates/, fills {prompt} / {prompt_file}

    [modes.<name>]                   # or: score a SWE-bench predictions file made elsewhere
    predictions = "path/to/predictions.jsonl"   # relative to modes.toml; only its rows' tasks
    description = "..."              # optional (model, env and the sandbox keys are accepted too)

Any other key, at any level, is an error naming the file, the mode, the phase and the key, with
the closest known key (KEYS, MODE_KEYS, PHASE_KEYS).

Placeholders (lower-case names in braces; every value is shell-quoted, other braces stay as
they are, so ${VAR:-default} works): {workspace} {issue_file} {prompt} {prompt_file}
{model} {instance_id} {log_dir} {phase}.

``$AGENT``: every unquoted ``$AGENT``, ``${AGENT}``, ``${AGENT:-default}`` (or ``-``, ``:=``,
``=``) in a command is replaced by the harness, before bash sees the command, with the words of
AGENT's value split as a shell would split a command line (quotes and backslashes honoured:
shlex.split), each shell-quoted; ``AGENT='sh -c "a b"'`` runs ``sh`` with the two arguments
``-c`` and ``a b``. Nothing else in AGENT's value is expanded ($VAR, globs, ~, $(...)). Other
variables, and a ``"$AGENT"`` in double quotes, are left to bash (render_command).

Built-in modes need no configuration: ``gold`` applies the fix commit's diff, ``none`` changes nothing.
"""

import difflib
import json
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError

PLACEHOLDERS = ("workspace", "issue_file", "prompt", "prompt_file", "model", "instance_id",
                "log_dir", "phase")
BUILTIN = ("gold", "none")
DEFAULT_TIMEOUT = 1800


# The keys parse_modes reads, at each level: anything else is a typo (unknown_key).
KEYS = ("modes",)
MODE_KEYS = ("description", "model", "env", "sandbox", "network", "sandbox_binds", "repeats",
             "phases", "predictions")
PHASE_KEYS = ("name", "prompt", "timeout", "command")
AGENT_VARIABLE = "AGENT"


@dataclass(frozen=True)
class Phase:
    name: str
    command: str
    timeout: float = DEFAULT_TIMEOUT
    prompt: str = ""        # template file name, "" for none


@dataclass(frozen=True)
class Mode:
    name: str
    kind: str                       # "agent", "gold", "none" or "predictions"
    phases: tuple = ()
    model: str = ""
    description: str = ""
    env: tuple = ()                 # sorted (name, value) pairs
    predictions: str = ""
    base_name: str = ""             # for repeats: the configured mode ("raw" for "raw-r2")
    repeat: int = 1                 # 1..repeats
    sandbox: bool = False           # run the agent in bubblewrap (sandbox.py)
    network: bool = True            # in the sandbox: may the agent use the network
    sandbox_binds: tuple = ()       # in the sandbox: extra read-write paths
    instances: tuple = None         # predictions: the instance ids the file has a row for (the
                                    # only tasks the mode scores); None: every selected task

    @property
    def family(self):
        return self.base_name or self.name

    @property
    def runs_agent(self):
        return self.kind == "agent"

    def fingerprint(self):
        """What decides whether an agent run is still valid (not the description)."""
        fingerprint = {"phases": [vars(p) for p in self.phases], "model": self.model,
                       "env": [list(e) for e in self.env], "repeat": self.repeat}
        if not self.network or self.sandbox_binds:
            # Only when set, so that modes without them keep the runs they have.
            fingerprint["sandbox"] = {"network": self.network, "binds": list(self.sandbox_binds)}
        return fingerprint

    def covers(self, instance_id):
        """Whether the mode scores this task (a predictions mode: only the file's rows)."""
        return self.instances is None or instance_id in self.instances

    def to_json(self):
        data = {"name": self.name, "family": self.family, "repeat": self.repeat,
                "kind": self.kind, "model": self.model,
                "description": self.description, "predictions": self.predictions,
                "commands": [p.command for p in self.phases]}
        if self.instances is not None:
            data["instances"] = list(self.instances)
        return data


BUILTIN_MODES = {
    "gold": Mode("gold", "gold", description="the fix commit's own diff (upper bound)"),
    "none": Mode("none", "none", description="an empty patch (lower bound)"),
}


# {name} with a lower-case name is a placeholder; anything else (${VAR:-x}, JSON) is left alone.
PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


def _check_template(command, path, where):
    for n in PLACEHOLDER.findall(command):
        if n not in PLACEHOLDERS:
            raise UserError(f"unknown placeholder {{{n}}}; known: {', '.join(PLACEHOLDERS)}",
                            file=path, item=where, field="command")


def fill_command(command, values):
    """The command with each placeholder replaced by its shell-quoted value."""
    return PLACEHOLDER.sub(lambda m: shlex.quote(str(values[m.group(1)])), command)


# $VAR, ${VAR}, ${VAR:-default}, ${VAR-default} (and := / =): what mode commands use to let the
# environment choose the agent. No nesting, no other expansions. Matched in a command before its
# placeholders are filled: a default may hold {model}.
COMMAND_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])((?:\{[a-z_]+\}|[^}])*))?\}"
                              r"|\$([A-Za-z_][A-Za-z0-9_]*)")
PROGRAM_UNKNOWN = re.compile(r"[$`(){}<>|;&*?\[\]]")
SENTINEL = "NGINXEVALPLACEHOLDER"


# Variables whose values a record never shows (they stay as written).
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.I)


def agent_words(value):
    """AGENT's value as bash is given it: its words (split as a shell splits a command line),
    each shell-quoted. UserError when a shell could not read it (an unbalanced quote)."""
    try:
        words = shlex.split(value)
    except ValueError as e:
        raise UserError(f"AGENT={value!r} is not a command line a shell can read: {e}",
                        field="AGENT")
    return " ".join(shlex.quote(w) for w in words)


def variable_references(command):
    """(match of COMMAND_VARIABLE, in double quotes?) for each variable reference bash would expand
    in `command`: not in single quotes, not escaped."""
    refs, i, single, double = [], 0, False, False
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


def _default_applies(op, value):
    return bool(op) and (value is None or (op.startswith(":") and value == ""))


def render_command(command, environ, values=None, shown=None, record=False):
    """A phase command with AGENT's words in place of each unquoted $AGENT / ${AGENT...} (the
    default's text when AGENT is unset, or empty with ``:-``) and placeholders filled.

    values: placeholder values, shell-quoted in; a placeholder without one stays as written
    ({"model": ...} alone gives the command of the mode, the same for every task). shown:
    placeholder texts put in as they are (a record shows the prompt as its file). record: for a
    reader, not for bash: the other variables' values are put in too (as text; names that look
    secret stay as written)."""
    def one(m):
        name = m.group(1)
        if shown and name in shown:
            return shown[name]
        return shlex.quote(str(values[name])) if values and name in values else m.group(0)

    def fill(text):
        return PLACEHOLDER.sub(one, text)
    out, pos = [], 0
    for m, quoted in variable_references(command):
        name, op, default = m.group(1) or m.group(4), m.group(2), m.group(3)
        is_agent = name == AGENT_VARIABLE and not quoted
        if not is_agent and not record:
            continue            # bash expands it
        out.append(fill(command[pos:m.start()]))
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


def command_program(command, environ):
    """The program a phase command starts: its first word once placeholders are filled and
    ${VAR:-default} is expanded with `environ`. None when only running it would tell (the word
    comes from a placeholder or a shell expansion this does not do). UserError for an AGENT a
    shell cannot read."""
    text = render_command(command, environ, {n: SENTINEL for n in PLACEHOLDERS}, record=True)
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    while words and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])
                     or words[0] in ("exec", "command")):
        words.pop(0)
    if not words or SENTINEL in words[0] or PROGRAM_UNKNOWN.search(words[0]):
        return None
    return words[0]


def check_keys(table, known, path, where=None):
    """UserError for the first key of `table` that is not in `known`, with the closest one."""
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = (f"did you mean '{close[0]}'?" if close else
                    f"known keys: {', '.join(known)}")
            raise UserError(f"{where + ': ' if where else ''}unknown key '{key}'; {hint}",
                            file=path)


def parse_modes(data, path):
    modes = dict(BUILTIN_MODES)
    check_keys(data, KEYS, path)
    table = data.get("modes", {})
    if not isinstance(table, dict):
        raise UserError("[modes] must be a table", file=path)
    for name, raw in table.items():
        where = f"mode {name}"
        if name in BUILTIN or name in ("validate", "file", "report", "doctor"):
            raise UserError(f"'{name}' is built in or reserved and cannot be a mode name",
                            file=path, item=where)
        if not isinstance(raw, dict):
            raise UserError("must be a table", file=path, item=where)
        check_keys(raw, MODE_KEYS, path, where)
        env = raw.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise UserError("must be a table of strings", file=path, item=where, field="env")
        for key, kind in (("sandbox", bool), ("network", bool)):
            if key in raw and not isinstance(raw[key], kind):
                raise UserError("must be true or false", file=path, item=where, field=key)
        binds = raw.get("sandbox_binds", [])
        if not isinstance(binds, list) or not all(isinstance(b, str) and b for b in binds):
            raise UserError("must be a list of paths", file=path, item=where, field="sandbox_binds")
        common = dict(model=str(raw.get("model", "")), description=str(raw.get("description", "")),
                      env=tuple(sorted(env.items())), sandbox=raw.get("sandbox", False),
                      network=raw.get("network", True), sandbox_binds=tuple(binds))
        if "predictions" in raw:
            pred = raw["predictions"]
            if not isinstance(pred, str) or not pred:
                raise UserError("must be a file path", file=path, item=where, field="predictions")
            pred_path = Path(pred) if Path(pred).is_absolute() else Path(path).parent / pred
            # Only the tasks the file has a row for (a file not there yet fails at its patches).
            ids = tuple(read_predictions(pred_path)) if pred_path.exists() else None
            modes[name] = Mode(name, "predictions", predictions=str(pred_path), instances=ids,
                               **common)
            continue
        phases_raw = raw.get("phases")
        if not isinstance(phases_raw, list) or not phases_raw:
            raise UserError("needs at least one [[phases]] entry (or a predictions file)",
                            file=path, item=where, field="phases")
        phases = []
        for i, p in enumerate(phases_raw):
            label = p.get("name") if isinstance(p, dict) else None
            pwhere = f"{where} phase {label if isinstance(label, str) and label else i + 1}"
            if isinstance(p, dict):
                check_keys(p, PHASE_KEYS, path, pwhere)
            if not isinstance(p, dict) or not isinstance(p.get("command"), str) or not p["command"].strip():
                raise UserError("needs a non-empty command", file=path, item=pwhere, field="command")
            _check_template(p["command"], path, pwhere)
            timeout = p.get("timeout", DEFAULT_TIMEOUT)
            if not isinstance(timeout, (int, float)) or timeout <= 0:
                raise UserError("must be a positive number of seconds", file=path, item=pwhere,
                                field="timeout")
            prompt = p.get("prompt", "")
            if not isinstance(prompt, str):
                raise UserError("must be a template file name", file=path, item=pwhere, field="prompt")
            phases.append(Phase(name=str(p.get("name", f"phase{i + 1}")), command=p["command"],
                                timeout=float(timeout), prompt=prompt))
        repeats = raw.get("repeats", 1)
        if not isinstance(repeats, int) or repeats < 1:
            raise UserError("must be a whole number >= 1", file=path, item=where, field="repeats")
        for i in range(1, repeats + 1):
            # Repeat 1 keeps the plain name, so adding repeats never re-runs the first one.
            rname = name if i == 1 else f"{name}-r{i}"
            modes[rname] = Mode(rname, "agent", phases=tuple(phases), base_name=name, repeat=i,
                                **common)
    return modes


def load_modes(path):
    """All modes: the built-ins plus those in `path` (which may be absent)."""
    path = Path(path)
    if not path.exists():
        return dict(BUILTIN_MODES)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"malformed TOML: {e}", file=path)
    return parse_modes(data, path)


def read_predictions(path):
    """{instance_id: (model_patch, model_name_or_path)} of a SWE-bench predictions file (JSON
    lines, or one JSON list); UserError naming the row at fault."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read: {e}", file=path)
    try:
        if text.lstrip().startswith("["):
            rows = list(enumerate(json.loads(text), 1))
        else:
            rows = [(n, json.loads(line)) for n, line in enumerate(text.splitlines(), 1)
                    if line.strip()]
    except json.JSONDecodeError as e:
        raise UserError(f"malformed JSON: {e}", file=path)
    found = {}
    for n, row in rows:
        where = f"row {n}"
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise UserError("must be an object with a string instance_id", file=path, item=where)
        if not isinstance(row.get("model_patch") or "", str):
            raise UserError("must be a string (a diff) or null", file=path, item=where,
                            field="model_patch")
        if row["instance_id"] in found:
            raise UserError(f"duplicate instance_id {row['instance_id']}", file=path, item=where)
        found[row["instance_id"]] = (row.get("model_patch") or "",
                                     str(row.get("model_name_or_path") or ""))
    return found


def extra_modes(spec, path="command line"):
    """Modes named on the command line: ``predictions=PATH`` adds a mode ``file``, which scores
    only the tasks the file has a row for (as SWE-bench does)."""
    if not spec:
        return {}
    p = Path(spec).resolve()
    if not p.exists():
        raise UserError(f"predictions file {spec} does not exist", file=path, field="predictions")
    # A malformed file is an error now, not when its patches are made.
    ids = tuple(read_predictions(p))
    return {"file": Mode("file", "predictions", predictions=str(p), instances=ids,
                         description=f"predictions from {p.name}")}


def unknown_prediction_ids(mode, bench):
    """A warning for the ids of a predictions mode's file that are not tasks of `bench` (they
    are not scored), or None."""
    if mode is None or mode.instances is None:
        return None
    known = {t.instance_id for t in bench.tasks}
    unknown = [i for i in mode.instances if i not in known]
    if not unknown:
        return None
    shown = ", ".join(unknown[:10]) + (", ..." if len(unknown) > 10 else "")
    return (f"{Path(mode.predictions).name}: {len(unknown)} instance "
            f"id{'s' if len(unknown) != 1 else ''} not in benchmark {bench.name}: {shown}")


def get_mode(modes, name):
    if name not in modes:
        raise UserError(f"unknown mode '{name}'; known modes: {', '.join(sorted(modes))}")
    return modes[name]
