"""report/process.py's figures from ATIF trajectories made by the harness's own writer
(transcript/atif.py: attempt_trajectory over Conversations of Turns, as agent/stage.py writes
them), each checked against a count by hand; and the marginal cost per extra resolved task
(report/workflow.py). The tool results are the texts each program sends back, as measured with
Claude Code 2.1, Codex CLI 0.169.0 and Gemini CLI 0.61.0 (test_process_clis.py runs the real
CLIs and checks the same figures)."""

import json
from math import comb

import pytest
from harbor.utils.trajectory_validator import TrajectoryValidator

from nginx_eval.agent.stage import phase_time
from nginx_eval.core.layout import Layout
from nginx_eval.report import process
from nginx_eval.report.workflow import marginal_cost, workflow_facts
from nginx_eval.transcript.atif import Conversation, Turn, attempt_trajectory

AGENT = {"name": "nginx-eval mode m", "version": "1.0", "model_name": None}
T0 = 1_800_000_000.0  # the attempt's start, epoch seconds

# What each program's shell tool sends back for a failed TAP test (exit status 1).
FAILED = {
    "claude": "Exit code 1\nt/a.t .. \nnot ok 2 - x\nResult: FAIL",
    "codex": (
        "Chunk ID: 942720\nWall time: 0.3196 seconds\nProcess exited with code 1\n"
        "Original token count: 6\nOutput:\n1..2\nok 1\nnot ok 2 - x\n"
    ),
    "gemini": json.dumps(
        {
            "output": "<untrusted_context>\nOutput: 1..2\nok 1\nnot ok 2 - x\nExit Code: 1\n"
            "Process Group PGID: 19722\n</untrusted_context>"
        }
    ),
}
PASSED = {
    "claude": "t/a.t .. ok\nAll tests successful.\nResult: PASS",
    "codex": "Chunk ID: ed91fe\nWall time: 0.1989 seconds\nProcess exited with code 0\n"
    "Original token count: 1\nOutput:\nok\n",
    "gemini": json.dumps({"output": "<untrusted_context>\nOutput: ok\n</untrusted_context>"}),
}
SHELL = {"claude": ("Bash", "command"), "codex": ("exec_command", "cmd")}
SHELL["gemini"] = ("run_shell_command", "command")
PATCH = "*** Begin Patch\n*** Update File: src/a.c\n@@\n-int a;\n+int a = 1;\n*** End Patch\n"
EDIT = {
    "claude": ("Edit", {"file_path": "/ws/src/a.c", "old_string": "int a;", "new_string": "b"}),
    "codex": ("exec_command", {"cmd": f"apply_patch <<'EOF'\n{PATCH}EOF"}),
    "gemini": ("replace", {"file_path": "/ws/src/a.c", "old_string": "a", "new_string": "b"}),
}


def at(seconds):
    return phase_time(T0, seconds)


def agent_turn(program, seconds, *calls):
    """An answer at `seconds` into the attempt: tool calls (name, arguments, result)."""
    turn = Turn("agent", "", timestamp=at(seconds), model="m")
    for n, (name, arguments, result) in enumerate(calls, 1):
        call_id = f"{program}-{seconds}-{n}"
        turn.tool_calls.append({"id": call_id, "name": name, "arguments": arguments})
        turn.results.append({"call_id": call_id, "content": result, "subagent": None})
    return turn


def shell(program, command, result):
    name, key = SHELL[program]
    return (name, {key: command}, result)


def trajectory(*phases):
    """The root trajectory of an attempt of `phases`: (name, began, Conversation)."""
    root = attempt_trajectory(
        "r/m/t/attempt-1",
        AGENT,
        [
            {"name": name, "status": "completed", "prompt": "Fix it.", "conversation": c}
            | {"started_at": at(began)}
            for name, began, c in phases
        ],
        [],
    )
    validator = TrajectoryValidator()
    assert validator.validate(root), validator.get_errors()
    return root


