"""Stage 7, grade: a pure function from TAP output and a task to a verdict.

Assertion ids are ``"<file>:<number> <description>"`` (prove/tap.py). Resolved: every fail_to_pass
and pass_to_pass assertion printed ``ok`` (``not ok ... # TODO`` and an assertion that did not run
fail). The rules: docs/verdicts.md#grade; those that decide whose fault a failure is:

- a tampered TAP stream, and one whose test file a signal killed (not at its time limit),
  fails its graded assertions (prove/tap.py: counted_results): ``unresolved``;
- a file that did not run to its end, or skipped a graded assertion, is judged by the reference
  run of the unpatched base build (prove/stage.py): if the base runs it, the patch broke nginx
  (``file_failures``); only when the base cannot either is it an environment error;
- a file missing at the test commit, and a build failed by the environment, are environment
  errors; a prove killed by a signal (not at its time limit) is the patch's fault (``killed``)
  when the base's run ends normally; a file killed at its time limit keeps what it printed;
- a file run a second time (``rerun_failed=1``) is judged by its rerun alone, both runs recorded;
- an agent run that did not finish (``infra_error``, ``not_run``) has no verdict of its own: the
  agent's status, no graded assertion, not judged strict, not scored.

``grade.json`` (core/records.py: GradeJson, where each field is explained)::

    {"inputs", "instance_id", "mode", "benchmark_version", "status", "resolved",
     "fail_to_pass": {"passed", "failed"}, "pass_to_pass": {...}, "env_errors", "file_failures",
     "timed_out_files", "skipped_assertions", "agent_status", "build_status",
     "reruns", "changed_on_rerun", "first_run_status",          # rerun_failed=1 only
     "strict", "strict_reason", "regressions", "sanitizer_findings"}   # strict/stage.py's
"""

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import inputs, stamps
from ..core.errors import failing_on_user_error
from ..core.outcomes import (
    BUILT,
    ENV_ERROR,
    UNFINISHED_AGENT,
    AgentStatus,
    BuildStatus,
    GradeStatus,
    is_unfinished,
)
from ..core.records import (
    BuildJson,
    FileFailure,
    GradeJson,
    ProveJson,
    ProveRun,
    RerunFields,
    RerunResults,
    Split,
    StrictFields,
    StrictJson,
    Verdict,
    VerdictBase,
    read_record,
    write_record,
)
from ..core.stamps import TaskDict
from ..core.tasknames import AGENT, BUILD, GRADE, PROVE, STRICT, task_name, unit_name
from ..prove.tap import (
    FileResult,
    Problem,
    assertion_number,
    counted_results,
    file_problem,
    parse_tap,
)
from ..run.modes import AgentMode, NoneMode
from ..strict.stage import applies, switched_off

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..run.benchmark import Task
    from ..run.context import StageContext

# A prove.json record of a file's run, or {"missing": True} for a file prove.json lacks.
RunRecord = Mapping[str, Any]
# The base build's reference run of a file: (its record, what prove -v printed).
Reference = tuple[ProveRun, str]


def base_runs(ref: tuple[FileResult, RunRecord] | None, graded: Sequence[str]) -> bool:
    """Whether the base build's reference run (FileResult, record) ran the file to its end and
    every graded assertion in it."""
    if ref is None:
        return False
    fr, record = ref
    return file_problem(fr, record) is None and all(fr.ran(i) for i in graded)


PATCH_FAULT = {
    "tampered": "{text}",
    "not_started": "nginx did not start: {text}; the base build runs it",
    "died": "test file died: {text}; the base build runs it",
    "skipped": "graded assertion(s) skipped: {text}; the base build runs them",
    "killed": "{text}; the base build runs the file to its end",
}


