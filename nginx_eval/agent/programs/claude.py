"""Claude Code behind the program seam (base.py): what its outputs mean (result JSON, cost and
tokens, sessions, slash commands, a phase's status) and its home (CLAUDE_CONFIG_DIR, below);
its transcripts are transcript/files.py's. What they rely on, tests/test_claude_cli.py pins for
the CLI that scripts/setup-debian.sh installs (against tests/anthropic_standin.py):

- ``--output-format json`` prints one object, ``{"type": "result", ...}``, also on errors; the exit
  code is 1 exactly when ``is_error``. An API error (after the CLI's own retries) has
  ``api_error_status`` (null for a refused connection, whose ``result`` names ECONNREFUSED),
  ``terminal_reason: "api_error"`` and ``result: "API Error: ..."``; a bad key: 401, AUTH_TEXTS.
- ``usage`` covers the main model only; ``modelUsage`` has every model (subagents too) with its
  ``costUSD``; ``total_cost_usd`` is their sum.
- With ``--continue``, ``total_cost_usd`` and ``modelUsage`` are the session's so far, while
  ``usage`` is the call's own: a phase's figures are the difference from the previous phase of
  the same ``session_id``. ``--continue`` where no session exists silently starts a new one.
- Transcripts: a line per content block, each assistant line with its message's ``usage``
  (messages counted once, by id); a run that ends normally, or on SIGTERM, appends a
  ``cost-state`` line (cumulative for the session); SIGKILL leaves only the per-message usage,
  and no JSON is printed.
- A slash-command prompt (``/fix-issue ARGS``) whose file is in the workspace's
  ``.claude/commands/`` or ``$CLAUDE_CONFIG_DIR/commands/`` is expanded (the transcript's user
  message holds ``<command-name>/fix-issue</command-name>``); without the file the CLI sends the
  text to the model as a plain prompt (exit 0, one turn, paid).
"""

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...core import jsonio
from ...core.outcomes import COMPLETED, ERROR, FAILED, INFRA_ERROR, TIMEOUT
from ...core.trees import remove_tree
from ...transcript import files as ct
from ...transcript.files import command_ran, config_dir
from .base import (
    AUTH,
    TOKENS,
    Entry,
    Models,
    Program,
    Result,
    ResultFields,
    Usage,
    as_tokens,
    command_words,
    one_line,
    result_fields,
)

PROGRAM_NAMES = ("claude", "claude.exe")
# The CLI's tools that run on the API's side: no sandbox here can stop a search the API makes.
WEB_TOOLS = ("WebSearch", "WebFetch")
# With "=": the CLI's tool lists take every word up to the next option, so `claude
# --disallowedTools WebSearch,WebFetch {prompt} -p` would read the prompt as a tool (measured,
# 2.1.330: "was read as a value of --disallowedTools, not as a prompt").
NO_WEB_TOOLS = "--disallowedTools=" + ",".join(WEB_TOOLS)
CONTINUE_FLAGS = ("--continue", "-c")
# The same four counts as the API's usage and as modelUsage / cost-state name them.
USAGE_KEYS = dict(
    zip(
        TOKENS,
        ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"),
        strict=True,
    )
)
MODEL_USAGE_KEYS = dict(
    zip(
        TOKENS,
        ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens"),
        strict=True,
    )
)
# "Not logged in · Please run /login": no key and no login, answered at once with no request.
AUTH_TEXTS = ("Invalid API key", "Failed to authenticate", "Not logged in")
# What gives the CLI credentials: any of these set, or a login's credentials file.
CREDENTIAL_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_USE_FOUNDRY",
)
# -- the program -----------------------------------------------------------------------------


def is_claude_code(path: str | None) -> bool:
    """Whether `path` is the Claude Code CLI: it, or the file its symlinks lead to, is named
    claude (npm's node_modules/.bin/claude is a symlink to bin/claude.exe)."""
    return bool(
        path
        and (
            os.path.basename(path) in PROGRAM_NAMES
            or os.path.basename(os.path.realpath(path)) in PROGRAM_NAMES
        )
    )


def program_version(
    path: str | None, environ: Mapping[str, str], cache_dir: str | Path
) -> str | None:
    """``<path> --version`` ("2.1.330 (Claude Code)") of a Claude Code program, or None. Cached in
    `cache_dir` per resolved file, mtime and size, so that a run with nothing to do starts no
    CLI."""
    return CLAUDE.version(path, environ, cache_dir)


