"""The verdict in the quick loop: grade, the judgement of a file, the TAP reader and strict's
comparison on what real runs of the pipeline wrote (tests/recorded/, made by
scripts/record_verdict_fixtures.py; its README says how each unit came about). Every rule
tests/test_grade.py and tests/test_tapstream.py check with real `prove -v` is checked here on
recorded output too, and each recorded record must still be what today's code makes of the
recorded test output: a change in the reading of TAP or in the verdict shows here first, and a
stage that writes another format fails the schema check until the fixtures are recorded again."""

import json
from functools import cache
from pathlib import Path
from typing import get_type_hints, is_typeddict

import pytest

from nginx_eval.core import records
from nginx_eval.core.outcomes import GRADE_STATUSES, UNFINISHED_AGENT
from nginx_eval.grade.stage import grade, grade_records, judge_file, read_texts, strict_fields
from nginx_eval.prove.stage import files_needing_reference, files_to_rerun
from nginx_eval.prove.tap import assertion_id, file_problem, needs_reference, parse_tap
from nginx_eval.run.benchmark import load_benchmark
from nginx_eval.strict.sanitizer import parse_report
from nginx_eval.strict.stage import (
    compare,
    named_assertions_pass,
    read_run,
    results_of,
    sanitizer_findings,
    suspects,
)

RECORDED = Path(__file__).parent / "recorded"
PROJECTS = ("tiny", "nginx")
RANGE = "nginx__nginx-f35475c083d4"
HOST = "nginx__nginx-c8c7beb96f61"


@cache
def tasks(project):
    """{instance id: Task} of the benchmark file the project's runs were made with."""
    (path,) = (RECORDED / project).glob("*.json")
    return {t.instance_id: t for t in load_benchmark(path).tasks}


def unit_dirs():
    return sorted(p.parent for p in RECORDED.glob("*/*/*/*/grade.json"))


def unit_id(path):
    return path.relative_to(RECORDED).as_posix()


class Unit:
    """One recorded unit: tests/recorded/<project>/<run>/<mode>/<instance id>/."""

    def __init__(self, path):
        self.path = path
        self.project, self.run, self.mode, self.iid = path.relative_to(RECORDED).parts
        self.task = tasks(self.project)[self.iid]

    def json(self, name):
        path = self.path / name
        return json.loads(path.read_text()) if path.exists() else None

    @property
    def prove(self):
        return self.json("prove.json")

    @property
    def tap_dir(self):
        return self.path / "tap"

    def tap(self, file, kind="files"):
        """What prove -v printed for `file` in the run `kind` ("files", "reference", "reruns")."""
        return read_texts(self.tap_dir, {file: self.prove[kind][file]})[file]

    def record(self, file, kind="files"):
        return self.prove[kind][file]

    def verdict(self):
        return grade_records(self.task, self.json("build.json"), self.prove, None, self.tap_dir)


def unit(path):
    return Unit(RECORDED / path)


def test_every_case_is_recorded():
    """The fixtures are there, each project's units made from its recorded benchmark file."""
    names = {unit_id(p) for p in unit_dirs()}
    assert {"tiny/default/gold/tiny-add", f"nginx/default/gold/{RANGE}"} <= names
    assert len(names) >= 30


# -- each record is what today's code makes of the recorded output -------------------------------


@pytest.mark.parametrize("path", unit_dirs(), ids=unit_id)
def test_the_recorded_verdict_is_what_grade_makes_of_the_recorded_runs(path):
    u = Unit(path)
    recorded = u.json("grade.json")
    verdict = u.verdict()
    assert verdict["status"] in GRADE_STATUSES
    assert verdict == {k: recorded[k] for k in verdict}
    strict = u.json("strict.json")
    off = "strict_gold=0" if u.mode == "gold" else None
    fields = strict_fields(verdict, strict is not None, strict, off)
    assert fields == {k: recorded[k] for k in fields}
    # Units recorded before records carried their version have none (core/records.py).
    assert set(recorded) - {records.FORMAT_FIELD} == set(verdict) | set(fields) | {"inputs", "mode"}


@pytest.mark.parametrize("path", unit_dirs(), ids=unit_id)
def test_the_prove_stages_choices_are_what_it_makes_of_the_recorded_streams(path):
    """The files prove/stage.py ran again against the base build (and, with rerun_failed=1,
    against the same binary) are those today's reading of the recorded streams asks for."""
    u = Unit(path)
    prove = u.prove
    if not prove["files"]:
        assert u.json("build.json")["status"] != "built"
        return
    reruns = prove.get("reruns") or {}
    needing = set(files_needing_reference(u.task, u.tap_dir, prove["files"]))
    needing |= set(files_needing_reference(u.task, u.tap_dir, reruns))
    assert needing == set(prove["reference"])
    if "reruns" in prove:
        assert files_to_rerun(u.task, u.tap_dir, prove["files"]) == list(reruns)


