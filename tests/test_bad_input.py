"""Bad input: each mistake gives one ``nginx-eval: error:`` line naming where it is, a non-zero
exit, no agent run and nothing under results/. Field-by-field validation of task files is
unit-tested in test_benchmark.py; these run the real doit on the fixture project."""

import json

import pytest


def assert_refused(project, proc, executed, expected, allowed_tasks=()):
    """One line on stderr, which contains `expected`; only `allowed_tasks` ran (a name ending in
    ":" allows every task of that stage); no agent started; no file under results/."""
    assert proc.returncode != 0
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nginx-eval: error: "), proc.stderr
    assert expected in lines[0], lines[0]
    allowed = lambda t: (
        t in allowed_tasks or any(a.endswith(":") and t.startswith(a) for a in allowed_tasks)
    )
    assert [t for t in executed if not allowed(t)] == []
    assert project.agent_calls() == []
    assert not project.results.exists() or [p for p in project.results.rglob("*")] == []


def edit_task(index, **changes):
    def edit(project, bench):
        bench["tasks"][index].update(changes)
        return bench

    return edit


def drop_field(index, field):
    def edit(project, bench):
        del bench["tasks"][index][field]
        return bench

    return edit


def duplicate_first(project, bench):
    bench["tasks"][1] = dict(bench["tasks"][1], instance_id="tiny-add")
    return bench


LOAD_ERRORS = {
    "missing field": (
        drop_field(1, "problem_statement"),
        "task tiny-mul, field problem_statement: is missing",
    ),
    "mistyped list": (
        edit_task(1, test_files="calc_mul.t"),
        "task tiny-mul, field test_files: must be a list, got str",
    ),
    "mistyped number": (
        edit_task(0, test_timeout="20"),
        "task tiny-add, field test_timeout: has the wrong type (str)",
    ),
    "duplicate id": (duplicate_first, "task tiny-add, field instance_id: duplicate instance_id"),
    "short commit": (
        lambda p, b: edit_task(1, base_commit=b["tasks"][1]["base_commit"][:12])(p, b),
        "task tiny-mul, field base_commit: must be a full 40-hex commit hash",
    ),
}


@pytest.mark.parametrize("case", list(LOAD_ERRORS))
def test_bad_task_file_fails_before_any_task(project, case):
    edit, expected = LOAD_ERRORS[case]
    project.write_benchmark(edit(project, project.benchmark()))
    proc, executed = project.doit("run", "tiny", check=False)
    assert_refused(project, proc, executed, f"tasks/tiny.json, {expected}")


def test_malformed_json_names_line_and_column(project):
    text = json.dumps(project.benchmark(), indent=2)
    (project.root / "tasks" / "tiny.json").write_text(text.replace('"tiny-mul",', '"tiny-mul"', 1))
    proc, executed = project.doit("run", "tiny", check=False)
    assert_refused(project, proc, executed, "tiny.json: malformed JSON at line")


@pytest.mark.parametrize("field", ["base_commit", "test_commit"])
def test_unknown_commit_is_named_before_any_agent_starts(project, field):
    bench = project.benchmark()
    unknown = "0123456789abcdef0123456789abcdef01234567"
    bench["tasks"][1][field] = unknown
    project.write_benchmark(bench)
    proc, executed = project.doit("run", "tiny", check=False)
    repo = "acme/tiny" if field == "base_commit" else "acme/tiny-tests"
    # With the nginx clone refused, the test trees (taken from the good clone of the tests
    # repository into the cache) may already have been extracted: they start first.
    assert_refused(
        project,
        proc,
        executed,
        f"task tiny-mul, field {field}: commit {unknown} is missing from the clone of "
        f"{repo}, also after fetching it",
        allowed_tasks=("repos:acme+tiny", "repos:acme+tiny-tests")
        + (("tests:",) if field == "base_commit" else ()),
    )


def test_missing_test_file_is_named_before_any_agent_starts(project):
    bench = project.benchmark()
    bench["tasks"][1]["test_files"].append("not_there.t")
    project.write_benchmark(bench)
    proc, executed = project.doit("run", "tiny", check=False)
    assert_refused(
        project,
        proc,
        executed,
        "task tiny-mul, field test_files: not_there.t does not exist in "
        f"acme/tiny-tests at test_commit {project.commits['t_head']}",
        allowed_tasks=("repos:acme+tiny", "repos:acme+tiny-tests"),
    )
    # Fixed, the same cache goes on: the check is part of the clone's freshness.
    bench["tasks"][1]["test_files"].pop()
    project.write_benchmark(bench)
    project.doit("run", "tiny")


