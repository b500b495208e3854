"""The strict stage: does a resolved patch break the rest of nginx, or add memory errors?

It runs for a patch whose named assertions all pass, against a reference: the gold patch for a
candidate, the base for the gold patch itself (only with ``strict_gold=1``: gold's strictness is
the benchmark card's). Both sides are built as sanitizer builds (sanitizer.py), and one run of
each test file under them answers both questions (docs/verdicts.md#strict says it for users):

- **Regressions.** regression_files run once; a file runs again on both sides only when its
  first candidate run fails what the reference's passes (suspects). A regression passes in
  every reference run and fails in every candidate run (compare); what wobbles is not counted.
- **Sanitizers.** The task's own files and the regression files: a report of the candidate's
  first runs that the reference's first runs do not give is a finding.

Every side's runs are kept in the cache by build key (Side: ``strict-runs/<key>/<test tree>/
<env>/<file>/run<n>/``) and shared by every mode and patch; a build is made only when a run it
needs is missing, and a side's missing runs go RUNS_AT_ONCE at a time. Without a sanitizer
build, the plain builds judge the regressions. The candidate's runs are copied to
``strict/<file>/run<n>/``.

``strict.json`` (core/records.py: StrictJson, where each field is explained)::

    {"inputs", "strict": true | false | null, "reason", "retry", "reference": "gold" | "base",
     "reference_key", "key", "files", "rerun", "regressions", "reference_not_passing",
     "candidate_flaky", "gold_only", "sanitizer": {"key", "reference_key", "files"} | null,
     "sanitizer_findings": [finding], "reference_reports", "seconds", "floor"}
"""

import os
import queue
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..build.cache import BuildSpec, binary_path
from ..build.stage import ensure_build
from ..cluster import executor
from ..core import jsonio, limits, stamps
from ..core.errors import failing_on_user_error
from ..core.gitcmd import gold_diff
from ..core.locks import locked
from ..core.outcomes import BUILT, ENV_ERROR
from ..core.procs import kill_leftovers
from ..core.records import (
    BuildRecord,
    Finding,
    ProveRun,
    SanitizerPart,
    StrictBuilds,
    StrictFloor,
    StrictJson,
    StrictJudgement,
    StrictSeconds,
    read_record,
    write_record,
)
from ..core.stamps import TaskDict
from ..core.tasknames import BUILD, PROVE, STRICT, task_name, tests_subtask, unit_name
from ..core.trees import remove_tree
from ..patch.stage import touched_paths
from ..prove.areas import area_files
from ..prove.env import environment_inputs
from ..prove.stage import graded_in, run_prove_files
from ..prove.tap import counted_results, file_problem, parse_tap
from ..prove.tree import task_tests_tree
from ..run.modes import GoldMode, NoneMode
from . import sanitizer

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..run.benchmark import Task
    from ..run.context import StageContext
    from ..run.modes import Kind, Mode

# Regression files per patch (docs/verdicts.md, scripts/bench.py).
DEFAULT_FILES = 6
# Runs of a file at most, per side: the second only when the first found a suspect.
RUNS = 2
# Test files of one side that run at once, each in a prove slot: a test file mostly waits on
# timers and sockets, and one after another they were most of a patch's judging time.
RUNS_AT_ONCE = 4
# A file's runs, the first first: {file: [{assertion id: passed}]}.
FileRuns = dict[str, list[dict[str, bool]]]


class Unjudged(Exception):
    """Why a patch's strictness cannot be judged (a build that cannot be made), and whether to
    try again: (reason, retry)."""

    def __init__(self, reason: str, retry: bool) -> None:
        super().__init__(reason)
        self.reason, self.retry = reason, retry


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


def reference_patch(layout: "Layout", mode_kind: "Kind", task: "Task") -> tuple[str, bytes]:
    """("gold", the fix's diff) for a candidate, ("base", b"") for the gold patch itself."""
    if mode_kind == "gold":
        return "base", b""
    return "gold", gold_diff(layout.bare_repo(task.repo), task.base_commit, task.fix_commit)


