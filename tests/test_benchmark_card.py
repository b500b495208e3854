"""scripts/benchmark_card.py: the card of the fixture benchmark and of a real validation of it,
and tasks/README.md is the card of the shipped tasks/nginx.json."""

import json
import os
import subprocess
import sys

from conftest import SOURCE_ROOT, script_module, section, table_row

from nginx_eval.run.benchmark import load_benchmark

SCRIPT = SOURCE_ROOT / "scripts" / "benchmark_card.py"


def card_module():
    return script_module("benchmark_card")


def test_buckets_and_years():
    card = card_module()
    assert [card.size_bucket(n) for n in (1, 5, 6, 50, 101, 301)] == [
        "1–5",
        "1–5",
        "6–20",
        "21–50",
        "101–300",
        "over 300",
    ]
    assert card.files_label(1) == "1" and card.files_label(7) == "3 or more"


def test_card_of_the_fixture_benchmark_and_its_validation(project):
    bench = project.benchmark()
    add, mul = bench["tasks"]
    add.update(
        area="http",
        fix_date="2024-12-31",
        gold_size={"files": 1, "lines_added": 1, "lines_removed": 1},
    )
    mul.update(
        area="core",
        fix_date="2025-01-01",
        gold_size={"files": 3, "lines_added": 30, "lines_removed": 2},
        configure_flags=[*mul["configure_flags"], "--with-cc-opt=-DOLD_BASE"],
    )
    project.write_benchmark(bench)
    tasks_file, out = project.root / "tasks" / "tiny.json", project.base / "README.md"
    subprocess.run(
        [sys.executable, str(SCRIPT), "--tasks", str(tasks_file), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    md = out.read_text()
    glance = section(md, "At a glance")
    assert table_row(glance, "tasks") == ["2"]
    assert table_row(glance, "recent split") == ["1 task fixed on or after 2025-01-01"]
    assert table_row(glance, "fix dates") == ["2024-12-31 to 2025-01-01"]
    assert table_row(glance, "graded assertions in all") == ["3 fail_to_pass, 4 pass_to_pass"]
    assert table_row(glance, "tasks that need configure flags") == ["1 (--with-debug)"]
    assert table_row(glance, "tasks whose old base builds only with extra compiler options") == [
        "1 (`--with-cc-opt`, chosen by `nginx_eval/mining/oldbuilds.py`)"
    ]
    assert table_row(section(md, "Tasks per area"), "core") == ["1"]
    assert table_row(section(md, "Tasks per year of the fix"), "2025") == ["1", "1", "0"]
    sizes = section(md, "Gold patch sizes")
    assert "2 to 32 (median 17), 34 in all" in sizes
    assert table_row(sizes, "1–5") == ["1"] and table_row(sizes, "3 or more") == ["1"]
    assert "doit run tiny:lint" in section(md, "How the tasks were mined")
    assert "No validation summary was given" in section(md, "Validation of the shipped file")
    assert "No validation has been recorded" in section(md, "Last validation of each task")

    # With the summary of a real validation (base and fix built, tests run twice each), of the
    # two tasks and one whose coin assertion passes every other run.
    bench["tasks"].append(
        dict(
            add,
            instance_id="plant-flaky",
            test_files=["flaky.t"],
            fail_to_pass=["flaky.t:1 add two numbers"],
            pass_to_pass=["flaky.t:2 coin"],
        )
    )
    project.write_benchmark(bench)
    project.doit("run", "tiny:validate", "repeats=2")
    validation = project.results / "default" / "validation.json"
    subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--tasks",
            str(tasks_file),
            "--out",
            str(out),
            "--validation",
            str(validation),
            "--wall-time",
            "12 s on 2 cores",
        ],
        check=True,
        capture_output=True,
    )
    shipped = section(out.read_text(), "Validation of the shipped file")
    assert (
        "From `validation.json`: 3 of 3 tasks validated, 2 repeats of base and fix each." in shipped
    )
    assert table_row(shipped, "valid") == ["2", "2"] and table_row(shipped, "flaky") == ["1", "1"]
    assert table_row(shipped, "plant-flaky")[0] == "flaky"
    assert "- plant-flaky: `flaky.t:2 coin` 1/2 and 1/2" in shipped
    summary = json.loads(validation.read_text())
    assert all(r["test_seconds"]["base"] > 0 for r in summary.values())
    assert "The 4 distinct builds took" in shipped and "the test runs" in shipped
    assert "Wall time of the validation: 12 s on 2 cores." in shipped
    # The fixture session builds with the pin off (conftest.py): the card says so.
    assert "Built and proved with the toolchain: host (pin off)" in shipped
    assert "Admitted (valid, and the fix passed every graded assertion in every run): 2 of 3." in (
        shipped
    )
    assert "| plant-flaky | the fix failed 1 of 2 runs: flaky.t:2 coin (1/2) |" in shipped

    # Each task's last validation, recorded beside the task file: this run's for all three, then
    # a run under load of one of them, which replaces that one's row only.
    record = SOURCE_ROOT / "scripts" / "record_validation.py"
    recorded = lambda *runs: (
        subprocess.run(
            [sys.executable, str(record), "--tasks", str(tasks_file)]
            + [w for r in runs for w in ("--validation", str(r))],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    assert "tiny-validation.jsonl: 3 of 3 tasks" in recorded(validation)
    project.doit(
        "run", "tiny:validate", "repeats=2", "load=cpu", "run=loaded", "instances=tiny-add"
    )
    loaded = project.results / "loaded" / "validation.json"
    assert "tiny-validation.jsonl: 3 of 3 tasks" in recorded(loaded)
    rows = [json.loads(line) for line in (tasks_file.parent / "tiny-validation.jsonl").open()]
    assert [(r["instance_id"], r["run"], r["repeats"], r["load"]) for r in rows] == [
        ("tiny-add", "loaded", 2, "cpu"),
        ("tiny-mul", "default", 2, "none"),
        ("plant-flaky", "default", 2, "none"),
    ]
    subprocess.run(
        [sys.executable, str(SCRIPT), "--tasks", str(tasks_file), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    last = section(out.read_text(), "Last validation of each task")
    assert "3 of 3 tasks have a recorded validation" in last
    cores = os.cpu_count()
    assert table_row(last, f"2 repeats, load=cpu ({cores} CPU-bound processes), {cores} cores")[
        2:
    ] == ["1", "0 of 2 runs", "0 of 2 runs"]
    assert table_row(last, f"2 repeats, no load, {cores} cores")[2:] == [
        "1",
        "1 of 4 runs",
        "0 of 4 runs",
    ]
    add_row = table_row(last, "tiny-add")
    assert add_row[2:5] == ["2", f"cpu ({cores})", str(cores)] and add_row[-3:] == [
        "0/2",
        "0/2",
        "yes",
    ]
    assert add_row[5].endswith("%") and float(add_row[5][:-1]) > 0
    assert table_row(last, "plant-flaky")[-3:] == ["1/2", "0/2", "no"]
    # A record of the task as it was is not taken: the row stays the run's that validated it.
    bench["tasks"][0]["problem_statement"] += " Changed."
    project.write_benchmark(bench)
    assert "tiny-add: run loaded validated it as it was, not as it is" in recorded(loaded)

    # With a strict run of the gold patches: counted, and the one not judged named with why.
    assert "No strict run of the gold patches" in section(
        md, "The gold patches under the strict verdict"
    )
    bench["tasks"] = [add, mul]  # the planted coin would make gold's verdict vary
    project.write_benchmark(bench)
    project.doit("run", "tiny:gold", "strict_gold=1", "strict_files=1")
    gold = project.results / "default" / "gold" / "results.jsonl"
    subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--tasks",
            str(tasks_file),
            "--out",
            str(out),
            "--gold-results",
            str(gold),
        ],
        check=True,
        capture_output=True,
    )
    strict = section(out.read_text(), "The gold patches under the strict verdict")
    assert "From `results/default/gold/results.jsonl`" in strict
    assert "2 of 2 gold patches are strict" in strict and "- not" not in strict
    assert "Toolchain: host (pin off)." in strict
    # A patch judged not strict is named with its grade's reason.
    rows = [json.loads(line) for line in gold.read_text().splitlines()]
    rows[0]["strict"] = False
    gold.write_text("".join(json.dumps(r) + "\n" for r in rows))
    grade = gold.parent / rows[0]["instance_id"] / "grade.json"
    grade.write_text(
        json.dumps(
            dict(json.loads(grade.read_text()), strict_reason="1 regression(s): calc_add.t:1 add")
        )
    )
    subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--tasks",
            str(tasks_file),
            "--out",
            str(out),
            "--gold-results",
            str(gold),
        ],
        check=True,
        capture_output=True,
    )
    strict = section(out.read_text(), "The gold patches under the strict verdict")
    assert "1 of 2 gold patches are strict" in strict
    assert f"- not strict: {rows[0]['instance_id']}: 1 regression(s): calc_add.t:1 add" in strict


