"""Validation labels planted bad tasks in a fixture benchmark correctly."""

import datetime
import json
import os
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import validation_captures

from nginx_eval.checks import load
from nginx_eval.checks.validate import classify, write_summary
from nginx_eval.core import jsonio
from nginx_eval.core.layout import SOURCE_ROOT, Layout
from nginx_eval.prove.tap import parse_tap
from nginx_eval.run.benchmark import load_benchmark


def test_validation_labels_planted_tasks(project):
    c = project.commits
    bench = project.benchmark()
    add = bench["tasks"][0]
    bench["tasks"] += [
        # The version test passes with and without the fix: it cannot tell them apart.
        dict(
            add,
            instance_id="plant-not-discriminating",
            test_files=["version.t"],
            fail_to_pass=["version.t:1 version output"],
            pass_to_pass=[],
        ),
        # The coin assertion alternates between runs of the same binary.
        dict(
            add,
            instance_id="plant-flaky",
            test_files=["flaky.t"],
            fail_to_pass=["flaky.t:1 add two numbers"],
            pass_to_pass=["flaky.t:2 coin"],
        ),
        # The whole file skips: an environment problem, never a pass.
        dict(
            add,
            instance_id="plant-env",
            test_files=["skip.t", "calc_add.t"],
            fail_to_pass=["calc_add.t:1 add two numbers"],
            pass_to_pass=[],
        ),
        # A "fix" that fixes add but breaks mul, which a pass_to_pass assertion checks.
        dict(
            add,
            instance_id="plant-gold-fails",
            base_commit=c["c_add_bug"],
            fix_commit=c["c_mul_bug"],
            test_files=["calc_add.t"],
            fail_to_pass=["calc_add.t:1 add two numbers"],
            pass_to_pass=["calc_add.t:2 add zeros", "calc_add.t:3 mul still works"],
        ),
    ]
    project.write_benchmark(bench)
    # Two repeats of each side tell a flaky assertion (six tasks: each repeat more is a dozen
    # proves).
    proc, _ = project.doit("run", "tiny:validate", "repeats=2")
    summary = json.loads((project.results / "default" / "validation.json").read_text())
    verdicts = {iid: r["verdict"] for iid, r in summary.items()}
    assert verdicts == {
        "tiny-add": "valid",
        "tiny-mul": "valid",
        "plant-not-discriminating": "not_discriminating",
        "plant-flaky": "flaky",
        "plant-env": "env_error",
        "plant-gold-fails": "gold_fails",
    }
    assert summary["plant-flaky"]["flaky"] == ["flaky.t:2 coin"]
    # The coin passes on every other run of each side's binary: run 1 of two.
    counts = summary["plant-flaky"]["pass_counts"]
    assert counts["base"]["flaky.t:1 add two numbers"] == 0
    assert counts["fix"]["flaky.t:1 add two numbers"] == 2
    coin = (counts["base"]["flaky.t:2 coin"], counts["fix"]["flaky.t:2 coin"])
    assert coin == (1, 1)
    assert summary["plant-flaky"]["run_counts"] == {"base": 2, "fix": 2}
    md = (project.results / "default" / "validation.md").read_text()
    assert "| plant-flaky | flaky |" in md and "| tiny-add | valid | 1 |" in md
    assert f"passes without and with the fix: flaky.t:2 coin {coin[0]}/2 and {coin[1]}/2 |" in md
    assert summary["plant-gold-fails"]["regressions"] == ["calc_add.t:3 mul still works"]
    assert summary["tiny-mul"]["derived"]["fail_to_pass"] == [
        "calc_mul.t:1 multiply",
        "calc_mul.t:3 square",
    ]
    assert summary["tiny-add"]["declared_matches"]
    assert summary["tiny-add"]["repeats"] == 2
    md = (project.results / "default" / "validation.md").read_text()
    assert "valid: 2 · gold_fails: 1 · not_discriminating: 1 · flaky: 1 · env_error: 1" in md
    # Validation reuses the gold and none builds: nothing is rebuilt for a scoring run.
    _, executed = project.doit("run", "tiny:gold", "tiny:none", "instances=tiny-add")
    assert all(project.read(m, "tiny-add", "build.json")["reused"] for m in ("gold", "none"))


