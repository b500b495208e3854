#!/usr/bin/env python3
"""Turn rows of the SWE-bench Verified dataset into a task file (``tasks/swebench-verified.json``),
or with ``--pro`` rows of SWE-bench Pro (public) into ``tasks/swebench-pro.json``.

The rows are an export of the dataset made where Hugging Face is reachable (docs/benchmark.md,
"SWE-bench Verified"): a JSON list, JSON lines, or a parquet file (which needs pyarrow), each row
with the dataset's own fields: instance_id, repo, base_commit, problem_statement, version,
FAIL_TO_PASS, PASS_TO_PASS, patch, test_patch, environment_setup_commit (created_at is kept when
present; other fields are not). The task file's schema is nginx_eval/run/swebench.py's; it loads as
a benchmark before it is written, atomically.

A Pro row has the Pro dataset's fields instead (nginx_eval/run/swebench_pro.py: repo_language,
fail_to_pass, pass_to_pass, before_repo_set_cmd, selected_test_files_to_run, requirements,
interface, ...); a CSV export (the form the Pro harness reads) is read too.

FAIL_TO_PASS and PASS_TO_PASS may be JSON text (as the Hugging Face export has them) or real
lists (as pyarrow and the datasets library write parquet list columns).

A row that lacks a field, holds a bad value, or repeats an earlier row's instance_id, is one line
on stderr naming the file, the row ("line N" of JSON lines, "row N" of a list or parquet), the
task and the field; then nothing is written (the task file stays as it was) and the exit status
is 1, unless ``--skip-bad`` writes the other rows (of a repeated instance_id, the first row).
Rows that leave no task write nothing (a task file without tasks, written over one, would drop
them all), nor does an ``--out`` that is no task file (its version and changelog would be lost);
a mistake on the command line is one line naming the option. Each of these is one line starting
``import_swebench:``. ``--instances`` and ``--limit`` take a part of the rows. Writing over a
versioned task file adds
a changelog entry (the next MINOR version when tasks were only added or removed, the next MAJOR
when a task that stays changed); a new file starts at version 1.0.

Usage:
    python scripts/import_swebench.py --rows verified.jsonl [--out tasks/swebench-verified.json]
        [--dataset-name SWE-bench/SWE-bench_Verified] [--split test] [--instances ID,ID]
        [--limit N] [--skip-bad]
    python scripts/import_swebench.py --pro --rows pro.jsonl [--out tasks/swebench-pro.json]
        [--languages python,go] [--per-language N] [--limit N] ...
"""

import argparse
import collections
import csv
import datetime
import json
import sys
import tempfile
from pathlib import Path

# The nginx_eval next to this script, whichever one is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from nginx_eval.core import jsonio  # noqa: E402
from nginx_eval.core.errors import UserError  # noqa: E402
from nginx_eval.run import swebench_pro  # noqa: E402
from nginx_eval.run.benchmark import load_benchmark, next_version  # noqa: E402
from nginx_eval.run.swebench import DEFAULT_DATASET, SWEBENCH, check_row  # noqa: E402

TASKS = Path(__file__).resolve().parent.parent / "tasks"
DEFAULT_OUT = TASKS / "swebench-verified.json"
PRO_OUT = TASKS / "swebench-pro.json"


def read_rows(path: Path) -> list[tuple[str, object]]:
    """[(where, row)] of an export, `where` naming the row as the file has it: "line N" of JSON
    lines (blank lines counted), "row N" of a JSON list or a parquet file. UserError naming the
    file (and for JSON lines the line) when it cannot be read."""
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet
        except ImportError as e:
            raise UserError(
                f"reading parquet needs pyarrow ({e}); or export the rows as JSON lines",
                file=path,
            ) from None
        try:
            # to_pylist: string columns as str, list columns as lists.
            rows = pyarrow.parquet.read_table(path).to_pylist()
        except (OSError, pyarrow.ArrowException) as e:
            raise UserError(f"cannot read as parquet: {e}", file=path) from None
        return [(f"row {n}", row) for n, row in enumerate(rows, 1)]
    if path.suffix == ".csv":
        try:
            with open(path, encoding="utf-8", newline="") as f:
                # Cells hold whole patches: no field size limit of csv's own.
                csv.field_size_limit(sys.maxsize)
                return [(f"row {n}", row) for n, row in enumerate(csv.DictReader(f), 1)]
        except (OSError, UnicodeDecodeError, csv.Error) as e:
            raise UserError(f"cannot read as CSV: {e}", file=path) from None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read: {e}", file=path) from None
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as e:
            raise UserError(
                f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}", file=path
            ) from None
        return [(f"row {n}", row) for n, row in enumerate(rows, 1)]
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((f"line {n}", json.loads(line)))
        except json.JSONDecodeError as e:
            # json counts lines within the one line it was given: say the file's own.
            raise UserError(
                f"malformed JSON (column {e.colno}): {e.msg}", file=path, item=f"line {n}"
            ) from None
    return out