def mismatches(value, schema, where="$"):
    """The keys where a record departs from its TypedDict, and from those of the TypedDicts
    and {name: TypedDict} it holds (tests/test_record_schemas.py checks the values' types on
    a real run's records)."""
    if not is_typeddict(schema):
        inner = getattr(schema, "__args__", ())
        if isinstance(value, dict) and inner and is_typeddict(inner[-1]):
            return [m for k, v in value.items() for m in mismatches(v, inner[-1], f"{where}.{k}")]
        return []
    hints = get_type_hints(schema)
    found = [f"{where}: no {k!r}" for k in sorted(schema.__required_keys__ - value.keys())]
    found += [f"{where}: {k!r} unknown" for k in sorted(value.keys() - hints.keys())]
    for key in sorted(value.keys() & hints.keys()):
        if isinstance(value[key], dict):
            found += mismatches(value[key], hints[key], f"{where}.{key}")
    return found


def test_mismatches_names_missing_and_unknown_keys():
    run = {"tap": "a.t.tap"}
    found = mismatches({"files": {"a.t": run}, "other": 1}, records.ProveJson)
    assert "$: 'other' unknown" in found and "$: no 'inputs'" in found
    assert "$.files.a.t: no 'exit_code'" in found


@pytest.mark.parametrize("path", unit_dirs(), ids=unit_id)
def test_the_records_have_the_shape_their_schemas_give(path):
    u = Unit(path)
    schemas = {
        "build.json": records.BuildJson,
        "prove.json": records.ProveJson,
        "grade.json": records.GradeJson,
        "strict.json": records.StrictJson,
    }
    for name, schema in schemas.items():
        record = u.json(name)
        assert record is None or mismatches(record, schema) == [], name
    for run in sorted(path.glob("strict*/*/run*/run.json")):
        assert mismatches(json.loads(run.read_text()), records.ProveRun) == [], run


def strict_units():
    return [p for p in unit_dirs() if (p / "strict-reference").is_dir()]


def runs_of(directory, files):
    """{file: [Run, ...]} of the kept runs under directory/<file>/run<n>/."""
    return {
        f: [read_run(d, f) for d in sorted((directory / f.replace("/", "__")).glob("run*"))]
        for f in files
    }


@pytest.mark.parametrize("path", strict_units(), ids=unit_id)
def test_the_recorded_strict_judgement_is_what_compare_makes_of_the_recorded_runs(path):
    """strict.json's regressions, files run twice and sanitizer findings, from the candidate's
    runs (strict/) and the reference's (strict-reference/) as the stage kept them."""
    u = Unit(path)
    strict = u.json("strict.json")
    own = list(u.task.test_files) if strict["sanitizer"] else []
    candidate = runs_of(path / "strict", own + strict["files"])
    reference = runs_of(path / "strict-reference", own + strict["files"])
    first = {f: runs[:1] for f, runs in candidate.items()}
    first_ref = {f: runs[:1] for f, runs in reference.items()}
    files = strict["files"]
    assert (
        sorted(suspects(results_of(first, files), results_of(first_ref, files)))
        == (strict["rerun"])
    )
    regressions, unstable, flaky = compare(
        results_of(candidate, files), results_of(reference, files)
    )
    assert regressions == sorted(strict["regressions"] + strict["gold_only"])
    assert (unstable, flaky) == (strict["reference_not_passing"], strict["candidate_flaky"])
    if strict["sanitizer"]:
        findings, reports = sanitizer_findings(candidate, reference, path / "strict")
        assert (findings, reports) == (strict["sanitizer_findings"], strict["reference_reports"])


@pytest.mark.parametrize("path", [p for p in unit_dirs() if p.parts[-2] == "file"], ids=unit_id)
def test_strict_judges_exactly_the_patches_whose_named_assertions_pass(path):
    u = Unit(path)
    strict = u.json("strict.json")
    passed = named_assertions_pass(u.task, u.prove, u.tap_dir)
    assert passed == (strict["reason"] != "the named assertions do not all pass")
    assert passed == u.json("grade.json")["resolved"]


