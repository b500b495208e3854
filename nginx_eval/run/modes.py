"""Agent modes, from ``modes.toml`` at the project root, plus the built-in baselines.

The schema is the header of the shipped modes.toml, which documents every key of a mode
(MODE_KEYS) and of a phase (PHASE_KEYS); tests/test_records.py checks that it names them all. A
mode is one or more phases (``[[modes.<name>.phases]]``: name, command run with bash -c in the
workspace, timeout in seconds past which the whole process group is killed, prompt template), or
instead a SWE-bench ``predictions`` file scored as it is. Any other key, at any level, is an error
naming the file, the mode, the phase and the key, with the closest known key.

``commands`` and ``agent_home`` are read when the modes are loaded: the files of
``templates/commands/`` (written by workspace.install_commands to the workspace's
``.claude/commands/``, never the user's ``~/.claude``) and of ``templates/agent-homes/<name>/``
(copied into the agent's own CLAUDE_CONFIG_DIR, agent/home.py). Their text is part of
``AgentMode.command_files``, ``AgentMode.home_files`` and so of ``fingerprint()``: editing one
runs the mode's agents again.

``web_tools``: no sandbox on this machine can stop a search the model API runs on its side, so in
an isolated mode a Claude Code phase's command gets ``--disallowedTools=WebSearch,WebFetch``
(agent/stage.py's phase_command); ``web_tools = true`` leaves them open and marks the runs
(agent.json's ``web_tools``; other programs close theirs in their homes). It is not in the
fingerprint. A phase's ``program`` (Claude Code by default) is, unless it is the default.

Placeholders ({prompt}, {model}, ...) and ``$AGENT`` in commands: commandline.py. Built-in modes
need no configuration: ``gold`` applies the fix commit's diff, ``none`` changes nothing.
"""

import copy
import difflib
import json
import os
import re
import tomllib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from ..core import inputs
from ..core.errors import UserError
from ..core.layout import SOURCE_ROOT
from .commandline import PLACEHOLDER, PLACEHOLDERS

BUILTIN = ("gold", "none")
# How an agent mode's agents run: "srt", isolated (agent/sandbox.py); "none", unisolated.
ISOLATIONS = ("srt", "none")
# An allow_hosts entry: a host name, a wildcard (*.example.org), an IPv4 or [IPv6] literal,
# optionally with :port, as srt's allowedDomains take them.
HOST = re.compile(r"(\*\.)?[A-Za-z0-9._-]+(:\d{1,5})?|\[[0-9A-Fa-f:.]+\](:\d{1,5})?")
DEFAULT_TIMEOUT = 1800


# The keys parse_modes reads, at each level: anything else is a typo (unknown_key).
KEYS = ("modes",)
MODE_KEYS = (
    "description",
    "model",
    "env",
    "isolation",
    "allow_hosts",
    "sandbox_binds",
    "web_tools",
    "tests",
    "repeats",
    "commands",
    "agent_home",
    "phases",
    "predictions",
    "timeout",
    "score",
    "models",
)
# What a mode's `score` key may say: "on_disk", the workspace's diff whatever the agent's status
# (the default); "finished", only the diff of an attempt whose status is completed (a loop that
# ended on its marker), as the benchmark's users score.
SCORES = ("on_disk", "finished")
# The variable that replaces entries of every mode's `models` table: "opus=m1,sonnet=m2", or one
# model name for every entry. Read when the modes are loaded: it changes their fingerprints.
MODELS_VARIABLE = "NGINX_EVAL_MODELS"
# A phase whose time is a share of the mode's gets at least this many seconds.
MIN_SHARE_SECONDS = 60.0
# What a mode's `tests` may give its agent: "base", nginx-tests as of the base commit
# (suite/stage.py).
TESTS = ("base",)
# Keys of the bubblewrap sandbox that isolation replaced: an error that says what to write now.
REPLACED_KEYS = {
    "sandbox": 'every agent mode runs isolated now; remove it (isolation = "none" opts out)',
    "network": "an isolated agent reaches the model API and allow_hosts only; remove it",
}
PHASE_KEYS = (
    "name",
    "program",
    "prompt",
    "timeout",
    "command",
    "model",
    "share",
    "group",
    "output",
    "loop",
    "fallback",
)
LOOP_KEYS = ("max", "marker_file", "marker", "no_progress", "message_file")
FALLBACK_KEYS = ("program", "model", "command")
# The agent program of a phase that names none; which names exist is agent/programs/registry.py's
# (the run package sits below agent: the preflight says so of an unknown one).
DEFAULT_PROGRAM = "claude"
PROGRAM_NAME = re.compile(r"[a-z][a-z0-9_-]*")
# Under the templates directory: the files a mode's `commands` key names, and the folders its
# `agent_home` key names.
COMMANDS_DIR = "commands"
AGENT_HOMES_DIR = "agent-homes"
# The harness writes the user's login there (agent/home.py): never a mode's file.
CREDENTIALS_FILE = ".credentials.json"


