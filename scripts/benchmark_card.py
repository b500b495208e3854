#!/usr/bin/env python3
"""Render a benchmark card: ``tasks/README.md`` from a benchmark file, and from the validation
summary of a run when one is given.

The card describes the shipped file: its tasks per area, per year of the fix (with the recent
split: fixes on or after a cutoff date) and per test source (nginx-tests, or tests the project
wrote: ``"tests": "authored"``), the sizes of the gold patches, what the tasks grade, how they
were mined (scripts/mine_tasks.py) and validated (``doit run <bench>:validate``), the fairness
audit (each task's ``audit``; tasks the audit dropped are rows of ``<name>-dropped.jsonl`` beside
the task file: {"instance_id", "date", "version", "why"}) and the alternative fixes run against
the tasks, and, given ``results/<run>/validation.json``, that run's verdicts (per test source
too) and the assertions that changed between its runs, and, given the results.jsonl of a gold
mode run with its strict verdict on (``strict_gold=1``), how many gold patches are strict and
why the others are not, and, with ``--clones``, the tasks whose fail_to_pass assertions already
stand in nginx-tests as of their base commit (suite.already_standing: what an agent of a mode
with ``tests = "base"`` can read), from the bare clones in the cache (``doit run repos`` makes
them). The text is
``templates/benchmark_card.md.j2``; the card is generated, never edited.

Usage:
    python scripts/benchmark_card.py [--tasks tasks/nginx.json] [--out tasks/README.md] \
        [--validation results/<run>/validation.json] [--cutoff 2025-01-01]
        [--gold-results results/<run>/gold/results.jsonl] [--clones]
"""

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

import jinja2

# The nginx_eval next to this script, whichever one is installed, and the scripts beside it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from record_validation import read_rows, rows_path  # noqa: E402

from nginx_eval.core import rootfs  # noqa: E402
from nginx_eval.core.errors import UserError  # noqa: E402
from nginx_eval.core.layout import SOURCE_ROOT, Layout  # noqa: E402
from nginx_eval.run.benchmark import TEST_SOURCES, is_date, load_benchmark  # noqa: E402
from nginx_eval.suite.stage import already_standing  # noqa: E402

TEMPLATE = SOURCE_ROOT / "templates" / "benchmark_card.md.j2"
DEFAULT_CUTOFF = "2025-01-01"
# Lines changed by a gold patch (added + removed): the card's buckets, upper bounds inclusive.
SIZE_BUCKETS = (
    (5, "1–5"),
    (20, "6–20"),
    (50, "21–50"),
    (100, "51–100"),
    (300, "101–300"),
    (None, "over 300"),
)


def _counted(values, order=None):
    """[(value, count)], by `order` (a key of (value, count)) or by count, most first."""
    return sorted(Counter(values).items(), key=order or (lambda kv: (-kv[1], kv[0])))


def _spread(numbers):
    """{"min", "median", "max", "total"} of a list of numbers, or None when it is empty."""
    if not numbers:
        return None
    median = statistics.median(numbers)
    return {
        "min": min(numbers),
        "median": int(median) if median == int(median) else median,
        "max": max(numbers),
        "total": sum(numbers),
    }


def size_bucket(lines):
    return next(label for bound, label in SIZE_BUCKETS if bound is None or lines <= bound)


def files_label(files):
    return str(files) if files < 3 else "3 or more"


def gold_sizes(tasks):
    """The gold patches' lines changed (spread and buckets) and files touched, of the tasks whose
    file records gold_size."""
    sized = [t.gold_size for t in tasks if t.gold_size]
    lines = [g.get("lines_added", 0) + g.get("lines_removed", 0) for g in sized]
    labels = [label for _, label in SIZE_BUCKETS]
    return {
        "known": len(sized),
        "lines": _spread(lines),
        "buckets": [
            (label, n)
            for label, n in _counted(map(size_bucket, lines), lambda kv: labels.index(kv[0]))
        ],
        "files": _counted([files_label(g.get("files", 0)) for g in sized], lambda kv: kv[0]),
    }


