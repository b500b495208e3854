"""scripts/promote_tasks.py: valid candidates with a statement join a benchmark file, with the
assertions their validation derived; every other candidate is one line saying why not. Last, the
whole flow on the fixture project: a candidates file runs its validation and nothing else, and
what its validation derives is promoted into a file the loader accepts."""

import datetime
import json
import subprocess
import sys

import pytest
from conftest import SOURCE_ROOT, script_module

from nginx_eval.checks.validate import classify, validation_config
from nginx_eval.core import jsonio, stamps
from nginx_eval.core.layout import Layout
from nginx_eval.run.benchmark import load_benchmark, parse_task

SCRIPT = SOURCE_ROOT / "scripts" / "promote_tasks.py"
RUN = "mine"


def promote_module():
    return script_module("promote_tasks")


def stub(iid, fix_date, **changes):
    """A task as scripts/mine_tasks.py writes it."""
    return dict(
        {
            "instance_id": iid,
            "repo": "nginx/nginx",
            "test_repo": "nginx/nginx-tests",
            "base_commit": "a" * 40,
            "fix_commit": "b" * 40,
            "fix_date": fix_date,
            "test_commit": "c" * 40,
            "test_files": ["a.t"],
            "configure_flags": [],
            "fail_to_pass": [],
            "pass_to_pass": [],
            "problem_statement": "TODO",
            "perl_modules": [],
            "area": "http",
            "gold_size": {"files": 1, "lines_added": 2, "lines_removed": 1},
            "notes": "score 9.0 (todo 1.27.1)",
        },
        **changes,
    )


BUG = {"a.t:1 body": False, "a.t:2 status": True}  # one run without the fix
FIXED = {"a.t:1 body": True, "a.t:2 status": True}  # one run with it
CANDIDATES = [
    stub("c-late", "2025-03-01"),
    stub("c-early-b", "2024-01-02"),
    stub("c-early-a", "2024-01-02"),
    stub("c-flaky", "2024-05-01"),
    stub("c-silent", "2024-05-02"),
    stub("c-unvalidated", "2024-05-03"),
    stub("c-changed", "2024-05-04"),
    stub("c-present", "2024-05-05"),
]
STATEMENTS = {
    i: f"{i}: responses lose their body"
    for i in (
        "c-late",
        "c-early-b",
        "c-early-a",
        "c-flaky",
        "c-unvalidated",
        "c-changed",
        "c-present",
    )
}
STATEMENTS["c-silent"] = "TODO"


def write_validation(layout, raw, base_runs, fix_runs):
    """validation.json as validate.validate_task writes it: classify's verdict and derived lists
    from per-run results, the inputs digest of the task as validated, the runs."""
    task = parse_task(raw, layout.tasks_dir / "mined.json", 0, candidates=True)
    runs = lambda results: [{"seconds": 0.5, "results": r} for r in results]
    record = classify(task, runs(base_runs), runs(fix_runs), True, [])
    record.update(
        {
            "inputs": stamps.inputs_digest(validation_config(task, len(fix_runs))),
            "instance_id": task.instance_id,
            "repeats": len(fix_runs),
            "runs": {"base": runs(base_runs), "fix": runs(fix_runs)},
        }
    )
    jsonio.write_json(layout.validation_dir(task.instance_id) / "validation.json", record)


@pytest.fixture
def mined(tmp_path, monkeypatch):
    """tasks/mined.json (candidates), tasks/nginx.json (two tasks, one also a candidate),
    statements.json and the run's validation records; the environment points at them."""
    for var in ("NGINX_EVAL_CACHE", "NGINX_EVAL_RESULTS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NGINX_EVAL_ROOT", str(tmp_path))
    layout = Layout.from_env(run=RUN)
    layout.tasks_dir.mkdir()
    jsonio.write_json(
        layout.tasks_dir / "mined.json",
        {"name": "nginx-candidates", "candidates": True, "tasks": CANDIDATES},
    )
    shipped = [
        stub("old-1", "2026-01-01", fail_to_pass=["a.t:3 x"], problem_statement="old"),
        stub(
            "c-present",
            "2024-05-05",
            fail_to_pass=["a.t:1 body"],
            problem_statement="c-present: the statement shipped first",
        ),
    ]
    (layout.tasks_dir / "nginx.json").write_text(
        json.dumps({"name": "nginx", "description": "shipped", "tasks": shipped}, indent=2) + "\n"
    )
    for raw in CANDIDATES:
        if raw["instance_id"] == "c-flaky":
            write_validation(layout, raw, [BUG, BUG], [FIXED, BUG])
        elif raw["instance_id"] == "c-changed":
            # Validated with other test files than the candidates file has now.
            write_validation(layout, dict(raw, test_files=["a.t", "b.t"]), [BUG], [FIXED])
        elif raw["instance_id"] != "c-unvalidated":
            write_validation(layout, raw, [BUG, BUG], [FIXED, FIXED])
    statements = tmp_path / "statements.json"
    statements.write_text(json.dumps(STATEMENTS))
    return layout, statements


