"""End-to-end: real doit, git, cc, make and prove on the fixture repositories."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import DODO, Project


def stage(executed, name):
    return sorted(t for t in executed if t.startswith(name + ":"))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A project after one `doit run tiny`, for the tests that read it, run it again with
    nothing to do or add a run of another name: the run is the same for each. The tests after
    those (in the order of this file) change the project, each one thing, and run it to the end
    again, so the next finds it run with nothing pending; each asserts what changed relative to
    the state it found, so it holds alone (-k) as it does after the others."""
    project = Project(tmp_path_factory.mktemp("tiny-run"))
    project.doit("run", "tiny")
    return project


@pytest.mark.e2e
def test_gold_none_and_agent_verdicts(tiny_run):
    project = tiny_run
    rows = {}
    for mode in ("gold", "none", "fake"):
        for line in (project.results / "default" / mode / "results.jsonl").read_text().splitlines():
            r = json.loads(line)
            rows[(mode, r["instance_id"])] = r
    assert {k: v["status"] for k, v in rows.items()} == {
        ("gold", "tiny-add"): "resolved",
        ("gold", "tiny-mul"): "resolved",
        ("none", "tiny-add"): "unresolved",
        ("none", "tiny-mul"): "unresolved",
        ("fake", "tiny-add"): "resolved",
        ("fake", "tiny-mul"): "resolved",
    }
    grade = project.read("none", "tiny-mul", "grade.json")
    # "not ok 3 - square # TODO" is a failure even though prove calls the file a pass.
    assert grade["fail_to_pass"]["failed"] == ["calc_mul.t:1 multiply", "calc_mul.t:3 square"]
    agent = project.read("fake", "tiny-add", "agent.json")
    assert agent["status"] == "completed" and agent["cost_usd"] == 0.25
    assert agent["tokens"]["input"] == 1000
    assert sorted(project.agent_calls()) == ["tiny-add", "tiny-mul"]  # one call a task
    preds = [
        json.loads(line)
        for line in (project.results / "default" / "gold" / "predictions.jsonl")
        .read_text()
        .splitlines()
    ]
    assert {p["instance_id"] for p in preds} == {"tiny-add", "tiny-mul"}
    assert all(set(p) == {"instance_id", "model_name_or_path", "model_patch"} for p in preds)
    assert "a + b" in preds[0]["model_patch"] or "a * b" in preds[0]["model_patch"]
    assert (project.task_dir("none", "tiny-add") / "model.patch").read_bytes() == b""


@pytest.mark.e2e
def test_second_run_executes_nothing(tiny_run):
    _, executed = tiny_run.doit("run", "tiny")
    assert executed == []


@pytest.mark.e2e
def test_identical_patches_share_one_build(tiny_run):
    project = tiny_run
    gold = project.read("gold", "tiny-add", "build.json")
    fake = project.read("fake", "tiny-add", "build.json")
    # The scripted agent writes exactly the fix: same bytes, so one build serves both modes.
    assert (project.task_dir("gold", "tiny-add") / "model.patch").read_bytes() == (
        project.task_dir("fake", "tiny-add") / "model.patch"
    ).read_bytes()
    assert gold["key"] == fake["key"] and gold["binary"] == fake["binary"]
    assert gold["reused"] or fake["reused"]
    assert project.read("none", "tiny-add", "build.json")["kind"] in ("clean", "sibling")
    assert gold["kind"] == "incremental"
    # Builds on disk: tiny-add base, tiny-add fix, tiny-mul base, tiny-mul fix (shared by gold and
    # fake again): four, not six.
    builds = [p for p in (project.cache / "builds").iterdir() if not p.name.startswith(".")]
    assert len(builds) == 4
    # Both clean builds ran configure, whose one test program was built once and kept.
    kept = [
        p for p in (project.cache / "feature-tests").iterdir() if p.is_file() and p.suffix != ".err"
    ]
    assert len(kept) == 1 and os.access(kept[0], os.X_OK)
    # A new run of the same patches builds nothing.
    _, executed = project.doit("run", "tiny", "run=again")
    assert all(
        project.read(m, i, "build.json", "again")["reused"]
        for m in ("gold", "none", "fake")
        for i in ("tiny-add", "tiny-mul")
    )


@pytest.mark.e2e
def test_deleting_one_grade_reruns_only_that_grade(tiny_run):
    project = tiny_run
    (project.task_dir("gold", "tiny-mul") / "grade.json").unlink()
    _, executed = project.doit("run", "tiny")
    assert [t for t in executed if not t.startswith("results:")] == ["grade:tiny/gold/tiny-mul"]
    assert project.read("gold", "tiny-mul", "grade.json")["status"] == "resolved"


