"""Task-file validation (benchmark.py): a good file loads; each mistake names the file, the task
and the field."""

import copy
import json

import pytest
from conftest import SOURCE_ROOT

from nginx_eval.core.errors import UserError
from nginx_eval.run.benchmark import load_benchmark, next_version

GOOD = {
    "instance_id": "x-1",
    "repo": "nginx/nginx",
    "test_repo": "nginx/nginx-tests",
    "base_commit": "a" * 40,
    "fix_commit": "b" * 40,
    "test_commit": "c" * 40,
    "test_files": ["h2.t"],
    "configure_flags": ["--with-http_v2_module"],
    "fail_to_pass": ["h2.t:3 body"],
    "pass_to_pass": ["h2.t:1 first", "h2.t:2"],
    "problem_statement": "requests hang",
}


def write(tmp_path, tasks, name="bench"):
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps({"tasks": tasks}) if not isinstance(tasks, str) else tasks)
    return p


def error_of(tmp_path, tasks):
    with pytest.raises(UserError) as e:
        load_benchmark(write(tmp_path, tasks))
    return str(e.value)


def test_good_file_loads(tmp_path):
    bench = load_benchmark(write(tmp_path, [GOOD]))
    assert bench.name == "bench" and bench.tasks[0].test_files == ("h2.t",)
    assert len(bench.digest) == 64


@pytest.mark.parametrize(
    "field,value,expect",
    [
        ("base_commit", "HEAD", "full 40-hex"),
        ("fix_commit", "abc1234", "full 40-hex"),
        ("test_commit", "main", "full 40-hex"),
        ("test_files", [], "must not be empty"),
        ("test_files", ["../x.t"], "relative path"),
        ("fail_to_pass", [], "must not be empty"),
        ("fail_to_pass", ["other.t:1"], "names no file"),
        ("pass_to_pass", ["h2.t:3 body"], "also listed"),
        ("pass_to_pass", ["h2.t:1 first", "h2.t:1 first"], "duplicate"),
        ("configure_flags", "--with-x", "must be a list"),
        ("repo", "nginx", "owner/name"),
        ("problem_statement", " ", "must not be empty"),
    ],
)
def test_bad_fields_name_file_task_and_field(tmp_path, field, value, expect):
    task = dict(GOOD, **{field: value})
    message = error_of(tmp_path, [task])
    assert "bench.json" in message and "task x-1" in message and f"field {field}" in message
    assert expect in message


def test_missing_field_duplicate_id_and_malformed_json(tmp_path):
    task = dict(GOOD)
    del task["test_files"]
    assert "field test_files: is missing" in error_of(tmp_path, [task])
    assert "duplicate instance_id" in error_of(tmp_path, [GOOD, copy.deepcopy(GOOD)])
    assert "malformed JSON at line 1" in error_of(tmp_path, '{"tasks": [')
    assert "unknown field(s) colour" in error_of(tmp_path, [dict(GOOD, colour="red")])


# -- candidates files (mined stubs awaiting validation) -------------------------------------------

STUB = dict(GOOD, fail_to_pass=[], pass_to_pass=[], problem_statement="TODO")


def write_candidates(tmp_path, tasks, flag=True):
    p = tmp_path / "mined.json"
    p.write_text(json.dumps({"name": "mined", "candidates": flag, "tasks": tasks}))
    return p


def test_candidates_file_accepts_empty_assertions_and_the_placeholder(tmp_path):
    bench = load_benchmark(
        write_candidates(tmp_path, [STUB, dict(STUB, instance_id="x-2", problem_statement="")])
    )
    assert bench.candidates and bench.tasks[0].fail_to_pass == ()
    assert bench.tasks[0].problem_statement == "TODO"
    assert not load_benchmark(write(tmp_path, [GOOD])).candidates


def test_benchmark_file_refuses_the_placeholder_statement(tmp_path):
    message = error_of(tmp_path, [dict(GOOD, problem_statement="TODO")])
    assert "bench.json, task x-1, field problem_statement: is the miner's placeholder" in message
    # Without the flag, a stub is refused as before: the first empty list named.
    message = error_of(tmp_path, [STUB])
    assert "bench.json, task x-1, field fail_to_pass: must not be empty" in message


def test_candidates_file_still_checks_every_other_field(tmp_path):
    with pytest.raises(UserError) as e:
        load_benchmark(write_candidates(tmp_path, [dict(STUB, base_commit="HEAD")]))
    assert "mined.json, task x-1, field base_commit: must be a full 40-hex" in str(e.value)
    with pytest.raises(UserError) as e:
        load_benchmark(write_candidates(tmp_path, [dict(STUB, pass_to_pass=["other.t:1"])]))
    assert "field pass_to_pass: 'other.t:1' names no file in test_files" in str(e.value)
    with pytest.raises(UserError) as e:
        load_benchmark(write_candidates(tmp_path, [STUB], flag="yes"))
    assert "mined.json, field candidates: must be true or false, got 'yes'" in str(e.value)


