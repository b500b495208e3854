"""The comparison of two runs (``compare=OTHER``): each arm of this run against the same arm of
run OTHER, paired on the tasks both runs have, with Holm's adjustment over the arms; which tasks
only one run resolves. report/stage.py writes it as ``compare-<OTHER>.md|.json`` (schema in its
docstring).
"""

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from .. import __version__
from ..core import jsonio
from ..core.errors import UserError
from ..core.layout import Layout
from ..run.benchmark import AnyTask, Benchmark
from ..run.modes import Mode
from ..run.record import modes_on_disk, other_layout, read_run
from . import stats
from .arms import compare_pair, finish_comparisons, make_arms
from .data import graded_rows
from .modes import mode_summary


def _other_tasks(theirs: Layout, bench: Benchmark) -> tuple[set[str], str | None, str | None]:
    """(the task ids of run `theirs`, its benchmark's sha256 and version, each None without
    run.json or, the version, for an unversioned file)."""
    record = read_run(theirs)
    if record and record["benchmark"] != bench.name:
        raise UserError(
            f"compare={theirs.run}: run {theirs.run!r} holds benchmark "
            f"{record['benchmark']!r}, this run {bench.name!r}: no tasks in common"
        )
    if record:
        return (
            set(record["task_ids"]),
            record.get("benchmark_sha256"),
            record.get("benchmark_version"),
        )
    ids: set[str] = set()
    for m in modes_on_disk(theirs, []):
        ids |= {r["instance_id"] for r in jsonio.read_jsonl(theirs.results_jsonl(m))}
    return ids, None, None


def _arms_of_both_runs(
    layout: Layout,
    theirs: Layout,
    task_ids: list[str],
    modes: Mapping[str, Mode],
    bench: Benchmark,
) -> dict[str, dict[str, dict[str, Any]]]:
    """{"here": {arm name: arm}, "there": {...}} on the tasks both runs have (of a SWE-bench
    benchmark: the modes the official harness graded, evaluation.py)."""
    sides: dict[str, dict[str, dict[str, Any]]] = {}
    for side, lay in (("here", layout), ("there", theirs)):
        names, rows, _ = graded_rows(lay, bench, list(modes), task_ids)
        data = [mode_summary(m, rows[m], task_ids, modes, {}) for m in names]
        sides[side] = {a["name"]: a for a in make_arms(data, rows, task_ids, label=lay.run)}
    return sides


def _compare_common_arms(
    sides: dict[str, dict[str, dict[str, Any]]],
    common: Sequence[str],
    task_ids: list[str],
    run: str,
    other: str,
) -> list[dict[str, Any]]:
    """Each arm both runs have, this run's against run `other`'s, with the tasks only one of
    them resolves."""
    comparisons = []
    for name in common:
        c = compare_pair(
            sides["here"][name],
            sides["there"][name],
            task_ids,
            ("runs", run, other, name),
            names=(f"{name}@{run}", f"{name}@{other}"),
        )
        if c is None:
            continue
        here, there = sides["here"][name]["scores"], sides["there"][name]["scores"]
        c.update(
            {
                "arm": name,
                "only_here": [i for i in c["task_ids"] if here[i] == 1 and there[i] == 0],
                "only_other": [i for i in c["task_ids"] if there[i] == 1 and here[i] == 0],
            }
        )
        comparisons.append(c)
    return finish_comparisons(comparisons, len(task_ids))


def collect_comparison(
    layout: Layout,
    other: str,
    bench: Benchmark,
    tasks: Sequence[AnyTask],
    modes: Mapping[str, Mode],
) -> dict[str, Any]:
    """The same arms in this run and run `other`, paired on the tasks both runs have."""
    theirs = other_layout(layout, other)
    their_ids, their_sha, their_version = _other_tasks(theirs, bench)
    task_ids = [t.instance_id for t in tasks if t.instance_id in their_ids]
    sides = _arms_of_both_runs(layout, theirs, task_ids, modes, bench)
    common = [n for n in sides["here"] if n in sides["there"]]
    comparisons = _compare_common_arms(sides, common, task_ids, layout.run, other)
    paired = {c["arm"] for c in comparisons}
    arms = {
        n: {
            side: {
                k: sides[side][n][k]
                for k in ("rate", "interval", "interval_method", "repeats", "modes", "commands")
            }
            for side in ("here", "there")
        }
        for n in common
    }
    only = {
        "here": [n for n in sides["here"] if n not in common],
        "there": [n for n in sides["there"] if n not in common],
    }
    return {
        "date": datetime.date.today().isoformat(),
        "version": __version__,
        "run": layout.run,
        "other": other,
        "benchmark": bench.name,
        "benchmark_sha256": {layout.run: bench.digest, other: their_sha},
        "benchmark_version": {layout.run: bench.version, other: their_version},
        "tasks": task_ids,
        "run_tasks": len(tasks),
        "other_tasks": len(their_ids),
        "arms": arms,
        "only": only,
        "unpaired": [n for n in common if n not in paired],
        "comparisons": comparisons,
        "level": stats.LEVEL,
        "alpha": stats.ALPHA,
    }
