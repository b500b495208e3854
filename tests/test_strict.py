"""The strict verdict on the fixture benchmark (nginx_eval/strict/): regression files and the
task's own under sanitizer builds of the patch and of its reference, a file twice only when its
first run fails. The fixture's configure honours --with-cc-opt and --with-ld-opt, so its
sanitizer build is a real AddressSanitizer build."""

import json
import subprocess

import pytest
from conftest import DODO, Project

from nginx_eval.strict.sanitizer import CC_OPT, LD_OPT, parse_report, sanitizer_flags
from nginx_eval.strict.stage import compare, suspects

pytestmark = pytest.mark.slow

# Two regression files a patch: the fixture's files all lie in one area, and hang.t would take
# its whole time limit in every run.
FEW = "strict_files=2"
# Gold is judged only when asked.
GOLD = "strict_gold=1"

VERSION_C = """#include <stdio.h>
#include "ngx_auto_config.h"

void print_version(void)
{
    printf("tiny version: 1.0\\nconfigure options: %s\\n", NGX_CONFIGURE);
}
"""

OVER_READ = """
#include <stdlib.h>

int calc_peek(int n)
{
    char *p = calloc(4, 1);
    char c = p[n];              /* calc_peek(4): one past the end, read, never used */
    free(p);
    return c * 0;
}
"""


def git(cwd, *args):
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


def patched(project, tmp_path, iid, edit):
    """The diff from the task's base to its fix with `edit(worktree)` applied on top."""
    task = next(t for t in project.tasks if t["instance_id"] == iid)
    work = tmp_path / f"work-{iid}"
    git(
        project.mirrors / "acme+tiny",
        "worktree",
        "add",
        "-q",
        "--detach",
        str(work),
        task["fix_commit"],
    )
    edit(work)
    git(work, "add", "-A")
    patch = git(work, "diff", "--cached", "--binary", "--full-index", task["base_commit"])
    git(project.mirrors / "acme+tiny", "worktree", "remove", "--force", str(work))
    return patch


def break_version_output(work):
    """Moves -V's printing into version.c, with another label: version.t fails, and the task's
    own files (calc_add.t) never run -V."""
    main = work / "src" / "core" / "nginx.c"
    text = main.read_text()
    text = text.replace(
        'printf("tiny version: 1.0\\nconfigure arguments: %s\\n", NGX_CONFIGURE);',
        "print_version();",
    )
    main.write_text(
        text.replace('#include "calc.h"', '#include "calc.h"\nvoid print_version(void);')
    )
    (work / "src" / "core" / "version.c").write_text(VERSION_C)


def over_read_in_mul(work):
    """calc_mul also reads one byte past a heap block: its results stay right."""
    calc = work / "src" / "core" / "calc.c"
    text = calc.read_text().replace('#include "calc.h"\n', '#include "calc.h"\n' + OVER_READ)
    calc.write_text(
        text.replace(
            "int calc_mul(int a, int b)\n{\n    return ",
            "int calc_mul(int a, int b)\n{\n    return calc_peek(4) + ",
        )
    )


def predictions(path, patches):
    path.write_text(
        "".join(
            json.dumps({"instance_id": iid, "model_name_or_path": "strict", "model_patch": patch})
            + "\n"
            for iid, patch in patches.items()
        )
    )
    return path


