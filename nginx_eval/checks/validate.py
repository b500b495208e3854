"""Task validation: does each task tell the fix from no fix, every time?

``doit run nginx:validate [repeats=N] [load=cpu]`` (N from options.py, 5 by default: one run in
five that fails must show) builds base and fix (the same content-addressed builds the ``none``
and ``gold`` modes use), runs the task's test files `repeats` times against each, counts the runs
each assertion passed on each side, and derives from the assertions stable on every run
fail_to_pass (fails in every base run, passes in every fix run) and pass_to_pass (passes in every
run of both). The verdict (classify, a pure function; first match wins): ``env_error``,
``flaky``, ``gold_fails``, ``not_discriminating``, else ``valid``; when each applies:
docs/benchmark.md#validation. Each run is also graded as a patch would be (flake_rates: the
fix's runs that fail a graded assertion, the base's runs that pass them all), and a task is
admitted (admission) when it is valid and its fix failed no run. ``load=cpu`` proves while the
machine is busy (load.py); each record keeps the conditions it ran under.

Per task ``results/<run>/validate/<id>/validation.json`` (its fields: core/records.py,
ValidationJson): the verdict and its reasons, admission, flake rates, conditions, derived lists,
pass counts and the runs' results {id: bool}, test seconds, and both builds' records. Summary:
``results/<run>/validation.json`` ({instance_id: the record without "inputs" and "runs"}:
records.ValidationRecord) and ``validation.md`` (rendered by ``templates/validation.md.j2``: the
conditions, each task's verdict with the pass counts of the assertions that changed between
runs, and its flake rates and admission).
"""

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import jinja2
from doit.tools import config_changed

from ..build.stage import ensure_build
from ..core import inputs, jsonio, stamps
from ..core.console import say
from ..core.gitcmd import gold_diff
from ..core.layout import SOURCE_ROOT, Layout
from ..core.outcomes import BUILT
from ..core.records import (
    ValidationFlake,
    ValidationJson,
    ValidationRun,
    ValidationVerdict,
    write_record,
)
from ..core.stamps import TaskDict
from ..core.tasknames import (
    VALIDATE,
    VALIDATION,
    base_task_name,
    repo_task,
    task_name,
    tests_task_name,
    validate_subtask,
    validate_task_name,
)
from ..doitext.backend import forgotten
from ..prove.stage import run_prove_files
from ..prove.tap import assertion_number, file_problem, parse_tap
from ..prove.tree import task_tests_tree
from ..run.benchmark import Task
from .load import busy, conditions

if TYPE_CHECKING:
    from ..run.context import StageContext

