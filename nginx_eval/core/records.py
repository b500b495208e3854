"""The JSON records the stages hand to each other, as types mypy checks: one TypedDict per file,
named after it (the module that writes it is named beside). The docstring of that module gives
the schema in short, or points here when the schema is long; then the comments here say what
each field means. Here in core/, so that every reader (the report too, which may not import the
stages) can name them. tests/test_record_schemas.py checks real records against them.

Every record the harness writes (write_record; a line of a .jsonl: versioned) carries
``format_version``: FORMAT_VERSION, the one version of all of them, raised when a record's format
changes so that an older nginx-eval cannot read it (a field renamed, removed, or its meaning
changed; a field added is no change). A record written before the field existed is of version 1
(record_version). read_record, used where records are read back (results, grade, report),
refuses a record of a later version in one line, naming the file. A record of ``{instance_id:
record}`` (the run's validation.json) has the version in each entry.
"""

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, TypeVar, cast

from . import jsonio
from .errors import UserError
from .outcomes import AgentStatus, BuildStatus, GradeStatus, OutcomeName

FORMAT_FIELD = "format_version"
FORMAT_VERSION = 1
UNVERSIONED = 1  # the version of a record written before format_version existed

R = TypeVar("R", bound=Mapping[str, object])


def versioned(record: R) -> R:
    """`record` with this nginx-eval's format version."""
    return cast(R, {**record, FORMAT_FIELD: FORMAT_VERSION})


def write_record(path: str | Path, record: "Record") -> None:
    """Write a record (jsonio.write_json: atomic, keys sorted) with its format version; only
    one of the record types below (Record), so that mypy checks every field a stage writes."""
    jsonio.write_json(path, versioned(record))


def record_version(path: str | Path, record: Mapping[str, Any]) -> int:
    """The format version that wrote `record` (read from `path`); UserError naming the file
    when it is one this nginx-eval cannot read."""
    version = record.get(FORMAT_FIELD, UNVERSIONED)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise UserError(f"format_version {version!r} is not a version (1, 2, ...)", file=path)
    if version > FORMAT_VERSION:
        raise UserError(
            f"written by format version {version}, this nginx-eval reads up to {FORMAT_VERSION}",
            file=path,
        )
    return version


def read_record(path: str | Path, default: Any = None) -> Any:
    """The record at `path` (jsonio.read_json: `default` when absent or not whole), after
    record_version has checked that this nginx-eval can read it."""
    data = jsonio.read_json(path, default)
    if isinstance(data, dict) and data is not default:
        record_version(path, data)
    return data


# -- workspace.json (workspace/stage.py; read by agent/ and patch/) ------------------------------


class WorkspaceStamp(TypedDict):
    """Layout.workspace_stamp: the workspace made for (mode, task), and whether an agent ran in
    it (alone when the workspace was made on a node: agent/stage.py, executor=ray)."""

    inputs: NotRequired[str]  # workspace/stage.py: workspace_inputs
    path: NotRequired[str]
    base_commit: NotRequired[str]
    # an agent ran in it (agent/stage.py): the next attempt makes it anew, and a workspace
    # without it is not the agent's (patch/stage.py)
    agent_started: bool


# -- build.json (build/stage.py) -------------------------------------------------------------------


class BuildFields(TypedDict):
    """What a build record holds before the build runs (build/stage.py: ensure_build)."""

    key: str  # build/cache.py: BuildSpec.key (base commit, flags, patch bytes, compiler, toolchain)
    kind: str | None  # "clean" | "incremental" | "sibling" | None
    seconds: float
    base_commit: str
    configure_flags: list[str]
    patch_sha256: str
    compiler: dict[str, str]  # build/toolchain.py: compiler_identity
    build_system: str | None


class BuildRecord(BuildFields):
    """``<cache>/builds/<key>/build.json``, and ``builds/.failed/<key>.json`` (with "pid")."""

    format_version: NotRequired[int]  # FORMAT_VERSION; absent: written before it, 1
    status: BuildStatus
    # user + system time of its steps and their children: what the build costs the machine,
    # whatever ran beside it; None: unknown
    cpu_seconds: NotRequired[float | None]
    binary_sha256: NotRequired[str]  # built only: sha256 of tree/objs/nginx
    # built only: [size, mtime_ns, ctime_ns] of the binary, a quick check that it is unchanged
    binary_stat: NotRequired[list[int]]
    reason: NotRequired[str]  # env_error only: one line
    pid: NotRequired[int]  # builds/.failed/ only


class BuildJson(BuildRecord):
    """A unit's ``build.json``: the build record, and how this unit came to it."""

    inputs: str
    binary: str
    reused: bool  # the build was in the cache
    wait_seconds: float  # for the build's lock and slots


# -- the toolchain (core/rootfs.py): in prove.json and run.json ----------------------------------


class ToolchainRecord(TypedDict):
    """Which toolchain made a verdict."""

    name: str  # "debian-12" (the pinned root filesystem), or "host" (the pin off)
    digest: str | None  # sha256 of the root filesystem's manifest; None for the host


# -- a SWE-bench task's environment in the agent's sandbox (agent/swe_view.py) -------------------


class SweEnvView(TypedDict):
    """What a SWE-bench task's built environment shows in the agent's sandbox (host paths, and
    where they are inside); pipeline.Context.swe_env gives it from the environment's build."""

    root: str  # the root filesystem whose /usr (and /etc files of the linker) replace the host's
    venv: str  # the venv, on the host
    venv_path: str  # its fixed path inside, as it was built (read-only)
    testbed: str  # where the workspace is shown too: the editable install imports from there
    path: list[str]  # directories put first on PATH inside (the venv's bin)
    env: dict[str, str]  # the environment's variables
    digest: str  # the key of what it shows: the task's install at its base commit (envs.py)
    python: str  # its Python's version, "3.9.2"
    package: str  # what the preflight imports (`python -c "import <package>"`)
    test_command: str  # how the task's tests run, without naming any (the prompt's)
    # files the install wrote into its checkout (setuptools_scm's _version.py, egg-info), copied
    # into the workspace before the agent starts, as the official image's /testbed has them
    testbed_files: str | None