@pytest.mark.e2e
def test_changing_test_files_reruns_prove_and_grade_of_that_task_only(tiny_run):
    project = tiny_run
    calls = len(project.agent_calls())
    bench = project.benchmark()
    bench["tasks"][0]["test_files"].append("version.t")
    bench["tasks"][0]["pass_to_pass"].append("version.t:1 version output")
    project.write_benchmark(bench)
    _, executed = project.doit("run", "tiny")
    assert stage(executed, "agent") == [] and stage(executed, "build") == []
    assert stage(executed, "patch") == [] and stage(executed, "workspace") == []
    assert stage(executed, "prove") == [
        f"prove:tiny/{m}/tiny-add" for m in ("fake", "gold", "none")
    ]
    assert stage(executed, "grade") == [
        f"grade:tiny/{m}/tiny-add" for m in ("fake", "gold", "none")
    ]
    assert len(project.agent_calls()) == calls
    assert (
        "version.t:1 version output"
        in project.read("gold", "tiny-add", "grade.json")["pass_to_pass"]["passed"]
    )


@pytest.mark.e2e
def test_editing_a_mode_command_reruns_that_modes_agents(tiny_run):
    project = tiny_run
    calls = project.agent_calls()
    modes = (project.root / "modes.toml").read_text()
    (project.root / "modes.toml").write_text(modes.replace("timeout = 20", "timeout = 21"))
    _, executed = project.doit("run", "tiny")
    assert stage(executed, "agent") == ["agent:tiny/fake/tiny-add", "agent:tiny/fake/tiny-mul"]
    assert sorted(project.agent_calls()) == sorted([*calls, "tiny-add", "tiny-mul"])
    assert not [t for t in executed if "/gold/" in t or "/none/" in t]


@pytest.mark.e2e
def test_downstream_change_never_reruns_the_agent(tiny_run):
    project = tiny_run
    calls = sorted(project.agent_calls())
    bench = project.benchmark()
    bench["tasks"][1]["configure_flags"] = ["--with-debug", "--with-http_v2_module"]
    project.write_benchmark(bench)
    _, executed = project.doit("run", "tiny:fake")
    assert stage(executed, "build") == ["build:tiny/fake/tiny-mul"]
    assert stage(executed, "agent") == []
    assert sorted(project.agent_calls()) == calls


def test_forget_reruns_an_agent_but_a_lost_database_does_not(project):
    project.doit("run", "tiny:fake")
    project.doit("forget", "agent:tiny/fake/tiny-add")
    project.doit("run", "tiny:fake")
    assert sorted(project.agent_calls()) == ["tiny-add", "tiny-add", "tiny-mul"]
    # The database is a cache: without it nothing runs again, since every task's freshness is
    # read from its own output (stamps.py); agents above all are not paid for twice.
    for f in (project.cache / "doit").glob("default.db*"):
        if f.is_dir():
            continue
        f.unlink()
    _, executed = project.doit("run", "tiny:fake")
    assert stage(executed, "agent") == [] and stage(executed, "grade") == []
    assert sorted(project.agent_calls()) == ["tiny-add", "tiny-add", "tiny-mul"]
    # Not even when doit is told to run everything: the agent's action checks agent.json again.
    _, executed = project.doit("run", "-a", "tiny:fake")
    assert stage(executed, "agent") == ["agent:tiny/fake/tiny-add", "agent:tiny/fake/tiny-mul"]
    assert sorted(project.agent_calls()) == ["tiny-add", "tiny-add", "tiny-mul"]


