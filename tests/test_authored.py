"""Authored tests (benchmark.py, "tests": "authored"): a task graded by a test file the project
keeps in tasks/tests/, on the test tree of its test commit plus that file. Loading, the tree's
identity and check, the shadowing rule, and the verdicts, validation, report and card on the
fixture repositories."""

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from conftest import SOURCE_ROOT, Project, section, table_row

from nginx_eval.core.errors import UserError
from nginx_eval.core.layout import Layout
from nginx_eval.prove import tree as testtree
from nginx_eval.run.benchmark import load_benchmark

# A test of add() written for the benchmark: the fixture suite's calc_add.t, in other words.
OWN_TEST = """#!/usr/bin/perl
use strict;
use warnings;
use Test::More;
my $bin = $ENV{TEST_NGINX_BINARY} or die "no TEST_NGINX_BINARY";
sub run { my $out = `$bin @_`; chomp $out; $out }
plan(tests => 2);
is(run('add', 20, 22), '42', 'adds what the user asked');
is(run('mul', 6, 7), '42', 'multiplies as before');
"""
OWN = ["calc_own.t:1 adds what the user asked"]
OWN_P2P = ["calc_own.t:2 multiplies as before", "calc_add.t:3 mul still works"]


def authored_task(project, name="calc_own.t", text=OWN_TEST):
    """An authored task on the fixture's add() bug: its own file plus the suite's calc_add.t,
    added to tasks/tiny.json."""
    own = project.root / "tasks" / "tests" / name
    own.parent.mkdir(parents=True, exist_ok=True)
    own.write_text(text)
    bench = project.benchmark()
    add = bench["tasks"][0]
    bench["tasks"].append(
        dict(
            add,
            instance_id="tiny-own",
            tests="authored",
            test_files=[name, "calc_add.t"],
            fail_to_pass=OWN,
            pass_to_pass=OWN_P2P,
        )
    )
    project.write_benchmark(bench)
    return own


def write_bench(tmp_path, task, files=None):
    (tmp_path / "tests").mkdir(exist_ok=True)
    for name, text in (files or {}).items():
        (tmp_path / "tests" / name).write_text(text)
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"tasks": [task]}))
    return path


GOOD = {
    "instance_id": "x-1",
    "repo": "nginx/nginx",
    "test_repo": "nginx/nginx-tests",
    "base_commit": "a" * 40,
    "fix_commit": "b" * 40,
    "test_commit": "c" * 40,
    "test_files": ["own.t", "h2.t"],
    "configure_flags": [],
    "fail_to_pass": ["own.t:1 body"],
    "pass_to_pass": ["h2.t:1 first"],
    "problem_statement": "requests hang",
    "tests": "authored",
}


def test_an_authored_task_carries_its_files_and_a_tree_named_by_their_content(tmp_path):
    bench = load_benchmark(write_bench(tmp_path, GOOD, {"own.t": "ok 1\n"}))
    task = bench.tasks[0]
    assert task.tests == "authored" and task.authored == (("own.t", b"ok 1\n"),)
    assert task.tests_tree_id.startswith("c" * 40 + "+")
    first = (task.tests_tree_id, task.to_json(), bench.digest)
    assert task.to_json()["authored"] == {"own.t": task.authored_digests["own.t"]}
    # Another content: another tree, another validation input, another benchmark digest.
    (tmp_path / "tests" / "own.t").write_text("ok 1 - edited\n")
    edited = load_benchmark(tmp_path / "b.json")
    assert edited.tasks[0].tests_tree_id != first[0]
    assert edited.tasks[0].to_json() != first[1] and edited.digest != first[2]
    # A task of nginx-tests keeps its tree, its record and the file's plain digest.
    plain = dict(GOOD, test_files=["h2.t"], fail_to_pass=["h2.t:2 x"])
    del plain["tests"]
    suite = load_benchmark(write_bench(tmp_path, plain)).tasks[0]
    assert suite.tests == "nginx-tests" and suite.tests_tree_id == "c" * 40
    assert "tests" not in suite.to_json() and "authored" not in suite.to_json()