class StandinsView(TypedDict):
    """The stand-ins for the internet a SWE-bench task's tests reach, as an attempt's sandbox
    runs them (swebench/services.py; agent/swe_view.py writes them into the phase's view)."""

    net: str  # the script that sets up the sandbox's private network (run by the host's root)
    mounts: list[list[str]]  # [host path, path inside], read-only
    over: list[list[str]]  # [host file, path in the checkout] bound over the checkout's file
    launcher: list[str]  # the argv prefix inside that starts the servers before the command
    direct: list[str]  # hosts the tests reach without a proxy (NO_PROXY inside)


class SweEnvRecord(TypedDict):
    """agent.json's "swe_env": the environment an agent's sandbox showed."""

    digest: str
    python: str


# -- prove.json (prove/stage.py) -------------------------------------------------------------------


class ProveRun(TypedDict):
    """The record of one run of a test file."""

    format_version: NotRequired[int]  # FORMAT_VERSION; absent: written before it, 1
    tap: str  # tap/<file>.tap, relative to the task's results
    stderr: str
    nginx_log: str  # what nginx run as a server wrote (prove/env.py's output guard)
    # "private": in a network namespace of its own (prove/network.py); "shared": on the
    # machine's network (no namespace here, or NGINX_EVAL_PRIVATE_NETWORK=0). Not an input.
    network: str
    exit_code: int | None
    timed_out: bool
    seconds: float
    # user + system time of prove and what it waited for (nginx); None: unknown or missing
    cpu_seconds: float | None
    missing: bool  # the file does not exist at the test commit


class ProveJson(TypedDict):
    format_version: NotRequired[int]  # FORMAT_VERSION; absent: written before it, 1
    inputs: str
    test_commit: str
    binary: str | None
    binary_key: str | None
    environment: dict[str, str]  # what the test process saw (prove/env.py), an input
    files: dict[str, ProveRun]
    # the same files run against the task's base build, paths under tap/reference/: those that
    # did not run to their end, or skipped a graded assertion (grade/stage.py decides)
    reference: dict[str, ProveRun]
    reference_key: str | None
    notes: list[str]  # e.g. a test tree found changed and extracted again
    # {"perl": `perl -e 'print $^V'`, "openssl": `openssl version`'s first line}, each None when
    # the program did not answer; None: no test ran. Not an input: the report names them.
    versions: dict[str, str | None] | None
    # the toolchain the tests ran in (core/rootfs.py); its digest is also an input
    toolchain: ToolchainRecord
    reruns: NotRequired[dict[str, ProveRun]]  # rerun_failed=1 only: tap/<file>.rerun.tap


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
    """The sanitizer builds both sides ran under (build keys), and the files that ran."""

    key: str
    reference_key: str
    files: list[str]  # the task's own files and the regression files


class StrictSeconds(TypedDict):
    """The stage's own time: wall time less its waits for build and prove slots (a mode waiting
    on another's runs of the same build counts that wait)."""

    builds: float  # making the sanitizer builds (or none: kept)
    runs: float  # running the test files, RUNS_AT_ONCE at a time
    total: float


class StrictFloor(TypedDict):
    """What judging the patch must cost: its sanitizer build's own time (when it was made) and
    one run of each of its test files."""

    build: float
    tests: float  # the sum of the files' first runs' wall time


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
    rerun: NotRequired[list[str]]
    regressions: NotRequired[list[str]]
    reference_not_passing: NotRequired[list[str]]
    candidate_flaky: NotRequired[list[str]]
    gold_only: NotRequired[list[str]]
    sanitizer: NotRequired[SanitizerPart | None]
    sanitizer_findings: NotRequired[list[Finding]]
    reference_reports: NotRequired[int]
    seconds: NotRequired[StrictSeconds]
    floor: NotRequired[StrictFloor]


class StrictJson(TypedDict):
    format_version: NotRequired[int]  # FORMAT_VERSION; absent: written before it, 1
    inputs: str
    strict: bool | None  # None: not judged, and `reason` says why
    reason: str
    retry: bool  # the environment stopped it: run again next time
    regressions: list[str]  # assertion ids: pass in every reference run, fail in every one of ours
    sanitizer_findings: list[Finding]
    reference: NotRequired[str]  # "gold" for a candidate, "base" for the gold patch
    # the plain builds' keys: the unit's own, and the reference's (made only when needed)
    reference_key: NotRequired[str]
    key: NotRequired[str]
    files: NotRequired[list[str]]  # the regression files (strict/stage.py: regression_files)
    # the regression files that ran a second time on both sides: their first candidate run
    # failed an assertion the reference's first run passed
    rerun: NotRequired[list[str]]
    reference_not_passing: NotRequired[list[str]]  # not passed in every reference run: not counted
    candidate_flaky: NotRequired[list[str]]  # failed once under the candidate: not counted
    # failed by the candidate, passed by gold but not by the base either: what only the
    # upstream fix adds, not counted
    gold_only: NotRequired[list[str]]
    # None: a sanitizer build could not be made, the plain builds judged the regressions
    sanitizer: NotRequired[SanitizerPart | None]
    reference_reports: NotRequired[int]  # sanitizer reports of the reference's first runs
    seconds: NotRequired[StrictSeconds]
    floor: NotRequired[StrictFloor]


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
    env_errors: list[str]  # why the environment, not the patch, decided
    file_failures: list[FileFailure]  # files the patch broke, decided by the base's run
    timed_out_files: list[str]
    skipped_assertions: list[str]  # graded ids that did not run: skipped


