"""Verdicts nobody can fool, end to end on the fixture: patches scored through `predictions=`
that print TAP from the "server", stop it from starting, or meet a test tree someone edited, and
an environment that tries to leak into prove."""

import difflib
import json
import os
import subprocess

import pytest
from conftest import Project

# Every test here starts doit, make, prove, the sandbox or the CLI (conftest.py).
E2E = True


def source_at(project, commit, path):
    return subprocess.run(
        ["git", "show", f"{commit}:{path}"],
        cwd=project.mirrors / "acme+tiny",
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def edit_patch(project, commit, path, old, new):
    """A unified diff (a/ b/ prefixes, as git apply -p1 wants) replacing `old` by `new`."""
    before = source_at(project, commit, path)
    assert old in before
    after = before.replace(old, new)
    return "".join(
        difflib.unified_diff(
            before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"
        )
    )


SERVING = 'printf("tiny: serving\\n");\n        return 0;'


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """One run of mode `file` over hostile patches, plus gold and none, on tasks/verdicts.json."""
    project = Project(tmp_path_factory.mktemp("verdicts"))
    add = project.tasks[0]
    server = dict(
        add,
        test_files=["server.t"],
        fail_to_pass=["server.t:1 add after start"],
        pass_to_pass=["server.t:2 mul after start"],
    )
    die = dict(
        server,
        test_files=["server_die.t"],
        fail_to_pass=["server_die.t:1 add after start"],
        pass_to_pass=["server_die.t:2 mul after start"],
    )
    env = dict(
        add,
        test_files=["env.t"],
        fail_to_pass=["env.t:1 add two numbers"],
        pass_to_pass=[
            "env.t:2 no inherited TEST_NGINX_UNSAFE",
            "env.t:3 at most one user directive",
        ],
    )
    tasks = [
        dict(server, instance_id="v-spoof"),
        dict(server, instance_id="v-nostart"),
        dict(die, instance_id="v-die"),
        dict(env, instance_id="v-env"),
    ]
    (project.root / "tasks" / "verdicts.json").write_text(json.dumps({"tasks": tasks}))
    base = add["base_commit"]
    main_c = "src/core/nginx.c"
    gold = subprocess.run(
        ["git", "diff", base, add["fix_commit"]],
        cwd=project.mirrors / "acme+tiny",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    patches = {
        # The "server" prints the line the grader wants, after the real output of the test.
        "v-spoof": edit_patch(
            project,
            base,
            main_c,
            SERVING,
            'printf("ok 1 - add after start\\n");\n        return 0;',
        ),
        "v-nostart": edit_patch(project, base, main_c, SERVING, "return 1;"),
        "v-die": edit_patch(project, base, main_c, SERVING, "return 1;"),
        "v-env": gold,
    }
    preds = project.base / "preds.jsonl"
    preds.write_text(
        "".join(
            json.dumps({"instance_id": i, "model_patch": p, "model_name_or_path": "hostile"}) + "\n"
            for i, p in patches.items()
        )
    )
    home = project.base / "home"
    home.mkdir()
    # A ~/.proverc that would run no test at all, and knobs that change what tests do.
    (home / ".proverc").write_text("--exec=/bin/false\n")
    leaky = {"HOME": str(home), "TEST_NGINX_UNSAFE": "1", "TEST_NGINX_GLOBALS": "user nobody;"}
    project.doit(
        "run", "verdicts:file", "verdicts:gold", "verdicts:none", f"predictions={preds}", env=leaky
    )
    return project


def grade_of(project, mode, iid):
    return project.read(mode, iid, "grade.json")


def test_tap_printed_by_the_server_stays_out_of_the_stream(scored):
    v = grade_of(scored, "file", "v-spoof")
    assert v["status"] == "unresolved" and v["fail_to_pass"]["failed"] == [
        "server.t:1 add after start"
    ]
    tap_dir = scored.task_dir("file", "v-spoof") / "tap"
    assert "ok 1 - add after start" not in (tap_dir / "server.t.tap").read_text().splitlines()
    assert "ok 1 - add after start" in (tap_dir / "server.t.nginx.log").read_text()
    # gold prints nothing of the kind and resolves.
    assert grade_of(scored, "gold", "v-spoof")["status"] == "resolved"


def test_a_server_that_does_not_start_is_the_patchs_failure(scored):
    for iid in ("v-nostart", "v-die"):
        v = grade_of(scored, "file", iid)
        assert v["status"] == "unresolved" and v["env_errors"] == [], iid
        assert v["file_failures"][0]["kind"] == "not_started", iid
        assert "nginx did not start" in v["file_failures"][0]["reason"], iid
        prove = scored.read("file", iid, "prove.json")
        assert prove["reference_key"] and list(prove["reference"]) == [
            v["file_failures"][0]["file"]
        ]
    # The empty patch starts: nothing to compare, an honest failure.
    none = grade_of(scored, "none", "v-nostart")
    assert none["status"] == "unresolved" and none["file_failures"] == []


def test_the_test_environment_is_pinned(scored):
    v = grade_of(scored, "file", "v-env")
    assert v["status"] == "resolved", v
    environment = scored.read("file", "v-env", "prove.json")["environment"]
    assert "TEST_NGINX_UNSAFE" not in environment
    assert environment["TEST_NGINX_GLOBALS"].count("user") <= 1


def test_an_edited_test_tree_is_extracted_again(scored):
    tree = next((scored.cache / "tests").glob("*/server.t")).parent
    path = tree / "server.t"
    path.chmod(0o644)
    path.write_text(path.read_text().replace("is(run('add', 2, 3), '5'", "ok(1"))
    scored.doit("run", "verdicts:none", "run=again", "instances=v-spoof")
    prove = scored.read("none", "v-spoof", "prove.json", run="again")
    assert any("server.t" in note and "extracted again" in note for note in prove["notes"])
    v = scored.read("none", "v-spoof", "grade.json", run="again")
    assert v["status"] == "unresolved"
    assert "ok(1" not in path.read_text()


def test_a_checked_test_tree_is_trusted_by_its_stat_until_a_file_changes(scored, monkeypatch):
    from nginx_eval.core.layout import Layout
    from nginx_eval.prove import tree as testtree

    layout = Layout(root=scored.root, cache=scored.cache, results_root=scored.results, run="x")
    task = scored.benchmark()["tasks"][0]
    repo, commit = task["test_repo"], task["test_commit"]
    testtree.verified_tests_tree(layout, repo, commit)  # checked by git: its stat recorded
    asked = []
    real = testtree.tests_tree_changes
    monkeypatch.setattr(testtree, "tests_tree_changes", lambda *a: asked.append(a) or real(*a))
    tree, notes = testtree.verified_tests_tree(layout, repo, commit)
    assert notes == [] and asked == []
    # An edit of the same size with its mtime put back still changes the ctime: git decides.
    path = next(p for p in tree.glob("*.t"))
    text, st = path.read_text(), path.stat()
    path.chmod(0o644)
    path.write_text(text.replace("ok", "OK", 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    tree, notes = testtree.verified_tests_tree(layout, repo, commit)
    assert len(asked) == 1 and path.name in notes[0] and "extracted again" in notes[0]
    assert (tree / path.name).read_text() == text


def test_environment_errors_are_not_kept(scored, tmp_path):
    # A graded assertion skipped in base and candidate alike is the environment's doing...
    project = scored
    iid = "v-env"
    grade_path = project.task_dir("gold", iid) / "grade.json"
    record = json.loads(grade_path.read_text())
    record["status"] = "env_error"
    grade_path.write_text(json.dumps(record))
    # ...and a later run proves and grades again instead of keeping it.
    _, executed = project.doit("run", "verdicts:gold")
    assert f"prove:verdicts/gold/{iid}" in executed
    assert grade_of(project, "gold", iid)["status"] == "resolved"
