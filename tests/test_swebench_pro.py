"""SWE-bench Pro (public) beside SWE-bench Verified (issue 52, item 3): the importer on real rows
(where SWEBENCH_PRO_ROWS names an export of them) and on bad ones, the files and command of the
Pro harness, its results read back, and on the fixture project (tests/swebench_fixture.py's
acme/pycalc as a Pro row) the agent stage with the stand-in agent, the harness's evaluation
without Docker, the report and the cross-benchmark section beside nginx."""

import collections
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import swebench_fixture as sf
from conftest import SOURCE_ROOT, patched_environ, script_module, section, table_row

from nginx_eval.core.errors import UserError
from nginx_eval.core.layout import Layout
from nginx_eval.report.evaluation import evaluate
from nginx_eval.run.benchmark import load_benchmark
from nginx_eval.run.record import check_cross
from nginx_eval.run.swebench_pro import DATASET, plain_text, statement
from nginx_eval.swebench import harness, pro
from nginx_eval.swebench.stage import write_pro_files

IMPORT = SOURCE_ROOT / "scripts" / "import_swebench.py"
BENCH = "swebench-pro"
# The 100 public rows of data/swebench_pro_sample_100.jsonl (docs/benchmark.md#swe-bench-pro).
REAL_SHA256 = "945f20ade30e555b3d0d98b850e3e84f8f9e9d316bc79fe5e558b94b52a71e14"
REAL_LANGUAGES = {"python": 42, "go": 36, "js": 17, "ts": 5}
# The official harness (docs/development.md): a checkout of scaleapi/SWE-bench_Pro-os or a bare
# clone of it, where SWEBENCH_PRO_HARNESS names one.
HARNESS = Path(os.environ.get("SWEBENCH_PRO_HARNESS") or "/nonexistent/SWE-bench_Pro-os")
needs_harness = pytest.mark.skipif(
    not HARNESS.exists(),
    reason="no checkout of the SWE-bench Pro harness: set SWEBENCH_PRO_HARNESS to a checkout (or "
    "bare clone) of scaleapi/SWE-bench_Pro-os (docs/development.md)",
)
# A Python instance of the harness (at pro.HARNESS_COMMIT) whose run_script.sh, parser.py and
# Dockerfiles the fixture's instance borrows: the harness has none for acme/pycalc.
HARNESS_PYTHON_IID = (
    "instance_internetarchive__openlibrary-53e02a22972e9253aeded0e1981e6845e1e521fe"
    "-vfa6ff903cb27f336e17654595dd900fa943dcd91"
)


def run_import(rows_path, out, *extra):
    return subprocess.run(
        [sys.executable, str(IMPORT), "--pro", "--rows", str(rows_path), "--out", str(out), *extra],
        capture_output=True,
        text=True,
    )


@pytest.fixture(scope="module")
def real_rows():
    if not sf.PRO_ROWS.is_file():
        pytest.skip(sf.needs_pro_rows.kwargs["reason"])
    return [json.loads(line) for line in sf.PRO_ROWS.read_text().splitlines() if line.strip()]


def test_the_real_rows_import_whole_by_language(tmp_path, real_rows):
    """Every real row maps onto a task; the agent's statement is the official scaffold's."""
    out = tmp_path / "swebench-pro.json"
    done = run_import(sf.PRO_ROWS, out)
    assert done.returncode == 0, done.stderr
    bench = load_benchmark(out)
    assert bench.dataset == DATASET and len(bench.tasks) == len(real_rows)
    by_language = collections.Counter(t.language for t in bench.tasks)
    if hashlib.sha256(sf.PRO_ROWS.read_bytes()).hexdigest() == REAL_SHA256:
        assert by_language == REAL_LANGUAGES
    assert set(by_language) <= {"python", "go", "js", "ts"}
    row, task = real_rows[0], bench.tasks[0]
    assert task.problem_statement == statement(row)
    assert task.problem_statement.startswith(row["problem_statement"])
    assert "\n\nNew interfaces introduced:\n" in task.problem_statement
    assert list(task.selected_test_files) and task.before_repo_set_cmd.startswith("git reset")
    # The rows whose texts the dataset JSON-serialized give the agent the texts themselves.
    serialized = [
        (r, t)
        for r, t in zip(real_rows, bench.tasks, strict=True)
        if r["problem_statement"].startswith('"')
    ]
    if hashlib.sha256(sf.PRO_ROWS.read_bytes()).hexdigest() == REAL_SHA256:
        assert len(serialized) == 36
    for r, t in serialized:
        assert t.problem_statement.startswith(json.loads(r["problem_statement"]) + "\n\n")
        assert t.problem_statement.endswith("\n" + json.loads(r["interface"]))
    # The same rows as the CSV the harness reads import the same; --languages keeps a part.
    path = tmp_path / "rows.csv"
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(real_rows[0]))
        writer.writeheader()
        writer.writerows(real_rows)
    again = tmp_path / "again.json"
    assert run_import(path, again).returncode == 0
    assert json.loads(again.read_text())["tasks"] == json.loads(out.read_text())["tasks"]
    go = tmp_path / "go.json"
    assert run_import(sf.PRO_ROWS, go, "--languages", "go").returncode == 0
    assert len(load_benchmark(go).tasks) == by_language["go"]