def _check_built(record: BuildRecord, what: str) -> None:
    """Unjudged unless `record` is a usable build."""
    if record["status"] == ENV_ERROR:
        raise Unjudged(f"{what} could not be built here: {record.get('reason')}", True)
    if record["status"] != BUILT:
        raise Unjudged(f"{what} does not build ({record['status']})", False)


@dataclass(frozen=True)
class Run:
    """One run of a test file: its assertions' results, its wall time, and its output."""

    results: dict[str, bool]
    seconds: float
    directory: Path

    def reports(self) -> list[tuple[str, str, str | None, Path]]:
        """The sanitizers' reports of the run (sanitizer.reports)."""
        return sanitizer.reports(self.directory / "san")


def read_run(directory: Path, name: str) -> Run:
    """The kept run of test file `name` in `directory` (Side's run<n>/): the assertions that
    count (tap.counted_results)."""
    record: ProveRun = jsonio.read_json(directory / "run.json")
    fr = parse_tap(name, (directory / record["tap"]).read_text(errors="replace"))
    return Run(counted_results(fr, record), record["seconds"], directory)


def _stem(name: str) -> str:
    return name.replace("/", "__")


class Side:
    """A build that test files run against (a candidate, its reference, the base), named by its
    key before it is made, and its runs, kept in the cache: ``<store>/<file>/run<n>/`` holds the
    TAP, stderr and nginx log of run n, the sanitizers' reports under ``san/``, and ``run.json``
    (prove's record of the file), written last. The build is made only when a run is missing."""

    def __init__(
        self,
        layout: "Layout",
        task: "Task",
        tree: Path,
        patch: bytes,
        sanitized: bool,
        what: str,
        token_file: str | Path,
    ) -> None:
        self.layout, self.task, self.tree, self.patch = layout, task, tree, patch
        self.sanitized, self.what, self.token_file = sanitized, what, token_file
        self.flags = (
            sanitizer.sanitizer_flags(task.configure_flags)
            if sanitized
            else list(task.configure_flags)
        )
        self.key = BuildSpec.of(task.base_commit, self.flags, patch).key
        # The runs' environment: prove's, and the sanitizers' options.
        env_id = jsonio.digest(
            [environment_inputs(tree), sanitizer.environment("-") if sanitized else None]
        )[:12]
        self.store = layout.strict_runs(self.key, task.tests_tree_id) / env_id
        self.build: BuildRecord | None = None
        self.build_seconds = 0.0  # this stage's own time making the build
        self.waited = 0.0  # its runs' waits for prove slots (_make_runs)

    def _run_dir(self, name: str, n: int) -> Path:
        return self.store / _stem(name) / f"run{n}"

    def _ensure_built(self) -> None:
        if self.build is None:
            clock = limits.Stopwatch()
            self.build = ensure_build(
                self.layout,
                self.layout.bare_repo(self.task.repo),
                self.task.base_commit,
                self.flags,
                self.patch,
            )
            self.build_seconds += clock.seconds()
        _check_built(self.build, self.what)

    def _make_run(self, name: str, n: int, token_file: str | Path) -> float:
        """Run n of file `name`, kept; its wall time."""
        final = self._run_dir(name, n)
        tmp = final.with_name(f".run{n}.tmp")
        remove_tree(tmp, ignore_errors=True)  # a killed run's, under the lock
        (tmp / "san").mkdir(parents=True)
        record = run_prove_files(
            self.layout,
            self.tree,
            binary_path(self.layout, self.key),
            [name],
            self.task.test_timeout,
            tmp,
            token_file=token_file,
            extra_env=sanitizer.environment(tmp / "san") if self.sanitized else None,
        )[name]
        write_record(tmp / "run.json", record)
        remove_tree(final, ignore_errors=True)
        os.replace(tmp, final)
        return record["seconds"]

    def _make_runs(self, missing: Sequence[tuple[str, int]]) -> None:
        """The runs `missing` ([(file, n)]), RUNS_AT_ONCE at a time, each in a prove slot and
        with a token file of its own (worker_token); the time in which none of them ran (their
        waits for a slot) is added to self.waited."""
        todo: queue.SimpleQueue[tuple[str, int]] = queue.SimpleQueue()
        for item in missing:
            todo.put(item)
        spans: list[tuple[float, float]] = []

        def worker(index: int) -> None:
            while True:
                try:
                    name, n = todo.get_nowait()
                except queue.Empty:
                    return
                seconds = self._make_run(name, n, worker_token(self.token_file, index))
                end = time.monotonic()
                spans.append((end - seconds, end))

        start = time.monotonic()
        with ThreadPoolExecutor(min(RUNS_AT_ONCE, len(missing))) as pool:
            list(pool.map(worker, range(min(RUNS_AT_ONCE, len(missing)))))
        covered, last = 0.0, start
        for begin, end in sorted(spans):
            covered += max(0.0, end - max(begin, last))
            last = max(last, end)
        self.waited += max(0.0, time.monotonic() - start - covered)

    def _read_run(self, name: str, n: int) -> Run:
        return read_run(self._run_dir(name, n), name)

    def runs(self, wanted: Mapping[str, int]) -> dict[str, list[Run]]:
        """{file: its first n runs} for {file: n}, making the runs not kept yet (and, for them,
        the build: Unjudged when it cannot be made)."""
        lock = f"strict-runs-{self.key}-{tests_subtask(self.task.tests_tree_id)}"
        with locked(self.layout.lock(lock)):
            missing = [
                (name, n)
                for name, count in wanted.items()
                for n in range(1, count + 1)
                if not (self._run_dir(name, n) / "run.json").is_file()
            ]
            if missing:
                self._ensure_built()
                self._make_runs(missing)
            return {
                name: [self._read_run(name, n) for n in range(1, count + 1)]
                for name, count in wanted.items()
            }


