"""The report: rendered from result files only, numbers traceable to them, re-rendered alone."""

import hashlib
import json
import shutil
import statistics

from conftest import SOURCE_ROOT, section, table_row

RUN = "rep"


def rows(project, mode, run=RUN):
    path = project.results / run / mode / "results.jsonl"
    return {r["instance_id"]: r for r in map(json.loads, path.read_text().splitlines())}




def predictions_file(project, tmp_path):
    """A file mode: the gold fix for the first task, a patch that cannot apply for the second."""
    bench = project.benchmark()["tasks"]
    gold = (project.results / RUN / "gold" / bench[0]["instance_id"] / "model.patch").read_text()
    path = tmp_path / "preds.jsonl"
    path.write_text(
        json.dumps({"instance_id": bench[0]["instance_id"], "model_patch": gold,
                    "model_name_or_path": "elsewhere"}) + "\n" +
        json.dumps({"instance_id": bench[1]["instance_id"],
                    "model_patch": "--- a/nope.c\n+++ b/nope.c\n@@ -1 +1 @@\n-x\n+y\n",
                    "model_name_or_path": "elsewhere"}) + "\n")
    return path


def test_report_of_four_modes_matches_the_result_files(project, tmp_path):
    ids = [t["instance_id"] for t in project.benchmark()["tasks"]]
    # fake fixes the first task and breaks the build of the second.
    env = {"FAKE_AGENT_" + ids[1].replace("-", "_"): "break"}
    project.doit("run", "tiny", f"run={RUN}", env=env)
    preds = predictions_file(project, tmp_path)
    # With predictions=, `doit run tiny` scores the file alone; the report has every mode.
    _, executed = project.doit("run", "tiny", f"run={RUN}", f"predictions={preds}", env=env)
    assert not [t for t in executed if t.startswith("results:") and t != "results:tiny/file"]

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
    assert "fake-1" in md and "fake_agent.py" in md          # model and command of the mode

    outcomes = {}
    for mode in modes:
        r = rows(project, mode)
        assert set(r) == set(ids)
        expected = {}
        for iid, row in r.items():
            grade = json.loads((run_dir / mode / iid / "grade.json").read_text())
            agent = run_dir / mode / iid / "agent.json"
            agent_status = json.loads(agent.read_text())["status"] if agent.exists() else None
            expected[iid] = ("resolved" if grade["resolved"] else
                             "timeout" if agent_status == "timeout" else grade["status"])
        outcomes[mode] = expected
        # report.json: SWE-bench shaped id lists equal what the grades say
        rep = report["modes"][mode]
        assert rep["outcomes"] == expected
        assert rep["resolved_ids"] == sorted(i for i, o in expected.items() if o == "resolved")
        assert rep["error_ids"] == sorted(i for i, o in expected.items()
                                          if o in ("patch_failed", "env_error"))
        assert rep["submitted_instances"] == rep["total_instances"] == len(ids)
        assert rep["resolved_instances"] + rep["unresolved_instances"] + rep["error_instances"] \
            == len(ids)

        # summary table: count (rate) for each outcome
        summary = table_row(section(md, "Summary"), f"`{mode}`")
        resolved = sum(1 for o in expected.values() if o == "resolved")
        assert summary[0] == f"{resolved} ({100 * resolved / len(ids):.1f}%)"
        for col, outcome in enumerate(("resolved", "partially_resolved", "unresolved",
                                       "compile_failed", "patch_failed")):
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
    codes = {"resolved": "PASS", "unresolved": "FAIL", "compile_failed": "CF",
             "patch_failed": "PF"}
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
    assert timing[4] == f"${cost:,.2f}"
    assert timing[5] == f"${cost / 1:,.2f}"                  # one task resolved
    assert timing[6] == f"{sum(a['tokens']['input'] for a in agents):,}"
    assert table_row(section(md, "Time and cost"), "`gold`")[4] == "—"

    # gold file overlap: the file mode's first patch is the gold patch, the second touches nothing
    assert table_row(section(md, "Patches"), "`file`")[4:] == ["50.0%", "1 / 2"]
    assert table_row(section(md, "Patches"), "`gold`")[4:] == ["100.0%", "2 / 2"]

    # the chart is a real PNG, embedded with a relative link
    assert (run_dir / "report-chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
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
    assert executed == ["report"]
    _, executed = project.doit("run", "report", f"run={RUN}")
    assert executed == []


def test_report_never_runs_a_stage(project):
    """`doit run report` on a run whose modes are stale (a task changed) re-renders what is on
    disk instead of running agents or builds."""
    project.doit("run", "tiny:gold", "tiny:none", f"run={RUN}")
    data = project.benchmark()
    data["tasks"][0]["test_files"] = list(reversed(data["tasks"][0]["test_files"]))
    data["tasks"][0]["problem_statement"] += " (edited)"
    project.write_benchmark(data)
    _, executed = project.doit("run", "report", f"run={RUN}")
    assert executed == ["report"]
    assert (project.results / RUN / "report.md").exists()


def test_repeats_show_mean_spread_and_pass_at_k(project):
    """Three repeats of a mode whose result files resolve {a}, {a, b} and {} of two tasks."""
    modes = project.root / "modes.toml"
    modes.write_text(modes.read_text().replace('model = "fake-1"', 'model = "fake-1"\nrepeats = 3'))
    ids = [t["instance_id"] for t in project.benchmark()["tasks"]]
    run_dir = project.results / RUN
    resolved_by = {"fake": {ids[0]}, "fake-r2": set(ids), "fake-r3": set()}
    for mode, resolved in resolved_by.items():
        (run_dir / mode).mkdir(parents=True)
        (run_dir / mode / "results.jsonl").write_text("".join(json.dumps({
            "instance_id": i, "mode": mode, "status": "resolved" if i in resolved else "unresolved",
            "resolved": i in resolved, "agent_status": "completed", "agent_seconds": 10.0,
            "cost_usd": 1.0, "tokens": {"input": 1, "output": 1}, "env_errors": [],
            "patch": {"files": ["src/core/calc.c"], "lines_added": 1, "lines_removed": 1}})
            + "\n" for i in ids))
    _, executed = project.doit("run", "report", f"run={RUN}")
    assert executed == ["report"]
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