@pytest.mark.parametrize(
    "field, value, said",
    [
        ("repo_language", "rust", "must be one of python, go, js, ts, got 'rust'"),
        ("fail_to_pass", "[tests/x", "must be a list of strings (or its JSON or Python text)"),
        ("fail_to_pass", "[]", "must name at least one test"),
        ("before_repo_set_cmd", None, "is missing"),
        ("selected_test_files_to_run", "[1]", "must be a list of strings, got list"),
        ("base_commit", "abc", "must be a full 40-hex commit hash, got 'abc'"),
    ],
)
def test_a_bad_row_is_one_line_naming_file_row_and_field(tmp_path, field, value, said):
    """Of real rows where present, else the fixture's: one bad row is one line naming the file,
    the row, the task and the field; nothing is written."""
    row = (
        json.loads(sf.PRO_ROWS.read_text().splitlines()[0])
        if sf.PRO_ROWS.is_file()
        else sf.pro_row({"p_base": "a" * 40, "gold": "diff", "test_patch": ""}, "b" * 40)
    )
    bad = dict(row, **{field: value})
    if value is None:
        del bad[field]
    path = tmp_path / "pro.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps(bad) + "\n")
    out = tmp_path / "swebench-pro.json"
    done = run_import(path, out)
    assert done.returncode == 1 and not out.exists()
    assert done.stderr.splitlines() == [
        f"import_swebench: {path}, task {row['instance_id']}, line 2, field {field}: {said}",
        f"import_swebench: 1 bad row(s); {out} not written (--skip-bad writes the other 1)",
    ]


def test_the_harness_files_command_and_results(tmp_path):
    """patches.json's rows, the command's words, and eval_results.json read as a report: false
    with an output is unresolved, false without one an evaluation error."""
    assert pro.patch_problems([{"instance_id": "a", "patch": "", "prefix": "p"}]) == []
    assert pro.patch_problems([{"instance_id": "a", "model_patch": ""}])[0].startswith("row 1")
    out = tmp_path / "evaluation" / "nginx-eval.r.raw.0123456789ab"
    words = pro.grading_command(tmp_path / "s.jsonl", tmp_path / "p.json", out)
    assert words == [
        "python",
        "swe_bench_pro_eval.py",
        f"--raw_sample_path={tmp_path / 's.jsonl'}",
        f"--patch_path={tmp_path / 'p.json'}",
        f"--output_dir={out}",
        "--scripts_dir=run_scripts",
        "--num_workers=4",
        "--dockerhub_username=jefzda",
    ]
    out.mkdir(parents=True)
    (out / "eval_results.json").write_text(json.dumps({"a": True, "b": False, "c": False}))
    (out / "b").mkdir()
    (out / "b" / "nginx-eval.r.raw_output.json").write_text('{"tests": []}')
    found = pro.results_of(tmp_path / "evaluation", "r", "raw")
    assert found == [(out / "eval_results.json", out.name)]
    assert harness.digest_of_run_id(out.name) == "0123456789ab"
    report = pro.read_results(out / "eval_results.json")
    assert harness.verdicts(report) == {"a": "resolved", "b": "unresolved", "c": "error"}
    (out / "eval_results.json").write_text('{"a": "yes"}')
    with pytest.raises(ValueError, match="not the eval_results.json of swe_bench_pro_eval.py"):
        pro.read_results(out / "eval_results.json")