def test_gold_is_strict_and_the_report_shows_both_rates(project):
    project.doit("run", "tiny:gold", "tiny:none", FEW, GOLD)
    project.render("tiny:gold", "tiny:none", FEW, GOLD)
    for iid in ("tiny-add", "tiny-mul"):
        grade = project.read("gold", iid, "grade.json")
        assert (grade["resolved"], grade["strict"], grade["strict_reason"]) == (True, True, "")
        strict = project.read("gold", iid, "strict.json")
        assert strict["reference"] == "base" and len(strict["files"]) == 2
        assert strict["sanitizer"]["key"] != strict["key"]  # a build of its own
        none = project.read("none", iid, "grade.json")
        assert (none["strict"], none["strict_reason"]) == (False, "not resolved")
    # The base fails the bug's assertions: they are not counted, and are recorded as such.
    add = project.read("gold", "tiny-add", "strict.json")
    assert "calc_mul.t:3 square" not in add["reference_not_passing"]
    report = (project.results / "default" / "report.md").read_text()
    assert "| `gold` |" in report and "strict" in report.lower()
    data = json.loads((project.results / "default" / "report.json").read_text())
    assert data["modes"]["gold"]["strict_rate"] == 1.0
    assert data["modes"]["none"]["strict_rate"] == 0.0
    # Nothing to do the second time.
    _, executed = project.doit("run", "tiny:gold", FEW, GOLD)
    assert not any(e.startswith(("strict:", "grade:")) for e in executed)


def test_a_patch_that_breaks_another_feature_is_resolved_but_not_strict(project, tmp_path):
    preds = predictions(
        tmp_path / "p.jsonl",
        {"tiny-add": patched(project, tmp_path, "tiny-add", break_version_output)},
    )
    project.doit("run", "tiny:file", f"predictions={preds}", FEW)
    project.render("tiny:file", f"predictions={preds}", FEW)
    grade = project.read("file", "tiny-add", "grade.json")
    assert grade["resolved"] and grade["strict"] is False
    assert grade["regressions"] == ["version.t:1 version output"]
    assert grade["strict_reason"].startswith("1 regression(s): version.t:1 version output")
    strict = project.read("file", "tiny-add", "strict.json")
    assert strict["reference"] == "gold" and strict["files"] == ["calc_mul.t", "version.t"]
    row = json.loads((project.results / "default" / "file" / "results.jsonl").read_text())
    assert (row["outcome"], row["strict"]) == ("resolved", False)
    report = (project.results / "default" / "report.md").read_text()
    assert "version.t:1 version output" in report


def test_a_patch_that_reads_out_of_bounds_is_resolved_but_not_strict(project, tmp_path):
    preds = predictions(
        tmp_path / "p.jsonl", {"tiny-add": patched(project, tmp_path, "tiny-add", over_read_in_mul)}
    )
    project.doit("run", "tiny:file", f"predictions={preds}", FEW)
    grade = project.read("file", "tiny-add", "grade.json")
    assert grade["resolved"] and grade["strict"] is False and grade["regressions"] == []
    (finding,) = grade["sanitizer_findings"]
    assert (finding["tool"], finding["kind"], finding["frame"]) == (
        "AddressSanitizer",
        "heap-buffer-overflow",
        "calc_peek",
    )
    # calc_add.t also multiplies ("mul still works"); calc_mul.t is a regression file.
    assert finding["files"] == ["calc_add.t", "calc_mul.t"]
    report = project.task_dir("file", "tiny-add") / finding["report"]
    assert "heap-buffer-overflow" in report.read_text()
    # The report parsed as the sanitizer wrote it.
    assert ("AddressSanitizer", "heap-buffer-overflow") == parse_report(report.read_text())[0][:2]


@pytest.fixture(scope="module")
def gold_add(tmp_path_factory):
    """A project after `doit run tiny:gold strict=0 instances=tiny-add`: the test of strict=0
    reads it; the test of gold's default strictness, after it in this file, runs gold again on
    it (both tasks, strict on), asserting only what its own run did."""
    project = Project(tmp_path_factory.mktemp("gold-add"))
    project.doit("run", "tiny:gold", "strict=0", "instances=tiny-add")
    return project


@pytest.mark.e2e
def test_strict_0_leaves_the_verdict_unjudged(gold_add):
    project = gold_add
    grade = project.read("gold", "tiny-add", "grade.json")
    assert (grade["strict"], grade["strict_reason"]) == (None, "not judged (strict=0)")
    assert not project.task_dir("gold", "tiny-add").joinpath("strict.json").exists()


