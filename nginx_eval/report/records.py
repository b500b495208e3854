"""Reading a run's records for the report (stage 9): the results.jsonl rows of the modes that
have results (run/record.py: modes_on_disk), what each row's agent ran, the toolchain the
records name, where the tasks' trajectories are, and the files each task's fix touches.
Nothing here computes a statistic; report/modes.py does, from these rows.

Rows are results.jsonl rows (core/records.py: ResultRow); a row's outcome is core/outcomes.py's
outcome(), the one definition, for rows without the field too.
"""

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core import jsonio, rootfs
from ..core.gitcmd import GitError
from ..core.layout import Layout
from ..core.outcomes import OUTCOMES, OutcomeName, outcome
from ..core.records import read_record, record_version
from ..patch.stage import patch_stats
from ..run.benchmark import AnyTask, gold_patch


def row_outcome(row: Mapping[str, Any]) -> OutcomeName:
    """The row's outcome as results.jsonl states it (older rows: computed the same way)."""
    return row["outcome"] if row.get("outcome") in OUTCOMES else outcome(row)


def commands_that_ran(rows: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """[{"commands": [(phase, command)], "model", "instance_ids"}] for each distinct command line
    (and model) the rows' agents ran, the most common first."""
    seen: dict[tuple[tuple[tuple[str, ...], ...], str | None], list[str]] = {}
    for iid, r in rows.items():
        if not r.get("agent_commands"):
            continue
        key = (tuple(tuple(c) for c in r["agent_commands"]), r.get("agent_model"))
        seen.setdefault(key, []).append(iid)
    return [
        {"commands": list(k[0]), "model": k[1], "instance_ids": ids}
        for k, ids in sorted(seen.items(), key=lambda kv: -len(kv[1]))
    ]


def read_rows(
    layout: Layout, names: Iterable[str], task_ids: Iterable[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """{mode: {instance_id: results.jsonl row}} for the run's tasks. Rows of tasks outside the
    run's selection (none, since results.jsonl holds only the run's tasks) would change the
    denominator: they are left out."""
    wanted = set(task_ids)
    return {
        m: {
            r["instance_id"]: r
            for r in jsonio.read_jsonl(layout.results_jsonl(m))
            if r["instance_id"] in wanted and record_version(layout.results_jsonl(m), r)
        }
        for m in names
    }


def toolchain_records(layout: Layout, names: Iterable[str]) -> list[Path]:
    """The per-task records the toolchain comes from, of every mode in `names`: build.json (its
    "compiler", build/stage.py) and prove.json (its "versions" of Perl and OpenSSL,
    prove/stage.py)."""
    # Sorted by their text: comparing thousands of Paths part by part cost a no-op rerun 30 ms.
    return [
        p
        for m in names
        for record in ("build.json", "prove.json")
        for p in sorted(layout.mode_dir(m).glob(f"*/{record}"), key=str)
    ]


def trajectory_records(layout: Layout, names: Sequence[str]) -> list[Path]:
    """Every task's ATIF trajectory of every mode in `names` (transcript/atif.py): what the
    process figures are read from (process.py)."""
    pattern = {m: str(layout.agent_atif(m, "*").relative_to(layout.mode_dir(m))) for m in names}
    return [p for m in names for p in sorted(layout.mode_dir(m).glob(pattern[m]), key=str)]


def toolchain(layout: Layout, names: Iterable[str]) -> dict[str, str]:
    """{"toolchain", "compiler", "perl", "openssl"}: what built nginx and ran the tests, as the
    run's records say (never asked of this machine: a report rendered elsewhere names the same),
    each distinct value once, "; " between; "not recorded" when no record has it (records without
    the field), "not found" when the records say the program did not answer. "toolchain" is the
    pinned root filesystem's digest or "host (pin off)" (core/rootfs.py), from prove.json and
    build.json's compiler."""
    values: dict[str, list[Any]] = {"toolchain": [], "compiler": [], "perl": [], "openssl": []}
    for path in toolchain_records(layout, names):
        rec = read_record(path) or {}
        if path.name == "build.json" and isinstance(rec.get("compiler"), dict):
            values["compiler"].append(rec["compiler"].get("version") or rec["compiler"].get("cc"))
            key = rec["compiler"].get("toolchain")
            if key:
                values["toolchain"].append(
                    rootfs.describe(
                        {"name": rootfs.HOST, "digest": None}
                        if key == rootfs.HOST
                        else {"name": rootfs.SUITE, "digest": key}
                    )
                )
        elif path.name == "prove.json":
            if isinstance(rec.get("versions"), dict):
                for key in ("perl", "openssl"):
                    values[key].append(rec["versions"].get(key))
            if isinstance(rec.get("toolchain"), dict):
                values["toolchain"].append(rootfs.describe(rec["toolchain"]))
    out: dict[str, str] = {}
    for key, found in values.items():
        known = list(dict.fromkeys(v for v in found if v))
        out[key] = "; ".join(known) if known else ("not found" if found else "not recorded")
    return out


def gold_files(layout: Layout, bench_tasks: Iterable[AnyTask]) -> dict[str, list[str]]:
    """{instance_id: files the fix commit touches}, from the gold mode's results if it ran, else
    from the bare clone."""
    files: dict[str, list[str]] = {}
    gold = layout.results_jsonl("gold")
    if gold.exists():
        for row in jsonio.read_jsonl(gold):
            files[row["instance_id"]] = list((row.get("patch") or {}).get("files") or [])
    for task in bench_tasks:
        bare = layout.bare_repo(task.repo)
        if task.instance_id not in files and (bare.is_dir() or not task.fix_commit):
            try:
                diff = gold_patch(task, bare)
            except GitError:  # a clone without the fix commit: no overlap figure
                continue
            files[task.instance_id] = patch_stats(diff)["files"]
    return files