def credentials_problem(environ: Mapping[str, str]) -> str | None:
    """Why the CLI would answer "Not logged in" (one line), or None: no credential variable and
    no login (``.credentials.json`` in its config directory) and no apiKeyHelper setting."""
    if any(environ.get(v) for v in CREDENTIAL_VARIABLES):
        return None
    config = environ.get("CLAUDE_CONFIG_DIR") or os.path.expanduser("~/.claude")
    if os.path.exists(os.path.join(config, ".credentials.json")):
        return None
    for settings in (os.path.join(config, "settings.json"),):
        data = jsonio.read_json(Path(settings))
        if isinstance(data, dict) and data.get("apiKeyHelper"):
            return None
    return (
        "Claude Code has no credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), "
        "or log in once with `claude` and /login"
    )


def continues_session(command: str) -> bool:
    """Whether a command line asks the CLI to continue the latest session."""
    return any(w in CONTINUE_FLAGS for w in command_words(command))


# -- the result JSON -------------------------------------------------------------------------


def parse_result(stdout_text: str) -> dict[str, Any] | None:
    """The CLI's result object (the last JSON object line of stdout with a cost or usage, or the
    whole output pretty printed), or None: an agent that is not Claude Code, or one killed."""
    for line in reversed(stdout_text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            data = _result_object(line)
            if data is not None:
                return data
    return _result_object(stdout_text)


def _result_object(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict) and ("total_cost_usd" in data or "usage" in data):
        return data
    return None


def _error_kind(result: Result) -> str:
    status = result.get("api_error_status")
    text = str(result.get("result") or "")
    if status in (401, 403) or any(t in text for t in AUTH_TEXTS):
        return AUTH
    if (
        status == 429
        or (isinstance(status, int) and status >= 500)
        or (status is None and result.get("terminal_reason") == "api_error")
    ):
        return INFRA_ERROR
    if status == 404:  # no such model: the mode's mistake
        return ERROR
    return FAILED  # a refusal, a prompt too long, max turns: the agent's own end


def classify(result: Result | None, exit_code: int | None) -> tuple[str, str]:
    """(status, reason) of a phase that ended by itself, from the CLI's result (None: it printed
    none, e.g. another agent) and its exit code. AUTH: credentials refused, the run must stop."""
    if result is None:
        if exit_code == 0:
            return COMPLETED, ""
        if exit_code == 127:
            return ERROR, "command not found (exit 127)"
        return FAILED, f"exit code {exit_code}"
    text = one_line(result.get("result"))
    if result.get("is_error"):
        return _error_kind(result), f"exit code {exit_code}: {text}"
    if exit_code != 0:
        return FAILED, f"exit code {exit_code}"
    if text.startswith("Unknown command"):
        return ERROR, text
    if result.get("num_turns") == 0:
        return ERROR, f"no API turn made: {text}"
    return COMPLETED, ""


def phase_status(
    timed_out: bool,
    timeout: float,
    exit_code: int | None,
    result: Result | None,
    entries: Iterable[Entry],
    slash: str | None,
    session_problem: str | None,
) -> tuple[str, str]:
    """(status, reason) of a phase: classify's, unless a completed run is not what the mode
    asked for: a lost session (see session_problem) or a slash command the CLI did not expand."""
    if timed_out:
        return TIMEOUT, f"timed out after {timeout:g} s"
    status, reason = classify(result, exit_code)
    if status != COMPLETED:
        return status, reason
    if session_problem:
        return ERROR, session_problem
    if slash and not command_ran(entries, slash):
        return ERROR, (
            f"the CLI did not run /{slash}: no <command-name>/{slash}</command-name> "
            f"in its transcript"
        )
    return COMPLETED, ""


def tokens_of(
    usage: Mapping[str, Any] | None, keys: Mapping[str, str] = USAGE_KEYS
) -> dict[str, int]:
    return {t: int((usage or {}).get(keys[t]) or 0) for t in TOKENS}


def models_of(model_usage: Mapping[str, Any] | None) -> Models:
    """{model: {"cost_usd", "input", "output", "cache_read", "cache_creation"}} of a modelUsage
    (result or cost-state)."""
    return {
        m: dict(tokens_of(u, MODEL_USAGE_KEYS), cost_usd=u.get("costUSD"))
        for m, u in (model_usage or {}).items()
        if isinstance(u, dict)
    }


def minus(now: Models, before: Models) -> Models:
    """Per model, the cumulative figures `now` less `before` (the same session's previous
    phase); models with nothing new are left out."""
    out = {}
    for model, figures in now.items():
        old = before.get(model, {})
        diff = {t: figures[t] - old.get(t, 0) for t in TOKENS}
        cost = figures.get("cost_usd")
        diff["cost_usd"] = None if cost is None else round(cost - (old.get("cost_usd") or 0), 10)
        if any(diff[t] for t in TOKENS) or diff["cost_usd"]:
            out[model] = diff
    return out


def totals(models: Models) -> tuple[float | None, dict[str, int]]:
    """(cost_usd, tokens) summed over models; cost None when a model's cost is unknown."""
    tokens = {t: sum(m[t] for m in models.values()) for t in TOKENS}
    costs = [m.get("cost_usd") for m in models.values()]
    cost = None if None in costs else round(sum(c for c in costs if c is not None), 10)
    return cost, tokens


def message_models(entries: Iterable[Entry]) -> Models:
    """Usage per model from transcript entries (assistant lines, each message counted once by
    its id); cost unknown (None): only a cost-state line or the result prices them."""
    models: Models = {}
    seen = set()
    for e in entries:
        message = e.get("message") or {}
        if e.get("type") != "assistant" or not message.get("usage") or message.get("id") in seen:
            continue
        seen.add(message.get("id"))
        figures = models.setdefault(
            message.get("model") or "unknown", dict({t: 0 for t in TOKENS}, cost_usd=None)
        )
        for t, n in tokens_of(message["usage"]).items():
            figures[t] += n
    return models


def last_cost_state(entries: Iterable[Entry]) -> Entry | None:
    states = [e for e in entries if e.get("type") == "cost-state"]
    return states[-1] if states else None


def phase_usage(
    result: Result | None, entries: Sequence[Entry], before: Models
) -> tuple[Usage, Models]:
    """What a phase cost: {"cost_usd", "tokens", "models", "cost_source"} and the session's
    cumulative models after it. result: its JSON (None if killed); entries: the transcript lines
    it added (its subagents' too); before: the cumulative models of its session so far."""
    if result is not None and isinstance(result.get("modelUsage"), dict):
        now = models_of(result["modelUsage"])
        return _figures(minus(now, before), "result"), now
    if result is not None:  # another agent printing Claude-like JSON: take it as it is
        tokens = as_tokens(tokens_of(result.get("usage")))
        return {
            "cost_usd": result.get("total_cost_usd"),
            "tokens": tokens,
            "models": {},
            "cost_source": "result",
        }, before
    state = last_cost_state(entries)
    if state is not None:
        now = models_of(state.get("modelUsage"))
        return _figures(minus(now, before), "transcript"), now
    if entries:  # killed by SIGKILL: tokens per message, no price (none if none answered)
        return _figures(message_models(entries), "transcript"), before
    return {"cost_usd": None, "tokens": None, "models": {}, "cost_source": None}, before


def _figures(models: Models, source: str) -> Usage:
    cost, tokens = totals(models)
    return {
        "cost_usd": cost,
        "tokens": as_tokens(tokens),
        "models": models,
        "cost_source": source,
    }


# -- slash commands --------------------------------------------------------------------------

SLASH_COMMAND = re.compile(r"\s*/([A-Za-z0-9][A-Za-z0-9_:.-]*)(?:\s|$)")


def slash_command(prompt: str | None) -> str | None:
    """The command a prompt invokes ("fix-issue" for "/fix-issue .issue.md"), or None."""
    m = SLASH_COMMAND.match(prompt or "")
    return m.group(1) if m else None


# Where a mode's agent_home keeps Claude Code plugin trees, one folder per plugin.
PLUGINS_DIR = "plugins"


def command_file(name: str, workspace: str | Path, config: str | Path) -> Path | None:
    """The Markdown file that defines /name for a CLI run in `workspace`, or None. A name with
    colons is a file in subdirectories (/frontend:test is frontend/test.md)."""
    relative = name.replace(":", "/") + ".md"
    for folder in (Path(workspace) / ".claude" / "commands", Path(config) / "commands"):
        if (folder / relative).is_file():
            return folder / relative
    # A plugin's command (/plugin:command) of a plugin tree in the home (loaded with
    # --plugin-dir <home>/plugins, modes.toml's {agent_home}).
    plugin, _, command = name.partition(":")
    found = Path(config) / PLUGINS_DIR / plugin / "commands" / f"{command}.md"
    return found if command and found.is_file() else None


def undefined_command(name: str, workspace: str | Path, config: str | Path) -> str | None:
    """Why a phase that invokes /name must not run (None when the command is defined)."""
    if command_file(name, workspace, config):
        return None
    return (
        f"/{name} is not defined (no {name}.md in the workspace's .claude/commands/ or in "
        f"{config}/commands/); not run, since the CLI would send it to the model as plain "
        f"text"
    )


# -- its home ----------------------------------------------------------------------------------
# The agent's home: the Claude Code configuration directory (``CLAUDE_CONFIG_DIR``) of one agent
# run, owned by the harness (Layout.agent_home), so that the benchmark's agent is the same for
# every operator. It holds the user's credentials and the mode's ``agent_home`` files
# (modes.py), nothing else of the user's: no CLAUDE.md, settings, hooks, permissions, plugins,
# agents, skills, MCP servers or output styles. It is made afresh for each attempt, kept across
# the attempt's phases (``--continue`` finds the session there) and removed when the attempt ends
# (its transcripts are copied to the logs first).
#
# With CLAUDE_CONFIG_DIR set, the pinned CLI reads none of the user's configuration in
# ``~/.claude`` or ``~/.claude.json`` (docs/agents.md#the-agents-home; tests/test_agent_home.py),
# so the directory alone closes it: ``--setting-sources`` and ``--strict-mcp-config`` are not
# needed. Of HOME it still looks at ``~/.config/anthropic/`` (a credentials profile store) and,
# for its Bash tool, ``~/.bashrc`` and ``~/.profile`` (hidden when isolated, like the rest of HOME).
#
# Credentials: the environment's (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN,
# CLAUDE_CODE_OAUTH_TOKEN) pass through; a subscription login, ``.credentials.json`` of the user's
# configuration directory (``$CLAUDE_CONFIG_DIR``, else ``~/.claude``), is copied in, and an
# ``apiKeyHelper`` of the user's settings.json is carried over (credentials_problem
# counts both). The CLI refreshes a login by rewriting that file: sync_credentials writes a
# refreshed copy back to the user's, unless theirs changed meanwhile (then theirs wins).

CREDENTIALS = ".credentials.json"
SETTINGS = "settings.json"
# The user's own state, wherever CLAUDE_CONFIG_DIR points: hidden from a sandboxed agent.
USER_STATE = ("~/.claude", "~/.claude.json")


def user_state(environ: Mapping[str, str]) -> list[str]:
    """The paths of the user's own Claude Code state that exist: their configuration directory
    (environ's CLAUDE_CONFIG_DIR, else ~/.claude) and ~/.claude.json."""
    paths = [str(config_dir(environ))] + [os.path.expanduser(p) for p in USER_STATE]
    return [p for p in dict.fromkeys(paths) if os.path.lexists(p)]


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def prepare_files(home: Path, files: Iterable[tuple[str, str]], user_config: Path) -> bytes | None:
    """Make `home` afresh: the mode's files ((relative path, text), modes.AgentMode.home_files), the
    user's login and apiKeyHelper. Returns the login copied in (None: there is none), the
    baseline of sync_credentials."""
    remove_tree(home)
    home.mkdir(parents=True)
    home.chmod(0o700)  # it holds a login
    for relative, text in files:
        jsonio.write_text(home / relative, text)
    settings = jsonio.read_json(user_config / SETTINGS)
    helper = settings.get("apiKeyHelper") if isinstance(settings, dict) else None
    if helper:
        settings = jsonio.read_json(home / SETTINGS) or {}
        jsonio.write_json(home / SETTINGS, dict(settings, apiKeyHelper=helper))
    login = _read(user_config / CREDENTIALS)
    if login is not None:
        jsonio.write_bytes(home / CREDENTIALS, login, mode=0o600)
    return login


def sync_credentials(home: Path, user_config: Path, baseline: bytes | None) -> bytes | None:
    """Between phases and at the end of an attempt: a login the CLI refreshed in `home` goes
    back to the user's file if that still holds `baseline` (what was copied in); one refreshed
    in the user's file meanwhile (another run) comes in if the home's is unchanged. Returns the
    new baseline."""
    if baseline is None:
        return None
    ours, theirs = _read(home / CREDENTIALS), _read(user_config / CREDENTIALS)
    if ours is not None and ours != baseline and theirs == baseline:
        jsonio.write_bytes(user_config / CREDENTIALS, ours, mode=0o600)
        return ours
    if ours == baseline and theirs is not None and theirs != baseline:
        jsonio.write_bytes(home / CREDENTIALS, theirs, mode=0o600)
        return theirs
    return baseline


class ClaudeCode(Program):
    """Claude Code (npm @anthropic-ai/claude-code), the default program of a phase."""

    name, api, label = "claude", "anthropic", "Claude Code"
    package = "@anthropic-ai/claude-code"
    version_setting, prefix_variable = "CLAUDE_CODE_VERSION", "NGINX_EVAL_CLAUDE_PREFIX"
    default_prefix = "/opt/nginx-eval/claude-code"
    executables = PROGRAM_NAMES
    home_variable, home_subdir = "CLAUDE_CONFIG_DIR", ""
    base_url_variable, default_upstream = "ANTHROPIC_BASE_URL", "https://api.anthropic.com"
    key_variable, credential_variables = "ANTHROPIC_API_KEY", CREDENTIAL_VARIABLES
    forwarded_prefixes = ("ANTHROPIC_", "CLAUDE_")
    own_paths = (".claude",)
    scans_transcript = True
    credentials_hint = "ANTHROPIC_API_KEY (or the CLI's login)"

    def version_matches(self, version: str | None, pinned: str) -> bool:
        return (version or "").startswith(f"{pinned} ")

    def credentials_problem(self, environ: Mapping[str, str]) -> str | None:
        return credentials_problem(environ)

    def user_state(self, environ: Mapping[str, str]) -> list[str]:
        return user_state(environ)

    def key_probe(self, environ: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
        key = environ.get("ANTHROPIC_API_KEY")
        if not key:
            return None  # a token or a login: left to the CLI's first call
        url = self.upstream(environ).rstrip("/") + "/v1/models"
        return url, {"x-api-key": key, "anthropic-version": "2023-06-01"}

    def prepare_home(
        self,
        attempt_home: Path,
        files: Iterable[tuple[str, str]],
        user_env: Mapping[str, str],
        web_tools: bool,
    ) -> bytes | None:
        return prepare_files(attempt_home, files, config_dir(user_env))

    def sync_credentials(
        self, attempt_home: Path, user_env: Mapping[str, str], baseline: bytes | None
    ) -> bytes | None:
        return sync_credentials(attempt_home, config_dir(user_env), baseline)

    def command(self, continues: bool) -> str:
        again = " --continue" if continues else ""
        return (
            "${AGENT:-claude --allowedTools Bash,Read,Edit,Write,Glob,Grep --output-format json "
            f"--model {{model}}{again} -p}} {{prompt}}"
        )

    def web_option(self) -> str | None:
        return NO_WEB_TOOLS

    def continues_session(self, command: str) -> bool:
        return continues_session(command)

    def slash_command(self, prompt: str | None) -> str | None:
        return slash_command(prompt)

    def undefined_command(self, name: str, workspace: str | Path, attempt_home: Path) -> str | None:
        return undefined_command(name, workspace, attempt_home)

    def parse_result(self, stdout_text: str) -> dict[str, Any] | None:
        return parse_result(stdout_text)

    def result_fields(self, result: Result | None) -> ResultFields:
        return result_fields(result)

    def classify(self, result: Result | None, exit_code: int | None) -> tuple[str, str]:
        return classify(result, exit_code)

    def phase_status(
        self,
        timed_out: bool,
        timeout: float,
        exit_code: int | None,
        result: Result | None,
        entries: Sequence[Entry],
        slash: str | None,
        session_problem: str | None,
    ) -> tuple[str, str]:
        return phase_status(timed_out, timeout, exit_code, result, entries, slash, session_problem)

    def phase_usage(
        self, result: Result | None, entries: Sequence[Entry], before: Models
    ) -> tuple[Usage, Models]:
        return phase_usage(result, entries, before)

    def transcript_sizes(self, attempt_home: Path, workspace: Path) -> dict[str, int]:
        return ct.transcript_sizes(attempt_home, workspace)

    def new_transcript_lines(
        self, before: Mapping[str, int], after: Mapping[str, int]
    ) -> list[str]:
        return ct.new_transcript_lines(before, after)

    def session_of(self, entries: Sequence[Entry]) -> str | None:
        return ct.session_of(entries)


CLAUDE = ClaudeCode()