class Verdict(VerdictBase):
    """grade.grade's answer."""

    status: GradeStatus  # an unfinished agent's status is its own
    resolved: bool
    fail_to_pass: Split  # both empty when the agent did not finish: nothing was graded
    pass_to_pass: Split
    # only when prove.json has "reruns" (rerun_failed=1): both runs' result of each graded id,
    # the ids whose result differs, and the status the first runs alone would give
    reruns: NotRequired[dict[str, RerunResults]]
    changed_on_rerun: NotRequired[list[str]]
    first_run_status: NotRequired[str]


class StrictFields(TypedDict):
    """grade.json's strict verdict (grade/stage.py: strict_fields, from strict.json)."""

    # True: resolved, no regression, no sanitizer finding; False: not resolved, or either;
    # None: not judged (strict=0, a reference not built here, an unfinished agent)
    strict: bool | None
    strict_reason: str  # why not True ("" when True)
    regressions: list[str]
    sanitizer_findings: list[Finding]


class GradeJson(Verdict, StrictFields):
    format_version: NotRequired[int]  # FORMAT_VERSION; absent: written before it, 1
    inputs: str
    mode: str
    benchmark_version: NotRequired[str]  # the task file's version it was graded under


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
    format_version: NotRequired[int]  # FORMAT_VERSION; absent: written before it, 1
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
    seconds: float  # its sandbox start, with the preflight's checks run in it (selftest.py)
    checked: str  # UTC time, ISO 8601
    steps: list[SelfTestStep]
    failed: str | None


# -- run.json (run/record.py) ----------------------------------------------------------------------


class Selection(TypedDict):
    instances: list[str] | None
    limit: int | None
    predictions: NotRequired[str]


class RunJson(TypedDict):
    format_version: NotRequired[int]  # FORMAT_VERSION; absent: written before it, 1
    schema_version: int
    run: str
    benchmark: str
    benchmark_file: str  # relative to the project
    # of the benchmark the run's latest command used; each grade.json records the version it
    # was graded under, and the report warns when a run's results carry two
    benchmark_sha256: str
    benchmark_version: str | None
    harness_version: str
    created: str
    updated: str
    selections: list[Selection]
    task_ids: list[str]
    modes: list[str]
    toolchain: NotRequired[ToolchainRecord]  # absent in runs from before the pinned toolchain
    toolchains: NotRequired[list[ToolchainRecord]]
    sandbox_self_test: NotRequired[SelfTest]


# -- agent.json (agent/stage.py) -------------------------------------------------------------------


class Flag(TypedDict):
    """An attempt to look beyond the task, from a scan of its transcripts (agent/attempts.py)."""

    kind: str  # "fetch" | "web" | "outside_read" | "contamination"
    phase: str
    detail: str


class Blocked(TypedDict):
    """A connection the sandbox refused (agent/sandbox.py: blocked_connections)."""

    host: str
    port: int
    time: str  # UTC, as the debug log stamped it


class Tokens(TypedDict):
    """DISJOINT counts: input is the uncached input (Anthropic's sense, whatever the API)."""

    input: int
    output: int  # every billed output token, reasoning included
    cache_read: int
    cache_creation: int  # cache writes
    reasoning: NotRequired[int]  # the part of output that was reasoning (metered figures only)


# -- agent/calls.jsonl.gz (meter/proxy.py) ---------------------------------------------------------


class CallTokens(TypedDict):
    """A call's tokens in one vocabulary for every API, DISJOINT (meter/usage.py): Anthropic's
    counts as they are; OpenAI's and Gemini's cached tokens taken out of their input."""

    input: int
    output: int  # reasoning included (Gemini's thoughts added to its candidates)
    cache_read: int
    cache_write: int
    reasoning: int  # the part of output that was reasoning


class CallRecord(TypedDict):
    """A line of ``agent/calls.jsonl.gz``: one model call through the attempt's metering proxy.
    Its request and response are the line of the same ``call`` in ``calls.bodies.jsonl.gz``
    ({"call", "request": {"method", "path", "headers", "body"}, "response": {"status",
    "headers", "body"}}). No credential is in either: those headers and a query's key are
    "[redacted]", and their values are cut out of everything else."""

    format_version: NotRequired[int]  # FORMAT_VERSION; absent: written before it, 1
    call: int  # 1, 2, ... in the order the calls started
    run: str
    mode: str
    task: str
    attempt: int  # 1 for the first try of the agent run
    phase: str | None  # the phase running when the call started
    program: str  # from the API path: "claude" | "codex" | "gemini"
    api: str  # "anthropic" | "openai-responses" | "gemini"
    method: str
    path: str  # as the program sent it (query keys redacted)
    model: str | None  # the answer's model, else the request's
    stream: bool  # the request asked for a stream
    started: str  # UTC, ISO 8601 with milliseconds
    ended: str | None
    status: int | None  # the upstream's HTTP status, passed on unchanged; 502: unreachable
    first_byte_ms: float | None  # from the request's arrival to the upstream's first body byte
    seconds: float | None
    request_bytes: int
    response_bytes: int  # as received (compressed if the upstream compressed it)
    response_id: str | None  # the API's id of the answer (a transcript's message id)
    tokens: CallTokens | None  # None: no usage on the wire (an error, a probe, a count)
    cost_usd: float | None  # None: no usage, or no price for the model
    price_source: str | None  # "genai-prices 0.2.3 (anthropic/claude-sonnet-4-5)", or why none
    # The table's entry that priced it ("openai/gpt-5.2" for gpt-5.2-codex), and how it was found
    # (meter/pricing.py): "exact" (the model's own), "alias" (an entry naming the model among its
    # names), "pattern" (an entry whose prefix or regex takes it); None: unpriced
    priced_as: str | None
    price_match: str | None
    # "unfinished" (still open when the attempt ended), "stream cut: ...", "upstream
    # unreachable: ...", or the error type the API answered with
    error: str | None


