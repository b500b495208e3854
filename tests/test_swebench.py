"""SWE-bench Verified as a second benchmark (issue 40): its task file, the agent stage on a
SWE-bench task (shipped modes, a stand-in agent and the real CLI), the predictions the official
harness reads, its reports read back by the report (and bad ones), and one report over both
benchmarks. The fixture is tests/swebench_fixture.py's acme/pycalc beside the nginx fixture."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import swebench_fixture as sf
from anthropic_standin import call, say
from claude_cli import sonnet_cost
from conftest import SOURCE_ROOT, Project, section, table_row
from test_agent_claude import RAW, claude  # noqa: F401 (a fixture)
from test_sandbox import needs_srt

from nginx_eval.agent.prompts import rendered_prompts
from nginx_eval.checks import doctor
from nginx_eval.core.errors import UserError
from nginx_eval.core.layout import Layout
from nginx_eval.core.outcomes import EVAL_ERROR, NOT_SCORED
from nginx_eval.report import stats
from nginx_eval.report.evaluation import judged
from nginx_eval.run.benchmark import load_benchmark
from nginx_eval.run.modes import load_modes, read_predictions
from nginx_eval.run.swebench import SweTask, adapt_mode
from nginx_eval.swebench import harness
from nginx_eval.swebench import stage as swe_stage

IMPORT = SOURCE_ROOT / "scripts" / "import_swebench.py"
BENCH = "swebench-verified"


def import_rows(rows, out, *extra, env=None):
    path = out.parent / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return subprocess.run(
        [sys.executable, str(IMPORT), "--rows", str(path), "--out", str(out), *extra],
        capture_output=True,
        text=True,
        env=env,
    )


@pytest.fixture
def commits(tmp_path):
    return sf.make_pycalc(tmp_path / "acme+pycalc")


def with_swebench(project):
    """`project` with the SWE-bench task, the shipped modes and the stand-in agent."""
    project.swe = sf.add_swebench(project)
    shutil.copy(SOURCE_ROOT / "modes.toml", project.root / "modes.toml")
    project.env["AGENT"] = sf.stand_in_agent(
        project.base, project.root / "tasks" / "swebench-verified.json"
    )
    return project


@pytest.fixture
def swe(project):
    """The fixture project with the SWE-bench task, the shipped modes and the stand-in agent."""
    return with_swebench(project)


SHIPPED_MODES = ("raw", "plan-implement", "plan-verify", "fix-command")


@pytest.fixture(scope="module")
def shipped_run(tmp_path_factory):
    """One run (run=swe, workspaces kept) of every shipped mode on the SWE-bench task, which the
    test of the modes reads and the test of the harness's reports goes on with; (the project,
    doit's CompletedProcess)."""
    project = with_swebench(Project(tmp_path_factory.mktemp("shipped")))
    modes = (f"{BENCH}:{m}" for m in SHIPPED_MODES)
    proc, _ = project.doit("run", *modes, "run=swe", "keep_workspaces=1", "report=0")
    return project, proc


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def grade(project, mode, run="default", **kwargs):
    """The official-format evaluation of a mode's predictions, into the run's evaluation dir."""
    pred = project.results / run / mode / "predictions.jsonl"
    rid = harness.run_id(run, mode, harness.predictions_digest(pred))
    return sf.grade_locally(
        pred,
        [sf.dataset_row(project.swe)],
        rid,
        project.results / run / "evaluation",
        project.mirrors / "acme+pycalc",
        project.base / f"grading-{run}-{mode}-{time.monotonic_ns()}",
        **kwargs,
    )


def report_json(project, run="default"):
    return json.loads((project.results / run / "report.json").read_text())


# -- the task file -------------------------------------------------------------------------------
def test_import_makes_a_task_file_of_dataset_rows(tmp_path, commits):
    out = tmp_path / "tasks" / "swebench-verified.json"
    out.parent.mkdir()
    done = import_rows([sf.dataset_row(commits)], out)
    assert done.returncode == 0, done.stderr
    bench = load_benchmark(out)
    (task,) = bench.tasks
    assert (bench.kind, bench.version, bench.dataset) == (
        "swebench",
        "1.0",
        {"name": "SWE-bench/SWE-bench_Verified", "split": "test"},
    )
    assert task.fail_to_pass == ("tests/test_calc.py::test_add",)  # the JSON text, read
    assert task.pass_to_pass == ("tests/test_calc.py::test_mul",)
    assert (task.base_commit, task.patch, task.test_patch) == (
        commits["p_base"],
        commits["gold"],
        commits["test_patch"],
    )
    assert (task.area, task.fix_date, task.version) == ("acme/pycalc", "2024-05-01", "0.1")
    # Fields the harness has no use for are not kept; a second import of the same rows changes
    # nothing, one with a changed task raises the MAJOR version.
    assert "hints_text" not in out.read_text()
    assert import_rows([sf.dataset_row(commits)], out).returncode == 0
    assert load_benchmark(out).version == "1.0"
    row = dict(sf.dataset_row(commits), problem_statement="add() subtracts.")
    assert import_rows([row], out).returncode == 0
    assert load_benchmark(out).version == "2.0"


