"""Validation labels planted bad tasks in a fixture benchmark correctly."""

import json

from nginx_eval.benchmark import load_benchmark
from nginx_eval.validate import classify


def test_validation_labels_planted_tasks(project):
    c = project.commits
    bench = project.benchmark()
    add = bench["tasks"][0]
    bench["tasks"] += [
        # The version test passes with and without the fix: it cannot tell them apart.
        dict(add, instance_id="plant-not-discriminating", test_files=["version.t"],
             fail_to_pass=["version.t:1 version output"], pass_to_pass=[]),
        # The coin assertion alternates between runs of the same binary.
        dict(add, instance_id="plant-flaky", test_files=["flaky.t"],
             fail_to_pass=["flaky.t:1 add two numbers"], pass_to_pass=["flaky.t:2 coin"]),
        # The whole file skips: an environment problem, never a pass.
        dict(add, instance_id="plant-env", test_files=["skip.t", "calc_add.t"],
             fail_to_pass=["calc_add.t:1 add two numbers"], pass_to_pass=[]),
        # A "fix" that fixes add but breaks mul, which a pass_to_pass assertion checks.
        dict(add, instance_id="plant-gold-fails", base_commit=c["c_add_bug"],
             fix_commit=c["c_mul_bug"], test_files=["calc_add.t"],
             fail_to_pass=["calc_add.t:1 add two numbers"],
             pass_to_pass=["calc_add.t:2 add zeros", "calc_add.t:3 mul still works"]),
    ]
    project.write_benchmark(bench)
    proc, _ = project.doit("run", "tiny:validate", "repeats=3")
    summary = json.loads((project.results / "default" / "validation.json").read_text())
    verdicts = {iid: r["verdict"] for iid, r in summary.items()}
    assert verdicts == {
        "tiny-add": "valid", "tiny-mul": "valid",
        "plant-not-discriminating": "not_discriminating", "plant-flaky": "flaky",
        "plant-env": "env_error", "plant-gold-fails": "gold_fails"}
    assert summary["plant-flaky"]["flaky"] == ["flaky.t:2 coin"]
    assert summary["plant-gold-fails"]["regressions"] == ["calc_add.t:3 mul still works"]
    assert summary["tiny-mul"]["derived"]["fail_to_pass"] == ["calc_mul.t:1 multiply",
                                                              "calc_mul.t:3 square"]
    assert summary["tiny-add"]["declared_matches"]
    assert summary["tiny-add"]["repeats"] == 3
    md = (project.results / "default" / "validation.md").read_text()
    assert "valid: 2 · gold_fails: 1 · not_discriminating: 1 · flaky: 1 · env_error: 1" in md
    # Validation reuses the gold and none builds: nothing is rebuilt for a scoring run.
    _, executed = project.doit("run", "tiny:gold", "tiny:none", "instances=tiny-add")
    assert all(project.read(m, "tiny-add", "build.json")["reused"] for m in ("gold", "none"))


def test_classify_derives_lists_from_repeats(tmp_path):
    p = tmp_path / "b.json"
    p.write_text(json.dumps({"tasks": [{
        "instance_id": "t", "repo": "a/b", "test_repo": "a/c", "base_commit": "a" * 40,
        "fix_commit": "b" * 40, "test_commit": "c" * 40, "test_files": ["x.t"],
        "configure_flags": [], "fail_to_pass": ["x.t:1"], "pass_to_pass": ["x.t:2"],
        "problem_statement": "p"}]}))
    task = load_benchmark(p).tasks[0]
    run = lambda **r: {"seconds": 1, "results": {k.replace("_", "."): v for k, v in r.items()}}
    ok = classify(task, [run(**{"x_t:1": False, "x_t:2": True})] * 2,
                  [run(**{"x_t:1": True, "x_t:2": True})] * 2, True, [])
    assert ok["verdict"] == "valid" and ok["derived"]["fail_to_pass"] == ["x.t:1"]
    regress = classify(task, [run(**{"x_t:1": False, "x_t:2": True})],
                       [run(**{"x_t:1": True, "x_t:2": False})], True, [])
    assert regress["verdict"] == "gold_fails" and regress["regressions"] == ["x.t:2"]
    nobuild = classify(task, [run(**{"x_t:1": False})], [], False, [])
    assert nobuild["verdict"] == "gold_fails"


def test_ungraded_assertion_unstable_only_without_the_fix_is_reported_not_flaky(tmp_path):
    p = tmp_path / "b.json"
    p.write_text(json.dumps({"tasks": [{
        "instance_id": "t", "repo": "a/b", "test_repo": "a/c", "base_commit": "a" * 40,
        "fix_commit": "b" * 40, "test_commit": "c" * 40, "test_files": ["x.t"],
        "configure_flags": [], "fail_to_pass": ["x.t:1"], "pass_to_pass": [],
        "problem_statement": "p"}]}))
    task = load_benchmark(p).tasks[0]
    base = [{"results": {"x.t:1": False, "x.t:2 no alerts": v}} for v in (True, False, True)]
    fix = [{"results": {"x.t:1": True, "x.t:2 no alerts": True}}] * 3
    r = classify(task, base, fix, True, [])
    assert r["verdict"] == "valid" and r["unstable_base"] == ["x.t:2 no alerts"]
    # Graded, the same wobble makes the task flaky.
    graded = classify(task.__class__(**dict(vars(task), pass_to_pass=("x.t:2 no alerts",))),
                      base, fix, True, [])
    assert graded["verdict"] == "flaky"
    # Any wobble with the fix is flaky, graded or not.
    fix_wobble = [{"results": {"x.t:1": True, "x.t:2 no alerts": v}} for v in (True, False, True)]
    assert classify(task, base, fix_wobble, True, [])["verdict"] == "flaky"