def judge_file(
    file: str,
    fr: FileResult,
    record: RunRecord,
    graded: Sequence[str],
    ref: tuple[FileResult, RunRecord] | None,
) -> tuple[str | None, FileFailure | None]:
    """(env error or None, file failure or None) of one file: see the module docstring."""
    problem = file_problem(fr, record)
    if problem is None:
        skipped = [i for i in graded if assertion_number(i) in fr.skipped]
        if skipped:
            reasons = sorted({fr.skipped[assertion_number(i)] for i in skipped})
            problem = Problem("skipped", f"{', '.join(skipped[:3])} ({'; '.join(reasons)})")
    if problem is None:
        return None, None
    if problem.kind != "env" and base_runs(ref, graded):
        return None, {
            "file": file,
            "kind": problem.kind,
            "reason": PATCH_FAULT[problem.kind].format(text=problem.text),
        }
    if problem.kind == "tampered":
        return f"{file}: {problem.text}, also without the patch", None
    return f"{file}: {problem.text}", None


def split(ids: Sequence[str], results: Mapping[str, bool]) -> Split:
    passed = [i for i in ids if results.get(i) is True]
    return {"passed": passed, "failed": [i for i in ids if results.get(i) is not True]}


def _without_tests(verdict: VerdictBase, task: "Task", status: GradeStatus) -> Verdict:
    """The verdict `status` when no test result counts: no graded assertion passed."""
    return {
        **verdict,
        "status": status,
        "resolved": False,
        "fail_to_pass": {"passed": [], "failed": list(task.fail_to_pass)},
        "pass_to_pass": {"passed": [], "failed": list(task.pass_to_pass)},
    }


def grade(
    task: "Task",
    build_status: BuildStatus,
    prove_files: Mapping[str, ProveRun],
    tap_texts: Mapping[str, str],
    agent_status: AgentStatus | None = None,
    reference: Mapping[str, Reference] | None = None,
    build_reason: str | None = None,
    reruns: Mapping[str, Reference] | None = None,
) -> Verdict:
    """The verdict of one task. tap_texts: {file: prove -v stdout}; prove_files: prove.json's
    records; reference and reruns: {file: (record, prove -v stdout)} of the base build's runs
    and of the files run a second time (None: rerun_failed was off)."""
    rerun_records = {f: rec for f, (rec, _) in (reruns or {}).items()}
    rerun_texts = {f: text for f, (_, text) in (reruns or {}).items()}
    verdict = _verdict(
        task,
        build_status,
        {**prove_files, **rerun_records},
        {**tap_texts, **rerun_texts},
        agent_status,
        reference,
        build_reason,
    )
    if reruns is None:
        return verdict
    first = _verdict(
        task, build_status, prove_files, tap_texts, agent_status, reference, build_reason
    )
    return {
        **verdict,
        **rerun_fields(
            task, (prove_files, tap_texts), (rerun_records, rerun_texts), first["status"]
        ),
    }


def graded_passes(task: "Task", file: str, text: str, record: RunRecord) -> dict[str, bool]:
    """{graded id of `file`: whether it passed} in one prove -v stream and its record (the
    assertions that count: tap.counted_results)."""
    counted = counted_results(parse_tap(file, text), record)
    return {
        i: counted.get(i) is True
        for i in list(task.fail_to_pass) + list(task.pass_to_pass)
        if i.startswith(f"{file}:")
    }


def rerun_fields(
    task: "Task",
    first_runs: tuple[Mapping[str, RunRecord], Mapping[str, str]],
    reruns: tuple[Mapping[str, RunRecord], Mapping[str, str]],
    first_status: str,
) -> RerunFields:
    """grade.json's record of the reruns: both runs' results, and what changed. first_runs and
    reruns: ({file: record}, {file: prove -v stdout})."""
    (first_records, first_texts), (rerun_records, rerun_texts) = first_runs, reruns
    runs: dict[str, RerunResults] = {
        f: {
            "first": graded_passes(
                task, f, first_texts.get(f, ""), first_records.get(f, {"missing": True})
            ),
            "rerun": graded_passes(task, f, text, rerun_records[f]),
        }
        for f, text in rerun_texts.items()
    }
    changed = [
        i for run in runs.values() for i in run["first"] if run["first"][i] != run["rerun"][i]
    ]
    return {"reruns": runs, "changed_on_rerun": changed, "first_run_status": first_status}