@dataclass(frozen=True)
class Loop:
    """A loop phase's settings (agent/loop.py): fresh calls until `marker_file` holds a line
    `marker`, at most `max`, or until `no_progress` calls in a row changed nothing; each call
    writes its commit message to `message_file` ({iteration} is the call's number)."""

    max: int = 10
    marker_file: str = ".tmp/finalize.txt"
    marker: str = "Issue resolved"
    no_progress: int = 3
    message_file: str = ".tmp/commit-message-{iteration}.txt"


# The optional keys of Phase.fingerprint, Mode.fingerprint and Mode.to_json, at the value that
# leaves them out (core/inputs.py): the value a mode written before the key existed has.
PHASE_DEFAULTS: dict[str, Any] = {
    "program": DEFAULT_PROGRAM,
    "model": "",
    "share": None,
    "group": "",
    "output": "",
    "loop": None,
    "fallback": None,
}
MODE_DEFAULTS: dict[str, Any] = {
    "sandbox": {"binds": []},
    "commands": [],
    "agent_home": [],
    "tests": "",
    "timeout": None,
}
MODE_JSON_DEFAULTS: dict[str, Any] = {
    "instances": None,
    "command_files": [],
    "agent_home": "",
    "web_tools": False,
    "tests": "",
    "score": None,
}


@dataclass(frozen=True)
class Phase:
    name: str
    command: str
    timeout: float = DEFAULT_TIMEOUT
    prompt: str = ""  # template file name, "" for none
    program: str = DEFAULT_PROGRAM  # the agent program its command runs (agent/programs/)
    model: str = ""  # fills {model}; "" for the mode's
    # its time as a share of the mode's `timeout` (0 < share <= 1), or "rest": what the phases
    # before it left of it; at least MIN_SHARE_SECONDS. None: `timeout`.
    share: float | str | None = None
    group: str = ""  # consecutive phases of one group run at the same time (agent/phases.py)
    output: str = ""  # the file (a glob: the newest match) that is its artifact, "" for its result
    loop: Loop | None = None
    fallback: "Phase | None" = None  # run instead when this one fails for a reason of its own

    def fingerprint(self) -> dict[str, object]:
        """vars(), its optional keys at their default left out (core/inputs.py)."""
        data = dict(
            vars(self),
            loop=None if self.loop is None else dict(vars(self.loop)),
            fallback=None if self.fallback is None else self.fallback.fingerprint(),
        )
        return inputs.canonical(data, PHASE_DEFAULTS)

    def every(self) -> tuple["Phase", ...]:
        """This phase and its fallback: the programs it may start."""
        return (self,) + ((self.fallback,) if self.fallback else ())


Kind = Literal["agent", "gold", "none", "predictions"]


