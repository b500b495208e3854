"""Mode parsing (modes.py): agent modes beside the built-in gold and none, placeholders filled and
quoted, mistakes named."""

import pytest

from nginx_eval.errors import UserError
from nginx_eval.modes import fill_command, get_mode, parse_modes


def test_modes_parse_and_errors(tmp_path):
    modes = parse_modes({"modes": {"a": {"model": "m", "phases": [
        {"name": "p", "command": "agent {prompt} --model {model} ${X:-y}", "timeout": 5}]}}}, "m.toml")
    assert set(modes) == {"a", "gold", "none"}
    assert modes["a"].phases[0].timeout == 5.0
    assert fill_command(modes["a"].phases[0].command, {"prompt": "it's", "model": "m"}) == \
        "agent 'it'\"'\"'s' --model m ${X:-y}"
    with pytest.raises(UserError, match="unknown placeholder {promt}"):
        parse_modes({"modes": {"a": {"phases": [{"command": "x {promt}"}]}}}, "m.toml")
    with pytest.raises(UserError, match="built in"):
        parse_modes({"modes": {"gold": {"phases": [{"command": "x"}]}}}, "m.toml")
    with pytest.raises(UserError, match="known modes: a, gold, none"):
        get_mode(modes, "raw")