# -- the rules of tests/test_grade.py and tests/test_tapstream.py, on recorded runs --------------


def test_a_failing_todo_fails_and_a_passing_todo_passes():
    """`not ok N # TODO` is a failure although prove counts it as a pass (exit code 0)."""
    for path, file, ident in (
        ("tiny/default/none/tiny-mul", "calc_mul.t", "calc_mul.t:3 square"),
        (
            "nginx/default/gold/host-todo",
            "http_host.t",
            "http_host.t:27 ipv4 w/port long (host header)",
        ),
    ):
        u = unit(path)
        number = ident.split(" ")[0].split(":")[1]
        line = next(x for x in u.tap(file).splitlines() if x.startswith(f"not ok {number} "))
        assert line.endswith("# TODO not yet")
        # prove counts it as a pass: not among the failed tests of its summary.
        assert f"Failed test:  {number}\n" not in u.tap(file)
        fr = parse_tap(file, u.tap(file))
        assert fr.results[ident] is False and file_problem(fr, u.record(file)) is None
        v = u.verdict()
        assert v["status"] in ("unresolved", "partially_resolved") and not v["resolved"]
        assert ident in v["fail_to_pass"]["failed"] + v["pass_to_pass"]["failed"]
    # With only TODOs failing, prove passes the file.
    assert unit("nginx/default/gold/host-todo").record("http_host.t")["exit_code"] == 0
    assert "Failed test:  1\n" in unit("tiny/default/none/tiny-mul").tap("calc_mul.t")
    gold = unit("tiny/default/gold/tiny-mul")
    assert "ok 3 - square # TODO not yet" in gold.tap("calc_mul.t").splitlines()
    assert parse_tap("calc_mul.t", gold.tap("calc_mul.t")).results["calc_mul.t:3 square"] is True
    assert gold.verdict()["status"] == "resolved" and gold.verdict()["resolved"]


def test_numbers_and_descriptions_make_the_ids():
    fr = parse_tap("calc_mul.t", unit("tiny/default/gold/tiny-mul").tap("calc_mul.t"))
    assert list(fr.results) == [
        "calc_mul.t:1 multiply",
        "calc_mul.t:2 multiply by zero",
        "calc_mul.t:3 square",
    ]
    assert fr.complete and not fr.tampered
    assert assertion_id("a.t", 7, "- x y ") == "a.t:7 x y"
    real = parse_tap(
        "range_clearing.t", unit(f"nginx/default/gold/{RANGE}").tap("range_clearing.t")
    )
    assert list(real.results)[-2:] == [
        "range_clearing.t:4 no alerts",
        "range_clearing.t:5 no sanitizer errors",
    ]


def test_the_fix_resolves_and_no_fix_fails_its_assertions():
    for project, iid in (("tiny", "tiny-add"), ("nginx", RANGE)):
        gold, none = (unit(f"{project}/default/{m}/{iid}").verdict() for m in ("gold", "none"))
        assert (gold["status"], gold["resolved"]) == ("resolved", True)
        assert none["status"] == "unresolved"
        assert none["fail_to_pass"]["failed"] == list(tasks(project)[iid].fail_to_pass)


TAMPERED = ("tiny-server-tamper", "tiny-server-tamper-ahead", "tiny-server-tamper-after")


def test_tap_written_into_the_stream_by_a_patched_nginx_never_passes():
    """The patched servers write `ok` lines into the test's own stdout (past the output guard):
    before its lines, with a plan of their own, out of sequence, or after its last line."""
    why = {
        "tiny-server-tamper": ["a second plan (1..2)", "assertion 1 printed twice"],
        "tiny-server-tamper-ahead": ["assertion 2 out of sequence (expected 1)"],
        "tiny-server-tamper-after": ["assertion 3 past the plan of 2"],
    }
    for iid in TAMPERED:
        u = unit(f"tiny/default/file/{iid}")
        fr = parse_tap("server.t", u.tap("server.t"))
        assert set(why[iid]) <= set(fr.tampered), fr.tampered
        v = u.verdict()
        assert v["status"] == "unresolved" and not v["resolved"]
        # Even the assertions that said ok count for nothing in a tampered file.
        assert v["fail_to_pass"]["passed"] == v["pass_to_pass"]["passed"] == []
        assert [f["kind"] for f in v["file_failures"]] == ["tampered"]
    real = unit("nginx/default/file/range-tamper")
    spoofed = real.tap("range_clearing.t")
    assert "ok 1 - content range cleared - range request" in spoofed.splitlines()
    fr = parse_tap("range_clearing.t", spoofed)
    assert "assertion 1 printed twice" in fr.tampered
    v = real.verdict()
    assert v["status"] == "unresolved" and v["fail_to_pass"]["failed"] == list(
        real.task.fail_to_pass
    )
    assert "printed twice" in v["file_failures"][0]["reason"]


