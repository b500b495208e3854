"""Records that tell the truth: what a predictions file scores, what a crashed agent is called,
which command and model ran, and which keys modes.toml knows."""

import json
import re
import shlex
import sys

import pytest
from conftest import SOURCE_ROOT, section, table_row
from test_authored import authored_task

from nginx_eval.core import outcomes
from nginx_eval.core.errors import UserError
from nginx_eval.report import records as report_records
from nginx_eval.results import stage as results
from nginx_eval.run.modes import load_modes, parse_modes


def rows(project, mode, run="default"):
    path = project.results / run / mode / "results.jsonl"
    return {r["instance_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def report_json(project, run="default"):
    return json.loads((project.results / run / "report.json").read_text())


def report_md(project, run="default"):
    return (project.results / run / "report.md").read_text()


def lines(text, prefix):
    return [line for line in text.splitlines() if line.startswith(prefix)]


# -- 1. predictions= scores the file, and only its rows --------------------------------------------


@pytest.mark.reports
def test_predictions_score_the_file_alone_and_only_the_tasks_it_has_rows_for(project, tmp_path):
    authored_task(project)  # tiny-own: a test tree of its own, which no row asks for
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        "".join(
            json.dumps(
                {"instance_id": iid, "model_patch": patch, "model_name_or_path": "elsewhere"}
            )
            + "\n"
            for iid, patch in (("tiny-add", project.gold_patch("tiny-add")), ("x", ""), ("y", ""))
        )
    )
    proc, executed = project.doit("run", "tiny", f"predictions={preds}")
    # One warning line for the ids that are not tasks of the benchmark; not an error.
    assert lines(proc.stderr, "nginx-eval: warning:") == [
        "nginx-eval: warning: preds.jsonl: 2 instance ids not in benchmark tiny: x, y"
    ]
    # Mode file and the report, nothing else: no agent, no gold, no none.
    assert project.agent_calls() == []
    modes_run = {
        t.split(":", 1)[1].split("/")[1]
        for t in executed
        if t.split(":", 1)[0]
        in ("workspace", "agent", "patch", "build", "prove", "grade", "results")
    }
    assert modes_run == {"file"}
    assert "tiny:report" in executed
    # Only tiny-add was scored, and nothing was prepared for tiny-mul, which has no row: not
    # its base build (its own commit and flags), not a task of its units (issue 37).
    assert list(rows(project, "file")) == ["tiny-add"]
    assert rows(project, "file")["tiny-add"]["outcome"] == "resolved"
    assert not project.task_dir("file", "tiny-mul").exists()
    assert not [
        t
        for t in executed
        if "tiny-mul" in t
        or "tiny-own" in t
        or project.commits["c_mul_bug"][:12] in t
        or "+" in t.partition(":")[2]
        and t.startswith("tests:")
    ], executed
    # The run's tasks, and the report's denominator, are the tasks the file has rows for.
    rep = report_json(project)
    assert set(rep["modes"]) == {"file"}
    assert rep["modes"]["file"]["submitted_ids"] == ["tiny-add"]
    assert rep["modes"]["file"]["incomplete_ids"] == []
    assert rep["modes"]["file"]["total_instances"] == 1
    assert rep["modes"]["file"]["empty_patch_ids"] == []
    assert re.search(r"^  file +1 of 1 +100\.0% ", proc.stdout, re.M), proc.stdout
    run = json.loads((project.results / "default" / "run.json").read_text())
    assert run["modes"] == ["file"] and run["task_ids"] == ["tiny-add"]
    assert run["selections"] == [{"instances": None, "limit": None, "predictions": "preds.jsonl"}]

    # Intersected with instances=: a file with no row for the selected tasks scores nothing,
    # and says so (tests/test_bad_input.py has the file with no task of the benchmark).
    proc, executed = project.doit(
        "run", "tiny", f"predictions={preds}", "instances=tiny-mul", "run=sub", check=False
    )
    assert proc.returncode == 2 and executed == []
    assert lines(proc.stderr, "nginx-eval: error:") == [
        f"nginx-eval: error: {preds}: no row for a task that instances=/limit= select (its 3 "
        "rows: tiny-add, x, y): nothing to score"
    ]

    # A mode named with modes= is scored too, and only that one, on the same tasks.
    named = ("tiny", f"predictions={preds}", "modes=none", "run=named")
    project.doit("run", *named, "report=0")
    project.render(*named)
    assert set(report_json(project, "named")["modes"]) == {"file", "none"}
    assert set(rows(project, "none", "named")) == {"tiny-add"}
    assert project.agent_calls() == []


def test_no_warning_when_every_row_is_a_task(project, tmp_path):
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"instance_id": "tiny-mul", "model_patch": ""}) + "\n")
    proc, _ = project.doit("list", f"predictions={preds}")
    assert "warning" not in proc.stderr