def test_forget_redoes_one_unit_of_any_stage(project):
    """`doit forget <stage>:<unit>` redoes that unit at the next run, once, for every stage whose
    freshness is its own stamp; a stage it cannot redo, a task with no work of its own and
    --all are one line each, and nothing is forgotten (issue 37)."""
    project.doit("run", "tiny:gold")
    unit = "tiny/gold/tiny-add"
    for name, redone in (
        (f"prove:{unit}", [f"prove:{unit}", f"grade:{unit}", "results:tiny/gold"]),
        (f"build:{unit}", [f"build:{unit}", f"prove:{unit}", f"grade:{unit}", "results:tiny/gold"]),
        (f"patch:{unit}", [f"patch:{unit}"]),
        (f"grade:{unit}", [f"grade:{unit}"]),
        ("results:tiny/gold", ["results:tiny/gold"]),
        ("repos:acme+tiny", ["repos:acme+tiny"]),
    ):
        proc, _ = project.doit("forget", name)
        assert proc.stdout == f"forgetting {name}\n"
        _, executed = project.doit("run", "tiny:gold")
        assert executed == redone, (name, executed)
        _, executed = project.doit("run", "tiny:gold")
        assert executed == [], name
    # A forgotten build is the same build, taken again from the cache and checked.
    assert project.read("gold", "tiny-add", "build.json")["reused"] is True
    # A whole stage: every unit of it.
    project.doit("forget", "grade")
    _, executed = project.doit("run", "tiny:gold")
    assert stage(executed, "grade") == ["grade:tiny/gold/tiny-add", "grade:tiny/gold/tiny-mul"]
    markers = project.cache / "doit" / "default.db.forgotten"
    pending = sorted(markers.glob("*"))  # the other modes' grades, until they run
    for words, says in (
        (["forget", "base"], "cannot forget base: a base build is shared"),
        (["forget", "workspace:tiny/fake/tiny-add"], "doit forget agent:"),
        (["forget", "tiny:gold"], "tiny:gold does no work of its own"),
        (["forget", "--all"], "doit forget --all would run every agent again"),
    ):
        proc, _ = project.doit(*words, check=False)
        assert proc.returncode == 2 and proc.stdout == "", words
        assert proc.stderr.startswith("nginx-eval: error: ") and says in proc.stderr, words
        assert len(proc.stderr.splitlines()) == 1
        assert sorted(markers.glob("*")) == pending, words


def test_run_and_selection_variables(project):
    _, executed = project.doit("run", "tiny:gold", "run=sel", "instances=tiny-mul")
    assert stage(executed, "grade") == ["grade:tiny/gold/tiny-mul"]
    assert (project.results / "sel" / "gold" / "tiny-mul" / "grade.json").exists()
    assert not (project.results / "sel" / "gold" / "tiny-add").exists()
    _, executed = project.doit("run", "tiny:none", "run=lim", "limit=1")
    assert stage(executed, "grade") == ["grade:tiny/none/tiny-add"]


def test_workspace_holds_nothing_after_the_base(project):
    project.doit("run", "tiny:fake", "keep_workspaces=1")
    ws = project.cache / "workspaces" / "default" / "fake" / "tiny-add"
    git = lambda *a: subprocess.run(["git", *a], cwd=ws, capture_output=True, text=True)
    log = git("log", "--all", "--format=%H").stdout.split()
    assert log[0] == project.commits["c_add_bug"] and len(log) == 1
    for later in ("c_add_fix", "c_mul_bug", "c_mul_fix", "c_later"):
        assert git("cat-file", "-e", project.commits[later]).returncode != 0
    assert not any("tests" in p.name for p in ws.iterdir())
    assert (ws / ".issue.md").read_text().startswith("tiny-add:")
    reflog = git("reflog", "--all", "--format=%H").stdout.split()
    assert set(reflog) <= {project.commits["c_add_bug"]}


def test_killed_build_resumes_without_a_half_built_binary(project):
    # A configure flag that makes the fixture's make sleep, so the kill lands mid-build.
    bench = project.benchmark()
    bench["tasks"] = bench["tasks"][:1]
    project.write_benchmark(bench)
    env = dict(project.env, MAKEFLAGS="", CC_SLEEP="1")
    slow_cc = project.base / "bin" / "cc"
    slow_cc.parent.mkdir()
    slow_cc.write_text('#!/bin/sh\nsleep 2\nexec /usr/bin/cc "$@"\n')
    slow_cc.chmod(0o755)
    env["PATH"] = f"{slow_cc.parent}:{env['PATH']}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "doit", "-f", str(DODO), "run", "tiny:none", "strict=0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.time() + 60
    tmp = project.cache / "builds" / ".tmp"
    while time.time() < deadline and not (tmp.exists() and any(tmp.glob("*/tree/objs"))):
        time.sleep(0.1)
    assert tmp.exists(), "the build never started"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    published = [p for p in (project.cache / "builds").iterdir() if not p.name.startswith(".")]
    assert published == []  # nothing half-built is visible
    _, executed = project.doit("run", "tiny:none", env={"PATH": env["PATH"]})
    assert "build:tiny/none/tiny-add" in executed
    build = project.read("none", "tiny-add", "build.json")
    assert build["status"] == "built"
    assert project.read("none", "tiny-add", "grade.json")["status"] == "unresolved"


EXPECTED = {
    ("gold", "tiny-add"): "resolved",
    ("gold", "tiny-mul"): "resolved",
    ("none", "tiny-add"): "unresolved",
    ("none", "tiny-mul"): "unresolved",
    ("fake", "tiny-add"): "resolved",
    ("fake", "tiny-mul"): "resolved",
}


