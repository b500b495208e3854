"""Stages 8 and 7' of a SWE-bench benchmark: per mode, ``results.jsonl`` and the
``predictions.jsonl`` the official harness reads; and, where this machine has Docker and the
``swebench`` package, ``<bench>:grade``, which runs the harness's command itself.

A SWE-bench unit has no build, prove, strict or grade stage here (pipeline.py leaves them out):
the agent's patch goes to predictions.jsonl as it is, and the verdict is the official harness's
report (harness.py), which the report reads (report/evaluation.py). The results task prints the
command that grades each mode's predictions (one line, with its exact arguments); the report
repeats it for each mode not graded yet.

``results.jsonl`` row of a SWE-bench unit: results/stage.py's row without the fields of a grade::

    {"instance_id", "mode", "run", "benchmark_version", "graded_by": "swebench",
     "outcome": "infra_error" | "not_run" | "contaminated"  # the agent's run is not scored
                | null,                  # otherwise: the official harness's report decides
     "status": null, "resolved": null,
     "local_status": "resolved" | "unresolved" | "patch_failed" | "not_built" | null,
     "local_resolved": bool | null,         # the local verdict (verdict.py, swe_local=1), labelled
                                            # "local": never the official verdict's fields; null
                                            # where the task's local verdict failed validation
     "local_validated": bool | null,        # gold resolved and none did not, locally, in
                                            # tasks/swebench-local-validation.jsonl; null: not there
     ... results.unit_fields: agent status, error, commands, model, version, isolation, web
         tools, flags, blocked, trajectory, agent seconds, cost, tokens, patch}
"""

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from doit.tools import config_changed

from ..core import jsonio
from ..core.console import say, say_to_the_run
from ..core.errors import UserError, failing_on_user_error
from ..core.layout import Layout
from ..core.outcomes import CONTAMINATED, UNFINISHED_AGENT
from ..core.records import read_record, versioned
from ..core.stamps import TaskDict
from ..core.tasknames import AGENT, PATCH, RESULTS, results_subtask, task_name, unit_name
from ..results.stage import model_name, prediction, unit_fields
from ..run.benchmark import AnyTask, Benchmark
from ..run.modes import AgentMode, Mode
from ..run.swebench import SweTask
from ..run.swebench_pro import is_pro
from . import envs, harness, pro, verdict

if TYPE_CHECKING:
    from ..run.context import StageContext

GRADE_SUBTASK = "grade"  # <bench>:grade


def result_row(layout: Layout, mode: Mode, task: SweTask, version: str | None = None) -> dict:
    """The results.jsonl row of a SWE-bench unit (module docstring); version: the task file's,
    which the row is written under (there is no grade.json to stamp it)."""
    row = dict(
        unit_fields(layout, mode, task.instance_id),
        status=None,
        resolved=None,
        graded_by="swebench",
    )
    unscored = (
        row["agent_status"]
        if row["agent_status"] in UNFINISHED_AGENT
        else CONTAMINATED
        if row["contaminated"]
        else None
    )
    local = read_record(layout.local_verdict_json(mode.name, task.instance_id)) or {}
    validated = verdict.validated(layout).get(task.instance_id) if local else None
    return dict(
        row,
        outcome=unscored,
        benchmark_version=version,
        local_status=local.get("status"),
        # A task whose gold fails locally (tests that need the internet) tells nothing of a patch.
        local_resolved=local.get("resolved") if validated is not False else None,
        local_validated=validated,
    )


def predictions_name(layout: Layout, mode: Mode, ids: Iterable[str]) -> str:
    """The model_name_or_path of a mode's predictions (the official report and its log folders
    are named after it): ``nginx-eval/<mode>``, then the model the agents of tasks `ids` were
    given, as their agent.json records it (a phase's ``model``: set only when the command that
    ran passed the mode's model); several models are joined with "+". No model when no command
    passed one: with ``AGENT=`` the mode's configured model never ran, and the name does not
    claim it."""
    models: set[str] = set()
    for iid in ids:
        agent = read_record(layout.agent_json(mode.name, iid)) or {}
        models.update(p["model"] for p in agent.get("phases") or [] if p.get("model"))
    return f"nginx-eval/{mode.name}" + (f"/{'+'.join(sorted(models))}" if models else "")


def predictions_of(layout: Layout, mode: Mode, tasks: Iterable[AnyTask]) -> list[dict]:
    """predictions.jsonl's rows: every task of the mode with a patch, in the benchmark's order,
    named by predictions_name."""
    ids = [
        t.instance_id
        for t in tasks
        if mode.covers(t.instance_id) and layout.patch_json(mode.name, t.instance_id).exists()
    ]
    name = predictions_name(layout, mode, ids)
    rows = []
    for iid in ids:
        path = layout.model_patch(mode.name, iid)
        patch = path.read_bytes() if path.exists() else b""
        rows.append(dict(prediction(mode, iid, patch), model_name_or_path=name))
    return rows