# -- 2. a failed agent: one console line, one outcome everywhere -----------------------------------


def test_failed_and_timed_out_agents_are_said_once_and_agent_errors_everywhere(project):
    modes = project.root / "modes.toml"
    modes.write_text(modes.read_text().replace("timeout = 20", "timeout = 2"))
    env = {"FAKE_AGENT_tiny_add": "fail", "FAKE_AGENT_tiny_mul": "hang"}
    proc, _ = project.doit("run", "tiny", "modes=fake", env=env)
    project.render("tiny", "modes=fake")
    logs = {
        iid: project.task_dir("fake", iid) / "agent" / "1-solve.stderr"
        for iid in ("tiny-add", "tiny-mul")
    }
    assert sorted(lines(proc.stderr, "nginx-eval: agent ")) == [
        f"nginx-eval: agent fake/tiny-add failed: exit code 3 (log: {logs['tiny-add']})",
        f"nginx-eval: agent fake/tiny-mul failed: timed out after 2 s (log: {logs['tiny-mul']})",
    ]
    assert all(path.exists() for path in logs.values())

    # results.jsonl, report.json and report.md: the same outcome, from one function.
    assert report_records.outcome is outcomes.outcome and results.outcome is outcomes.outcome
    r = rows(project, "fake")
    assert r["tiny-add"]["outcome"] == "agent_error" and r["tiny-add"]["status"] == "unresolved"
    assert r["tiny-add"]["agent_error"] == "phase solve: exit code 3"
    assert r["tiny-mul"]["outcome"] == "timeout"
    assert r["tiny-mul"]["agent_error"] == "phase solve: timed out after 2 s"
    assert report_json(project)["modes"]["fake"]["outcomes"] == {
        "tiny-add": "agent_error",
        "tiny-mul": "timeout",
    }
    md = report_md(project)
    matrix = section(md, "Per task")
    assert table_row(matrix, "tiny-add") == ["[ERR](fake/tiny-add/grade.json)"]
    assert table_row(matrix, "tiny-mul") == ["[TO](fake/tiny-mul/grade.json)"]
    summary_row = table_row(section(md, "Summary"), "`fake`")
    assert (
        summary_row[2].startswith("0 (")
        and summary_row[5] == "1 (50.0%)"
        and summary_row[6] == "1 (50.0%)"
    )  # unresolved, timeout, agent error
    warnings = section(md, "Warnings")
    assert "- fake / tiny-add: agent error: phase solve: exit code 3" in warnings
    assert "- fake / tiny-mul: agent timeout: phase solve: timed out after 2 s" in warnings

    # Nothing runs again, and nothing is said again: the report (report=1) is up to date too.
    proc, executed = project.doit("run", "tiny", "modes=fake", "report=1", env=env)
    assert executed == [] and lines(proc.stderr, "nginx-eval: agent ") == []


def test_an_agent_run_that_did_not_finish_is_never_the_models_failure():
    """infra_error and not_run are outcomes of their own, before any verdict (a leftover patch
    that passes is not the model's answer either), in the one shared vocabulary."""
    for status in ("infra_error", "not_run"):
        assert status in outcomes.OUTCOMES and status in outcomes.NOT_SCORED
        for row in (
            {"resolved": True, "status": "resolved"},
            {"status": "unresolved"},
            {"status": "env_error"},
            {},
        ):
            assert outcomes.outcome(dict(row, agent_status=status)) == status
    assert outcomes.outcome({"agent_status": "error", "status": "unresolved"}) == "agent_error"
    assert outcomes.outcome({"agent_status": "failed", "resolved": True}) == "resolved"