def promote(layout, statements, *extra):
    """Run the script's main in-process: (exit status, the lines it printed)."""
    return promote_module().main(
        [
            "--candidates",
            str(layout.tasks_dir / "mined.json"),
            "--statements",
            str(statements),
            "--run",
            RUN,
            *extra,
        ]
    )


def test_valid_candidates_with_a_statement_are_appended_by_date_then_id(mined, capsys):
    layout, statements = mined
    assert promote(layout, statements) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:8] == [
        "added     c-late (1 fail_to_pass, 1 pass_to_pass)",
        "added     c-early-b (1 fail_to_pass, 1 pass_to_pass)",
        "added     c-early-a (1 fail_to_pass, 1 pass_to_pass)",
        "skipped   c-flaky: not valid (flaky: 1 assertion(s) change between repeats: a.t:1 body)",
        "skipped   c-silent: no statement",
        "skipped   c-unvalidated: no validation",
        "skipped   c-changed: validation is of another version of this candidate "
        "(validate it again)",
        "skipped   c-present: already in the benchmark (--replace replaces it)",
    ]
    assert lines[8] == f"3 of 8 candidates promoted into {layout.tasks_dir / 'nginx.json'}"
    assert "scripts/benchmark_card.py" in lines[9] and "doit run nginx:lint" in lines[10]
    data = json.loads((layout.tasks_dir / "nginx.json").read_text())
    assert "candidates" not in data and data["description"] == "shipped"
    assert [t["instance_id"] for t in data["tasks"]] == [
        "old-1",
        "c-present",
        "c-early-a",
        "c-early-b",
        "c-late",
    ]
    late = data["tasks"][-1]
    assert late == dict(
        CANDIDATES[0],
        fail_to_pass=["a.t:1 body"],
        pass_to_pass=["a.t:2 status"],
        problem_statement="c-late: responses lose their body",
    )
    assert data["tasks"][1]["problem_statement"] == "c-present: the statement shipped first"
    bench = load_benchmark(layout.tasks_dir / "nginx.json")
    assert not bench.candidates and len(bench.tasks) == 5


def test_replace_puts_the_new_version_in_the_old_place(mined, capsys):
    layout, statements = mined
    assert promote(layout, statements, "--replace") == 0
    out = capsys.readouterr().out
    assert "replaced  c-present (1 fail_to_pass, 1 pass_to_pass)" in out
    tasks = load_benchmark(layout.tasks_dir / "nginx.json").tasks
    assert [t.instance_id for t in tasks][:2] == ["old-1", "c-present"]
    assert tasks[1].problem_statement == "c-present: responses lose their body"
    assert tasks[1].pass_to_pass == ("a.t:2 status",)


def version_the_shipped_file(layout):
    path = layout.tasks_dir / "nginx.json"
    data = json.loads(path.read_text())
    data.update(
        version="1.3",
        changelog=[
            {"version": "1.3", "date": "2026-01-02", "tasks": 2, "changes": "1 task added"},
            {"version": "1.0", "date": "2026-01-01", "tasks": 1, "changes": "first"},
        ],
    )
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def test_a_versioned_file_gets_a_minor_version_for_tasks_added(mined, capsys):
    layout, statements = mined
    path = version_the_shipped_file(layout)
    assert promote(layout, statements) == 0
    out = capsys.readouterr().out.splitlines()
    bench = load_benchmark(path)
    assert bench.version == "1.4" and [e["version"] for e in bench.changelog] == [
        "1.4",
        "1.3",
        "1.0",
    ]
    assert bench.changelog[0] == {
        "version": "1.4",
        "date": datetime.date.today().isoformat(),
        "tasks": 5,
        "changes": "3 validated task(s) added (c-late, c-early-b, c-early-a) (promote_tasks.py).",
    }
    assert out[-3] == f"version 1.4: {bench.changelog[0]['changes']}"