def test_a_candidates_file_refuses_every_stage_but_its_validation(tmp_path):
    bench = load_benchmark(write_candidates(tmp_path, [STUB]))
    with pytest.raises(UserError) as e:
        bench.refuse_candidates("mined:gold")
    message = str(e.value)
    assert message.startswith(f"{tmp_path / 'mined.json'}: is a candidates file")
    assert "`doit run mined:validate`" in message and "scripts/promote_tasks.py" in message
    assert "'mined:gold' does not run on it" in message and "\n" not in message
    load_benchmark(write(tmp_path, [GOOD])).refuse_candidates("bench:gold")  # no error


# -- the version and its changelog -----------------------------------------------------------------


def versioned(tasks, version="1.1", changelog=None):
    return {
        "name": "bench",
        "version": version,
        "tasks": tasks,
        "changelog": changelog
        if changelog is not None
        else [
            {
                "version": "1.1",
                "date": "2026-11-25",
                "tasks": len(tasks),
                "changes": "1 task added",
            },
            {"version": "1.0", "date": "2026-11-22", "tasks": 0, "changes": "empty"},
        ],
    }


def version_error(tmp_path, data):
    return error_of(tmp_path, json.dumps(data))


def test_a_versioned_file_loads_and_an_unversioned_one_too(tmp_path):
    bench = load_benchmark(write(tmp_path, json.dumps(versioned([GOOD]))))
    assert bench.version == "1.1" and [e["version"] for e in bench.changelog] == ["1.1", "1.0"]
    plain = load_benchmark(write(tmp_path, [GOOD]))
    assert plain.version is None and plain.changelog == ()


def test_the_shipped_file_has_a_version_and_a_changelog_of_its_task_counts():
    bench = load_benchmark(SOURCE_ROOT / "tasks" / "nginx.json")
    assert bench.version == bench.changelog[0]["version"]
    assert bench.changelog[0]["tasks"] == len(bench.tasks)
    assert bench.changelog[-1]["version"] == "1.0"


@pytest.mark.parametrize(
    "change,expect",
    [
        (lambda d: d.pop("version"), "bench.json, field version: is missing"),
        (lambda d: d.update(version="v2"), 'bench.json, field version: must be "MAJOR.MINOR"'),
        (lambda d: d.update(version="1.01"), "field version: must be"),
        (lambda d: d.pop("changelog"), "bench.json, field changelog: must be a non-empty list"),
        (lambda d: d.update(changelog=[]), "field changelog: must be a non-empty list"),
        (
            lambda d: d.update(version="1.2"),
            "field version: is '1.2', but the newest changelog entry is '1.1': add an entry",
        ),
        (
            lambda d: d["changelog"][0].update(tasks=5),
            "bench.json, field changelog: the newest entry (version 1.1) says 5 tasks, "
            "the file has 1",
        ),
        (
            lambda d: d["changelog"][1].update(date="2026-12-01"),
            "bench.json, changelog entry 1 (version 1.0), field date: is later than that of the "
            "newer entry 1.1",
        ),
        (
            lambda d: d["changelog"][1].update(version="1.1"),
            "changelog entry 1 (version 1.1), field version: must be older than the entry "
            "before it",
        ),
        (
            lambda d: d["changelog"][1].update(date="22.11.2026"),
            "changelog entry 1 (version 1.0), field date: must be a date YYYY-MM-DD",
        ),
        (
            lambda d: d["changelog"][1].pop("changes"),
            "changelog entry 1 (version 1.0), field changes: is missing",
        ),
        (
            lambda d: d["changelog"][1].update(changes=" "),
            "changelog entry 1 (version 1.0), field changes: must say what changed",
        ),
        (
            lambda d: d["changelog"][0].update(tasks="1"),
            'changelog entry 0 (version 1.1), field tasks: must be a whole number, got "1"',
        ),
        (
            lambda d: d["changelog"][0].update(author="me"),
            "changelog entry 0 (version 1.1): unknown field(s) author",
        ),
        (lambda d: d["changelog"].insert(0, "1.2"), "changelog entry 0: must be a JSON object"),
    ],
)
def test_bad_version_or_changelog_names_the_file_entry_and_field(tmp_path, change, expect):
    data = versioned([GOOD])
    change(data)
    assert expect in version_error(tmp_path, data)