def test_a_progress_line_calls_a_contaminated_unit_contaminated(tmp_path):
    """Its patch resolves the task, but the fix reached the agent: the progress line, like
    results.jsonl, says contaminated (it said resolved, and counted it)."""
    from types import SimpleNamespace

    from nginx_eval.core import jsonio
    from nginx_eval.core.layout import Layout
    from nginx_eval.progress import Progress

    layout = Layout(
        root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results", run="r"
    )
    jsonio.write_json(layout.grade_json("raw", "t-1"), {"resolved": True, "status": "resolved"})
    jsonio.write_json(
        layout.agent_json("raw", "t-1"), {"status": "completed", "contaminated": True}
    )
    assert Progress(SimpleNamespace(layout=layout), None).outcome("raw", "t-1") == "contaminated"


# -- 2 and 3. AGENT is read as a shell reads it; records say what ran ------------------------------

DUMP_ARGV = "import json, sys; json.dump(sys.argv[1:], open(sys.argv[1], 'w'))"


def agent_mode(project):
    """The fake mode, its agent chosen by ${AGENT:-...} and given {model}, as modes.toml does."""
    modes = project.root / "modes.toml"
    modes.write_text(
        modes.read_text().replace(
            f'command = "{project.agent} {{prompt}}"',
            f'command = "${{AGENT:-{project.agent} --model {{model}}}} {{prompt}}"',
        )
    )
    assert "${AGENT:-" in modes.read_text()


def test_agent_with_quotes_runs_as_a_shell_reads_it_and_records_say_what_ran(project, tmp_path):
    agent_mode(project)
    out = tmp_path / "argv.json"
    agent = f'{sys.executable} -c "{DUMP_ARGV}" {shlex.quote(str(out))} "two words"'
    project.doit("run", "tiny:fake", "instances=tiny-add", env={"AGENT": agent})
    prompt_file = project.task_dir("fake", "tiny-add") / "agent" / "1-solve.prompt.md"
    # The program got AGENT's words as a shell splits them, then the prompt.
    assert json.loads(out.read_text()) == [str(out), "two words", prompt_file.read_text()]
    record = json.loads((project.task_dir("fake", "tiny-add") / "agent.json").read_text())
    phase = record["phases"][0]
    words = shlex.join(shlex.split(agent))
    assert phase["command_template"] == f"{words} {{prompt}}"
    assert phase["command"] == f'{words} "$(cat {prompt_file})"'
    assert "${AGENT" not in phase["command"]
    assert phase["model"] is None  # the command that ran does not pass {model}

    # tiny-mul without AGENT: the configured agent, given the model.
    project.doit("run", "tiny:fake", "instances=tiny-mul")
    record = json.loads((project.task_dir("fake", "tiny-mul") / "agent.json").read_text())
    assert record["phases"][0]["command_template"] == f"{project.agent} --model fake-1 {{prompt}}"
    assert record["phases"][0]["model"] == "fake-1"

    project.render()
    ran = report_json(project)["modes"]["fake"]["agent_commands"]
    assert sorted((r["commands"], r["model"], r["instance_ids"]) for r in ran) == sorted(
        [
            ([["solve", f"{words} {{prompt}}"]], None, ["tiny-add"]),
            ([["solve", f"{project.agent} --model fake-1 {{prompt}}"]], "fake-1", ["tiny-mul"]),
        ]
    )
    md = report_md(project)
    model, command = table_row(section(md, "Modes"), "`fake`")[1:3]
    assert "tasks ran 2 different commands" in command
    assert f"solve: `{project.agent} --model fake-1 {{prompt}}`" in command
    assert sys.executable in command and "two words" in command
    assert model == (
        "— (fake-1 configured, not passed to the command that ran) (1 tasks)<br>fake-1 (1 tasks)"
    )
    assert "mode fake: its tasks ran 2 different commands" in section(md, "Warnings")


def test_one_command_for_every_task_is_shown_once_with_its_model(project):
    agent_mode(project)
    project.doit("run", "tiny", "modes=fake")
    project.render("tiny", "modes=fake")
    model, command = table_row(section(report_md(project), "Modes"), "`fake`")[1:3]
    assert model == "fake-1"
    assert command == f"solve: `{project.agent} --model fake-1 {{prompt}}`"


