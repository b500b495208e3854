"""The JSON records the stages hand to each other, as types mypy checks: one TypedDict per file,
named after it. The schema and what each field means are in the docstring of the module that
writes the file (named below); what a reader may rely on is here. Here in core/, so that every
reader (the report too, which may not import the stages) can name them.
"""

from typing import NotRequired, TypedDict

# -- build.json (build/stage.py) -------------------------------------------------------------------


class BuildFields(TypedDict):
    """What a build record holds before the build runs (build/stage.py: ensure_build)."""

    key: str
    kind: str | None  # "clean" | "incremental" | "sibling" | None
    seconds: float
    base_commit: str
    configure_flags: list[str]
    patch_sha256: str
    compiler: dict[str, str]  # build/toolchain.py: compiler_identity
    build_system: str | None


class BuildRecord(BuildFields):
    """``<cache>/builds/<key>/build.json``, and ``builds/.failed/<key>.json`` (with "pid")."""

    status: str  # "built" | "patch_failed" | "compile_failed" | "env_error"
    cpu_seconds: NotRequired[float | None]
    binary_sha256: NotRequired[str]  # built only
    binary_stat: NotRequired[list[int]]  # built only: [size, mtime_ns, ctime_ns]
    reason: NotRequired[str]  # env_error only
    pid: NotRequired[int]  # builds/.failed/ only


class BuildJson(BuildRecord):
    """A unit's ``build.json``: the build record, and how this unit came to it."""

    inputs: str
    binary: str
    reused: bool
    wait_seconds: float


# -- prove.json (prove/stage.py) -------------------------------------------------------------------


class ProveRun(TypedDict):
    """The record of one run of a test file."""

    tap: str
    stderr: str
    nginx_log: str
    network: str  # "private" | "shared"
    exit_code: int | None
    timed_out: bool
    seconds: float
    cpu_seconds: float | None
    missing: bool


class ProveJson(TypedDict):
    inputs: str
    test_commit: str
    binary: str | None
    binary_key: str | None
    environment: dict[str, str]
    files: dict[str, ProveRun]
    reference: dict[str, ProveRun]
    reference_key: str | None
    notes: list[str]
    versions: dict[str, str | None] | None
    reruns: NotRequired[dict[str, ProveRun]]  # rerun_failed=1 only


# -- strict.json (strict/stage.py, strict/sanitizer.py) --------------------------------------------


class Finding(TypedDict):
    """A sanitizer report the reference does not have (strict/sanitizer.py)."""

    tool: str
    kind: str
    frame: str | None
    file: str
    files: list[str]
    report: str


class SanitizerPart(TypedDict):
    key: str
    reference_key: str
    files: list[str]


class StrictSeconds(TypedDict):
    regressions: float
    sanitizer: float
    total: float


class StrictBuilds(TypedDict):
    """The builds a patch's strictness is judged by (build keys)."""

    reference: str  # "gold" | "base"
    reference_key: str
    key: str


class StrictJudgement(StrictBuilds):
    """strict.json's fields that judging a patch gives (strict/stage.py: judge)."""

    strict: bool | None
    reason: str
    retry: bool
    files: NotRequired[list[str]]
    runs: NotRequired[int]
    regressions: NotRequired[list[str]]
    reference_not_passing: NotRequired[list[str]]
    candidate_flaky: NotRequired[list[str]]
    gold_only: NotRequired[list[str]]
    sanitizer: NotRequired[SanitizerPart]
    sanitizer_findings: NotRequired[list[Finding]]
    reference_reports: NotRequired[int]
    seconds: NotRequired[StrictSeconds]


class StrictJson(TypedDict):
    inputs: str
    strict: bool | None
    reason: str
    retry: bool
    regressions: list[str]
    sanitizer_findings: list[Finding]
    reference: NotRequired[str]
    reference_key: NotRequired[str]
    key: NotRequired[str]
    files: NotRequired[list[str]]
    runs: NotRequired[int]
    reference_not_passing: NotRequired[list[str]]
    candidate_flaky: NotRequired[list[str]]
    gold_only: NotRequired[list[str]]
    sanitizer: NotRequired[SanitizerPart]
    reference_reports: NotRequired[int]
    seconds: NotRequired[StrictSeconds]


# -- grade.json (grade/stage.py) -------------------------------------------------------------------


class Split(TypedDict):
    passed: list[str]
    failed: list[str]


class FileFailure(TypedDict):
    file: str
    kind: str  # "tampered" | "not_started" | "died" | "skipped" | "killed"
    reason: str


class RerunResults(TypedDict):
    first: dict[str, bool]
    rerun: dict[str, bool]


class RerunFields(TypedDict):
    reruns: dict[str, RerunResults]
    changed_on_rerun: list[str]
    first_run_status: str


class VerdictBase(TypedDict):
    """What a verdict records of the files before its status (grade/stage.py: _verdict)."""

    instance_id: str
    agent_status: str | None
    build_status: str
    env_errors: list[str]
    file_failures: list[FileFailure]
    timed_out_files: list[str]
    skipped_assertions: list[str]


class Verdict(VerdictBase):
    """grade.grade's answer."""

    status: str  # core/outcomes.py: GRADE_STATUSES
    resolved: bool
    fail_to_pass: Split
    pass_to_pass: Split
    reruns: NotRequired[dict[str, RerunResults]]  # rerun_failed=1 only, as RerunFields
    changed_on_rerun: NotRequired[list[str]]
    first_run_status: NotRequired[str]


class StrictFields(TypedDict):
    """grade.json's strict verdict (grade/stage.py: strict_fields)."""

    strict: bool | None
    strict_reason: str
    regressions: list[str]
    sanitizer_findings: list[Finding]


class GradeJson(Verdict, StrictFields):
    inputs: str
    mode: str
    benchmark_version: NotRequired[str]


# -- patch.json (patch/stage.py) -------------------------------------------------------------------


class SkippedFile(TypedDict):
    path: str
    bytes: int


class LeftOut(TypedDict):
    path: str
    files: int
    reason: str  # "harness file" | "build output"


class PatchStats(TypedDict):
    files: list[str]
    lines_added: int
    lines_removed: int
    binary: bool


class PatchJson(PatchStats):
    inputs: str
    source: str  # "workspace" | "gold" | "none" | "predictions"
    sha256: str
    bytes: int
    skipped_files: list[SkippedFile]
    left_out: list[LeftOut]
    note: str


# -- the sandbox self-test (agent/selftest.py), kept in run.json -----------------------------------


class SelfTestStep(TypedDict):
    step: str
    ok: bool
    detail: str


class SelfTest(TypedDict):
    ok: bool
    seconds: float
    checked: str  # UTC time, ISO 8601
    steps: list[SelfTestStep]
    failed: str | None


# -- run.json (run/record.py) ----------------------------------------------------------------------


class Selection(TypedDict):
    instances: list[str] | None
    limit: int | None
    predictions: NotRequired[str]


class RunJson(TypedDict):
    schema_version: int
    run: str
    benchmark: str
    benchmark_file: str
    benchmark_sha256: str
    benchmark_version: str | None
    harness_version: str
    created: str
    updated: str
    selections: list[Selection]
    task_ids: list[str]
    modes: list[str]
    sandbox_self_test: NotRequired[SelfTest]
