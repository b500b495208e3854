"""The strict stage: does a resolved patch break the rest of nginx, or add memory errors?

It runs for a patch whose named assertions all pass (prove.json's TAP; grade/stage.py decides the
rest), in two parts, each against a reference: the gold build for a candidate, the base build
for the gold patch itself (so that gold's own strictness means something). docs/verdicts.md#strict
says it for users.

- **Regressions.** More test files of the task's test tree (regression_files: the files of the
  areas the patch touches, up to ``strict_files=N``) run twice against the candidate and twice
  against the reference. A regression passes in both reference runs and fails (or does not run)
  in both candidate runs (compare); what wobbles is recorded and not counted.
- **Sanitizers.** The patched tree is built again as a sanitizer build (sanitizer.py) and the
  task's own files plus the regression files run once under it, and under the reference's
  sanitizer build. Each report the reference does not also produce is a finding.

The reference's runs are kept in the cache (``strict-runs/<build key>/<test tree>/<env>/``) and
shared by every mode: the gold build and its runs are made once per task. The candidate's
output: ``strict/<file>.run<n>.tap`` and ``strict/san/<file>/``.

``strict.json`` (core/records.py: StrictJson, where each field is explained)::

    {"inputs", "strict": true | false | null, "reason", "retry", "reference": "gold" | "base",
     "reference_key", "key", "files", "runs", "regressions", "reference_not_passing",
     "candidate_flaky", "gold_only", "sanitizer": {"key", "reference_key", "files"},
     "sanitizer_findings": [finding], "reference_reports", "seconds"}
"""

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..build.cache import binary_path, verify_build
from ..build.stage import ensure_build
from ..cluster import executor
from ..core import gitcmd, jsonio, limits, stamps
from ..core.locks import locked
from ..core.procs import kill_leftovers
from ..core.records import (
    BuildRecord,
    Finding,
    ProveRun,
    SanitizerPart,
    StrictBuilds,
    StrictJson,
    StrictJudgement,
    StrictSeconds,
)
from ..core.stamps import TaskDict
from ..core.tasknames import BUILD, PROVE, STRICT, task_name, tests_subtask, unit_name
from ..patch.stage import touched_paths
from ..prove.areas import area_files
from ..prove.env import environment_inputs
from ..prove.stage import graded_in, run_prove_files
from ..prove.tap import file_problem, parse_tap
from ..prove.tree import task_tests_tree
from . import sanitizer

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..run.benchmark import Task
    from ..run.context import StageContext
    from ..run.modes import Mode

# Regression files per patch: the median stage cost per patch stays under 60 s on 2 cores with
# it (docs/verdicts.md, scripts/bench.py).
DEFAULT_FILES = 6
RUNS = 2
# RUNS runs of some test files: [{file: {assertion id: passed}}].
Runs = list[dict[str, dict[str, bool]]]
# Why a patch's strictness could not be judged, and whether to try again: (reason, retry).
Problem = tuple[str, bool]


def named_assertions_pass(task: "Task", prove_record: Mapping[str, Any], tap_dir: Path) -> bool:
    """Whether every graded assertion passed in prove's runs (prove_record: prove.json, a
    ProveJson, or {}), in untampered, complete files."""
    files = dict(prove_record.get("files") or {}, **(prove_record.get("reruns") or {}))
    for name in task.test_files:
        record = files.get(name)
        if not record or not record.get("tap"):
            return False
        fr = parse_tap(name, (tap_dir / record["tap"]).read_text(errors="replace"))
        if file_problem(fr, record) or not all(
            fr.results.get(i) is True for i in graded_in(task, name)
        ):
            return False
    return True


def test_files(tree: str | Path) -> list[str]:
    return sorted(p.name for p in Path(tree).glob("*.t"))


def regression_files(task: "Task", tree: Path, patch: bytes, cap: int) -> list[str]:
    """The test files of the areas `patch` touches (areas.area_files), the task's own left
    out, at most `cap`."""
    own = set(task.test_files)
    return [f for f in area_files(test_files(tree), touched_paths(patch)) if f not in own][:cap]


def reference_patch(layout: "Layout", mode_kind: str, task: "Task") -> tuple[str, bytes]:
    """("gold", the fix's diff) for a candidate, ("base", b"") for the gold patch itself."""
    if mode_kind == "gold":
        return "base", b""
    return "gold", gitcmd.gold_diff(layout.bare_repo(task.repo), task.base_commit, task.fix_commit)