def test_tampering_wins_over_a_partial_pass():
    """A task of two files, one tampered, one honest whose graded assertion passes."""
    tamper, honest = (
        unit("tiny/default/file/tiny-server-tamper"),
        unit("tiny/default/gold/tiny-add"),
    )
    task = tamper.task.__class__(
        **{
            **tamper.task.__dict__,
            "test_files": ("server.t", "calc_add.t"),
            "fail_to_pass": (*tamper.task.fail_to_pass, "calc_add.t:1 add two numbers"),
        }
    )
    v = grade(
        task,
        "built",
        {"server.t": tamper.record("server.t"), "calc_add.t": honest.record("calc_add.t")},
        {"server.t": tamper.tap("server.t"), "calc_add.t": honest.tap("calc_add.t")},
        reference={
            "server.t": (
                tamper.record("server.t", "reference"),
                tamper.tap("server.t", "reference"),
            )
        },
    )
    assert v["status"] == "unresolved" and v["fail_to_pass"]["passed"] == [
        "calc_add.t:1 add two numbers"
    ]


def test_a_partial_skip_is_kept_by_number_with_its_reason():
    fr = parse_tap(
        "partial_skip.t", unit("tiny/default/gold/tiny-partial-graded").tap("partial_skip.t")
    )
    assert fr.skipped == {2: "Foo::Bar not installed"} and fr.complete
    assert not fr.ran("partial_skip.t:2 foo bar") and "partial_skip.t:2 foo bar" not in fr.results
    real = unit("nginx/default/gold/range-skips")
    fr = parse_tap("proxy_next_upstream_tries.t", real.tap("proxy_next_upstream_tries.t"))
    assert fr.skipped == dict.fromkeys(range(5, 9), "long tests")
    assert fr.complete and file_problem(fr, real.record("proxy_next_upstream_tries.t")) is None
    # An ungraded skip is no problem: the graded assertions of the file decide.
    v = unit("tiny/default/file/tiny-partial").verdict()
    assert "partial_skip.t:2 foo bar" not in v["skipped_assertions"]


def test_a_graded_assertion_skipped_here_and_in_the_base_is_an_environment_error():
    for project, iid, ident, reason in (
        ("tiny", "tiny-partial-graded", "partial_skip.t:2 foo bar", "Foo::Bar not installed"),
        ("nginx", "range-skips", "proxy_next_upstream_tries.t:5 timeout", "long tests"),
    ):
        u = unit(f"{project}/default/gold/{iid}")
        file = ident.split(":")[0]
        assert file in u.prove["reference"]  # the base build ran it
        v = u.verdict()
        assert v["status"] == "env_error" and not v["resolved"]
        assert ident in v["skipped_assertions"]
        assert any(ident in e and reason in e for e in v["env_errors"]), v["env_errors"]


def test_a_graded_assertion_skipped_without_a_reference_is_an_environment_error():
    """The base build could not be run here (it does not build): the environment is at fault."""
    u = unit("tiny/default/file/tiny-partial")
    v = grade(u.task, "built", u.prove["files"], {"partial_skip.t": u.tap("partial_skip.t")})
    assert v["status"] == "env_error" and "mul is broken" in v["env_errors"][0]


def test_a_graded_assertion_skipped_only_with_the_patch_fails_the_patch():
    v = unit("tiny/default/file/tiny-partial").verdict()
    assert v["env_errors"] == [] and not v["resolved"]
    assert v["skipped_assertions"] == ["partial_skip.t:3 mul after the check"]
    assert v["file_failures"][0]["kind"] == "skipped"
    assert "the base build runs them" in v["file_failures"][0]["reason"]


def test_a_whole_file_skip_as_prove_prints_it_is_not_a_pass():
    u = unit("tiny/default/gold/tiny-skip")
    out = u.tap("skip.t")
    assert (
        "skip.t .. skipped: Foo::Bar not installed" in out and u.record("skip.t")["exit_code"] == 0
    )
    fr = parse_tap("skip.t", out)
    problem = file_problem(fr, u.record("skip.t"))
    assert fr.skip_all == "Foo::Bar not installed" and problem.kind == "not_started"
    real = unit("nginx/default/gold/range-skips")
    fr = parse_tap("stream_proxy_protocol2_tlv.t", real.tap("stream_proxy_protocol2_tlv.t"))
    assert fr.skip_all == "no stream available" and not fr.results
    assert "stream_proxy_protocol2_tlv.t .. skipped: no stream available" in real.tap(
        "stream_proxy_protocol2_tlv.t"
    )