class ModelMetered(CallTokens):
    program: str | None
    calls: int
    cost_usd: float | None
    unpriced_calls: int
    priced_as: str | None  # CallRecord's, of its priced calls (None: none priced)
    price_match: str | None


class Metered(TypedDict):
    """What the proxy counted (meter/summary.py: totals), for a phase or over an agent run."""

    calls: int
    billed_calls: int  # calls with usage
    unpriced_calls: int  # billed calls the price table had no price for
    cost_usd: float | None  # None when any billed call is unpriced: never a partial sum
    tokens: CallTokens
    models: dict[str, ModelMetered]


class MeteredRun(Metered):
    """agent.json's "metered": over every attempt."""

    price_table: str  # "genai-prices 0.2.3"
    self_reported_cost_usd: float | None  # what the program said of itself (Claude Code)
    # |metered - self-reported| / metered; over 0.01 the report warns. None: either unknown, or
    # no billed call went through the proxy (nothing metered to compare with)
    difference: float | None


class SelfReported(TypedDict):
    """The program's own figures (Claude Code's result or transcript), over every attempt."""

    cost_usd: float | None
    tokens: Tokens | None


class TestsTree(TypedDict):
    """A tests tree as of a base commit (suite/stage.py), and its stamp's head."""

    repo: str  # the test repository, owner/name
    commit: str  # its last commit not after the base commit's committer date
    date: str  # that commit's committer date, strict ISO 8601


class AgentTestsTree(TestsTree):
    notes: list[str]  # a note per attempt that found the tree changed and extracted it again


class LoopEnd(StrEnum):
    """How a loop phase ended (agent/loop.py)."""

    MARKER = "marker"  # the marker file held the marker line: the loop finished
    LIMIT = "limit"  # its `max` iterations ran without the marker
    NO_PROGRESS = "no_progress"  # `no_progress` iterations in a row changed nothing
    TIME = "time"  # the phase's time ran out
    ERROR = "error"  # a call failed (its status is the attempt's)


class LoopRecord(TypedDict):
    """A loop phase's run in one attempt (agent/loop.py)."""

    phase: str
    iterations: int  # calls made
    ended: LoopEnd
    commits: int  # iterations that changed something, each committed by the harness
    marker: bool  # the marker file held the marker line when the loop ended
    max: int


class AgentAttempt(TypedDict):
    """One try of an agent run; an earlier try's logs are moved to agent/attempt-<n>/."""

    status: str
    error: str
    cost_usd: float | None  # metered, else self-reported (AgentJson.cost_source)
    logs: str | None  # its logs' folder, relative to the task's results; None: its node was lost
    loop: NotRequired[LoopRecord | None]  # a mode with a loop phase: how its loop went
    calls: NotRequired[int]  # the model calls its proxy recorded


class ResultFields(TypedDict):
    """What a program's result states (agent/programs/: result_fields; None where it printed
    none: killed, or another agent), fields of agent.json's phase record (AgentPhase)."""

    session_id: str | None
    is_error: bool | None
    api_error_status: int | None
    terminal_reason: str | None
    permission_denials: list[Any] | None
    result: str | None
    num_turns: int | None


class AgentPhase(ResultFields):
    """One phase of the attempt agent.json records (with its program's ResultFields)."""

    name: str
    # what ran: $AGENT's words and the other variables' values put in (secret-looking names
    # stay as written), {prompt} shown as "$(cat <prompt file>)", the harness's
    # --disallowedTools=WebSearch,WebFetch in (agent/stage.py: phase_command)
    command: str
    command_template: str  # {model} filled, other placeholders as written
    model: str | None  # the mode's model if the command names {model}
    exit_code: int | None
    timed_out: bool
    wall_seconds: float
    stdout: str  # paths relative to the task's results
    stderr: str
    prompt_file: str
    # what the program said of itself (Claude Code's result, else its transcript)
    cost_usd: float | None
    tokens: Tokens | None
    models: dict[str, dict[str, Any]]  # {model: {"cost_usd", tokens...}}, subagents' too
    cost_source: str | None  # "result" | "transcript" | None
    metered: NotRequired[Metered]  # the proxy's calls made while the phase ran
    transcript: str | None  # "agent/<i>-<phase>.transcript.jsonl"
    blocked: list[Blocked] | None  # None: unisolated
    sandbox_log: str | None  # srt's debug log; its settings: agent/<i>-<phase>.srt.json
    # agent/phases.py: the program that ran; this record is a fallback's run; the fallback
    # that replaced this failed phase ("<program> <model>"); its group; its start and end in
    # seconds since the attempt began; its artifact (agent/artifacts/<phase>.md) and where that
    # came from (the workspace file, or "result"); in a loop (agent/loop.py), its iteration and
    # the commit the harness made of it (None: nothing changed)
    program: NotRequired[str | None]
    fallback: NotRequired[bool]
    replaced_by: NotRequired[str]
    group: NotRequired[str]
    started: NotRequired[float]
    ended: NotRequired[float]
    artifact: NotRequired[str]
    artifact_source: NotRequired[str | None]
    iteration: NotRequired[int]
    commit: NotRequired[str | None]