def _verdict(
    task: "Task",
    build_status: BuildStatus,
    prove_files: Mapping[str, ProveRun],
    tap_texts: Mapping[str, str],
    agent_status: AgentStatus | None,
    reference: Mapping[str, Reference] | None,
    build_reason: str | None,
) -> Verdict:
    """grade() for one stream per file."""
    verdict: VerdictBase = {
        "instance_id": task.instance_id,
        "agent_status": agent_status,
        "build_status": build_status,
        "env_errors": [],
        "file_failures": [],
        "timed_out_files": [],
        "skipped_assertions": [],
    }
    if is_unfinished(agent_status):
        # No verdict to give: the agent did not finish, and its (empty) patch is not its answer.
        return {
            **verdict,
            "status": agent_status,
            "resolved": False,
            "fail_to_pass": {"passed": [], "failed": []},
            "pass_to_pass": {"passed": [], "failed": []},
        }
    if build_status != BUILT:
        if build_status == ENV_ERROR:
            verdict["env_errors"].append(f"build: {build_reason or 'failed in this environment'}")
        return _without_tests(verdict, task, build_status)
    results = _judge_files(task, prove_files, tap_texts, reference, verdict)
    f2p, p2p = split(task.fail_to_pass, results), split(task.pass_to_pass, results)
    resolved = not f2p["failed"] and not p2p["failed"] and not verdict["env_errors"]
    tampered = any(f["kind"] == "tampered" for f in verdict["file_failures"])
    status: GradeStatus
    if verdict["env_errors"]:
        status = "env_error"
    elif resolved:
        status = "resolved"
    elif f2p["passed"] and not tampered:
        status = "partially_resolved"
    else:
        status = "unresolved"
    return {
        **verdict,
        "status": status,
        "resolved": resolved,
        "fail_to_pass": f2p,
        "pass_to_pass": p2p,
    }


def _judge_files(
    task: "Task",
    prove_files: Mapping[str, ProveRun],
    tap_texts: Mapping[str, str],
    reference: Mapping[str, Reference] | None,
    verdict: VerdictBase,
) -> dict[str, bool]:
    """{assertion id: passed} of every file; adds each file's env errors, failures, time-outs
    and skips to `verdict`."""
    graded_ids = list(task.fail_to_pass) + list(task.pass_to_pass)
    results: dict[str, bool] = {}
    for file in task.test_files:
        record: RunRecord = prove_files.get(file, {"missing": True})
        fr = parse_tap(file, tap_texts.get(file, ""))
        graded = [i for i in graded_ids if i.startswith(f"{file}:")]
        ref = (reference or {}).get(file)
        env_error, failure = judge_file(
            file, fr, record, graded, ref and (parse_tap(file, ref[1]), ref[0])
        )
        if env_error:
            verdict["env_errors"].append(env_error)
        if failure:
            verdict["file_failures"].append(failure)
        if record.get("timed_out"):
            verdict["timed_out_files"].append(file)
        verdict["skipped_assertions"] += [i for i in graded if assertion_number(i) in fr.skipped]
        results.update(counted_results(fr, record))
    return results


def read_texts(tap_dir: Path, records: Mapping[str, ProveRun]) -> dict[str, str]:
    """{file: the stdout prove printed} for prove.json records (a missing file reads as "")."""
    texts = {}
    for file, rec in records.items():
        path = tap_dir / rec["tap"] if rec.get("tap") else None
        texts[file] = path.read_text(errors="replace") if path and path.exists() else ""
    return texts


def grade_records(
    task: "Task",
    build: BuildJson,
    prove: ProveJson,
    agent: Mapping[str, Any] | None,
    tap_dir: Path,
) -> Verdict:
    """grade() of what a unit's stages wrote: its build.json, prove.json, agent.json (None: the
    mode runs no agent) and the test output prove.json names in `tap_dir`."""
    texts = read_texts(tap_dir, prove["files"])
    references = prove.get("reference") or {}
    reference_texts = read_texts(tap_dir, references)
    reruns = prove.get("reruns")  # absent: rerun_failed was off
    rerun_texts = read_texts(tap_dir, reruns or {})
    return grade(
        task,
        build["status"],
        prove["files"],
        texts,
        agent_status=agent["status"] if agent else None,
        reference={f: (rec, reference_texts[f]) for f, rec in references.items()},
        build_reason=build.get("reason"),
        reruns=None if reruns is None else {f: (rec, rerun_texts[f]) for f, rec in reruns.items()},
    )