def by_year(tasks, cutoff):
    """[(year, tasks, tasks fixed on or after the cutoff, authored tasks)], "unknown" for tasks
    without a date."""
    year = lambda t: t.fix_date[:4] if t.fix_date else "unknown"
    years = _counted(map(year, tasks), lambda kv: kv[0])
    recent = Counter(t.fix_date[:4] for t in tasks if t.fix_date and t.fix_date >= cutoff)
    authored = Counter(year(t) for t in tasks if t.tests == "authored")
    return [(y, n, recent.get(y, 0), authored.get(y, 0)) for y, n in years]


def by_source(tasks, cutoff):
    """[(test source, tasks, tasks fixed on or after the cutoff)] of the sources with tasks."""
    recent = lambda t: bool(t.fix_date) and t.fix_date >= cutoff
    return [
        (
            source,
            sum(1 for t in tasks if t.tests == source),
            sum(1 for t in tasks if t.tests == source and recent(t)),
        )
        for source in TEST_SOURCES
        if any(t.tests == source for t in tasks)
    ]


def sanitizer_tasks(tasks):
    """The authored tasks built with AddressSanitizer (their memory errors are the symptom)."""
    return [
        t
        for t in tasks
        if t.tests == "authored" and any("-fsanitize=address" in f for f in t.configure_flags)
    ]


def dropped_tasks(tasks_file):
    """The rows of ``<name>-dropped.jsonl`` beside the task file (tasks the audit dropped), or
    [] when there is none."""
    path = Path(tasks_file).with_name(f"{Path(tasks_file).stem}-dropped.jsonl")
    if not path.exists():
        return []
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def audit_figures(tasks, dropped=()):
    """What the card says about the fairness audit (each task's ``audit``) and the alternative
    fixes recorded in it."""
    audits = [(t, t.audit) for t in tasks if t.audit]
    changes = [(t, c) for t, a in audits for c in a["changes"]]
    alternatives = [(t, a["alternative"]) for t, a in audits if "alternative" in a]
    count = lambda pairs, key: sum(1 for _, x in pairs if x.get(key))
    return {
        "audited": len(audits),
        "unaudited": len(tasks) - len(audits),
        "dates": sorted({a["date"] for _, a in audits}),
        "sufficient": count(audits, "statement_sufficient"),
        "insufficient": sum(1 for _, a in audits if not a["statement_sufficient"]),
        "fair": count(audits, "tests_fair"),
        "unfair": sum(1 for _, a in audits if not a["tests_fair"]),
        "amended": len({t.instance_id for t, c in changes if c["field"] == "problem_statement"}),
        "assertions_dropped": sum(len(c.get("dropped", [])) for _, c in changes),
        "tasks_dropped": list(dropped),
        "findings": [
            (t.instance_id, f["assertion"], f["why"], f["fixed_by"])
            for t, a in audits
            for f in a["over_strict"]
        ],
        "insufficient_tasks": [t.instance_id for t, a in audits if not a["statement_sufficient"]],
        "alternatives": {
            "written": len(alternatives),
            "resolved_before": count(alternatives, "resolved_before"),
            "resolved": count(alternatives, "resolved"),
            "strict": sum(1 for _, x in alternatives if x.get("strict") is True),
            "strict_unknown": sum(1 for _, x in alternatives if x.get("strict") is None),
            "areas": _counted(t.area or "unknown" for t, _ in alternatives),
            "years": _counted(
                [t.fix_date[:4] if t.fix_date else "unknown" for t, _ in alternatives],
                lambda kv: kv[0],
            ),
            "rejected_before": [
                t.instance_id for t, x in alternatives if not x.get("resolved_before")
            ],
            "rejected": [t.instance_id for t, x in alternatives if not x.get("resolved")],
            "not_strict": [t.instance_id for t, x in alternatives if x.get("strict") is False],
        },
    }