def test_a_file_the_base_cannot_run_either_is_an_environment_error():
    for path, file in (
        ("tiny/default/gold/tiny-skip", "skip.t"),
        ("tiny/default/none/tiny-skip", "skip.t"),
        ("nginx/default/gold/range-skips", "stream_proxy_protocol2_tlv.t"),
    ):
        u = unit(path)
        assert parse_tap(file, u.tap(file, "reference")).skip_all  # the base skips it too
        v = u.verdict()
        assert v["status"] == "env_error" and v["file_failures"] == []
        assert any(e.startswith(f"{file}: skipped entirely (") for e in v["env_errors"])


def test_nginx_that_does_not_start_is_the_patchs_failure_when_the_base_starts():
    for path, file, why in (
        (
            "tiny/default/file/tiny-server-nostart",
            "server.t",
            "skipped entirely (cannot start nginx)",
        ),
        ("tiny/default/file/tiny-server-die", "server_die.t", "no plan and no TAP"),
        ("nginx/default/file/range-nostart", "range_clearing.t", "no plan and no TAP"),
    ):
        u = unit(path)
        v = u.verdict()
        assert v["status"] == "unresolved" and v["env_errors"] == [], path
        (failure,) = v["file_failures"]
        assert failure["kind"] == "not_started" and failure["reason"].startswith(
            f"nginx did not start: {why}"
        )
        # The same run as its own reference: the base does not start either.
        alone = grade(
            u.task,
            "built",
            u.prove["files"],
            {file: u.tap(file)},
            reference={file: (u.record(file), u.tap(file))},
        )
        assert alone["status"] == "env_error" and why in alone["env_errors"][0]


def test_a_file_that_dies_part_way_or_bails_out_is_the_patchs_failure():
    for iid, reason in (
        ("tiny-crash-die", "test file died: died after 1 of 3 assertions"),
        ("tiny-crash-bail", "test file died: bailed out (tiny crashed)"),
    ):
        u = unit(f"tiny/default/file/{iid}")
        v = u.verdict()
        assert v["status"] == "partially_resolved" and not v["resolved"]
        (failure,) = v["file_failures"]
        assert failure["kind"] == "died" and failure["reason"].startswith(reason)
    out = unit("tiny/default/file/tiny-crash-bail").tap("crash_bail.t")
    assert "Bailout called.  Further testing stopped:  tiny crashed" in out
    assert parse_tap("crash_bail.t", out).bailed_out == "tiny crashed"


def test_a_base_that_misses_a_graded_assertion_is_no_reference():
    """A skipped file whose base run stops before the graded assertion: no vouching."""
    u, died = (
        unit("tiny/default/file/tiny-server-nostart"),
        unit("tiny/default/file/tiny-crash-die"),
    )
    task = u.task.__class__(
        **{
            **u.task.__dict__,
            "test_files": ("crash.t",),
            "fail_to_pass": ("crash.t:3 last",),
            "pass_to_pass": (),
        }
    )
    v = grade(
        task,
        "built",
        {"crash.t": u.record("server.t")},
        {"crash.t": u.tap("server.t").replace("server.t", "crash.t")},
        reference={"crash.t": (died.record("crash.t"), died.tap("crash.t"))},
    )
    assert v["status"] == "env_error"


def test_a_test_file_killed_by_the_patchs_program_asks_the_base_build():
    # The server SIGKILLs every process it may: in prove's PID namespace, the test file, before
    # its plan; prove, the namespace's init, lives on and prints the file's wait status.
    for path, file in (
        ("tiny/default/file/tiny-server-killer", "server.t"),
        ("nginx/default/file/range-killer", "range_clearing.t"),
    ):
        u = unit(path)
        record = u.record(file)
        assert (record["exit_code"], record["timed_out"]) == (1, False)
        fr = parse_tap(file, u.tap(file))
        assert (fr.signal, fr.planned) == (9, None)
        problem = file_problem(fr, record)
        assert (problem.kind, problem.text) == ("died", "killed by signal 9 before its plan")
        assert needs_reference(fr, record, [i for i in u.task.fail_to_pass])
        v = u.verdict()
        assert v["status"] == "unresolved" and v["env_errors"] == []
        assert v["file_failures"] == [
            {
                "file": file,
                "kind": "died",
                "reason": "test file died: killed by signal 9 before its plan; "
                "the base build runs it",
            }
        ]
        # When the base's run dies so too, the environment is at fault.
        env, failure = judge_file(file, fr, record, list(u.task.fail_to_pass), (fr, record))
        assert failure is None and env == f"{file}: killed by signal 9 before its plan"