def grade_task(
    layout: "Layout", mode_name: str, task: "Task", config: dict[str, Any], files: list[str]
) -> None:
    inputs = stamps.inputs_digest(config, files)
    out = layout.grade_json(mode_name, task.instance_id)
    iid = task.instance_id
    verdict = grade_records(
        task,
        read_record(layout.build_json(mode_name, iid)),
        read_record(layout.prove_json(mode_name, iid)),
        read_record(layout.agent_json(mode_name, iid)),
        layout.tap_dir(mode_name, iid),
    )
    strict: StrictJson | None = (
        read_record(layout.strict_json(mode_name, iid)) if config.get("strict") else None
    )
    record: GradeJson = {
        **verdict,
        **strict_fields(verdict, config.get("strict"), strict, config.get("strict_off")),
        "inputs": inputs,
        "mode": mode_name,
    }
    if "benchmark_version" in config:
        record["benchmark_version"] = config["benchmark_version"]
    write_record(out, record)


def strict_fields(
    verdict: Verdict, judged: object, record: StrictJson | None, off: str | None = None
) -> StrictFields:
    """grade.json's strict verdict from the strict stage's record (judged: the stage ran for
    this unit; record: its strict.json; off: the variable that left it unjudged,
    strict_stage.switched_off)."""
    fields: StrictFields = {
        "strict": False,
        "strict_reason": "",
        "regressions": [],
        "sanitizer_findings": [],
    }
    if verdict["status"] in UNFINISHED_AGENT:
        return {
            **fields,
            "strict": None,
            "strict_reason": f"not scored: {UNFINISHED_AGENT[verdict['status']]}",
        }
    if not verdict["resolved"]:
        return {**fields, "strict_reason": "not resolved"}
    if not judged:
        return {**fields, "strict": None, "strict_reason": f"not judged ({off or 'strict=0'})"}
    if not record:
        return {**fields, "strict": None, "strict_reason": "no strict record"}
    return {
        **fields,
        "strict": record.get("strict"),
        "strict_reason": record.get("reason", ""),
        "regressions": record.get("regressions", []),
        "sanitizer_findings": record.get("sanitizer_findings", []),
    }


# grade's optional inputs at the value that leaves them out (core/inputs.py): strictness judged,
# an unversioned benchmark.
GRADE_INPUT_DEFAULTS: dict[str, Any] = {"strict_off": None, "benchmark_version": None}


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    for bench, mode, task in ctx.units():
        name = unit_name(bench, mode, task)
        iid = task.instance_id
        judged = applies(ctx, mode)
        fields: dict[str, Any] = {
            "f2p": list(task.fail_to_pass),
            "p2p": list(task.pass_to_pass),
            "files": list(task.test_files),
            "strict": judged,
            # what left it unjudged (None: judged), for every patch but the empty one
            "strict_off": None if isinstance(mode, NoneMode) else switched_off(ctx, mode),
            # A new version grades again (milliseconds; nothing before the grade reruns unless
            # its own inputs changed), so every grade.json names the version it holds for.
            "benchmark_version": bench.version,
        }
        config = inputs.canonical(fields, GRADE_INPUT_DEFAULTS)
        files = [ctx.layout.build_json(mode.name, iid), ctx.layout.prove_json(mode.name, iid)]
        task_dep = [task_name(BUILD, name), task_name(PROVE, name)]
        if judged:
            files.append(ctx.layout.strict_json(mode.name, iid))
            task_dep.append(task_name(STRICT, name))
        if isinstance(mode, AgentMode):
            files.append(ctx.layout.agent_json(mode.name, iid))
            task_dep.append(task_name(AGENT, name))
        yield stamps.stage_task(
            basename=GRADE,
            name=name,
            doc=f"verdict for the {mode.name} patch of {iid}",
            action=failing_on_user_error,  # a record it cannot read: one line
            args=[grade_task, ctx.layout, mode.name, task],
            config=config,
            files=files,
            targets=[ctx.layout.grade_json(mode.name, iid)],
            task_dep=task_dep,
        )