def task_figures(bench, cutoff, dropped=()):
    """What the card says about the tasks themselves."""
    tasks = bench.tasks
    dates = sorted(t.fix_date for t in tasks if t.fix_date)
    # --with-cc-opt only carries the options an old base needs to build here (the miner's
    # nginx_eval/mining/oldbuilds.py), or an authored memory-safety task's sanitizer: counted
    # apart from the modules a test needs.
    compat = lambda flag: flag.startswith(("--with-cc-opt=", "--with-ld-opt="))
    flags = Counter(f for t in tasks for f in t.configure_flags if not compat(f))
    return {
        "name": bench.name,
        "tasks": len(tasks),
        "cutoff": cutoff,
        "repos": sorted({t.repo for t in tasks}),
        "test_repos": sorted({t.test_repo for t in tasks}),
        "first_fix": dates[0] if dates else None,
        "last_fix": dates[-1] if dates else None,
        "recent": sum(1 for d in dates if d >= cutoff),
        "undated": len(tasks) - len(dates),
        "areas": _counted(t.area or "unknown" for t in tasks),
        "years": by_year(tasks, cutoff),
        "sources": by_source(tasks, cutoff),
        "sanitizer": len(sanitizer_tasks(tasks)),
        "gold": gold_sizes(tasks),
        "test_files": _spread([len(t.test_files) for t in tasks]),
        "fail_to_pass": _spread([len(t.fail_to_pass) for t in tasks]),
        "pass_to_pass": _spread([len(t.pass_to_pass) for t in tasks]),
        "with_flags": sum(1 for t in tasks if any(not compat(f) for f in t.configure_flags)),
        "with_cc_opt": sum(
            1
            for t in tasks
            if any(compat(f) for f in t.configure_flags) and t not in sanitizer_tasks(tasks)
        ),
        "flags": flags.most_common(8),
        "perl_modules": sorted({m for t in tasks for m in t.perl_modules}),
        "audit": audit_figures(tasks, dropped),
    }


def changing_assertions(record):
    """[(assertion, "passed/runs" without the fix, with it)] of the assertions of a validation
    record that changed between runs ("?" for records from before pass_counts)."""
    counts, runs = record.get("pass_counts"), record.get("run_counts")
    ids = list(record.get("flaky", [])) + list(record.get("unstable_base", []))
    shown = lambda side, i: f"{counts[side].get(i, 0)}/{runs[side]}" if counts and runs else "?"
    return [(i, shown("base", i), shown("fix", i)) for i in ids]


def toolchains_of(builds):
    """The toolchains (core/rootfs.describe) that made `builds` (build records: their compiler's
    "toolchain", the pinned root filesystem's digest or "host"), each once, sorted; "not
    recorded" for a record from before the field."""
    names = set()
    for build in builds:
        key = (build.get("compiler") or {}).get("toolchain")
        if not key:
            names.add("not recorded")
        elif key == rootfs.HOST:
            names.add(rootfs.describe({"name": rootfs.HOST, "digest": None}))
        else:
            names.add(rootfs.describe({"name": rootfs.SUITE, "digest": key}))
    return sorted(names)


def validation_figures(summary, bench):
    """What the card says about a run's validation (validation.json: {instance_id: record})."""
    shipped = [t.instance_id for t in bench.tasks]
    source = {t.instance_id: t.tests for t in bench.tasks}
    verdicts = Counter(r["verdict"] for i, r in summary.items() if i in shipped)
    per_source = Counter((r["verdict"], source[i]) for i, r in summary.items() if i in shipped)
    return {
        "verdicts": sorted(verdicts.items(), key=lambda kv: -kv[1]),
        "verdicts_by_source": {v: {s: per_source[(v, s)] for s in TEST_SOURCES} for v in verdicts},
        "validated": sum(verdicts.values()),
        "not_validated": [i for i in shipped if i not in summary],
        "not_valid": [
            (i, summary[i]["verdict"], "; ".join(summary[i].get("reasons", [])))
            for i in shipped
            if i in summary and summary[i]["verdict"] != "valid"
        ],
        "repeats": sorted({r.get("repeats") for r in summary.values() if r.get("repeats")}),
        # Records from before admission say nothing of it.
        "judged": sum(1 for i in shipped if "admitted" in summary.get(i, {})),
        "admitted": sum(1 for i in shipped if summary.get(i, {}).get("admitted")),
        "not_admitted": [
            (i, "; ".join(summary[i]["not_admitted"]))
            for i in shipped
            if summary.get(i, {}).get("admitted") is False
        ],
        "declared_match": sum(1 for i in shipped if summary.get(i, {}).get("declared_matches")),
        "changing": [
            (i, changing_assertions(summary[i]))
            for i in shipped
            if i in summary and changing_assertions(summary[i])
        ],
        "toolchains": toolchains_of(
            b for r in summary.values() for b in (r.get("build") or {}).values() if b
        ),
        **_time_spent(summary),
    }


