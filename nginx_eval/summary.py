"""Per mode: ``results.jsonl`` (a row per task) and SWE-bench ``predictions.jsonl``.

Both are rebuilt from the per-task files of the run's benchmark (a row for every task the mode
graded in this run, in the benchmark's order), never from the command's selection alone.

results.jsonl row::

    {"instance_id", "mode", "run", "status", "resolved", "agent_status", "build_status",
     "build_kind", "build_seconds", "agent_seconds", "cost_usd", "tokens",
     "fail_to_pass": {"passed": n, "failed": n}, "pass_to_pass": {...},
     "patch": {"sha256", "files", "lines_added", "lines_removed"}, "env_errors": [...]}

predictions.jsonl row: {"instance_id", "model_name_or_path", "model_patch"}.
"""

from doit.tools import config_changed

from . import jsonio, prove


def result_row(layout, mode, task):
    iid = task.instance_id
    grade = jsonio.read_json(layout.grade_json(mode.name, iid))
    build = jsonio.read_json(layout.build_json(mode.name, iid)) or {}
    patch = jsonio.read_json(layout.patch_json(mode.name, iid)) or {}
    agent = jsonio.read_json(layout.agent_json(mode.name, iid)) or {}
    return {
        "instance_id": iid, "mode": mode.name, "run": layout.run,
        "status": grade["status"], "resolved": grade["resolved"],
        "agent_status": agent.get("status"), "build_status": build.get("status"),
        "build_kind": build.get("kind"), "build_seconds": build.get("seconds"),
        "agent_seconds": agent.get("wall_seconds"), "cost_usd": agent.get("cost_usd"),
        "tokens": agent.get("tokens"),
        "fail_to_pass": {k: len(v) for k, v in grade["fail_to_pass"].items()},
        "pass_to_pass": {k: len(v) for k, v in grade["pass_to_pass"].items()},
        "patch": {k: patch.get(k) for k in ("sha256", "files", "lines_added", "lines_removed")},
        "env_errors": grade["env_errors"],
    }


def model_name(mode):
    return f"nginx-eval/{mode.name}" + (f"/{mode.model}" if mode.model else "")


def write_summary(layout, mode, bench_tasks):
    """Both files, rebuilt from the per-task files of every task of the benchmark that this mode
    has graded in the run: a command that scored a few tasks never drops the others' rows."""
    rows, preds = [], []
    for task in bench_tasks:
        if not layout.grade_json(mode.name, task.instance_id).exists():
            continue
        rows.append(result_row(layout, mode, task))
        patch_path = layout.model_patch(mode.name, task.instance_id)
        patch = patch_path.read_bytes() if patch_path.exists() else b""
        preds.append({"instance_id": task.instance_id, "model_name_or_path": model_name(mode),
                      "model_patch": patch.decode("utf-8", "replace")})
    jsonio.write_jsonl(layout.results_jsonl(mode.name), rows)
    jsonio.write_jsonl(layout.predictions_jsonl(mode.name), preds)


def start_order(ctx, bench, mode, ids):
    """The results task's dependencies, in the order doit should start them.

    doit explores this list breadth first (a task's dependencies after the task) and stops
    exploring while a task that could run waits for a free worker; a task it has not explored
    yet cannot start when its dependencies are done. So the tasks that only wait come first:
    test trees (milliseconds each), grades, proves, patches and the base builds that start from
    a sibling (they wait for it). The builds come last: through them doit reaches
    the clean base builds, which can start at once and hold it there. Within a stage, build
    order. doit adds a task for each file_dep too, but in the order of a set, which changes from
    one process to the next; listed here, they keep this order.
    """
    units = [ctx.unit_name(bench, mode, t) for t in ctx.build_order() if t.instance_id in ids]
    waiting_bases = [name for name, task, parent in ctx.base_build_plan()
                     if parent and task.instance_id in ids]
    return (prove.tests_task_names(ctx.build_order())
            + [f"{stage}:{u}" for stage in ("grade", "prove", "patch") for u in units]
            + waiting_bases + [f"build:{u}" for u in units])


def gen_tasks(ctx):
    for bench, mode, tasks in ctx.mode_groups():
        ids = {t.instance_id for t in tasks}
        deps = []
        for t in tasks:
            deps += [str(ctx.layout.grade_json(mode.name, t.instance_id)),
                     str(ctx.layout.patch_json(mode.name, t.instance_id)),
                     str(ctx.layout.build_json(mode.name, t.instance_id))]
        yield {
            "basename": "results",
            "name": f"{bench.name}/{mode.name}",
            "doc": f"results.jsonl and predictions.jsonl of {mode.name}",
            "actions": [(write_summary, [ctx.layout, mode, bench.tasks])],
            "file_dep": deps,
            # The order tasks start in follows this list (see scheduling.py).
            "task_dep": start_order(ctx, bench, mode, ids),
            "targets": [str(ctx.layout.results_jsonl(mode.name)),
                        str(ctx.layout.predictions_jsonl(mode.name))],
            "uptodate": [config_changed({"tasks": [t.instance_id for t in tasks],
                                         "model": model_name(mode)})],
        }