@pytest.mark.parametrize("program", ["claude", "codex", "gemini"])
def test_a_failed_test_then_an_edit_then_a_build_in_each_programs_words(program):
    edit_name, edit_arguments = EDIT[program]
    conversation = Conversation(
        program,
        None,
        [
            Turn("user", "Fix it."),
            agent_turn(program, 4.0, shell(program, "cat src/a.c", "int a;")),
            agent_turn(program, 9.5, shell(program, "prove -v t/a.t", FAILED[program])),
            agent_turn(program, 21.25, (edit_name, edit_arguments, "ok")),
            agent_turn(program, 30.0, shell(program, "./auto/configure && make -j2", "")),
            agent_turn(program, 40.0, shell(program, "prove t/a.t", PASSED[program])),
            Turn("agent", "Done.", timestamp=at(41.0), model="m"),
        ],
    )
    root = trajectory(("solve", 0.5, conversation))
    assert root["steps"][0]["timestamp"] == "2027-01-15T08:00:00.500Z"
    assert process.attempt_process(root) == {
        "built": True,
        "tested": True,
        "failed_test_before_edit": True,
        "edited": True,
        "seconds_to_first_edit": 20.75,  # from the first phase's start, 0.5 s in
    }


@pytest.mark.parametrize("program", ["claude", "codex", "gemini"])
def test_a_test_that_passed_or_failed_only_after_the_edit_did_not_reproduce_the_bug(program):
    edit_name, edit_arguments = EDIT[program]
    passed_first = Conversation(
        program,
        None,
        [
            agent_turn(program, 1.0, shell(program, "perl t/a.t", PASSED[program])),
            agent_turn(program, 2.0, (edit_name, edit_arguments, "ok")),
            agent_turn(
                program, 3.0, shell(program, "TEST_NGINX_BINARY=x prove t", FAILED[program])
            ),
        ],
    )
    figures = process.attempt_process(trajectory(("solve", 0.0, passed_first)))
    assert figures == {
        "built": False,
        "tested": True,
        "failed_test_before_edit": False,
        "edited": True,
        "seconds_to_first_edit": 2.0,
    }
    # A failing command that is no test (grep finding nothing) reproduces nothing either.
    grep = Conversation(
        program, None, [agent_turn(program, 1.0, shell(program, "grep x a.c", FAILED[program]))]
    )
    assert process.attempt_process(trajectory(("solve", 0.0, grep)))["tested"] is False


def test_a_planners_notes_and_the_harness_scratch_are_no_edit_and_every_phase_counts():
    """The planner writes its plan (.md) and the loop its marker (.tmp/): neither is an edit;
    a subagent's test and the later phase's edit count, in the order of their times."""
    sub = Conversation(
        "claude-code",
        "s",
        [agent_turn("sub", 5.0, shell("claude", "cd /ws && prove t/a.t", FAILED["claude"]))],
    )
    planner = Conversation(
        "claude-code",
        "s",
        [
            agent_turn("plan", 2.0, ("Agent", {"prompt": "check"}, "ok")),
            agent_turn("plan", 8.0, ("Write", {"file_path": "/ws/.tmp/plan-consensus.md"}, "ok")),
            agent_turn("plan", 9.0, ("Write", {"file_path": "/ws/NOTES.md"}, "ok")),
        ],
        {"sub1": sub},
    )
    loop = Conversation(
        "claude-code",
        "t",
        [
            agent_turn("impl", 12.0, shell("claude", "echo 'ISSUE FIXED' > .tmp/finalize.txt", "")),
            agent_turn("impl", 15.0, shell("claude", "echo 'int a;' >> src/core/a.h 2>&1", "")),
        ],
    )
    root = trajectory(("plan", 0.0, planner), ("implement", 10.0, loop))
    assert process.attempt_process(root) == {
        "built": False,
        "tested": True,
        "failed_test_before_edit": True,
        "edited": True,
        "seconds_to_first_edit": 15.0,
    }
    # Without the last answer the attempt edited nothing: a failed test still came first.
    loop.turns.pop()
    figures = process.attempt_process(trajectory(("plan", 0.0, planner), ("implement", 10, loop)))
    assert figures["edited"] is False and figures["seconds_to_first_edit"] is None
    assert figures["failed_test_before_edit"] is True