def test_a_versioned_file_gets_a_major_version_for_a_task_replaced(mined, capsys):
    layout, statements = mined
    path = version_the_shipped_file(layout)
    assert promote(layout, statements, "--replace", "--changes", "c-present re-validated") == 0
    bench = load_benchmark(path)
    assert bench.version == "2.0"
    assert bench.changelog[0]["changes"] == "c-present re-validated"
    assert bench.changelog[0]["tasks"] == 5


def test_nothing_promoted_leaves_the_file_alone(mined, capsys):
    layout, statements = mined
    before = (layout.tasks_dir / "nginx.json").read_bytes()
    statements.write_text(json.dumps({"c-flaky": "it hangs", "typo-1": "x"}))
    assert promote(layout, statements) == 0
    out = capsys.readouterr().out.splitlines()
    assert "statements for ids that are no candidate: typo-1" in out
    assert out[-1] == f"0 of 8 candidates promoted into {layout.tasks_dir / 'nginx.json'}"
    assert (layout.tasks_dir / "nginx.json").read_bytes() == before


def test_a_new_benchmark_file_is_made_without_the_candidates_flag(mined, capsys):
    layout, statements = mined
    into = layout.tasks_dir / "fresh.json"
    assert promote(layout, statements, "--into", str(into)) == 0
    data = json.loads(into.read_text())
    assert set(data) == {"name", "tasks"} and data["name"] == "fresh"
    assert [t["instance_id"] for t in data["tasks"]] == [
        "c-early-a",
        "c-early-b",
        "c-present",
        "c-late",
    ]
    assert len(load_benchmark(into).tasks) == 4


def test_wrong_files_are_one_line_each(mined, capsys):
    layout, statements = mined
    status = promote_module().main(
        [
            "--candidates",
            str(layout.tasks_dir / "nginx.json"),
            "--statements",
            str(statements),
            "--run",
            RUN,
        ]
    )
    assert status == 2
    assert "nginx.json: is not a candidates file" in capsys.readouterr().err
    mined_file = layout.tasks_dir / "mined.json"
    assert promote(layout, statements, "--into", str(mined_file)) == 2
    assert (
        "mined.json: is a candidates file: promote into a benchmark file" in capsys.readouterr().err
    )
    statements.write_text('{"c-late": ')
    assert promote(layout, statements) == 2
    assert "statements.json: malformed JSON at line 1" in capsys.readouterr().err
    statements.write_text('["c-late"]')
    assert promote(layout, statements) == 2
    assert 'expected {"<instance_id>": "<statement>", ...}' in capsys.readouterr().err


def test_mined_validated_promoted_on_the_fixture_project(project):
    """The fixture's tasks as the miner would write them: only their validation runs; what it
    derives is what the fixture declares, and the promoted file loads."""
    bench = project.benchmark()
    declared = {t["instance_id"]: (t["fail_to_pass"], t["pass_to_pass"]) for t in bench["tasks"]}
    for t in bench["tasks"]:
        t.update(fail_to_pass=[], pass_to_pass=[], problem_statement="TODO")
    project.write_benchmark(dict(bench, candidates=True))
    tasks_file = project.root / "tasks" / "tiny.json"
    for command in (["tiny"], ["tiny:gold"], ["tiny:lint"], [], ["report"]):
        proc, executed = project.doit("run", *command, check=False)
        assert proc.returncode == 2 and executed == []
        assert proc.stderr.splitlines() == [proc.stderr.strip()], proc.stderr
        assert proc.stderr.startswith(f"nginx-eval: error: {tasks_file}: is a candidates file")
    assert not project.results.exists() or list(project.results.rglob("*")) == []
    project.doit("run", "tiny:validate", "repeats=2")
    statements = project.base / "statements.json"
    statements.write_text(json.dumps({i: f"{i}: wrong results" for i in declared}))
    into = project.root / "tasks" / "promoted.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--candidates",
            str(tasks_file),
            "--statements",
            str(statements),
            "--into",
            str(into),
        ],
        env=project.env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.startswith("added     tiny-add (1 fail_to_pass, 2 pass_to_pass)\n")
    promoted = load_benchmark(into)
    assert {
        t.instance_id: (list(t.fail_to_pass), sorted(t.pass_to_pass)) for t in promoted.tasks
    } == {i: (f, sorted(p)) for i, (f, p) in declared.items()}
