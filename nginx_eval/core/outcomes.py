"""How a unit ended, in the words every stage and the report share: agent.json's status,
grade.json's status, and the outcome of a task in a mode (results.jsonl, report.json).

Outcome of a task in a mode (first match wins)::

    infra_error          the agent's run ended because the API or the network failed (after
                         its retries): not the model's answer, not scored
    contaminated         the fix reached the agent (agent/attempts.py): not its own answer, not
                         scored
    not_run              the run's budget (max_cost) was spent before the agent started: not
                         scored
    eval_error           (SWE-bench) the official harness could not evaluate the prediction (its
                         report's error_ids): not scored; only report/evaluation.py gives it
    resolved             the patch resolves the task (even after an agent timeout or failure)
    env_error            the tests could not say (skipped file, missing module): untrusted
    timeout              the agent hit its time limit
    agent_error          the agent failed (non-zero exit, workspace gone) or could not start
    patch_failed, compile_failed, partially_resolved, unresolved: grade.json's status
"""

from collections.abc import Mapping
from typing import Any

# agent.json "status" (agent/stage.py).
COMPLETED, FAILED, ERROR, TIMEOUT = "completed", "failed", "error", "timeout"
INFRA_ERROR, NOT_RUN = "infra_error", "not_run"
AGENT_STATUSES = (COMPLETED, FAILED, TIMEOUT, ERROR, INFRA_ERROR, NOT_RUN)
# Agent runs that are not finished, and what they mean: nothing of theirs is scored, and the
# outcome of their task is their status.
UNFINISHED_AGENT = {
    INFRA_ERROR: "the API or the network failed",
    NOT_RUN: "the run's budget (max_cost) was spent before it started",
}

# grade.json "status": the verdict of the patch alone (grade/stage.py).
GRADE_STATUSES = (
    "resolved",
    "partially_resolved",
    "unresolved",
    "patch_failed",
    "compile_failed",
    "env_error",
) + tuple(UNFINISHED_AGENT)

# Outcomes that say nothing of the model: outside a mode's denominator (rates, intervals,
# comparisons), counted apart.
CONTAMINATED = "contaminated"
EVAL_ERROR = "eval_error"
NOT_SCORED = tuple(UNFINISHED_AGENT) + (CONTAMINATED, EVAL_ERROR)
OUTCOMES = (
    "resolved",
    "partially_resolved",
    "unresolved",
    "compile_failed",
    "patch_failed",
    "timeout",
    "agent_error",
    "env_error",
) + NOT_SCORED
# Outcomes in which the run went wrong rather than the patch: the errors of a progress line.
RUN_ERRORS = ("env_error", "agent_error", "timeout")
# Outcomes the evaluation could not judge: SWE-bench's error instances (report.json).
NOT_JUDGED = ("env_error", "patch_failed") + NOT_SCORED


def outcome(row: Mapping[str, Any]) -> str:
    """The outcome of a results.jsonl row (or a row without the field, from its other fields)."""
    if row.get("agent_status") in UNFINISHED_AGENT:
        return row["agent_status"]
    if row.get("contaminated"):
        return CONTAMINATED
    if row.get("resolved"):
        return "resolved"
    if row.get("status") == "env_error":
        return "env_error"
    if row.get("agent_status") == TIMEOUT:
        return "timeout"
    if row.get("agent_status") in (FAILED, ERROR):
        return "agent_error"
    if row.get("status") in OUTCOMES:
        return row["status"]
    return "unresolved"
