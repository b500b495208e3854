"""A run is one benchmark: two benchmarks and subsets in one results tree, in the order a user
would run them, with every results.jsonl row and report count checked after each step."""

import json
import re

import pytest
from conftest import Project

# Every test here reads a report, rendered in the test's process (report below): its runs pass
# report=0, but for the one whose printed summary (read from the report doit renders) is tested.
pytestmark = pytest.mark.reports

# Every test here starts doit, make, prove, the sandbox or the CLI (conftest.py).
E2E = True


def rows(project, run, mode):
    path = project.results / run / mode / "results.jsonl"
    return [json.loads(line)["instance_id"] for line in path.read_text().splitlines()]


def report(project, run):
    """report.json and report.md as `doit run report run=<run>` renders them."""
    project.render(f"run={run}")
    data = json.loads((project.results / run / "report.json").read_text())
    return data, (project.results / run / "report.md").read_text()


def test_two_benchmarks_and_subsets_in_one_results_tree(tmp_path):
    project = Project(tmp_path, reports=True)
    add, mul = project.tasks
    other = [
        dict(add, instance_id="o-add"),
        dict(mul, instance_id="o-mul"),
        dict(add, instance_id="o-add2"),
    ]
    (project.root / "tasks" / "other.json").write_text(json.dumps({"tasks": other}))

    # 1. A second benchmark scored in run "bars".
    project.doit("run", "other:gold", "other:none", "run=bars", "report=0")
    assert rows(project, "bars", "gold") == ["o-add", "o-mul", "o-add2"]
    record = json.loads((project.results / "bars" / "run.json").read_text())
    assert record["benchmark"] == "other" and record["task_ids"] == ["o-add", "o-mul", "o-add2"]
    assert record["modes"] == ["gold", "none"]
    before = (project.results / "bars" / "gold" / "results.jsonl").read_bytes()

    # 2. The shipped benchmark under the same run name: refused, one line, nothing changed.
    proc, executed = project.doit("run", "tiny:gold", "run=bars", "instances=tiny-add", check=False)
    assert proc.returncode != 0 and executed == []
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("nginx-eval: error:")
    assert "'other'" in errors[0] and "run=NAME" in errors[0]
    assert (project.results / "bars" / "gold" / "results.jsonl").read_bytes() == before
    assert not (project.results / "bars" / "gold" / "tiny-add").exists()

    # 3. The report of the run is the run's benchmark, whatever the default benchmark is.
    data, md = report(project, "bars")
    assert data["benchmark"] == "other" and data["tasks"] == ["o-add", "o-mul", "o-add2"]
    assert data["modes"]["gold"]["total_instances"] == 3
    assert data["modes"]["gold"]["resolved_instances"] == 3
    assert "(3 tasks)" in md and "selected" not in md

    # 4. A subset run says so, and a later command adds rows instead of replacing them.
    project.doit("run", "tiny:gold", "run=sub", "instances=tiny-add", "report=0")
    assert rows(project, "sub", "gold") == ["tiny-add"]
    data, md = report(project, "sub")
    assert data["tasks"] == ["tiny-add"] and data["modes"]["gold"]["total_instances"] == 1
    assert "1 of 2 tasks selected" in md
    project.doit("run", "tiny:gold", "run=sub", "instances=tiny-mul", "report=0")
    assert rows(project, "sub", "gold") == ["tiny-add", "tiny-mul"]
    data, md = report(project, "sub")
    assert data["modes"]["gold"]["resolved_instances"] == 2 and "(2 tasks)" in md

    # 5. Another mode on part of the run's tasks: counted against all of them, as missing.
    project.doit("run", "tiny:none", "run=sub", "limit=1", "report=0")
    assert rows(project, "sub", "none") == ["tiny-add"]
    data, md = report(project, "sub")
    assert data["modes"]["none"]["total_instances"] == 2
    assert data["modes"]["none"]["submitted_instances"] == 1
    assert rows(project, "sub", "gold") == ["tiny-add", "tiny-mul"]

    # 6. The other run was never touched.
    assert (project.results / "bars" / "gold" / "results.jsonl").read_bytes() == before


def test_a_unit_named_directly_leaves_the_run_s_selection_alone(tmp_path):
    """Redoing one unit (any stage, with or without -a) must not widen the run: only a command
    for the benchmark, with instances=/limit= or without, selects tasks (issue 37)."""
    project = Project(tmp_path, reports=True)
    project.doit("run", "tiny:gold", "run=sub", "instances=tiny-add", "report=0")
    run_json = project.results / "sub" / "run.json"
    before = run_json.read_bytes()
    for command in (
        ["prove:tiny/gold/tiny-add"],
        ["-a", "prove:tiny/gold/tiny-add"],
        ["-a", "grade:tiny/gold/tiny-mul"],
        ["build"],
    ):
        project.doit("run", *command, "run=sub", "report=0")
        assert run_json.read_bytes() == before, command
    # Rendering: the summary it prints is read from the report.
    proc, _ = project.doit("run", "tiny:gold", "run=sub", "instances=tiny-add")
    assert "nginx-eval: run sub, 1 task:" in proc.stdout
    assert re.search(r"^  gold +1 of 1 +100\.0% ", proc.stdout, re.M), proc.stdout
    data, md = report(project, "sub")
    assert data["tasks"] == ["tiny-add"] and "1 of 2 tasks selected" in md
    # A unit that starts a run binds it to its benchmark and selects nothing.
    project.doit("run", "grade:tiny/gold/tiny-mul", "run=fresh", "report=0")
    record = json.loads((project.results / "fresh" / "run.json").read_text())
    assert (record["benchmark"], record["selections"], record["task_ids"]) == ("tiny", [], [])
    project.doit("run", "tiny:gold", "run=fresh", "instances=tiny-mul", "report=0")
    record = json.loads((project.results / "fresh" / "run.json").read_text())
    assert record["task_ids"] == ["tiny-mul"]
