"""A readable trajectory of an agent run: ``agent/trajectory.md``, rendered from the Claude Code
transcripts the agent stage copied next to it (``agent/<i>-<phase>.transcript.jsonl``).

Per phase: its session, turns and cost, the prompt, then in order every text the agent wrote and
every tool call with its input and the start of its result; a subagent's calls follow under a
heading of their own. Everything long is cut (``…``): the transcript is the full record; this is
what a reader skims to see what the agent did. Pure: entries in, Markdown out.
"""

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..transcript.blocks import content_blocks, result_text

PROMPT_CHARS = 400
TEXT_CHARS = 300
INPUT_CHARS = 160
RESULT_CHARS = 200


def cut(text: object, limit: int) -> str:
    """`text` on one line, at most `limit` characters (… marks a cut)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def code(text: str) -> str:
    """An inline code span for any text (backticks inside would end it)."""
    return "`" + text.replace("`", "'") + "`" if text else "``"


def tool_call(block: Mapping[str, Any]) -> str:
    """One line for a tool call: its name and each input field, cut."""
    fields = block.get("input") or {}
    shown = ", ".join(
        f"{k}: {code(cut(v if isinstance(v, str) else json.dumps(v), INPUT_CHARS))}"
        for k, v in fields.items()
    )
    return f"- **{block.get('name', '?')}** {shown}".rstrip()


def entry_lines(entry: Mapping[str, Any], prompt_seen: bool) -> list[str]:
    """Markdown lines of one transcript entry (a user or an assistant line; others say nothing)."""
    message = entry.get("message") or {}
    lines: list[str] = []
    for block in content_blocks(message.get("content")):
        kind = block.get("type")
        if entry.get("type") == "assistant" and kind == "text" and block.get("text", "").strip():
            lines.append(f"- *says*: {cut(block['text'], TEXT_CHARS)}")
        elif entry.get("type") == "assistant" and kind == "tool_use":
            lines.append(tool_call(block))
        elif entry.get("type") == "user" and kind == "tool_result":
            mark = "error" if block.get("is_error") else "result"
            lines.append(f"  - {mark}: {code(cut(result_text(block, ' '), RESULT_CHARS))}")
        elif entry.get("type") == "user" and kind == "text" and not prompt_seen:
            lines.append(f"**Prompt**: {cut(block.get('text', ''), PROMPT_CHARS)}\n")
    return lines


def conversation(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    lines: list[str] = []
    prompt_seen = False
    for entry in entries:
        new = entry_lines(entry, prompt_seen)
        prompt_seen = prompt_seen or any(line.startswith("**Prompt**") for line in new)
        lines += new
    return lines


def phase_section(index: int, phase: Mapping[str, Any]) -> list[str]:
    """The section of one phase: {"name", "entries", "session_id", "num_turns", "cost_usd",
    "status"}."""
    facts = [
        f"session {code(phase['session_id'])}" if phase.get("session_id") else "no session",
        f"{phase['num_turns']} turns" if phase.get("num_turns") is not None else None,
        f"{phase['cost_usd']:.6f} USD" if phase.get("cost_usd") is not None else None,
        phase.get("status"),
    ]
    said = ", ".join(f for f in facts if f)
    lines = [f"## {index}. {phase['name']}", "", said[:1].upper() + said[1:] + ".", ""]
    main = [e for e in phase["entries"] if not e.get("agentId")]
    lines += conversation(main) or ["(no transcript entries)"]
    subagents: dict[str, list[Mapping[str, Any]]] = {}
    for e in phase["entries"]:
        if e.get("agentId"):
            subagents.setdefault(e["agentId"], []).append(e)
    for agent_id, entries in subagents.items():
        models = sorted(
            {
                model
                for e in entries
                if e.get("type") == "assistant"
                and (model := (e.get("message") or {}).get("model")) is not None
            }
        )
        lines += ["", f"### Subagent {agent_id} ({', '.join(models) or 'no answer'})", ""]
        lines += conversation(entries)
    return lines + [""]


def render(title: str, phases: Iterable[Mapping[str, Any]]) -> str:
    """trajectory.md for the phases of one agent run (see phase_section)."""
    lines = [
        f"# Trajectory: {title}",
        "",
        "What the agent did, from Claude Code's transcripts (the `*.transcript.jsonl` files "
        "beside this one hold everything); long texts are cut (…).",
        "",
    ]
    for i, phase in enumerate(phases, 1):
        lines += phase_section(i, phase)
    return "\n".join(lines).rstrip() + "\n"
