"""scripts/record_alternatives.py: the results of a run of tasks/alternatives.jsonl become each
task's audit.alternative, before and after the audit's changes."""

import json

import pytest
from conftest import SOURCE_ROOT, script_module

from nginx_eval.core.errors import UserError
from nginx_eval.run.benchmark import load_benchmark

SCRIPT = SOURCE_ROOT / "scripts" / "record_alternatives.py"
AUDIT = {
    "date": "2026-11-25",
    "statement_sufficient": True,
    "tests_fair": True,
    "over_strict": [],
    "changes": [],
}
TASK = {
    "repo": "nginx/nginx",
    "test_repo": "nginx/nginx-tests",
    "base_commit": "a" * 40,
    "fix_commit": "b" * 40,
    "test_commit": "c" * 40,
    "test_files": ["h2.t"],
    "configure_flags": [],
    "fail_to_pass": ["h2.t:1 a"],
    "pass_to_pass": [],
    "problem_statement": "it hangs",
}


def script():
    return script_module("record_alternatives")


def row(iid, resolved, strict=None, version="5.0"):
    return {
        "instance_id": iid,
        "resolved": resolved,
        "strict": strict,
        "outcome": "resolved" if resolved else "unresolved",
        "benchmark_version": version,
    }


def test_before_and_after(tmp_path):
    data = {
        "version": "5.0",
        "changelog": [{"version": "5.0", "date": "2026-11-25", "tasks": 2, "changes": "x"}],
        "tasks": [
            dict(TASK, instance_id="t-1", audit=dict(AUDIT)),
            dict(TASK, instance_id="t-2", audit=dict(AUDIT)),
        ],
    }
    record = script().record
    assert record(data, [row("t-1", False, version="4.19")], before=True) == [
        "t-1: unresolved, strict None"
    ]
    assert data["tasks"][0]["audit"]["alternative"] == {
        "resolved_before": False,
        "resolved": False,
        "strict": None,
    }
    record(data, [row("t-1", True, True), row("t-2", True, False)])
    assert data["tasks"][0]["audit"]["alternative"] == {
        "resolved_before": False,
        "resolved": True,
        "strict": True,
    }
    assert data["tasks"][1]["audit"]["alternative"] == {
        "resolved_before": True,
        "resolved": True,
        "strict": False,
    }
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(data))
    assert load_benchmark(path).tasks[0].audit["alternative"]["resolved"] is True
    with pytest.raises(UserError, match="graded under version 4.19"):
        record(data, [row("t-1", True, version="4.19")])
    with pytest.raises(UserError, match="no audited task"):
        record(data, [row("t-9", True)])


def test_the_shipped_alternatives_are_a_predictions_file_of_audited_tasks():
    """tasks/alternatives.jsonl: SWE-bench predictions rows (with the approach each fix takes),
    one per task, each task audited with its alternative recorded."""
    tasks = {t.instance_id: t for t in load_benchmark(SOURCE_ROOT / "tasks" / "nginx.json").tasks}
    rows = [
        json.loads(line)
        for line in (SOURCE_ROOT / "tasks" / "alternatives.jsonl").read_text().splitlines()
    ]
    assert len(rows) >= 25 and len({r["instance_id"] for r in rows}) == len(rows)
    for r in rows:
        assert set(r) == {"instance_id", "model_name_or_path", "model_patch", "approach"}
        assert r["model_name_or_path"] == "alternatives" and r["model_patch"].startswith("diff")
        assert "alternative" in tasks[r["instance_id"]].audit, r["instance_id"]
    recorded = [i for i, t in tasks.items() if t.audit and "alternative" in t.audit]
    assert sorted(recorded) == sorted(r["instance_id"] for r in rows)