@dataclass(frozen=True)
class ModeBase:
    """What every kind of mode has: its name, what the report says of it, the model it names
    (results/stage.py's model_name_or_path) and, for an agent mode's repeats, its family."""

    kind: ClassVar[Kind]
    name: str
    description: str = ""
    model: str = ""
    base_name: str = ""  # for repeats: the configured mode ("raw" for "raw-r2")
    repeat: int = 1  # 1..repeats

    @property
    def family(self) -> str:
        return self.base_name or self.name

    def covers(self, instance_id: str) -> bool:
        """Whether the mode scores this task (a predictions mode: only the file's rows)."""
        return True

    def json_fields(self) -> dict[str, object]:
        """The keys of to_json this kind of mode sets to other than their default."""
        return {}

    def to_json(self) -> dict[str, object]:
        """The mode as the report states it (an input of report.json), its optional keys at
        their default left out (core/inputs.py)."""
        data: dict[str, object] = {
            "name": self.name,
            "family": self.family,
            "repeat": self.repeat,
            "kind": self.kind,
            "model": self.model,
            "isolation": None,
            "description": self.description,
            "predictions": "",
            "commands": [],
            "programs": [],
            **copy.deepcopy(MODE_JSON_DEFAULTS),
        }
        data.update(self.json_fields())
        return inputs.canonical(data, MODE_JSON_DEFAULTS)


@dataclass(frozen=True)
class AgentMode(ModeBase):
    """A mode whose agents make the patch: its phases and the settings they run with."""

    kind: ClassVar[Literal["agent"]] = "agent"
    phases: tuple[Phase, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # sorted (name, value) pairs
    isolation: str = "srt"  # "srt" (sandbox.py) or "none": unisolated
    allow_hosts: tuple[str, ...] = ()  # isolated: hosts the agent may reach besides the API
    sandbox_binds: tuple[str, ...] = ()  # isolated: extra read-write paths
    # (file name, text) of each file of `commands`, in order
    command_files: tuple[tuple[str, str], ...] = ()
    web_tools: bool = False  # isolated: Claude Code's WebSearch and WebFetch allowed
    agent_home: str = ""  # the folder of templates/agent-homes/ named, "" for none
    # (relative path, text) of each file of that folder, sorted
    home_files: tuple[tuple[str, str], ...] = ()
    tests: str = ""  # "base": nginx-tests as of the base commit (suite/stage.py); "": none
    timeout: float = DEFAULT_TIMEOUT  # the whole run's time, which phases' shares divide
    score: str = "on_disk"  # SCORES

    @property
    def every_phase(self) -> tuple[Phase, ...]:
        """Every phase with its fallback: the programs the mode may start."""
        return tuple(f for p in self.phases for f in p.every())

    def fingerprint(self) -> dict[str, object]:
        """What decides whether an agent run is still valid (not the description), its
        optional keys at their default left out (core/inputs.py)."""
        fingerprint = {
            "phases": [p.fingerprint() for p in self.phases],
            "model": self.model,
            "env": [list(e) for e in self.env],
            "repeat": self.repeat,
            # The isolation itself is in the agent's inputs (sandbox.settings).
            "sandbox": {"binds": list(self.sandbox_binds)},
            # The text, not the name: an edited command is another agent input.
            "commands": [list(c) for c in self.command_files],
            "agent_home": [list(f) for f in self.home_files],
            # The tree's commit, which depends on the task, is agent.agent_inputs'.
            "tests": self.tests,
            # The whole run's time decides a phase's only when some phase has a share of it.
            "timeout": self.timeout if any(p.share is not None for p in self.phases) else None,
        }
        return inputs.canonical(fingerprint, MODE_DEFAULTS)

    def json_fields(self) -> dict[str, object]:
        return {
            "isolation": self.isolation,
            "commands": [p.command for p in self.phases],
            "programs": [p.program for p in self.phases],
            "command_files": [name for name, _ in self.command_files],
            "agent_home": self.agent_home,
            "web_tools": self.web_tools,
            "tests": self.tests,
            "score": self.score,
        }


@dataclass(frozen=True)
class GoldMode(ModeBase):
    """The built-in upper bound: the fix commit's own diff."""

    kind: ClassVar[Literal["gold"]] = "gold"


@dataclass(frozen=True)
class NoneMode(ModeBase):
    """The built-in lower bound: an empty patch."""

    kind: ClassVar[Literal["none"]] = "none"


@dataclass(frozen=True)
class PredictionsMode(ModeBase):
    """A SWE-bench predictions file, scored as it is."""

    kind: ClassVar[Literal["predictions"]] = "predictions"
    predictions: str = ""  # the file's path
    # the instance ids the file has a row for (the only tasks the mode scores); None: every
    # selected task
    instances: tuple[str, ...] | None = None

    def covers(self, instance_id: str) -> bool:
        return self.instances is None or instance_id in self.instances

    def json_fields(self) -> dict[str, object]:
        return {
            "predictions": self.predictions,
            "instances": None if self.instances is None else list(self.instances),
        }


# Code that reads a field of one kind narrows to its type first (isinstance or match), so that
# mypy catches an agent's field read of a baseline.
Mode = AgentMode | GoldMode | NoneMode | PredictionsMode


BUILTIN_MODES: dict[str, Mode] = {
    "gold": GoldMode("gold", description="the fix commit's own diff (upper bound)"),
    "none": NoneMode("none", description="an empty patch (lower bound)"),
}


def _check_template(command: str, path: str | Path, where: str) -> None:
    for n in PLACEHOLDER.findall(command):
        if n not in PLACEHOLDERS:
            raise UserError(
                f"unknown placeholder {{{n}}}; known: {', '.join(PLACEHOLDERS)}",
                file=path,
                item=where,
                field="command",
            )


def check_keys(
    table: Iterable[str], known: Sequence[str], path: str | Path, where: str | None = None
) -> None:
    """UserError for the first key of `table` that is not in `known`, with the closest one."""
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(known)}"
            raise UserError(
                f"{where + ': ' if where else ''}unknown key '{key}'; {hint}", file=path
            )