def test_a_dataset_row_missing_a_field_is_one_line_and_nothing_is_written(tmp_path, commits):
    out = tmp_path / "swebench-verified.json"
    good = sf.dataset_row(commits)
    bad = {k: v for k, v in dict(good, instance_id="acme__pycalc-2").items() if k != "FAIL_TO_PASS"}
    done = import_rows([good, bad], out)
    assert done.returncode == 1 and not out.exists()
    first, last = done.stderr.splitlines()
    assert first == (
        f"import_swebench: {tmp_path / 'rows.jsonl'}, task acme__pycalc-2, line 2, "
        f"field FAIL_TO_PASS: is missing"
    )
    assert last.startswith("import_swebench: 1 bad row(s);")
    done = import_rows([good, bad], out, "--skip-bad")
    assert done.returncode == 1 and [t.instance_id for t in load_benchmark(out).tasks] == [sf.IID]


def test_a_task_file_that_would_not_load_is_named_as_the_user_s_file(tmp_path, commits):
    """The importer loads a temporary copy before it writes: its errors named the copy."""
    out = tmp_path / "swebench-verified.json"
    done = import_rows([sf.dataset_row(commits)], out, "--dataset-name", "")
    assert (done.returncode, out.exists()) == (2, False)
    assert done.stderr.splitlines() == [
        f"import_swebench: the task file would not load, so it is not written: {out}, field "
        f'dataset: must be {{"name": <dataset>, "split": <split>}} (and "harness": '
        f'"swe-bench-pro" for SWE-bench Pro)'
    ]


def test_a_task_file_row_missing_a_field_is_one_error_line(tmp_path, commits):
    row = {
        k: v
        for k, v in sf.dataset_row(commits).items()
        if k not in ("test_patch", "hints_text", "difficulty")
    }
    path = tmp_path / "swe.json"
    path.write_text(json.dumps({"kind": "swebench", "tasks": [row]}))
    with pytest.raises(UserError) as e:
        load_benchmark(path)
    assert str(e.value) == f"{path}, task {sf.IID}, field test_patch: is missing"


# -- what the agent is told ------------------------------------------------------------------------
def test_the_shipped_modes_tell_a_swebench_agent_nothing_of_nginx(tmp_path, commits):
    out = tmp_path / "swebench-verified.json"
    assert import_rows([sf.dataset_row(commits)], out).returncode == 0
    (task,) = load_benchmark(out).tasks
    templates = SOURCE_ROOT / "templates"
    modes = load_modes(SOURCE_ROOT / "modes.toml", templates)
    for name in ("raw", "impl", "full", "nlcmd", "plan-implement", "plan-verify", "fix-command"):
        mode = adapt_mode(modes[name], templates, SOURCE_ROOT / "modes.toml")
        assert modes[name].tests == "base" and mode.tests == ""  # no nginx-tests tree
        prompts = rendered_prompts(templates, mode, task)
        assert all("nginx" not in p.lower() for p in prompts), (name, prompts)
        assert all("nginx" not in text.lower() for _, text in mode.command_files), name
        assert "nginx" not in mode.description.lower(), (name, mode.description)
    gold = adapt_mode(modes["gold"], templates, None)
    assert gold.description == "the dataset's gold patch (the row's `patch`; upper bound)"
    assert modes["gold"].description == "the fix commit's own diff (upper bound)"  # nginx's
    raw = rendered_prompts(templates, adapt_mode(modes["raw"], templates, None), task)[0]
    assert sf.STATEMENT in raw and "acme/pycalc" in raw and task.patch not in raw
    assert task.test_patch not in raw and "test_add" not in raw
    # The nginx prompts are as they were: an nginx agent's inputs keep their digest.
    assert "checkout of the nginx source code" in (templates / "prompt_raw.md.j2").read_text()


def test_a_mode_without_a_swebench_prompt_is_one_error_line(tmp_path):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "mine.md.j2").write_text("Fix nginx.\n")
    toml = tmp_path / "modes.toml"
    toml.write_text(
        '[modes.mine]\n[[modes.mine.phases]]\nname = "solve"\nprompt = "mine.md.j2"\n'
        'command = "agent {prompt}"\n'
    )
    mode = load_modes(toml, tmp_path / "templates")["mine"]
    with pytest.raises(UserError) as e:
        adapt_mode(mode, tmp_path / "templates", toml)
    assert str(e.value).startswith(
        f"{toml}, mode mine phase solve, field prompt: has no "
        f"SWE-bench version of its prompt: "
        f"{tmp_path / 'templates' / 'swebench' / 'mine.md.j2'}"
    )


