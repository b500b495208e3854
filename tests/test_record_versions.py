"""Every record the harness writes says its format version (core/records.py: FORMAT_VERSION);
a record from before the field is of version 1; one of a later version is refused in one line
naming the file, where records are read back."""

import collections
import json
import re

import pytest
from conftest import SOURCE_ROOT

from nginx_eval.core import jsonio, records
from nginx_eval.core.errors import UserError, UserFailure, failing_on_user_error
from nginx_eval.core.layout import Layout
from nginx_eval.results import stage as results
from nginx_eval.run.benchmark import Task
from nginx_eval.run.modes import GoldMode

# The files that write JSON the harness does not read back as a record: a program's settings
# and version cache, the sandbox's settings, a remote agent's diff, the build plans' cache, the
# stamps of clones, trees and workspaces (each made again when it is absent or differs), and
# the run's validation.json ({instance_id: record}, each record with its version).
NOT_RECORDS = {
    "agent/programs/base.py": 1,
    "agent/programs/claude.py": 1,
    "agent/programs/gemini.py": 1,
    "agent/sandbox.py": 1,
    "agent/stage.py": 1,
    "build/plan.py": 1,
    "checks/validate.py": 1,
    "core/records.py": 1,  # write_record itself
    "prove/tree.py": 2,
    "report/process.py": 1,  # a cache, under its rules' digest rather than a version
    "repositories/stage.py": 1,
    "suite/stage.py": 1,
    "swebench/envs.py": 1,  # specs.json: the swebench package's constants, under its version
    "workspace/stage.py": 2,
}


def test_a_record_is_written_with_its_version_and_read_back(tmp_path):
    path = tmp_path / "grade.json"
    records.write_record(path, {"status": "resolved"})
    assert jsonio.read_json(path) == {"status": "resolved", "format_version": 1}
    assert records.read_record(path) == {"status": "resolved", "format_version": 1}
    assert records.record_version(path, records.read_record(path)) == records.FORMAT_VERSION


def test_a_record_from_before_the_field_is_version_1(tmp_path):
    path = tmp_path / "agent.json"
    jsonio.write_json(path, {"status": "completed"})
    assert records.record_version(path, records.read_record(path)) == 1
    assert records.read_record(tmp_path / "absent.json", {}) == {}


def test_a_later_version_is_refused_in_one_line(tmp_path):
    path = tmp_path / "prove.json"
    jsonio.write_json(path, {"files": {}, "format_version": records.FORMAT_VERSION + 1})
    with pytest.raises(UserError) as caught:
        records.read_record(path)
    assert str(caught.value) == (
        f"{path}: written by format version {records.FORMAT_VERSION + 1}, "
        f"this nginx-eval reads up to {records.FORMAT_VERSION}"
    )
    for bad in ("2", 0, True, None):
        jsonio.write_json(path, {"format_version": bad})
        with pytest.raises(UserError, match="is not a version"):
            records.read_record(path)


def test_results_refuse_a_grade_of_a_later_version(tmp_path):
    """results.jsonl is made from the records: a grade.json a later nginx-eval wrote stops it
    with the one line (a doit action: a UserFailure, no traceback)."""
    layout = Layout(tmp_path, tmp_path / "cache", tmp_path / "results")
    mode, task = GoldMode("gold"), Task(**{**vars(_task()), "instance_id": "t-1"})
    path = layout.grade_json(mode.name, task.instance_id)
    path.parent.mkdir(parents=True)
    jsonio.write_json(path, {"status": "resolved", "format_version": 99})
    failure = failing_on_user_error(results.result_row, layout, mode, task)
    assert isinstance(failure, UserFailure)
    assert f"{path}: written by format version 99, this nginx-eval reads up to" in str(failure)


def _task():
    return Task("t", "o/r", "o/t", "a", "b", "c", ("x.t",), (), ("x.t:1 a",), (), "p")


def test_every_record_is_written_through_write_record():
    """A new jsonio.write_json of the package is a record without a version, or another file
    that is no record: NOT_RECORDS says which."""
    package = SOURCE_ROOT / "nginx_eval"
    found = collections.Counter()
    for path in package.rglob("*.py"):
        text = path.read_text()
        n = len(re.findall(r"\bjsonio\.write_json\(|^\s*write_json\(", text, re.M))
        if n:
            found[str(path.relative_to(package))] = n
    assert dict(found) == NOT_RECORDS


def test_a_run_refuses_a_record_a_later_version_wrote(project):
    """Through doit: the results of a mode whose grade.json a later nginx-eval wrote stop at one
    ``nginx-eval: error:`` line naming the file; the record is left as it is."""
    project.doit("run", "tiny:gold")
    grade = project.results / "default" / "gold" / "tiny-add" / "grade.json"
    later = records.FORMAT_VERSION + 1
    grade.write_text(json.dumps(dict(json.loads(grade.read_text()), format_version=later)))
    proc, _ = project.doit("run", "tiny:gold", check=False)
    line = (
        f"nginx-eval: error: {grade}: written by format version {later}, "
        f"this nginx-eval reads up to {records.FORMAT_VERSION}"
    )
    assert proc.returncode != 0
    assert line in proc.stderr.splitlines(), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert json.loads(grade.read_text())["format_version"] == later