def _time_spent(summary):
    """Seconds of the distinct builds (a build the tasks share counts once: its record is the
    one build's) and of the test runs, in all."""
    builds = {
        b["key"]: b.get("seconds", 0)
        for r in summary.values()
        for b in (r.get("build") or {}).values()
        if b.get("key")
    }
    tests = [sum(r["test_seconds"].values()) for r in summary.values() if r.get("test_seconds")]
    return {
        "builds": len(builds),
        "build_seconds": round(sum(builds.values()), 1),
        "test_seconds": round(sum(tests), 1) if tests else None,
    }


def last_validations(bench):
    """What the card says of each task's last validation, from ``<name>-validation.jsonl``
    beside the task file (scripts/record_validation.py), or None when there is none: the rows in
    the file's order, the tasks without one, and the rows grouped by conditions."""
    rows = read_rows(bench.path)
    if not rows:
        return None
    source = {t.instance_id: t.tests for t in bench.tasks}
    ordered = [(t.instance_id, source[t.instance_id], rows.get(t.instance_id)) for t in bench.tasks]
    ordered = [(i, s, r) for i, s, r in ordered if r]
    groups: dict[tuple, list[dict]] = {}
    for _, _, r in ordered:
        groups.setdefault((r["repeats"], r["load"], r["load_processes"], r["cores"]), []).append(r)
    return {
        "file": rows_path(bench.path).name,
        "rows": ordered,
        "missing": [t.instance_id for t in bench.tasks if t.instance_id not in rows],
        "versions": sorted({r["version"] for _, _, r in ordered if r["version"]}),
        "groups": [
            {
                "repeats": key[0],
                "load": key[1],
                "load_processes": key[2],
                "cores": key[3],
                "tasks": len(rs),
                "dates": sorted({r["date"] for r in rs}),
                "admitted": sum(1 for r in rs if r["admitted"]),
                "gold_failures": sum(r["gold_failures"] for r in rs),
                "gold_runs": sum(r["gold_runs"] for r in rs),
                "none_passes": sum(r["none_passes"] for r in rs),
                "none_runs": sum(r["none_runs"] for r in rs),
            }
            for key, rs in sorted(groups.items(), key=lambda kv: (-kv[0][0], kv[0][1:]))
        ],
    }


def gold_strict_figures(results_file):
    """What the card says of the gold patches under the strict verdict, from a gold mode's
    results.jsonl (strict per task) and its grade.json files (the reason when not strict)."""
    rows = [json.loads(line) for line in Path(results_file).read_text().splitlines() if line]
    not_strict, not_judged = [], []
    for row in rows:
        if row.get("strict") is True:
            continue
        grade = Path(results_file).parent / row["instance_id"] / "grade.json"
        reason = (json.loads(grade.read_text()) if grade.exists() else {}).get("strict_reason")
        (not_judged if row.get("strict") is None else not_strict).append(
            (row["instance_id"], reason or "no reason recorded")
        )
    builds = [Path(results_file).parent / row["instance_id"] / "build.json" for row in rows]
    return {
        "toolchains": toolchains_of(json.loads(b.read_text()) for b in builds if b.exists()),
        "file": "/".join(Path(results_file).parts[-4:]),
        "patches": len(rows),
        "strict": sum(1 for r in rows if r.get("strict") is True),
        "not_strict": sorted(not_strict),
        "not_judged": sorted(not_judged),
    }