def one_task(tmp_path, candidates=False, fail_to_pass=(), pass_to_pass=()):
    """The one task of a benchmark file written for the test (a candidate declares no lists)."""
    task = {
        "instance_id": "t",
        "repo": "a/b",
        "test_repo": "a/c",
        "base_commit": "a" * 40,
        "fix_commit": "b" * 40,
        "test_commit": "c" * 40,
        "test_files": ["x.t"],
        "configure_flags": [],
        "fail_to_pass": list(fail_to_pass),
        "pass_to_pass": list(pass_to_pass),
        "problem_statement": "TODO" if candidates else "p",
    }
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"candidates": candidates, "tasks": [task]}))
    return load_benchmark(path).tasks[0]


def test_classify_derives_lists_from_repeats(tmp_path):
    task = one_task(tmp_path, fail_to_pass=["x.t:1"], pass_to_pass=["x.t:2"])
    run = lambda **r: {"seconds": 1, "results": {k.replace("_", "."): v for k, v in r.items()}}
    ok = classify(
        task,
        [run(**{"x_t:1": False, "x_t:2": True})] * 2,
        [run(**{"x_t:1": True, "x_t:2": True})] * 2,
        True,
        [],
    )
    assert ok["verdict"] == "valid" and ok["derived"]["fail_to_pass"] == ["x.t:1"]
    regress = classify(
        task,
        [run(**{"x_t:1": False, "x_t:2": True})],
        [run(**{"x_t:1": True, "x_t:2": False})],
        True,
        [],
    )
    assert regress["verdict"] == "gold_fails" and regress["regressions"] == ["x.t:2"]
    nobuild = classify(task, [run(**{"x_t:1": False})], [], False, [])
    assert nobuild["verdict"] == "gold_fails"


def test_ungraded_assertion_unstable_only_without_the_fix_is_reported_not_flaky(tmp_path):
    task = one_task(tmp_path, fail_to_pass=["x.t:1"], pass_to_pass=[])
    base = [{"results": {"x.t:1": False, "x.t:2 no alerts": v}} for v in (True, False, True)]
    fix = [{"results": {"x.t:1": True, "x.t:2 no alerts": True}}] * 3
    r = classify(task, base, fix, True, [])
    assert r["verdict"] == "valid" and r["unstable_base"] == ["x.t:2 no alerts"]
    # Graded, the same wobble makes the task flaky.
    graded = classify(
        task.__class__(**dict(vars(task), pass_to_pass=("x.t:2 no alerts",))), base, fix, True, []
    )
    assert graded["verdict"] == "flaky"
    # Any wobble with the fix is flaky, graded or not.
    fix_wobble = [{"results": {"x.t:1": True, "x.t:2 no alerts": v}} for v in (True, False, True)]
    assert classify(task, base, fix_wobble, True, [])["verdict"] == "flaky"


# One assertion the fix repairs, one that fails in run BAD (of 5) of a side, one always passing.
CONTROL_T = """plan(tests => 3);
ok($ENV{SIDE} eq 'fix', 'fixed');
ok($ENV{RUN} != $ENV{BAD}, 'control');
ok(1, 'stable');
"""


def five_prove_runs(prove_v, side, bad_run):
    """Results of five runs of CONTROL_T, as validate.run_side records them: each the TAP of real
    `prove -v` with its RUN. CONTROL_T's TAP depends on RUN only through RUN == BAD, so the runs
    other than the bad one print what the first of them printed: prove runs once for each."""
    printed = {}
    runs = []
    for run in range(1, 6):
        if (run == bad_run) not in printed:
            env = {"SIDE": side, "RUN": str(run), "BAD": str(bad_run)}
            printed[run == bad_run] = prove_v("x.t", CONTROL_T, env=env)[0]
        out = printed[run == bad_run]
        runs.append({"seconds": 0.1, "results": parse_tap("x.t", out).results})
    return runs