def _results(tap_dir: Path, name: str, record: ProveRun) -> dict[str, bool]:
    fr = parse_tap(name, (tap_dir / record["tap"]).read_text(errors="replace"))
    return {} if fr.tampered else {i: r for i, r in fr.results.items()}


def candidate_runs(
    layout: "Layout",
    tree: Path,
    binary: Path,
    files: Sequence[str],
    task: "Task",
    out_dir: Path,
    token_file: str | Path,
) -> Runs:
    """[{file: {assertion id: passed}}] of RUNS runs of `files` against `binary`."""
    runs = []
    for n in range(1, RUNS + 1):
        records = run_prove_files(
            layout,
            tree,
            binary,
            files,
            task.test_timeout,
            out_dir,
            token_file=token_file,
            suffix=f".run{n}",
        )
        runs.append({f: _results(out_dir, f, rec) for f, rec in records.items()})
    return runs


def _env_id(tree: Path) -> str:
    return jsonio.digest(environment_inputs(tree))[:12]


def reference_runs(
    layout: "Layout",
    key: str,
    tree: Path,
    files: Sequence[str],
    task: "Task",
    token_file: str | Path,
) -> Runs:
    """candidate_runs of the reference build `key`, kept in the cache and shared: a file's runs
    are made once per build, test commit and test environment."""
    out_dir = layout.strict_runs(key, task.tests_tree_id) / _env_id(tree)
    runs: Runs = [{} for _ in range(RUNS)]
    with locked(layout.lock(f"strict-runs-{key}-{tests_subtask(task.tests_tree_id)}")):
        for name in files:
            kept = out_dir / f"{name}.json"
            records: list[ProveRun] = jsonio.read_json(kept)
            if not records:
                records = [
                    run_prove_files(
                        layout,
                        tree,
                        binary_path(layout, key),
                        [name],
                        task.test_timeout,
                        out_dir,
                        token_file=token_file,
                        suffix=f".run{n}",
                    )[name]
                    for n in range(1, RUNS + 1)
                ]
                jsonio.write_json(kept, records)
            for n, rec in enumerate(records):
                runs[n][name] = _results(out_dir, name, rec)
    return runs


def compare(candidate: Runs, reference: Runs) -> tuple[list[str], list[str], list[str]]:
    """(regressions, reference_not_passing, candidate_flaky) from RUNS runs of each side."""
    ids = sorted({i for run in reference for results in run.values() for i in results})
    passes = lambda runs, i: [run.get(i.split(":", 1)[0], {}).get(i) is True for run in runs]
    regressions, unstable, flaky = [], [], []
    for i in ids:
        ref = passes(reference, i)
        if not all(ref):
            unstable.append(i)
            continue
        cand = passes(candidate, i)
        if not any(cand):
            regressions.append(i)
        elif not all(cand):
            flaky.append(i)
    return regressions, unstable, flaky


def _built(record: BuildRecord, what: str) -> Problem | None:
    """None when `record` is a usable build, else (reason, retry)."""
    if record["status"] == "built":
        return None
    if record["status"] == "env_error":
        return f"{what} could not be built here: {record.get('reason')}", True
    return f"{what} does not build ({record['status']})", False


def sanitizer_runs(
    layout: "Layout",
    tree: Path,
    key: str,
    files: Sequence[str],
    task: "Task",
    out_dir: Path,
    token_file: str | Path,
) -> list[tuple[str, str, str | None, Path, str]]:
    """[(tool, kind, frame, report path, test file)] of one run of each file under the
    sanitizer build `key`, reports under out_dir/<file>/."""
    found = []
    for name in files:
        log_dir = out_dir / name
        if log_dir.is_dir() and (log_dir / "done").exists():
            pass  # a reference's runs, kept
        else:
            log_dir.mkdir(parents=True, exist_ok=True)
            for old in log_dir.glob("*san.*"):
                old.unlink()
            run_prove_files(
                layout,
                tree,
                binary_path(layout, key),
                [name],
                task.test_timeout,
                log_dir,
                token_file=token_file,
                extra_env=sanitizer.environment(log_dir),
            )
            (log_dir / "done").write_text("")
        found += [(*r, name) for r in sanitizer.reports(log_dir)]
    return found