def worker_token(token_file: str | Path, index: int) -> str:
    """The token file of the index-th run at once of a unit (procs.kill_leftovers)."""
    return str(token_file) if index == 0 else f"{token_file}.{index}"


def results_of(runs: Mapping[str, Sequence[Run]], only: Sequence[str] | None = None) -> FileRuns:
    """The results of `runs` ({file: runs}), of the files `only` when given."""
    return {
        name: [r.results for r in file_runs]
        for name, file_runs in runs.items()
        if only is None or name in only
    }


def suspects(candidate: FileRuns, reference: FileRuns) -> list[str]:
    """The files whose first candidate run fails (or does not run) an assertion that the
    reference's first run passes: those run a second time on both sides."""
    return [
        name
        for name, ref in reference.items()
        if any(
            passed and candidate.get(name, [{}])[0].get(i) is not True
            for i, passed in ref[0].items()
        )
    ]


def compare(candidate: FileRuns, reference: FileRuns) -> tuple[list[str], list[str], list[str]]:
    """(regressions, reference_not_passing, candidate_flaky) from the runs of each side: a
    regression passes in every reference run and fails in every candidate run."""
    regressions, unstable, flaky = [], [], []
    for name, ref_runs in reference.items():
        cand_runs = candidate.get(name) or [{}]
        for i in {i for results in ref_runs for i in results}:
            if not all(results.get(i) is True for results in ref_runs):
                unstable.append(i)
                continue
            cand = [results.get(i) is True for results in cand_runs]
            if not any(cand):
                regressions.append(i)
            elif not all(cand):
                flaky.append(i)
    return sorted(regressions), sorted(unstable), sorted(flaky)


def sanitizer_findings(
    candidate: Mapping[str, Sequence[Run]], reference: Mapping[str, Sequence[Run]], out_dir: Path
) -> tuple[list[Finding], int]:
    """(findings, the reference's report count) of the first runs of each side (see above);
    a finding's report path is relative to the unit's directory, out_dir's parent."""
    known = {
        sanitizer.signature(t, k, f)
        for runs in reference.values()
        for t, k, f, _ in runs[0].reports()
    }
    findings: dict[tuple[str, str, str], Finding] = {}
    for name, runs in candidate.items():
        for tool, kind, frame, path in runs[0].reports():
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
                    "report": f"{out_dir.name}/{_stem(name)}/run1/san/{path.name}",
                },
            )
            if name not in finding["files"]:
                finding["files"].append(name)
    reports = sum(len(runs[0].reports()) for runs in reference.values())
    return list(findings.values()), reports


