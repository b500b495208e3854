"""A newcomer's second hour (issue 51, "Everywhere"): each finding replayed as a user meets it,
with the line the harness now says."""

import json
import re

import pytest
from conftest import SOURCE_ROOT, Project, section, table_row
from test_commands import preview_table

from nginx_eval.checks import doctor, doctor_report
from nginx_eval.core.errors import UserError
from nginx_eval.run import options
from nginx_eval.run.modes import AgentMode, load_modes


def test_the_doctor_names_every_mode_that_cannot_run_without_claude(tmp_path, monkeypatch):
    """Finding 10: every shipped agent mode runs `claude` (full also `codex`, for its
    consensus); without them on PATH the doctor names each mode a program stops, not only the
    first mode that asked, whatever the modes' sandboxes."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("AGENT", raising=False)
    modes = load_modes(SOURCE_ROOT / "modes.toml", SOURCE_ROOT / "templates")
    agents = [m for m in modes.values() if isinstance(m, AgentMode)]
    findings = doctor.agent_findings(None, agents)
    text, ok = doctor_report.render(findings)
    assert not ok
    setup = "(scripts/setup-debian.sh installs Claude Code, Codex CLI and Gemini CLI)"
    assert text.splitlines() == [
        "CANNOT RUN modes raw, impl, full, nlcmd, plan-implement, plan-verify, fix-command: "
        f"program 'claude' is not on PATH {setup}",
        f"CANNOT RUN mode full: program 'codex' is not on PATH {setup}",
        "doctor: 2 problem(s)",
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


@pytest.fixture(scope="module")
def gold_one(tmp_path_factory):
    """A project after `doit run tiny:gold limit=1` on a cold cache, and that command's output:
    the first command of two tests below, the same for each. Each runs more on it after
    reading it (another run, a benchmark written beside), and asserts only what it added."""
    project = Project(tmp_path_factory.mktemp("gold-one"))
    proc, _ = project.doit("run", "tiny:gold", "limit=1")
    return project, proc


@pytest.mark.e2e
def test_a_dry_run_after_a_finished_run_has_nothing_to_run(gold_one):
    """Finding 7: right after `tiny:gold limit=1` finished, its dry run lists no unit to run;
    another limit=, instances=, run= or repository URL that needs no new commit leaves the
    clones current (their stamps record what they hold), so the stages after them are counted
    as they are, and the real command runs no repos task either."""
    project, _ = gold_one

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


def test_a_misspelt_environment_variable_is_an_error_naming_the_right_one():
    """Finding 14: NGINX_EVAL_CAHCE was ignored without a word (and a real run would have built
    everything again in the default cache)."""
    with pytest.raises(UserError) as e:
        options.check_environment({"NGINX_EVAL_CAHCE": "/big/disk", "PATH": "/bin"})
    assert str(e.value) == (
        "unknown environment variable NGINX_EVAL_CAHCE, which nothing would read; did you mean "
        "NGINX_EVAL_CACHE?: correct its name or unset it (`unset NGINX_EVAL_CAHCE`)"
    )
    options.check_environment({name: "x" for name in options.ENVIRONMENT})
    options.check_environment({name: "x" for name in options.INTERNAL_ENVIRONMENT})
    # Every NGINX_EVAL_ name the harness, its scripts and tests read or set is known: a new one
    # must be added to the lists (and a user's one to docs/running.md) or doit refuses it.
    used = set()
    for folder in ("nginx_eval", "scripts", "tests", ".ci"):
        for path in (SOURCE_ROOT / folder).rglob("*"):
            if (
                path.is_file()
                and path.suffix in (".py", ".sh", "")
                and "__pycache__" not in str(path)
            ):
                used |= set(
                    re.findall(r"NGINX_EVAL_[A-Z][A-Z_]*[A-Z]", path.read_text(errors="replace"))
                )
    used.discard("NGINX_EVAL_CONTEXT")  # dodo.py's namespace key, not an environment variable
    # The prefix of the node settings (NGINX_EVAL_NODE_*), test_options.py's example of a name
    # written after the command, and this test's typo.
    used -= {"NGINX_EVAL_NODE", "NGINX_EVAL_SANDBOX", "NGINX_EVAL_CAHCE"}
    assert used <= set(options.ENVIRONMENT) | set(options.INTERNAL_ENVIRONMENT), (
        used - set(options.ENVIRONMENT) - set(options.INTERNAL_ENVIRONMENT)
    )
    running = (SOURCE_ROOT / "docs" / "running.md").read_text()
    assert [n for n in options.ENVIRONMENT if f"`{n}" not in running] == []


def test_a_dry_run_names_its_cache_and_a_misspelt_one_stops_it(project):
    proc, _ = project.doit("run", "tiny:gold", "dry_run=1")
    assert (
        f"cache: {project.cache} (NGINX_EVAL_CACHE; empty: every clone and build is made "
        f"there), results: {project.results / 'default'}"
    ) in proc.stdout.splitlines(), proc.stdout
    proc, executed = project.doit(
        "run", "tiny:gold", env={"NGINX_EVAL_CAHCE": str(project.base / "big")}, check=False
    )
    assert proc.returncode == 2 and executed == [] and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "nginx-eval: error: unknown environment variable NGINX_EVAL_CAHCE, which nothing would "
        "read; did you mean NGINX_EVAL_CACHE?: correct its name or unset it "
        "(`unset NGINX_EVAL_CAHCE`)"
    ]
    assert not project.cache.exists() and not (project.base / "big").exists()


@pytest.mark.reports
def test_a_mode_run_on_fewer_tasks_is_rated_on_the_tasks_it_ran(project):
    """Finding 13, README's own sequence: gold on every task, then an agent mode with limit=1.
    The agent resolved its one task: 1 of 1, not 1 of 2 (50%); the Summary row adds up with a
    "no result" column; By area counts only the tasks each mode ran."""
    project.doit("run", "tiny:gold")
    project.doit("run", "tiny:fake", "limit=1")
    project.render()
    md = (project.results / "default" / "report.md").read_text()
    summary = section(md, "Summary")
    head = table_row(summary, "mode")
    fake = dict(zip(head, table_row(summary, "`fake`"), strict=True))
    gold = dict(zip(head, table_row(summary, "`gold`"), strict=True))
    assert fake["resolved"] == "1 (100.0%)" and fake["no result"] == "1", fake
    assert gold["resolved"] == "2 (100.0%)" and gold["no result"] == "0", gold
    counts = [c.split()[0] for k, c in fake.items() if k not in ("resolved, 95% CI",)]
    assert sum(int(c) for c in counts) == 2  # every outcome and "no result": the run's tasks
    assert "A row adds up to the 2 tasks." in summary.replace("\n", " ")
    made = json.loads((project.results / "default" / "report.json").read_text())["modes"]
    assert made["fake"]["resolved_rate"] == 1.0 and made["fake"]["scored_instances"] == 1
    assert made["fake"]["incomplete_ids"] == ["tiny-mul"]
    area = section(md, "By area")
    for row in area.splitlines()[2:]:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) > 2 and cells[0] != "area" and not cells[0].startswith("-"):
            assert "0/1" not in cells[2:], row
    assert any(
        "mode fake: no result for 1 of 2 tasks (tiny-mul): not run in this run" in line
        for line in section(md, "Warnings").splitlines()
    )


@pytest.mark.e2e
def test_a_cold_run_says_what_it_waits_for_and_the_doctor_checks_another_benchmark(gold_one):
    """Finding 16: a cold run is not silent while its bases build; `doit run doctor
    bench=OTHER`, as docs/benchmark.md writes it for SWE-bench, works after README's first
    command put another benchmark in run default (the doctor reads and writes no run)."""
    project, proc = gold_one
    lines = proc.stdout.splitlines()
    assert "nginx-eval: building up to 1 base first; each unit starts once its base is built" in (
        lines
    ), lines
    base = project.commits["c_add_bug"][:12]
    built = [line for line in lines if line.startswith("[base 1/1] ")]
    assert len(built) == 1 and re.fullmatch(
        rf"\[base 1/1\] acme\+tiny/{base} built in \d+ s", built[0]
    ), lines
    assert lines.index(built[0]) < next(i for i, x in enumerate(lines) if x.startswith("[1/1]"))
    proc, _ = project.doit("run", "tiny:gold", "limit=1")  # warm: no base line
    assert "base" not in proc.stdout, proc.stdout

    other = dict(project.benchmark(), name="other")
    (project.root / "tasks" / "other.json").write_text(json.dumps(other))
    proc, _ = project.doit("run", "doctor", "bench=other", check=False)
    assert "holds results of benchmark" not in proc.stderr, proc.stderr
    assert "doctor: checking 2 task(s)" in proc.stdout, proc.stdout
    # A command that scores is still refused in a run of another benchmark.
    proc, _ = project.doit("run", "other:gold", check=False)
    assert proc.returncode != 0 and "holds results of benchmark 'tiny'" in proc.stderr