def sanitizer_part(
    layout: "Layout",
    task: "Task",
    patch: bytes,
    ref_patch: bytes,
    files: list[str],
    out_dir: Path,
    tree: Path,
    token_file: str | Path,
) -> tuple[list[Finding], int, SanitizerPart, Problem | None]:
    """(findings, reference report count, record, problem): the sanitizer half (see above)."""
    bare, flags = layout.bare_repo(task.repo), sanitizer.sanitizer_flags(task.configure_flags)
    cand = ensure_build(layout, bare, task.base_commit, flags, patch)
    ref = ensure_build(layout, bare, task.base_commit, flags, ref_patch)
    problem = _built(cand, "the sanitizer build") or _built(ref, "the reference's sanitizer build")
    record: SanitizerPart = {"key": cand["key"], "reference_key": ref["key"], "files": files}
    if problem:
        return [], 0, record, problem
    # Per test tree, not per commit: the kept runs of an authored file are of its content.
    ref_dir = layout.strict_runs(ref["key"], task.tests_tree_id) / _env_id(tree) / "san"
    with locked(layout.lock(f"strict-san-{ref['key']}-{tests_subtask(task.tests_tree_id)}")):
        reference = sanitizer_runs(layout, tree, ref["key"], files, task, ref_dir, token_file)
    for stale in out_dir.glob("*/done"):
        stale.unlink()
    candidate = sanitizer_runs(layout, tree, cand["key"], files, task, out_dir, token_file)
    known = {sanitizer.signature(t, k, f) for t, k, f, _, _ in reference}
    findings: dict[tuple[str, str, str], Finding] = {}
    for tool, kind, frame, path, name in candidate:
        sig = sanitizer.signature(tool, kind, frame)
        if sig in known:
            continue
        finding = findings.setdefault(
            sig,
            {
                "tool": tool,
                "kind": kind,
                "frame": frame,
                "file": name,
                "files": [],
                "report": str(path.relative_to(out_dir.parent.parent)),
            },
        )
        if name not in finding["files"]:
            finding["files"].append(name)
    return list(findings.values()), len(reference), record, None


def judge(
    layout: "Layout",
    mode_name: str,
    mode_kind: str,
    task: "Task",
    build: BuildRecord,
    cap: int,
    out_dir: Path,
    token_file: str | Path,
) -> StrictJudgement:
    """strict.json's fields for a patch whose named assertions pass (see the module docstring)."""
    clock = limits.Stopwatch()  # the stage's own time: not its waits for build/prove slots
    label, ref_patch = reference_patch(layout, mode_kind, task)
    bare = layout.bare_repo(task.repo)
    ref = ensure_build(layout, bare, task.base_commit, task.configure_flags, ref_patch)
    fields: StrictBuilds = {"reference": label, "reference_key": ref["key"], "key": build["key"]}
    problem = _built(ref, f"the {label} build") or (
        verify_build(layout, build)
        and (f"the candidate's build changed: {verify_build(layout, build)}", True)
    )
    if problem:
        return {**fields, "strict": None, "reason": problem[0], "retry": problem[1]}
    tree, _ = task_tests_tree(layout, task)
    patch = layout.model_patch(mode_name, task.instance_id).read_bytes()
    files = regression_files(task, tree, patch, cap)
    candidate = candidate_runs(
        layout, tree, binary_path(layout, build["key"]), files, task, out_dir, token_file
    )
    reference = reference_runs(layout, ref["key"], tree, files, task, token_file)
    regressions, unstable, flaky = compare(candidate, reference)
    gold_only = []
    if label == "gold" and regressions:
        # What only the upstream fix makes pass (a feature it adds beside the fix) is no
        # regression of another correct fix: a regression must also pass without any fix.
        base = ensure_build(layout, bare, task.base_commit, task.configure_flags, b"")
        if base["status"] == "built":
            without = reference_runs(layout, base["key"], tree, files, task, token_file)
            passes_without = set(compare(candidate, without)[0])
            gold_only = [i for i in regressions if i not in passes_without]
            regressions = [i for i in regressions if i in passes_without]
    middle = clock.seconds()
    findings, ref_reports, san, problem = sanitizer_part(
        layout,
        task,
        patch,
        ref_patch,
        list(task.test_files) + files,
        out_dir / "san",
        tree,
        token_file,
    )
    end = clock.seconds()
    seconds: StrictSeconds = {
        "regressions": round(middle, 3),
        "sanitizer": round(end - middle, 3),
        "total": round(end, 3),
    }
    verdict: StrictJudgement = {
        **fields,
        "strict": None,
        "reason": "",
        "retry": False,
        "files": files,
        "runs": RUNS,
        "regressions": regressions,
        "reference_not_passing": unstable,
        "candidate_flaky": flaky,
        "gold_only": gold_only,
        "sanitizer": san,
        "sanitizer_findings": findings,
        "reference_reports": ref_reports,
        "seconds": seconds,
    }
    if problem and not regressions:
        return {**verdict, "strict": None, "reason": problem[0], "retry": problem[1]}
    why = []
    if regressions:
        why.append(f"{len(regressions)} regression(s): {', '.join(regressions[:3])}")
    if findings:
        why.append(
            f"{len(findings)} sanitizer finding(s): "
            + ", ".join(
                f"{f['tool']} {f['kind']} in {f['frame']} ({f['file']})" for f in findings[:3]
            )
        )
    return {**verdict, "strict": not why, "reason": "; ".join(why), "retry": False}