def _copy_runs(runs: Mapping[str, Sequence[Run]], out_dir: Path) -> None:
    """The candidate's runs into the unit's strict/, as the cache holds them."""
    remove_tree(out_dir, ignore_errors=True)
    for name, file_runs in runs.items():
        for n, run in enumerate(file_runs, 1):
            shutil.copytree(run.directory, out_dir / _stem(name) / f"run{n}")


def judge(
    layout: "Layout",
    mode_name: str,
    mode_kind: "Kind",
    task: "Task",
    build: BuildRecord,
    cap: int,
    out_dir: Path,
    token_file: str | Path,
) -> StrictJudgement:
    """strict.json's fields for a patch whose named assertions pass (see the module docstring)."""
    clock = limits.Stopwatch()  # the stage's own time: not its waits for build/prove slots
    label, ref_patch = reference_patch(layout, mode_kind, task)
    tree, _ = task_tests_tree(layout, task)
    patch = layout.model_patch(mode_name, task.instance_id).read_bytes()
    files = regression_files(task, tree, patch, cap)

    def side(p: bytes, sanitized: bool, what: str) -> Side:
        return Side(layout, task, tree, p, sanitized, what, token_file)

    cand = side(patch, True, "the sanitizer build")
    ref = side(ref_patch, True, "the reference's sanitizer build")
    sides = [cand, ref]
    fields: StrictBuilds = {
        "reference": label,
        "reference_key": BuildSpec.of(task.base_commit, task.configure_flags, ref_patch).key,
        "key": build["key"],
    }
    san: SanitizerPart | None = {
        "key": cand.key,
        "reference_key": ref.key,
        "files": list(task.test_files) + files,
    }
    san_problem = None
    try:
        try:
            first = dict.fromkeys(list(task.test_files) + files, 1)
            candidate, reference = cand.runs(first), ref.runs(first)
        except Unjudged as e:
            # No sanitizer build: the plain builds answer for the regressions alone.
            san_problem, san = e, None
            cand = side(patch, False, "the candidate's build")
            ref = side(ref_patch, False, f"the {label} build")
            sides += [cand, ref]
            first = dict.fromkeys(files, 1)
            candidate, reference = cand.runs(first), ref.runs(first)
        # The task's own files are not compared (prove graded them): only regression files
        # run again.
        again = dict.fromkeys(
            suspects(results_of(candidate, files), results_of(reference, files)), RUNS
        )
        if again:
            candidate.update(cand.runs(again))
            reference.update(ref.runs(again))
    except Unjudged as e:
        return {**fields, "strict": None, "reason": e.reason, "retry": e.retry}
    regressions, unstable, flaky = compare(
        results_of(candidate, files), results_of(reference, files)
    )
    gold_only: list[str] = []
    if label == "gold" and regressions:
        # What only the upstream fix makes pass (a feature it adds beside the fix) is no
        # regression of another correct fix: a regression must also pass without any fix.
        base = side(b"", cand.sanitized, "the base build")
        sides.append(base)
        hit = sorted({i.split(":", 1)[0] for i in regressions})
        try:
            without = results_of(base.runs(dict.fromkeys(hit, RUNS)))
        except Unjudged:
            pass  # the base does not build here: every regression counts, as gold's
        else:
            passes_without = set(compare(results_of(candidate, hit), without)[0])
            gold_only = [i for i in regressions if i not in passes_without]
            regressions = [i for i in regressions if i in passes_without]
    findings: list[Finding] = []
    ref_reports = 0
    if san is not None:
        findings, ref_reports = sanitizer_findings(candidate, reference, out_dir)
    _copy_runs(candidate, out_dir)
    total = clock.seconds() - sum(s.waited for s in sides)
    builds = sum(s.build_seconds for s in sides)
    cand_build = cand.build or jsonio.read_json(layout.build_dir(cand.key) / "build.json") or {}
    seconds: StrictSeconds = {
        "builds": round(builds, 3),
        "runs": round(total - builds, 3),
        "total": round(total, 3),
    }
    floor: StrictFloor = {
        "build": round((cand_build.get("seconds") or 0.0) if cand.sanitized else 0.0, 3),
        "tests": round(sum(runs[0].seconds for runs in candidate.values()), 3),
    }
    verdict: StrictJudgement = {
        **fields,
        "strict": None,
        "reason": "",
        "retry": False,
        "files": files,
        "rerun": sorted(again),
        "regressions": regressions,
        "reference_not_passing": unstable,
        "candidate_flaky": flaky,
        "gold_only": gold_only,
        "sanitizer": san,
        "sanitizer_findings": findings,
        "reference_reports": ref_reports,
        "seconds": seconds,
        "floor": floor,
    }
    if san_problem and not regressions:
        return {**verdict, "strict": None, "reason": san_problem.reason, "retry": san_problem.retry}
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
    layout: "Layout", mode_name: str, mode_kind: "Kind", task: "Task", inputs: str, cap: int
) -> None:
    """The unit's strict.json and strict/ (executor.py)."""
    iid = task.instance_id
    out_dir = layout.strict_dir(mode_name, iid)
    token_file = layout.running_token(mode_name, iid, STRICT)
    for index in range(RUNS_AT_ONCE):
        kill_leftovers(worker_token(token_file, index))
    record: StrictJson = {
        "inputs": inputs,
        "strict": False,
        "reason": "",
        "retry": False,
        "sanitizer_findings": [],
        "regressions": [],
    }
    build: BuildRecord | None = read_record(layout.build_json(mode_name, iid))
    prove = read_record(layout.prove_json(mode_name, iid)) or {}
    if (
        not build
        or build.get("status") != BUILT
        or not named_assertions_pass(task, prove, layout.tap_dir(mode_name, iid))
    ):
        record["reason"] = "the named assertions do not all pass"
    else:
        out_dir.mkdir(parents=True, exist_ok=True)
        record.update(judge(layout, mode_name, mode_kind, task, build, cap, out_dir, token_file))
    write_record(layout.strict_json(mode_name, iid), record)