# A task's validation verdict (docs/benchmark.md#validation).
Verdict = Literal["valid", "gold_fails", "not_discriminating", "flaky", "env_error"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
# One repeat of a side: {"seconds", "results": {assertion id: passed}}.
Run = ValidationRun
TEMPLATE = "validation.md.j2"  # in templates/; edit it and validation.md is rendered again


def run_side(
    layout: Layout, task: Task, binary: Path, out_dir: Path, repeats: int
) -> tuple[list[Run], list[str]]:
    runs: list[Run] = []
    env_errors: set[str] = set()
    tree, _ = task_tests_tree(layout, task)
    for r in range(1, repeats + 1):
        tap_dir = out_dir / f"r{r}"
        start = time.monotonic()
        files = run_prove_files(layout, tree, binary, task.test_files, task.test_timeout, tap_dir)
        results: dict[str, bool] = {}
        for name, record in files.items():
            fr = parse_tap(name, (tap_dir / record["tap"]).read_text(errors="replace"))
            problem = file_problem(fr, record)
            # A file that dies part-way is evidence like any other (the bug may crash nginx);
            # one that never ran says nothing.
            if problem and problem.kind in ("env", "not_started"):
                env_errors.add(f"{name}: {problem.text}")
            # A declared assertion that is skipped here says nothing about the fix.
            for ident in list(task.fail_to_pass) + list(task.pass_to_pass):
                if ident.startswith(f"{name}:") and assertion_number(ident) in fr.skipped:
                    env_errors.add(
                        f"{name}: {ident} skipped ({fr.skipped[assertion_number(ident)]})"
                    )
            results.update(fr.results)
        runs.append({"seconds": round(time.monotonic() - start, 3), "results": results})
    return runs, sorted(env_errors)


def _outcomes(runs: Iterable[Run], ident: str) -> set[bool]:
    """The results `ident` had over `runs` (an assertion a run does not report failed there)."""
    return {run["results"].get(ident, False) for run in runs}


def _always(runs: Sequence[Run], ident: str, value: bool) -> bool:
    """Whether there were runs and `ident` had `value` in every one of them."""
    return bool(runs) and _outcomes(runs, ident) == {value}


def pass_counts(runs: Sequence[Run], ids: Iterable[str]) -> dict[str, int]:
    """{id: the number of `runs` in which it passed} (a run that does not report it: failed)."""
    return {i: sum(1 for run in runs if run["results"].get(i, False)) for i in ids}


def _verdict(
    task: Task,
    base_runs: Sequence[Run],
    fix_runs: Sequence[Run],
    fix_built: bool,
    env_errors: Sequence[str],
    flaky: Sequence[str],
    f2p: Sequence[str],
) -> tuple[Verdict, list[str]]:
    """(verdict, reasons): the first rule that matches (docs/benchmark.md#validation)."""
    if env_errors:
        return "env_error", list(env_errors)
    if flaky:
        return "flaky", [
            f"{len(flaky)} assertion(s) change between repeats: {', '.join(flaky[:5])}"
        ]
    if not fix_built:
        return "gold_fails", ["the fix does not build"]
    declared = set(task.fail_to_pass) | set(task.pass_to_pass)
    bad = [i for i in sorted(declared) if not _always(fix_runs, i, True)]
    if bad:
        return "gold_fails", [f"declared assertions fail with the fix: {', '.join(bad[:5])}"]
    passing = [i for i in task.fail_to_pass if not _always(base_runs, i, False)]
    if not f2p:
        return "not_discriminating", ["no assertion fails without the fix and passes with it"]
    if passing:
        return "not_discriminating", [
            f"declared fail_to_pass already pass without the fix: {', '.join(passing[:5])}"
        ]
    return "valid", []


def graded_ids(task: Task, fix_runs: Iterable[Run]) -> list[str]:
    """The assertions a run of the task is graded on: the declared ones, or for a candidate
    that declares none yet, every assertion that passed in a run of the fix."""
    declared = list(task.fail_to_pass) + list(task.pass_to_pass)
    if task.fail_to_pass:
        return sorted(set(declared))
    return sorted({i for run in fix_runs for i, ok in run["results"].items() if ok})


def flake_rates(task: Task, base_runs: Sequence[Run], fix_runs: Sequence[Run]) -> ValidationFlake:
    """Each run graded as a patch would be: the fix's runs that fail a graded assertion (gold
    failures), the base's runs that pass them all (none passes), and per graded assertion the
    fix's runs it failed."""
    graded = graded_ids(task, fix_runs)
    resolved: Callable[[Run], bool] = lambda run: (
        bool(graded) and all(run["results"].get(i, False) for i in graded)
    )
    failing = {i: sum(1 for r in fix_runs if not r["results"].get(i, False)) for i in graded}
    return {
        "gold_failures": sum(1 for r in fix_runs if not resolved(r)),
        "gold_runs": len(fix_runs),
        "none_passes": sum(1 for r in base_runs if resolved(r)),
        "none_runs": len(base_runs),
        "gold_failing": {i: n for i, n in failing.items() if n},
    }


def admission(verdict: Verdict, flake: ValidationFlake) -> tuple[bool, list[str]]:
    """(admitted, why not): a task is admitted when it is valid and its fix passed every graded
    assertion in every run; a single gold failure keeps it out until its test is fixed."""
    why: list[str] = []
    if flake["gold_failures"]:
        # The first few: a file that did not run fails every assertion of it (gold_failing
        # keeps them all).
        items = list(flake["gold_failing"].items())
        failing = ", ".join(f"{i} ({n}/{flake['gold_runs']})" for i, n in items[:5])
        failing += f" and {len(items) - 5} more" if len(items) > 5 else ""
        why.append(
            f"the fix failed {flake['gold_failures']} of {flake['gold_runs']} runs: {failing}"
        )
    if verdict != "valid" and not why:
        why.append(f"verdict {verdict}")
    return not why, why


def classify(
    task: Task,
    base_runs: list[Run],
    fix_runs: list[Run],
    fix_built: bool,
    env_errors: Sequence[str],
) -> ValidationVerdict:
    """The verdict and its evidence, from per-repeat results {id: bool} of base and fix."""
    ids = sorted({i for run in base_runs + fix_runs for i in run["results"]})
    declared = set(task.fail_to_pass) | set(task.pass_to_pass)
    # An assertion that changes between runs of the fixed binary, or a graded one that changes
    # anywhere, makes verdicts unreliable. An ungraded one that wobbles only without the fix
    # (say "no alerts" after a crash the bug causes) decides nothing, and is only reported.
    flaky = [
        i
        for i in ids
        if len(_outcomes(fix_runs, i)) > 1 or (i in declared and len(_outcomes(base_runs, i)) > 1)
    ]
    unstable_base = [i for i in ids if len(_outcomes(base_runs, i)) > 1 and i not in flaky]
    f2p = [i for i in ids if _always(base_runs, i, False) and _always(fix_runs, i, True)]
    p2p = [i for i in ids if _always(base_runs, i, True) and _always(fix_runs, i, True)]
    regressions = [i for i in ids if _always(base_runs, i, True) and _always(fix_runs, i, False)]
    verdict, reasons = _verdict(task, base_runs, fix_runs, fix_built, env_errors, flaky, f2p)
    flake = flake_rates(task, base_runs, fix_runs)
    admitted, not_admitted = admission(verdict, flake)
    return {
        "verdict": verdict,
        "reasons": reasons,
        "admitted": admitted,
        "not_admitted": not_admitted,
        "flake": flake,
        "derived": {"fail_to_pass": f2p, "pass_to_pass": p2p},
        "declared_matches": set(f2p) == set(task.fail_to_pass)
        and set(p2p) == set(task.pass_to_pass),
        "missing_from_declared": sorted(set(f2p) - set(task.fail_to_pass)),
        "not_derived": sorted(set(task.fail_to_pass) - set(f2p)),
        "regressions": regressions,
        "flaky": flaky,
        "unstable_base": unstable_base,
        "pass_counts": {"base": pass_counts(base_runs, ids), "fix": pass_counts(fix_runs, ids)},
        "run_counts": {"base": len(base_runs), "fix": len(fix_runs)},
        "env_errors": list(env_errors),
    }


def reclassified(task: Task, done: ValidationJson) -> ValidationJson:
    """A finished validation.json with its verdict derived again from its runs."""
    verdict = classify(
        task,
        done["runs"]["base"],
        done["runs"]["fix"],
        done["build"]["fix"]["status"] == BUILT,
        done["env_errors"],
    )
    return {**done, **verdict}


def classification_current(layout: Layout, task: Task) -> bool:
    """doit uptodate (beside stamps.is_current): the verdict is what today's classifier says."""
    done: ValidationJson | None = jsonio.read_json(
        layout.validation_dir(task.instance_id) / "validation.json"
    )
    return isinstance(done, dict) and "runs" in done and reclassified(task, done) == done


def validate_task(
    layout: Layout,
    task: Task,
    repeats: int,
    doit_name: str,
    config: Mapping[str, Any],
    files: Iterable[str],
) -> None:
    out = layout.validation_dir(task.instance_id) / "validation.json"
    inputs = stamps.inputs_digest(config, files)
    done: ValidationJson | None = stamps.made_from(out, inputs)
    if done and not forgotten(layout, doit_name):  # `doit forget validate:...` runs again
        # The runs take minutes; the verdict is always derived again from them.
        again = reclassified(task, done)
        if again != done:
            write_record(out, again)
        return
    bare = layout.bare_repo(task.repo)
    base = ensure_build(layout, bare, task.base_commit, task.configure_flags, b"")
    fix = ensure_build(
        layout,
        bare,
        task.base_commit,
        task.configure_flags,
        gold_diff(bare, task.base_commit, task.fix_commit),
    )
    binary = lambda rec: layout.build_dir(rec["key"]) / "tree" / "objs" / "nginx"
    out_dir = layout.validation_dir(task.instance_id)
    base_runs: list[Run] = []
    fix_runs: list[Run] = []
    env_errors: list[str] = []
    load = config.get("load", "none")  # validation_config
    measured = conditions(repeats, load)
    with busy(layout, load, measured):
        if base["status"] == BUILT:
            base_runs, errs = run_side(layout, task, binary(base), out_dir / "base", repeats)
            env_errors += errs
        else:
            env_errors.append(f"the base commit does not build ({base['status']})")
        if fix["status"] == BUILT:
            fix_runs, errs = run_side(layout, task, binary(fix), out_dir / "fix", repeats)
            env_errors += [e for e in errs if e not in env_errors]
    record: ValidationJson = {
        **classify(task, base_runs, fix_runs, fix["status"] == BUILT, env_errors),
        "inputs": inputs,
        "instance_id": task.instance_id,
        "repeats": repeats,
        "conditions": measured,
        "runs": {"base": base_runs, "fix": fix_runs},
        "test_seconds": {
            "base": round(sum(r["seconds"] for r in base_runs), 3),
            "fix": round(sum(r["seconds"] for r in fix_runs), 3),
        },
        "build": {"base": base, "fix": fix},
    }
    write_record(out, record)


def write_summary(layout: Layout, tasks: Sequence[Task], repeats: int) -> None:
    summary: dict[str, Any] = {}
    for t in tasks:
        rec = jsonio.read_json(layout.validation_dir(t.instance_id) / "validation.json")
        rec.pop("runs", None)
        rec.pop("inputs", None)
        summary[t.instance_id] = rec
    jsonio.write_json(layout.validation_json, summary)
    text = render_summary(summary, len(tasks), repeats, layout.templates_dir)
    jsonio.write_text(layout.validation_md, text)
    say(*text.splitlines()[:3])


def template_path(templates_dir: Path) -> Path:
    """validation.md.j2 of the project's templates, else the harness's own."""
    own = templates_dir / TEMPLATE
    return own if own.is_file() else SOURCE_ROOT / "templates" / TEMPLATE


def render_summary(
    summary: Mapping[str, Mapping[str, Any]], ntasks: int, repeats: int, templates_dir: Path
) -> str:
    """validation.md: the counts per verdict and a row per task, from validation.json's records."""
    path = template_path(templates_dir)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(path.parent)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    counts = {v: sum(1 for r in summary.values() if r["verdict"] == v) for v in VERDICTS}
    return env.get_template(path.name).render(
        tasks=ntasks,
        repeats=repeats,
        counts=counts,
        summary=summary,
        conditions=conditions_summary(summary),
        admitted=sum(1 for r in summary.values() if r.get("admitted")),
        judged=sum(1 for r in summary.values() if "admitted" in r),
    )


def conditions_summary(summary: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """[{"repeats", "load", "load_processes", "cores", "tasks", "dates", "coverage",
    "loadavg"}]: the records' conditions grouped by what was asked (repeats, load, cores), with
    the dates and the range of what was sampled; records from before conditions are left out."""
    groups: dict[tuple, list[dict]] = {}
    for r in summary.values():
        c = r.get("conditions")
        if c:
            key = (c["repeats"], c["load"], c["load_processes"], c["cores"])
            groups.setdefault(key, []).append(c)
    spread = lambda xs: (min(xs), max(xs)) if xs else None
    return [
        {
            "repeats": key[0],
            "load": key[1],
            "load_processes": key[2],
            "cores": key[3],
            "tasks": len(cs),
            "dates": sorted({c["date"] for c in cs}),
            "coverage": spread([c["load_coverage"] for c in cs if c["load_coverage"] is not None]),
            "loadavg": spread([c["loadavg"] for c in cs if c["loadavg"] is not None]),
        }
        for key, cs in sorted(groups.items())
    ]


def validation_config(task: Task, repeats: int, load: str = "none") -> dict[str, Any]:
    """The config a task's validation.json records the digest of ("inputs", stamps.py): what
    says the record is of this task as it is now (scripts/promote_tasks.py checks it too). A
    validation under load is another one; without, the config is what it was before load=."""
    return inputs.canonical(
        {"task": task.to_json(), "repeats": repeats, "load": load}, {"load": "none"}
    )


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    repeats = ctx.options.repeats  # a whole number >= 1 (options.py)
    load = ctx.options.load
    names = []
    for task in ctx.build_order():
        config = validation_config(task, repeats, load)
        names.append(validate_task_name(ctx.benchmark.name, task.instance_id))
        yield stamps.stage_task(
            basename=VALIDATE,
            name=validate_subtask(ctx.benchmark.name, task.instance_id),
            doc=f"build base and fix of {task.instance_id}, run its tests {repeats}× each"
            + (f", under load={load}" if load != "none" else ""),
            action=validate_task,
            config=config,
            args=[
                ctx.layout,
                task,
                repeats,
                validate_task_name(ctx.benchmark.name, task.instance_id),
            ],
            task_dep=[
                repo_task(task.repo),
                tests_task_name(task.tests_tree_id),
                base_task_name(task),
            ],
            targets=[ctx.layout.validation_dir(task.instance_id) / "validation.json"],
            also_current=[(classification_current, [ctx.layout, task])],
        )
    yield {
        "basename": VALIDATION,
        "name": ctx.benchmark.name,
        "doc": "validation.json and validation.md of the run",
        "actions": [(write_summary, [ctx.layout, ctx.tasks, repeats])],
        "file_dep": [
            str(ctx.layout.validation_dir(t.instance_id) / "validation.json") for t in ctx.tasks
        ]
        + [str(template_path(ctx.layout.templates_dir))],
        "task_dep": names,
        "targets": [str(ctx.layout.validation_json), str(ctx.layout.validation_md)],
        "uptodate": [config_changed({"tasks": [t.instance_id for t in ctx.tasks]})],
        "verbosity": 2,
    }
    yield from command_tasks(ctx)


def command_tasks(ctx: "StageContext") -> Iterator[dict]:
    """`<bench>:validate`, what users run; alone for a plain `doit list`, which then needs
    neither the units nor their build order (git, when the plan is not in the cache)."""
    yield {
        "basename": ctx.benchmark.name,
        "name": "validate",
        "doc": f"check that every task of {ctx.benchmark.name} tells the fix from no fix",
        "actions": None,
        "task_dep": [task_name(VALIDATION, ctx.benchmark.name)],
    }
