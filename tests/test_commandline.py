"""commandline.with_program_option: an option right after the program word of a phase command,
never into AGENT's own command line."""

import pytest

from nginx_eval.run.commandline import command_program, render_command, with_program_option

OPTION = "--disallowedTools=WebSearch,WebFetch"
SHIPPED = (
    "${AGENT:-claude --allowedTools Bash,Read --output-format json --model {model} -p} {prompt}"
)


@pytest.mark.parametrize(
    "command,expected",
    [
        (
            SHIPPED,
            "${AGENT:-claude --disallowedTools=WebSearch,WebFetch --allowedTools Bash,Read "
            "--output-format json --model {model} -p} {prompt}",
        ),
        (
            "${AGENT:-claude} {prompt}",
            "${AGENT:-claude --disallowedTools=WebSearch,WebFetch} {prompt}",
        ),
        ("claude -p {prompt}", "claude --disallowedTools=WebSearch,WebFetch -p {prompt}"),
        ("  exec claude -p x", "  exec claude --disallowedTools=WebSearch,WebFetch -p x"),
        (
            'CLAUDE_CONFIG_DIR="$HOME/a b" claude --continue -p {prompt}',
            'CLAUDE_CONFIG_DIR="$HOME/a b" claude --disallowedTools=WebSearch,WebFetch --continue '
            "-p {prompt}",
        ),
        (
            "/opt/x/claude -p x | tee out",
            "/opt/x/claude --disallowedTools=WebSearch,WebFetch -p x | tee out",
        ),
        (
            "'/opt/my tools/claude' -p x",
            "'/opt/my tools/claude' --disallowedTools=WebSearch,WebFetch -p x",
        ),
        # The program is not the command's own word: left alone.
        ('"${AGENT:-claude}" {prompt}', None),
        ("$AGENT {prompt}", None),
        ("{prompt_file}", None),
        ("$(which claude) -p x", None),
        ("claude 'unbalanced", "claude --disallowedTools=WebSearch,WebFetch 'unbalanced"),
    ],
)
def test_the_option_goes_right_after_the_program(command, expected):
    assert with_program_option(command, {}, OPTION) == expected
    if expected:
        # The program is the same one, and bash gets the option as one word after it.
        assert command_program(expected, {}) == command_program(command, {})


def test_agents_own_command_line_is_left_as_it_is():
    environ = {"AGENT": "claude --model x"}
    assert with_program_option(SHIPPED, environ, OPTION) is None
    # Unset or empty AGENT: the default is the command (":-").
    closed = with_program_option(SHIPPED, {"AGENT": ""}, OPTION)
    assert render_command(closed, {"AGENT": ""}, {"prompt": "fix it", "model": "m"}) == (
        "claude --disallowedTools=WebSearch,WebFetch --allowedTools Bash,Read "
        "--output-format json --model m -p 'fix it'"
    )