@pytest.fixture
def pro_project(project):
    """The fixture project with the Pro task, the shipped modes and the stand-in agent."""
    project.swe_commits = sf.make_pycalc(project.mirrors / "acme+pycalc")
    project.pro = sf.add_swebench_pro(project, project.swe_commits)
    shutil.copy(SOURCE_ROOT / "modes.toml", project.root / "modes.toml")
    project.env["AGENT"] = sf.stand_in_agent(
        project.base, project.root / "tasks" / "swebench-pro.json"
    )
    return project


def test_pro_runs_to_the_harness_s_files_and_reads_back_beside_nginx(pro_project):
    """`doit run swebench-pro:raw` with the stand-in agent: the agent gets the scaffold's
    statement, patches.json and samples.jsonl are what swe_bench_pro_eval.py reads and the exact
    command is printed; the harness's results (its flow, without Docker) are read by the report,
    and cross= sets the Pro run beside an nginx run."""
    p = pro_project
    proc, _ = p.doit("run", f"{BENCH}:raw", f"{BENCH}:gold", "run=pro", "report=0")
    mode = p.results / "pro" / "raw"
    patches = json.loads((mode / "patches.json").read_text())
    assert pro.patch_problems(patches) == []
    assert [(e["instance_id"], e["prefix"]) for e in patches] == [
        (sf.PRO_IID, "nginx-eval.pro.raw")
    ]
    assert "a + b" in patches[0]["patch"] and "__pycache__" not in patches[0]["patch"]
    (sample,) = [json.loads(line) for line in (mode / "samples.jsonl").read_text().splitlines()]
    assert set(sample) == set(pro.SAMPLE_FIELDS)
    assert json.loads(sample["fail_to_pass"]) == ["tests/test_calc.py::test_add"]
    assert sample["before_repo_set_cmd"] == p.pro["before_repo_set_cmd"]
    digest = harness.predictions_digest(mode / "patches.json")
    out = p.results / "pro" / "evaluation" / f"nginx-eval.pro.raw.{digest}"
    command = harness.command_line(
        pro.grading_command(mode / "samples.jsonl", mode / "patches.json", out)
    )
    assert command in proc.stdout + proc.stderr
    agent = json.loads((mode / sf.PRO_IID / "agent.json").read_text())
    assert agent["status"] == "completed", agent["error"]
    prompt = (mode / sf.PRO_IID / agent["phases"][0]["prompt_file"]).read_text()
    assert "Requirements:\n- `add(a, b)` must return the sum" in prompt
    assert "task file hidden" in (mode / sf.PRO_IID / agent["phases"][0]["stdout"]).read_text()
    # Graded as the harness grades (raw resolves; gold is graded with an error), read back.
    sf.grade_pro_locally(
        mode / "samples.jsonl", mode / "patches.json", out, p.mirrors / "acme+pycalc", p.base
    )
    assert json.loads((out / "eval_results.json").read_text()) == {sf.PRO_IID: True}
    gold = p.results / "pro" / "gold"
    gold_out = (
        p.results
        / "pro"
        / "evaluation"
        / f"nginx-eval.pro.gold.{harness.predictions_digest(gold / 'patches.json')}"
    )
    sf.grade_pro_locally(
        gold / "samples.jsonl",
        gold / "patches.json",
        gold_out,
        p.mirrors / "acme+pycalc",
        p.base,
        errors={sf.PRO_IID},
    )
    p.render("run=pro")
    made = json.loads((p.results / "pro" / "report.json").read_text())
    assert made["modes"]["raw"]["resolved_ids"] == [sf.PRO_IID]
    assert made["modes"]["gold"]["error_ids"] == [sf.PRO_IID]
    md = (p.results / "pro" / "report.md").read_text()
    grading = section(md, "SWE-bench grading")
    assert "SWE-bench Pro rows" in grading and "swe_bench_pro_eval.py" in grading
    assert table_row(grading, "`raw`")[:2] == [f"`{out.name}/eval_results.json`", "1 resolved"]
    # Pro mixes bug fixes and features: its tasks are not all called fixes.
    assert "tests of their SWE-bench Pro rows (fail_to_pass" in md
    assert "wrote with their fixes" not in md
    # One report over nginx, Verified (the same bug as a Verified row, graded in its official
    # format) and Pro.
    rows = p.base / "verified.jsonl"
    rows.write_text(json.dumps(sf.dataset_row(p.swe_commits)) + "\n")
    verified = p.root / "tasks" / "swebench-verified.json"
    done = subprocess.run(
        [sys.executable, str(IMPORT), "--rows", str(rows), "--out", str(verified)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    p.doit("run", "swebench-verified:raw", "run=swe", "report=0")
    pred = p.results / "swe" / "raw" / "predictions.jsonl"
    sf.grade_locally(
        pred,
        [sf.dataset_row(p.swe_commits)],
        harness.run_id("swe", "raw", harness.predictions_digest(pred)),
        p.results / "swe" / "evaluation",
        p.mirrors / "acme+pycalc",
        p.base / "grading-swe",
    )
    p.doit("run", "tiny:raw", "run=ngx", "report=0")
    p.render("run=ngx", "cross=swe,pro")
    cross = json.loads((p.results / "ngx" / "report.json").read_text())["cross"]
    assert [(b["benchmark"], b["kind"], b["tasks"]) for b in cross["benchmarks"]] == [
        ("tiny", "nginx", 2),
        ("swebench-verified", "swebench", 1),
        (BENCH, "swebench", 1),
    ]
    raw = next(m for m in cross["modes"] if m["mode"] == "raw")
    assert [(c["benchmark"], c["n"], c["rate"]) for c in raw["cells"]] == [
        ("tiny", 2, 1.0),
        ("swebench-verified", 1, 1.0),
        (BENCH, 1, 1.0),
    ]
    text = section((p.results / "ngx" / "report.md").read_text(), "Across benchmarks")
    assert text.strip().startswith(
        "Run `ngx` beside runs `swe,pro`: `tiny` (nginx, 2 tasks), `swebench-verified` "
        "(swebench, 1 task) and `swebench-pro` (swebench, 1 task),"
    )
    # Two runs of one benchmark are refused, naming both (before any work: run/record.py).
    layout = Layout(p.root, p.cache, p.results, "ngx")
    with patched_environ(p.env), pytest.raises(UserError) as refused:
        check_cross(layout, "pro,pro")
    assert str(refused.value) == (
        "cross=pro,pro: runs pro and pro both hold benchmark 'swebench-pro'; name one run of "
        "each other benchmark"
    )


def test_evaluate_reads_a_pro_mode_by_its_patches_digest(tmp_path):
    """A grading of other patches than the current ones is stale: not used, and said."""
    layout = Layout(tmp_path, tmp_path / "cache", tmp_path / "results", "r")
    mode = layout.mode_dir("raw")
    mode.mkdir(parents=True)
    (mode / "predictions.jsonl").write_text("")
    (mode / "patches.json").write_text('[{"instance_id": "a", "patch": "", "prefix": "x"}]\n')
    stale = layout.evaluation_dir / "nginx-eval.r.raw.000000000000"
    stale.mkdir(parents=True)
    (stale / "eval_results.json").write_text('{"a": true}')
    bench = type("B", (), {"dataset": DATASET, "tasks": (), "path": tmp_path / "t.json"})()
    got = evaluate(layout, bench, {"raw": {"a": {"outcome": None}}}, {"raw": "cmd"})  # type: ignore[arg-type]
    assert got.rows == {}
    assert got.warnings == [
        f"mode raw: {stale.name}/eval_results.json is not used: its run id {stale.name} names "
        f"other predictions than the current ones "
        f"({harness.predictions_digest(mode / 'patches.json')}); grade the current predictions "
        f"again (the command is in the SWE-bench section)"
    ]


@pytest.mark.e2e  # the doctor starts the sandbox to check it (under a second)
def test_the_doctor_says_where_pro_is_graded(tmp_path):
    """A Pro benchmark's doctor names the Pro harness, not Docker and the swebench package."""
    import io

    from nginx_eval.checks import doctor

    commits = {"p_base": "a" * 40, "gold": "diff", "test_patch": ""}
    rows = tmp_path / "pro.jsonl"
    rows.write_text(json.dumps(sf.pro_row(commits, "b" * 40)) + "\n")
    assert run_import(rows, tmp_path / "swebench-pro.json").returncode == 0
    bench = load_benchmark(tmp_path / "swebench-pro.json")
    out = io.StringIO()
    layout = Layout(tmp_path, tmp_path / "cache", tmp_path / "results")
    doctor.check(layout, bench.tasks, out=out, bench=BENCH, kind="swebench", remote=lambda u: None)
    said = [line for line in out.getvalue().splitlines() if "SWE-bench Pro" in line]
    assert said == [f"WARN    {doctor.PRO_FINDING.note}"]
    assert "swe_bench_pro_eval.py in a checkout of scaleapi/SWE-bench_Pro-os" in said[0]


def test_the_doctor_points_a_pro_repository_to_pro_s_section(tmp_path, monkeypatch):
    """A Pro task's repository that could not be cloned was sent to Verified's section."""
    import dataclasses

    from test_docs import anchors

    from nginx_eval.checks import doctor
    from nginx_eval.run.swebench import SweTask

    monkeypatch.setenv("NGINX_EVAL_REPO_URL", str(tmp_path / "{owner}+{name}"))
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    verified = SweTask(
        "acme__gone-1", "acme/gone", "0" * 40, "It fails.", "1.0", ("t",), (), "", ""
    )
    go = dataclasses.replace(verified, instance_id="acme__lost-1", repo="acme/lost", language="go")
    found = doctor.repository_findings(layout, [verified, go], lambda url: "unreachable")
    assert [(f.what, f.note) for f in found] == [
        (
            "acme/gone",
            f"{tmp_path / 'acme+gone'}: unreachable (set NGINX_EVAL_REPO_URL to a mirror that "
            "has it; docs/benchmark.md#swe-bench-verified)",
        ),
        (
            "acme/lost",
            f"{tmp_path / 'acme+lost'}: unreachable (set NGINX_EVAL_REPO_URL to a mirror that "
            "has it; docs/benchmark.md#swe-bench-pro)",
        ),
    ]
    sections = anchors((SOURCE_ROOT / "docs" / "benchmark.md").read_text())
    assert {"swe-bench-verified", "swe-bench-pro"} <= sections
    pro_text = (SOURCE_ROOT / "docs" / "benchmark.md").read_text().split("## SWE-bench Pro")[1]
    assert "CANNOT\nCLONE" in pro_text or "CANNOT CLONE" in pro_text


def test_serialized_texts_reach_the_agent_as_written():
    """Rows whose problem_statement, requirements and interface the dataset holds JSON-serialized
    (36 of the 100 public rows) give the agent the text itself, not a quoted line of \\n."""
    text = '## Title\n\nThe `/api/v3/users/[uid]` call says "hi".'
    row = {
        "problem_statement": json.dumps(text),
        "requirements": json.dumps("- one\n- two"),
        "interface": "No new interfaces are introduced.",
    }
    assert statement(row) == (
        f"{text}\n\nRequirements:\n- one\n- two\n\nNew interfaces introduced:\n"
        "No new interfaces are introduced."
    )
    for kept in ('"quoted" and more "', '"', '"not json\\x"', "plain", '"[1, 2]"'):
        assert plain_text(kept) == (kept if kept != '"[1, 2]"' else "[1, 2]")
    assert plain_text(json.dumps(["a"])) == json.dumps(["a"])


def checker():
    """scripts/check_swebench_pro.py as a module."""
    return script_module("check_swebench_pro")


@needs_harness
def test_the_harness_s_own_code_reads_the_files_and_applies_the_patch(tmp_path):
    """patches.json and samples.jsonl as the results stage writes them for the fixture's Pro row,
    given to swe_bench_pro_eval.py's own main() (pandas, eval of the lists, its scripts and
    entry script), its evaluation stopped where the container starts; the entry script's lines
    up to the test run applied to the base leave the gold tree. A patch that does not apply, and
    an instance without scripts, fail the check, each saying which."""
    check = checker()
    mirror = tmp_path / "acme+pycalc"
    commits = sf.make_pycalc(mirror)
    bench = load_benchmark_of(
        tmp_path, sf.pro_row(commits, sf.add_pro_tests_commit(mirror, commits))
    )
    layout = Layout(tmp_path, tmp_path / "cache", tmp_path / "results", "r")
    mode = SimpleNamespace(name="raw")
    preds = [{"instance_id": sf.PRO_IID, "model_patch": commits["gold"]}]
    write_pro_files(layout, mode, bench, preds)  # type: ignore[arg-type]
    # The harness's own files, and the borrowed scripts under the fixture's instance id.
    source, _ = check.harness_dir(HARNESS.resolve(), [HARNESS_PYTHON_IID], tmp_path / "export")
    own = tmp_path / "harness"
    for name in check.HARNESS_FILES:
        (own / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source / name, own / name)
    for pattern in check.INSTANCE_PATHS:
        shutil.copytree(
            source / pattern.format(HARNESS_PYTHON_IID), own / pattern.format(sf.PRO_IID)
        )
    tasks = {t.instance_id: t for t in bench.tasks}
    got = check.check_files(
        own, layout.mode_dir("raw"), tmp_path / "w", lambda r: str(mirror), tasks
    )
    (result,) = got["instances"]
    assert result["ok"], result
    assert set(result["checks"]) == {
        "reached", "fields_kept", "lists_evaluate", "scripts_found", "binary_hunks_kept",
        "entry_steps_pass", "patch_applies", "tree_is_gold_tree",
    }  # fmt: skip
    assert got["eval_results_ids"] == [sf.PRO_IID]
    assert f"Evaluation for {sf.PRO_IID} returned None" in got["printed"]
    assert [s["line"].split()[:2] for s in result["steps"]] == [
        ["cd", "/app"], ["git", "reset"], ["git", "checkout"], ["git", "apply"], ["git", "checkout"]
    ]  # fmt: skip
    assert result["image"] == "jefzda/sweap-images:acme.pycalc-acme__pycalc-" + "0" * 40
    # A patch whose context is not at the base: the harness's git apply fails, and the tree is
    # not compared.
    bad = [
        {"instance_id": sf.PRO_IID, "model_patch": commits["gold"].replace("return a", "return b")}
    ]
    write_pro_files(layout, mode, bench, bad)  # type: ignore[arg-type]
    got = check.check_files(
        own, layout.mode_dir("raw"), tmp_path / "w2", lambda r: str(mirror), tasks
    )
    (result,) = got["instances"]
    assert not result["ok"] and not result["checks"]["patch_applies"]
    assert result["steps"][-1]["line"].startswith("git apply -v") and result["steps"][-1]["exit"]
    assert "tree_is_gold_tree" not in result["checks"]
    # An instance the harness has no scripts for.
    shutil.rmtree(own / "run_scripts" / sf.PRO_IID)
    got = check.check_files(
        own, layout.mode_dir("raw"), tmp_path / "w3", lambda r: str(mirror), tasks
    )
    (result,) = got["instances"]
    assert result["checks"]["scripts_found"] is False and "run_script.sh" in result["missing"]


def test_depth_one_copies_hold_the_rows_commits_alone(tmp_path, monkeypatch):
    """check_swebench_pro.py --depth-one: per repository a copy holding each row's base and the
    fix its before_repo_set_cmd names, without their history, from NGINX_EVAL_REPO_URL."""
    check = checker()
    mirror = tmp_path / "mirrors" / "acme+pycalc"
    commits = sf.make_pycalc(mirror)
    fix = sf.add_pro_tests_commit(mirror, commits)
    task = load_benchmark_of(tmp_path, sf.pro_row(commits, fix)).tasks[0]
    monkeypatch.setenv("NGINX_EVAL_REPO_URL", str(tmp_path / "mirrors" / "{owner}+{name}"))
    template = check.depth_one_copies([task], tmp_path / "work")
    copy = Path(template.format(owner="acme", name="pycalc"))
    heads = subprocess.run(
        ["git", "--git-dir", str(copy), "for-each-ref", "--format=%(objectname)"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert sorted(heads) == sorted([commits["p_base"], fix])
    assert sorted((copy / "shallow").read_text().split()) == sorted(heads)
    log = subprocess.run(
        ["git", "--git-dir", str(copy), "rev-list", "--all"], capture_output=True, text=True
    )
    assert sorted(log.stdout.split()) == sorted(heads)  # no parent came with them


def load_benchmark_of(tmp_path, row):
    """The benchmark of a task file imported from the one Pro row `row`."""
    rows = tmp_path / "row.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    out = tmp_path / "one.json"
    done = run_import(rows, out)
    assert done.returncode == 0, done.stderr
    return load_benchmark(out)
