"""agent/gate.py: the run's stop after refused credentials, its budget, the retries' backoff;
and the budget end to end with the fixture's scripted agent (0.25 USD a run)."""

import pytest

from nginx_eval.agent import gate as agent_limits
from nginx_eval.core import jsonio
from nginx_eval.core.errors import UserError
from nginx_eval.core.layout import Layout
from nginx_eval.core.procs import Interrupted


@pytest.fixture
def layout(tmp_path):
    return Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")


def test_a_stop_holds_every_later_agent_back_until_cleared(layout):
    agent_limits.check_not_stopped(layout)
    with pytest.raises(UserError) as first:
        agent_limits.stop_the_run(layout, "raw/a", "phase solve: exit code 1: Invalid API key")
    assert str(first.value) == (
        "the API refused the Claude Code agent's credentials (agent raw/a, phase solve: exit "
        "code 1: Invalid API key); no other agent starts in this run: fix ANTHROPIC_API_KEY (or "
        "the CLI's login) and run again"
    )
    # A second refusal (an agent that was already running) says the very same line.
    with pytest.raises(UserError) as second:
        agent_limits.stop_the_run(layout, "raw/b", "phase solve: exit code 1: other")
    with pytest.raises(UserError) as later:
        agent_limits.check_not_stopped(layout)
    assert str(second.value) == str(later.value) == str(first.value)
    agent_limits.clear_stop(layout)
    agent_limits.check_not_stopped(layout)


def test_the_budget_counts_every_agent_record_of_the_run(layout):
    assert agent_limits.over_budget(layout, None) is None
    assert agent_limits.over_budget(layout, 1.0) is None
    jsonio.write_json(layout.agent_json("raw", "a"), {"cost_usd": 0.75})
    jsonio.write_json(layout.agent_json("impl", "b"), {"cost_usd": None})
    jsonio.write_json(layout.agent_json("impl", "c"), {"cost_usd": 0.25})
    assert agent_limits.run_spent(layout) == 1.0
    assert agent_limits.over_budget(layout, 1.0) == 1.0
    assert agent_limits.over_budget(layout, 1.5) is None


def test_backoff_doubles_and_an_interrupt_ends_the_wait(monkeypatch, tmp_path):
    monkeypatch.delenv(agent_limits.BACKOFF_VARIABLE, raising=False)
    assert [agent_limits.backoff_seconds(n) for n in (1, 2, 3)] == [30, 60, 120]
    monkeypatch.setenv(agent_limits.BACKOFF_VARIABLE, "0.5")
    assert agent_limits.backoff_seconds(2) == 1.0
    monkeypatch.setattr(agent_limits.procs, "interrupted", lambda: True)
    with pytest.raises(Interrupted):
        agent_limits.wait_interruptibly(60)


def test_an_attempts_logs_are_kept_apart(tmp_path):
    logs = tmp_path / "agent"
    (logs / "attempt-1").mkdir(parents=True)
    (logs / "1-solve.stdout").write_text("x")
    kept = agent_limits.keep_attempt_logs(logs, 2)
    assert kept == logs / "attempt-2" and (kept / "1-solve.stdout").read_text() == "x"
    assert sorted(p.name for p in logs.iterdir()) == ["attempt-1", "attempt-2"]


def test_once_the_budget_is_spent_no_new_agent_starts(project):
    # One agent at a time (-n 1): agents started side by side all run, whatever the budget.
    project.doit("run", "-n", "1", "tiny:fake", "max_cost=0.2")
    records = {i: project.read("fake", i, "agent.json") for i in ("tiny-add", "tiny-mul")}
    assert sorted(r["status"] for r in records.values()) == ["completed", "not_run"]
    (left,) = [r for r in records.values() if r["status"] == "not_run"]
    assert left["error"] == (
        "the run's budget max_cost=0.2 USD was spent (0.25 USD recorded) before this agent started"
    )
    assert left["cost_usd"] is None and left["phases"] == []
    assert len(project.agent_calls()) == 1
    # Not finished: a larger budget runs it, and the finished one is not run again.
    _, executed = project.doit("run", "tiny:fake", "max_cost=1")
    assert [t for t in executed if t.startswith("agent:")] == [
        f"agent:tiny/fake/{left['instance_id']}"
    ]
    assert project.read("fake", left["instance_id"], "agent.json")["status"] == "completed"
    assert len(project.agent_calls()) == 2