@pytest.mark.parametrize(
    ("command", "build", "test", "edit"),
    [
        ("make -j2 && prove -v t/", True, True, False),
        ("cmake . ; grep -r make src", False, False, False),
        ("cat t/http.t | head", False, False, False),
        ("timeout 60 ./t/a.t", False, True, False),
        ("python3 -m pytest tests/x.py", False, True, False),
        ("sed -i 's/a/b/' src/a.c && make", True, False, True),
        ("git commit -qm \"$(cat <<'EOF'\nmake it pass\nEOF\n)\"", False, False, False),
        ("ls 2>&1 > /dev/null; grep patch x", False, False, False),
        ("cat > src/a.c <<'EOF'\nint a;\nEOF", False, False, True),
        ("git apply fix.diff", False, False, True),
    ],
)
def test_which_shell_commands_build_test_or_edit(command, build, test, edit):
    assert process.is_build(command) is build
    assert process.is_test(command) is test
    assert process.is_edit("Bash", {"command": command}) is edit


def test_a_trajectory_without_phase_times_counts_from_its_earliest_answer():
    conversation = Conversation(
        "claude-code",
        "s",
        [
            Turn("user", "Fix it.", timestamp=at(3.0)),
            agent_turn("c", 7.5, ("Write", {"file_path": "src/new.c"}, "ok")),
        ],
    )
    root = attempt_trajectory(
        "r", AGENT, [{"name": "solve", "status": "completed", "conversation": conversation}], []
    )
    assert "timestamp" not in root["steps"][0]
    assert process.attempt_process(root)["seconds_to_first_edit"] == 4.5


def figures(built, resolved, seconds=None):
    return (
        {
            "built": built,
            "tested": True,
            "failed_test_before_edit": False,
            "edited": seconds is not None,
            "seconds_to_first_edit": seconds,
        },
        resolved,
    )


def test_each_behaviours_association_with_resolving_by_hand():
    """Six scored tasks: the three that built resolved, the three that did not build did not;
    a seventh, an infra error, is not scored. Fisher's exact p of [[3, 0], [0, 3]]: the two
    tables as extreme, each of probability 1 / C(6, 3). The edits came at 10, 20, 30 s in the
    resolved attempts and 40, 50, 60 s in the others: U = 0, exact p = 2 / C(6, 3)."""
    data = [
        figures(True, True, 10.0),
        figures(True, True, 20.0),
        figures(True, True, 30.0),
        figures(False, False, 40.0),
        figures(False, False, 50.0),
        figures(False, False, 60.0),
        figures(True, False, 1.0),
    ]
    rows = {
        f"t{i}": {"outcome": "resolved" if r else "unresolved"} for i, (_, r) in enumerate(data)
    }
    rows["t6"] = {"outcome": "infra_error"}
    found = {f"t{i}": f for i, (f, _) in enumerate(data)}
    facts = process.process_facts({"m": rows, "gold": {}}, ["gold", "m"], {"m": found})
    (mode,) = facts["modes"]
    assert (mode["name"], mode["attempts"], mode["resolved"]) == ("m", 6, 3)
    built = next(b for b in mode["behaviours"] if b["name"] == "built")
    assert built == {
        "name": "built",
        "attempts": 3,
        "share": 0.5,
        "resolved_with": 1.0,
        "resolved_without": 0.0,
        "p": pytest.approx(2 / comb(6, 3), abs=1e-6),
    }
    # Every attempt tested: no "without" group, no test.
    tested = next(b for b in mode["behaviours"] if b["name"] == "tested")
    assert (tested["share"], tested["resolved_without"], tested["p"]) == (1.0, None, None)
    assert mode["first_edit"] == {
        "attempts": 6,
        "median": 35.0,
        "median_resolved": 20.0,
        "median_unresolved": 50.0,
        "p": pytest.approx(2 / comb(6, 3), abs=1e-6),
    }


def test_a_mode_without_trajectories_has_no_process_figures():
    rows = {"m": {"t": {"outcome": "resolved"}}}
    assert process.process_facts(rows, ["m"], {}) is None


def test_a_file_that_is_not_a_trajectory_is_left_out(tmp_path):
    layout = Layout(tmp_path, tmp_path / "cache", tmp_path / "results", "r")
    good = trajectory(("solve", 0.0, Conversation("codex", None, [])))
    for iid, text in (("a", json.dumps(good)), ("b", "[1, 2]")):
        layout.agent_atif("m", iid).parent.mkdir(parents=True)
        layout.agent_atif("m", iid).write_text(text)
    found = process.read_processes(layout, {"m": {"a": {}, "b": {}, "c": {}}})
    assert list(found["m"]) == ["a"] and found["m"]["a"]["edited"] is False