@pytest.mark.e2e
def test_gold_is_not_judged_unless_asked(gold_add):
    """`doit run tiny:gold`, strict on (the default): no strict stage for gold, whose strictness
    the benchmark card states; its grade says which variable judges it, and the report shows
    no strict rate."""
    project = gold_add
    _, executed = project.doit("run", "tiny:gold", "strict=1")
    project.render("tiny:gold", "strict=1")
    assert not any(e.startswith("strict:") for e in executed)
    for iid in ("tiny-add", "tiny-mul"):
        grade = project.read("gold", iid, "grade.json")
        assert grade["resolved"]
        assert (grade["strict"], grade["strict_reason"]) == (None, "not judged (strict_gold=0)")
        assert not project.task_dir("gold", iid).joinpath("strict.json").exists()
    assert not (project.cache / "strict-runs").exists()
    data = json.loads((project.results / "default" / "report.json").read_text())
    assert data["modes"]["gold"]["strict_rate"] is None


def test_a_regression_file_runs_twice_only_when_it_fails(project, tmp_path):
    """A candidate that breaks version.t: that file runs a second time on both sides, and the
    files that pass run once; the reference's runs (gold's) are kept and shared: a second
    candidate judged against gold runs none of them again."""
    preds = predictions(
        tmp_path / "p.jsonl",
        {"tiny-add": patched(project, tmp_path, "tiny-add", break_version_output)},
    )
    project.doit("run", "tiny:file", f"predictions={preds}", FEW, "instances=tiny-add")
    strict = project.read("file", "tiny-add", "strict.json")
    assert strict["regressions"] == ["version.t:1 version output"]
    assert strict["rerun"] == ["version.t"]
    out = project.task_dir("file", "tiny-add") / "strict"
    assert sorted(p.relative_to(out).as_posix() for p in out.glob("*/run*")) == [
        "calc_add.t/run1",
        "calc_mul.t/run1",
        "version.t/run1",
        "version.t/run2",
    ]
    ref_runs = sorted(
        project.cache.glob(f"strict-runs/{strict['sanitizer']['reference_key']}/*/*/*/run*")
    )
    assert [f"{p.parent.name}/{p.name}" for p in ref_runs] == [
        "calc_add.t/run1",
        "calc_mul.t/run1",
        "version.t/run1",
        "version.t/run2",
    ]
    made = {p: p.stat().st_mtime_ns for p in ref_runs}
    # The gold patch as a candidate: it passes every file the first time, nothing runs twice,
    # and gold's runs are its own as well as the reference's.
    gold = predictions(tmp_path / "g.jsonl", {"tiny-add": project.gold_patch("tiny-add")})
    project.doit("run", "tiny:file", f"predictions={gold}", FEW, "instances=tiny-add", "run=again")
    again = project.read("file", "tiny-add", "strict.json", run="again")
    assert (again["strict"], again["rerun"], again["regressions"]) == (True, [], [])
    assert again["sanitizer"]["key"] == again["sanitizer"]["reference_key"]
    assert {p: p.stat().st_mtime_ns for p in ref_runs} == made


def no_sanitizer_build(work):
    """The patch compiles only without AddressSanitizer."""
    calc = work / "src" / "core" / "calc.c"
    calc.write_text(
        calc.read_text() + "#ifdef __SANITIZE_ADDRESS__\n#error not with the sanitizers\n#endif\n"
    )


def test_without_a_sanitizer_build_the_plain_builds_judge_the_regressions(project, tmp_path):
    """A patch whose sanitizer build fails: its regression files run under the plain builds by
    the same rule; a regression makes it not strict, and without one it is not judged."""
    preds = predictions(
        tmp_path / "p.jsonl",
        {
            "tiny-add": patched(
                project,
                tmp_path,
                "tiny-add",
                lambda work: (break_version_output(work), no_sanitizer_build(work)),
            ),
            "tiny-mul": patched(project, tmp_path, "tiny-mul", no_sanitizer_build),
        },
    )
    project.doit("run", "tiny:file", f"predictions={preds}", FEW)
    add = project.read("file", "tiny-add", "strict.json")
    assert (add["strict"], add["regressions"], add["sanitizer"]) == (
        False,
        ["version.t:1 version output"],
        None,
    )
    assert add["rerun"] == ["version.t"]
    mul = project.read("file", "tiny-mul", "strict.json")
    assert (mul["strict"], mul["reason"], mul["retry"]) == (
        None,
        "the sanitizer build does not build (compile_failed)",
        False,
    )
    assert project.read("file", "tiny-mul", "grade.json")["strict"] is None