def strict_unit(
    layout: "Layout", mode_name: str, mode_kind: str, task: "Task", inputs: str, cap: int
) -> None:
    """The unit's strict.json and strict/ (executor.py)."""
    iid = task.instance_id
    out_dir = layout.strict_dir(mode_name, iid)
    token_file = layout.running_token(mode_name, iid, STRICT)
    kill_leftovers(token_file)
    record: StrictJson = {
        "inputs": inputs,
        "strict": False,
        "reason": "",
        "retry": False,
        "sanitizer_findings": [],
        "regressions": [],
    }
    build: BuildRecord | None = jsonio.read_json(layout.build_json(mode_name, iid))
    prove = jsonio.read_json(layout.prove_json(mode_name, iid)) or {}
    if (
        not build
        or build.get("status") != "built"
        or not named_assertions_pass(task, prove, layout.tap_dir(mode_name, iid))
    ):
        record["reason"] = "the named assertions do not all pass"
    else:
        out_dir.mkdir(parents=True, exist_ok=True)
        record.update(judge(layout, mode_name, mode_kind, task, build, cap, out_dir, token_file))
    jsonio.write_json(layout.strict_json(mode_name, iid), record)


def strict_task(
    layout: "Layout",
    mode_name: str,
    mode_kind: str,
    task: "Task",
    config: dict[str, Any],
    files: list[str],
) -> None:
    inputs = stamps.inputs_digest(config, files)
    executor.run(
        "prove",
        strict_unit,
        layout,
        mode_name,
        task.instance_id,
        [mode_name, mode_kind, task, inputs, config["files_cap"]],
        ship_in=["build.json", "prove.json", "tap/", "model.patch"],
        ship_out=["strict.json", "strict/"],
        repos=[
            (
                task.repo,
                {
                    task.base_commit: [[task.instance_id, "base_commit"]],
                    task.fix_commit: [[task.instance_id, "fix_commit"]],
                },
            ),
            (task.test_repo, {task.test_commit: [[task.instance_id, "test_commit"]]}),
        ],
    )


def judged(layout: "Layout", mode_name: str, iid: str) -> bool:
    """doit's uptodate beside the digest: a record the environment stopped runs again."""
    return not (jsonio.read_json(layout.strict_json(mode_name, iid)) or {}).get("retry")


def applies(ctx: "StageContext", mode: "Mode") -> bool:
    """Whether units of `mode` get the strict stage: on (strict=1) and a mode with a patch of
    its own to judge (never none)."""
    return bool(ctx.options.strict) and mode.kind != "none"


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    for bench, mode, task in ctx.units():
        if not applies(ctx, mode):
            continue
        name = unit_name(bench, mode, task)
        iid = task.instance_id
        config = {
            "files_cap": ctx.options.strict_files or DEFAULT_FILES,
            "runs": RUNS,
            "fix": task.fix_commit,
            "cc_opt": sanitizer.CC_OPT,
        }
        yield stamps.stage_task(
            basename=STRICT,
            name=name,
            doc=f"regression files and sanitizer build for the {mode.name} patch of {iid}",
            action=strict_task,
            args=[ctx.layout, mode.name, mode.kind, task],
            config=config,
            files=[ctx.layout.prove_json(mode.name, iid), ctx.layout.build_json(mode.name, iid)],
            task_dep=[task_name(PROVE, name), task_name(BUILD, name)],
            targets=[ctx.layout.strict_json(mode.name, iid)],
            also_current=[(judged, [ctx.layout, mode.name, iid])],
        )