def test_pass_counts_and_stable_lists_from_five_real_prove_runs(tmp_path, prove_v):
    task = one_task(
        tmp_path, fail_to_pass=["x.t:1 fixed"], pass_to_pass=["x.t:2 control", "x.t:3 stable"]
    )
    # The control assertion fails one run in five on both sides (as proxy_h2_keepalive.t:49 did).
    base, fix = five_prove_runs(prove_v, "base", 3), five_prove_runs(prove_v, "fix", 5)
    r = classify(task, base, fix, True, [])
    assert r["pass_counts"] == {
        "base": {"x.t:1 fixed": 0, "x.t:2 control": 4, "x.t:3 stable": 5},
        "fix": {"x.t:1 fixed": 5, "x.t:2 control": 4, "x.t:3 stable": 5},
    }
    assert r["run_counts"] == {"base": 5, "fix": 5}
    # Only assertions stable on every run are derived; a graded one that is not makes it flaky.
    assert r["derived"] == {"fail_to_pass": ["x.t:1 fixed"], "pass_to_pass": ["x.t:3 stable"]}
    assert r["verdict"] == "flaky" and r["flaky"] == ["x.t:2 control"]
    # Failing only without the fix and not graded: reported with its counts, the task is valid.
    ungraded = task.__class__(**dict(vars(task), pass_to_pass=("x.t:3 stable",)))
    r = classify(ungraded, base, five_prove_runs(prove_v, "fix", 0), True, [])
    assert r["verdict"] == "valid" and r["unstable_base"] == ["x.t:2 control"]
    assert r["pass_counts"]["base"]["x.t:2 control"] == 4
    assert r["pass_counts"]["fix"]["x.t:2 control"] == 5


# validation.md as the f-strings that wrote it before templates/validation.md.j2 did, byte for byte.
EXPECTED_MD = (
    "# Task validation (3 tasks, 3 repeats of base and fix each)\n"
    "\n"
    "valid: 1 · gold_fails: 1 · not_discriminating: 0 · flaky: 0 · env_error: 1\n"
    "\n"
    "| task | verdict | fail_to_pass | pass_to_pass | declared = derived | notes |\n"
    "|---|---|---|---|---|---|\n"
    "| t-valid | valid | 1 | 2 | yes |  |\n"
    "| t-pipes | gold_fails | 0 | 1 | no | declared assertions fail with the fix: a.t:1 x / y; "
    "regressions: a.t:4 r/1, a.t:5 r2, a.t:6 r3; ungraded, unstable without the fix: a.t:8 u1, "
    "a.t:9 u/2, a.t:10 u3 |\n"
    "| t-old | env_error | 0 | 0 | yes | skip.t: no plan; b.t: died |\n"
)


def _record(iid, verdict, reasons=(), f2p=(), p2p=(), matches=True, regressions=(), unstable=None):
    rec = {
        "inputs": "d",
        "instance_id": iid,
        "verdict": verdict,
        "reasons": list(reasons),
        "derived": {"fail_to_pass": list(f2p), "pass_to_pass": list(p2p)},
        "declared_matches": matches,
        "regressions": list(regressions),
        "runs": {"base": [], "fix": []},
    }
    if unstable is not None:  # records from before the field have no unstable_base
        rec["unstable_base"] = list(unstable)
    return rec


def test_validation_md_from_the_template(tmp_path, capsys):
    layout = Layout(
        root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results", run="x"
    )
    records = [
        _record("t-valid", "valid", f2p=["a.t:1 x"], p2p=["a.t:2 y", "a.t:3 z"], unstable=[]),
        _record(
            "t-pipes",
            "gold_fails",
            reasons=["declared assertions fail with the fix: a.t:1 x | y"],
            p2p=["a.t:2"],
            matches=False,
            regressions=["a.t:4 r|1", "a.t:5 r2", "a.t:6 r3", "a.t:7 r4"],
            unstable=["a.t:8 u1", "a.t:9 u|2", "a.t:10 u3", "a.t:11 u4"],
        ),
        _record("t-old", "env_error", reasons=["skip.t: no plan", "b.t: died"]),
    ]
    for rec in records:
        jsonio.write_json(layout.validation_dir(rec["instance_id"]) / "validation.json", rec)
    write_summary(layout, [SimpleNamespace(instance_id=r["instance_id"]) for r in records], 3)
    assert layout.validation_md.read_bytes() == EXPECTED_MD.encode()
    assert capsys.readouterr().out == "\n".join(EXPECTED_MD.splitlines()[:3]) + "\n"
    summary = json.loads(layout.validation_json.read_text())
    assert set(summary) == {"t-valid", "t-pipes", "t-old"} and "runs" not in summary["t-old"]

    empty = Layout(
        root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "empty", run="x"
    )
    write_summary(empty, [], 2)
    assert empty.validation_md.read_text() == (
        "# Task validation (0 tasks, 2 repeats of base and fix each)\n\n"
        "valid: 0 · gold_fails: 0 · not_discriminating: 0 · flaky: 0 · env_error: 0\n\n"
        "| task | verdict | fail_to_pass | pass_to_pass | declared = derived | notes |\n"
        "|---|---|---|---|---|---|\n"
    )


