"""The stand-ins' shell commands of tests/workflow_scripts.py, run by bash as Claude Code's Bash
tool runs them: the heredoc that applies a task's fix, and the commit message's printf."""

import subprocess

from workflow_scripts import apply_patch_command, printf_quoted

# A fix whose text a shell would otherwise expand or cut: quotes, $, backslashes, %, a line
# that looks like an end of a heredoc.
BEFORE = 'printf("%d\\n", $x);\nEOF\n'
AFTER = "printf(\"%s 'a' \\\\n\", $y);\nEOF\n"


def bash(command, cwd):
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True)


def test_the_fix_is_applied_byte_for_byte_and_the_message_written_as_it_is(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a.c").write_text(BEFORE)
    subprocess.run(["git", "add", "a.c"], cwd=tmp_path, check=True)
    (tmp_path / "a.c").write_text(AFTER)
    diff = subprocess.run(
        ["git", "diff"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout
    (tmp_path / "a.c").write_text(BEFORE)
    message = "Fix 100% of it: don't\n\n\\n stays\n"
    done = bash(
        f"{apply_patch_command(diff)} && printf {printf_quoted(message)} > msg.txt", tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "a.c").read_text() == AFTER
    assert (tmp_path / "msg.txt").read_text() == message