@pytest.mark.parametrize(
    "change,files,expect",
    [
        ({"tests": "mine"}, {"own.t": "x"}, "must be one of 'nginx-tests', 'authored'"),
        ({}, {}, "none of test_files (own.t, h2.t) is in"),
        ({"tests": 1}, {"own.t": "x"}, "wrong type"),
    ],
)
def test_bad_authored_tasks_name_the_file_task_and_field(tmp_path, change, files, expect):
    with pytest.raises(UserError) as e:
        load_benchmark(write_bench(tmp_path, dict(GOOD, **change), files))
    message = str(e.value)
    assert "b.json" in message and "task x-1" in message and "field tests" in message
    assert expect in message


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """A fixture project with the authored task tiny-own and one run of gold and none, which the
    tests of the verdicts, the tree and the report read; the test that edits the authored file
    comes last in the module."""
    project = Project(tmp_path_factory.mktemp("authored"))
    own = authored_task(project)
    project.doit("run", "tiny:gold", "tiny:none")
    return SimpleNamespace(project=project, own=own)


@pytest.mark.e2e  # the module's run (scored)
def test_the_tree_check_accepts_the_authored_file_and_nothing_else(scored):
    project = scored.project  # its run of none extracted tiny-own's tree
    layout = Layout.from_env(environ=project.env)
    task = load_benchmark(project.root / "tasks" / "tiny.json").tasks[-1]
    tree = layout.tests_tree(task.tests_tree_id)
    bare = layout.bare_repo(task.test_repo)
    assert testtree.tests_tree_changes(bare, task.test_commit, tree, task.authored) == []
    # Without the task's files, the same tree has one file too many.
    assert testtree.tests_tree_changes(bare, task.test_commit, tree) == ["calc_own.t"]
    # An authored file edited in place (an agent or a person), or removed, gets the tree
    # extracted again, with a note; so does a file added beside it.
    for damage in ("edit", "remove", "add"):
        (tree / "calc_own.t").chmod(0o644)
        tree.chmod(0o755)
        if damage == "edit":
            (tree / "calc_own.t").write_text("plan(skip_all => 'gone');\n")
        elif damage == "remove":
            (tree / "calc_own.t").unlink()
        else:
            (tree / "extra.t").write_text("print 'ok 1';\n")
        again, notes = testtree.task_tests_tree(layout, task)
        assert again == tree and (tree / "calc_own.t").read_text() == OWN_TEST
        assert not (tree / "extra.t").exists()
        assert len(notes) == 1 and "(with authored files) had been changed" in notes[0]
        assert ("extra.t" if damage == "add" else "calc_own.t") in notes[0]
        assert testtree.task_tests_tree(layout, task) == (tree, [])


def test_an_authored_file_may_not_shadow_a_file_of_the_suite(project):
    authored_task(project, name="calc_add.t")
    bench = project.benchmark()
    bench["tasks"][-1].update(
        test_files=["calc_add.t"],
        fail_to_pass=["calc_add.t:1 adds what the user asked"],
        pass_to_pass=[],
    )
    project.write_benchmark(bench)
    proc, _ = project.doit("run", "tiny:none", "instances=tiny-own", check=False)
    assert proc.returncode != 0
    assert (
        "the authored test file calc_add.t has the name of a file of acme/tiny-tests"
        in proc.stdout + proc.stderr
    )
    assert "task tiny-own" in proc.stdout + proc.stderr


@pytest.mark.e2e  # the module's run (scored)
def test_validation_report_and_card_split_by_test_source(scored):
    project = scored.project
    project.doit("run", "tiny:validate", "repeats=2")
    summary = json.loads((project.results / "default" / "validation.json").read_text())
    assert summary["tiny-own"]["verdict"] == "valid"
    # The suite's calc_add.t also fails without the fix here (the fixture's add() has a test of
    # its own); the authored file's assertions are derived like any other.
    derived = summary["tiny-own"]["derived"]
    assert derived["fail_to_pass"] == ["calc_add.t:1 add two numbers"] + OWN
    assert sorted(derived["pass_to_pass"]) == sorted(OWN_P2P + ["calc_add.t:2 add zeros"])

    # The report of the module's run of gold and none.
    project.render()
    md = (project.results / "default" / "report.md").read_text()
    by_source = section(md, "By test source")
    assert table_row(by_source, "nginx-tests")[:1] == ["2"]
    assert table_row(by_source, "authored")[:1] == ["1"]
    report = json.loads((project.results / "default" / "report.json").read_text())
    tests = {g["label"]: g for g in report["breakdowns"]["tests"]}
    cells = {c["arm"]: c for c in tests["authored"]["cells"]}
    assert cells["gold"]["resolved"] == 1 and cells["none"]["resolved"] == 0
    assert {c["arm"]: c["resolved"] for c in tests["nginx-tests"]["cells"]} == {
        "gold": 2,
        "none": 0,
    }

    out = project.base / "README.md"
    subprocess.run(
        [
            sys.executable,
            str(SOURCE_ROOT / "scripts" / "benchmark_card.py"),
            "--tasks",
            str(project.root / "tasks" / "tiny.json"),
            "--out",
            str(out),
            "--validation",
            str(project.results / "default" / "validation.json"),
        ],
        check=True,
        capture_output=True,
    )
    card = out.read_text()
    assert table_row(section(card, "Tasks per test source"), "authored") == ["1", "0"]
    assert table_row(section(card, "Tasks per test source"), "nginx-tests") == ["2", "0"]
    assert table_row(section(card, "Validation of the shipped file"), "valid") == ["3", "2", "1"]