def _geo_task():
    """nginx__nginx-0de6e878ba43 of the shipped file, graded on geo_include_mask.t alone (the
    file the captures are of)."""
    task = next(
        t
        for t in load_benchmark(SOURCE_ROOT / "tasks" / "nginx.json").tasks
        if t.instance_id == "nginx__nginx-0de6e878ba43"
    )
    mine = lambda ids: tuple(i for i in ids if i.startswith("geo_include_mask.t:"))
    return replace(
        task,
        test_files=("geo_include_mask.t",),
        fail_to_pass=mine(task.fail_to_pass),
        pass_to_pass=mine(task.pass_to_pass),
    )


def _runs(taps):
    return [
        {"seconds": 1.0, "results": parse_tap("geo_include_mask.t", tap).results} for tap in taps
    ]


def test_a_gold_that_fails_once_in_twelve_recorded_runs_is_not_admitted():
    task = _geo_task()
    base, fix = _runs([validation_captures.BASE_RUN]), _runs(validation_captures.FIX_RUNS)
    r = classify(task, base, fix, True, [])
    assert r["flake"] == {
        "gold_failures": 1,
        "gold_runs": 12,
        "none_passes": 0,
        "none_runs": 1,
        "gold_failing": {
            "geo_include_mask.t:3 first file of the mask": 1,
            "geo_include_mask.t:4 second file of the mask": 1,
            "geo_include_mask.t:5 single file": 1,
        },
    }
    assert r["verdict"] == "flaky" and not r["admitted"]
    assert r["not_admitted"] == [
        "the fix failed 1 of 12 runs: geo_include_mask.t:3 first file of the mask (1/12), "
        "geo_include_mask.t:4 second file of the mask (1/12), geo_include_mask.t:5 single file "
        "(1/12)"
    ]
    # The eleven runs that passed alone: valid and admitted, no run of either side flaked.
    passed = [t for t in validation_captures.FIX_RUNS if "Result: PASS" in t]
    r = classify(task, base, _runs(passed), True, [])
    assert (r["verdict"], r["admitted"], r["not_admitted"]) == ("valid", True, [])
    assert (r["flake"]["gold_failures"], r["flake"]["gold_runs"]) == (0, 11)
    # The base's run passes no fix's graded assertions (the reload was refused): a none
    # pass would be a base run passing all of them, which the recorded fix runs do.
    r = classify(task, _runs(passed[:2]), _runs(passed), True, [])
    assert (r["flake"]["none_passes"], r["flake"]["none_runs"]) == (2, 2)
    assert r["verdict"] == "not_discriminating" and not r["admitted"]
    assert r["not_admitted"] == ["verdict not_discriminating"]


def test_flake_rates_of_a_candidate_from_real_prove_runs(tmp_path, prove_v):
    """A candidate declares nothing: a fix's run fails when an assertion that passed in another
    of its runs fails, a base's run passes when it passes all of those."""
    task = one_task(tmp_path, candidates=True)
    base, fix = five_prove_runs(prove_v, "base", 0), five_prove_runs(prove_v, "fix", 2)
    r = classify(task, base, fix, True, [])
    assert r["flake"] == {
        "gold_failures": 1,
        "gold_runs": 5,
        "none_passes": 0,
        "none_runs": 5,
        "gold_failing": {"x.t:2 control": 1},
    }
    assert not r["admitted"]