def test_the_shipped_card_describes_the_shipped_tasks():
    """tasks/README.md is the card of tasks/nginx.json (the line naming the validation summary
    and its section aside: they depend on the run it was rendered from): run
    scripts/benchmark_card.py after editing the task file."""
    card = card_module()
    fresh = card.render_card(load_benchmark(SOURCE_ROOT / "tasks" / "nginx.json"), "nginx.json")
    shipped = (SOURCE_ROOT / "tasks" / "README.md").read_text()
    body = lambda text: text[
        text.index("## At a glance") : text.index("## Validation of the shipped file")
    ]
    assert body(shipped) == body(fresh)


def test_the_audit_and_the_alternatives_are_counted(tmp_path):
    """The card's "Fairness audit" section: findings as audited, changes, tasks dropped (rows of
    <name>-dropped.jsonl beside the task file), and the alternative fixes before and after."""
    card = card_module()
    base = {
        "repo": "nginx/nginx",
        "test_repo": "nginx/nginx-tests",
        "base_commit": "a" * 40,
        "fix_commit": "b" * 40,
        "test_commit": "c" * 40,
        "test_files": ["h2.t"],
        "configure_flags": [],
        "pass_to_pass": [],
        "problem_statement": "it hangs",
        "area": "http2",
        "fix_date": "2021-03-01",
    }
    fair = {
        "date": "2026-11-25",
        "statement_sufficient": True,
        "tests_fair": True,
        "over_strict": [],
        "changes": [],
    }
    tasks = [
        dict(
            base,
            instance_id="t-1",
            fail_to_pass=["h2.t:1 a"],
            audit=dict(
                fair, alternative={"resolved_before": True, "resolved": True, "strict": False}
            ),
        ),
        dict(
            base,
            instance_id="t-2",
            fail_to_pass=["h2.t:1 a"],
            area="mail",
            fix_date="2014-05-01",
            audit={
                "date": "2026-11-25",
                "statement_sufficient": False,
                "tests_fair": False,
                "over_strict": [
                    {"assertion": "h2.t:2 log", "why": "a log line", "fixed_by": "dropped"}
                ],
                "changes": [
                    {"field": "problem_statement", "why": "vague"},
                    {"field": "fail_to_pass", "dropped": ["h2.t:2 log"], "why": "incidental"},
                ],
                "alternative": {"resolved_before": False, "resolved": True, "strict": None},
            },
        ),
        dict(base, instance_id="t-3", fail_to_pass=["h2.t:1 a"]),
    ]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"tasks": tasks}))
    (tmp_path / "bench-dropped.jsonl").write_text(
        json.dumps(
            {"instance_id": "t-9", "date": "2026-11-25", "version": "5.0", "why": "unfixable"}
        )
        + "\n"
    )
    md = card.render_card(load_benchmark(path), "bench.json")
    audit = section(md, "Fairness audit")
    assert "1 task carries no audit yet." in audit
    assert table_row(audit, "statement sufficient") == ["1", "1"]
    assert table_row(audit, "tests fair") == ["1", "1"]
    assert table_row(audit, "statements amended") == ["1"]
    assert table_row(audit, "assertions dropped from fail_to_pass") == ["1"]
    assert table_row(audit, "tasks dropped") == ["1"]
    assert "- t-2: `h2.t:2 log` (dropped): a log line" in audit
    assert "- dropped t-9 (5.0): unfixable" in audit
    alternatives = section(md, "Alternative fixes")
    assert "2 correct fixes" in alternatives and "2 areas fixed in 2014, 2021" in alternatives
    assert table_row(alternatives, "resolved, tasks as they were before the audit's changes") == [
        "1 of 2"
    ]
    assert table_row(alternatives, "resolved, tasks as they are") == ["2 of 2"]
    assert table_row(
        alternatives,
        "strict (resolved, no regression in the area's test files, no new sanitizer finding)",
    ) == ["0 of 2 (1 not judged)"]
    assert "Resolved but not strict: t-1 (the task's audit notes say why)." in alternatives
    assert "Rejected before the audit's changes: t-2; all of them are resolved now." in alternatives


