"""What an agent tried, and whether the answer reached it: a scan of its transcripts and logs.

Flags (agent.json ``flags``), one per tool call or log line that tried to look beyond the task::

    {"kind": "fetch",          # a command that fetches over the network (git clone/fetch/pull/
                               # ls-remote/remote add, curl, wget, ...)
             | "web"           # the CLI's WebFetch or WebSearch tool
             | "outside_read"  # a path outside the workspace read by a tool or named in a
                               # command (the harness's own directories always count)
             | "contamination",   # the fix reached the agent (below)
     "phase": str, "detail": str}    # the command, URL or path, cut to DETAIL_CHARS

Contamination is evidence that the fix itself was in front of the agent: the fix commit's id
(HASH_CHARS or more of it) in any tool result, or lines that only the fix adds (FixEvidence) in
the result of a flagged call. Only flagged calls count for lines: an agent that writes the fix
on its own and then looks at its diff shows the same lines, from its own work.
"""

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.records import Flag
from ..transcript.blocks import content_blocks, result_text

DETAIL_CHARS = 200
HASH_CHARS = 12
MIN_LINE_CHARS = 8  # non-blank characters of a fix line worth matching
FETCH = re.compile(
    r"\bgit\b[^\n;&|]*?\s(clone|fetch|pull|ls-remote|remote\s+add|remote\s+set-url)\b"
    r"|\b(curl|wget|lynx|links|w3m|aria2c|httpie|http)\s[^\n;&|]*?(https?://|ftp://|\w+\.\w+/)"
    r"|\b(curl|wget)\s+\S*(github|nginx)\S*"
    r"|\bhg\s+(clone|pull)\b|\bsvn\s+(checkout|co|export)\b|\bpip\d?\s+download\b"
    r"|\bnpm\s+(view|pack)\b|\bapt(-get)?\s+(source|download)\b"
)
WEB_TOOLS = ("WebFetch", "WebSearch")
READ_TOOLS = {
    "Read": "file_path",
    "Glob": "path",
    "Grep": "path",
    "NotebookRead": "notebook_path",
    "LS": "path",
}
SYSTEM_DIRS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/dev",
    "/proc",
    "/sys",
)
# An absolute path as a word of a command: at its start or after a blank, quote, = or a shell
# operator (not "s/a/b/" of sed, not the "/x" of "${VAR:-/x}").
ABSOLUTE_PATH = re.compile(r"(?<![^\s'\"=(<>|;&])(/[A-Za-z0-9._+@%-][^\s'\"`;|&<>(){}$*?]*)")


def cut(text: object, limit: int = DETAIL_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def normalized(line: str) -> str:
    return " ".join(line.split())


@dataclass
class FixEvidence:
    """What would show that the fix reached the agent: its commit id, and the lines it adds that
    are nowhere in the base tree (fix_lines)."""

    commit: str
    lines: frozenset[str] = field(default_factory=frozenset)

    def hash_in(self, text: str) -> str | None:
        for word in re.findall(rf"\b[0-9a-f]{{{HASH_CHARS},40}}\b", text):
            # Digits alone are numbers (sizes, times), not a commit id.
            if self.commit.startswith(word) and not word.isdigit():
                return word
        return None

    def lines_in(self, text: str) -> list[str]:
        found = {normalized(line) for line in text.splitlines()}
        # A line of a diff or listing carries a prefix ("+", "123:"): match within lines too.
        joined = "\n" + "\n".join(found) + "\n"
        return sorted(line for line in self.lines if line in found or line in joined)

    def needed(self) -> int:
        return min(2, len(self.lines))


def added_lines(patch_text: str) -> set[str]:
    """The stripped lines a unified diff adds (not its headers), that it does not also remove."""
    added: set[str] = set()
    removed: set[str] = set()
    for line in patch_text.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added.add(normalized(line[1:]))
        elif line.startswith("-") and not line.startswith("---"):
            removed.add(normalized(line[1:]))
    return {line for line in added - removed if len(line.replace(" ", "")) >= MIN_LINE_CHARS}


def fix_lines(
    patch_text: str, present_in_base: Callable[[list[str]], Iterable[str]]
) -> frozenset[str]:
    """added_lines less those present_in_base(lines) finds in the base tree already."""
    lines = added_lines(patch_text)
    return frozenset(lines - set(present_in_base(sorted(lines)))) if lines else frozenset()


def tool_calls(entries: Iterable[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any], str]]:
    """[(tool name, input dict, result text)] of transcript entries, in order."""
    calls: list[list[Any]] = []
    by_id: dict[Any, list[Any]] = {}
    for entry in entries:
        message = entry.get("message") or {}
        for block in content_blocks(message.get("content")):
            if entry.get("type") == "assistant" and block.get("type") == "tool_use":
                call = [block.get("name", ""), block.get("input") or {}, ""]
                by_id[block.get("id")] = call
                calls.append(call)
            elif entry.get("type") == "user" and block.get("type") == "tool_result":
                called = by_id.get(block.get("tool_use_id"))
                if called is not None:
                    called[2] += result_text(block)
    return [tuple(c) for c in calls]


