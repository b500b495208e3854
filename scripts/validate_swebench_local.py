"""Validate the local SWE-bench verdict (docs/benchmark.md, "SWE-bench local verdicts"), as nginx
tasks are validated: for each task of a SWE-bench export (parquet or JSON lines) or task file,
build its environment (swebench/envs.py) and grade the gold patch and no patch with the local
verdict (swebench/verdict.py). A task whose environment builds must give gold resolved and none
unresolved; a task that does not is listed with what went wrong.

    python3 scripts/validate_swebench_local.py DATA [--repo owner/name ...] [--out DIR]
        [--jobs N]

Writes DIR/validation.jsonl (a line per task: instance_id, repo, version, env_key, env status,
reason, build seconds and bytes, gold and none verdicts with their seconds) and prints the counts
per repository, the environments with their build time and disk, and the tasks not built with the
reason. Exits 1 when a task whose environment built fails gold or none. The environments are
cached as the pipeline caches them (NGINX_EVAL_CACHE); NGINX_EVAL_REPO_URL reaches the
repositories.
"""

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nginx_eval.core.errors import UserError  # noqa: E402
from nginx_eval.core.layout import Layout  # noqa: E402
from nginx_eval.run.swebench import OPTIONAL, REQUIRED, SweTask, parse_task  # noqa: E402
from nginx_eval.swebench import envs, verdict  # noqa: E402


def read_rows(path: Path) -> list[dict]:
    """The rows of a parquet export, a JSON-lines export or a task file's tasks."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return list(pq.read_table(path).to_pylist())
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return list(json.loads(text)["tasks"])
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def tasks_of(path: Path, repos: list[str]) -> list[SweTask]:
    tasks = []
    for i, row in enumerate(read_rows(path)):
        if repos and row.get("repo") not in repos:
            continue
        fields = {k: row[k] for k in REQUIRED + OPTIONAL if row.get(k) is not None}
        tasks.append(parse_task(fields, path, i))
    return tasks


def validate(layout: Layout, task: SweTask, out: Path) -> dict:
    env = envs.build(layout, task)
    row: dict = {
        "instance_id": task.instance_id,
        "repo": task.repo,
        "version": task.version,
        "env_key": env["key"],
        "env_status": env["status"],
        "reason": env["reason"],
        "build_seconds": env["seconds"],
        "bytes": env["bytes"],
    }
    if env["status"] != envs.BUILT:
        return row
    for mode, patch in (("gold", task.patch.encode()), ("none", b"")):
        where = out / mode / task.instance_id
        rec = verdict.local_verdict(
            layout, task, patch, mode, where / "local-verdict.json", where / "local-verdict.log"
        )
        row[mode] = rec["status"]
        row[f"{mode}_seconds"] = rec["seconds"]
        if rec["tests"]:
            row[f"{mode}_failing"] = [
                t for part in rec["tests"].values() for t in part.get("failure", [])
            ][:5]
    row["ok"] = row["gold"] == "resolved" and row["none"] != "resolved"
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--repo", action="append", default=[])
    parser.add_argument("--out", type=Path, default=Path("results/swebench-local"))
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    layout = Layout.from_env()
    try:
        tasks = tasks_of(args.data, args.repo)
    except UserError as e:
        print(e, file=sys.stderr)
        return 2
    start = time.monotonic()
    # Environments first, one build per environment, then the verdicts (--jobs at a time).
    firsts = {envs.env_name(t.repo, t.version): t for t in tasks}
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda t: envs.build(layout, t), firsts.values()))
        rows = list(pool.map(lambda t: validate(layout, t, args.out), tasks))
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "validation.jsonl", "w") as f:
        for row in rows:
            f.write(json.dumps(row, sort_keys=True) + "\n")
    print(summary(rows, time.monotonic() - start))
    return 0 if all(r.get("ok", True) for r in rows) else 1


def summary(rows: list[dict], seconds: float) -> str:
    """The counts per repository, the environments and the tasks not built (markdown)."""
    by_repo: dict[str, Counter] = defaultdict(Counter)
    for r in rows:
        c = by_repo[r["repo"]]
        c["tasks"] += 1
        if r["env_status"] == envs.BUILT:
            c["built"] += 1
            c["gold resolved"] += r.get("gold") == "resolved"
            c["none unresolved"] += r.get("none") != "resolved"
    lines = ["| repository | tasks | environment built | gold resolved | none unresolved |"]
    lines.append("|---|---|---|---|---|")
    for repo, c in sorted(by_repo.items()):
        lines.append(
            f"| {repo} | {c['tasks']} | {c['built']} | {c['gold resolved']} "
            f"| {c['none unresolved']} |"
        )
    lines += ["", "| environment | status | build s | disk MB |", "|---|---|---|---|"]
    seen = {}
    for r in rows:
        seen[r["env_key"]] = r
    for _key, r in sorted(seen.items()):
        lines.append(
            f"| {envs.env_name(r['repo'], r['version'])} | {r['env_status']} "
            f"| {r['build_seconds']} | {r['bytes'] / 1e6:.0f} |"
        )
    failed = [r for r in rows if r["env_status"] != envs.BUILT]
    if failed:
        lines += ["", "Not built:"] + [f"- {r['instance_id']}: {r['reason']}" for r in failed]
    wrong = [r for r in rows if r.get("ok") is False]
    if wrong:
        lines += ["", "Gold not resolved or none resolved:"]
        lines += [
            f"- {r['instance_id']}: gold {r['gold']}, none {r['none']} "
            f"(failing under gold: {r.get('gold_failing')})"
            for r in wrong
        ]
    lines += ["", f"{len(rows)} tasks in {seconds:.0f} s"]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