def test_agent_program_not_on_path_is_refused_before_any_task(project):
    modes = (project.root / "modes.toml").read_text()
    (project.root / "modes.toml").write_text(
        modes.replace('command = "', 'command = "${FAKE_AGENT_BIN:-no-such-agent} ')
    )
    proc, executed = project.doit("run", "tiny", check=False)
    assert_refused(
        project,
        proc,
        executed,
        "modes.toml, mode fake phase solve, field command: program 'no-such-agent' is not on PATH",
    )
    # The environment decides, as in the phase's own shell...
    proc, executed = project.doit(
        "run", "tiny:fake", check=False, env={"FAKE_AGENT_BIN": "/nonexistent/agent"}
    )
    assert_refused(project, proc, executed, "program '/nonexistent/agent' is not on PATH")
    # ...and only modes that run are checked: gold and none need no agent.
    project.doit("run", "tiny:gold")
    assert project.read("gold", "tiny-add", "grade.json")["status"] == "resolved"


def test_malformed_predictions_file_is_refused_before_any_task(project, tmp_path):
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"instance_id": "tiny-add", "model_patch": ""}\n{"instance_id": 7}\n')
    proc, executed = project.doit("run", "tiny:file", f"predictions={preds}", check=False)
    assert_refused(
        project, proc, executed, f"{preds}, line 2: must be an object with a string instance_id"
    )
    # A line that is no JSON is named by the file's own line number, not json's "line 1".
    preds.write_text(
        '{"instance_id": "tiny-add", "model_patch": ""}\n\n'
        '{"instance_id": "tiny-mul", "model_patch": "x"\n'
    )
    proc, executed = project.doit("run", "tiny:file", f"predictions={preds}", check=False)
    assert_refused(
        project,
        proc,
        executed,
        f"{preds}, line 3: malformed JSON: Expecting ',' delimiter (column 47)",
    )


def test_predictions_file_with_no_task_of_the_benchmark_is_refused(project, tmp_path):
    """Scoring nothing and exiting 0 looked like a result ("file 0 of 196"): one line naming the
    file, before any task (issue 37)."""
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"instance_id": "other-1", "model_patch": ""}\n')
    proc, executed = project.doit("run", "tiny", f"predictions={preds}", check=False)
    assert_refused(
        project,
        proc,
        executed,
        f"{preds}: no row for a task of benchmark tiny (its 1 row: other-1): nothing to score",
    )
    preds.write_text("")
    proc, executed = project.doit("run", "tiny", f"predictions={preds}", check=False)
    assert_refused(
        project,
        proc,
        executed,
        f"{preds}: no row for a task of benchmark tiny (no rows): nothing to score",
    )


@pytest.mark.parametrize(
    "command,environ,program",
    [
        ("${AGENT:-claude --model {model} -p} {prompt}", {}, "claude"),
        (
            "${AGENT:-claude --model {model} -p} {prompt}",
            {"AGENT": "/opt/bin/codex exec"},
            "/opt/bin/codex",
        ),
        ("${AGENT:-claude -p} {prompt}", {"AGENT": ""}, "claude"),  # :- also takes empty
        ("${AGENT-claude -p} {prompt}", {"AGENT": "aider"}, "aider"),
        ("LANG=C exec my-agent {prompt}", {}, "my-agent"),
        ("{workspace}/run.sh", {}, None),  # only known at run time
        ("$(which agent) {prompt}", {}, None),
    ],
)
def test_command_program(command, environ, program):
    from nginx_eval.run.commandline import command_program

    assert command_program(command, environ) == program


@pytest.mark.parametrize(
    "argv,command",
    [
        ([], "run"),
        (["tiny:raw", "run=x"], "run"),
        (["-f", "dodo.py", "list", "--all"], "list"),
        (["run=x", "forget", "agent:a"], "forget"),
        (["--dir", "/x", "info", "t"], "info"),
        (["-n", "2", "tiny"], "run"),
    ],
)
def test_doit_command_decides_which_commands_take_the_run_locks(argv, command):
    from nginx_eval.doitext.invocation import doit_command

    assert doit_command(argv) == command