def test_a_regression_is_a_pass_under_the_reference_and_a_failure_twice_under_the_candidate():
    ref = {"a.t": [{"a.t:1 x": True, "a.t:2 y": True, "a.t:3 z": False, "a.t:4 w": True}] * 2}
    cand = {
        "a.t": [
            {"a.t:1 x": False, "a.t:2 y": True, "a.t:3 z": False, "a.t:4 w": False},
            {"a.t:1 x": False, "a.t:2 y": True, "a.t:3 z": False, "a.t:4 w": True},
        ]
    }
    assert compare(cand, ref) == (["a.t:1 x"], ["a.t:3 z"], ["a.t:4 w"])
    # One that the reference's second run fails is not counted; a file the candidate's run
    # lacks fails every assertion.
    wobbly = {"a.t": [{"a.t:1 x": True}, {"a.t:1 x": False}], "b.t": [{"b.t:1 v": True}]}
    assert compare({"a.t": [{}, {}]}, wobbly) == (["b.t:1 v"], ["a.t:1 x"], [])


def test_a_file_runs_again_only_when_its_first_run_fails_what_the_reference_passes():
    ref = {
        "a.t": [{"a.t:1 x": True, "a.t:2 y": False}],
        "b.t": [{"b.t:1 v": True}],
        "c.t": [{"c.t:1 w": True}],
    }
    cand = {
        "a.t": [{"a.t:1 x": True, "a.t:2 y": False}],  # fails only what the reference fails
        "b.t": [{"b.t:1 v": False}],
        "c.t": [{}],  # did not run (died, or does not exist for it)
    }
    assert suspects(cand, ref) == ["b.t", "c.t"]
    assert suspects(ref, ref) == []


def test_the_sanitizers_join_a_tasks_own_compiler_options():
    assert sanitizer_flags(["--with-http_ssl_module"]) == [
        "--with-http_ssl_module",
        f"--with-cc-opt={CC_OPT}",
        f"--with-ld-opt={LD_OPT}",
    ]
    assert sanitizer_flags(["--with-cc-opt=-Wno-deprecated-declarations"]) == [
        f"--with-cc-opt=-Wno-deprecated-declarations {CC_OPT}",
        f"--with-ld-opt={LD_OPT}",
    ]


def test_the_strict_cost_leaves_out_waits_for_a_slot(project):
    """strict.json's seconds are the stage's work: with proves=1 and the one prove slot held
    from outside for 6 s, the stages (which start at once: builds and proves are done) wait
    for it, and what they record of their test runs fits in the time after the slot came free.
    Their sanitizer builds need no prove slot and may run during the hold: work, counted in
    `builds` and `total`, so only `runs` (total less builds) must fit after it."""
    import fcntl
    import sys
    import time

    project.doit("run", "tiny:gold", "strict=0")
    slot = project.cache / "locks" / "slots-default" / "prove-0.lock"
    slot.parent.mkdir(parents=True, exist_ok=True)
    with open(slot, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        doit = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "doit",
                "-f",
                str(DODO),
                "run",
                "-n",
                "3",
                "tiny:gold",
                FEW,
                GOLD,
                "proves=1",
                "report=0",
            ],
            env=project.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(6)
        fcntl.flock(held, fcntl.LOCK_UN)
    freed = time.monotonic()
    out, err = doit.communicate(timeout=600)
    after = time.monotonic() - freed
    assert doit.returncode == 0, out + err
    for iid in ("tiny-add", "tiny-mul"):
        seconds = project.read("gold", iid, "strict.json")["seconds"]
        assert 0 < seconds["runs"] <= after, (iid, seconds, after)
        assert seconds["total"] <= after + seconds["builds"], (iid, seconds, after)
