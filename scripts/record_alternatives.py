#!/usr/bin/env python3
"""Record in the task file how the alternative fixes fared: each task's ``audit.alternative``
(nginx_eval/run/benchmark.py) from the results of a run of ``tasks/alternatives.jsonl``.

    doit run nginx:file predictions=tasks/alternatives.jsonl run=alternatives
    python scripts/record_alternatives.py --results results/alternatives/file/results.jsonl \
        [--before]

Each row of the results gives ``resolved`` and ``strict`` (null: not judged). Without
``--before`` they become ``resolved`` and ``strict`` of the task's record; a task recorded for the
first time also gets them as ``resolved_before``. With ``--before`` (a run against the task file
as it was before the audit changed it) only ``resolved_before`` is written. A row whose
``benchmark_version`` is not the file's own is refused unless ``--before``. The file is loaded
and dumped as scripts/promote_tasks.py does it, and written only when it still loads.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

# The nginx_eval next to this script, whichever one is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from nginx_eval.core import jsonio  # noqa: E402
from nginx_eval.core.errors import UserError  # noqa: E402
from nginx_eval.run.benchmark import load_benchmark  # noqa: E402


def record(data, rows, before=False):
    """Update `data` (the task file's object) from `rows` (results.jsonl rows); the lines to
    print, one per task."""
    tasks = {t["instance_id"]: t for t in data["tasks"]}
    lines = []
    for row in rows:
        iid = row["instance_id"]
        task = tasks.get(iid)
        if task is None or "audit" not in task:
            raise UserError("has no audited task of that id in the task file", item=iid)
        if not before and row.get("benchmark_version") != data.get("version"):
            raise UserError(
                f"was graded under version {row.get('benchmark_version')}, the "
                f"task file is {data.get('version')}: run it again (or --before)",
                item=iid,
            )
        alternative = task["audit"].setdefault("alternative", {})
        if before:
            alternative["resolved_before"] = bool(row["resolved"])
        else:
            alternative.setdefault("resolved_before", bool(row["resolved"]))
            alternative["resolved"] = bool(row["resolved"])
            alternative["strict"] = row.get("strict")
        alternative.setdefault("resolved", alternative["resolved_before"])
        alternative.setdefault("strict", None)
        task["audit"]["alternative"] = {
            k: alternative[k] for k in ("resolved_before", "resolved", "strict")
        }
        lines.append(f"{iid}: {row['outcome']}, strict {row.get('strict')}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", required=True, help="results/<run>/file/results.jsonl")
    ap.add_argument("--tasks", default="tasks/nginx.json", help="the task file")
    ap.add_argument(
        "--before",
        action="store_true",
        help="the run graded the tasks as they were before the audit's changes",
    )
    args = ap.parse_args(argv)
    path = Path(args.tasks)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = [
            json.loads(line) for line in Path(args.results).read_text().splitlines() if line.strip()
        ]
        lines = record(data, rows, args.before)
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        with tempfile.TemporaryDirectory() as scratch:
            trial = Path(scratch) / path.name
            trial.write_text(text, encoding="utf-8")
            load_benchmark(trial)
    except UserError as e:
        print(f"record_alternatives: {e}", file=sys.stderr)
        return 2
    jsonio.write_text(path, text)
    print("\n".join(lines))
    print(f"{len(lines)} alternative fix(es) recorded in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