def _mode_settings(raw: dict[str, Any], path: str | Path, where: str) -> dict[str, Any]:
    """The keys every configured mode may have (model, description, env, the sandbox's)."""
    env = raw.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise UserError("must be a table of strings", file=path, item=where, field="env")
    isolation = raw.get("isolation", "srt")
    if isolation not in ISOLATIONS:
        raise UserError(
            f"must be one of {', '.join(map(repr, ISOLATIONS))}",
            file=path,
            item=where,
            field="isolation",
        )
    binds = raw.get("sandbox_binds", [])
    if not isinstance(binds, list) or not all(isinstance(b, str) and b for b in binds):
        raise UserError("must be a list of paths", file=path, item=where, field="sandbox_binds")
    web_tools = raw.get("web_tools", False)
    if not isinstance(web_tools, bool):
        raise UserError("must be true or false", file=path, item=where, field="web_tools")
    hosts = raw.get("allow_hosts", [])
    if not isinstance(hosts, list) or not all(
        isinstance(h, str) and HOST.fullmatch(h) for h in hosts
    ):
        raise UserError(
            "must be a list of host names, each optionally with :port (no scheme, no path)",
            file=path,
            item=where,
            field="allow_hosts",
        )
    tests = raw.get("tests", "")
    if tests not in ("",) + TESTS:
        raise UserError(
            f"must be one of {', '.join(map(repr, TESTS))} (or left out)",
            file=path,
            item=where,
            field="tests",
        )
    timeout = raw.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise UserError(
            "must be a positive number of seconds", file=path, item=where, field="timeout"
        )
    score = raw.get("score", "on_disk")
    if score not in SCORES:
        raise UserError(
            f"must be one of {', '.join(map(repr, SCORES))}", file=path, item=where, field="score"
        )
    return dict(
        model=str(raw.get("model", "")),
        timeout=float(timeout),
        score=score,
        description=str(raw.get("description", "")),
        env=tuple(sorted(env.items())),
        isolation=isolation,
        allow_hosts=tuple(hosts),
        sandbox_binds=tuple(binds),
        web_tools=web_tools,
        tests=tests,
    )


def _command_files(
    raw: dict[str, Any], path: str | Path, where: str, templates_dir: str | Path
) -> tuple[tuple[str, str], ...]:
    """((name, text), ...) of the files the mode's `commands` key names, read from
    templates_dir/commands/; UserError naming the mode and the key for a name that is not a
    plain file name there."""
    names = raw.get("commands", [])
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise UserError(
            "must be a list of file names in templates/commands/",
            file=path,
            item=where,
            field="commands",
        )
    folder = Path(templates_dir) / COMMANDS_DIR
    files = []
    for name in dict.fromkeys(names):
        # A plain name: the file is written under .claude/commands/ by this name, nowhere else.
        source = folder / name
        if Path(name).name != name or name in (".", "..") or not source.is_file():
            known = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
            close = difflib.get_close_matches(name, known, n=1)
            raise UserError(
                f"no command file {name!r} in {folder}"
                f"{f'; did you mean {close[0]!r}?' if close else ''}",
                file=path,
                item=where,
                field="commands",
            )
        files.append((name, source.read_text(encoding="utf-8")))
    return tuple(files)