def test_a_prove_killed_by_a_signal_asks_the_base_build():
    # The same stream, had prove itself been killed (from outside its namespace: the OOM killer,
    # an operator's kill; nothing inside can end it).
    u = unit("tiny/default/file/tiny-server-killer")
    record = dict(u.record("server.t"), exit_code=-9)
    fr = parse_tap("server.t", u.tap("server.t"))
    assert file_problem(fr, record).kind == "killed"
    assert needs_reference(fr, record, [i for i in u.task.fail_to_pass])
    ref = (parse_tap("server.t", u.tap("server.t", "reference")), u.record("server.t", "reference"))
    env, failure = judge_file("server.t", fr, record, list(u.task.fail_to_pass), ref)
    assert env is None and failure == {
        "file": "server.t",
        "kind": "killed",
        "reason": "prove was killed by signal 9; the base build runs the file to its end",
    }
    env, failure = judge_file("server.t", fr, record, list(u.task.fail_to_pass), (fr, record))
    assert failure is None and env == "server.t: prove was killed by signal 9"


def test_a_file_killed_at_its_time_limit_keeps_what_it_printed():
    u = unit("tiny/default/gold/tiny-hang")
    record = u.record("hang.t")
    assert record["timed_out"] and record["exit_code"] is None
    fr = parse_tap("hang.t", u.tap("hang.t"))
    assert fr.results == {"hang.t:1 before the hang": True} and not fr.complete
    assert file_problem(fr, record) is None
    v = u.verdict()
    assert (v["status"], v["timed_out_files"], v["env_errors"]) == (
        "partially_resolved",
        ["hang.t"],
        [],
    )
    assert v["pass_to_pass"] == {
        "passed": ["hang.t:1 before the hang"],
        "failed": ["hang.t:2 after the hang"],
    }


def test_a_missing_file_is_the_environment():
    assert file_problem(parse_tap("x.t", ""), {"missing": True}).kind == "env"
    u = unit("tiny/default/gold/tiny-add")
    task = u.task.__class__(**{**u.task.__dict__, "test_files": ("calc_add.t", "gone.t")})
    # Whatever a run of the base would say: a file that is not there is no patch's doing.
    base_ran = (u.record("calc_add.t"), u.tap("calc_add.t").replace("calc_add.t", "gone.t"))
    for reference in (None, {"gone.t": base_ran}):
        v = grade(
            task,
            "built",
            u.prove["files"],
            {"calc_add.t": u.tap("calc_add.t")},
            reference=reference,
        )
        assert v["status"] == "env_error" and v["file_failures"] == []
        assert v["env_errors"] == ["gone.t: test file does not exist at the test commit"]


def test_build_failures_and_environment_build_errors():
    u = unit("tiny/default/file/tiny-add-broken")
    assert u.json("build.json")["status"] == "compile_failed" and u.prove["files"] == {}
    v = u.verdict()
    assert v["status"] == "compile_failed" and v["fail_to_pass"]["failed"] == list(
        u.task.fail_to_pass
    )
    v = grade(u.task, "env_error", {}, {}, build_reason="make is not on PATH")
    assert v["status"] == "env_error" and v["env_errors"] == ["build: make is not on PATH"]


def test_an_agent_run_that_did_not_finish_has_no_verdict():
    """infra_error and not_run: the agent's status, no graded assertion, not judged strict,
    whatever the unchanged base's TAP says."""
    u = unit("tiny/default/gold/tiny-add")
    for status in UNFINISHED_AGENT:
        v = grade(
            u.task,
            "built",
            u.prove["files"],
            {"calc_add.t": u.tap("calc_add.t")},
            agent_status=status,
        )
        assert (v["status"], v["resolved"], v["env_errors"]) == (status, False, [])
        assert v["fail_to_pass"] == v["pass_to_pass"] == {"passed": [], "failed": []}
        strict = strict_fields(v, True, {"strict": True})
        assert strict["strict"] is None and strict["strict_reason"].startswith("not scored: ")
    v = grade(
        u.task,
        "built",
        u.prove["files"],
        {"calc_add.t": u.tap("calc_add.t")},
        agent_status="failed",
    )
    assert v["status"] == "resolved"


