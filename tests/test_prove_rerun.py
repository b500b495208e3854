"""rerun_failed=1 (prove/stage.py, grade/stage.py): a test file with a graded assertion that did not
pass runs once more against the same binary; the rerun decides, both outcomes are kept. Real
prove output, and a fixture run with a test file that fails its first run and passes every later
one."""

import json
from dataclasses import dataclass

from fixture_repos import TEST_HEAD, commit, write

from nginx_eval.prove.stage import files_to_rerun

OK = {"exit_code": 0, "timed_out": False, "missing": False}


@dataclass
class Task:
    fail_to_pass: tuple = ("a.t:1 fixed",)
    pass_to_pass: tuple = ("b.t:1 kept", "c.t:2 kept")


def test_only_files_with_a_graded_assertion_that_did_not_pass_run_again(prove_v, tmp_path):
    streams = {
        "a.t": "plan(tests => 1); ok(0, 'fixed');\n",  # a graded failure
        "b.t": "plan(tests => 2); ok(1, 'kept'); ok(0, 'ungraded');\n",  # only ungraded fails
        "c.t": "plan(tests => 2); ok(1, 'first');\n",  # graded one never ran
        "d.t": "plan(tests => 1); ok(0, 'nobody grades me');\n",  # no graded assertion
    }
    tap_dir = tmp_path / "tap"
    tap_dir.mkdir()
    files = {}
    for name, body in streams.items():
        out, _ = prove_v(name, body)
        (tap_dir / f"{name}.tap").write_text(out)
        files[name] = dict(OK, tap=f"{name}.tap")
    files["gone.t"] = dict(OK, tap="gone.t.tap", missing=True)  # nothing to run again
    (tap_dir / "gone.t.tap").write_text("")
    assert files_to_rerun(
        Task(pass_to_pass=Task.pass_to_pass + ("gone.t:1 x",)), tap_dir, files
    ) == ["a.t", "c.t"]


FLAKY_T = (
    TEST_HEAD
    + """
plan(tests => 2);
is(run('add', 2, 3), '5', 'add two numbers');
# Fails the first time it runs, passes from then on: the marker file remembers.
my $again = -e '@MARKER@';
open(my $fh, '>', '@MARKER@') or die; close $fh;
ok($again, 'flaky');
"""
)


def flaky_task(project, marker):
    """tiny-flaky: the add fix, graded on calc_add.t and on a file whose graded `flaky`
    assertion fails on its first run only."""
    tests_repo = project.mirrors / "acme+tiny-tests"
    write(tests_repo / "flaky_once.t", FLAKY_T.replace("@MARKER@", str(marker)), 0o755)
    bench = project.benchmark()
    add = bench["tasks"][0]
    bench["tasks"].append(
        dict(
            add,
            instance_id="tiny-flaky",
            test_commit=commit(tests_repo, "A flaky test"),
            test_files=["calc_add.t", "flaky_once.t"],
            fail_to_pass=["flaky_once.t:2 flaky"],
            pass_to_pass=["calc_add.t:1 add two numbers", "flaky_once.t:1 add two numbers"],
        )
    )
    project.write_benchmark(bench)


def units_run(executed):
    """The unit stages doit ran: the build is never one of them when only the option changes."""
    return [t for t in executed if t.split(":")[0] in ("build", "prove", "grade")]


def without_timings(prove):
    timings = ("seconds", "cpu_seconds")
    return dict(
        prove,
        files={
            f: {k: v for k, v in r.items() if k not in timings} for f, r in prove["files"].items()
        },
    )


def test_a_flaky_file_resolves_with_rerun_failed_and_not_without(project, tmp_path):
    marker = tmp_path / "flaky-ran-before"
    flaky_task(project, marker)
    args = ("run", "tiny:gold", "instances=tiny-flaky")
    project.doit(*args)
    plain_prove = project.read("gold", "tiny-flaky", "prove.json")
    plain_grade = project.read("gold", "tiny-flaky", "grade.json")
    assert plain_grade["status"] == "unresolved"
    assert plain_grade["fail_to_pass"]["failed"] == ["flaky_once.t:2 flaky"]
    assert "reruns" not in plain_prove
    assert not {"reruns", "changed_on_rerun", "first_run_status"} & set(plain_grade)

    marker.unlink()
    _, executed = project.doit(*args, "rerun_failed=1")
    assert units_run(executed) == ["prove:tiny/gold/tiny-flaky", "grade:tiny/gold/tiny-flaky"]
    prove = project.read("gold", "tiny-flaky", "prove.json")
    grade = project.read("gold", "tiny-flaky", "grade.json")
    assert (grade["status"], grade["resolved"], grade["first_run_status"]) == (
        "resolved",
        True,
        "unresolved",
    )
    assert grade["changed_on_rerun"] == ["flaky_once.t:2 flaky"]
    assert grade["reruns"] == {
        "flaky_once.t": {
            "first": {"flaky_once.t:1 add two numbers": True, "flaky_once.t:2 flaky": False},
            "rerun": {"flaky_once.t:1 add two numbers": True, "flaky_once.t:2 flaky": True},
        }
    }
    # Only the file with a failing graded assertion ran again; both of its streams are kept.
    assert list(prove["reruns"]) == ["flaky_once.t"]
    assert prove["reruns"]["flaky_once.t"]["tap"] == "flaky_once.t.rerun.tap"
    tap = project.task_dir("gold", "tiny-flaky") / "tap"
    assert "not ok 2 - flaky" in (tap / "flaky_once.t.tap").read_text()
    assert "\nok 2 - flaky" in (tap / "flaky_once.t.rerun.tap").read_text()
    assert not (tap / "calc_add.t.rerun.tap").exists()
    row = json.loads((project.results / "default" / "gold" / "results.jsonl").read_text())
    assert (row["outcome"], row["first_run_status"]) == ("resolved", "unresolved")

    _, executed = project.doit(*args, "rerun_failed=1")
    assert executed == []
    # A mode graded without reruns, for the report (its runs leave the marker: it goes last).
    project.doit("run", "tiny:none", "instances=tiny-flaky")
    project.render()
    report = json.loads((project.results / "default" / "report.json").read_text())
    gold = report["modes"]["gold"]
    assert (gold["verdict_changed_on_rerun_instances"], gold["verdict_changed_on_rerun_ids"]) == (
        1,
        ["tiny-flaky"],
    )
    assert "verdict_changed_on_rerun_instances" not in report["modes"]["none"]
    md = (project.results / "default" / "report.md").read_text()
    assert (
        "mode gold: 1 of 1 tasks changed verdict when a failing test file ran again "
        "(rerun_failed=1): tiny-flaky"
    ) in md

    # Off again: prove and grade run again and write what they wrote before the option existed.
    marker.unlink()
    _, executed = project.doit(*args)
    assert units_run(executed) == ["prove:tiny/gold/tiny-flaky", "grade:tiny/gold/tiny-flaky"]
    again = project.read("gold", "tiny-flaky", "prove.json")
    assert again["inputs"] == plain_prove["inputs"]
    assert without_timings(again) == without_timings(plain_prove)
    assert {
        k: v for k, v in project.read("gold", "tiny-flaky", "grade.json").items() if k != "inputs"
    } == {k: v for k, v in plain_grade.items() if k != "inputs"}
