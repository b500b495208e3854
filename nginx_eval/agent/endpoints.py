"""Where each agent program's model calls go: the two attributes of issue 49's program seam that
the metering proxy needs (``api``, ``upstream``, ``endpoint_environment``), for Claude Code.

MERGE (issue 49): a stand-in until the seam lands. ``nginx_eval/agent/programs/`` gives every
program these same names (programs/base.py), and ``programs/registry.py`` the list of them; at
the merge this module goes, and ``registered_programs`` becomes the registry's.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from ..meter.usage import ANTHROPIC

ANTHROPIC_DEFAULT = "https://api.anthropic.com"


@dataclass(frozen=True)
class ClaudeEndpoint:
    """Claude Code's model endpoint: ``ANTHROPIC_BASE_URL``, else Anthropic's API."""

    name: str = "claude"
    api: str = ANTHROPIC

    def upstream(self, environ: Mapping[str, str]) -> str:
        """The operator's real endpoint for this API, from their environment."""
        return environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_DEFAULT

    def endpoint_environment(self, base_url: str) -> dict[str, str]:
        """The variables that point the CLI at `base_url` (its credentials stay as they are)."""
        return {"ANTHROPIC_BASE_URL": base_url}


def registered_programs() -> list[ClaudeEndpoint]:
    return [ClaudeEndpoint()]