def test_the_tasks_whose_assertions_stand_before_the_fix_are_counted_and_named(project):
    """From the bare clones (--clones): the fixture's tests are older than its bases, so both
    tasks' assertions stand in the tree as of the base; a task graded by a test that landed
    after its base does not."""
    import fixture_repos

    later = fixture_repos.add_later_test(
        project.mirrors / "acme+tiny-tests", "2099-01-01T00:00:00+0000"
    )
    bench = project.benchmark()
    bench["tasks"].append(
        dict(
            bench["tasks"][0],
            instance_id="tiny-neg",
            test_commit=later,
            test_files=["calc_neg.t"],
            pass_to_pass=[],
            fail_to_pass=["calc_neg.t:1 add negatives"],
        )
    )
    project.write_benchmark(bench)
    tasks_file, out = project.root / "tasks" / "tiny.json", project.base / "README.md"
    card = lambda *args: subprocess.run(
        [sys.executable, str(SCRIPT), "--tasks", str(tasks_file), "--out", str(out), *args],
        check=True,
        capture_output=True,
        env=project.env,
    )
    card()
    assert "Not counted when this card was generated" in section(
        out.read_text(), "Assertions that stand before the fix"
    )
    project.doit("run", "repos")
    card("--clones")
    standing = section(out.read_text(), "Assertions that stand before the fix")
    assert "In 2 of 3 tasks every\nfail_to_pass assertion already stands" in standing
    assert "\ntiny-add, tiny-mul.\n" in standing and "Not known" not in standing