def test_an_authored_candidate_is_promoted_with_its_statement(project):
    """The candidate's validation derives its assertions; promote_tasks.py writes the task with
    "tests": "authored" into a benchmark file that loads (its trial load sees tasks/tests/)."""
    authored_task(project)
    bench = project.benchmark()
    own = dict(bench["tasks"][-1], fail_to_pass=[], pass_to_pass=[], problem_statement="TODO")
    candidates = project.root / "tasks" / "cands.json"
    candidates.write_text(json.dumps({"candidates": True, "tasks": [own]}))
    project.doit("run", "cands:validate", "repeats=1", "run=cands")
    statements = project.base / "statements.json"
    statements.write_text(json.dumps({"tiny-own": "add() subtracts"}))
    into = project.root / "tasks" / "promoted.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SOURCE_ROOT / "scripts" / "promote_tasks.py"),
            "--candidates",
            str(candidates),
            "--statements",
            str(statements),
            "--run",
            "cands",
            "--into",
            str(into),
        ],
        env=project.env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    task = load_benchmark(into).tasks[0]
    assert task.tests == "authored" and task.authored[0][0] == "calc_own.t"
    assert set(OWN) <= set(task.fail_to_pass)


@pytest.mark.e2e  # the module's run (scored)
def test_gold_resolves_none_does_not_and_an_edit_makes_a_new_tree(scored):
    """Last in the module: it edits the authored file of the shared project."""
    project, own = scored.project, scored.own
    assert project.read("gold", "tiny-own", "grade.json")["status"] == "resolved"
    none = project.read("none", "tiny-own", "grade.json")
    assert none["status"] == "unresolved" and none["fail_to_pass"]["failed"] == OWN
    assert set(none["pass_to_pass"]["passed"]) == set(OWN_P2P)
    layout = Layout.from_env(environ=project.env)
    task = load_benchmark(project.root / "tasks" / "tiny.json").tasks[-1]
    tree = layout.tests_tree(task.tests_tree_id)
    assert (tree / "calc_own.t").read_text() == OWN_TEST and (tree / "calc_add.t").is_file()
    # The suite's own tree stays as the test commit has it.
    assert not (layout.tests_tree(task.test_commit) / "calc_own.t").exists()

    # An edited test is a new tree: extracted and proved again, for that task alone.
    own.write_text(OWN_TEST.replace("multiplies as before", "multiplies still"))
    bench = project.benchmark()
    bench["tasks"][-1]["pass_to_pass"] = [
        "calc_own.t:2 multiplies still",
        "calc_add.t:3 mul still works",
    ]
    project.write_benchmark(bench)
    _, executed = project.doit("run", "tiny:gold", "tiny:none")
    edited = load_benchmark(project.root / "tasks" / "tiny.json").tasks[-1]
    assert f"tests:{edited.test_commit[:12]}+{edited.tests_tree_id.split('+')[1][:12]}" in executed
    assert sorted(t for t in executed if t.startswith(("prove:", "build:"))) == [
        "prove:tiny/gold/tiny-own",
        "prove:tiny/none/tiny-own",
    ]
    gold = project.read("gold", "tiny-own", "grade.json")
    assert gold["status"] == "resolved"
    assert "calc_own.t:2 multiplies still" in gold["pass_to_pass"]["passed"]
