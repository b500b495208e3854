"""Claude Code's session transcripts: where the CLI keeps them, the lines a phase added (its
subagents' too), and what they say about sessions and slash commands.

Where the pinned CLI keeps them (tests/test_claude_cli.py): ``$CLAUDE_CONFIG_DIR/projects/<cwd,
every character that is not a letter or digit turned into ->/<session>.jsonl`` (a name past 200
characters is cut and given a hash suffix), a subagent's in
``<session>/subagents/agent-*.jsonl`` with ``agentId`` on every line. ``--continue`` appends to
the session's file, so a phase's lines are what the files grew by while it ran.
"""

import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

PROJECT_NAME_LIMIT = 200


def config_dir(environ: Mapping[str, str]) -> Path:
    """Where the CLI keeps its state: $CLAUDE_CONFIG_DIR, else ~/.claude."""
    if environ.get("CLAUDE_CONFIG_DIR"):
        return Path(environ["CLAUDE_CONFIG_DIR"])
    return Path(environ.get("HOME") or os.path.expanduser("~")) / ".claude"


def project_glob(cwd: str | Path) -> str:
    """The glob of the directory under projects/ that holds the sessions of `cwd`."""
    name = re.sub(r"[^a-zA-Z0-9]", "-", os.path.realpath(str(cwd)))
    return name if len(name) <= PROJECT_NAME_LIMIT else name[:PROJECT_NAME_LIMIT] + "-*"


def transcript_sizes(config: str | Path, cwd: str | Path) -> dict[str, int]:
    """{path: size} of every session and subagent transcript of `cwd` under `config`."""
    projects = Path(config) / "projects"
    pattern = project_glob(cwd)
    paths = list(projects.glob(f"{pattern}/*.jsonl"))
    paths += projects.glob(f"{pattern}/*/subagents/*.jsonl")
    sizes = {}
    for p in paths:
        try:
            sizes[str(p)] = p.stat().st_size
        except OSError:
            continue
    return sizes


def new_transcript_lines(before: Mapping[str, int], after: Mapping[str, int]) -> list[str]:
    """The lines written between two transcript_sizes: sessions first, then subagents, in path
    order within each."""
    grown = sorted(
        (("/subagents/" in p, p), before.get(p, 0))
        for p, size in after.items()
        if size > before.get(p, 0)
    )
    lines: list[str] = []
    for (_, path), offset in grown:
        with open(path, "rb") as f:
            f.seek(offset)
            lines += f.read().decode("utf-8", errors="replace").splitlines()
    return [line for line in lines if line.strip()]


def entries_of(lines: Iterable[str]) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def session_of(entries: Iterable[Mapping[str, Any]]) -> str | None:
    """The session id of the main conversation (not a subagent's) in transcript entries."""
    return next(
        (e["sessionId"] for e in entries if e.get("sessionId") and not e.get("agentId")), None
    )


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if isinstance(b, dict)]


def command_ran(entries: Iterable[Mapping[str, Any]], name: str) -> bool:
    """Whether the transcript shows the CLI expanding /name (its user message names it)."""
    needle = f"<command-name>/{name}</command-name>"
    return any(
        needle in text
        for e in entries
        if e.get("type") == "user"
        for text in _texts((e.get("message") or {}).get("content"))
    )
