"""grade/stage.py: verdicts from what real `prove -v` printed (conftest.prove_v), with and without
the base build's reference run."""

from dataclasses import dataclass

from nginx_eval.core.outcomes import GRADE_STATUSES, UNFINISHED_AGENT
from nginx_eval.grade.stage import grade, strict_fields

OK = {"exit_code": 0, "timed_out": False}
FAILED = {"exit_code": 1, "timed_out": False}


@dataclass
class Task:
    instance_id: str = "x-1"
    test_files: tuple = ("h2.t",)
    fail_to_pass: tuple = ("h2.t:3 body",)
    pass_to_pass: tuple = ("h2.t:1 first", "h2.t:2", "h2.t:4 no alerts")


TASK = Task()


H2 = "plan(tests => 4);\nok(1, 'first'); ok(1); {body}\nok(1, 'no alerts');\n"
BASE = H2.format(body="TODO: { local $TODO = 'not yet'; ok(0, 'body'); }")
FIXED = H2.format(body="ok(1, 'body');")


def verdict(prove_v, body, record=OK, reference=None, task=TASK):
    out, _ = prove_v("h2.t", body)
    ref = None
    if reference is not None:
        ref_out, _ = prove_v("h2.t", reference)
        ref = {"h2.t": (OK, ref_out)}
    v = grade(task, "built", {"h2.t": record}, {"h2.t": out}, reference=ref)
    assert v["status"] in GRADE_STATUSES
    return v


def test_todo_failure_is_a_failure_and_the_fix_resolves(prove_v):
    base = verdict(prove_v, BASE)
    assert base["status"] == "unresolved" and base["fail_to_pass"]["failed"] == ["h2.t:3 body"]
    fixed = verdict(prove_v, FIXED)
    assert fixed["status"] == "resolved" and fixed["resolved"]


def test_tap_printed_by_the_patched_nginx_never_passes(prove_v):
    # nginx inherits the test's stdout: after the real `not ok 3` it prints `ok 3 - body`.
    spoofed = H2.format(body="ok(0, 'body'); system('echo \"ok 3 - body\"');")
    v = verdict(prove_v, spoofed, record=FAILED, reference=BASE)
    assert v["status"] == "unresolved" and not v["resolved"]
    assert v["fail_to_pass"]["failed"] == ["h2.t:3 body"]
    # Even the assertions that said ok count for nothing in a tampered file.
    assert v["pass_to_pass"]["passed"] == []
    assert [f["kind"] for f in v["file_failures"]] == ["tampered"]
    assert "printed twice" in v["file_failures"][0]["reason"]


def test_tampering_wins_over_a_partial_pass(prove_v):
    task = Task(test_files=("h2.t", "b.t"), fail_to_pass=("h2.t:3 body", "b.t:1 other"))
    spoofed, _ = prove_v("h2.t", H2.format(body="ok(1, 'body'); system('echo \"ok 3 - body\"');"))
    honest, _ = prove_v("b.t", "plan(tests => 1); ok(1, 'other');\n")
    ref, _ = prove_v("h2.t", BASE)
    v = grade(
        task,
        "built",
        {"h2.t": OK, "b.t": OK},
        {"h2.t": spoofed, "b.t": honest},
        reference={"h2.t": (OK, ref)},
    )
    assert v["status"] == "unresolved" and v["fail_to_pass"]["passed"] == ["b.t:1 other"]


GRADED_SKIP = H2.format(body="SKIP: { skip 'FCGI not installed', 1; ok(1, 'body'); }")


def test_a_graded_assertion_skipped_here_and_in_the_base_is_an_environment_error(prove_v):
    v = verdict(prove_v, GRADED_SKIP, reference=GRADED_SKIP)
    assert v["status"] == "env_error" and not v["resolved"]
    assert v["skipped_assertions"] == ["h2.t:3 body"]
    assert "FCGI not installed" in v["env_errors"][0] and "h2.t:3 body" in v["env_errors"][0]


def test_a_graded_assertion_skipped_without_a_reference_is_an_environment_error(prove_v):
    # The base build could not be run here (it does not build): the environment is at fault.
    v = verdict(prove_v, GRADED_SKIP)
    assert v["status"] == "env_error" and "FCGI not installed" in v["env_errors"][0]


