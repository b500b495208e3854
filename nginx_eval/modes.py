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
    predictions = "path/to/predictions.jsonl"

Placeholders (lower-case names in braces; every value is shell-quoted, other braces stay as\nthey are, so ${VAR:-default} works): {workspace} {issue_file} {prompt} {prompt_file}
{model} {instance_id} {log_dir} {phase}.

Built-in modes need no configuration: ``gold`` applies the fix commit's diff, ``none`` changes nothing.
"""

import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UserError

PLACEHOLDERS = ("workspace", "issue_file", "prompt", "prompt_file", "model", "instance_id",
                "log_dir", "phase")
BUILTIN = ("gold", "none")
DEFAULT_TIMEOUT = 1800


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

    def to_json(self):
        return {"name": self.name, "family": self.family, "repeat": self.repeat,
                "kind": self.kind, "model": self.model,
                "description": self.description, "predictions": self.predictions,
                "commands": [p.command for p in self.phases]}


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
# environment choose the agent. No nesting, no other expansions.
SHELL_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])([^}]*))?\}"
                            r"|\$([A-Za-z_][A-Za-z0-9_]*)")
PROGRAM_UNKNOWN = re.compile(r"[$`(){}<>|;&*?\[\]]")
SENTINEL = "NGINXEVALPLACEHOLDER"


def expand_variables(text, environ):
    def one(m):
        name, op, default = m.group(1) or m.group(4), m.group(2), m.group(3)
        value = environ.get(name)
        if op and (value is None or (op.startswith(":") and value == "")):
            return default
        return value or ""
    return SHELL_VARIABLE.sub(one, text)


def command_program(command, environ):
    """The program a phase command starts: its first word once placeholders are filled and
    ${VAR:-default} is expanded with `environ`. None when only running it would tell (the word
    comes from a placeholder or a shell expansion this does not do)."""
    text = expand_variables(fill_command(command, {n: SENTINEL for n in PLACEHOLDERS}), environ)
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


def parse_modes(data, path):
    modes = dict(BUILTIN_MODES)
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
            modes[name] = Mode(name, "predictions", predictions=str(pred_path), **common)
            continue
        phases_raw = raw.get("phases")
        if not isinstance(phases_raw, list) or not phases_raw:
            raise UserError("needs at least one [[phases]] entry (or a predictions file)",
                            file=path, item=where, field="phases")
        phases = []
        for i, p in enumerate(phases_raw):
            pwhere = f"{where} phase {i + 1}"
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
    """Modes named on the command line: ``predictions=PATH`` adds a mode ``file``."""
    if not spec:
        return {}
    p = Path(spec).resolve()
    if not p.exists():
        raise UserError(f"predictions file {spec} does not exist", file=path, field="predictions")
    read_predictions(p)         # a malformed file is an error now, not when its patches are made
    return {"file": Mode("file", "predictions", predictions=str(p),
                         description=f"predictions from {p.name}")}


def get_mode(modes, name):
    if name not in modes:
        raise UserError(f"unknown mode '{name}'; known modes: {', '.join(sorted(modes))}")
    return modes[name]