def standing_figures(standing: dict, bench) -> dict:
    """What the card says of the tasks whose assertions stand as of their base, from
    suite.already_standing ({instance id: True, False or None: not known})."""
    return {
        "tasks": [t.instance_id for t in bench.tasks if standing.get(t.instance_id)],
        "unknown": [t.instance_id for t in bench.tasks if standing.get(t.instance_id) is None],
    }


def render_card(
    bench,
    tasks_file,
    cutoff=DEFAULT_CUTOFF,
    summary=None,
    validation_file=None,
    wall_time=None,
    gold_results=None,
    standing=None,
):
    """The text of the card of `bench` (and of a run's validation summary, a strict run of the
    gold patches and suite.already_standing of its tasks, when given)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE.parent)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env.get_template(TEMPLATE.name).render(
        card=task_figures(bench, cutoff, dropped_tasks(bench.path)),
        description=bench_description(bench.path),
        tasks_file=tasks_file,
        validation_file=validation_file,
        wall_time=wall_time,
        validation=validation_figures(summary, bench) if summary is not None else None,
        gold_strict=gold_strict_figures(gold_results) if gold_results else None,
        standing=standing_figures(standing, bench) if standing is not None else None,
        last=last_validations(bench),
    )


def _shown(paths):
    """The validation.json files as the card names them: the file's name, or with several runs
    each with its run's directory (results/<run>/validation.json)."""
    if len(paths) == 1:
        return Path(paths[0]).name
    return "`, `".join(f"{Path(p).parent.name}/{Path(p).name}" for p in paths)


def bench_description(path):
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return data.get("description", "") if isinstance(data, dict) else ""


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="tasks/nginx.json", help="the benchmark file")
    ap.add_argument("--out", default=None, help="the card (default: README.md beside --tasks)")
    ap.add_argument(
        "--validation",
        action="append",
        default=None,
        help="results/<run>/validation.json of a validation of this file (repeatable: runs of "
        "parts of it; a later run's record of a task wins)",
    )
    # validation.json records what each build and run took, not how long the command ran.
    ap.add_argument(
        "--wall-time",
        default=None,
        help="the validation command's wall time and machine, as measured (text)",
    )
    ap.add_argument(
        "--gold-results",
        default=None,
        help="results/<run>/gold/results.jsonl of `doit run nginx:gold strict_gold=1`",
    )
    ap.add_argument(
        "--clones",
        action="store_true",
        help="count the tasks whose assertions already stand in nginx-tests as of "
        "their base, from the bare clones in the cache (NGINX_EVAL_CACHE; "
        "`doit run repos` makes them)",
    )
    ap.add_argument(
        "--cutoff",
        default=DEFAULT_CUTOFF,
        help="the recent split: fixes on or after this YYYY-MM-DD",
    )
    args = ap.parse_args(argv)
    if not is_date(args.cutoff):
        ap.error(f"--cutoff {args.cutoff}: not a date YYYY-MM-DD")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        bench = load_benchmark(args.tasks)
        # The project the task file belongs to (<root>/tasks/<name>.json), and its cache.
        layout = Layout.from_env(root=Path(args.tasks).resolve().parent.parent)
        standing = already_standing(layout, bench.tasks) if args.clones else None
    except UserError as e:
        print(f"benchmark_card: {e}", file=sys.stderr)
        return 2
    summary = None
    for path in args.validation or []:
        summary = dict(summary or {}, **json.loads(Path(path).read_text()))
    out = Path(args.out) if args.out else Path(args.tasks).with_name("README.md")
    text = render_card(
        bench,
        Path(args.tasks).name,
        args.cutoff,
        summary,
        args.validation and _shown(args.validation),
        args.wall_time,
        args.gold_results,
        standing,
    )
    out.write_text(text, encoding="utf-8")
    print(
        f"{out}: {len(bench.tasks)} tasks"
        + (f", validation {', '.join(args.validation)}" if args.validation else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