def _home_files(
    raw: dict[str, Any], path: str | Path, where: str, templates_dir: str | Path
) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(name, ((relative path, text), ...)) of the folder of templates/agent-homes/ that the
    mode's `agent_home` key names (("", ()) without one); UserError naming the mode and the key
    for a name that is not a folder there, or a file that is not UTF-8 text."""
    if "agent_home" not in raw:
        return "", ()
    name, parent = raw["agent_home"], Path(templates_dir) / AGENT_HOMES_DIR
    if not isinstance(name, str) or not name:
        raise UserError(
            f"must be the name of a folder in {parent}", file=path, item=where, field="agent_home"
        )
    folder = parent / name
    if Path(name).name != name or name in (".", "..") or not folder.is_dir():
        known = sorted(p.name for p in parent.iterdir() if p.is_dir()) if parent.is_dir() else []
        close = difflib.get_close_matches(name, known, n=1)
        raise UserError(
            f"no folder {name!r} in {parent}{f'; did you mean {close[0]!r}?' if close else ''}",
            file=path,
            item=where,
            field="agent_home",
        )
    files = []
    for source in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = source.relative_to(folder).as_posix()
        if relative == CREDENTIALS_FILE:
            raise UserError(
                f"{source}: the agent's credentials are the user's, copied in by the "
                f"harness; remove this file",
                file=path,
                item=where,
                field="agent_home",
            )
        try:
            files.append((relative, source.read_text(encoding="utf-8")))
        except UnicodeDecodeError:
            raise UserError(
                f"{source} is not UTF-8 text", file=path, item=where, field="agent_home"
            ) from None
    return name, tuple(files)


def subagent_models(
    files: tuple[tuple[str, str], ...], models: dict[str, str]
) -> tuple[tuple[str, str], ...]:
    """The agent home's files with each subagent definition (a Markdown file under an `agents`
    folder, a plugin's included) whose front matter says `model: <role>` of the mode's models
    table set to that role's model, and `{models.<role>}` in its text to that model: Claude
    Code would read `sonnet` or `opus` as its own newest model of that name (2.1.330:
    claude-sonnet-5-5), not the mode's, and NGINX_EVAL_MODELS would not reach the subagents."""
    out = []
    for relative, text in files:
        if "agents" in Path(relative).parts[:-1] and relative.endswith(".md"):
            text = _front_matter_model(text, models)
            # `{models.<role>}` in its text: that role's model (for a Codex it starts, say).
            text = MODEL_ROLE_TOKEN.sub(lambda m: models.get(m.group(1), m.group(0)), text)
        out.append((relative, text))
    return tuple(out)


MODEL_ROLE_TOKEN = re.compile(r"\{models\.([A-Za-z0-9_-]+)\}")


def _front_matter_model(text: str, models: dict[str, str]) -> str:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return text
    for i, line in enumerate(lines[1:], 1):
        if line.strip() == "---":
            break
        key, colon, value = line.partition(":")
        if colon and key.strip() == "model" and value.strip() in models:
            ending = line[len(line.rstrip("\r\n")) :]
            lines[i] = f"model: {models[value.strip()]}{ending}"
    return "".join(lines)


def _predictions_mode(
    name: str, raw: dict[str, Any], path: str | Path, where: str, settings: dict[str, Any]
) -> PredictionsMode:
    pred = raw["predictions"]
    if not isinstance(pred, str) or not pred:
        raise UserError("must be a file path", file=path, item=where, field="predictions")
    pred_path = Path(pred) if Path(pred).is_absolute() else Path(path).parent / pred
    # Only the tasks the file has a row for (a file not there yet fails at its patches).
    ids = tuple(read_predictions(pred_path)) if pred_path.exists() else None
    # The agents' settings (env, isolation, tests, score, ...) have nothing to act on here.
    return PredictionsMode(
        name,
        description=settings["description"],
        model=settings["model"],
        predictions=str(pred_path),
        instances=ids,
    )