def command_for(
    layout: Layout,
    bench: Benchmark,
    mode: str,
    python: str = "python",
    workers: int = harness.PRINTED_WORKERS,
) -> list[str]:
    """The command that grades the predictions of mode `mode` as they are now (harness.py; for
    SWE-bench Pro, its patches.json: pro.py). workers: --max_workers; printed for another
    machine, the harness's own default (this machine's cores say nothing of the grading
    machine's)."""
    if is_pro(bench.dataset):
        patches = layout.pro_patches_json(mode)
        out = pro.output_name(layout.run, mode, harness.predictions_digest(patches))
        return pro.grading_command(
            layout.pro_samples_jsonl(mode), patches, layout.evaluation_dir / out, python=python
        )
    path = layout.predictions_jsonl(mode)
    rid = harness.run_id(layout.run, mode, harness.predictions_digest(path))
    assert bench.dataset is not None  # a SWE-bench benchmark names its dataset (benchmark.py)
    return harness.grading_command(bench.dataset, path, rid, layout.evaluation_dir, workers, python)


def write_summary(layout: Layout, mode: Mode, bench: Benchmark) -> None:
    """results.jsonl and predictions.jsonl of a SWE-bench mode, from the per-task files of every
    task it has a patch for in the run; then the line of the command that grades them."""
    rows = [
        versioned(result_row(layout, mode, t, bench.version))
        for t in bench.tasks
        if isinstance(t, SweTask)  # every task of a SWE-bench benchmark
        and mode.covers(t.instance_id)
        and layout.patch_json(mode.name, t.instance_id).exists()
    ]
    preds = predictions_of(layout, mode, bench.tasks)
    problems = harness.prediction_problems(preds)
    if problems:  # our own rows: a bug here, not the user's
        raise RuntimeError(f"predictions of {mode.name} the harness would refuse: {problems[0]}")
    jsonio.write_jsonl(layout.results_jsonl(mode.name), rows)
    path = layout.predictions_jsonl(mode.name)
    _write_if_changed(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in preds))
    if is_pro(bench.dataset):
        write_pro_files(layout, mode, bench, preds)
        say_to_the_run(
            f"{bench.name}:{mode.name}: {len(preds)} patch(es) in "
            f"{layout.pro_patches_json(mode.name)}; grade them where Docker or Modal is, in a "
            f"checkout of {pro.HARNESS_REPO} (commit {pro.HARNESS_COMMIT[:7]}): "
            f"{harness.command_line(command_for(layout, bench, mode.name))} "
            f"({pro.WORKERS_NOTE})"
        )
        return
    say_to_the_run(
        f"{bench.name}:{mode.name}: {len(preds)} prediction(s) in {path}; grade "
        f"them where Docker is: "
        f"{harness.command_line(command_for(layout, bench, mode.name))} "
        f"({harness.WORKERS_NOTE})"
    )


