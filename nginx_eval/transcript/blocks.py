"""The content blocks of a Claude Code transcript entry's message, as the CLI writes them: text,
tool_use and tool_result blocks (a message's content may also be a plain string). Read by the
trajectory and the attempts scan (agent/) and by the run's site (report/)."""

from typing import Any


def content_blocks(content: Any) -> list[dict[str, Any]]:
    """The blocks of a message's content: a string is one text block; anything but a dict is
    left out."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def result_text(block: dict[str, Any], joiner: str = "\n") -> str:
    """The text of a tool_result block, its parts joined by `joiner`."""
    content = block.get("content")
    if isinstance(content, list):
        content = joiner.join(b.get("text", "") for b in content if isinstance(b, dict))
    return str(content or "")