def test_a_rerun_decides_and_both_runs_are_recorded():
    u = unit("tiny/rerun/gold/tiny-flaky")
    assert list(u.prove["reruns"]) == ["flaky.t"]
    v = u.verdict()
    assert (v["status"], v["first_run_status"], v["changed_on_rerun"]) == (
        "resolved",
        "partially_resolved",
        ["flaky.t:2 coin"],
    )
    assert v["reruns"]["flaky.t"]["first"]["flaky.t:2 coin"] is False
    assert v["reruns"]["flaky.t"]["rerun"]["flaky.t:2 coin"] is True
    # Without reruns (rerun_failed=0) the first run decides, with no rerun fields.
    plain = grade(u.task, "built", u.prove["files"], read_texts(u.tap_dir, u.prove["files"]))
    assert plain["status"] == "partially_resolved"
    assert not {"reruns", "changed_on_rerun", "first_run_status"} & set(plain)


def test_a_rerun_that_fails_again_or_dies_still_decides():
    first = unit("tiny/default/none/tiny-add")
    tap = first.tap("calc_add.t")
    v = grade(
        first.task,
        "built",
        first.prove["files"],
        {"calc_add.t": tap},
        reruns={"calc_add.t": (first.record("calc_add.t"), tap)},
    )
    assert (v["status"], v["first_run_status"], v["changed_on_rerun"]) == (
        "unresolved",
        "unresolved",
        [],
    )
    died = unit("tiny/default/file/tiny-crash-die")
    gold = unit("tiny/default/gold/tiny-add")
    task = died.task
    v = grade(
        task,
        "built",
        gold.prove["files"] | {"crash.t": gold.record("calc_add.t")},
        {"crash.t": gold.tap("calc_add.t").replace("calc_add.t", "crash.t")},
        reruns={"crash.t": (died.record("crash.t"), died.tap("crash.t"))},
        reference={
            "crash.t": (died.record("crash.t", "reference"), died.tap("crash.t", "reference"))
        },
    )
    assert v["status"] == "partially_resolved" and v["file_failures"][0]["kind"] == "died"


# -- strict, on recorded runs ---------------------------------------------------------------------


def test_a_patch_that_breaks_another_file_is_resolved_but_not_strict():
    u = unit("tiny/default/file/tiny-add-regression")
    strict = u.json("strict.json")
    assert (strict["regressions"], strict["rerun"]) == (
        ["version.t:1 version output"],
        ["version.t"],
    )
    runs = sorted(
        p.relative_to(u.path / "strict").as_posix() for p in (u.path / "strict").glob("*/run*")
    )
    assert "version.t/run2" in runs and "calc_add.t/run2" not in runs
    grade_json = u.json("grade.json")
    assert grade_json["resolved"] and grade_json["strict"] is False
    assert grade_json["strict_reason"].startswith("1 regression(s): version.t:1 version output")


def test_a_sanitizer_report_of_the_candidate_alone_is_a_finding():
    for path, frames in (
        ("tiny/default/file/tiny-add-overread", {"calc_peek"}),
        (
            "nginx/default/file/range-overread",
            {"ngx_http_gzip_peek", "ngx_http_gzip_header_filter"},
        ),
    ):
        u = unit(path)
        g = u.json("grade.json")
        assert g["resolved"] and g["strict"] is False and g["regressions"] == []
        kinds = {
            (f["tool"], f["kind"], (f["frame"] or "").split(" ")[0])
            for f in g["sanitizer_findings"]
        }
        assert kinds & {("AddressSanitizer", "heap-buffer-overflow", f) for f in frames}, kinds
        finding = g["sanitizer_findings"][0]
        report = (u.path / finding["report"]).read_text()
        assert parse_report(report)[0][:2] == (finding["tool"], finding["kind"])