def test_an_agent_a_shell_cannot_read_is_refused_before_any_agent(project):
    agent_mode(project)
    proc, executed = project.doit("run", "tiny:fake", check=False, env={"AGENT": "sh -c 'x"})
    assert proc.returncode == 2 and executed == [] and project.agent_calls() == []
    assert lines(proc.stderr, "nginx-eval: error:") == [
        'nginx-eval: error: field AGENT: AGENT="sh -c \'x" is not a command line a shell can '
        "read: No closing quotation"
    ]


def test_render_command():
    from nginx_eval.run.commandline import render_command

    command = "${AGENT:-claude --model {model} -p} {prompt}"
    values = {"model": "m", "prompt": "it's $AGENT"}
    assert render_command(command, {}, values) == "claude --model m -p 'it'\"'\"'s $AGENT'"
    assert render_command(command, {"AGENT": ""}, values).startswith("claude --model m -p ")
    assert (
        render_command(command, {"AGENT": 'sh -c "a b" x'}, values)
        == "sh -c 'a b' x 'it'\"'\"'s $AGENT'"
    )
    # In double quotes bash expands it as one word; in single quotes it is text.
    assert (
        render_command("\"$AGENT\" '$AGENT' {prompt}", {"AGENT": "a b"}, values)
        == "\"$AGENT\" '$AGENT' 'it'\"'\"'s $AGENT'"
    )
    # A record puts the other variables in, but not those that look secret.
    assert (
        render_command(
            "$AGENT --key ${API_KEY} --home $HOME {prompt}",
            {"AGENT": "a", "API_KEY": "s3cret", "HOME": "/h"},
            record=True,
        )
        == "a --key ${API_KEY} --home /h {prompt}"
    )


# -- 4. modes.toml: unknown keys are errors; the header documents every key ------------------------


@pytest.mark.parametrize(
    "text,message",
    [
        (
            '[modes.raw]\n[[modes.raw.phases]]\nname = "solve"\ncommand = "x"\ntimout = 60\n',
            "mode raw phase solve: unknown key 'timout'; did you mean 'timeout'?",
        ),
        (
            '[modes.raw]\nmodle = "m"\n[[modes.raw.phases]]\ncommand = "x"\n',
            "mode raw: unknown key 'modle'; did you mean 'model'?",
        ),
        (
            '[modes.raw]\n[[modes.raw.phases]]\ncommand = "x"\npromt = "p.j2"\n',
            "mode raw phase 1: unknown key 'promt'; did you mean 'prompt'?",
        ),
        (
            '[mode.raw]\n[[mode.raw.phases]]\ncommand = "x"\n',
            "unknown key 'mode'; did you mean 'modes'?",
        ),
        (
            '[modes.raw]\ncolour = "red"\n[[modes.raw.phases]]\ncommand = "x"\n',
            "mode raw: unknown key 'colour'; known keys: {mode_keys}",
        ),
    ],
)
def test_unknown_keys_in_modes_toml_are_errors(tmp_path, text, message):
    from nginx_eval.run.modes import MODE_KEYS

    message = message.format(mode_keys=", ".join(MODE_KEYS))
    path = tmp_path / "modes.toml"
    path.write_text(text)
    with pytest.raises(UserError) as e:
        load_modes(path)
    assert str(e.value) == f"{path}: {message}"


def test_a_typo_in_modes_toml_stops_doit_with_one_line(project):
    modes = project.root / "modes.toml"
    modes.write_text(modes.read_text().replace("timeout = 20", "timout = 60"))
    proc, executed = project.doit("run", "tiny:gold", check=False)
    assert proc.returncode == 2 and executed == []
    assert proc.stderr.splitlines() == [
        f"nginx-eval: error: {modes}: mode fake phase solve: unknown key 'timout'; "
        "did you mean 'timeout'?"
    ]


def test_the_shipped_modes_toml_documents_every_key_and_parses():
    from nginx_eval.run.modes import MODE_KEYS, PHASE_KEYS

    text = (SOURCE_ROOT / "modes.toml").read_text()
    header = text[: text.index("\n[modes.")]
    for key in MODE_KEYS + PHASE_KEYS:
        assert re.search(rf"^#\s+{key}\b", header, re.M), key
    modes = parse_modes(__import__("tomllib").loads(text), "modes.toml")
    assert {"raw", "impl", "full", "nlcmd"} <= set(modes)
