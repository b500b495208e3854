"""A newcomer's second hour (issue 51, "Everywhere"): each finding replayed as a user meets it,
with the line the harness now says."""

import json

import pytest
from conftest import SOURCE_ROOT
from test_commands import preview_table

from nginx_eval.checks import doctor, doctor_report
from nginx_eval.run.modes import load_modes


def test_the_doctor_names_every_mode_that_cannot_run_without_claude(tmp_path, monkeypatch):
    """Finding 10: raw, impl, full and nlcmd all run `claude`; without it on PATH the doctor
    names each of them, not only the first mode that asked."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("AGENT", raising=False)
    modes = load_modes(SOURCE_ROOT / "modes.toml", SOURCE_ROOT / "templates")
    agents = [m for m in modes.values() if m.runs_agent]
    findings = doctor.agent_findings(None, agents)
    text, ok = doctor_report.render(findings)
    assert not ok
    assert text.splitlines() == [
        "CANNOT RUN modes raw, impl, full, nlcmd: program 'claude' is not on PATH "
        "(scripts/setup-debian.sh installs Claude Code)",
        "doctor: 1 problem(s)",
    ]


@pytest.mark.reports
def test_reports_and_cleaning_of_runs_that_lack_what_they_need(project):
    """Finding 9: a run holding only a validation is no report of modes (docs/report.md: a run
    with no results is an error); finding 15: `doit clean run=nosuch` is an error, as report and
    power are; finding 12: compare= of runs whose gold ran on different tasks says so, not that
    no mode has results in both runs."""
    project.doit("run", "tiny:validate", "repeats=1", "run=checked")
    for target in ("report", "power", "site"):
        proc, _ = project.doit("run", target, "run=checked", check=False)
        assert proc.returncode != 0 and proc.stdout == "", proc.stdout
        assert proc.stderr.splitlines() == [
            f"nginx-eval: error: run=checked: no mode has results in "
            f"{project.results / 'checked'} (it holds a task validation only): a report "
            "compares modes; score one first (`doit run tiny:gold run=checked`)"
        ]
    assert not (project.results / "checked" / "report.md").exists()

    proc, _ = project.doit("clean", "--clean-all", "run=nosuch", check=False)
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"nginx-eval: error: run=nosuch: no such run (nothing in {project.results / 'nosuch'} "
        "or its cache); no run has results yet (`doit` scores gold and none)"
    ]
    assert not (project.results / "nosuch").exists()
    proc, _ = project.doit("clean", "--clean-all", "run=checked")  # a run without modes: fine
    assert proc.stdout.startswith("nginx-eval: removed 0 workspaces"), proc.stdout

    project.doit("run", "tiny:gold", "run=A", "instances=tiny-add", "report=0")
    project.doit("run", "tiny:gold", "run=B", "instances=tiny-mul", "report=0")
    project.render("run=B", "compare=A")
    text = (project.results / "B" / "compare-A.md").read_text()
    assert "No mode has results in both runs" not in text
    assert (
        "`gold` has results in both runs, but on no task that both runs have results for "
        "(the runs share no task: `B` has 1, `A` 1): nothing to pair. Run it on the same "
        "tasks in both runs (`instances=`) to compare."
    ) in text.splitlines(), text
    made = json.loads((project.results / "B" / "compare-A.json").read_text())
    assert made["unpaired"] == ["gold"] and made["comparisons"] == []


def test_a_dry_run_after_a_finished_run_has_nothing_to_run(project):
    """Finding 7: right after `tiny:gold limit=1` finished, its dry run lists no unit to run;
    another limit=, instances=, run= or repository URL that needs no new commit leaves the
    clones current (their stamps record what they hold), so the stages after them are counted
    as they are, and the real command runs no repos task either."""
    project.doit("run", "tiny:gold", "limit=1")

    def dry(*words, env=None):
        proc, executed = project.doit("run", "tiny:gold", *words, "dry_run=1", env=env)
        assert executed == [] and proc.stderr == "", proc.stderr
        return proc.stdout.splitlines()

    out = dry("limit=1")
    table = preview_table(out)
    assert {stage: counts[1] for stage, counts in table.items()} == {
        stage: "0" for stage in table
    }, out
    assert table["repos"][0] == "2" and table["grade"][0] == "1", out
    assert "nothing to run: every unit of the command is done" in out
    elsewhere = {"NGINX_EVAL_REPO_URL": str(project.base / "gone") + "/{owner}+{name}"}
    out = dry("limit=1", env=elsewhere)
    assert preview_table(out)["repos"] == ["2", "0"] and preview_table(out)["grade"][1] == "0"
    # Another run of the same task: its own units to run, the shared clones and bases done.
    out = dry("limit=1", "run=other")
    table = preview_table(out)
    assert table["repos"] == ["2", "0"] and table["base"] == ["1", "0"], out
    assert table["grade"] == ["0", "1"], out
    # The other task needs its own commits: the clones' check runs again for it.
    out = dry("instances=tiny-mul")
    assert preview_table(out)["repos"] == ["0", "2"], out
    _, executed = project.doit("run", "tiny:gold", "limit=1", env=elsewhere)
    assert executed == [], executed
    _, executed = project.doit("run", "tiny:gold", "limit=1", "run=other")
    assert not [name for name in executed if name.startswith("repos:")], executed


def test_a_mode_without_its_prompt_template_is_one_line_and_stops_only_itself(project):
    """Finding 8: a mode whose `prompt` names no template is one line naming the mode, the phase
    and the template, from a run and from its dry run, before any work; a command that does not
    run that mode (`tiny:gold`) runs as ever."""
    modes = project.root / "modes.toml"
    modes.write_text(modes.read_text().replace("prompt_raw.md.j2", "prompt_rwa.md.j2"))
    line = (
        "nginx-eval: error: modes.toml, mode fake phase solve, field prompt: no template "
        f"'prompt_rwa.md.j2' in {SOURCE_ROOT / 'templates'}: mode fake cannot run (the "
        "commands without it still do); did you mean 'prompt_raw.md.j2'?"
    )
    for extra in ((), ("dry_run=1",)):
        proc, executed = project.doit("run", "tiny:fake", *extra, check=False)
        assert proc.returncode != 0 and executed == [], proc.stdout
        assert proc.stderr.splitlines() == [line], proc.stderr
    assert project.agent_calls() == []
    assert not (project.results / "default" / "fake").exists()
    proc, executed = project.doit("run", "tiny:gold", "limit=1")
    assert "grade:tiny/gold/tiny-add" in executed and proc.stderr == "", proc.stderr