class AgentJson(TypedDict):
    format_version: NotRequired[int]  # FORMAT_VERSION; absent: written before it, 1
    inputs: str  # the digest of everything the run depends on (agent/stage.py: agent_inputs)
    mode: str
    instance_id: str
    status: AgentStatus
    # one line, for every status but "completed" ("" then): "phase solve: exit code 3",
    # "phase solve: timed out after <limit>", "phase solve: command not found (exit 127)",
    # "phase solve: exit code 1: API Error: 500 ...", ...
    error: str
    attempts: list[AgentAttempt]  # one per try, the last being this record's
    agent_version: str | None  # `<program> --version` of a Claude Code program
    wall_seconds: float  # the phases' own time, over every attempt
    phases: list[AgentPhase]  # the last attempt's
    # over phases and attempts, every model: the metered figures when the proxy saw calls and
    # priced them all, else the program's own (cost_source says which)
    cost_usd: float | None
    tokens: Tokens | None
    cost_source: NotRequired[str | None]  # "metered" | "self-reported" | None
    metered: NotRequired[MeteredRun | None]  # None: no agent ran (not_run)
    self_reported: NotRequired[SelfReported | None]
    trajectory: str | None  # "agent/trajectory.md"
    atif: NotRequired[str | None]  # "agent/trajectory.atif.json" (transcript/atif.py)
    isolation: str  # "srt" | "none" (the mode's isolation = "none")
    # what the agent built and tested with: the pinned toolchain its sandbox showed, or the
    # host's (unisolated, the pin off); not an input: a paid run is not repeated for it
    toolchain: NotRequired[ToolchainRecord]
    # Claude Code's WebSearch/WebFetch were open to the agent (web_tools = true, or
    # unisolated); None: no phase ran Claude Code
    web_tools: bool | None
    flags: list[Flag]  # every attempt's, "contamination" ones included
    contaminated: bool  # the fix reached the agent: the outcome is "contaminated"
    tests_tree: AgentTestsTree | None  # the nginx-tests tree the agent had (tests = "base")
    # a SWE-bench task's environment the sandbox showed; None: none built (or unisolated, or
    # an nginx task); not an input, as the toolchain
    swe_env: NotRequired[SweEnvRecord | None]
    loop: NotRequired[LoopRecord | None]  # the last attempt's loop (a mode with a loop phase)


class RemoteDiff(TypedDict):
    """With executor=ray, the diff of the workspace a node's agent changed (agent/stage.py:
    agent_unit; patch/stage.py: remote_agent_diff), patch/stage.py: workspace_diff's parts."""

    patch_base64: str
    skipped: list[SkippedFile]
    left_out: list[LeftOut]


class RemoteDiffJson(RemoteDiff):
    """Layout.remote_diff: a RemoteDiff, and the inputs of the agent.json it was taken for."""

    agent_inputs: str


# -- results.jsonl, predictions.jsonl (results/stage.py, swebench/stage.py) ------------------------


class PatchFigures(TypedDict):
    sha256: str | None
    files: list[str] | None
    lines_added: int | None
    lines_removed: int | None


class UnitFields(TypedDict):
    """A row's fields from agent.json, patch.json and build.json: a SWE-bench row is these."""

    format_version: NotRequired[int]  # FORMAT_VERSION; absent: written before it, 1
    instance_id: str
    mode: str
    run: str
    agent_status: str | None
    build_status: str | None
    agent_error: str | None  # agent.json's error: why the agent did not complete
    # agent.json's command_template per phase, [[phase, command]]: what ran (None: no agent)
    agent_commands: list[list[str]] | None
    agent_model: str | None  # agent.json's model (None: not passed, or no agent)
    agent_version: str | None
    trajectory: str | None  # relative to the task's results dir
    isolation: str | None  # agent.json's (None: no agent)
    # agent.json's; a record without the field: True for a Claude Code run, None otherwise
    web_tools: bool | None
    contaminated: bool
    flags: dict[str, int] | None  # agent.json's flags, counted by kind
    blocked: int | None  # connections the sandbox refused, every phase
    build_kind: str | None
    build_seconds: float | None
    agent_seconds: float | None
    cost_usd: float | None  # agent.json's: metered, else self-reported
    tokens: Tokens | None
    cost_source: NotRequired[str | None]  # agent.json's
    # the program's own cost (agent.json's metered.self_reported_cost_usd) and its relative
    # difference from the metered one; the report warns over 1%
    self_reported_cost_usd: NotRequired[float | None]
    cost_difference: NotRequired[float | None]
    patch: PatchFigures
    # the mode's `score` (run/modes.py: SCORES): "on_disk" or "finished"; None: no agent
    score: NotRequired[str | None]
    loop: NotRequired[LoopRecord | None]  # agent.json's loop
    # per call of the last attempt: name, program, model, seconds, cost_usd, fallback, loop
    # (a loop's iteration); None: no agent (report/workflow.py reads them)
    phase_figures: NotRequired[list[dict[str, Any]] | None]


class Counts(TypedDict):
    passed: int
    failed: int


class ResultRow(UnitFields):
    """A row of an nginx benchmark's results.jsonl."""

    benchmark_version: str | None  # grade.json's (None: unversioned)
    outcome: OutcomeName  # the vocabulary of report.json and report.md
    status: GradeStatus  # grade.json's verdict of the patch alone
    resolved: bool
    strict: bool | None
    strict_reason: str | None
    fail_to_pass: Counts
    pass_to_pass: Counts
    env_errors: list[str]
    first_run_status: NotRequired[str]  # only when the grade had reruns (rerun_failed=1)
    changed_on_rerun: NotRequired[list[str]]


class SwebenchRow(UnitFields):
    """A row of a SWE-bench benchmark's results.jsonl (swebench/stage.py): no grade here."""

    benchmark_version: str | None  # the task file's
    graded_by: str  # "swebench": the official harness's report decides
    # "infra_error" | "not_run" | "contaminated": the agent's run is not scored; else None
    outcome: str | None
    status: None
    resolved: None