# -- the official harness: predictions, command, reports -------------------------------------
def test_the_predictions_schema_is_the_official_harness_s():
    good = {"instance_id": "a", "model_name_or_path": "nginx-eval/raw/m", "model_patch": ""}
    assert harness.prediction_problems([good]) == []
    assert harness.prediction_problems(
        [dict(good, model_patch=None), good, dict(good, instance_id="b", model_name_or_path="x")]
    ) == [
        "row 1: model_patch must be a string",
        "row 2: instance_id a twice",
        "2 model names; the report is named after the first row's",
    ]


def test_the_grading_command_names_dataset_predictions_run_id_and_workers(tmp_path):
    words = harness.grading_command(
        {"name": "SWE-bench/SWE-bench_Verified", "split": "test"},
        tmp_path / "p.jsonl",
        "nginx-eval.r.raw.0123456789ab",
        tmp_path / "ev",
        3,
    )
    assert harness.command_line(words) == (
        f"python -m swebench.harness.run_evaluation --dataset_name SWE-bench/SWE-bench_Verified "
        f"--split test --predictions_path {tmp_path}/p.jsonl --max_workers 3 --run_id "
        f"nginx-eval.r.raw.0123456789ab --report_dir {tmp_path}/ev"
    )
    assert harness.report_name("nginx-eval/raw/m", "rid") == "nginx-eval__raw__m.rid.json"
    assert harness.digest_of_run_id("nginx-eval.r.raw.0123456789ab") == "0123456789ab"
    assert harness.digest_of_run_id("my-run") is None


def test_a_file_with_a_report_s_name_that_is_no_report_is_set_aside_first(tmp_path):
    """It was chosen by name before it was read: beside a real report it made two "current"
    reports, and neither was used."""
    real = tmp_path / "m.nginx-eval.r.raw.aaaaaaaaaaaa.json"
    real.write_text(json.dumps({name: [] for name in harness.REPORT_ID_FIELDS}))
    (tmp_path / "m.notes.json").write_text('{"note": "graded elsewhere"}')
    (tmp_path / "m.copy.json").write_text("{not json")
    found, reports, unusable = harness.usable_reports(harness.reports_of(tmp_path, "m"))
    assert [(p.name, why.split(" (")[0]) for p, why in unusable] == [
        ("m.copy.json", "not a readable JSON file"),
        (
            "m.notes.json",
            "no list of ids 'submitted_ids': not a report of swebench.harness.run_evaluation",
        ),
    ]
    chosen, stale, several = harness.choose_report(found, "aaaaaaaaaaaa", time.time() - 60)
    assert (chosen, stale, several) == (real, [], []) and reports[real]["resolved_ids"] == []


def test_a_predictions_row_without_model_patch_is_an_error(tmp_path):
    """It was scored as an empty patch, silently; "" and null still are empty patches."""
    path = tmp_path / "preds.jsonl"
    path.write_text(
        '{"instance_id": "a", "model_patch": ""}\n{"instance_id": "b", "model_patch": null}\n'
        '\n{"instance_id": "c", "model_name_or_path": "m"}\n'
    )
    with pytest.raises(UserError) as e:
        read_predictions(path)
    assert str(e.value) == (
        f'{path}, task c, line 4, field model_patch: is missing (an empty patch is "" or null)'
    )
    path.write_text('[{"instance_id": "a", "model_patch": null}, {"instance_id": "c"}]')
    with pytest.raises(UserError, match=r", task c, row 2, field model_patch: is missing"):
        read_predictions(path)
    path.write_text(
        '{"instance_id": "a", "model_patch": ""}\n{"instance_id": "b", "model_patch": null}\n'
    )
    assert read_predictions(path) == {"a": ("", ""), "b": ("", "")}


def swe_task(iid, repo):
    return SweTask(iid, repo, "0" * 40, "It fails.", "1.0", ("t",), (), "", "")


def test_the_doctor_says_whether_each_swebench_repository_can_be_cloned(
    tmp_path, monkeypatch, commits
):
    """It said "all good" for a benchmark whose repository could not be cloned."""
    monkeypatch.setenv("NGINX_EVAL_REPO_URL", str(tmp_path / "{owner}+{name}"))
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    (layout.bare_repo("acme/cached") / "HEAD").parent.mkdir(parents=True)
    (layout.bare_repo("acme/cached") / "HEAD").write_text("ref: refs/heads/main\n")
    tasks = [
        swe_task("acme__pycalc-1", "acme/pycalc"),  # the fixture's repository (`commits`)
        swe_task("acme__cached-1", "acme/cached"),
        swe_task("acme__gone-1", "acme/gone"),
        swe_task("acme__gone-2", "acme/gone"),
    ]
    findings = doctor.repository_findings(layout, tasks)
    text, ok = doctor.render(findings, len(tasks), BENCH)
    assert not ok
    assert text.splitlines() == [
        "doctor: checking 4 task(s)",
        f"OK      repositories of the SWE-bench tasks: acme/cached (cloned), acme/pycalc "
        f"(reachable at {tmp_path / 'acme+pycalc'})",
        f"CANNOT CLONE acme/gone (needed by acme__gone-1, acme__gone-2): "
        f"{tmp_path / 'acme+gone'}: fatal: '{tmp_path / 'acme+gone'}' does not appear to be a "
        f"git repository (set NGINX_EVAL_REPO_URL to a mirror that has it; "
        f"docs/benchmark.md#swe-bench-verified)",
        "doctor: 1 problem(s)",
    ]