def _write_if_changed(path: Path, text: str) -> None:
    """Rewritten only when it changes: a report of the official harness is current for the
    predictions it graded (harness.choose_report)."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        jsonio.write_text(path, text)


def write_pro_files(layout: Layout, mode: Mode, bench: Benchmark, preds: list[dict]) -> None:
    """patches.json and samples.jsonl of a SWE-bench Pro mode (pro.py), from its predictions."""
    tag = pro.prefix(layout.run, mode.name)
    patches = [
        {"instance_id": p["instance_id"], "patch": p["model_patch"], "prefix": tag} for p in preds
    ]
    problems = pro.patch_problems(patches)
    if problems:  # our own rows: a bug here, not the user's
        raise RuntimeError(f"patches of {mode.name} the Pro harness would refuse: {problems[0]}")
    ids = {p["instance_id"] for p in preds}
    samples = [
        pro.sample(t) for t in bench.tasks if isinstance(t, SweTask) and t.instance_id in ids
    ]
    _write_if_changed(layout.pro_patches_json(mode.name), json.dumps(patches, indent=1) + "\n")
    _write_if_changed(
        layout.pro_samples_jsonl(mode.name),
        "".join(json.dumps(s, sort_keys=True) + "\n" for s in samples),
    )


def results_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    for bench, mode, tasks in ctx.mode_groups():
        files, deps = [], []
        for t in tasks:
            unit = unit_name(bench, mode, t)
            files.append(str(ctx.layout.patch_json(mode.name, t.instance_id)))
            deps.append(task_name(PATCH, unit))
            if isinstance(mode, AgentMode):
                files.append(str(ctx.layout.agent_json(mode.name, t.instance_id)))
                deps.append(task_name(AGENT, unit))
        yield {
            "basename": RESULTS,
            "name": results_subtask(bench.name, mode.name),
            "doc": f"results.jsonl and predictions.jsonl of {mode.name} (SWE-bench)",
            "actions": [(failing_on_user_error, [write_summary, ctx.layout, mode, bench])],
            "file_dep": files,
            "task_dep": deps,
            "verbosity": 2,
            "targets": [
                str(ctx.layout.results_jsonl(mode.name)),
                str(ctx.layout.predictions_jsonl(mode.name)),
            ]
            + (
                [
                    str(ctx.layout.pro_patches_json(mode.name)),
                    str(ctx.layout.pro_samples_jsonl(mode.name)),
                ]
                if is_pro(bench.dataset)
                else []
            ),
            "uptodate": [
                config_changed(
                    {
                        "tasks": [t.instance_id for t in tasks],
                        "model": model_name(mode),
                        "kind": bench.kind,
                        "version": bench.version,
                    }
                )
            ],
        }


# -- grading here (optional) ----------------------------------------------------------------------
def docker_problem(environ: dict | None = None) -> str | None:
    """Why no Docker engine answers here (the official harness needs one), or None."""
    env = os.environ if environ is None else environ
    host = env.get("DOCKER_HOST")
    if not host and not Path("/var/run/docker.sock").exists():
        return "no Docker engine (DOCKER_HOST is unset and /var/run/docker.sock does not exist)"
    try:
        import docker

        docker.from_env(timeout=5).ping()
    except ImportError:
        return "the Python package docker is not installed (pip install docker)"
    except Exception as e:  # the engine, not us: say what it said
        return f"the Docker engine at {host or '/var/run/docker.sock'} does not answer ({e})"
    return None


def grading_problem(environ: dict | None = None) -> str | None:
    """Why this machine cannot run the official harness, or None: the swebench package (in this
    Python) and a Docker engine."""
    if importlib.util.find_spec("swebench") is None:
        return f"the swebench package is not installed in {sys.executable} (pip install swebench)"
    return docker_problem(environ)


def graded(layout: Layout, bench: Benchmark, modes: list) -> bool:
    """doit uptodate of <bench>:grade: every mode's current predictions have their report."""
    for mode in modes:
        path = layout.predictions_jsonl(mode.name)
        if not path.exists():
            return False
        model = harness.predictions_model(path)
        if model is None:
            return False
        found, _, _ = harness.usable_reports(harness.reports_of(layout.evaluation_dir, model))
        chosen, _, _ = harness.choose_report(
            found, harness.predictions_digest(path), path.stat().st_mtime
        )
        if chosen is None:
            return False
    return True


def grade_modes(layout: Layout, bench: Benchmark, modes: list) -> None:
    """Run the official harness on each mode's predictions not graded yet, in the evaluation
    directory (its logs/ go there too)."""
    layout.evaluation_dir.mkdir(parents=True, exist_ok=True)
    for mode in modes:
        if graded(layout, bench, [mode]):
            continue
        words = command_for(
            layout, bench, mode.name, python=sys.executable, workers=harness.local_workers()
        )
        say(f"{bench.name}:{mode.name}: {harness.command_line(words)}")
        done = subprocess.run(words, cwd=layout.evaluation_dir)
        if done.returncode != 0:
            raise UserError(
                f"the official harness exited with {done.returncode} for mode "
                f"{mode.name} (its logs: {layout.evaluation_dir / 'logs'})"
            )


def grade_task(ctx: "StageContext") -> Iterator[TaskDict]:
    """``<bench>:grade``, only where grading_problem() is None; none for SWE-bench Pro, whose
    harness runs in a checkout of its own repository (its printed command)."""
    modes = [m for m in ctx.group_mode_list()]
    if is_pro(getattr(ctx.benchmark, "dataset", None)) or grading_problem() is not None:
        return
    yield {
        "basename": ctx.benchmark.name,
        "name": GRADE_SUBTASK,
        "doc": f"grade {ctx.benchmark.name}'s predictions with the official SWE-bench "
        "harness (Docker)",
        "actions": [(failing_on_user_error, [grade_modes, ctx.layout, ctx.benchmark, modes])],
        "task_dep": [
            task_name(RESULTS, results_subtask(ctx.benchmark.name, m.name)) for m in modes
        ],
        "uptodate": [(graded, [ctx.layout, ctx.benchmark, modes])],
        "verbosity": 2,
    }


# -- the environments and local verdicts (swe_local=1; envs.py, verdict.py) ----------------------
LOCAL = "local-verdict"