class Prediction(TypedDict):
    """A predictions.jsonl row: what the official SWE-bench harness reads."""

    instance_id: str
    model_name_or_path: str
    model_patch: str


# -- validation.json (checks/validate.py) ----------------------------------------------------------


class BaseAndFix(TypedDict):
    base: Any
    fix: Any


class ValidationRun(TypedDict):
    seconds: float
    results: dict[str, bool]  # {assertion id: passed}


class ValidationFlake(TypedDict):
    """Each run graded as a patch is (checks/validate.py: flake_rates)."""

    gold_failures: int  # runs of the fix that failed a graded assertion
    gold_runs: int
    none_passes: int  # runs of the base that passed every graded assertion
    none_runs: int
    gold_failing: dict[str, int]  # {graded id: runs of the fix it failed}, the failing ones


class ValidationConditions(TypedDict):
    """What a validation ran under (checks/load.py): asked for, and sampled while it proved."""

    date: str  # YYYY-MM-DD, UTC, when its proves started
    repeats: int
    load: str  # "none" | "cpu"
    load_processes: int  # CPU-bound processes of load=cpu (one per core), else 0
    cores: int  # os.cpu_count()
    load_coverage: float | None  # share of samples with every load process alive; None: no load
    loadavg: float | None  # mean one-minute load average over its proves


class ValidationVerdict(TypedDict):
    """What a task's runs give (checks/validate.py: classify)."""

    verdict: str  # "valid" | "flaky" | "gold_fails" | "not_discriminating" | "env_error"
    reasons: list[str]
    admitted: bool  # valid, and the fix passed every graded assertion in every run
    not_admitted: list[str]  # why not: the fix's failing runs and assertions, or the verdict
    flake: ValidationFlake
    derived: dict[str, list[str]]  # {"fail_to_pass": [ids], "pass_to_pass": [ids]}
    declared_matches: bool
    missing_from_declared: list[str]
    not_derived: list[str]
    regressions: list[str]  # ids ok without the fix, failing with it
    flaky: list[str]
    unstable_base: list[str]  # ungraded ids that differ only without the fix
    pass_counts: BaseAndFix  # {"base": {id: runs it passed}, "fix": {id: n}}
    run_counts: BaseAndFix  # {"base": runs, "fix": runs}
    env_errors: list[str]


class ValidationRecord(ValidationVerdict):
    """A task's record in results/<run>/validation.json ({instance_id: record})."""

    format_version: NotRequired[int]  # FORMAT_VERSION; absent: written before it, 1
    instance_id: str
    repeats: int
    conditions: NotRequired[ValidationConditions]  # records from before load= have none
    test_seconds: BaseAndFix  # seconds of each side's runs in all
    build: BaseAndFix  # each side's build record


class ValidationJson(ValidationRecord):
    """results/<run>/validate/<id>/validation.json."""

    inputs: str
    runs: dict[str, list[ValidationRun]]  # {"base": [...], "fix": [...]}


# -- report.json, compare-<other>.json (report/stage.py, report/data.py) ---------------------------


class CostPerResolved(TypedDict):
    value: float | None
    # seeded bootstrap over tasks; [low, None]: unbounded (a resample without a resolved task)
    interval: list[float | None] | None


class AgentCommands(TypedDict):
    """One distinct command line of a mode's agents (agent.json's command_template)."""

    commands: list[list[str]]  # [[phase, command]]
    model: str | None
    instance_ids: list[str]


class ModeIsolation(TypedDict):
    isolated_instances: int
    unisolated_ids: list[str]
    web_tools_ids: list[str]
    blocked_connections: int
    blocked_ids: list[str]
    flagged_ids: list[str]
    contaminated_ids: list[str]


class SwebenchReportFields(TypedDict):
    """A mode's counts and ids under the names of SWE-bench's run report (report/data.py:
    swebench_report)."""

    total_instances: int  # the run's tasks, as every total_instances counts them
    submitted_instances: int
    completed_instances: int
    resolved_instances: int
    unresolved_instances: int
    empty_patch_instances: int
    # in SWE-bench's terms an instance the evaluation could not judge (outcomes.NOT_JUDGED)
    error_instances: int
    submitted_ids: list[str]
    completed_ids: list[str]
    incomplete_ids: list[str]  # no row in results.jsonl: not in a predictions file, not run yet
    resolved_ids: list[str]
    unresolved_ids: list[str]
    empty_patch_ids: list[str]
    error_ids: list[str]
    outcomes: dict[str, str]  # {instance_id: outcome}
    agent_commands: list[AgentCommands]  # [] for a mode without an agent


class NotScoredFigures(TypedDict):
    """Each not scored outcome's count and ids: <outcome>_instances, <outcome>_ids for each of
    outcomes.NOT_SCORED (tests/test_records.py keeps the two lists the same)."""

    infra_error_instances: int
    infra_error_ids: list[str]
    not_run_instances: int
    not_run_ids: list[str]
    contaminated_instances: int
    contaminated_ids: list[str]
    eval_error_instances: int
    eval_error_ids: list[str]


class AgentFigures(NotScoredFigures):
    """A mode with agents: the rate's denominator, the tasks it does not score, the CLI
    versions and the isolation of its runs (report/data.py: agent_json)."""

    scored_instances: int
    agent_versions: list[str]
    isolation: ModeIsolation


class RerunFigures(TypedDict):
    """Graded with rerun_failed=1 only: the tasks whose verdict a rerun changed."""

    verdict_changed_on_rerun_instances: int
    verdict_changed_on_rerun_ids: list[str]