def test_the_report_s_verdicts_become_outcomes():
    row = {"agent_status": "completed", "contaminated": False, "outcome": None}
    outcome = lambda verdict, **kw: judged(dict(row, **kw), verdict)["outcome"]
    assert outcome(harness.RESOLVED) == "resolved"
    assert outcome(harness.UNRESOLVED) == "unresolved"
    assert outcome(harness.EMPTY_PATCH) == "unresolved"  # an empty patch fixes nothing
    assert outcome(harness.ERROR) == EVAL_ERROR and EVAL_ERROR in NOT_SCORED
    assert outcome(harness.UNRESOLVED, agent_status="timeout") == "timeout"
    assert (
        outcome(harness.EMPTY_PATCH, agent_status="infra_error", outcome="infra_error")
        == "infra_error"
    )
    assert harness.verdicts(
        {
            "resolved_ids": ["a"],
            "unresolved_ids": ["b"],
            "error_ids": ["c"],
            "empty_patch_ids": ["d"],
        }
    ) == {"a": "resolved", "b": "unresolved", "c": "error", "d": "empty_patch"}


def test_which_report_grades_the_current_predictions(tmp_path):
    mine = tmp_path / "m.nginx-eval.r.raw.aaaaaaaaaaaa.json"
    other = tmp_path / "m.nginx-eval.r.raw.bbbbbbbbbbbb.json"
    theirs = tmp_path / "m.my-own-id.json"
    for p in (mine, other, theirs):
        p.write_text("{}")
    os.utime(theirs, (1, 1))
    found = harness.reports_of(tmp_path, "m")
    chosen, stale, several = harness.choose_report(found, "aaaaaaaaaaaa", time.time())
    assert chosen == mine and several == []
    assert [(p.name, why.split(" (")[0]) for p, why in stale] == [
        (theirs.name, "it is older than the predictions file"),
        (
            other.name,
            "its run id nginx-eval.r.raw.bbbbbbbbbbbb names other predictions than "
            "the current ones",
        ),
    ]
    os.utime(theirs)  # a report of one's own run id, newer than the predictions
    chosen, _, several = harness.choose_report(found, "aaaaaaaaaaaa", time.time() - 60)
    assert chosen is None and several == [theirs, mine]


@pytest.mark.skipif(
    not sf.swebench_importable(),
    reason=f"swebench 5.x is not in {sf.SWEBENCH5_DIR}: sh scripts/setup-debian.sh puts it there",
)
def test_the_copied_run_report_is_the_package_s_field_for_field(tmp_path, commits):
    rows = [sf.dataset_row(commits), dict(sf.dataset_row(commits), instance_id="acme__pycalc-9")]
    preds = tmp_path / "p.jsonl"
    preds.write_text(
        json.dumps(
            {"instance_id": sf.IID, "model_name_or_path": "x/y", "model_patch": commits["gold"]}
        )
        + "\n"
    )
    made = {}
    for use in (True, False):
        path = sf.grade_locally(
            preds,
            rows,
            "rid",
            tmp_path / f"out-{use}",
            tmp_path / "acme+pycalc",
            tmp_path / f"work-{use}",
            use_package=use,
        )
        made[use] = json.loads(path.read_text())
    assert made[True] == made[False]
    assert made[True]["resolved_ids"] == [sf.IID]
    assert made[True]["incomplete_ids"] == ["acme__pycalc-9"]


def test_cmh_pools_the_paired_tasks_of_both_benchmarks():
    nginx = ([1, 1, 0, 1, 0, 1, 1, 0, 1, 1], [0, 1, 0, 0, 0, 1, 0, 0, 1, 0])
    swe = ([1, 0, 1, 1, 0], [0, 0, 1, 0, 1])
    r = stats.cmh_paired([nginx, swe])
    assert (r["tasks"], r["a_only"], r["b_only"]) == (15, 6, 1)
    # Tasks as strata: the CMH statistic is McNemar's on the pooled discordant tasks.
    assert r["statistic"] == pytest.approx((6 - 1) ** 2 / (6 + 1))
    assert r["p_value"] == pytest.approx(0.0587817, abs=1e-6)
    assert r["p_exact"] == stats.mcnemar_exact(6, 1)
    assert r["odds_ratio"] == pytest.approx(6.0)
    assert r["odds_ratio_interval"] == pytest.approx((0.72235, 49.8372), rel=1e-4)
    assert r["homogeneity_p"] == pytest.approx(0.428571, abs=1e-6)  # Fisher, [[4,1],[2,0]]
    assert stats.cmh_paired([([1, 0], [1, 0])])["p_value"] == 1.0