def test_load_keeps_one_process_per_core_for_the_run(tmp_path):
    """Two units proving at once under load=cpu: one set of load processes (the run's lock),
    children of this process, at its niceness, gone when the units end."""
    layout = Layout(
        root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results", run="x"
    )
    pids_file = layout.lock("load-x").with_suffix(".pids")
    first, second = {}, {}
    with load.busy(layout, "cpu", first), load.busy(layout, "cpu", second):
        for _ in range(100):
            if pids_file.exists():
                break
            time.sleep(0.05)
        time.sleep(3 * load.POLL_SECONDS)
        pids = [int(p) for p in pids_file.read_text().split()]
        assert len(pids) == load.load_processes("cpu") == os.cpu_count()
        for pid in pids:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            assert int(stat[1]) == os.getpid()  # the parent
            assert int(stat[16]) == os.nice(0)  # the niceness
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)
    for measured in (first, second):
        assert 0 < measured["load_coverage"] <= 1 and measured["loadavg"] >= 0
    quiet = load.conditions(1, "none")
    with load.busy(layout, "none", quiet):
        time.sleep(load.POLL_SECONDS)
    assert quiet["load_coverage"] is None and quiet["loadavg"] >= 0
    assert load.conditions(10, "cpu") == {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "repeats": 10,
        "load": "cpu",
        "load_processes": os.cpu_count(),
        "cores": os.cpu_count(),
        "load_coverage": None,
        "loadavg": None,
    }


def test_a_flaky_gold_under_load_is_not_admitted(project):
    """flaky.t's coin fails every other run of the fix: validation under load=cpu catches it in
    two repeats (the load processes keep both cores busy for as long as the run proves: each
    repeat more is seconds of a processor), keeps the task out with the failing assertion, and
    records the conditions it ran under."""
    bench = project.benchmark()
    add = bench["tasks"][0]
    bench["tasks"] = [
        add,
        dict(
            add,
            instance_id="plant-flaky",
            test_files=["flaky.t"],
            fail_to_pass=["flaky.t:1 add two numbers"],
            pass_to_pass=["flaky.t:2 coin"],
        ),
    ]
    project.write_benchmark(bench)
    project.doit("run", "tiny:validate", "repeats=2", "load=cpu")
    summary = json.loads((project.results / "default" / "validation.json").read_text())
    flaky, good = summary["plant-flaky"], summary["tiny-add"]
    assert flaky["flake"] == {
        "gold_failures": 1,
        "gold_runs": 2,
        "none_passes": 0,
        "none_runs": 2,
        "gold_failing": {"flaky.t:2 coin": 1},
    }
    assert not flaky["admitted"] and flaky["verdict"] == "flaky"
    assert flaky["not_admitted"] == ["the fix failed 1 of 2 runs: flaky.t:2 coin (1/2)"]
    assert good["admitted"] and good["flake"]["gold_failures"] == 0
    for record in (flaky, good):
        c = record["conditions"]
        assert (c["repeats"], c["load"], c["load_processes"], c["cores"]) == (
            2,
            "cpu",
            os.cpu_count(),
            os.cpu_count(),
        )
        assert c["date"] == datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
        # The load ran while the task proved (sampled every half second).
        assert 0 < c["load_coverage"] <= 1
    md = (project.results / "default" / "validation.md").read_text()
    assert "Admitted: 1 of 2 " in md
    assert f"| 2 repeats, load=cpu: {os.cpu_count()} CPU-bound processes, " in md
    assert (
        "| plant-flaky | no: the fix failed 1 of 2 runs: flaky.t:2 coin (1/2) | 1/2 | 0/2 "
        "| 2, cpu |" in md
    )
    # Validated again without load, the same task is another validation (its config says so).
    _, executed = project.doit("run", "tiny:validate", "repeats=2")
    assert "validate:tiny/plant-flaky" in executed
    summary = json.loads((project.results / "default" / "validation.json").read_text())
    assert summary["plant-flaky"]["conditions"]["load"] == "none"
    assert summary["plant-flaky"]["conditions"]["load_coverage"] is None