class ReportMode(SwebenchReportFields):
    """A mode of report.json: SWE-bench's run report fields, then the report's figures."""

    outcome_counts: dict[str, int]  # {outcome: n}; the not scored ones: agent modes only
    # agent modes only (AgentFigures)
    scored_instances: NotRequired[int]
    infra_error_instances: NotRequired[int]
    infra_error_ids: NotRequired[list[str]]
    not_run_instances: NotRequired[int]
    not_run_ids: NotRequired[list[str]]
    contaminated_instances: NotRequired[int]
    contaminated_ids: NotRequired[list[str]]
    eval_error_instances: NotRequired[int]
    eval_error_ids: NotRequired[list[str]]
    agent_versions: NotRequired[list[str]]
    isolation: NotRequired[ModeIsolation]
    # graded with rerun_failed=1 only (RerunFigures)
    verdict_changed_on_rerun_instances: NotRequired[int]
    verdict_changed_on_rerun_ids: NotRequired[list[str]]
    resolved_rate: float | None  # resolved / scored tasks; None: none scored
    resolved_interval: list[float] | None  # Wilson
    strict_rate: float | None  # None: the run judged no strictness
    strict_interval: list[float] | None
    not_strict: list[dict[str, str]]  # [{"instance_id", "reason"}]
    strict_unjudged: list[dict[str, str]]
    cost_usd: float | None  # the mode's total
    cost_per_resolved: CostPerResolved
    # {"n", "total", "mean", "median", "min", "q1", "q3", "max"}, None each without agents
    agent_seconds: dict[str, float | None]


class Family(TypedDict):
    """A mode and its repeats (repeats = k in modes.toml)."""

    repeats: list[str]  # the modes
    resolved_rates: list[float | None]
    mean: float | None
    min: float | None
    max: float | None
    stdev: float | None
    pass_at_1: float | None
    pass_at_k: float | None
    k: int
    se: float | None  # the standard error clustered by task (report/stats.py: clustered_mean)
    interval: list[float] | None


class Arm(TypedDict):
    """What comparisons compare: a mode, or a family taken together."""

    modes: list[str]
    repeats: int
    rate: float | None
    interval: list[float] | None
    interval_method: str  # "wilson" | "clustered by task"
    cost_per_resolved: CostPerResolved


class Comparison(TypedDict):
    """A pair of arms; difference = rate(a) - rate(b) on the tasks both have results for."""

    a: str
    b: str
    method: str  # "mcnemar" (one run per task each) | "permutation" (repeats)
    tasks: int
    a_rate: float | None
    b_rate: float | None
    difference: float | None
    interval: list[float] | None
    interval_method: str  # "newcombe" | "bootstrap BCa" | ...
    p_value: float | None
    p_holm: float | None  # Holm's adjustment over all pairs
    detectable: float | None  # the smallest difference detected with 80% power
    sentence: str  # the comparison in words
    repeats_a: int
    repeats_b: int
    # mcnemar: the discordant counts
    both: NotRequired[int]
    a_only: NotRequired[int]
    b_only: NotRequired[int]
    neither: NotRequired[int]
    discordance: NotRequired[float]
    # permutation: per-task means compared
    a_better: NotRequired[int]
    b_better: NotRequired[int]
    ties: NotRequired[int]
    sd: NotRequired[float | None]
    # compare-<other>.json: "a" and "b" are the arm in the two runs
    arm: NotRequired[str]
    only_here: NotRequired[list[str]]
    only_other: NotRequired[list[str]]


class Undetectable(TypedDict):
    a: str
    b: str
    disagree: int
    tasks: int


class PowerSummary(TypedDict):
    power: float
    alpha: float
    tasks: int
    median_detectable: float | None
    min_detectable: float | None
    max_detectable: float | None
    comparisons: int
    estimable: int
    disagreeing: int  # pairs that disagree on some task
    undetectable: list[Undetectable]  # pairs that disagree and detect nothing


class BreakdownCell(TypedDict):
    arm: str
    resolved: int | None  # one run per task only
    tasks: int  # the group's tasks the arm scores
    rate: float | None
    interval: list[float] | None


class BreakdownGroup(TypedDict):
    label: str
    tasks: int
    cells: list[BreakdownCell]


class FixDateBreakdown(TypedDict):
    cutoff: str | None  # "YYYY-MM-DD", cutoff=
    groups: list[BreakdownGroup]


class Breakdowns(TypedDict):
    area: list[BreakdownGroup]
    tests: list[BreakdownGroup]  # label "nginx-tests" | "authored"; only sources with tasks
    fix_date: FixDateBreakdown


class ResultVersions(TypedDict):
    version: str | None
    modes: dict[str, int]  # {mode: tasks}


class SwebenchSection(TypedDict):
    """A SWE-bench run's grading (report/evaluation.py)."""

    evaluation_dir: str
    modes: list[dict[str, Any]]  # report/evaluation.py: Evaluation.modes


class ProcessBehaviour(TypedDict):
    """How often a mode's attempts did one thing (report/process.py's docstring)."""

    name: str  # "built" | "tested" | "failed_test_before_edit" | "edited"
    attempts: int  # the attempts that did it
    share: float | None  # of the mode's attempts
    resolved_with: float | None  # the resolved rate of the attempts that did it
    resolved_without: float | None  # ... and of those that did not
    p: float | None  # Fisher's exact test, two-sided (None: no test, a margin is 0)


class ProcessFirstEdit(TypedDict):
    """Seconds from an attempt's start to its first edit, over the attempts that edited."""

    attempts: int
    median: float | None
    median_resolved: float | None
    median_unresolved: float | None
    p: float | None  # Mann-Whitney U, resolved against unresolved, two-sided