# -- this machine --------------------------------------------------------------------------------
def test_the_grade_task_exists_only_where_docker_and_swebench_are(monkeypatch):
    class Ctx:
        benchmark = type("B", (), {"name": BENCH})()
        layout = None

        def group_mode_list(self):
            return []

    monkeypatch.setattr(swe_stage, "grading_problem", lambda: "no Docker engine")
    assert list(swe_stage.grade_task(Ctx())) == []
    monkeypatch.setattr(swe_stage, "grading_problem", lambda: None)
    (task,) = swe_stage.grade_task(Ctx())
    assert (task["basename"], task["name"]) == (BENCH, "grade")
    assert "DOCKER_HOST" in swe_stage.docker_problem({}) or Path("/var/run/docker.sock").exists()


def test_the_doctor_says_whether_this_machine_can_grade(capsys):
    for problem, line in (
        (None, "OK      SWE-bench grading: Docker and the swebench package"),
        (
            "no Docker engine",
            "WARN    this machine cannot grade SWE-bench "
            "predictions: no Docker engine; run the command",
        ),
    ):
        text = doctor.render([doctor.swebench_finding(problem)])[0]
        assert any(ln.startswith(line) for ln in text.splitlines()), text


# -- end to end -----------------------------------------------------------------------------
@pytest.mark.slow
@needs_srt
@pytest.mark.e2e  # shipped_run
def test_every_shipped_mode_runs_a_swebench_task_with_the_stand_in_agent(shipped_run):
    swe, proc = shipped_run
    executed = [line[3:].strip() for line in proc.stdout.splitlines() if line.startswith(".  ")]
    assert f"agent:{BENCH}/raw/{sf.IID}" in executed
    # The nginx stages do not run for this kind: no build, prove, strict or grade.
    assert not [
        t
        for t in executed
        if t.split(":")[0] in ("build", "prove", "strict", "grade", "base", "tests")
    ]
    for mode in SHIPPED_MODES:
        agent = swe.read(mode, sf.IID, "agent.json", run="swe")
        assert (agent["status"], agent["isolation"], agent["tests_tree"]) == (
            "completed",
            "srt",
            None,
        ), (mode, agent["error"])
        for phase in agent["phases"]:
            prompt = (swe.task_dir(mode, sf.IID, "swe") / phase["prompt_file"]).read_text()
            assert "nginx" not in prompt.lower(), (mode, prompt)
        out = (
            swe.task_dir(mode, sf.IID, "swe")
            / agent["phases"][-1 if mode != "plan-verify" else 1]["stdout"]
        ).read_text()
        assert "task file hidden" in out and "TASK FILE READ" not in out, (mode, out)
        patch = swe.read(mode, sf.IID, "patch.json", run="swe")
        assert patch["files"] == ["pycalc/calc.py"], (mode, patch)
        names = {e["path"] for e in patch["left_out"]}
        assert "__pycache__/" in names and ".issue.md" in names, (mode, patch["left_out"])
        assert not (swe.task_dir(mode, sf.IID, "swe") / "grade.json").exists()
        (row,) = read_jsonl(swe.results / "swe" / mode / "results.jsonl")
        assert (row["graded_by"], row["outcome"], row["agent_status"]) == (
            "swebench",
            None,
            "completed",
        )
        assert row["agent_seconds"] > 0 and row["isolation"] == "srt"
    command = swe.cache / "workspaces" / "swe" / "fix-command" / sf.IID / ".claude" / "commands"
    text = (command / "fix-issue.md").read_text()
    assert "nginx" not in text.lower() and "Fix the bug that a user reported" in text
    # The line of each mode's grading command, with the exact arguments.
    pred = swe.results / "swe" / "raw" / "predictions.jsonl"
    rid = f"nginx-eval.swe.raw.{harness.predictions_digest(pred)}"
    # --max_workers: the harness's own default, said to be one, not this machine's cores.
    assert (
        f"{BENCH}:raw: 1 prediction(s) in {pred}; grade them where Docker is: python -m "
        f"swebench.harness.run_evaluation --dataset_name SWE-bench/SWE-bench_Verified "
        f"--split test --predictions_path {pred} --max_workers 4 --run_id {rid} --report_dir "
        f"{swe.results / 'swe' / 'evaluation'} (--max_workers 4 is the harness's default; "
        f"give at most three quarters of the grading machine's cores)"
    ) in proc.stdout.splitlines()
    # AGENT= ran the stand-in, not the mode's model: the predictions do not claim it.
    assert {r["model_name_or_path"] for r in read_jsonl(pred)} == {"nginx-eval/raw"}