def model_table(raw: dict[str, Any], path: str | Path, where: str, environ: dict) -> dict:
    """The mode's `models` table ({role: model}) with MODELS_VARIABLE's entries put in."""
    table = raw.get("models", {})
    if not isinstance(table, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in table.items()
    ):
        raise UserError("must be a table of model names", file=path, item=where, field="models")
    table = dict(table)
    value = environ.get(MODELS_VARIABLE, "").strip()
    for entry in filter(None, (e.strip() for e in value.split(","))):
        if "=" not in entry:
            table = dict.fromkeys(table, entry)
            continue
        role, model = (x.strip() for x in entry.split("=", 1))
        if role in table and model:
            table[role] = model
    return table


def _loop(raw: Any, path: str | Path, where: str) -> Loop:
    if not isinstance(raw, dict):
        raise UserError(
            "must be a table (max, marker_file, marker, no_progress, message_file)",
            file=path,
            item=where,
            field="loop",
        )
    check_keys(raw, LOOP_KEYS, path, f"{where} loop")
    for key in ("max", "no_progress"):
        value = raw.get(key, getattr(Loop, key))
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserError(
                "must be a whole number >= 1", file=path, item=where, field=f"loop.{key}"
            )
    for key in ("marker_file", "marker", "message_file"):
        value = raw.get(key, getattr(Loop, key))
        if not isinstance(value, str) or not value.strip():
            raise UserError(
                "must be a non-empty string", file=path, item=where, field=f"loop.{key}"
            )
        if key != "marker" and (Path(value).is_absolute() or ".." in Path(value).parts):
            raise UserError(
                "must be a path inside the workspace", file=path, item=where, field=f"loop.{key}"
            )
    return Loop(**{k: raw[k] for k in LOOP_KEYS if k in raw})


def _share(raw: Any, path: str | Path, where: str) -> float | str:
    if raw == "rest":
        return "rest"
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 < raw <= 1:
        raise UserError(
            'must be a fraction of the mode\'s timeout (0 < share <= 1) or "rest"',
            file=path,
            item=where,
            field="share",
        )
    return float(raw)


def _phase(p: Any, i: int, path: str | Path, where: str, models: dict | None = None) -> Phase:
    """Phase i (0-based) of a mode, checked; models: the mode's table of model roles."""
    models = models or {}
    label = p.get("name") if isinstance(p, dict) else None
    pwhere = f"{where} phase {label if isinstance(label, str) and label else i + 1}"
    if isinstance(p, dict):
        check_keys(p, PHASE_KEYS, path, pwhere)
    program = p.get("program", DEFAULT_PROGRAM) if isinstance(p, dict) else DEFAULT_PROGRAM
    if not isinstance(program, str) or not PROGRAM_NAME.fullmatch(program):
        raise UserError(
            "must be the name of an agent program (claude, codex, gemini, ...)",
            file=path,
            item=pwhere,
            field="program",
        )
    if not isinstance(p, dict) or not isinstance(p.get("command"), str) or not p["command"].strip():
        raise UserError("needs a non-empty command", file=path, item=pwhere, field="command")
    _check_template(p["command"], path, pwhere)
    timeout = p.get("timeout", DEFAULT_TIMEOUT)
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise UserError(
            "must be a positive number of seconds", file=path, item=pwhere, field="timeout"
        )
    if "timeout" in p and "share" in p:
        raise UserError(
            "a phase has a timeout or a share of the mode's, not both",
            file=path,
            item=pwhere,
            field="share",
        )
    prompt = p.get("prompt", "")
    if not isinstance(prompt, str):
        raise UserError("must be a template file name", file=path, item=pwhere, field="prompt")
    for key in ("model", "group", "output"):
        if not isinstance(p.get(key, ""), str):
            raise UserError("must be a string", file=path, item=pwhere, field=key)
    model = p.get("model", "")
    fallback = None
    if "fallback" in p:
        raw = p["fallback"]
        fwhere = f"{pwhere} fallback"
        if not isinstance(raw, dict):
            raise UserError(
                "must be a table (program, model, command)",
                file=path,
                item=pwhere,
                field="fallback",
            )
        check_keys(raw, FALLBACK_KEYS, path, fwhere)
        fallback = _phase(
            dict(
                {k: p[k] for k in ("name", "prompt", "output") if k in p},
                **{k: raw[k] for k in FALLBACK_KEYS if k in raw},
            ),
            i,
            path,
            where,
            models,
        )
    return Phase(
        name=str(p.get("name", f"phase{i + 1}")),
        command=p["command"],
        timeout=float(timeout),
        prompt=prompt,
        program=program,
        model=str(models.get(model, model)),
        share=_share(p["share"], path, pwhere) if "share" in p else None,
        group=p.get("group", ""),
        output=p.get("output", ""),
        loop=_loop(p["loop"], path, pwhere) if "loop" in p else None,
        fallback=fallback,
    )


