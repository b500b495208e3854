"""The agent's home: the Claude Code configuration directory (``CLAUDE_CONFIG_DIR``) of one agent
run, owned by the harness (Layout.agent_home), so that the benchmark's agent is the same for
every operator. It holds the user's credentials and the mode's ``agent_home`` files
(modes.py), nothing else of the user's: no CLAUDE.md, settings, hooks, permissions, plugins,
agents, skills, MCP servers or output styles. It is made afresh for each attempt, kept across
the attempt's phases (``--continue`` finds the session there) and removed when the attempt ends
(its transcripts are copied to the logs first).

With CLAUDE_CONFIG_DIR set, the pinned CLI reads none of the user's configuration in
``~/.claude`` or ``~/.claude.json`` (docs/agents.md#the-agents-home; tests/test_agent_home.py),
so the directory alone closes it: ``--setting-sources`` and ``--strict-mcp-config`` are not
needed. Of HOME it still looks at ``~/.config/anthropic/`` (a credentials profile store) and,
for its Bash tool, ``~/.bashrc`` and ``~/.profile`` (hidden when isolated, like the rest of HOME).

Credentials: the environment's (ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN,
CLAUDE_CODE_OAUTH_TOKEN) pass through; a subscription login, ``.credentials.json`` of the user's
configuration directory (``$CLAUDE_CONFIG_DIR``, else ``~/.claude``), is copied in, and an
``apiKeyHelper`` of the user's settings.json is carried over (claude_code.credentials_problem
counts both). The CLI refreshes a login by rewriting that file: sync_credentials writes a
refreshed copy back to the user's, unless theirs changed meanwhile (then theirs wins).
"""

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..core import jsonio
from ..core.trees import remove_tree
from ..transcript.files import config_dir

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


def prepare(home: Path, files: Iterable[tuple[str, str]], user_config: Path) -> bytes | None:
    """Make `home` afresh: the mode's files ((relative path, text), modes.Mode.home_files), the
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
