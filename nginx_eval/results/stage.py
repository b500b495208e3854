"""Per mode: ``results.jsonl`` (a row per task) and SWE-bench ``predictions.jsonl``.

Both are rebuilt from the per-task files of the run's benchmark (a row for every task the mode
graded in this run, in the benchmark's order), never from the command's selection alone. A
predictions mode has rows only for the tasks its file has a row for (its ``instances``). A
SWE-bench benchmark's results tasks are swebench/stage.py's.

results.jsonl row (core/records.py: ResultRow, where each field is explained)::

    {"instance_id", "mode", "run", "benchmark_version",
     "outcome",                         # core/outcomes.py: the task's outcome in the mode
     "status", "resolved", "strict", "strict_reason",      # grade.json's
     "agent_status", "agent_error", "agent_commands", "agent_model", "agent_version",
     "isolation", "web_tools", "contaminated", "flags", "blocked", "trajectory",   # agent.json's
     "build_status", "build_kind", "build_seconds", "agent_seconds", "cost_usd", "tokens",
     "cost_source", "self_reported_cost_usd", "cost_difference",          # agent.json's
     "fail_to_pass": {"passed": n, "failed": n}, "pass_to_pass": {...},
     "patch": {"sha256", "files", "lines_added", "lines_removed"}, "env_errors": [...],
     "first_run_status", "changed_on_rerun"}          # only when the grade had reruns

predictions.jsonl row (records.Prediction): {"instance_id", "model_name_or_path", "model_patch"}.
"""

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from doit.tools import config_changed

from ..core import jsonio
from ..core.errors import failing_on_user_error
from ..core.layout import Layout
from ..core.outcomes import outcome
from ..core.records import (
    AgentJson,
    BuildJson,
    Counts,
    GradeJson,
    PatchFigures,
    PatchJson,
    Prediction,
    ResultRow,
    Split,
    UnitFields,
    read_record,
    versioned,
)
from ..core.stamps import TaskDict
from ..core.tasknames import RESULTS, results_subtask
from ..run.benchmark import AnyTask
from ..run.modes import AgentMode, Mode

if TYPE_CHECKING:
    from ..run.context import StageContext