@pytest.mark.slow
@pytest.mark.e2e  # shipped_run
@needs_srt
def test_done_when_predictions_the_harness_accepts_graded_and_reported_across_benchmarks(
    shipped_run,
):
    """`doit run swebench-verified:raw` makes a predictions file the official harness accepts;
    its report, written by the harness's own code, is read by `doit run report`, which with
    cross= renders the section over both benchmarks; a new report re-renders the report and
    nothing else. Goes on with the module's run of the shipped modes (report=0: rendered
    below)."""
    swe, _ = shipped_run
    pred = swe.results / "swe" / "raw" / "predictions.jsonl"
    rows = read_jsonl(pred)
    assert harness.prediction_problems(rows) == []
    assert set(rows[0]) == set(harness.PREDICTION_FIELDS) and rows[0]["instance_id"] == sf.IID
    if sf.swebench_importable():
        assert sf.predictions_as_the_harness_reads_them(pred) == rows
    assert "a + b" in rows[0]["model_patch"] and "__pycache__" not in rows[0]["model_patch"]
    report = grade(swe, "raw", run="swe")
    assert json.loads(report.read_text())["resolved_ids"] == [sf.IID]
    # The report reads it: raw is graded, impl (no report yet) is not, and says how.
    _, executed = swe.doit("run", "report", "run=swe")
    assert "report:markdown" in executed
    made = report_json(swe, "swe")
    assert (
        made["modes"]["raw"]["resolved_ids"] == [sf.IID] and "plan-implement" not in made["modes"]
    )
    md = (swe.results / "swe" / "report.md").read_text()
    grading = section(md, "SWE-bench grading")
    assert table_row(grading, "`raw`")[:2] == [f"`{report.name}`", "1 resolved"]
    assert table_row(grading, "`plan-implement`")[0] == "not graded yet"
    assert "--run_id nginx-eval.swe.plan-implement." in grading
    assert (
        "In these commands, --max_workers 4 is the harness's default; give at most three "
        "quarters of the grading machine's cores." in grading
    )
    assert table_row(section(md, "Per task"), sf.IID) == [f"[PASS](raw/{sf.IID}/model.patch)"]
    # SWE-bench's words: one mode graded and one awaiting grading is not "one mode"; a cell
    # links to the patch the harness graded, not to a grade, build log or TAP.
    assert section(md, "Paired comparisons").strip() == (
        "Only `raw` is graded by the official harness yet: nothing to compare until another "
        "is. Awaiting grading: `plan-implement`, `plan-verify`, `fix-command` (the commands are "
        "in SWE-bench grading below)."
    )
    legend = section(md, "Per task").strip().splitlines()[0]
    assert "Each cell links to that task's patch (`model.patch`, what the official harness " in (
        legend
    )
    assert not any(w in legend for w in ("build log", "TAP", "grade;"))
    # Nothing changed: nothing runs. A new report: the report again, and nothing else.
    _, executed = swe.doit("run", "report", "run=swe")
    assert executed == []
    grade(swe, "plan-implement", run="swe")
    _, executed = swe.doit("run", "report", "run=swe")
    assert executed[0] == "report:markdown" and all(
        t.startswith(("report", "site")) for t in executed
    )
    assert report_json(swe, "swe")["modes"]["plan-implement"]["resolved_ids"] == [sf.IID]
    # The nginx benchmark with the same modes (on tiny-add: one task a benchmark makes the
    # pooled section), and one report over both.
    swe.doit("run", "tiny:raw", "tiny:plan-implement", "run=ngx", "instances=tiny-add", "report=0")
    _, executed = swe.doit("run", "report", "run=ngx", "cross=swe")
    assert "report:markdown" in executed
    cross = report_json(swe, "ngx")["cross"]
    assert [(b["benchmark"], b["kind"], b["tasks"]) for b in cross["benchmarks"]] == [
        ("tiny", "nginx", 1),
        (BENCH, "swebench", 1),
    ]
    raw = next(m for m in cross["modes"] if m["mode"] == "raw")
    assert [(c["n"], c["rate"]) for c in raw["cells"]] == [(1, 1.0), (1, 1.0)]
    assert all(c["seconds_per_task"] > 0 for c in raw["cells"])
    (pair,) = cross["pairs"]
    assert (pair["a"], pair["b"]) == ("raw", "plan-implement")
    assert [c["time_ratio"]["tasks"] for c in pair["cells"]] == [1, 1]
    assert pair["pooled"]["tasks"] == 2 and pair["pooled"]["p_value"] == 1.0
    text = section((swe.results / "ngx" / "report.md").read_text(), "Across benchmarks")
    assert "`tiny` (nginx, 1 task) and `swebench-verified` (swebench, 1 task)" in text
    assert table_row(text, "`raw`")[0] == "100.0% [20.6, 100.0]"