def test_a_graded_assertion_skipped_only_with_the_patch_fails_the_patch(prove_v):
    v = verdict(prove_v, GRADED_SKIP, reference=BASE)
    assert v["status"] == "unresolved" and v["env_errors"] == []
    assert v["file_failures"][0]["kind"] == "skipped"
    assert "the base build runs them" in v["file_failures"][0]["reason"]


SKIP_ALL = "plan(skip_all => 'cannot start nginx');\n"
DIE_BEFORE_PLAN = 'die "Can\'t start nginx\\n"; plan(tests => 4);\n'


def test_nginx_that_does_not_start_is_the_patchs_failure_when_the_base_starts(prove_v):
    for body, record in ((SKIP_ALL, OK), (DIE_BEFORE_PLAN, {"exit_code": 255})):
        v = verdict(prove_v, body, record=record, reference=BASE)
        assert v["status"] == "unresolved" and v["env_errors"] == [], body
        failure = v["file_failures"][0]
        assert failure["kind"] == "not_started" and "nginx did not start" in failure["reason"]


def test_a_file_that_skips_or_dies_in_the_base_too_is_an_environment_error(prove_v):
    v = verdict(prove_v, SKIP_ALL, reference=SKIP_ALL)
    assert (
        v["status"] == "env_error" and "skipped entirely (cannot start nginx)" in v["env_errors"][0]
    )
    v = verdict(prove_v, DIE_BEFORE_PLAN, record={"exit_code": 255}, reference=DIE_BEFORE_PLAN)
    assert v["status"] == "env_error" and "no plan" in v["env_errors"][0]


def test_a_file_that_dies_part_way_is_the_patchs_failure(prove_v):
    died = "plan(tests => 4); ok(1, 'first'); ok(1); die 'worker crashed';\n"
    v = verdict(prove_v, died, record={"exit_code": 255}, reference=BASE)
    assert v["status"] == "unresolved"
    assert v["file_failures"][0]["kind"] == "died"
    assert "test file died: died after 2 of 4" in v["file_failures"][0]["reason"]
    bail = "plan(tests => 4); ok(1, 'first'); BAIL_OUT('no binary');\n"
    v = verdict(prove_v, bail, record={"exit_code": 255}, reference=BASE)
    assert (
        v["status"] == "unresolved" and "bailed out (no binary)" in v["file_failures"][0]["reason"]
    )


def test_a_base_that_misses_a_graded_assertion_is_no_reference(prove_v):
    # The base's run stops before assertion 4: it does not vouch for the file.
    short_base = "plan(tests => 4); ok(1, 'first'); ok(1); ok(0, 'body'); die 'x';\n"
    v = verdict(prove_v, SKIP_ALL, reference=short_base)
    assert v["status"] == "env_error"


def test_build_failures_and_environment_build_errors(prove_v):
    v = grade(Task(), "compile_failed", {}, {})
    assert v["status"] == "compile_failed" and v["fail_to_pass"]["failed"] == ["h2.t:3 body"]
    v = grade(Task(), "env_error", {}, {}, build_reason="make is not on PATH")
    assert v["status"] == "env_error" and v["env_errors"] == ["build: make is not on PATH"]


def test_partial_fix_and_time_limit(prove_v):
    partial = H2.format(body="ok(1, 'body');").replace("ok(1, 'no alerts')", "ok(0, 'no alerts')")
    assert verdict(prove_v, partial, record=FAILED)["status"] == "partially_resolved"
    cut = "plan(tests => 4); ok(1, 'first'); ok(1); kill 'KILL', $$;\n"
    v = verdict(prove_v, cut, record={"exit_code": None, "timed_out": True})
    assert v["status"] == "unresolved" and v["timed_out_files"] == ["h2.t"]
    assert v["pass_to_pass"]["failed"] == ["h2.t:4 no alerts"] and v["env_errors"] == []