def _flag_counts(agent: Mapping[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in agent.get("flags") or []:
        counts[f["kind"]] = counts.get(f["kind"], 0) + 1
    return counts


def patch_figures(patch: PatchJson | None) -> PatchFigures:
    """The row's figures of patch.json (None each without one)."""
    return {
        "sha256": patch.get("sha256") if patch else None,
        "files": patch.get("files") if patch else None,
        "lines_added": patch.get("lines_added") if patch else None,
        "lines_removed": patch.get("lines_removed") if patch else None,
    }


def unit_fields(layout: Layout, mode: Mode, iid: str) -> UnitFields:
    """The fields of a row that come from the unit's agent.json, patch.json and build.json (a
    SWE-bench row has these and no grade: swebench/stage.py). A file absent: its fields None."""
    build: BuildJson | dict = read_record(layout.build_json(mode.name, iid)) or {}
    patch: PatchJson | None = read_record(layout.patch_json(mode.name, iid))
    agent: AgentJson | dict = read_record(layout.agent_json(mode.name, iid)) or {}
    phases = agent.get("phases") or []
    commands = [[p["name"], p["command_template"]] for p in phases if "command_template" in p]
    return {
        "instance_id": iid,
        "mode": mode.name,
        "run": layout.run,
        "agent_status": agent.get("status"),
        "build_status": build.get("status"),
        "agent_error": (
            (agent.get("error") or agent["status"])
            if agent.get("status") not in (None, "completed")
            else None
        ),
        "agent_commands": commands or None,
        "agent_model": next((p.get("model") for p in phases if p.get("model")), None),
        "agent_version": agent.get("agent_version"),
        "trajectory": agent.get("trajectory"),
        "isolation": agent.get("isolation", "none") if agent else None,
        "web_tools": agent.get("web_tools", True if agent.get("agent_version") else None),
        "contaminated": bool(agent.get("contaminated")),
        "flags": _flag_counts(agent) if agent else None,
        "blocked": sum(len(p.get("blocked") or []) for p in phases) if agent else None,
        "build_kind": build.get("kind"),
        "build_seconds": build.get("seconds"),
        "agent_seconds": agent.get("wall_seconds"),
        "cost_usd": agent.get("cost_usd"),
        "tokens": agent.get("tokens"),
        "cost_source": agent.get("cost_source"),
        "self_reported_cost_usd": (agent.get("metered") or {}).get("self_reported_cost_usd"),
        "cost_difference": (agent.get("metered") or {}).get("difference"),
        "patch": patch_figures(patch),
        "score": mode.score if isinstance(mode, AgentMode) else None,
        "loop": agent.get("loop"),
        "phase_figures": [
            {
                "name": p["name"],
                "program": p.get("program"),
                "model": p.get("model"),
                "seconds": p.get("wall_seconds"),
                "cost_usd": p.get("cost_usd"),
                "fallback": bool(p.get("fallback")),
                "loop": "iteration" in p,
            }
            for p in phases
        ]
        or None,
    }


def counts(split: Split) -> Counts:
    return {"passed": len(split["passed"]), "failed": len(split["failed"])}


def result_row(layout: Layout, mode: Mode, task: AnyTask) -> ResultRow:
    iid = task.instance_id
    grade: GradeJson = read_record(layout.grade_json(mode.name, iid))
    unit = unit_fields(layout, mode, iid)
    row: ResultRow = {
        **unit,
        "benchmark_version": grade.get("benchmark_version"),
        "outcome": outcome({**unit, "status": grade["status"], "resolved": grade["resolved"]}),
        "status": grade["status"],
        "resolved": grade["resolved"],
        "strict": grade.get("strict"),
        "strict_reason": grade.get("strict_reason"),
        "fail_to_pass": counts(grade["fail_to_pass"]),
        "pass_to_pass": counts(grade["pass_to_pass"]),
        "env_errors": grade["env_errors"],
    }
    if "first_run_status" in grade:  # rerun_failed=1; rows of other runs stay as they were
        row["first_run_status"] = grade["first_run_status"]
        row["changed_on_rerun"] = grade.get("changed_on_rerun", [])
    return row


def model_name(mode: Mode) -> str:
    """predictions.jsonl's model_name_or_path (the official SWE-bench report is named after it)."""
    return f"nginx-eval/{mode.name}" + (f"/{mode.model}" if mode.model else "")


def prediction(mode: Mode, iid: str, patch: bytes) -> Prediction:
    """A predictions.jsonl row (swebench/harness.py: PREDICTION_FIELDS)."""
    return {
        "instance_id": iid,
        "model_name_or_path": model_name(mode),
        "model_patch": patch.decode("utf-8", "replace"),
    }


def write_summary(layout: Layout, mode: Mode, bench_tasks: Iterable[AnyTask]) -> None:
    """Both files, rebuilt from the per-task files of every task of the benchmark that this mode
    has graded in the run: a command that scored a few tasks never drops the others' rows."""
    rows: list[ResultRow] = []
    preds: list[Prediction] = []
    for task in bench_tasks:
        if not mode.covers(task.instance_id):
            continue  # a predictions file without this task: reported as missing
        if not layout.grade_json(mode.name, task.instance_id).exists():
            continue
        rows.append(versioned(result_row(layout, mode, task)))
        patch_path = layout.model_patch(mode.name, task.instance_id)
        patch = patch_path.read_bytes() if patch_path.exists() else b""
        preds.append(prediction(mode, task.instance_id, patch))
    jsonio.write_jsonl(layout.results_jsonl(mode.name), rows)
    jsonio.write_jsonl(layout.predictions_jsonl(mode.name), preds)


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    for bench, mode, tasks in ctx.mode_groups():
        ids = {t.instance_id for t in tasks}
        deps: list[str] = []
        for t in tasks:
            deps += [
                str(ctx.layout.grade_json(mode.name, t.instance_id)),
                str(ctx.layout.patch_json(mode.name, t.instance_id)),
                str(ctx.layout.build_json(mode.name, t.instance_id)),
            ]
        yield {
            "basename": RESULTS,
            "name": results_subtask(bench.name, mode.name),
            "doc": f"results.jsonl and predictions.jsonl of {mode.name}",
            # a record it cannot read: one line
            "actions": [(failing_on_user_error, [write_summary, ctx.layout, mode, bench.tasks])],
            "file_dep": deps,
            # The order tasks start in follows this list (see scheduling.py).
            "task_dep": ctx.start_order(bench, mode, ids),
            "targets": [
                str(ctx.layout.results_jsonl(mode.name)),
                str(ctx.layout.predictions_jsonl(mode.name)),
            ],
            "uptodate": [
                config_changed({"tasks": [t.instance_id for t in tasks], "model": model_name(mode)})
            ],
        }