def statuses(project, run="default"):
    out = {}
    for mode in ("gold", "none", "fake"):
        for iid in ("tiny-add", "tiny-mul"):
            out[(mode, iid)] = project.read(mode, iid, "grade.json", run)["status"]
    return out


def test_parallel_runs_give_the_same_verdicts(project):
    project.doit("run", "-n", "2", "tiny", "run=proc")
    assert statuses(project, "proc") == EXPECTED
    project.doit("run", "-n", "2", "-P", "thread", "tiny", "run=thread")
    assert statuses(project, "thread") == EXPECTED
    _, executed = project.doit("run", "-n", "2", "-P", "thread", "tiny", "run=thread")
    assert executed == []


def test_incremental_build_recompiles_only_the_touched_file(project):
    project.doit("run", "tiny:gold")
    log = (project.task_dir("gold", "tiny-add") / "build.log").read_text()
    assert "incremental build from build" in log
    assert "src/core/calc.c" in log and "src/core/nginx.c" not in log
    assert "auto/configure" not in log


def test_base_build_of_another_commit_starts_from_a_sibling(project):
    # Same auto/configure and flags at both base commits: the second base build skips configure.
    bench = project.benchmark()
    bench["tasks"][1]["configure_flags"] = []
    project.write_benchmark(bench)
    project.doit("run", "tiny:none")
    kinds = sorted(project.read("none", i, "build.json")["kind"] for i in ("tiny-add", "tiny-mul"))
    assert kinds == ["clean", "clean"] or kinds == ["clean", "sibling"]
    sibling = [
        i
        for i in ("tiny-add", "tiny-mul")
        if project.read("none", i, "build.json")["kind"] == "sibling"
    ]
    assert sibling, "the second base build should reuse the first"
    log = (project.task_dir("none", sibling[0]) / "build.log").read_text()
    assert "configure skipped" in log and "auto/configure" not in log
    assert "src/core/nginx.c" not in log  # unchanged between the two commits
    # Its binary behaves as its own commit's source says: the verdicts are those of a clean build.
    assert project.read("none", "tiny-mul", "grade.json")["fail_to_pass"]["failed"] == [
        "calc_mul.t:1 multiply",
        "calc_mul.t:3 square",
    ]
    assert project.read("none", "tiny-add", "grade.json")["pass_to_pass"]["failed"] == []


def test_unknown_mode_and_bad_task_file_fail_before_any_work(project):
    proc, executed = project.doit("run", "tiny:bogus", check=False)
    assert proc.returncode != 0 and executed == []
    assert "unknown mode 'bogus'; known modes: fake, gold, none" in proc.stderr
    bench = project.benchmark()
    bench["tasks"][1]["base_commit"] = "HEAD"
    project.write_benchmark(bench)
    proc, executed = project.doit("run", "tiny:gold", check=False)
    assert proc.returncode != 0 and executed == []
    assert proc.stderr.strip().splitlines()[-1] == (
        f"nginx-eval: error: {project.root / 'tasks' / 'tiny.json'}, task tiny-mul, "
        "field base_commit: must be a full 40-hex commit hash, got 'HEAD'"
    )
    assert not project.results.exists()


def test_before_any_clone_no_unit_asks_git_for_the_tests_trees(tmp_path, monkeypatch):
    """The shipped benchmark's units, made on a fresh cache: no clone, so no tests tree to find;
    asking git (suite.trees_as_of) for all tasks once per unit made the load quadratic."""
    from conftest import SOURCE_ROOT

    from nginx_eval import pipeline
    from nginx_eval.suite import stage as suite

    monkeypatch.setenv("NGINX_EVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("NGINX_EVAL_RESULTS", str(tmp_path / "results"))
    asked = []  # how many tasks each call asked about

    def trees_as_of(layout, tasks):
        tasks = list(tasks)
        asked.append(len(tasks))
        return {t.instance_id: None for t in tasks}

    monkeypatch.setattr(suite, "trees_as_of", trees_as_of)
    ctx = pipeline.load_context(SOURCE_ROOT, argv=["run", "nginx"])
    mode = next(m for m in ctx.mode_list() if m.tests)
    assert [ctx.tests_tree(ctx.layout, t) for t in ctx.tasks[:50]] == [None] * 50
    assert asked == []
    agent_units = [ctx.unit_agent_inputs(mode, t) for t in ctx.tasks[:50]]
    # One task at a time (agent.agent_inputs asks for its own), never the benchmark's 196.
    assert len(agent_units) == 50 and set(asked) == {1}