def _check_sequence(phases: Sequence[Phase], path: str | Path, where: str) -> None:
    """A group's phases are consecutive and no loop; phase names are unique (they name the
    artifacts prompts include)."""
    seen: set[str] = set()
    closed: set[str] = set()
    previous = ""
    for phase in phases:
        pwhere = f"{where} phase {phase.name}"
        if phase.name in seen:
            raise UserError(
                "two phases of a mode have this name", file=path, item=pwhere, field="name"
            )
        seen.add(phase.name)
        if phase.group and phase.loop:
            raise UserError(
                "a loop phase runs alone, in no group", file=path, item=pwhere, field="group"
            )
        if phase.group != previous and previous:
            closed.add(previous)
        if phase.group and phase.group in closed:
            raise UserError(
                "the phases of a group must follow one another",
                file=path,
                item=pwhere,
                field="group",
            )
        previous = phase.group


def _agent_modes(
    name: str, raw: dict[str, Any], path: str | Path, where: str, settings: dict[str, Any]
) -> dict[str, AgentMode]:
    """{name: AgentMode} of an agent mode and its repeats (``<name>-r2``, ...)."""
    phases_raw = raw.get("phases")
    if not isinstance(phases_raw, list) or not phases_raw:
        raise UserError(
            "needs at least one [[phases]] entry (or a predictions file)",
            file=path,
            item=where,
            field="phases",
        )
    models = model_table(raw, path, where, dict(os.environ))
    phases = tuple(_phase(p, i, path, where, models) for i, p in enumerate(phases_raw))
    _check_sequence(phases, path, where)
    settings = dict(settings, model=models.get(settings["model"], settings["model"]))
    repeats = raw.get("repeats", 1)
    if not isinstance(repeats, int) or repeats < 1:
        raise UserError("must be a whole number >= 1", file=path, item=where, field="repeats")
    # Repeat 1 keeps the plain name, so adding repeats never re-runs the first one.
    names = [name if i == 1 else f"{name}-r{i}" for i in range(1, repeats + 1)]
    return {
        rname: AgentMode(rname, phases=phases, base_name=name, repeat=i, **settings)
        for i, rname in enumerate(names, 1)
    }


def parse_modes(
    data: dict[str, Any], path: str | Path, templates_dir: str | Path | None = None
) -> dict[str, Mode]:
    """All modes: the built-ins plus those of `data` (modes.toml's table, read from `path`).
    templates_dir: where `commands` files are (default: the project's own templates/)."""
    modes = dict(BUILTIN_MODES)
    check_keys(data, KEYS, path)
    table = data.get("modes", {})
    if not isinstance(table, dict):
        raise UserError("[modes] must be a table", file=path)
    for name, raw in table.items():
        where = f"mode {name}"
        if name in BUILTIN or name in ("validate", "file", "report", "doctor", "grade"):
            raise UserError(
                f"'{name}' is built in or reserved and cannot be a mode name", file=path, item=where
            )
        if not isinstance(raw, dict):
            raise UserError("must be a table", file=path, item=where)
        for key, why in REPLACED_KEYS.items():
            if key in raw:
                raise UserError(why, file=path, item=where, field=key)
        check_keys(raw, MODE_KEYS, path, where)
        settings = _mode_settings(raw, path, where)
        if "predictions" in raw:
            modes[name] = _predictions_mode(name, raw, path, where, settings)
            continue
        templates = templates_dir or SOURCE_ROOT / "templates"
        settings["command_files"] = _command_files(raw, path, where, templates)
        home, files = _home_files(raw, path, where, templates)
        models = model_table(raw, path, where, dict(os.environ))
        settings["agent_home"], settings["home_files"] = home, subagent_models(files, models)
        modes.update(_agent_modes(name, raw, path, where, settings))
    return modes