def strict_task(
    layout: "Layout",
    mode_name: str,
    mode_kind: "Kind",
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
    its own to judge (never none; gold with strict_gold=1 only)."""
    return not switched_off(ctx, mode) and not isinstance(mode, NoneMode)


def switched_off(ctx: "StageContext", mode: "Mode") -> str | None:
    """The variable that leaves the strict verdict of `mode` unjudged ("strict=0",
    "strict_gold=0"), or None. Gold's strictness is a property of the benchmark (its card
    states it), and judging it costs a sanitizer build of every base: by default not judged."""
    if not ctx.options.strict:
        return "strict=0"
    if isinstance(mode, GoldMode) and not ctx.options.strict_gold:
        return "strict_gold=0"
    return None


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    for bench, mode, task in ctx.units():
        if not applies(ctx, mode):
            continue
        name = unit_name(bench, mode, task)
        iid = task.instance_id
        config = {
            "files_cap": ctx.options.strict_files or DEFAULT_FILES,
            # First runs under the sanitizer builds, a second of a suspect file.
            "runs": [1, RUNS],
            "fix": task.fix_commit,
            "cc_opt": sanitizer.CC_OPT,
        }
        yield stamps.stage_task(
            basename=STRICT,
            name=name,
            doc=f"regression files and sanitizer build for the {mode.name} patch of {iid}",
            action=failing_on_user_error,  # a record it cannot read: one line
            args=[strict_task, ctx.layout, mode.name, mode.kind, task],
            config=config,
            files=[ctx.layout.prove_json(mode.name, iid), ctx.layout.build_json(mode.name, iid)],
            task_dep=[task_name(PROVE, name), task_name(BUILD, name)],
            targets=[ctx.layout.strict_json(mode.name, iid)],
            also_current=[(judged, [ctx.layout, mode.name, iid])],
        )
