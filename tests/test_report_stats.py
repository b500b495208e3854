"""The report's statistics end to end: three modes with known per-task outcomes (predictions
files: the gold patch resolves a task, an empty patch does not) on twelve copies of a fixture
task, scored by real doit; the intervals, discordant counts and p-values in report.md and
report.json against values computed here by hand; `doit run power`; a comparison of two runs;
and what a newcomer's `doit run tiny:gold` prints."""

import json
import math
import re
import shutil

import fixture_repos
import pytest
from conftest import Project

from nginx_eval.core.errors import UserError
from nginx_eval.report import stats
from nginx_eval.run.options import Options

# Every test here reads a report or the site: its runs render them (conftest.py).
pytestmark = pytest.mark.reports

# Every test here starts doit, make, prove, the sandbox or the CLI (conftest.py).
E2E = True

Z95 = 1.959963984540054
IDS = [f"t{i:02d}" for i in range(1, 13)]
# Which tasks each mode resolves (the others get an empty patch).
RESOLVES = {"alpha": IDS[:9], "beta": [IDS[0], IDS[1], IDS[9]], "gamma": IDS[:6]}
CUTOFF = "2023-01-01"


def wilson(k, n, z=Z95):
    """The closed form (Wilson 1927)."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(both, x_only, y_only, neither):
    """Newcombe (1998) method 10 for rate(x) - rate(y), written out from the paper."""
    n = both + x_only + y_only + neither
    p1, p2 = (both + x_only) / n, (both + y_only) / n
    (l1, u1), (l2, u2) = wilson(both + x_only, n), wilson(both + y_only, n)
    a = both * neither - x_only * y_only
    a = a - n / 2 if a > n / 2 else (0 if a >= 0 else a)
    margins = (both + x_only) * (y_only + neither) * (both + y_only) * (x_only + neither)
    phi = a / math.sqrt(margins) if margins else 0.0
    d = p1 - p2
    return (
        d - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2),
        d + math.sqrt((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2),
    )


def mcnemar(b, c):
    """Exact McNemar: twice the binomial tail of the smaller count, by hand."""
    m = b + c
    return min(1.0, 2 * sum(math.comb(m, i) for i in range(min(b, c) + 1)) / 2**m)


def holm(ps):
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = running
    return out


def write_predictions(project, resolves):
    tasks = {
        t["instance_id"]: t
        for t in json.loads((project.root / "tasks" / "trio.json").read_text())["tasks"]
    }
    for mode, ids in resolves.items():
        rows = [
            {
                "instance_id": i,
                "model_name_or_path": mode,
                "model_patch": fixture_repos.gold_diff(project.mirrors, tasks[i])
                if i in ids
                else "",
            }
            for i in IDS
        ]
        (project.root / f"{mode}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def trio_project(tmp_path):
    """tasks/trio.json: 12 copies of the fixture's task tiny-add (one test file: a third fewer
    proves than with tiny-mul's two), areas core (t01-t06) and http, fixed in 2020 (t01-t04) or
    2024; modes alpha, beta and gamma score predictions files."""
    project = Project(tmp_path, reports=True)
    add, _ = project.tasks
    tasks = [
        dict(
            add,
            instance_id=iid,
            area="core" if i < 6 else "http",
            fix_date="2020-03-01" if i < 4 else "2024-06-01",
        )
        for i, iid in enumerate(IDS)
    ]
    (project.root / "tasks" / "trio.json").write_text(json.dumps({"tasks": tasks}, indent=2))
    modes = project.root / "modes.toml"
    modes.write_text(
        modes.read_text()
        + "".join(
            f'\n[modes.{m}]\npredictions = "{m}.jsonl"\ndescription = "known outcomes"\n'
            for m in RESOLVES
        )
    )
    write_predictions(project, RESOLVES)
    return project


def section(md, title):
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", md, re.S | re.M)
    assert m, f"no section {title!r}"
    return m.group(1)


def table_row(text, *first_cells):
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[: len(first_cells)] == list(first_cells):
            return cells[len(first_cells) :]
    raise AssertionError(f"no row {first_cells!r} in:\n{text}")


def ci(interval, digits=1):
    return f"[{100 * interval[0]:.{digits}f}, {100 * interval[1]:.{digits}f}]"


def pp(value, digits=1):
    v = round(100 * value, digits)
    return f"{v:+.{digits}f}" if v else f"{0:.{digits}f}"


@pytest.fixture(scope="module")
def trio(tmp_path_factory):
    project = trio_project(tmp_path_factory.mktemp("trio"))
    proc, _ = project.doit(
        "run",
        "-n",
        "2",
        "-P",
        "thread",
        "trio:alpha",
        "trio:beta",
        "trio:gamma",
        "run=A",
        f"cutoff={CUTOFF}",
    )
    return project, proc


def test_three_modes_with_known_outcomes(trio):
    project, proc = trio
    run_dir = project.results / "A"
    md = (run_dir / "report.md").read_text()
    data = json.loads((run_dir / "report.json").read_text())
    assert data["schema_version"] == 2 and data["tasks"] == IDS

    # Each mode: resolved count, Wilson interval, in report.json and the summary table.
    for mode, ids in RESOLVES.items():
        entry = data["modes"][mode]
        assert entry["resolved_ids"] == sorted(ids)
        want = wilson(len(ids), 12)
        assert entry["resolved_interval"] == pytest.approx(want, abs=1e-4)
        assert data["arms"][mode]["interval_method"] == "wilson"
        row = table_row(section(md, "Summary"), f"`{mode}`")
        assert row[0] == f"{len(ids)} ({100 * len(ids) / 12:.1f}%)"
        assert row[-1] == ci(want)

    # Pairs: with no agent mode the baseline is the first mode, alpha, and comes second.
    expected = {
        ("beta", "alpha"): (2, 1, 7, 2),
        ("gamma", "alpha"): (6, 0, 3, 3),
        ("beta", "gamma"): (2, 1, 4, 5),
    }
    comparisons = data["comparisons"]
    assert [(c["a"], c["b"]) for c in comparisons] == list(expected)
    p_values = [mcnemar(b, c) for _, b, c, _ in expected.values()]
    assert p_values == [18 / 256, 2 / 8, 12 / 32]
    adjusted = holm(p_values)
    assert adjusted == pytest.approx([54 / 256, 0.5, 0.5])
    table = section(md, "Paired comparisons")
    for c, ((a, b), (both, a_only, b_only, neither)), p, ph in zip(
        comparisons, expected.items(), p_values, adjusted, strict=True
    ):
        assert (c["both"], c["a_only"], c["b_only"], c["neither"]) == (
            both,
            a_only,
            b_only,
            neither,
        )
        assert c["method"] == "mcnemar" and c["tasks"] == 12
        assert c["difference"] == pytest.approx((a_only - b_only) / 12, abs=1e-4)
        interval = newcombe(both, a_only, b_only, neither)
        assert c["interval"] == pytest.approx(interval, abs=1e-4)
        assert c["p_value"] == pytest.approx(p, abs=1e-8)
        assert c["p_holm"] == pytest.approx(ph, abs=1e-8)
        row = table_row(table, f"`{a}`", f"`{b}`")
        assert row[:6] == [
            "12",
            str(a_only),
            str(b_only),
            f"{pp(c['difference'])} pp [{pp(interval[0])}, {pp(interval[1])}]",
            stats.fmt_p(p),
            stats.fmt_p(ph),
        ], row
    # The sentences a reader quotes.
    assert (
        "- `beta` resolves 1 task `alpha` does not, `alpha` 7 that `beta` does not; "
        "difference -50 pp [-74, -8], p = 0.07 (Holm: 0.21)."
    ) in md
    assert (
        "- `gamma` resolves 0 tasks `alpha` does not, `alpha` 3 that `gamma` does not; "
        "difference -25 pp [-49, +4], p = 0.25 (Holm: 0.5)."
    ) in md
    assert comparisons[0]["sentence"] in md

    # Power: the detectable difference of each pair, and the median stated in the report.
    for c in comparisons:
        psi = (c["a_only"] + c["b_only"]) / 12
        d = c["detectable"]
        if d is not None:
            # (report.json rounds to 4 decimals)
            assert (
                stats.mcnemar_power(12, psi, d + 1e-4)
                >= 0.8
                > stats.mcnemar_power(12, psi, 0.97 * d)
            )
        else:
            assert stats.mcnemar_power(12, psi, psi) < 0.8
    assert data["power"]["tasks"] == 12 and data["power"]["comparisons"] == 3
    median = data["power"]["median_detectable"]
    found = sorted(c["detectable"] for c in comparisons if c["detectable"] is not None)
    assert median == pytest.approx(
        found[len(found) // 2]
        if len(found) % 2
        else (found[len(found) // 2 - 1] + found[len(found) // 2]) / 2,
        abs=1e-4,
    )
    assert found == [comparisons[0]["detectable"]]  # only beta and alpha disagree enough
    assert f"{round(100 * median)} pp for the one comparison where it is defined" in section(
        md, "Power"
    )

    # Breakdowns: per area and before / after the cutoff, each with its Wilson interval.
    areas = {g["label"]: g for g in data["breakdowns"]["area"]}
    assert {k: v["tasks"] for k, v in areas.items()} == {"core": 6, "http": 6}
    by_area = section(md, "Breakdowns")
    for label, ids in (("core", IDS[:6]), ("http", IDS[6:])):
        row = table_row(by_area, label)
        assert row[0] == "6"
        for cell, mode in zip(row[1:], RESOLVES, strict=True):
            k = len(set(RESOLVES[mode]) & set(ids))
            assert cell == f"{k}/6, {100 * k / 6:.1f}% {ci(wilson(k, 6))}", (label, mode, cell)
    dates = data["breakdowns"]["fix_date"]
    assert dates["cutoff"] == CUTOFF
    assert [(g["label"], g["tasks"]) for g in dates["groups"]] == [
        (f"fixed before {CUTOFF}", 4),
        (f"fixed on or after {CUTOFF}", 8),
    ]
    row = table_row(by_area, f"fixed on or after {CUTOFF}")
    assert row[1] == f"5/8, 62.5% {ci(wilson(5, 8))}"  # alpha: t05-t09

    # The chart, and the run's progress and summary on stdout. Predictions files have no agent
    # time or cost: no distributions figure, and no link to one.
    assert (run_dir / "report-chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (run_dir / "report-distributions.png").exists()
    assert "report-distributions" not in md
    progress = [line for line in proc.stdout.splitlines() if re.match(r"\[\d+/36\] ", line)]
    assert len(progress) == 36 and progress[-1].startswith("[36/36] ")
    assert re.search(r"\[36/36\] \w+ \d+ resolved · 0 errors · done · t\d\d \w+", progress[-1])
    assert "\r" not in proc.stdout
    summary = proc.stdout[proc.stdout.index("nginx-eval: run A, 12 tasks:") :]
    for mode, ids in RESOLVES.items():
        assert re.search(
            rf"^  {mode}\s+{len(ids)} of 12\s+{100 * len(ids) / 12:.1f}%\s+"
            rf"{re.escape(ci(wilson(len(ids), 12)))}",
            summary,
            re.M,
        ), summary
    assert summary.rstrip().endswith(f"report: {run_dir / 'report.md'}")


def test_power_plans_from_the_observed_discordance(trio):
    project, _ = trio
    proc, executed = project.doit("run", "power", "run=A", "detect=10,20")
    assert executed == ["power"]
    out = proc.stdout
    assert "beta vs alpha: they disagree on 8 of 12 tasks (discordance 67%)" in out
    need = stats.mcnemar_tasks_needed(0.10, 8 / 12)
    assert f"  to detect 10 pp: about {need} tasks" in out
    assert f"  to detect 20 pp: about {stats.mcnemar_tasks_needed(0.20, 8 / 12)} tasks" in out
    assert "repeats: cannot tell" not in out  # predictions modes do not vary
    # power records nothing in the run.
    record = json.loads((project.results / "A" / "run.json").read_text())
    assert record["modes"] == ["alpha", "beta", "gamma"]


def test_two_runs_compared_mode_by_mode(trio):
    project, _ = trio
    # Run B: alpha resolves only t01-t04; beta and gamma as in run A, whose result files (the
    # same predictions scored by the same pipeline) B takes rather than scoring them again.
    write_predictions(project, {"alpha": IDS[:4]})
    for mode in ("beta", "gamma"):
        shutil.copytree(project.results / "A" / mode, project.results / "B" / mode)
    project.doit("run", "-n", "2", "-P", "thread", "trio:alpha", "run=B", "report=0")  # not read
    write_predictions(project, {"alpha": RESOLVES["alpha"]})
    proc, executed = project.doit("run", "report", "run=A", "compare=B")
    # and the site's index, whose fix-date split (cutoff=) this command does not give
    assert [t for t in executed if not t.startswith("site:")] == ["report:markdown"]
    data = json.loads((project.results / "A" / "compare-B.json").read_text())
    md = (project.results / "A" / "compare-B.md").read_text()
    assert data["tasks"] == IDS and data["run"] == "A" and data["other"] == "B"
    by_arm = {c["arm"]: c for c in data["comparisons"]}
    alpha = by_arm["alpha"]
    assert (alpha["a_only"], alpha["b_only"]) == (5, 0)
    assert alpha["only_here"] == IDS[4:9] and alpha["only_other"] == []
    assert alpha["p_value"] == pytest.approx(mcnemar(5, 0)) == pytest.approx(2 / 32)
    assert alpha["interval"] == pytest.approx(newcombe(4, 5, 0, 3), abs=1e-4)
    assert alpha["p_holm"] == pytest.approx(holm([2 / 32, 1.0, 1.0])[0])
    for mode in ("beta", "gamma"):
        assert (by_arm[mode]["a_only"], by_arm[mode]["b_only"]) == (0, 0)
        assert by_arm[mode]["p_value"] == 1.0
    lo, hi = newcombe(4, 5, 0, 3)
    assert (
        f"- `alpha@A` resolves 5 tasks `alpha@B` does not, `alpha@B` 0 that `alpha@A` does "
        f"not; difference +42 pp [{pp(lo, 0)}, {pp(hi, 0)}], p = 0.062 (Holm: 0.19)."
    ) in md
    assert f"resolved only in `A`: {', '.join(IDS[4:9])}" in md
    # Up to date until a result file of either run changes.
    _, executed = project.doit("run", "report", "run=A", "compare=B")
    assert executed == []
    # A run that does not exist: one line.
    proc, _ = project.doit("run", "report", "run=A", "compare=nope", check=False)
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(errors) == 1
    assert errors[0].startswith("nginx-eval: error: compare=nope: no results in ")


def test_newcomer_run_shows_progress_and_ends_with_a_summary_and_a_report(tmp_path):
    project = Project(tmp_path, reports=True)
    proc, _ = project.doit("run", "tiny:gold")
    lines = proc.stdout.splitlines()
    progress = [line for line in lines if line.startswith("[") and not line.startswith("[base ")]
    assert len(progress) == 2
    assert re.fullmatch(
        r"\[1/2\] gold 1 resolved · 0 errors · ETA \d+ [sm] · tiny-\w+ resolved", progress[0]
    ), progress
    assert re.fullmatch(
        r"\[2/2\] gold 2 resolved · 0 errors · done · tiny-\w+ resolved", progress[1]
    ), progress
    run_dir = project.results / "default"
    low, high = wilson(2, 2)
    assert (round(100 * low, 1), high) == (34.2, 1.0)
    assert lines[-4] == "nginx-eval: run default, 2 tasks:"
    assert re.fullmatch(r"  mode\s+resolved\s+rate\s+95% CI\s+other outcomes", lines[-3])
    assert re.fullmatch(r"  gold\s+2 of 2\s+100\.0%\s+\[34\.2, 100\.0\]", lines[-2]), lines
    assert lines[-1] == f"report: {run_dir / 'report.md'}"
    report = json.loads((run_dir / "report.json").read_text())
    assert list(report["modes"]) == ["gold"]
    assert "One mode: nothing to compare" in (run_dir / "report.md").read_text()
    # A second mode: its progress, a summary of the modes of this command, the report of the
    # run (both modes), with their comparison.
    proc, _ = project.doit("run", "tiny:none")
    assert [line for line in proc.stdout.splitlines() if line.startswith("[")][-1].startswith(
        "[2/2] none 0 resolved · 0 errors · done"
    )
    summary = proc.stdout[proc.stdout.index("nginx-eval: run default") :]
    assert "  none" in summary and "  gold" not in summary
    report = json.loads((run_dir / "report.json").read_text())
    assert list(report["modes"]) == ["gold", "none"]
    (c,) = report["comparisons"]
    assert (c["a"], c["b"], c["a_only"], c["b_only"]) == ("gold", "none", 2, 0)
    # Nothing left to do: no progress lines, the summary again, the report not rewritten.
    before = (run_dir / "report.json").stat().st_mtime_ns
    proc, executed = project.doit("run", "tiny:none")
    assert executed == [] and not [
        line for line in proc.stdout.splitlines() if line.startswith("[")
    ]
    assert "nginx-eval: run default, 2 tasks:" in proc.stdout
    assert (run_dir / "report.json").stat().st_mtime_ns == before


def test_report_variables_are_checked():
    assert Options.parse({"cutoff": "2024-02-29"}).cutoff == "2024-02-29"
    assert Options.parse({"detect": "5, 12.5"}).detect == (5.0, 12.5)
    for name, value in (
        ("cutoff", "2023-02-29"),
        ("cutoff", "23-01-01"),
        ("detect", "0"),
        ("detect", "100"),
        ("detect", "ten"),
        ("compare", "../x"),
    ):
        with pytest.raises(UserError, match=rf"^{name}="):
            Options.parse({name: value})


def test_a_mode_with_repeats_is_compared_on_per_task_means(tmp_path):
    """Result files written by hand: mode fake with three repeats, alpha once; the comparison is
    the sign-flip permutation test on per-task means (exact: 2^12 sign patterns), with a seeded
    bootstrap interval, and `doit run power` plans repeats from the variation within tasks."""
    import itertools

    project = trio_project(tmp_path)
    modes = project.root / "modes.toml"
    modes.write_text(modes.read_text().replace('model = "fake-1"', 'model = "fake-1"\nrepeats = 3'))
    run_dir = project.results / "R"
    resolved = {
        "fake": set(IDS[:5]),
        "fake-r2": set(IDS[2:8]),
        "fake-r3": set(IDS[:3]),
        "alpha": set(RESOLVES["alpha"]),
    }
    for mode, ids in resolved.items():
        (run_dir / mode).mkdir(parents=True)
        agent = mode.startswith("fake")
        (run_dir / mode / "results.jsonl").write_text(
            "".join(
                json.dumps(
                    {
                        "instance_id": i,
                        "mode": mode,
                        "status": "resolved" if i in ids else "unresolved",
                        "resolved": i in ids,
                        "agent_status": "completed" if agent else None,
                        "agent_seconds": 30.0 if agent else None,
                        "cost_usd": 0.5 if agent else None,
                        "env_errors": [],
                        "patch": {
                            "files": ["src/core/calc.c"],
                            "lines_added": 1,
                            "lines_removed": 1,
                        },
                    }
                )
                + "\n"
                for i in IDS
            )
        )
    project.render("run=R", "bench=trio")
    data = json.loads((run_dir / "report.json").read_text())
    (c,) = data["comparisons"]
    assert (c["a"], c["b"], c["method"], c["tasks"]) == ("alpha", "fake", "permutation", 12)
    means = [sum(i in resolved[m] for m in ("fake", "fake-r2", "fake-r3")) / 3 for i in IDS]
    alpha = [1.0 if i in resolved["alpha"] else 0.0 for i in IDS]
    d = [a - b for a, b in zip(alpha, means, strict=True)]
    assert c["difference"] == pytest.approx(sum(d) / 12, abs=1e-4)
    assert (c["a_better"], c["b_better"]) == (sum(v > 0 for v in d), sum(v < 0 for v in d))
    extreme = sum(
        1
        for signs in itertools.product((1, -1), repeat=12)
        if abs(sum(s * v for s, v in zip(signs, d, strict=True))) >= abs(sum(d)) - 1e-9
    )
    assert c["p_value"] == pytest.approx(extreme / 2**12, abs=1e-8)
    assert c["interval"][0] < c["difference"] < c["interval"][1]
    assert c["interval_method"] == "bootstrap BCa"
    # The family's mean, its standard error clustered by task: sd of the per-task means / sqrt(12).
    sd = math.sqrt(sum((m - sum(means) / 12) ** 2 for m in means) / 11)
    assert data["families"]["fake"]["se"] == pytest.approx(sd / math.sqrt(12), abs=1e-4)
    assert data["arms"]["fake"]["interval_method"] == "clustered by task"
    md = (run_dir / "report.md").read_text()
    assert (
        f"- `alpha` (1 run per task) resolves 75% of the tasks on average, `fake` (3 runs) "
        f"{round(100 * sum(means) / 12)}%; `alpha` does better on {c['a_better']} tasks, "
        f"`fake` on {c['b_better']}; difference {pp(c['difference'], 0)} pp "
        f"[{pp(c['interval'][0], 0)}, {pp(c['interval'][1], 0)}], p = "
        f"{stats.fmt_p(c['p_value'])}."
    ) in md
    # Seeded: rendered again, the same interval.
    (run_dir / "report.json").unlink()
    project.render("run=R", "bench=trio")
    assert (
        json.loads((run_dir / "report.json").read_text())["comparisons"][0]["interval"]
        == c["interval"]
    )
    # Planning: alpha's predictions do not vary; fake's repeats tell its variation within a task.
    proc, _ = project.doit("run", "power", "run=R", "bench=trio", "detect=20")
    within = stats.within_task_variance(
        [[int(i in resolved[m]) for m in ("fake", "fake-r2", "fake-r3")] for i in IDS]
    )
    plan = stats.paired_plan(c["sd"], 1, 3, 0.0, within, 0.2)
    assert (
        "  to detect 20 pp: about "
        f"{stats.paired_tasks_needed(0.2, c['sd'])} tasks; with k repeats of each: "
        + ", ".join(f"k={k}: {n} tasks" for k, n in plan.items())
    ) in proc.stdout
    assert plan[10] < plan[1]


def test_fix_date_is_an_optional_checked_field(tmp_path):
    from conftest import SOURCE_ROOT

    from nginx_eval.run.benchmark import load_benchmark

    shipped = load_benchmark(SOURCE_ROOT / "tasks" / "nginx.json")
    assert all(re.fullmatch(r"20\d\d-\d\d-\d\d", t.fix_date) for t in shipped.tasks)
    project = Project(tmp_path, reports=True)
    data = project.benchmark()
    data["tasks"][0]["fix_date"] = "2024-02-30"
    project.write_benchmark(data)
    with pytest.raises(
        UserError,
        match=r"task tiny-add, field fix_date: must be a date "
        r"YYYY-MM-DD, got '2024-02-30'",
    ):
        load_benchmark(project.root / "tasks" / "tiny.json")
    del data["tasks"][0]["fix_date"]
    project.write_benchmark(data)
    assert load_benchmark(project.root / "tasks" / "tiny.json").tasks[0].fix_date == ""
