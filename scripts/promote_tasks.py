#!/usr/bin/env python3
"""Promote validated candidates into a benchmark file.

Reads a candidates file (written by scripts/mine_tasks.py, ``"candidates": true``; see
nginx_eval/run/benchmark.py), the per-task validation records of a run that validated it
(``results/<run>/validate/<instance_id>/validation.json``, nginx_eval/checks/validate.py) and a
statements file (``{"<instance_id>": "<problem statement>"}``), and adds to a benchmark file
(default ``tasks/nginx.json``) every candidate whose verdict is ``valid`` and that has a
statement, with fail_to_pass and pass_to_pass from the record's ``derived`` lists and the
statement filled in. Every other field is the candidate's as it stands.

A candidate is skipped, with one line saying why, when its validation record is missing, is of
another version of the candidate (its ``inputs`` digest differs: validate again), has another
verdict or is not admitted (its fix failed a run: validate.admission), when no statement (or the
placeholder "TODO") is given for it, or when the benchmark already has its id (``--replace``
replaces that task in place). The benchmark's tasks keep their order; new ones are appended by
fix_date, then id. The result must load as a benchmark (nginx_eval/run/benchmark.py) before it is
written, atomically; the benchmark's own top-level fields stay, and the candidates flag is never
copied. A versioned benchmark file gets a changelog entry for the change (run/benchmark.py): the
next MINOR version when tasks were only added, the next MAJOR when one was replaced (what it grades
may differ), dated today, with the task count and ``--changes TEXT`` (default: the ids added and
replaced). The benchmark card (tasks/README.md) is then out of date: the last lines say how to
regenerate it (scripts/benchmark_card.py) and check the new statements (``doit run <bench>:lint``).

Usage:
    python scripts/promote_tasks.py --candidates tasks/candidates.json --statements st.json \
        [--run default] [--into tasks/nginx.json] [--replace] [--changes TEXT]
"""

import argparse
import datetime
import json
import sys
import tempfile
from pathlib import Path

# The nginx_eval next to this script, whichever one is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from nginx_eval.checks.validate import validation_config  # noqa: E402
from nginx_eval.core import jsonio, stamps  # noqa: E402
from nginx_eval.core.errors import UserError  # noqa: E402
from nginx_eval.core.layout import Layout  # noqa: E402
from nginx_eval.run.benchmark import (
    AUTHORED_DIR,
    PLACEHOLDER_STATEMENT,  # noqa: E402
    load_benchmark,
    next_version,
)

DEFAULT_BENCHMARK = "nginx"  # tasks/nginx.json


def read_candidates(path):
    """(the loaded candidates Benchmark, its raw task objects in file order); UserError unless
    `path` is a candidates file."""
    bench = load_benchmark(path)
    if not bench.candidates:
        raise UserError('is not a candidates file (no top-level "candidates": true)', file=path)
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return bench, data["tasks"] if isinstance(data, dict) else data


def read_benchmark_file(path):
    """The raw object of the benchmark file to promote into ({"tasks": [...]} and its other
    top-level fields), checked by the loader first; a new file's when there is none."""
    path = Path(path)
    if not path.exists():
        return {"name": path.stem, "tasks": []}
    if load_benchmark(path).candidates:
        raise UserError("is a candidates file: promote into a benchmark file", file=path)
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {"tasks": data}