def test_last_validations_name_the_tasks_without_a_row(tmp_path):
    """The rows of <name>-validation.jsonl as scripts/record_validation.py writes them, for one
    task of two: the other is named as not validated, and the groups count the row's runs."""
    card = card_module()
    tasks = json.loads((SOURCE_ROOT / "tasks" / "nginx.json").read_text())["tasks"][:2]
    path = tmp_path / "two.json"
    path.write_text(json.dumps({"tasks": tasks}))
    row = {
        "instance_id": tasks[1]["instance_id"],
        "version": None,
        "run": "r",
        "date": "2026-11-28",
        "repeats": 10,
        "load": "cpu",
        "load_processes": 2,
        "cores": 2,
        "load_coverage": 1.0,
        "loadavg": 20.5,
        "verdict": "valid",
        "admitted": True,
        "gold_failures": 0,
        "gold_runs": 10,
        "none_passes": 0,
        "none_runs": 10,
    }
    (tmp_path / "two-validation.jsonl").write_text(json.dumps(row) + "\n")
    last = card.last_validations(load_benchmark(path))
    assert last["missing"] == [tasks[0]["instance_id"]]
    assert [i for i, _, _ in last["rows"]] == [tasks[1]["instance_id"]]
    assert last["groups"] == [
        {
            "repeats": 10,
            "load": "cpu",
            "load_processes": 2,
            "cores": 2,
            "tasks": 1,
            "dates": ["2026-11-28"],
            "admitted": 1,
            "gold_failures": 0,
            "gold_runs": 10,
            "none_passes": 0,
            "none_runs": 10,
        }
    ]
    (tmp_path / "two-validation.jsonl").unlink()
    assert card.last_validations(load_benchmark(path)) is None
