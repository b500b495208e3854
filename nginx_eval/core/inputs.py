"""The inputs a digest is computed from, and the one rule that keeps old digests.

Every stage output records the digest of what it was made from (core/stamps.py: "inputs"; the
agent's agent_inputs; a build's key), and a record whose digest changes is made again: an agent
run is paid for again. A field added to a stage's inputs would change every digest made before it.
So each digest's fields come in two kinds: those it always had, and optional ones, each with its
default: the value that means what the stage did before the field existed. ``canonical`` drops an
optional field that holds its default, so a new field added with such a default changes no
existing record's digest; a caller names its optional fields and their defaults beside the
fields (``*_DEFAULTS``), and never leaves a field out by a branch of its own.

INPUTS_VERSION is the version of this schema, and an input of every digest by the same rule: at
its default, 1, it is left out, so every digest made so far is version 1's. Raising it makes
every record stale at once (everything is made again, agents paid again): only for a change the
rule cannot express.
"""

from collections.abc import Mapping
from typing import Any

from . import jsonio

INPUTS_VERSION = 1
VERSION_FIELD = "inputs_version"
VERSION_DEFAULT = 1  # the version every digest made before the field existed is of


def is_default(value: Any, default: Any) -> bool:
    """Whether `value` is `default`: equal and of the same type (so 0 is not False, nor 1.0 1)."""
    return type(value) is type(default) and value == default


def canonical(fields: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """`fields` without the optional ones (`defaults`: {field: its default}) at their default."""
    return {k: v for k, v in fields.items() if k not in defaults or not is_default(v, defaults[k])}


def digest(fields: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> str:
    """The digest of a record's inputs: of canonical(fields, defaults), with the schema's
    version (itself dropped at its default)."""
    versioned = {**fields, VERSION_FIELD: INPUTS_VERSION}
    return jsonio.digest(canonical(versioned, {**(defaults or {}), VERSION_FIELD: VERSION_DEFAULT}))