def test_a_rendering_reads_only_the_trajectories_that_changed(tmp_path, monkeypatch):
    """What the report read of each trajectory is kept by the file's size and time: a second
    rendering reads none, a rewritten file is read again, and figures under other rules
    (another process.py) are read anew."""
    layout = Layout(tmp_path, tmp_path / "cache", tmp_path / "results", "r")
    quiet = trajectory(("solve", 0.0, Conversation("codex", None, [])))
    edit = trajectory(
        (
            "solve",
            0.0,
            Conversation(
                "codex",
                None,
                [agent_turn("codex", 2.0, shell("codex", "sed -i s/a/b/ src/x.c", "Exit code: 0"))],
            ),
        )
    )
    for iid in ("a", "b"):
        layout.agent_atif("m", iid).parent.mkdir(parents=True)
        layout.agent_atif("m", iid).write_text(json.dumps(quiet))
    rows = {"m": {"a": {}, "b": {}}}
    read = []
    real = process._read_attempt
    monkeypatch.setattr(
        process, "_read_attempt", lambda path: read.append(path.parent.parent.name) or real(path)
    )
    first = process.read_processes(layout, rows)
    assert sorted(read) == ["a", "b"] and first["m"]["b"]["edited"] is False
    read.clear()
    assert process.read_processes(layout, rows) == first and read == []
    layout.agent_atif("m", "b").write_text(json.dumps(edit, indent=1))
    again = process.read_processes(layout, rows)
    assert (
        read == ["b"] and again["m"]["b"]["edited"] is True and again["m"]["a"] == first["m"]["a"]
    )
    read.clear()
    monkeypatch.setattr(process, "RULES", "other rules")
    assert process.read_processes(layout, rows) == again and sorted(read) == ["a", "b"]


def row(cost, resolved):
    return {"cost_usd": cost, "outcome": "resolved" if resolved else "unresolved"}


def test_the_marginal_cost_per_extra_resolved_task_by_hand():
    """impl resolves t1 and t2, full t1 to t4 at a dollar more a task: 4 dollars more for 2
    extra tasks. t5 is full's infra error and t6 has no cost in impl: neither is paired."""
    impl = {f"t{i}": row(1.0, i <= 2) for i in range(1, 7)}
    full = {f"t{i}": row(2.0, i <= 4) for i in range(1, 7)}
    full["t5"] = {"cost_usd": 2.0, "outcome": "infra_error"}
    impl["t6"] = {"cost_usd": None, "outcome": "unresolved"}
    facts = marginal_cost("impl", "full", impl, full)
    assert {k: facts[k] for k in ("tasks", "cost_a", "cost_b", "resolved_a", "resolved_b")} == {
        "tasks": 4,
        "cost_a": 4.0,
        "cost_b": 8.0,
        "resolved_a": 2,
        "resolved_b": 4,
    }
    assert facts["per_resolved_a"]["value"] == 2.0 and facts["per_resolved_b"]["value"] == 2.0
    assert facts["extra_resolved"] == 2 and facts["marginal"] == 2.0
    low, high = facts["marginal_interval"]
    # Resamples of only t1 and t2 add no task: the interval is unbounded above.
    assert low <= 2.0 and high is None
    # The other way round: full resolves no more than impl.
    back = marginal_cost("full", "impl", full, impl)
    assert back["extra_resolved"] == -2 and back["marginal"] is None
    assert back["marginal_interval"] is None


def test_the_steps_up_the_ladder_are_the_users_pairs():
    rows = {
        m: {f"t{i}": row(c, i < n) for i in range(4)}
        for m, c, n in (("raw", 0.5, 1), ("impl", 1.0, 2), ("full", 2.0, 2), ("nlcmd", 3.0, 3))
    }
    facts = workflow_facts(rows, ["raw", "impl", "full", "nlcmd"])
    steps = {(m["a"], m["b"]): m for m in facts["marginal"]}
    assert list(steps) == [("raw", "impl"), ("impl", "full"), ("full", "nlcmd")]
    assert steps[("raw", "impl")]["marginal"] == 2.0  # 2 dollars more, 1 task more
    assert steps[("impl", "full")]["marginal"] is None  # 4 dollars more, no task more
    assert steps[("full", "nlcmd")]["marginal"] == 4.0