def test_an_agent_run_that_did_not_finish_has_no_verdict(prove_v):
    """infra_error and not_run: the verdict is the agent's status, never `unresolved`, whatever
    the (empty) patch's tests printed, and never an environment error that would run again. No
    assertion is graded, passed or failed: the TAP of the unchanged base says `ok` where a
    failure would have been claimed (issue 37); nor is the unit judged strict."""
    out, _ = prove_v("h2.t", FIXED)
    assert "ok 4 - no alerts" in out.splitlines()
    for status in ("infra_error", "not_run"):
        v = grade(Task(), "built", {"h2.t": OK}, {"h2.t": out}, agent_status=status)
        assert (v["status"], v["resolved"], v["agent_status"], v["env_errors"]) == (
            status,
            False,
            status,
            [],
        )
        assert v["fail_to_pass"] == v["pass_to_pass"] == {"passed": [], "failed": []}
        strict = strict_fields(v, True, {"strict": True})
        assert (strict["strict"], strict["strict_reason"]) == (
            None,
            f"not scored: {UNFINISHED_AGENT[status]}",
        )
        v = grade(Task(), "env_error", {}, {}, agent_status=status, build_reason="no make")
        assert (v["status"], v["env_errors"]) == (status, [])
    assert (
        grade(Task(), "built", {"h2.t": OK}, {"h2.t": out}, agent_status="failed")["status"]
        == "resolved"
    )


# Passes from its second run on: a marker file in prove's directory remembers the first.
FLAKY = (
    "plan(tests => 4); ok(1, 'first'); ok(1);\n"
    "my $again = -e 'ran-before'; open(my $fh, '>', 'ran-before') or die; close $fh;\n"
    "ok($again, 'body'); ok(1, 'no alerts');\n"
)


def test_a_rerun_decides_and_both_runs_are_recorded(prove_v):
    """rerun_failed=1: a file prove/stage.py ran a second time is judged by its rerun; grade.json
    keeps both runs' graded results, the ids that changed and the first runs' verdict."""
    first, code = prove_v("h2.t", FLAKY)
    rerun, rerun_code = prove_v("h2.t", FLAKY)
    assert (code, rerun_code) == (1, 0) and "not ok 3 - body" in first
    v = grade(Task(), "built", {"h2.t": FAILED}, {"h2.t": first}, reruns={"h2.t": (OK, rerun)})
    assert (v["status"], v["resolved"], v["first_run_status"]) == ("resolved", True, "unresolved")
    assert v["changed_on_rerun"] == ["h2.t:3 body"]
    both = {"h2.t:3 body": True, "h2.t:1 first": True, "h2.t:2": True, "h2.t:4 no alerts": True}
    assert v["reruns"] == {"h2.t": {"first": dict(both, **{"h2.t:3 body": False}), "rerun": both}}
    # Without reruns (rerun_failed=0) the first run decides and grade.json is as it always was.
    plain = grade(Task(), "built", {"h2.t": FAILED}, {"h2.t": first})
    assert plain["status"] == "unresolved"
    assert not {"reruns", "changed_on_rerun", "first_run_status"} & set(plain)
    assert plain == {
        k: v
        for k, v in grade(Task(), "built", {"h2.t": FAILED}, {"h2.t": first}, reruns={}).items()
        if k not in ("reruns", "changed_on_rerun", "first_run_status")
    }


def test_a_rerun_that_fails_again_or_dies_still_decides(prove_v):
    first, _ = prove_v("h2.t", BASE)
    again, _ = prove_v("h2.t", BASE)
    v = grade(Task(), "built", {"h2.t": FAILED}, {"h2.t": first}, reruns={"h2.t": (FAILED, again)})
    assert (v["status"], v["first_run_status"], v["changed_on_rerun"]) == (
        "unresolved",
        "unresolved",
        [],
    )
    # A rerun that dies is judged like any run that dies: the base's reference run decides.
    died, _ = prove_v("h2.t", "plan(tests => 4); ok(1, 'first'); die 'crash';\n")
    ref, _ = prove_v("h2.t", BASE)
    v = grade(
        Task(),
        "built",
        {"h2.t": FAILED},
        {"h2.t": first},
        reruns={"h2.t": ({"exit_code": 255}, died)},
        reference={"h2.t": (OK, ref)},
    )
    assert v["status"] == "unresolved" and v["file_failures"][0]["kind"] == "died"
    assert v["reruns"]["h2.t"]["rerun"]["h2.t:1 first"] is True
    assert set(v["changed_on_rerun"]) == {"h2.t:2", "h2.t:4 no alerts"}
