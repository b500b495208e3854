"""trajectory.py renders what the real Claude Code CLI wrote (tests/claude_captures.py)."""

import pytest
from anthropic_standin import StandIn, say
from claude_captures import Recorder, session_with_subagent

from nginx_eval.agent import trajectory

SCRIPT = {
    **session_with_subagent("TRAJ-1", "TRAJSUB-2", last="All done `here`."),
    "TRAJ-NEXT-3": [[say("Continuing.")]],
}


@pytest.fixture(scope="module")
def captures(claude_program, tmp_path_factory):
    with StandIn(SCRIPT) as api:
        rec = Recorder(claude_program, api, tmp_path_factory.mktemp("trajectory"))
        ws = rec.workspace()
        return rec.run("Please TRAJ-1", cwd=ws), rec.run("Then TRAJ-NEXT-3", "--continue", cwd=ws)


def phase(name, capture):
    return {
        "name": name,
        "entries": capture.entries,
        "session_id": capture.result["session_id"],
        "num_turns": capture.result["num_turns"],
        "cost_usd": capture.result["total_cost_usd"],
        "status": "completed",
    }


def test_each_phase_shows_the_prompt_the_calls_their_results_and_the_subagent(captures):
    first, second = captures
    md = trajectory.render("raw/tiny-add", [phase("plan", first), phase("implement", second)])
    lines = md.splitlines()
    assert lines[0] == "# Trajectory: raw/tiny-add"
    assert f"Session `{first.result['session_id']}`, 4 turns, " in md
    assert "**Prompt**: Please TRAJ-1" in lines and "**Prompt**: Then TRAJ-NEXT-3" in lines
    assert "- *says*: Let me look." in lines and "- *says*: All done `here`." in lines
    call_at = lines.index("- **Bash** command: `seq 1 500`")
    result = lines[call_at + 1]
    assert result.startswith("  - result: `1 2 3 4 5") and result.endswith("…`")
    assert len(result) < trajectory.RESULT_CHARS + 20  # cut
    assert "- **Bash** command: `echo no; exit 3`" in lines
    assert any(line.startswith("  - error: `Exit code 3") for line in lines), md
    sub_at = next(i for i, line in enumerate(lines) if line.startswith("### Subagent "))
    assert "haiku" in lines[sub_at] and sub_at < lines.index("## 2. implement")
    assert "- **Bash** command: `echo from the subagent`" in lines[sub_at:]
    # The continued phase shows only what it added.
    second_part = md.split("## 2. implement", 1)[1]
    assert "seq 1 500" not in second_part and "- *says*: Continuing." in second_part


def test_cut_and_code_keep_a_line_a_line():
    assert trajectory.cut("a\n  b\tc", 10) == "a b c"
    assert trajectory.cut("x" * 20, 10) == "x" * 9 + "…"
    assert trajectory.code("a `b`") == "`a 'b'`" and trajectory.code("") == "``"