def convert(
    rows: list, path: Path, instances=None, limit=None, check=check_row, languages=()
) -> tuple[list, list]:
    """(task file rows, one line per bad row) of the export's rows ([(where, row)] of
    read_rows), in their order. A row whose instance_id an earlier row has is bad (the task
    file holds each task once): the first one is kept. check: the row check of the dataset
    (Verified's, or swebench_pro.check_row); languages: the Pro rows' repo_language to keep
    (all when empty)."""
    good, bad = [], []
    wanted = set(instances or ())
    first: dict[str, str] = {}  # instance_id: where its first row is
    for where, raw in rows:
        if wanted and not (isinstance(raw, dict) and raw.get("instance_id") in wanted):
            continue
        try:
            row = check(raw, {"file": path, "item": where})
        except UserError as e:
            bad.append(str(e))
            continue
        if languages and row.get("repo_language") not in languages:
            continue
        iid = row["instance_id"]
        if iid in first:
            bad.append(
                str(
                    UserError(
                        f"instance_id {iid} again (first at {first[iid]}): skipped",
                        file=path,
                        task=iid,
                        item=where,
                        field="instance_id",
                    )
                )
            )
            continue
        first[iid] = where
        good.append(row)
    missing = wanted - {r.get("instance_id") for _, r in rows if isinstance(r, dict)}
    bad += [
        str(UserError("no row has this instance_id", file=path, task=iid, field="--instances"))
        for iid in sorted(missing)
    ]
    return (good[:limit] if limit else good), bad


def changelog_entry(old: dict | None, tasks: list, name: str = "SWE-bench") -> tuple[str, list]:
    """(version, changelog) of the new file: 1.0 for a new one, else the next version with an
    entry saying what changed."""
    today = datetime.date.today().isoformat()
    if not old or "version" not in old:
        return "1.0", [
            {
                "version": "1.0",
                "date": today,
                "tasks": len(tasks),
                "changes": f"imported {len(tasks)} rows of {name}",
            }
        ]
    before = {t["instance_id"]: t for t in old.get("tasks", [])}
    after = {t["instance_id"]: t for t in tasks}
    changed = [i for i in after if i in before and before[i] != after[i]]
    added, removed = sorted(set(after) - set(before)), sorted(set(before) - set(after))
    if not (changed or added or removed):
        return old["version"], old["changelog"]
    version = next_version(old["version"], major=bool(changed))
    words = [
        f"{len(x)} {w}"
        for x, w in ((added, "added"), (removed, "removed"), (changed, "changed"))
        if x
    ]
    entry = {
        "version": version,
        "date": today,
        "tasks": len(tasks),
        "changes": f"re-imported from {name}: " + ", ".join(words),
    }
    return version, [entry] + list(old["changelog"])


def old_task_file(out: Path) -> dict | None:
    """The task file `out` that the import writes over (None when there is none); UserError
    naming it when it is no task file, so that its version and changelog are never lost."""
    if not out.exists():
        return None
    if not out.is_file():
        raise UserError("is not a file", file=out)
    old = jsonio.read_json(out)
    if not isinstance(old, dict) or not isinstance(old.get("tasks", []), list):
        raise UserError("is not a task file to write over (not a JSON object with tasks)", file=out)
    for n, task in enumerate(old.get("tasks", []), 1):
        if not isinstance(task, dict) or not isinstance(task.get("instance_id"), str):
            raise UserError(
                "is not a task file to write over (no instance_id)",
                file=out,
                item=f"task {n}",
                field="instance_id",
            )
    if "version" in old and not isinstance(old.get("changelog"), list):
        raise UserError("has a version but no changelog list", file=out, field="changelog")
    return old


def task_file(tasks: list, dataset: dict, old: dict | None, name: str) -> dict:
    pro = swebench_pro.is_pro(dataset)
    version, changelog = changelog_entry(old, tasks, "SWE-bench Pro" if pro else "SWE-bench")
    return {
        "name": name,
        "kind": SWEBENCH,
        "description": (old or {}).get("description")
        or (
            "SWE-bench Pro (public) tasks (scripts/import_swebench.py --pro)"
            if pro
            else "SWE-bench Verified tasks (scripts/import_swebench.py)"
        ),
        "dataset": dataset,
        "version": version,
        "changelog": changelog,
        "tasks": tasks,
    }


