#!/usr/bin/env python3
"""Record beside the task file each task's last validation: its conditions and flake rates, from
the validation.json of one or more runs (``doit run <bench>:validate``), for the benchmark card.

    doit run -n 2 nginx:validate repeats=10 load=cpu run=race
    python scripts/record_validation.py --validation results/race/validation.json \
        [--tasks tasks/nginx.json]

``<name>-validation.jsonl`` beside the task file holds a row per task (in the file's order)::

    {"instance_id", "version": the task file's version it validated, "run", "date", "repeats",
     "load", "load_processes", "cores", "load_coverage", "loadavg", "verdict", "admitted",
     "gold_failures", "gold_runs", "none_passes", "none_runs"}

(the fields of validate.py's record: ``conditions``, ``flake``). A run's record replaces a
task's row only when it validated the task as the file has it now (the per-task
validation.json's inputs digest, as scripts/promote_tasks.py checks it) and says its
conditions (records from before ``load=`` do not); rows of tasks the run did not validate stay,
and rows of tasks no longer in the file go. The rows are not part of the tasks (no stage reads
them, the benchmark's version does not change with them): they say how each task was last
validated.
"""

import argparse
import json
import sys
from pathlib import Path

# The nginx_eval next to this script, whichever one is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from nginx_eval.checks.validate import validation_config  # noqa: E402
from nginx_eval.core import jsonio, stamps  # noqa: E402
from nginx_eval.core.errors import UserError  # noqa: E402
from nginx_eval.core.layout import Layout  # noqa: E402
from nginx_eval.run.benchmark import load_benchmark  # noqa: E402

CONDITIONS = ("date", "repeats", "load", "load_processes", "cores", "load_coverage", "loadavg")
FLAKE = ("gold_failures", "gold_runs", "none_passes", "none_runs")


def rows_path(tasks_file: str | Path) -> Path:
    """``<name>-validation.jsonl`` beside the task file."""
    return Path(tasks_file).with_name(f"{Path(tasks_file).stem}-validation.jsonl")


def read_rows(tasks_file: str | Path) -> dict[str, dict]:
    """{instance_id: row} of the task file's validation rows ({} when there are none)."""
    path = rows_path(tasks_file)
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return {r["instance_id"]: r for r in rows}


def validated_as_is(task, record) -> bool:
    """Whether a per-task validation.json validated `task` as the file has it now."""
    load = (record.get("conditions") or {}).get("load", "none")
    inputs = stamps.inputs_digest(validation_config(task, record.get("repeats"), load))
    return record.get("inputs") == inputs


def row_of(record, run: str, version: str | None) -> dict:
    c, f = record["conditions"], record["flake"]
    return {
        "instance_id": record["instance_id"],
        "version": version,
        "run": run,
        **{k: c[k] for k in CONDITIONS},
        "verdict": record["verdict"],
        "admitted": record["admitted"],
        **{k: f[k] for k in FLAKE},
    }


def record_runs(bench, version, validations, rows):
    """`rows` ({instance_id: row}) updated from the runs of `validations` (their
    validation.json paths), in the task file's order; and a line per task taken or skipped."""
    tasks = {t.instance_id: t for t in bench.tasks}
    lines = []
    for path in validations:
        path = Path(path).resolve()
        # results/<run>/validation.json: the run's per-task records are where layout says.
        layout = Layout(path.parent, path.parent, path.parent.parent, run=path.parent.name)
        summary = json.loads(path.read_text(encoding="utf-8"))
        for iid in summary:
            if iid not in tasks:
                lines.append(f"{iid}: not a task of {bench.path.name}, skipped")
                continue
            record = jsonio.read_json(layout.validation_dir(iid) / "validation.json")
            if not isinstance(record, dict) or "conditions" not in record:
                lines.append(f"{iid}: no conditions in run {layout.run} (validated before load=)")
            elif not validated_as_is(tasks[iid], record):
                lines.append(f"{iid}: run {layout.run} validated it as it was, not as it is")
            else:
                rows[iid] = row_of(record, layout.run, version)
    return {t.instance_id: rows[t.instance_id] for t in bench.tasks if t.instance_id in rows}, lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="tasks/nginx.json", help="the benchmark file")
    ap.add_argument(
        "--validation",
        action="append",
        required=True,
        help="results/<run>/validation.json (repeatable; a later run's record wins)",
    )
    args = ap.parse_args(argv)
    try:
        bench = load_benchmark(args.tasks)
    except UserError as e:
        print(f"record_validation: {e}", file=sys.stderr)
        return 2
    version = json.loads(Path(args.tasks).read_text(encoding="utf-8")).get("version")
    rows, lines = record_runs(bench, version, args.validation, read_rows(args.tasks))
    for line in lines:
        print(line)
    text = "".join(json.dumps(r, sort_keys=False) + "\n" for r in rows.values())
    jsonio.write_text(rows_path(args.tasks), text)
    print(f"{rows_path(args.tasks)}: {len(rows)} of {len(bench.tasks)} tasks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
