"""The official SWE-bench harness as this project meets it: the predictions file it reads, the
command that grades it, and the run report it writes. Pure functions; what they answer comes from
the source of ``swebench`` 5.0.2 (``harness/utils.py: get_predictions_from_file``,
``harness/run_evaluation.py: main, get_dataset_from_preds``, ``harness/reporting.py:
make_run_report``), which runs only where Docker does: the project never imports it.

Predictions (``results/<run>/<mode>/predictions.jsonl``, written by swebench/stage.py): JSON
lines, each an object with exactly PREDICTION_FIELDS: ``instance_id`` (a task of the dataset),
``model_name_or_path`` (names the report file and log folders, "/" read as "__"; stage.py's
predictions_name) and ``model_patch`` (a diff the harness applies with `git apply`; "" is an
empty patch, never run).

The command (grading_command) runs ``swebench.harness.run_evaluation`` on the task file's dataset
and split with ``--run_id nginx-eval.<run>.<mode>.<digest>``, ``<digest>`` the first 12 hex
digits of the predictions file's sha256, and ``--report_dir results/<run>/evaluation``: the name
of the report it writes, ``<model_name_or_path, / as __>.<run_id>.json``, says which predictions
it graded, by content, not by a file time (a run id the harness did not choose falls back to
times).

The report (make_run_report, schema_version 2; older reports lack the infra_failure, ambiguous
and failure_reasons fields) holds counts (``total_instances``, ``resolved_instances``, ...) and
id lists, REPORT_ID_FIELDS among them. How this project scores its ids: resolved_ids resolved;
unresolved_ids and empty_patch_ids unresolved (an empty patch fixes nothing); error_ids not scored
(outcome ``eval_error``, outside every rate, as infra_error is); incomplete_ids are the dataset's
instances without a prediction, not ours to score.
"""

import hashlib
import json
import os
import re
import shlex
from collections.abc import Callable
from pathlib import Path

PREDICTION_FIELDS = ("instance_id", "model_name_or_path", "model_patch")
MODULE = "swebench.harness.run_evaluation"
RUN_ID_PREFIX = "nginx-eval"
DIGEST_CHARS = 12
# --max_workers of a command printed to run on another machine: run_evaluation's own default
# (its help: "should be <= 75% of CPU cores" of the machine that grades, which is not this one).
PRINTED_WORKERS = 4
WORKERS_NOTE = (
    f"--max_workers {PRINTED_WORKERS} is the harness's default; give at most three quarters "
    "of the grading machine's cores"
)
OUR_RUN_ID = re.compile(rf"^{RUN_ID_PREFIX}\..+\.([0-9a-f]{{{DIGEST_CHARS}}})$")
# The id lists a report must have (make_run_report writes them all, every version).
REPORT_ID_FIELDS = (
    "submitted_ids",
    "resolved_ids",
    "unresolved_ids",
    "empty_patch_ids",
    "error_ids",
)
# Verdicts of one instance (verdicts()).
RESOLVED, UNRESOLVED, EMPTY_PATCH, ERROR = "resolved", "unresolved", "empty_patch", "error"


def prediction_problems(rows: list) -> list[str]:
    """What the official harness would refuse in predictions `rows` (parsed JSON lines), one
    line each: not an object, a missing or non-string field, an id twice, one model name per
    file (the report's name comes from the first row's)."""
    problems, seen, models = [], set(), set()
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict):
            problems.append(f"row {n}: not a JSON object")
            continue
        for name in PREDICTION_FIELDS:
            if not isinstance(row.get(name), str):
                problems.append(f"row {n}: {name} must be a string")
        iid = row.get("instance_id")
        if iid in seen:
            problems.append(f"row {n}: instance_id {iid} twice")
        seen.add(iid)
        models.add(row.get("model_name_or_path"))
    if len(models) > 1:
        problems.append(f"{len(models)} model names; the report is named after the first row's")
    return problems