def write_checked(out: Path, data: dict) -> None:
    """Write `data` to `out` once it loads as a benchmark (a temporary copy is loaded first;
    an error names `out`, the file it would have been, not the copy)."""
    text = json.dumps(data, indent=1) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        trial = Path(tmp) / out.name
        trial.write_text(text, encoding="utf-8")
        try:
            load_benchmark(trial)
        except UserError as e:
            raise UserError(
                f"the task file would not load, so it is not written: "
                f"{str(e).replace(str(trial), str(out))}"
            ) from None
    try:
        jsonio.write_text(out, text)
    except OSError as e:
        where = f": {e.filename}" if e.filename and str(e.filename) != str(out) else ""
        raise UserError(f"cannot write: {e.strerror or e}{where}", file=out) from None


class Parser(argparse.ArgumentParser):
    """argparse's, but a mistake on the command line is one ``import_swebench:`` line naming
    the option (no usage text before it)."""

    def error(self, message: str):
        print(f"import_swebench: {message} (--help says more)", file=sys.stderr)
        raise SystemExit(2)


def parse_args(argv=None):
    p = Parser(prog="import_swebench.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", required=True, type=Path, help="the dataset export")
    p.add_argument("--pro", action="store_true", help="rows of SWE-bench Pro (public)")
    p.add_argument("--out", type=Path, default=None, help=f"default {DEFAULT_OUT} ({PRO_OUT})")
    p.add_argument(
        "--dataset-name",
        default=None,
        help=f"what the official harness is given as --dataset_name (default "
        f"{DEFAULT_DATASET['name']}; {swebench_pro.DATASET['name']})",
    )
    p.add_argument("--split", default=DEFAULT_DATASET["split"])
    p.add_argument(
        "--languages", default="", help="Pro: comma-separated repo_language values to keep"
    )
    p.add_argument(
        "--per-language",
        type=int,
        default=None,
        help="Pro: the first N rows of each repo_language (a subset of every language)",
    )
    p.add_argument("--instances", default="", help="comma-separated instance ids")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--skip-bad", action="store_true", help="write the good rows anyway")
    args = p.parse_args(argv)
    for name in ("limit", "per_language"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"argument --{name.replace('_', '-')}: must be 1 or more, got {value}")
    if not args.pro:
        for name in ("languages", "per_language"):
            if getattr(args, name):
                p.error(f"argument --{name.replace('_', '-')}: only with --pro")
    unknown = sorted(set(languages_of(args)) - set(swebench_pro.LANGUAGES))
    if unknown:
        p.error(
            f"argument --languages: {', '.join(unknown)} not one of "
            f"{', '.join(swebench_pro.LANGUAGES)}"
        )
    return args


def languages_of(args) -> set[str]:
    return {w.strip() for w in args.languages.split(",") if w.strip()}


def run(args) -> int:
    instances = [i.strip() for i in args.instances.split(",") if i.strip()]
    languages = languages_of(args)
    args.out = args.out or (PRO_OUT if args.pro else DEFAULT_OUT)
    dataset = dict(swebench_pro.DATASET) if args.pro else dict(DEFAULT_DATASET)
    dataset.update(split=args.split)
    if args.dataset_name is not None:
        dataset.update(name=args.dataset_name)
    check = swebench_pro.check_row if args.pro else check_row
    rows = read_rows(args.rows)
    tasks, bad = convert(rows, args.rows, instances, args.limit, check, languages)
    if args.per_language:
        kept: collections.Counter = collections.Counter()
        for t in tasks:
            kept[t["repo_language"]] += 1
            t["_keep"] = kept[t["repo_language"]] <= args.per_language
        tasks = [t for t in tasks if t.pop("_keep")]
    for line in bad:
        print(f"import_swebench: {line}", file=sys.stderr)
    if bad and not args.skip_bad:
        print(
            f"import_swebench: {len(bad)} bad row(s); {args.out} not written (--skip-bad "
            f"writes the other {len(tasks)})",
            file=sys.stderr,
        )
        return 1
    if not tasks:
        # A task file without tasks, written over one, would drop every task it had.
        raise UserError(
            f"no task to write ({len(rows)} row(s) read, {len(bad)} bad, none kept); "
            f"{args.out} not written",
            file=args.rows,
        )
    old = old_task_file(args.out)
    data = task_file(tasks, dataset, old, args.out.stem)
    write_checked(args.out, data)
    print(f"import_swebench: {len(tasks)} task(s) in {args.out} (version {data['version']})")
    return 1 if bad else 0


def main(argv=None) -> int:
    try:
        return run(parse_args(argv))
    except UserError as e:
        print(f"import_swebench: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