def test_next_version():
    assert next_version("4.19") == "4.20" and next_version("4.19", major=True) == "5.0"


# -- the fairness audit ---------------------------------------------------------------------------

AUDIT = {
    "date": "2026-11-25",
    "statement_sufficient": True,
    "tests_fair": True,
    "over_strict": [],
    "changes": [],
}
AMENDED = {
    "date": "2026-11-25",
    "statement_sufficient": False,
    "tests_fair": False,
    "over_strict": [
        {"assertion": "h2.t:3 body", "why": "an exact text", "fixed_by": "statement"},
        {"assertion": "h2.t:4 log", "why": "a log line", "fixed_by": "dropped"},
    ],
    "changes": [
        {"field": "problem_statement", "why": "says the text"},
        {"field": "fail_to_pass", "dropped": ["h2.t:4 log"], "why": "incidental"},
    ],
    "alternative": {"resolved_before": False, "resolved": True, "strict": None},
}


def test_an_audit_is_optional_when_loading_and_kept_on_the_task(tmp_path):
    bench = load_benchmark(write(tmp_path, [GOOD, dict(GOOD, instance_id="x-2", audit=AMENDED)]))
    assert bench.tasks[0].audit is None
    assert bench.tasks[1].audit["changes"][1]["dropped"] == ["h2.t:4 log"]
    assert "audit" not in bench.tasks[1].to_json()  # not an input of any stage


@pytest.mark.parametrize(
    "change,expect",
    [
        (lambda a: a.pop("tests_fair"), "field audit.tests_fair: is missing"),
        (lambda a: a.update(date="today"), "field audit.date: must be a date"),
        (
            lambda a: a.update(statement_sufficient="yes"),
            "field audit.statement_sufficient: must be true or false",
        ),
        (lambda a: a.update(colour="red"), "field audit: unknown field(s) colour"),
        (lambda a: a.update(tests_fair=True), "field audit.tests_fair: must be false exactly when"),
        (
            lambda a: a["changes"].pop(0),
            "field audit.statement_sufficient: is false, but no change amends the "
            "problem_statement",
        ),
        (
            lambda a: a["changes"][1].update(dropped=[]),
            "field audit.changes[1].dropped: must name the assertions dropped",
        ),
        (
            lambda a: a["changes"][1].update(dropped=["h2.t:3 body"]),
            "field audit.changes[1].dropped: 'h2.t:3 body' is dropped but still graded",
        ),
        (
            lambda a: a["changes"][1].update(dropped=["other.t:1 x"]),
            "names no assertion of a file in test_files",
        ),
        (
            lambda a: a["changes"][0].update(field="configure_flags"),
            "field audit.changes[0].field: must name the field changed",
        ),
        (
            lambda a: a["over_strict"][1].update(assertion="h2.t:5 other"),
            "field audit.over_strict[1].assertion: 'h2.t:5 other' is fixed by dropping it",
        ),
        (
            lambda a: a["over_strict"][0].update(fixed_by="ignored"),
            "field audit.over_strict[0].fixed_by: must be one of statement, dropped",
        ),
        (lambda a: a["over_strict"][0].pop("why"), "field audit.over_strict[0].why: is missing"),
        (
            lambda a: a["alternative"].update(strict=0),
            "field audit.alternative.strict: must be true, false or null",
        ),
        (
            lambda a: a["alternative"].pop("resolved"),
            "field audit.alternative.resolved: is missing",
        ),
    ],
)
def test_audit_mistakes_name_file_task_and_field(tmp_path, change, expect):
    audit = copy.deepcopy(AMENDED)
    change(audit)
    message = error_of(tmp_path, [dict(GOOD, audit=audit)])
    assert "bench.json" in message and "task x-1" in message and expect in message, message


def test_a_statement_fix_needs_the_assertion_graded_and_an_amended_statement(tmp_path):
    audit = copy.deepcopy(AMENDED)
    audit["over_strict"] = audit["over_strict"][:1]
    audit["statement_sufficient"] = True
    audit["changes"] = [{"field": "fail_to_pass", "dropped": ["h2.t:4 log"], "why": "x"}]
    message = error_of(tmp_path, [dict(GOOD, audit=audit)])
    assert "'h2.t:3 body' is fixed by the statement" in message
    assert load_benchmark(write(tmp_path, [dict(GOOD, audit=AUDIT)])).tasks[0].audit == AUDIT


def test_unaudited_names_the_tasks_without_an_audit(tmp_path):
    from nginx_eval.run.benchmark import unaudited

    bench = load_benchmark(write(tmp_path, [GOOD, dict(GOOD, instance_id="x-2", audit=AUDIT)]))
    assert unaudited(bench.tasks) == ["x-1"]
