"""The report of a SWE-bench run: each mode's results.jsonl rows with the official harness's
verdicts (swebench/harness.py), whether and by which report each mode is graded, and a line for
each piece of bad input. The report (data.collect) and the cross-benchmark section (cross.py)
read a SWE-bench run through ``evaluate``; everything after it is the report of any run.

Where the reports are: ``results/<run>/evaluation/`` (Layout.evaluation_dir), the
``--report_dir`` of the command the results print; a report made on another machine is copied
there. A mode's reports are the files named after its predictions' model_name_or_path
(harness.reports_of); the one that grades the current predictions is used (harness.choose_report).

A row's outcome (core/outcomes.py's vocabulary): an agent run that is not scored keeps its
outcome (infra_error, not_run, contaminated); an instance of the report's error_ids is
``eval_error``, not scored either; otherwise resolved or not as the report says (empty_patch_ids
are unresolved), and a task that is not resolved after an agent timeout or failure is
``timeout`` or ``agent_error``, as for nginx.

Bad input is one warning line each, and nothing else of the report is lost: a mode with
predictions and no report is not graded (its command is in the report); a file with a report's
name that is no report (no id lists) is not used, and is set aside before a report is chosen,
so it never keeps a real one from being used; a report of other or older predictions, and two
reports of the current ones (neither), are not used; report ids that are not tasks of the task
file are not scored; a prediction the report has no verdict for counts as missing (no result:
in no rate, as a task without a result).
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.layout import Layout
from ..core.outcomes import EVAL_ERROR, NOT_SCORED, outcome
from ..run.benchmark import Benchmark
from ..run.swebench_pro import is_pro
from ..swebench import harness, pro

# The outcomes a scored SWE-bench row can have (the report's columns for such a run): the
# harness's verdict, or the agent's timeout or failure when it did not resolve the task.
SCORED_OUTCOMES = ("resolved", "unresolved", "timeout", "agent_error")


@dataclass
class Evaluation:
    rows: dict  # {graded mode: {iid: row, outcome set}}
    modes: list = field(default_factory=list)  # per mode with predictions: MODE below
    warnings: list = field(default_factory=list)

    # MODE: {"mode", "model_name_or_path", "predictions", "report": file name | None,
    #        "command": the grading command | None (graded), "verdicts": {verdict: n},
    #        "not_in_tasks": [ids], "no_verdict": [ids], "infra_failure_ids": [ids]}


def report_files(layout: Layout) -> list:
    """The official reports of the run (the report's inputs and file dependencies): Verified's
    run reports, and the eval_results.json of each SWE-bench Pro output folder (swebench/pro.py)."""
    folder = layout.evaluation_dir
    if not folder.is_dir():
        return []
    return sorted(folder.glob("*.json")) + sorted(folder.glob(f"*/{pro.RESULTS}"))


def judged(row: dict, verdict: str) -> dict:
    """`row` (a SWE-bench results.jsonl row) with the report's `verdict` (harness.verdicts)."""
    if row.get("outcome") in NOT_SCORED:
        return row
    if verdict == harness.ERROR:
        return dict(row, status=EVAL_ERROR, resolved=False, outcome=EVAL_ERROR)
    resolved = verdict == harness.RESOLVED
    graded = dict(row, resolved=resolved, status="resolved" if resolved else "unresolved")
    return dict(graded, outcome=outcome(graded))


_NOT_GRADED = (
    "mode {mode}: not graded by the official harness yet; left out of the tables (its command "
    "is in the SWE-bench section)"
)


def _file(path: Path) -> str:
    """A report's name in a warning: a Pro grading's eval_results.json with its folder."""
    return f"{path.parent.name}/{path.name}" if path.name == pro.RESULTS else path.name


def _shown(ids: list[str], most: int = 5) -> str:
    return ", ".join(ids[:most]) + (", ..." if len(ids) > most else "")


def _grade_mode(
    layout: Layout,
    bench: Benchmark,
    mode: str,
    by_id: dict[str, dict],
    known: set[str],
    command: str | None,
) -> tuple[dict[str, dict] | None, dict[str, Any], list[str]]:
    """(rows with verdicts | None when not graded, MODE, warnings) of one mode."""
    path = layout.predictions_jsonl(mode)
    model = harness.predictions_model(path)
    if is_pro(bench.dataset):  # graded by the Pro harness (swebench/pro.py): its patches.json
        path = layout.pro_patches_json(mode)
        model = pro.prefix(layout.run, mode) if path.exists() else None
    info: dict[str, Any] = {
        "mode": mode,
        "model_name_or_path": model,
        "predictions": str(path),
        "report": None,
        "command": command,
        "verdicts": {},
        "not_in_tasks": [],
        "no_verdict": [],
        "infra_failure_ids": [],
    }
    if model is None:
        return None, info, []
    found, reports, unusable = (
        pro.usable_results(layout.evaluation_dir, layout.run, mode)
        if is_pro(bench.dataset)
        else harness.usable_reports(harness.reports_of(layout.evaluation_dir, model))
    )
    chosen, stale, several = harness.choose_report(
        found, harness.predictions_digest(path), path.stat().st_mtime
    )
    said = [f"mode {mode}: {_file(p)} is not used: {why}" for p, why in unusable]
    said += [
        f"mode {mode}: {_file(p)} is not used: {why}; grade the current predictions "
        f"again (the command is in the SWE-bench section)"
        for p, why in stale
    ]
    if several:
        said.append(
            f"mode {mode}: {len(several)} reports grade its current predictions "
            f"({', '.join(_file(p) for p in several)}); none is used: remove all but one "
            f"from {layout.evaluation_dir}"
        )
    if chosen is None:
        if not (stale or several):  # nothing above says why the mode has no verdicts
            said.append(_NOT_GRADED.format(mode=mode))
        return None, info, said
    report = reports[chosen]
    verdicts = harness.verdicts(report)
    info.update(
        report=_file(chosen),
        command=None,
        not_in_tasks=sorted(harness.report_ids(report) - known),
        infra_failure_ids=sorted(set(report.get("infra_failure_ids") or []) & known),
    )
    if info["not_in_tasks"]:
        said.append(
            f"mode {mode}: {_file(chosen)} names {len(info['not_in_tasks'])} instance(s) "
            f"that are not tasks of {bench.path.name}: {_shown(info['not_in_tasks'])}; "
            f"not scored"
        )
    rows: dict[str, dict] = {}
    for iid, row in by_id.items():
        verdict = verdicts.get(iid)
        if verdict is None and row.get("outcome") not in NOT_SCORED:
            info["no_verdict"].append(iid)
            continue
        rows[iid] = judged(row, verdict) if verdict else row
        info["verdicts"][verdict or row["outcome"]] = (
            info["verdicts"].get(verdict or row["outcome"], 0) + 1
        )
    if info["no_verdict"]:
        said.append(
            f"mode {mode}: {_file(chosen)} has no verdict for "
            f"{len(info['no_verdict'])} of its predictions "
            f"({_shown(info['no_verdict'])}): counted as missing (no result, in no rate)"
        )
    if info["infra_failure_ids"]:
        said.append(
            f"mode {mode}: the harness classed {len(info['infra_failure_ids'])} "
            f"instance(s) as likely infrastructure failures "
            f"({_shown(info['infra_failure_ids'])}; its failure_reasons); scored as its "
            f"lists say"
        )
    return rows, info, said


def evaluate(layout: Layout, bench: Benchmark, rows: dict, commands: dict) -> Evaluation:
    """The graded rows of a SWE-bench run (module docstring). rows: {mode: {iid: row}} as
    results.jsonl holds them; commands: {mode: the grading command of its predictions now}."""
    known = {t.instance_id for t in bench.tasks}
    out = Evaluation(rows={})
    for mode, by_id in rows.items():
        graded, info, said = _grade_mode(layout, bench, mode, by_id, known, commands.get(mode))
        out.modes.append(info)
        out.warnings += said
        if graded is not None:
            out.rows[mode] = graded
        elif not said:
            out.warnings.append(_NOT_GRADED.format(mode=mode))
    return out
