"""workspace/stage.py: the mode's custom slash commands written where Claude Code reads a project's
commands (``.claude/commands/``), kept out of git's view and of the patch; and the shipped
/fix-issue command run by the real CLI (tests/claude_cli.py) against the Anthropic stand-in."""

import dataclasses
import json
import subprocess

import claude_cli
import jinja2
from anthropic_standin import call, say
from test_patch import REPO, harness_workspace, write

from nginx_eval.core.layout import SOURCE_ROOT
from nginx_eval.patch.stage import patch_stats, workspace_diff
from nginx_eval.run.modes import load_modes
from nginx_eval.workspace.stage import install_commands

SHIPPED = load_modes(SOURCE_ROOT / "modes.toml", SOURCE_ROOT / "templates")


def shipped(name):
    """The shipped mode `name`, renamed "agent": harness_workspace makes that mode's workspace."""
    return dataclasses.replace(SHIPPED[name], name="agent")


def nlcmd_prompt():
    """The prompt of the shipped nlcmd mode, rendered as the agent stage renders it."""
    (phase,) = SHIPPED["fix-command"].phases
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(SOURCE_ROOT / "templates"), keep_trailing_newline=True
    )
    return env.get_template(phase.prompt).render(issue_file=".issue.md", problem_statement="")


def test_commands_are_installed_in_the_workspace_and_kept_out_of_the_patch(tmp_path):
    layout, task, ws = harness_workspace(tmp_path)
    written = install_commands(layout, shipped("fix-command"), task)
    assert written == [ws / ".claude" / "commands" / "fix-issue.md"]
    assert written[0].read_text() == (SOURCE_ROOT / "templates/commands/fix-issue.md").read_text()
    assert "/.claude/\n" in (ws / ".git" / "info" / "exclude").read_text()
    # The agent's own `git status` does not show it, as it does not show .issue.md.
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=ws, capture_output=True, text=True, check=True
    ).stdout
    assert status == ""
    write(ws / "src/core/nginx.c", "int main(void)\n{\n    return 1;\n}\n")
    write(ws / ".claude" / "settings.local.json", "{}\n")  # what the CLI may write there
    patch, skipped, left_out = workspace_diff(layout.bare_repo(REPO), ws, task.base_commit)
    assert patch_stats(patch)["files"] == ["src/core/nginx.c"] and skipped == []
    assert left_out == [
        {"path": ".issue.md", "files": 1, "reason": "harness file"},
        {"path": ".claude/", "files": 2, "reason": "harness file"},
    ]


def test_a_mode_without_commands_installs_nothing(tmp_path):
    layout, task, ws = harness_workspace(tmp_path)
    assert install_commands(layout, shipped("raw"), task) == []
    assert not (ws / ".claude").exists()


def test_the_real_cli_runs_the_installed_fix_issue_command_on_the_issue_file(
    tmp_path, claude_program, anthropic_api
):
    """The shipped nlcmd mode end to end in the CLI: its prompt (`/fix-issue .issue.md`) expands
    to the installed command's text with the issue file as $ARGUMENTS, the model's edit is the
    patch, and the command (in the workspace, not the CLI's config directory) is not."""
    layout, task, ws = harness_workspace(tmp_path)
    install_commands(layout, shipped("fix-command"), task)
    source = ws / "src/core/ngx_string.c"
    marker = "reported in the issue file `.issue.md`"
    anthropic_api.script = {
        marker: [
            [
                say("Reading the issue."),
                call("Read", file_path=str(ws / ".issue.md")),
                call("Read", file_path=str(source)),
            ],
            [
                call(
                    "Edit",
                    file_path=str(source),
                    old_string="int ngx_len;",
                    new_string="int ngx_len = 0;",
                )
            ],
            [say("Fixed.")],
        ]
    }
    config = tmp_path / "claude-config"
    config.mkdir()
    run = claude_cli.run(
        claude_program, claude_cli.environment(anthropic_api, config), ws, nlcmd_prompt()
    )
    assert run.exit_code == 0, run.stderr
    assert run.result["result"] == "Fixed." and run.result["is_error"] is False, run.stdout
    assert [q["turn"] for q in anthropic_api.messages_requests(marker)] == [0, 1, 2]
    first = anthropic_api.messages_requests(marker)[0]["body"]["messages"][0]
    sent = json.dumps(first)
    assert "<command-name>/fix-issue</command-name>" in sent
    assert "$ARGUMENTS" not in sent and "description: " not in sent  # front matter stays out
    assert not (config / "commands").exists()
    patch, _, left_out = workspace_diff(layout.bare_repo(REPO), ws, task.base_commit)
    assert patch_stats(patch)["files"] == ["src/core/ngx_string.c"]
    assert b"int ngx_len = 0;" in patch
    assert {"path": ".claude/", "files": 1, "reason": "harness file"} in left_out