def local_enabled(ctx: "StageContext") -> bool:
    """Whether the run builds environments and local verdicts: swe_local=1 on SWE-bench Verified
    (UserError when the swebench package cannot give the specifications)."""
    if not ctx.options.swe_local or is_pro(getattr(ctx.benchmark, "dataset", None)):
        return False
    problem = envs.missing_package()
    if problem:
        raise UserError(f"swe_local=1: {problem}")
    return True


def env_current(layout: Layout, task: SweTask, shown: Iterable[SweTask] = ()) -> bool:
    """doit uptodate of an environment's task: its env.json is of the environment as it would be
    built now (the same specification, root filesystem and setup commit), and so is the
    install at the base commit of each task in `shown` (envs.build_instance)."""
    return envs.env_record(task, layout) is not None and all(
        envs.instance_of(t, layout) is None or envs.instance_record(t, layout) is not None
        for t in shown
    )


def env_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    """``swe-env:<owner>+<name>-<version>``: one per environment the run's tasks need, with the
    install at each base commit an isolated agent's sandbox shows (what the agent tests in)."""
    firsts: dict[str, SweTask] = {}
    shown: dict[str, dict[str, SweTask]] = {}
    for _, mode, task in ctx.units():
        if isinstance(task, SweTask):
            name = envs.env_name(task.repo, task.version)
            firsts.setdefault(name, task)
            if isinstance(mode, AgentMode) and mode.isolation != "none":
                shown.setdefault(name, {})[task.instance_id] = task
    for name, task in firsts.items():
        tasks = list(shown.get(name, {}).values())
        yield {
            "basename": envs.ENV_BASENAME,
            "name": name,
            "doc": f"the Python environment of {task.repo} {task.version} (SWE-bench)",
            "actions": [(failing_on_user_error, [build_env, ctx.layout, task, tasks])],
            "uptodate": [(env_current, [ctx.layout, task, tasks])],
            "verbosity": 2,
        }


def build_env(layout: Layout, task: SweTask, shown: Iterable[SweTask] = ()) -> None:
    rec = envs.build(layout, task)
    if rec["status"] == envs.BUILT:
        say(f"{envs.env_name(task.repo, task.version)}: built in {rec['seconds']} s")
    else:
        say(f"{envs.env_name(task.repo, task.version)}: cannot be built here: {rec['reason']}")
        return
    for t in shown:
        inst = envs.build_instance(layout, t)
        if inst and inst["status"] != envs.BUILT:
            say(f"{t.instance_id}: its install at the base commit failed: {inst['reason']}")


def grade_locally(layout: Layout, mode: Mode, task: SweTask) -> None:
    path = layout.model_patch(mode.name, task.instance_id)
    patch = path.read_bytes() if path.exists() else b""
    rec = verdict.local_verdict(
        layout,
        task,
        patch,
        mode.name,
        layout.local_verdict_json(mode.name, task.instance_id),
        layout.local_verdict_log(mode.name, task.instance_id),
    )
    say(f"{task.instance_id} ({mode.name}): local verdict {rec['status']}")


def local_verdict_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    """``local-verdict:<unit>``: the unit's patch graded in its environment."""
    for bench, mode, task in ctx.units():
        if not isinstance(task, SweTask):
            continue
        unit = unit_name(bench, mode, task)
        yield {
            "basename": LOCAL,
            "name": unit,
            "doc": f"the local verdict of {task.instance_id} ({mode.name})",
            "actions": [(failing_on_user_error, [grade_locally, ctx.layout, mode, task])],
            "file_dep": [str(ctx.layout.patch_json(mode.name, task.instance_id))],
            "task_dep": [task_name(PATCH, unit), envs.env_task_name(task)],
            "targets": [str(ctx.layout.local_verdict_json(mode.name, task.instance_id))],
            "uptodate": [
                config_changed(
                    {
                        "test_patch": jsonio.digest(task.test_patch),
                        "tests": [task.fail_to_pass, task.pass_to_pass],
                        "verdict": verdict.VERDICT_VERSION,
                    }
                )
            ],
            "verbosity": 2,
        }


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    local = local_enabled(ctx)
    if local:
        yield from env_tasks(ctx)
        yield from local_verdict_tasks(ctx)
    for t in results_tasks(ctx):
        if local:  # results.jsonl shows the local verdicts
            if ctx.layout.swebench_local_validation.exists():
                t["file_dep"] = [*t["file_dep"], str(ctx.layout.swebench_local_validation)]
            t["task_dep"] = [
                *t["task_dep"],
                *(
                    task_name(LOCAL, unit_name(ctx.benchmark, m, x))
                    for _, m, x in ctx.units()
                    if results_subtask(ctx.benchmark.name, m.name) == t["name"]
                ),
            ]
        yield t
    yield from grade_task(ctx)