def predictions_digest(path: str | Path) -> str:
    """The first DIGEST_CHARS hex digits of the sha256 of a predictions file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:DIGEST_CHARS]


def run_id(run: str, mode: str, digest: str) -> str:
    return f"{RUN_ID_PREFIX}.{run}.{mode}.{digest}"


def local_workers() -> int:
    """--max_workers when the harness runs on this machine (<bench>:grade): the harness's own
    advice, at most three quarters of the cores."""
    return max(1, (os.cpu_count() or 1) * 3 // 4)


def grading_command(
    dataset: dict,
    predictions: Path,
    rid: str,
    report_dir: Path,
    workers: int,
    python: str = "python",
) -> list[str]:
    """The words of the command that grades `predictions` (see the module docstring)."""
    return [
        python,
        "-m",
        MODULE,
        "--dataset_name",
        dataset["name"],
        "--split",
        dataset["split"],
        "--predictions_path",
        str(Path(predictions).resolve()),
        "--max_workers",
        str(workers),
        "--run_id",
        rid,
        "--report_dir",
        str(Path(report_dir).resolve()),
    ]


def command_line(words: list[str]) -> str:
    return shlex.join(words)


def report_name(model_name: str, rid: str) -> str:
    """The file make_run_report writes for a model and run id."""
    return f"{model_name.replace('/', '__')}.{rid}.json"


def reports_of(report_dir: str | Path, model_name: str) -> list[tuple[Path, str]]:
    """[(report file, its run id)] in `report_dir` for `model_name`, by name."""
    prefix = model_name.replace("/", "__") + "."
    folder = Path(report_dir)
    if not folder.is_dir():
        return []
    return [
        (p, p.name[len(prefix) : -len(".json")])
        for p in sorted(folder.glob("*.json"))
        if p.name.startswith(prefix) and len(p.name) > len(prefix) + len(".json")
    ]


def digest_of_run_id(rid: str) -> str | None:
    """The predictions digest a run id of ours carries; None for another run id."""
    m = OUR_RUN_ID.match(rid)
    return m.group(1) if m else None


def read_report(path: str | Path) -> dict:
    """A run report, its id lists checked; ValueError saying what is wrong with it."""
    try:
        report = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not a readable JSON file ({e})") from None
    if not isinstance(report, dict):
        raise ValueError("not a JSON object")
    for name in REPORT_ID_FIELDS:
        ids = report.get(name)
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError(
                f"no list of ids {name!r}: not a report of swebench.harness.run_evaluation"
            )
    return report


def verdicts(report: dict) -> dict[str, str]:
    """{instance id: RESOLVED | UNRESOLVED | EMPTY_PATCH | ERROR} of a report's judged ids.
    An id in two lists takes the first of error, empty patch, resolved, unresolved (the
    harness never writes one twice; a hand-edited report may)."""
    out = {}
    for name, verdict in (
        ("unresolved_ids", UNRESOLVED),
        ("resolved_ids", RESOLVED),
        ("empty_patch_ids", EMPTY_PATCH),
        ("error_ids", ERROR),
    ):
        for iid in report.get(name) or []:
            out[iid] = verdict
    return out


def report_ids(report: dict) -> set[str]:
    """Every id a report says something of, but incomplete_ids (the dataset's instances it was
    given no prediction for)."""
    return {i for name in REPORT_ID_FIELDS + ("completed_ids",) for i in report.get(name) or []}


def predictions_model(path: str | Path) -> str | None:
    """The model_name_or_path of a predictions file (its first row's: what the harness names
    its report after), or None when it has no readable first row."""
    try:
        with open(path, encoding="utf-8") as f:
            line = next((line for line in f if line.strip()), "")
        first = json.loads(line) if line else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    model = first.get("model_name_or_path") if isinstance(first, dict) else None
    return model if isinstance(model, str) else None


def usable_reports(
    found: list[tuple[Path, str]],
    read: Callable[[Path], dict] = read_report,
) -> tuple[list[tuple[Path, str]], dict[Path, dict], list[tuple[Path, str]]]:
    """(the reports of `found` (reports_of) that read as run reports, {path: report}, [(file,
    why it is no report)]): a file that only has a report's name is never chosen, so it cannot
    keep a real report from being used."""
    usable, reports, unusable = [], {}, []
    for path, rid in found:
        try:
            reports[path] = read(path)
        except ValueError as e:
            unusable.append((path, str(e)))
            continue
        usable.append((path, rid))
    return usable, reports, unusable


def choose_report(
    found: list[tuple[Path, str]], digest: str, predictions_mtime: float
) -> tuple[Path | None, list[tuple[Path, str]], list[Path]]:
    """(the report that grades the current predictions or None, [(report, why it is stale)],
    [reports that grade them, when more than one]) of a mode's reports `found` (reports_of,
    after usable_reports).
    A report of other predictions (its run id's digest; for a run id of another's choosing, a
    file time before the predictions') is stale; of several current ones none is chosen: which
    one holds is the user's call."""
    current, stale = [], []
    for path, rid in found:
        theirs = digest_of_run_id(rid)
        if theirs is not None and theirs != digest:
            stale.append(
                (path, f"its run id {rid} names other predictions than the current ones ({digest})")
            )
        elif theirs is None and path.stat().st_mtime < predictions_mtime:
            stale.append((path, "it is older than the predictions file"))
        else:
            current.append(path)
    if len(current) > 1:
        return None, stale, current
    return (current[0] if current else None), stale, []