def load_modes(path: str | Path, templates_dir: str | Path | None = None) -> dict[str, Mode]:
    """All modes: the built-ins plus those in `path` (which may be absent). templates_dir:
    Layout.templates_dir, where the `commands` files are."""
    path = Path(path)
    if not path.exists():
        return dict(BUILTIN_MODES)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"malformed TOML: {e}", file=path) from None
    return parse_modes(data, path, templates_dir)


def read_predictions(path: str | Path) -> dict[str, tuple[str, str]]:
    """{instance_id: (model_patch, model_name_or_path)} of a SWE-bench predictions file (JSON
    lines, or one JSON list); UserError naming the file and the line (or list row) at fault. A
    row needs instance_id and model_patch (a diff; "" or null is an empty patch: the task is
    scored, unresolved); a row without model_patch is an error, not an empty patch."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read: {e}", file=path) from None
    if text.lstrip().startswith("["):
        try:
            rows = [(f"row {n}", row) for n, row in enumerate(json.loads(text), 1)]
        except json.JSONDecodeError as e:
            raise UserError(f"malformed JSON: {e}", file=path) from None
    else:
        rows = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append((f"line {n}", json.loads(line)))
            except json.JSONDecodeError as e:
                # json counts lines within the one line it was given: say the file's own.
                raise UserError(
                    f"malformed JSON: {e.msg} (column {e.colno})", file=path, item=f"line {n}"
                ) from None
    found = {}
    for where, row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str):
            raise UserError("must be an object with a string instance_id", file=path, item=where)
        if "model_patch" not in row:
            # The harness would score it as an empty patch; a row that lost its patch is far
            # likelier a broken export than a deliberate "no change" (which is "" or null).
            raise UserError(
                'is missing (an empty patch is "" or null)',
                file=path,
                task=row["instance_id"],
                item=where,
                field="model_patch",
            )
        if not isinstance(row.get("model_patch") or "", str):
            raise UserError(
                "must be a string (a diff) or null", file=path, item=where, field="model_patch"
            )
        if row["instance_id"] in found:
            raise UserError(f"duplicate instance_id {row['instance_id']}", file=path, item=where)
        found[row["instance_id"]] = (
            row.get("model_patch") or "",
            str(row.get("model_name_or_path") or ""),
        )
    return found


def extra_modes(spec: str | None, path: str = "command line") -> dict[str, Mode]:
    """Modes named on the command line: ``predictions=PATH`` adds a mode ``file``, which scores
    only the tasks the file has a row for (as SWE-bench does)."""
    if not spec:
        return {}
    p = Path(spec).resolve()
    if not p.exists():
        raise UserError(f"predictions file {spec} does not exist", file=path, field="predictions")
    # A malformed file is an error now, not when its patches are made.
    ids = tuple(read_predictions(p))
    return {
        "file": PredictionsMode(
            "file",
            predictions=str(p),
            instances=ids,
            description=f"predictions from {p.name}",
        )
    }


def unknown_prediction_ids(
    mode: Mode | None, bench_name: str, task_ids: Collection[str]
) -> str | None:
    """A warning for the ids of a predictions mode's file that are not among `task_ids`, the
    tasks of benchmark `bench_name` (they are not scored), or None."""
    if not isinstance(mode, PredictionsMode) or mode.instances is None:
        return None
    known = set(task_ids)
    unknown = [i for i in mode.instances if i not in known]
    if not unknown:
        return None
    shown = ", ".join(unknown[:10]) + (", ..." if len(unknown) > 10 else "")
    return (
        f"{Path(mode.predictions).name}: {len(unknown)} instance "
        f"id{'s' if len(unknown) != 1 else ''} not in benchmark {bench_name}: {shown}"
    )