@pytest.mark.slow
def test_bad_evaluation_input_is_one_line_each_and_nothing_else_is_lost(swe):
    """gold and none (no agent): their reports read; then a report naming a task the file does
    not have, a second report, a report of older predictions, an error_ids instance."""
    swe.doit("run", f"{BENCH}:gold", f"{BENCH}:none", "run=b")
    gold = grade(swe, "gold", run="b")
    none = grade(swe, "none", run="b")
    assert json.loads(none.read_text())["empty_patch_ids"] == [sf.IID]
    swe.render("run=b")
    made = report_json(swe, "b")
    assert made["modes"]["gold"]["resolved_ids"] == [sf.IID]
    # An empty patch counts as unresolved (scored, in the denominator).
    assert made["modes"]["none"]["outcomes"] == {sf.IID: "unresolved"}

    def warnings():
        swe.render("run=b")
        md = (swe.results / "b" / "report.md").read_text()
        return [line[2:] for line in section(md, "Warnings").splitlines() if line.startswith("- ")]

    # Ids that are not tasks of the task file: one line, the rest scored.
    data = json.loads(gold.read_text())
    gold.write_text(
        json.dumps(
            dict(
                data,
                resolved_ids=data["resolved_ids"] + ["ghost-1"],
                submitted_ids=data["submitted_ids"] + ["ghost-1"],
            )
        )
    )
    ghost = (
        f"mode gold: {gold.name} names 1 instance(s) that are not tasks of "
        f"swebench-verified.json: ghost-1; not scored"
    )
    assert warnings() == [ghost]
    assert report_json(swe, "b")["modes"]["gold"]["resolved_ids"] == [sf.IID]
    # A stray file with a report's name beside it: set aside before a report is chosen (it made
    # the real one "one of 2 reports", and unused).
    stray = gold.with_name("nginx-eval__gold.notes.json")
    stray.write_text('{"note": "graded on the big machine"}\n')
    assert warnings() == [
        f"mode gold: {stray.name} is not used: no list of ids 'submitted_ids': not a report "
        f"of swebench.harness.run_evaluation",
        ghost,
    ]
    assert report_json(swe, "b")["modes"]["gold"]["resolved_ids"] == [sf.IID]
    stray.unlink()
    # gold is the row's gold patch here, not a fix commit's diff.
    md = (swe.results / "b" / "report.md").read_text()
    assert table_row(section(md, "Modes"), "`gold`") == [
        "gold",
        "—",
        "the dataset's gold patch (the row's `patch`; upper bound)",
    ]
    # A second report of the same predictions: one line, the mode not graded; none is kept.
    second = gold.with_name(gold.name.split(".nginx-eval.")[0] + ".my-own-run.json")
    shutil.copy(gold, second)
    assert warnings() == [
        f"mode gold: 2 reports grade its current predictions ({second.name}, "
        f"{gold.name}); none is used: remove all but one from "
        f"{swe.results / 'b' / 'evaluation'}"
    ]
    made = report_json(swe, "b")
    assert "gold" not in made["modes"] and made["modes"]["none"]["outcomes"] == {
        sf.IID: "unresolved"
    }
    second.unlink()
    # An evaluation error is not scored.
    none.write_text(
        json.dumps(dict(json.loads(none.read_text()), empty_patch_ids=[], error_ids=[sf.IID]))
    )
    assert warnings() == [ghost]
    none_mode = report_json(swe, "b")["modes"]["none"]
    assert (none_mode["outcomes"], none_mode["resolved_interval"]) == ({sf.IID: EVAL_ERROR}, None)
    assert none_mode["error_ids"] == [sf.IID] and none_mode["outcome_counts"]["resolved"] == 0
    # A report older than its predictions: the predictions change (another gold patch, as a
    # re-imported task would give), the old report is not used, and the report says how to
    # grade them again.
    tasks = swe.root / "tasks" / "swebench-verified.json"
    data = json.loads(tasks.read_text())
    data["tasks"][0]["patch"] += "\n"
    tasks.write_text(json.dumps(data))
    swe.doit("run", f"{BENCH}:gold", "run=b")
    said = warnings()
    digest = harness.predictions_digest(swe.results / "b" / "gold" / "predictions.jsonl")
    assert said[0] == (
        f"mode gold: {gold.name} is not used: its run id "
        f"{gold.name.split('.json')[0].split('__gold.')[1]} names other "
        f"predictions than the current ones ({digest}); grade the current "
        f"predictions again (the command is in the SWE-bench section)"
    )
    md = (swe.results / "b" / "report.md").read_text()
    assert f"--run_id nginx-eval.b.gold.{digest}" in section(md, "SWE-bench grading")
    assert gold.exists()  # nothing deleted