class ModeProcess(TypedDict):
    name: str
    attempts: int  # scored tasks whose trajectory was read
    resolved: int
    behaviours: list[ProcessBehaviour]
    first_edit: ProcessFirstEdit


class ProcessSection(TypedDict):
    modes: list[ModeProcess]


class ReportJson(TypedDict):
    format_version: NotRequired[int]  # FORMAT_VERSION; absent: written before it, 1
    schema_version: int
    run: str
    benchmark: str
    benchmark_sha256: str
    benchmark_version: str | None  # None: unversioned
    # the versions the results were graded under, oldest first (report/data.result_versions)
    result_versions: list[ResultVersions]
    inputs: str  # the digest of what the report is made from (report/stage.py: report_inputs)
    tasks: list[str]  # the run's task ids: every total_instances counts these
    benchmark_tasks: int
    level: float  # report/stats.py: LEVEL, ALPHA, SEED
    alpha: float
    seed: int
    modes: dict[str, ReportMode]
    families: dict[str, Family]
    arms: dict[str, Arm]
    comparisons: list[Comparison]
    power: PowerSummary
    breakdowns: Breakdowns
    figures: list[str]  # the figure files report.md shows, beside it
    swebench: SwebenchSection | None
    cross: dict[str, Any] | None  # cross=RUN: report/cross.py's docstring
    # modes with several phases or a loop: per phase time and cost, loops, the users' ratios
    # (report/workflow.py's docstring)
    workflow: NotRequired[dict[str, Any]]
    # modes whose agents left trajectories: what they did, and its association with resolving
    process: NotRequired[ProcessSection]


class CompareArm(TypedDict):
    rate: float | None
    interval: list[float] | None
    interval_method: str
    repeats: int
    modes: list[str]
    commands: Any


class CompareJson(TypedDict):
    """compare-<other>.json (``doit run report run=A compare=B``; report/compare.py)."""

    format_version: NotRequired[int]  # FORMAT_VERSION; absent: written before it, 1
    schema_version: int
    inputs: str
    version: str  # the harness's
    run: str
    other: str
    benchmark: str
    benchmark_sha256: dict[str, str]  # {run: sha256}
    benchmark_version: dict[str, str | None]  # {run: version}, run.json's
    tasks: list[str]  # ids in both runs
    run_tasks: int
    other_tasks: int
    arms: dict[str, dict[str, CompareArm]]  # {arm: {"here": ..., "there": ...}}
    only: dict[str, list[str]]  # {"here": [arms], "there": [arms]}: in one run only
    # Arms with results in both runs but on no task both have results for: nothing to pair.
    unpaired: list[str]
    comparisons: list[Comparison]
    level: float
    alpha: float


# -- env.json (swebench/envs.py) -------------------------------------------------------------------


class EnvJson(TypedDict):
    """A SWE-bench task's environment as built (or why it is not)."""

    repo: str
    version: str  # the dataset's version of the repository: the spec's key
    environment_setup_commit: str  # the commit installed
    key: str  # <owner>+<name>-<version>-<digest>: its cache directory
    python: str  # the spec's Python, "3.9"
    suite: str | None  # the Debian suite it came from ("bullseye"...), "host", None: no Python
    rootfs_digest: str | None  # sha256 of that root filesystem's manifest; "host"
    spec_digest: str  # of the spec, the packages installed first, the setup commit, the builder
    spec: dict[str, Any] | None  # the swebench package's specification
    status: Literal["built", "not_built"]
    reason: str | None  # why not, in one line
    seconds: float  # the build's wall time
    bytes: int  # the environment's disk (the venv and the kept checkout files)


class InstanceJson(TypedDict):
    """A SWE-bench task's install at its base commit, over a copy of its environment's venv (the
    official instance image over its environment image), as built (or why it is not)."""

    env_key: str  # the environment it copies (EnvJson's key)
    base_commit: str  # the commit installed
    key: str  # <environment key>-<base commit's 12 hex>: its cache directory
    status: Literal["built", "not_built"]
    reason: str | None  # why not, in one line
    seconds: float  # the build's wall time (the copy and the install)
    bytes: int  # its disk (the venv and the kept checkout files)


class ServiceEnvJson(TypedDict):
    """The env.json of a service's venv (swebench/services.py: httpbin for psf/requests)."""

    status: Literal["built", "not_built"]
    reason: str | None


# -- local-verdict.json (swebench/verdict.py) ------------------------------------------------------


class LocalVerdictJson(TypedDict):
    """A SWE-bench unit's local verdict: graded here, labelled "local" beside the official."""

    instance_id: str
    mode: str
    env_key: str  # env.json's key
    # resolved | unresolved: graded; patch_failed: the patch does not apply (unresolved);
    # not_built: no environment here, no verdict (reason)
    status: Literal["resolved", "unresolved", "patch_failed", "not_built"]
    resolved: bool | None
    reason: str | None
    # swebench's report of the log: {"FAIL_TO_PASS": {"success": [...], "failure": [...]},
    # "PASS_TO_PASS": {...}}; None when nothing was run
    tests: dict[str, dict[str, list[str]]] | None
    test_command: str  # what ran in /testbed
    exit_code: int | None  # the eval script's
    timed_out: bool
    seconds: float
    patch_sha256: str  # of the patch graded


# The records write_record writes: a stage that builds one as a plain dict fails mypy.
Record = (
    BuildRecord
    | BuildJson
    | ProveRun
    | ProveJson
    | StrictJson
    | GradeJson
    | PatchJson
    | RunJson
    | AgentJson
    | ValidationRecord
    | ValidationJson
    | ReportJson
    | CompareJson
    | EnvJson
    | InstanceJson
    | ServiceEnvJson
    | LocalVerdictJson
)
