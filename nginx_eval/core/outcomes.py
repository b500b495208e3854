"""How a unit ended, in the words every stage and the report share: agent.json's status,
grade.json's status, and the outcome of a task in a mode (results.jsonl, report.json, report.md).

TABLE is the one list of outcomes: each one's name, its short form in report.md's per-task
matrix and the site, whether a mode's rates count it, and what it means. The README's table
"What the verdicts mean" is rendered from it (scripts/outcome_table.py; tests/test_docs.py
fails when they differ). outcome() decides a row's outcome.
"""

from collections.abc import Mapping
from typing import Any, Final, Literal, NamedTuple, TypeGuard, get_args

# The vocabularies below as types: a field that holds one is annotated with its type, and the
# tuples the code checks values against are read from these (one place for each word list).
# agent.json "status" (agent/stage.py).
AgentStatus = Literal["completed", "failed", "timeout", "error", "infra_error", "not_run"]
# grade.json "status": the verdict of the patch alone (grade/stage.py); an unfinished agent's
# status is its own.
GradeStatus = Literal[
    "resolved",
    "partially_resolved",
    "unresolved",
    "patch_failed",
    "compile_failed",
    "env_error",
    "infra_error",
    "not_run",
]
# build.json "status" (build/stage.py).
BuildStatus = Literal["built", "patch_failed", "compile_failed", "env_error"]
# The outcome of a task in a mode (TABLE below, in its order).
OutcomeName = Literal[
    "resolved",
    "partially_resolved",
    "unresolved",
    "compile_failed",
    "patch_failed",
    "timeout",
    "agent_error",
    "env_error",
    "infra_error",
    "not_run",
    "contaminated",
    "eval_error",
]

COMPLETED: Final = "completed"
FAILED: Final = "failed"
ERROR: Final = "error"
TIMEOUT: Final = "timeout"
INFRA_ERROR: Final = "infra_error"
NOT_RUN: Final = "not_run"
AGENT_STATUSES: tuple[AgentStatus, ...] = get_args(AgentStatus)
# Agent runs that are not finished, and what they mean: nothing of theirs is scored, and the
# outcome of their task is their status.
UnfinishedStatus = Literal["infra_error", "not_run"]
UNFINISHED_AGENT: dict[UnfinishedStatus, str] = {
    INFRA_ERROR: "the API or the network failed",
    NOT_RUN: "the run's budget (max_cost) was spent before it started",
}


def is_agent_status(status: object) -> TypeGuard[AgentStatus]:
    """Whether `status` is one an agent.json may record (an attempt's may also be a program's
    refused credentials, which stop the run before a record is written)."""
    return status in AGENT_STATUSES


def is_unfinished(status: object) -> TypeGuard[UnfinishedStatus]:
    """Whether an agent.json status is one of UNFINISHED_AGENT's."""
    return status in UNFINISHED_AGENT


RESOLVED: Final = "resolved"
PARTIALLY_RESOLVED: Final = "partially_resolved"
UNRESOLVED: Final = "unresolved"
PATCH_FAILED: Final = "patch_failed"
COMPILE_FAILED: Final = "compile_failed"
ENV_ERROR: Final = "env_error"
BUILT: Final = "built"  # build.json's status of a build that made nginx
GRADE_STATUSES: tuple[GradeStatus, ...] = get_args(GradeStatus)
# Outcomes of a task that are neither an agent's status nor a grade's.
AGENT_ERROR: Final = "agent_error"
CONTAMINATED: Final = "contaminated"
EVAL_ERROR: Final = "eval_error"


class Outcome(NamedTuple):
    """One outcome of a task in a mode."""

    name: OutcomeName
    cell: str  # its short form in report.md's per-task matrix and the site's
    scored: bool  # False: outside a mode's denominator (rates, intervals, comparisons)
    meaning: str


# In the order of the report's columns. A meaning is one line of the README's table.
TABLE = (
    Outcome(
        "resolved",
        "PASS",
        True,
        "every fail_to_pass and pass_to_pass assertion passes (even after a timeout)",
    ),
    Outcome("partially_resolved", "PART", True, "some but not all fail_to_pass assertions pass"),
    Outcome(
        "unresolved",
        "FAIL",
        True,
        "otherwise; also a tampered TAP stream or a file the patch kept from running",
    ),
    Outcome("compile_failed", "CF", True, "the patched tree does not build where the base builds"),
    Outcome(
        "patch_failed", "PF", True, "the patch does not apply, or reaches outside the source tree"
    ),
    Outcome(
        "timeout",
        "TO",
        True,
        "the agent hit its time limit (and its patch does not resolve the task)",
    ),
    Outcome("agent_error", "ERR", True, "the agent failed or could not start"),
    Outcome(
        "env_error",
        "ENV",
        True,
        "the tests could not say (a test file the base cannot run either, a missing tool): "
        "untrusted, never kept, run again next time",
    ),
    Outcome(INFRA_ERROR, "INFRA", False, "the API or the network failed after every retry"),
    Outcome(
        NOT_RUN,
        "BUDGET",
        False,
        "the run's `max_cost=` budget was spent before the agent started",
    ),
    Outcome(CONTAMINATED, "CONTAM", False, "the fix reached the agent (see Isolation)"),
    Outcome(
        EVAL_ERROR,
        "EVAL",
        False,
        "SWE-bench's official harness could not evaluate the patch",
    ),
)
OUTCOMES: tuple[OutcomeName, ...] = tuple(o.name for o in TABLE)
# Outcomes that say nothing of the model: outside a mode's denominator, counted apart.
NOT_SCORED: tuple[OutcomeName, ...] = tuple(o.name for o in TABLE if not o.scored)
# Outcomes in which the run went wrong rather than the patch: the errors of a progress line.
RUN_ERRORS: tuple[OutcomeName, ...] = (ENV_ERROR, AGENT_ERROR, TIMEOUT)
# Outcomes the evaluation could not judge: SWE-bench's error instances (report.json).
NOT_JUDGED: tuple[OutcomeName, ...] = (ENV_ERROR, PATCH_FAILED) + NOT_SCORED


def outcome(row: Mapping[str, Any]) -> OutcomeName:
    """The outcome of a results.jsonl row (or a row without the field, from its other fields).

    First match wins: an unfinished agent (infra_error, not_run), contaminated, resolved (even
    after an agent timeout or failure), env_error, timeout, agent_error, then grade.json's status.
    eval_error is report/evaluation.py's, from the official harness's report.
    """
    if row.get("agent_status") in UNFINISHED_AGENT:
        return row["agent_status"]
    if row.get("contaminated"):
        return CONTAMINATED
    if row.get("resolved"):
        return RESOLVED
    if row.get("status") == ENV_ERROR:
        return ENV_ERROR
    if row.get("agent_status") == TIMEOUT:
        return TIMEOUT
    if row.get("agent_status") in (FAILED, ERROR):
        return AGENT_ERROR
    if row.get("status") in OUTCOMES:
        return row["status"]
    return UNRESOLVED