@pytest.mark.slow
@needs_srt
def test_the_real_cli_on_a_swebench_task_its_prompt_its_cost_its_patch(claude, tmp_path):
    project = claude.project
    project.swe = sf.add_swebench(project)
    claude.api.script = {RAW: [[say("Fixing it."), call("Bash", command=sf.FIX)], [say("Fixed.")]]}
    project.doit("run", f"{BENCH}:raw")
    agent = project.read("raw", sf.IID, "agent.json")
    assert (agent["status"], agent["isolation"]) == ("completed", "srt"), agent["error"]
    (request, *_) = claude.api.messages_requests(RAW)
    assert sf.STATEMENT in json.dumps(request["body"])
    assert "nginx" not in json.dumps(request["body"]).lower()
    assert agent["cost_usd"] == pytest.approx(sonnet_cost(claude.usages(RAW)), rel=1e-6)
    (row,) = read_jsonl(project.results / "default" / "raw" / "results.jsonl")
    assert row["cost_usd"] == agent["cost_usd"] and row["tokens"] == agent["tokens"]
    # The command that ran was given the mode's model: the predictions name it.
    (pred,) = read_jsonl(project.results / "default" / "raw" / "predictions.jsonl")
    assert pred["model_name_or_path"] == "nginx-eval/raw/claude-sonnet-4-5"
    report = grade(project, "raw")
    assert json.loads(report.read_text())["resolved_ids"] == [sf.IID]
    assert report.name.startswith("nginx-eval__raw__claude-sonnet-4-5.nginx-eval.default.raw.")


@pytest.mark.slow
def test_the_cross_benchmark_section_pools_the_mode_differences(swe):
    """Two predictions modes on both benchmarks: `pa` has every gold patch, `pb` only tiny-add's.
    Within each benchmark `pa` resolves one task more; pooled, two tasks only `pa` resolves."""
    mirror, c = swe.mirrors / "acme+tiny", swe.commits
    gold = {
        "tiny-add": fixture_diff(mirror, c["c_add_bug"], c["c_add_fix"]),
        "tiny-mul": fixture_diff(mirror, c["c_mul_bug"], c["c_mul_fix"]),
        sf.IID: swe.swe["gold"],
    }
    for name, keep in (("pa", set(gold)), ("pb", {"tiny-add"})):
        (swe.root / f"{name}.jsonl").write_text(
            "".join(
                json.dumps(
                    {
                        "instance_id": i,
                        "model_name_or_path": name,
                        "model_patch": patch if i in keep else "",
                    }
                )
                + "\n"
                for i, patch in gold.items()
            )
        )
    (swe.root / "modes.toml").write_text(
        '[modes.pa]\npredictions = "pa.jsonl"\n[modes.pb]\npredictions = "pb.jsonl"\n'
    )
    swe.doit("run", "tiny:pa", "tiny:pb", "run=ngx")
    swe.doit("run", f"{BENCH}:pa", f"{BENCH}:pb", "run=swe")
    grade(swe, "pa", run="swe")
    grade(swe, "pb", run="swe")
    swe.render("run=ngx", "cross=swe")
    cross = report_json(swe, "ngx")["cross"]
    (pair,) = cross["pairs"]
    assert (pair["a"], pair["b"]) == ("pa", "pb")
    assert [(c["tasks"], c["a_only"], c["b_only"], c["difference"]) for c in pair["cells"]] == [
        (2, 1, 0, 0.5),
        (1, 1, 0, 1.0),
    ]
    expected = stats.cmh_paired([([1, 1], [1, 0]), ([1], [0])])
    pooled = pair["pooled"]
    assert (pooled["tasks"], pooled["a_only"], pooled["b_only"]) == (3, 2, 0)
    assert pooled["statistic"] == pytest.approx(expected["statistic"]) == pytest.approx(2.0)
    assert pooled["p_value"] == pytest.approx(expected["p_value"], abs=1e-8)
    assert pooled["p_holm"] == pooled["p_value"] and pooled["p_exact"] == 0.5
    assert pooled["odds_ratio"] is None and pooled["homogeneity_p"] == 1.0
    assert pair["cells"][0]["time_ratio"] is None  # no agent: no time to compare
    text = section((swe.results / "ngx" / "report.md").read_text(), "Across benchmarks")
    row = table_row(text, "`pa`")
    assert row[:2] == ["100.0% [34.2, 100.0]", "2"] and row[4:6] == ["100.0% [20.6, 100.0]", "1"]
    assert table_row(text, "`pb`")[4] == "0.0% [0.0, 79.3]"
    # The other run must hold the other benchmark, and be a run.
    for other, said in (
        ("ngx", "cross=ngx: that is this run; name a run of the other benchmark"),
        ("nope", f"cross=nope: no run.json in {swe.results / 'nope'}: not a run"),
    ):
        proc, _ = swe.doit("run", "report", "run=ngx", f"cross={other}", check=False)
        assert proc.returncode != 0 and proc.stderr.splitlines() == [f"nginx-eval: error: {said}"]


def fixture_diff(mirror, base, fix):
    from fixture_repos import git

    return git(mirror, "diff", base, fix) + "\n"