def read_statements(path):
    """{instance_id: statement} of the statements file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"cannot read: {e.strerror}", file=path) from None
    except json.JSONDecodeError as e:
        raise UserError(
            f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}", file=path
        ) from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise UserError('expected {"<instance_id>": "<statement>", ...}', file=path)
    return data


def read_validations(layout, tasks):
    """{instance_id: its validation.json record in the run, or None when there is none}."""
    return {
        t.instance_id: jsonio.read_json(layout.validation_dir(t.instance_id) / "validation.json")
        for t in tasks
    }


def validated_as_is(task, record):
    """Whether `record` validated `task` as the candidates file has it now (validate.py's
    inputs digest of the task, the record's repeats and its load)."""
    load = (record.get("conditions") or {}).get("load", "none")
    inputs = stamps.inputs_digest(validation_config(task, record.get("repeats"), load))
    return record.get("inputs") == inputs


def why_skipped(task, record, statement, present, replace):
    """Why candidate `task` is not promoted, or None. `present`: its id is in the benchmark."""
    if not isinstance(record, dict) or "verdict" not in record:
        return "no validation"
    if not validated_as_is(task, record):
        return "validation is of another version of this candidate (validate it again)"
    if record["verdict"] != "valid":
        reasons = "; ".join(record.get("reasons") or [])
        return f"not valid ({record['verdict']}{': ' + reasons if reasons else ''})"
    if record.get("admitted") is False:  # records from before admission have none
        return f"not admitted ({'; '.join(record.get('not_admitted') or [])})"
    if not (statement or "").strip() or statement.strip() == PLACEHOLDER_STATEMENT:
        return "no statement"
    if present and not replace:
        return "already in the benchmark (--replace replaces it)"
    return None


def promoted(raw, record, statement):
    """The benchmark task of candidate `raw`: its fields, the derived assertions, the statement."""
    return dict(
        raw,
        fail_to_pass=list(record["derived"]["fail_to_pass"]),
        pass_to_pass=list(record["derived"]["pass_to_pass"]),
        problem_statement=statement,
    )


def promote(raw_candidates, tasks, records, statements, bench_tasks, replace=False):
    """(the benchmark's new task list, a line per candidate). `raw_candidates` and `tasks`: the
    candidates file's raw objects and Tasks, in the same order; `bench_tasks`: the benchmark's
    raw tasks. Replaced tasks keep their place; new ones follow, by fix_date, then id."""
    position = {t["instance_id"]: i for i, t in enumerate(bench_tasks)}
    kept, new, lines = list(bench_tasks), [], []
    for raw, task in zip(raw_candidates, tasks, strict=True):
        iid, record = task.instance_id, records.get(task.instance_id)
        why = why_skipped(task, record, statements.get(iid), iid in position, replace)
        if why:
            lines.append(f"skipped   {iid}: {why}")
            continue
        entry = promoted(raw, record, statements[iid])
        counts = (
            f"{len(entry['fail_to_pass'])} fail_to_pass, {len(entry['pass_to_pass'])} pass_to_pass"
        )
        if iid in position:
            kept[position[iid]] = entry
            lines.append(f"replaced  {iid} ({counts})")
        else:
            new.append(entry)
            lines.append(f"added     {iid} ({counts})")
    new.sort(key=lambda t: (not t.get("fix_date"), t.get("fix_date", ""), t["instance_id"]))
    return kept + new, lines


def with_changelog(data, tasks, lines, changes=None, today=None):
    """The benchmark file's new object: `tasks`, and when the file is versioned a new version
    with its changelog entry (module docstring); `lines` are promote()'s."""
    out = dict(data, tasks=tasks)
    if "version" not in data:
        return out
    done = {
        kind: [line.split()[1] for line in lines if line.startswith(kind)]
        for kind in ("added", "replaced")
    }
    version = next_version(data["version"], major=bool(done["replaced"]))
    text = (
        changes
        or "; ".join(
            f"{len(ids)} validated task(s) {kind} ({', '.join(ids)})"
            for kind, ids in done.items()
            if ids
        )
        + " (promote_tasks.py)."
    )
    entry = {
        "version": version,
        "date": today or datetime.date.today().isoformat(),
        "tasks": len(tasks),
        "changes": text,
    }
    return dict(out, version=version, changelog=[entry] + list(data.get("changelog") or []))


def write_checked(path, data):
    """Write the benchmark file `path` atomically, once the loader accepts its new text (beside
    the authored test files of its directory, which its authored tasks read)."""
    path = Path(path)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    with tempfile.TemporaryDirectory() as scratch:
        trial = Path(scratch) / path.name
        trial.write_text(text, encoding="utf-8")
        authored = path.resolve().parent / AUTHORED_DIR
        if authored.is_dir():
            (Path(scratch) / AUTHORED_DIR).symlink_to(authored)
        load_benchmark(trial)
    jsonio.write_text(path, text)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--candidates", required=True, help="the candidates file (mine_tasks.py)")
    ap.add_argument(
        "--statements", required=True, help='JSON file {"<instance_id>": "<problem statement>"}'
    )
    ap.add_argument("--run", default="default", help="the run that validated the candidates")
    ap.add_argument(
        "--into", default=None, help=f"the benchmark file (default: tasks/{DEFAULT_BENCHMARK}.json)"
    )
    ap.add_argument(
        "--replace", action="store_true", help="replace tasks the benchmark already has"
    )
    ap.add_argument(
        "--changes",
        default=None,
        help="what changed, for the changelog entry of a versioned benchmark file "
        "(default: the ids added and replaced)",
    )
    return ap.parse_args(argv)


def next_steps(into):
    """What to do once tasks were promoted: regenerate the card, check the statements."""
    return [
        f"the benchmark card is now out of date: python scripts/benchmark_card.py "
        f"--tasks {into} (with --validation results/<run>/validation.json of a run that "
        f"validated the whole file)",
        f"check the new statements: doit run {Path(into).stem}:lint",
    ]


def run(args):
    """Promote, print a line per candidate and the next steps; the number of tasks written."""
    layout = Layout.from_env(run=args.run)
    into = Path(args.into) if args.into else layout.tasks_dir / f"{DEFAULT_BENCHMARK}.json"
    candidates, raw_candidates = read_candidates(args.candidates)
    statements = read_statements(args.statements)
    data = read_benchmark_file(into)
    records = read_validations(layout, candidates.tasks)
    tasks, lines = promote(
        raw_candidates, candidates.tasks, records, statements, data["tasks"], args.replace
    )
    print("\n".join(lines))
    unknown = sorted(set(statements) - {t.instance_id for t in candidates.tasks})
    if unknown:
        print(f"statements for ids that are no candidate: {', '.join(unknown)}")
    changed = sum(1 for line in lines if not line.startswith("skipped"))
    print(f"{changed} of {len(lines)} candidates promoted into {into}")
    if changed:
        data = with_changelog(data, tasks, lines, args.changes)
        write_checked(into, data)
        if "version" in data:
            print(f"version {data['version']}: {data['changelog'][0]['changes']}")
        print("\n".join(next_steps(into)))
    return changed


def main(argv=None):
    try:
        run(parse_args(argv))
    except UserError as e:
        print(f"promote_tasks: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
