"""The report: rendered from result files only, numbers traceable to them, re-rendered alone."""

import hashlib
import json
import os
import re
import shutil
import stat
import statistics

import pytest
from conftest import SOURCE_ROOT, Project, section, table_row

from nginx_eval.report import stats

# Every test here reads a report or the site: its runs render them (conftest.py). The tests of
# what a report says, not of how doit renders it, pass report=0 and render it in their own
# process (conftest.Project.render): a tenth of the processor time of a rendering through doit.
pytestmark = pytest.mark.reports

RUN = "rep"


def rows(project, mode, run=RUN):
    path = project.results / run / mode / "results.jsonl"
    return {r["instance_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def png_width(path):
    """The width in pixels a PNG's header gives: 450 a panel (report/charts.py)."""
    return int.from_bytes(path.read_bytes()[16:20], "big")


def predictions_file(project, tmp_path):
    """A file mode: the gold fix for the first task, a patch that cannot apply for the second."""
    bench = project.benchmark()["tasks"]
    gold = (project.results / RUN / "gold" / bench[0]["instance_id"] / "model.patch").read_text()
    path = tmp_path / "preds.jsonl"
    path.write_text(
        json.dumps(
            {
                "instance_id": bench[0]["instance_id"],
                "model_patch": gold,
                "model_name_or_path": "elsewhere",
            }
        )
        + "\n"
        + json.dumps(
            {
                "instance_id": bench[1]["instance_id"],
                "model_patch": "--- a/nope.c\n+++ b/nope.c\n@@ -1 +1 @@\n-x\n+y\n",
                "model_name_or_path": "elsewhere",
            }
        )
        + "\n"
    )
    return path


def test_report_of_four_modes_matches_the_result_files(project, tmp_path):
    ids = [t["instance_id"] for t in project.benchmark()["tasks"]]
    # fake fixes the first task and breaks the build of the second.
    env = {"FAKE_AGENT_" + ids[1].replace("-", "_"): "break"}
    project.doit("run", "tiny", f"run={RUN}", "report=0", env=env)  # rendered below
    preds = predictions_file(project, tmp_path)
    # With predictions=, `doit run tiny` scores the file alone; the report has every mode.
    _, executed = project.doit(
        "run", "tiny", f"run={RUN}", f"predictions={preds}", "report=0", env=env
    )
    assert not [t for t in executed if t.startswith("results:") and t != "results:tiny/file"]
    # What this test reads is what the report says: rendered here (conftest.Project.render).
    project.render(f"run={RUN}", f"predictions={preds}")

    run_dir = project.results / RUN
    md = (run_dir / "report.md").read_text()
    report = json.loads((run_dir / "report.json").read_text())
    modes = ["gold", "none", "fake", "file"]
    assert set(report["modes"]) == set(modes)

    # header
    sha = hashlib.sha256((project.root / "tasks" / "tiny.json").read_bytes()).hexdigest()
    assert sha[:16] in md and report["benchmark_sha256"] == sha
    for what in ("harness | nginx-eval", "compiler |", "Perl |", "OpenSSL |", "`acme/tiny`"):
        assert what in md
    assert "fake-1" in md and "fake_agent.py" in md  # model and command of the mode

    outcomes = {}
    for mode in modes:
        r = rows(project, mode)
        assert set(r) == set(ids)
        expected = {}
        for iid in r:
            grade = json.loads((run_dir / mode / iid / "grade.json").read_text())
            agent = run_dir / mode / iid / "agent.json"
            agent_status = json.loads(agent.read_text())["status"] if agent.exists() else None
            expected[iid] = (
                "resolved"
                if grade["resolved"]
                else "timeout"
                if agent_status == "timeout"
                else grade["status"]
            )
        outcomes[mode] = expected
        # report.json: SWE-bench shaped id lists equal what the grades say
        rep = report["modes"][mode]
        assert rep["outcomes"] == expected
        assert rep["resolved_ids"] == sorted(i for i, o in expected.items() if o == "resolved")
        assert rep["error_ids"] == sorted(
            i for i, o in expected.items() if o in ("patch_failed", "env_error")
        )
        assert rep["submitted_instances"] == rep["total_instances"] == len(ids)
        assert rep["resolved_instances"] + rep["unresolved_instances"] + rep[
            "error_instances"
        ] == len(ids)

        # summary table: count (rate) for each outcome
        summary = table_row(section(md, "Summary"), f"`{mode}`")
        resolved = sum(1 for o in expected.values() if o == "resolved")
        assert summary[0] == f"{resolved} ({100 * resolved / len(ids):.1f}%)"
        for col, outcome in enumerate(
            ("resolved", "partially_resolved", "unresolved", "compile_failed", "patch_failed")
        ):
            n = sum(1 for o in expected.values() if o == outcome)
            assert summary[col].startswith(f"{n} ("), (mode, outcome, summary)

        # patches: lines counted from the model.patch files themselves
        added = removed = 0
        for iid in ids:
            for line in (run_dir / mode / iid / "model.patch").read_text().splitlines():
                added += line.startswith("+") and not line.startswith("+++")
                removed += line.startswith("-") and not line.startswith("---")
        patch_row = table_row(section(md, "Patches"), f"`{mode}`")
        assert patch_row[:2] == [str(added), str(removed)], (mode, patch_row)

    assert outcomes["gold"] == {i: "resolved" for i in ids}
    assert set(outcomes["none"].values()) == {"unresolved"}
    assert outcomes["fake"] == {ids[0]: "resolved", ids[1]: "compile_failed"}
    assert outcomes["file"] == {ids[0]: "resolved", ids[1]: "patch_failed"}

    # per-task matrix, with links to each cell's grade
    matrix = section(md, "Per task")
    codes = {"resolved": "PASS", "unresolved": "FAIL", "compile_failed": "CF", "patch_failed": "PF"}
    for iid in ids:
        cells = table_row(matrix, iid)
        assert cells == [f"[{codes[outcomes[m][iid]]}]({m}/{iid}/grade.json)" for m in modes]
        for m in modes:
            assert (run_dir / m / iid / "grade.json").exists()

    # time and cost: from agent.json of the agent mode
    agents = [json.loads((run_dir / "fake" / i / "agent.json").read_text()) for i in ids]
    cost = sum(a["cost_usd"] for a in agents)
    timing = table_row(section(md, "Time and cost"), "`fake`")
    assert timing[0] == "2"
    assert timing[1] == f"{sum(a['wall_seconds'] for a in agents):,.1f} s"
    assert timing[3] == f"{statistics.median(a['wall_seconds'] for a in agents):,.1f} s"
    # Under a dollar, to a hundredth of a cent (the fake agent's two calls cost $0.25 each).
    assert cost == 0.5 and timing[4] == "$0.5000"
    assert timing[5] == "$0.5000"  # one task resolved
    assert timing[6] == f"{sum(a['tokens']['input'] for a in agents):,}"
    assert table_row(section(md, "Time and cost"), "`gold`")[4] == "—"

    # gold file overlap: the file mode's first patch is the gold patch, the second touches nothing
    assert table_row(section(md, "Patches"), "`file`")[4:] == ["50.0%", "1 / 2"]
    assert table_row(section(md, "Patches"), "`gold`")[4:] == ["100.0%", "2 / 2"]

    # the chart is a real PNG, embedded with a relative link; the agent's cost is its second panel
    assert (run_dir / "report-chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png_width(run_dir / "report-chart.png") == 900
    assert "](report-chart.png)" in md
    assert "## Warnings" in md


def test_editing_a_template_rerenders_the_report_and_nothing_else(project):
    shutil.copytree(SOURCE_ROOT / "templates", project.root / "templates")
    project.doit("run", "tiny", "modes=gold,none", f"run={RUN}")
    _, executed = project.doit("run", "tiny", "modes=gold,none", f"run={RUN}")
    assert executed == []
    template = project.root / "templates" / "report.md.j2"
    template.write_text(template.read_text().replace("## Summary", "## Summary of outcomes"))
    _, executed = project.doit("run", "tiny", "modes=gold,none", f"run={RUN}")
    assert executed == ["tiny:report"]
    assert "## Summary of outcomes" in (project.results / RUN / "report.md").read_text()
    # `doit run report` renders from the files on disk and runs nothing else
    (project.results / RUN / "report.md").unlink()
    _, executed = project.doit("run", "report", f"run={RUN}")
    assert executed == ["report:markdown"]
    _, executed = project.doit("run", "report", f"run={RUN}")
    assert executed == []


def test_report_0_leaves_the_report_to_doit_run_report(project):
    """report=0: the run scores and stops; report.md and the site are as they were until `doit
    run report` renders them, and a later run with report=0 leaves that report alone."""
    report = project.results / RUN / "report.md"
    proc, executed = project.doit("run", "tiny", "modes=gold,none", f"run={RUN}", "report=0")
    assert "grade:tiny/gold/tiny-add" in executed and not report.exists()
    assert not (project.results / RUN / "site").exists()
    assert proc.stdout.splitlines()[-1] == (
        f"report: not rendered (report=0); `doit run report run={RUN}` renders it"
    )
    _, executed = project.doit("run", "report", f"run={RUN}")
    assert "report:markdown" in executed and "| `gold` | 2 (100.0%) |" in report.read_text()
    before = report.read_bytes()
    project.task_dir("gold", "tiny-add", RUN).joinpath("grade.json").unlink()
    _, executed = project.doit("run", "tiny", "modes=gold,none", f"run={RUN}", "report=0")
    assert "grade:tiny/gold/tiny-add" in executed and report.read_bytes() == before


def test_repeats_show_mean_spread_and_pass_at_k(project):
    """Three repeats of a mode whose result files resolve {a}, {a, b} and {} of two tasks."""
    modes = project.root / "modes.toml"
    modes.write_text(modes.read_text().replace('model = "fake-1"', 'model = "fake-1"\nrepeats = 3'))
    ids = [t["instance_id"] for t in project.benchmark()["tasks"]]
    run_dir = project.results / RUN
    resolved_by = {"fake": {ids[0]}, "fake-r2": set(ids), "fake-r3": set()}
    for mode, resolved in resolved_by.items():
        (run_dir / mode).mkdir(parents=True)
        (run_dir / mode / "results.jsonl").write_text(
            "".join(
                json.dumps(
                    {
                        "instance_id": i,
                        "mode": mode,
                        "status": "resolved" if i in resolved else "unresolved",
                        "resolved": i in resolved,
                        "agent_status": "completed",
                        "agent_seconds": 10.0,
                        "cost_usd": 1.0,
                        "tokens": {"input": 1, "output": 1},
                        "env_errors": [],
                        "patch": {
                            "files": ["src/core/calc.c"],
                            "lines_added": 1,
                            "lines_removed": 1,
                        },
                    }
                )
                + "\n"
                for i in ids
            )
        )
    _, executed = project.doit("run", "report", f"run={RUN}")
    # and the pages of the site that show what changed (test_site.py)
    assert [t for t in executed if not t.startswith("site:")] == ["report:markdown"]
    family = json.loads((run_dir / "report.json").read_text())["families"]["fake"]
    assert family["resolved_rates"] == [0.5, 1.0, 0.0]
    assert family["mean"] == 0.5 and family["min"] == 0.0 and family["max"] == 1.0
    assert family["stdev"] == 0.5
    assert family["pass_at_k"] == 1.0 and family["k"] == 3
    md = (run_dir / "report.md").read_text()
    row = table_row(section(md, "Repeats"), "`fake`")
    assert row[:5] == ["3", "50.0%, 100.0%, 0.0%", "50.0%", "0.0%–100.0%", "50.0 pp"]
    assert row[6] == "100.0% (k=3)"
    # The mean's standard error clustered by task: per-task means 2/3 and 1/3, so
    # sd(means) / sqrt(2) = 1/6; the interval is 0.5 +- 1.96 / 6.
    assert family["se"] == round(1 / 6, 4)
    assert family["interval"] == [round(0.5 - 1.959964 / 6, 4), round(0.5 + 1.959964 / 6, 4)]
    assert row[7:] == ["16.7 pp", "[17.3, 82.7]"]


# -- agent runs that did not finish, agent versions, cache tokens, trajectories --------------------

VERSIONS = {"fake": "2.1.330 (Claude Code)", "fake2": "2.1.331 (Claude Code)"}
# (mode, task) -> the agent.json a real run that did not finish leaves (issue 14's contract).
UNFINISHED = {
    ("fake", "tiny-mul"): {
        "status": "infra_error",
        "error": "phase solve: API error 500 (api_error) on 3 attempts",
        "attempts": [{"status": "infra_error", "error": "API error 500", "cost_usd": 0.01}] * 3,
    },
    ("fake2", "tiny-add"): {
        "status": "not_run",
        "cost_usd": None,
        "tokens": None,
        "agent_version": None,
        "trajectory": None,
        "phases": [],
        "error": "the run's budget (max_cost=0.30) was spent: $0.50",
    },
}


def finish_differently(project, layout, tasks):
    """Give the fake agents' records a CLI version and a trajectory, turn UNFINISHED's into
    what an infra error and the budget leave, and run the stages after the agent on them
    (patch, grade, results: their own functions, on the files on disk)."""
    from nginx_eval.grade import stage as grade
    from nginx_eval.patch import stage as patch
    from nginx_eval.results import stage as results
    from nginx_eval.run.modes import load_modes

    modes = load_modes(project.root / "modes.toml")
    for mode in ("fake", "fake2"):
        for iid in tasks:
            path = layout.agent_json(mode, iid)
            record = json.loads(path.read_text())
            (path.parent / "agent" / "trajectory.md").write_text(f"# {mode} {iid}\n")
            record.update(agent_version=VERSIONS[mode], trajectory="agent/trajectory.md")
            record.update(UNFINISHED.get((mode, iid), {}))
            path.write_text(json.dumps(record))
            patch.write_patch(layout, modes[mode], tasks[iid], {}, [])
            grade.grade_task(layout, mode, tasks[iid], {}, [])
        results.write_summary(layout, modes[mode], list(tasks.values()))


def test_infra_errors_and_tasks_left_by_the_budget_are_counted_apart(project):
    from nginx_eval.core.layout import Layout
    from nginx_eval.run.benchmark import load_benchmark

    modes_toml = project.root / "modes.toml"
    text = modes_toml.read_text()
    modes_toml.write_text(text + text.replace("modes.fake", "modes.fake2"))
    project.doit("run", "tiny", f"run={RUN}", "report=0")  # rendered once the files are changed
    layout = Layout(root=project.root, cache=project.cache, results_root=project.results, run=RUN)
    tasks = {t.instance_id: t for t in load_benchmark(project.root / "tasks/tiny.json").tasks}
    finish_differently(project, layout, tasks)
    _, executed = project.doit("run", "report", f"run={RUN}")
    # and the pages of the site that show what changed (test_site.py)
    assert [t for t in executed if not t.startswith("site:")] == ["report:markdown"]

    # results.jsonl: outcomes of their own, and what the report needs of agent.json
    fake, fake2 = rows(project, "fake"), rows(project, "fake2")
    assert (fake["tiny-mul"]["outcome"], fake["tiny-mul"]["status"]) == ("infra_error",) * 2
    assert fake["tiny-mul"]["agent_error"] == UNFINISHED[("fake", "tiny-mul")]["error"]
    assert (fake2["tiny-add"]["outcome"], fake2["tiny-add"]["status"]) == ("not_run",) * 2
    assert fake["tiny-add"]["outcome"] == fake2["tiny-mul"]["outcome"] == "resolved"
    assert fake["tiny-add"]["agent_version"] == VERSIONS["fake"]
    assert fake["tiny-add"]["trajectory"] == "agent/trajectory.md"
    assert fake["tiny-add"]["tokens"] == {
        "input": 1000,
        "output": 200,
        "cache_read": 50,
        "cache_creation": 10,
    }
    assert project.read("fake", "tiny-mul", "patch.json", RUN)["files"] == []

    # report.json: out of the denominator, counted apart, among SWE-bench's error ids
    report = json.loads((project.results / RUN / "report.json").read_text())
    for mode, gone, kind in (("fake", "tiny-mul", "infra_error"), ("fake2", "tiny-add", "not_run")):
        m = report["modes"][mode]
        other = "not_run" if kind == "infra_error" else "infra_error"
        assert (m["scored_instances"], m[f"{kind}_instances"], m[f"{kind}_ids"]) == (1, 1, [gone])
        assert (m[f"{other}_instances"], m[f"{other}_ids"]) == (0, [])
        assert m["outcome_counts"][kind] == 1 and m["outcomes"][gone] == kind
        assert m["resolved_rate"] == 1.0 and m["resolved_interval"] == [
            round(v, 4) for v in stats.wilson(1, 1)
        ]
        assert gone in m["error_ids"] and gone not in m["empty_patch_ids"]
        assert m["resolved_instances"] + m["unresolved_instances"] + m["error_instances"] == 2
        assert m["agent_versions"] == [VERSIONS[mode]]
    gold = report["modes"]["gold"]
    assert "scored_instances" not in gold and "infra_error" not in gold["outcome_counts"]
    assert report["arms"]["fake"]["rate"] == 1.0
    # fake and fake2 share no scored task: no comparison; fake and gold compare on tiny-add.
    pairs = {frozenset((c["a"], c["b"])): c for c in report["comparisons"]}
    assert frozenset(("fake", "fake2")) not in pairs
    assert pairs[frozenset(("fake", "gold"))]["tasks"] == 1
    area = report["breakdowns"]["area"][0]["cells"]
    assert {c["arm"]: c["tasks"] for c in area} == {"gold": 2, "none": 2, "fake": 1, "fake2": 1}

    md = (project.results / RUN / "report.md").read_text()
    assert "| agent CLI | 2.1.330 (Claude Code) (fake); 2.1.331 (Claude Code) (fake2) |" in md
    summary = section(md, "Summary")
    assert (
        "| mode | resolved | partially resolved | unresolved | compile failed | patch failed "
        "| timeout | agent error | env error | not scored | resolved, 95% CI |" in summary
    )
    assert table_row(summary, "`fake`")[0] == "1 (100.0%)"
    assert table_row(summary, "`fake`")[8] == "1 infra error"
    assert table_row(summary, "`fake2`")[8] == "1 left by the budget"
    assert table_row(summary, "`gold`")[8] == "0"
    matrix = section(md, "Per task")
    assert "`INFRA` infra error (not scored) · `BUDGET` left by the budget (not scored)" in matrix
    assert table_row(matrix, "tiny-mul")[2:] == [
        "[INFRA](fake/tiny-mul/grade.json) · [trajectory](fake/tiny-mul/agent/trajectory.md)",
        "[PASS](fake2/tiny-mul/grade.json) · [trajectory](fake2/tiny-mul/agent/trajectory.md)",
    ]
    assert table_row(matrix, "tiny-add")[:2] == [
        "[PASS](gold/tiny-add/grade.json)",
        "[FAIL](none/tiny-add/grade.json)",
    ]
    timing = section(md, "Time and cost")
    assert "| input tokens | cache read | cache write | output tokens |" in timing
    agents = [json.loads(layout.agent_json("fake", i).read_text()) for i in tasks]
    assert table_row(timing, "`fake`")[6:10] == [
        f"{sum(a['tokens'][k] for a in agents):,}"
        for k in ("input", "cache_read", "cache_creation", "output")
    ]
    warnings = section(md, "Warnings")
    assert (
        f"- fake / tiny-mul: infra error, not scored: {UNFINISHED[('fake', 'tiny-mul')]['error']}"
    ) in warnings
    assert (
        "- mode fake2: 1 of 2 tasks left by the budget (max_cost), not scored (tiny-add)"
        in warnings
    )


@pytest.mark.e2e
def test_a_run_without_agents_shows_none_of_the_agent_columns(gold_none):
    """A run of gold and none renders as before issue 14: no agent CLI row, no "not scored"
    column or legend, no cache token columns, no trajectory links, no agent fields in
    report.json (byte-identical reports: the summary row and the table headers as they were)."""
    project = gold_none  # its report, as doit rendered it after the run
    md = (project.results / RUN / "report.md").read_text()
    for absent in ("agent CLI", "not scored", "cache read", "trajectory", "INFRA", "BUDGET"):
        assert absent not in md, absent
    assert (
        "| mode | resolved | partially resolved | unresolved | compile failed | patch failed "
        "| timeout | agent error | env error | resolved, 95% CI |" in section(md, "Summary")
    )
    assert (
        "| mode | tasks timed | total | mean | median | cost | cost per resolved | input "
        "tokens | output tokens | speed vs `none` |"
    ) in section(md, "Time and cost")
    report = json.loads((project.results / RUN / "report.json").read_text())
    for mode in report["modes"].values():
        assert set(mode["outcome_counts"]) == {
            "resolved",
            "partially_resolved",
            "unresolved",
            "compile_failed",
            "patch_failed",
            "timeout",
            "agent_error",
            "env_error",
        }
        assert not {"scored_instances", "agent_versions", "infra_error_ids"} & set(mode)
    # No arm has a cost per resolved task: the chart leaves out that panel, the rate's alone.
    assert png_width(project.results / RUN / "report-chart.png") == 450


def test_a_repeat_that_ended_in_an_infra_error_is_left_out_of_its_family(project):
    """Three repeats resolving {a}, {b} (a: infra error) and {}: the family's scores per task are
    a [1, 0] and b [0, 1, 0], so the mean is 2/5, pass@3 counts both tasks, and repeat 2's rate
    is over its one scored task."""
    modes = project.root / "modes.toml"
    modes.write_text(modes.read_text().replace('model = "fake-1"', 'model = "fake-1"\nrepeats = 3'))
    ids = [t["instance_id"] for t in project.benchmark()["tasks"]]
    run_dir = project.results / RUN
    resolved_by = {"fake": {ids[0]}, "fake-r2": {ids[1]}, "fake-r3": set()}
    for mode, resolved in resolved_by.items():
        (run_dir / mode).mkdir(parents=True)
        (run_dir / mode / "results.jsonl").write_text(
            "".join(
                json.dumps(
                    {
                        "instance_id": i,
                        "mode": mode,
                        "status": "resolved" if i in resolved else "unresolved",
                        "resolved": i in resolved,
                        "env_errors": [],
                        "agent_seconds": 10.0,
                        "agent_status": "infra_error"
                        if (mode, i) == ("fake-r2", ids[0])
                        else "completed",
                        "patch": {
                            "files": ["src/core/calc.c"],
                            "lines_added": 1,
                            "lines_removed": 1,
                        },
                    }
                )
                + "\n"
                for i in ids
            )
        )
    project.render(f"run={RUN}")
    report = json.loads((run_dir / "report.json").read_text())
    family = report["families"]["fake"]
    assert family["resolved_rates"] == [0.5, 1.0, 0.0]
    assert family["pass_at_k"] == 1.0
    assert report["arms"]["fake"]["rate"] == 0.4
    assert report["modes"]["fake-r2"]["infra_error_ids"] == [ids[0]]
    assert report["modes"]["fake-r2"]["outcomes"][ids[0]] == "infra_error"


def test_results_graded_under_two_benchmark_versions_are_said_in_the_header_and_warnings(project):
    bench = project.benchmark()
    ids = [t["instance_id"] for t in bench["tasks"]]
    entry = lambda version, date, changes: {
        "version": version,
        "date": date,
        "tasks": len(ids),
        "changes": changes,
    }
    bench.update(version="1.0", changelog=[entry("1.0", "2026-11-20", "first")])
    project.write_benchmark(bench)
    # Each run's report is rendered here, as the run would (conftest.Project.render).
    project.doit("run", "tiny:gold", "run=ver", "report=0")
    project.render("run=ver")
    # a run left at 1.0, compared at the end (its own report is not read)
    project.doit("run", "tiny:gold", "run=old", "report=0")
    run_dir = project.results / "ver"
    assert json.loads((run_dir / "run.json").read_text())["benchmark_version"] == "1.0"
    assert project.read("gold", ids[0], "grade.json", run="ver")["benchmark_version"] == "1.0"
    md = (run_dir / "report.md").read_text()
    assert "| benchmark | `tasks/tiny.json` version 1.0 (" in md
    assert "versions of the benchmark" not in md and "results graded under" not in md

    # A new version (a statement made clearer: MAJOR), graded for one mode only.
    bench["tasks"][0]["problem_statement"] += " It happens on every request."
    bench.update(
        version="2.0",
        changelog=[entry("2.0", "2026-11-21", "statement of the first task made clearer")]
        + bench["changelog"],
    )
    project.write_benchmark(bench)
    project.doit("run", "tiny:none", "run=ver", "report=0")
    project.render("run=ver")
    assert json.loads((run_dir / "run.json").read_text())["benchmark_version"] == "2.0"
    md = (run_dir / "report.md").read_text()
    assert (
        "| benchmark | `tasks/tiny.json` version 2.0 (2 tasks), sha256 " in md
        and "; **results graded under version 1.0, version 2.0** (see Warnings) |" in md
    )
    warning = (
        "- results graded under 2 versions of the benchmark: version 1.0 (gold: 2 tasks); "
        "version 2.0 (none: 2 tasks); the task file is now version 2.0 (its changelog: "
        "`tasks/tiny.json`): they are not results of one benchmark; run the modes again "
        "to grade every task under version 2.0"
    )
    assert warning in section(md, "Warnings").splitlines()
    report = json.loads((run_dir / "report.json").read_text())
    assert report["benchmark_version"] == "2.0"
    assert report["result_versions"] == [
        {"version": "1.0", "modes": {"gold": 2}},
        {"version": "2.0", "modes": {"none": 2}},
    ]
    assert rows(project, "gold", run="ver")[ids[0]]["benchmark_version"] == "1.0"

    # gold again: a new version grades again, and nothing before the grade runs again.
    _, executed = project.doit("run", "tiny:gold", "run=ver", "report=0")
    assert sorted(t for t in executed if t.startswith("grade:")) == sorted(
        f"grade:tiny/gold/{i}" for i in ids
    )
    assert not [t for t in executed if t.startswith(("prove:", "build:", "patch:"))]
    project.render("run=ver")
    md = (run_dir / "report.md").read_text()
    assert "results graded under" not in md and "version 2.0 (2 tasks)" in md

    # Compared with the run left at 1.0: the comparison says so.
    project.render("run=ver", "compare=old")
    compared = json.loads((run_dir / "compare-old.json").read_text())
    assert compared["benchmark_version"] == {"ver": "2.0", "old": "1.0"}
    assert (
        "| benchmark | tiny version 2.0 (**another benchmark version in `old`: 1.0**; see "
        "the task file's changelog) (**the task file changed between the runs**"
        in (run_dir / "compare-old.md").read_text()
    )


def test_a_version_warning_for_results_of_another_version_than_the_file(tmp_path):
    from nginx_eval.core.layout import Layout
    from nginx_eval.report.data import _version_warnings, result_versions
    from nginx_eval.run.benchmark import Benchmark

    layout = Layout(root=tmp_path, cache=tmp_path / "c", results_root=tmp_path / "r")
    bench = Benchmark(
        name="b", path=tmp_path / "tasks" / "b.json", tasks=(), digest="0", version="1.3"
    )
    rows_of = lambda v: {"gold": {"t-1": {"benchmark_version": v}, "t-2": {}}}
    versions = result_versions(rows_of("1.2"))
    assert versions == [
        {"version": None, "modes": {"gold": 1}},
        {"version": "1.2", "modes": {"gold": 1}},
    ]
    assert _version_warnings(versions, bench, layout)[0].startswith(
        "results graded under 2 versions of the benchmark: an unversioned task file (gold: 1 "
        "task); "
        "version 1.2 (gold: 1 task); the task file is now version 1.3"
    )
    one = result_versions({"gold": {"t-1": {"benchmark_version": "1.2"}}})
    assert _version_warnings(one, bench, layout) == [
        "results graded under version 1.2 (gold: 1 task); the task file is now version 1.3 (its "
        "changelog: `tasks/b.json`): they are not results of one benchmark; run the modes again "
        "to grade every task under version 1.3"
    ]
    assert (
        _version_warnings(
            result_versions({"gold": {"t-1": {"benchmark_version": "1.3"}}}), bench, layout
        )
        == []
    )
    # Versions sort as numbers: 1.10 is after 1.9.
    assert [
        v["version"]
        for v in result_versions(
            {"a": {"x": {"benchmark_version": "1.10"}}, "b": {"y": {"benchmark_version": "1.9"}}}
        )
    ] == ["1.9", "1.10"]


# -- issue 37: what a newcomer sees must be true --------------------------------------------------

UMASK = 0o002  # not the usual 022: the files' bits must come from it, not be fixed


@pytest.fixture(scope="module")
def gold_none(tmp_path_factory):
    """A run of gold and none (strict=0), as a newcomer's first `doit`, under UMASK: gold
    resolves both tasks, none neither."""
    project = Project(tmp_path_factory.mktemp("gold-none"), reports=True)
    before = os.umask(UMASK)
    try:
        project.doit("run", "tiny:gold", "tiny:none", f"run={RUN}")
    finally:
        os.umask(before)
    return project


@pytest.mark.e2e
def test_result_files_follow_the_umask_as_the_sites_pages_do(gold_none):
    run_dir = gold_none.results / RUN
    want = 0o666 & ~UMASK
    files = [
        run_dir / name
        for name in (
            "report.md",
            "report.json",
            "report-chart.png",
            "run.json",
            "site/index.html",
            "site/site.css",
        )
    ]
    files += [run_dir / "gold" / name for name in ("results.jsonl", "predictions.jsonl")]
    files += [
        run_dir / "gold" / "tiny-add" / name
        for name in ("grade.json", "prove.json", "build.json", "patch.json", "model.patch")
    ]
    files += [run_dir / "site" / "gold" / "tiny-add.html"]
    assert {str(f.relative_to(run_dir)): oct(stat.S_IMODE(f.stat().st_mode)) for f in files} == {
        str(f.relative_to(run_dir)): oct(want) for f in files
    }


@pytest.mark.e2e
def test_every_sentence_of_a_gold_and_none_report_is_true_of_its_data(gold_none):
    """gold resolves the 2 tasks none does not: no sentence may say that no pair disagrees
    (the report said so, under a table that showed they do, while `doit run power` said "they
    disagree on 2 of 2 tasks"); no figure without data, no strict rate nobody judged."""
    run_dir = gold_none.results / RUN
    md = (run_dir / "report.md").read_text()
    report = json.loads((run_dir / "report.json").read_text())
    (c,) = report["comparisons"]
    assert (c["a_only"], c["b_only"], c["tasks"], c["detectable"]) == (2, 0, 2, None)
    power = section(md, "Power")
    assert "disagrees on any task" not in power
    assert power.strip().splitlines()[0] == (
        "No comparison of this run detects a difference with 80% power at a two-sided 5% "
        "level: `gold` and `none` disagree on 2 of 2 tasks, too few."
    )
    assert "`doit run power run=rep detect=10` says how many tasks" in power
    proc, _ = gold_none.doit("run", "power", f"run={RUN}", "detect=10")
    assert "gold vs none: they disagree on 2 of 2 tasks" in proc.stdout
    # No agent ran: no time or cost per task to draw, so no figure and no link to one.
    assert not (run_dir / "report-distributions.png").exists()
    assert "report-distributions" not in md and "Distributions per task" not in md
    assert report["figures"] == ["report-chart.png"]
    assert "![Resolved rate, with 95% intervals](report-chart.png)" in md
    # strict=0 judged nothing: no strict column, no strict comparison of 0 with 0.
    assert "strict" not in section(md, "Summary") and "## Strict" not in md
    assert report["modes"]["none"]["strict_rate"] is None
    # What the cells link to, and which tasks the run has.
    assert "the build log and TAP output are next to it." in section(md, "Per task")
    assert "written for this benchmark" not in section(md, "Breakdowns")
    assert (
        '"Resolved, 95% CI" is the resolved rate\'s interval (Wilson score interval) over\n'
        "the same tasks."
    ) in section(md, "Summary")


def test_a_mode_that_scored_no_task_has_no_rate(project):
    """Every agent run of fake ends in an infra error: "0 of 0" and "0.0%" are no figures."""
    proc, _ = project.doit(
        "run",
        "tiny:fake",
        "agent_retries=0",
        f"run={RUN}",
        check=False,
        env={"FAKE_AGENT": "api-error"},
    )
    assert proc.stderr.splitlines()[-1].endswith(
        "ended in infra_error (see the agent lines above): nothing was measured"
    )
    summary = proc.stdout[proc.stdout.index(f"nginx-eval: run {RUN}, 2 tasks:") :].splitlines()
    assert re.fullmatch(r"  fake\s+—\s+—\s+—\s+2 infra error", summary[2]), summary
    report = json.loads((project.results / RUN / "report.json").read_text())
    fake = report["modes"]["fake"]
    assert (fake["scored_instances"], fake["resolved_rate"], fake["resolved_interval"]) == (
        0,
        None,
        None,
    )
    md = (project.results / RUN / "report.md").read_text()
    row = table_row(section(md, "Summary"), "`fake`")
    assert row[:8] == ["0 (—)"] * 8 and row[8:] == ["2 infra errors", "—"]
    assert table_row(section(md, "By area"), "(no area)") == ["2", "—"]
    assert "1 / 0" not in md and "0 / 0" not in md


def write_rows(project, rows_by_mode, run=RUN):
    """results.jsonl of each mode, as results/stage.py writes its rows (the fields the report
    reads)."""
    for mode, rows in rows_by_mode.items():
        (project.results / run / mode).mkdir(parents=True, exist_ok=True)
        (project.results / run / mode / "results.jsonl").write_text(
            "".join(
                json.dumps(
                    dict(
                        {
                            "mode": mode,
                            "env_errors": [],
                            "agent_seconds": 30.0,
                            "cost_usd": None,
                            "isolation": "srt",
                            "contaminated": False,
                            "strict": False,
                            "strict_reason": "not resolved",
                            "agent_status": "completed",
                            "patch": {"files": [], "lines_added": 0, "lines_removed": 0},
                        },
                        **r,
                    )
                )
                + "\n"
                for r in rows
            )
        )


def test_sentences_that_would_be_false_of_these_result_files(project):
    """Two isolated agent modes, one allowed a host, that share no scored task (each task is an
    infra error or contaminated in one of them) and resolve none, judged strict: each sentence
    below was false of such a run."""
    modes_toml = project.root / "modes.toml"
    text = modes_toml.read_text().replace('isolation = "none"\n', "")
    modes_toml.write_text(
        text.replace('model = "fake-1"', 'model = "fake-1"\nallow_hosts = ["example.org"]')
        + text.replace("modes.fake", "modes.fake2")
    )
    write_rows(
        project,
        {
            "fake": [
                {
                    "instance_id": "tiny-add",
                    "status": "resolved",
                    "resolved": True,
                    "contaminated": True,
                    "strict": None,
                    "strict_reason": "no strict record",
                },
                {
                    "instance_id": "tiny-mul",
                    "status": "infra_error",
                    "resolved": False,
                    "agent_status": "infra_error",
                    "agent_error": "phase solve: API error 500",
                    "strict": None,
                    "strict_reason": "not scored: the API or the network failed",
                },
            ],
            "fake2": [
                {"instance_id": "tiny-add", "status": "unresolved", "resolved": False},
                {
                    "instance_id": "tiny-mul",
                    "status": "unresolved",
                    "resolved": False,
                    "contaminated": True,
                },
            ],
        },
    )
    project.render(f"run={RUN}")
    md = (project.results / RUN / "report.md").read_text()
    # The header: the host fake may reach besides the model API.
    assert (
        "| isolation | every agent isolated (srt: network only to the model API, and to the "
        "hosts its mode allows: `fake` example.org; no web tools) |"
    ) in md
    # Not scored: the kinds this run has, and only the infra error runs again.
    summary = section(md, "Summary")
    assert (
        ' less those in "not\nscored", whose agent run ended in an infra error (the API or '
        "the network failed, after every retry) or was contaminated (the fix reached the "
        "agent); they count in no rate, interval or comparison, and the next `doit run` "
        "runs the infra errors again). A row adds up to the 2 tasks."
    ) in summary
    assert "budget" not in summary
    # The last column is the strict rate's, not the resolved rate's.
    head = next(line for line in summary.splitlines() if line.startswith("| mode |"))
    assert head.endswith("| resolved, 95% CI | strict, 95% CI |")
    assert "The last column" not in summary and '"Resolved, 95% CI" is the' in summary
    assert table_row(summary, "`fake`")[:2] == ["0 (—)", "0 (—)"]
    # Two modes, and nothing to compare: not "one mode".
    comparisons = section(md, "Paired comparisons")
    assert "One mode" not in comparisons
    assert comparisons.strip() == (
        "No two modes have a scored result for the same task: nothing to compare."
    )
    assert section(md, "Power").strip() == "Power needs two modes on the same tasks."
    # Agent time but no cost: the figure shows time alone, and says so.
    assert "![Agent time per task](report-distributions.png)" in md
    assert "cost per resolved task, with" not in md
    # No gold files to overlap with: no "0 / 0".
    assert table_row(section(md, "Patches"), "`fake`")[-2:] == ["—", "—"]
    # Nothing resolved: not "every resolved patch is strict".
    assert section(md, "Strict").strip().splitlines()[0] == "No patch resolved a task."
    assert "TAP output and agent logs are next to it" in section(md, "Per task")


def test_a_mode_left_unjudged_has_no_strict_rate_and_no_strict_comparison(project):
    """gold unjudged by default (strict_gold=0) beside a judged agent mode: gold's strict cell
    is "—", the report says why, and neither the table of patches that are not strict nor the
    paired comparisons of strict rates count its patches as not strict."""
    resolved = {"status": "resolved", "resolved": True}
    write_rows(
        project,
        {
            "gold": [
                dict(
                    resolved,
                    instance_id=i,
                    strict=None,
                    strict_reason="not judged (strict_gold=0)",
                )
                for i in ("tiny-add", "tiny-mul")
            ],
            "fake": [
                dict(resolved, instance_id="tiny-add", strict=True, strict_reason=""),
                dict(
                    resolved,
                    instance_id="tiny-mul",
                    strict=False,
                    strict_reason="1 regression(s): version.t:1 version output",
                ),
            ],
        },
    )
    project.render(f"run={RUN}")
    md = (project.results / RUN / "report.md").read_text()
    summary = section(md, "Summary")
    assert table_row(summary, "`gold`")[-1] == "—"
    assert "`gold` is not judged (strict_gold=0)." in summary
    strict = section(md, "Strict")
    assert "tiny-mul" in strict and "not judged" not in strict
    assert "`gold` | `fake`" not in strict and "`fake` | `gold`" not in strict
    report = json.loads((project.results / RUN / "report.json").read_text())
    assert report["modes"]["gold"]["strict_rate"] is None
    assert report["modes"]["fake"]["strict_rate"] == 0.5


@pytest.mark.e2e
def test_an_up_to_date_report_says_so_and_a_run_without_results_is_an_error(gold_none):
    proc, executed = gold_none.doit("run", "report", f"run={RUN}")
    assert executed == []
    assert proc.stdout.splitlines() == [
        f"report: {gold_none.results / RUN / 'report.md'} is up to date (2 tasks, 2 modes)"
    ]
    # A run with no results: one line naming it and the runs that have results; nothing made.
    for target in ("report", "site", "power"):
        proc, _ = gold_none.doit("run", target, "run=nosuchrun", check=False)
        assert proc.returncode != 0 and proc.stdout == ""
        assert proc.stderr.splitlines() == [
            f"nginx-eval: error: run=nosuchrun: no results in "
            f"{gold_none.results / 'nosuchrun'}; runs with results: {RUN}"
        ], proc.stderr
        assert sorted(p.name for p in gold_none.results.iterdir()) == [RUN]
        assert not (gold_none.cache / "doit" / "nosuchrun.db").exists()


def write_trajectory(project, mode, iid, turns, run=RUN):
    """The task's agent/trajectory.atif.json as agent/stage.py writes it (transcript/atif.py):
    one Claude Code phase begun at second 0, `turns` its answers."""
    from test_process import AGENT, at

    from nginx_eval.core.layout import Layout
    from nginx_eval.transcript.atif import Conversation, Turn, attempt_trajectory, dumps

    conversation = Conversation("claude-code", "s", [Turn("user", "Fix it.", at(0.0)), *turns])
    phase = {"name": "solve", "status": "completed", "conversation": conversation}
    path = Layout(project.root, project.cache, project.results, run).agent_atif(mode, iid)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(attempt_trajectory("r", AGENT, [dict(phase, started_at=at(0.0))], [])))


def test_the_process_figures_and_the_marginal_cost_come_from_the_tasks_trajectories(project):
    """raw resolves tiny-add after reproducing its bug with a failed prove, and not tiny-mul,
    which it edits without a test; impl resolves both, testing first in neither. raw to impl:
    2 dollars more for 1 task more."""
    from test_process import FAILED, agent_turn, shell

    def edit(seconds):
        return agent_turn("claude", seconds, ("Edit", {"file_path": "/ws/src/a.c"}, "ok"))

    prove = shell("claude", "prove -v t/a.t", FAILED["claude"])
    write_rows(
        project,
        {
            "raw": [
                {
                    "instance_id": "tiny-add",
                    "status": "resolved",
                    "resolved": True,
                    "cost_usd": 0.5,
                },
                {
                    "instance_id": "tiny-mul",
                    "status": "unresolved",
                    "resolved": False,
                    "cost_usd": 0.5,
                },
            ],
            "impl": [
                {"instance_id": i, "status": "resolved", "resolved": True, "cost_usd": 1.5}
                for i in ("tiny-add", "tiny-mul")
            ],
        },
    )
    write_trajectory(project, "raw", "tiny-add", [agent_turn("claude", 4.0, prove), edit(12.0)])
    write_trajectory(project, "raw", "tiny-mul", [edit(30.0)])
    write_trajectory(project, "impl", "tiny-add", [edit(6.0)])
    write_trajectory(project, "impl", "tiny-mul", [edit(10.0), agent_turn("claude", 11.0, prove)])
    project.render(f"run={RUN}")
    md = (project.results / RUN / "report.md").read_text()
    did = section(md, "What the agents did")
    lines = [line for line in did.splitlines() if line.startswith("| `raw` |")]
    assert (
        "| `raw` | 2 | a test failed before the first edit | 1 (50.0%) | 100.0% | 0.0% | 1 |"
        in (lines)
    )
    assert "| `raw` | 2 | edited a source file | 2 (100.0%) | 50.0% | — | — |" in lines
    assert table_row(did, "`impl`")[:6] == ["2", "built nginx", "0 (0.0%)", "—", "100.0%", "—"]
    edits = did.split("| mode | attempts that edited |", 1)[1]
    # One time against one: Mann-Whitney's p is 1.
    assert table_row(edits, "`raw`") == ["2", "21.0 s", "12.0 s", "30.0 s", "1"]
    assert table_row(edits, "`impl`") == ["2", "8.0 s", "8.0 s", "—", "—"]
    phases = section(md, "Phases and loops")
    assert "Per mode whose agent ran several phases" not in phases
    assert table_row(phases, "`raw`") == [
        "`impl`",
        "2",
        "1 → 2",
        "$1.00 → $3.00",
        "$1.00 → $1.50",
        "$2.00 [$1.00, unbounded]",
    ]
    report = json.loads((project.results / RUN / "report.json").read_text())
    assert [m["name"] for m in report["process"]["modes"]] == ["impl", "raw"]
    (step,) = report["workflow"]["marginal"]
    assert (step["a"], step["b"], step["marginal"]) == ("raw", "impl", 2.0)


@pytest.mark.e2e
def test_report_never_runs_a_stage(gold_none):
    """`doit run report` on a run whose modes are stale (a task changed) re-renders what is on
    disk instead of running agents or builds. Last in the module: it changes a task of the
    module's run of gold and none."""
    project = gold_none
    data = project.benchmark()
    data["tasks"][0]["test_files"] = list(reversed(data["tasks"][0]["test_files"]))
    data["tasks"][0]["problem_statement"] += " (edited)"
    project.write_benchmark(data)
    _, executed = project.doit("run", "report", f"run={RUN}")
    # and the pages of the site that show what changed (test_site.py)
    assert [t for t in executed if not t.startswith("site:")] == ["report:markdown"]
    assert (project.results / RUN / "report.md").exists()