class Scope:
    """Which paths are the agent's own (workspace, its temporary and log directories, the
    system) and which are the harness's (always flagged)."""

    def __init__(
        self,
        workspace: str | Path,
        own: Iterable[str | Path | None] = (),
        harness: Iterable[str | Path | None] = (),
    ) -> None:
        self.workspace = os.path.realpath(workspace)
        self.own = [os.path.realpath(p) for p in [workspace, *own] if p]
        self.harness = [os.path.realpath(p) for p in harness if p]

    @staticmethod
    def _under(path: str, roots: Iterable[str]) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)

    def outside(self, path: str, cwd: str | None = None) -> bool:
        """Whether reading `path` (absolute, or relative to the workspace) looks beyond it."""
        full = os.path.normpath(os.path.join(cwd or self.workspace, path))
        if self._under(full, self.harness) and not self._under(full, self.own):
            return True
        return not (self._under(full, self.own) or self._under(full, SYSTEM_DIRS))

    def outside_paths(self, command: str) -> list[str]:
        return [p for p in ABSOLUTE_PATH.findall(command) if self.outside(p)]


def call_flags(name: str, tool_input: Mapping[str, Any], scope: Scope) -> list[tuple[str, str]]:
    """[(kind, detail)] of one tool call."""
    if name in WEB_TOOLS:
        return [("web", tool_input.get("url") or tool_input.get("query") or "")]
    if name == "Bash":
        command = str(tool_input.get("command", ""))
        flags = [("fetch", command)] if FETCH.search(command) else []
        return flags + [("outside_read", p) for p in scope.outside_paths(command)]
    key = READ_TOOLS.get(name)
    path = tool_input.get(key) if key else None
    if isinstance(path, str) and path and scope.outside(path):
        return [("outside_read", path)]
    return []


def scan_transcript(
    phase: str, entries: Iterable[Mapping[str, Any]], scope: Scope, evidence: FixEvidence | None
) -> tuple[list[Flag], list[Flag]]:
    """(flags, contamination evidence) of one phase's transcript entries."""
    flags: list[Flag] = []
    contamination: list[Flag] = []
    for name, tool_input, result in tool_calls(entries):
        found = call_flags(name, tool_input, scope)
        flags += [{"kind": k, "phase": phase, "detail": cut(d)} for k, d in found]
        if evidence is None:
            continue
        commit = evidence.hash_in(result)
        lines = evidence.lines_in(result) if found else []
        if commit or (lines and len(lines) >= evidence.needed()):
            what = f"fix commit {commit}" if commit else f"{len(lines)} line(s) only the fix adds"
            contamination.append(
                {
                    "kind": "contamination",
                    "phase": phase,
                    "detail": cut(f"{what} in the result of {name} {json.dumps(tool_input)[:120]}"),
                }
            )
    return flags, contamination


def scan_log(phase: str, text: str) -> list[Flag]:
    """Flags of a command log (an agent that is not Claude Code leaves no transcript): the
    network fetches it printed, line by line."""
    return [
        {"kind": "fetch", "phase": phase, "detail": cut(line)}
        for line in text.splitlines()
        if FETCH.search(line)
    ]


def dedupe(flags: Iterable[Flag]) -> list[Flag]:
    seen = set()
    out: list[Flag] = []
    for f in flags:
        key = (f["kind"], f["phase"], f["detail"])
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