def test_a_regression_is_a_pass_under_the_reference_and_a_failure_twice_under_the_candidate():
    u = unit("tiny/default/file/tiny-add-regression")
    cand = results_of(runs_of(u.path / "strict", ["version.t"]))
    ref = results_of(runs_of(u.path / "strict-reference", ["version.t"]))
    assert len(cand["version.t"]) == len(ref["version.t"]) == 2
    assert compare(cand, ref) == (["version.t:1 version output"], [], [])
    # One run that passes under the candidate makes it flaky, not a regression; a reference run
    # that fails makes it not counted; a file the candidate did not run fails everything.
    passing = {"version.t": [cand["version.t"][0], ref["version.t"][0]]}
    assert compare(passing, ref) == ([], [], ["version.t:1 version output"])
    wobbly = {"version.t": [ref["version.t"][0], cand["version.t"][0]]}
    assert compare(cand, wobbly) == ([], ["version.t:1 version output"], [])
    assert compare({}, ref)[0] == ["version.t:1 version output"]
    assert suspects(cand, ref) == ["version.t"] and suspects(ref, ref) == []


def test_tap_printed_by_the_server_stays_out_of_the_stream():
    """The output guard sends what nginx started as a server prints to tap/<file>.nginx.log."""
    u = unit("tiny/default/file/tiny-server-spoof")
    assert "ok 1 - add after start" not in u.tap("server.t").splitlines()
    log = (u.tap_dir / u.record("server.t")["nginx_log"]).read_text()
    assert "ok 1 - add after start" in log.splitlines()
    v = u.verdict()
    assert v["status"] == "unresolved" and v["fail_to_pass"]["failed"] == [
        "server.t:1 add after start"
    ]
    assert v["file_failures"] == [] and u.prove["reference"] == {}


def test_only_files_with_a_graded_assertion_that_did_not_pass_run_again():
    """rerun_failed=1: a graded failure, a graded assertion that never ran, or a tampered stream
    runs again; a file whose only failures are ungraded, or that is missing, does not."""
    none, hang = unit("tiny/default/none/tiny-add"), unit("tiny/default/gold/tiny-hang")
    assert files_to_rerun(none.task, none.tap_dir, none.prove["files"]) == ["calc_add.t"]
    ungraded = none.task.__class__(
        **{**none.task.__dict__, "fail_to_pass": ("calc_add.t:2 add zeros",), "pass_to_pass": ()}
    )
    assert files_to_rerun(ungraded, none.tap_dir, none.prove["files"]) == []
    assert files_to_rerun(hang.task, hang.tap_dir, hang.prove["files"]) == ["hang.t"]
    tamper = unit("tiny/default/file/tiny-server-tamper-after")
    assert files_to_rerun(tamper.task, tamper.tap_dir, tamper.prove["files"]) == ["server.t"]
    missing = {"calc_add.t": dict(none.record("calc_add.t"), missing=True)}
    assert files_to_rerun(none.task, none.tap_dir, missing) == []


def test_gold_is_judged_against_the_base_and_only_when_asked():
    for iid in ("tiny-add", "tiny-mul"):
        judged = unit(f"tiny/strict-gold/gold/{iid}")
        strict = judged.json("strict.json")
        assert strict["reference"] == "base" and strict["strict"] is True
        assert strict["sanitizer"]["key"] != strict["key"]  # a build of its own
        grade_json = judged.json("grade.json")
        assert (grade_json["strict"], grade_json["strict_reason"]) == (True, "")
        plain = unit(f"tiny/default/gold/{iid}")
        assert plain.json("strict.json") is None
        assert (plain.json("grade.json")["strict"], plain.json("grade.json")["strict_reason"]) == (
            None,
            "not judged (strict_gold=0)",
        )
        # strict=0: the same verdict, not judged.
        fields = strict_fields(plain.verdict(), False, None)
        assert (fields["strict"], fields["strict_reason"]) == (None, "not judged (strict=0)")
    # The base fails the bug's assertions: not counted, and not among the regression files'.
    none = unit("tiny/default/none/tiny-add").verdict()
    assert none["fail_to_pass"]["failed"] == ["calc_add.t:1 add two numbers"]
    assert unit("tiny/strict-gold/gold/tiny-add").json("strict.json")["regressions"] == []


def test_without_a_sanitizer_build_the_plain_builds_judge_the_regressions():
    broken = unit("tiny/default/file/tiny-add-nosan-regression").json("strict.json")
    assert (broken["strict"], broken["sanitizer"], broken["regressions"]) == (
        False,
        None,
        ["version.t:1 version output"],
    )
    assert broken["rerun"] == ["version.t"]
    clean = unit("tiny/default/file/tiny-add-nosan")
    strict = clean.json("strict.json")
    assert (strict["strict"], strict["reason"], strict["retry"]) == (
        None,
        "the sanitizer build does not build (compile_failed)",
        False,
    )
    assert clean.json("grade.json")["strict"] is None and clean.json("grade.json")["resolved"]
