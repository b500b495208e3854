#!/usr/bin/env python3
"""Can an agent test its work on SWE-bench tasks inside the default sandbox? (docs/sandbox.md, "A
SWE-bench task's environment"; issue 52's done-when, the agent's side.)

On the psf/requests, pallets/flask and pytest-dev/pytest rows of the SWE-bench Verified parquet
(through local mirrors, NGINX_EVAL_REPO_URL), each task's environment and its install at the
task's base commit are built (swebench/envs.py: build_instance), and the shipped ``raw`` mode
runs, isolated as by default, with a stand-in agent (its AGENT command) that does in the
sandbox what an agent verifying its work does, in /testbed with the environment's python and
pytest:

1. the task's test command on the test files of the test patch that exist at the base: the
   PASS_TO_PASS tests should pass (those the test patch adds, new tests or parameters, are
   judged in 2., where they should pass too);
2. the test patch applied, the same on all of them: the FAIL_TO_PASS tests should fail;
3. the gold patch applied: the FAIL_TO_PASS tests should pass.

Each log is parsed with the swebench package's own parser of the repository; the counts per
repository are printed and written to <work>/summary.json with each task's statuses.

    nice -n 10 python3 scripts/swebench_sandbox_check.py [--work DIR] [--instances ID,ID] [--run R]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(SOURCE_ROOT))

from nginx_eval.agent import preflight  # noqa: E402
from nginx_eval.core.layout import Layout  # noqa: E402
from nginx_eval.run.benchmark import load_benchmarks  # noqa: E402
from nginx_eval.swebench import envs, sandbox_view, services  # noqa: E402

REPOS = ("psf/requests", "pallets/flask", "pytest-dev/pytest")
# As the tests find it (tests/swebench_fixture.py): SHARED_DATA_DIR, else shared/data beside.
PARQUET = (
    Path(os.environ.get("SHARED_DATA_DIR") or SOURCE_ROOT.parent / "shared" / "data")
    / "swebench-verified.parquet"
)
BENCH = "swebench-verified"
MARK = "=== nginx-eval check:"
# The stand-in agent. Its files are beside it: the phase's program directory is readable in the
# sandbox, and the project's and the cache's are not.
STAND_IN = r"""#!/bin/bash
d=$(dirname "$(readlink -f "$0")")/tasks/$NGINX_EVAL_INSTANCE
cd /testbed || { echo "no /testbed"; exit 3; }
command=$(cat "$d/command")
run() {
    echo "$MARK $1 python=$(command -v python) files=$2"
    echo ">>>>> Start Test Output"
    $command $2 2>&1
    echo ">>>>> End Test Output"
}
existing=""
for f in $(cat "$d/files"); do [ -e "$f" ] && existing="$existing $f"; done
run base "$existing"
git apply "$d/test.patch" || echo "$MARK test patch did not apply"
run tests "$(cat "$d/files")"
git apply "$d/gold.patch" || echo "$MARK gold patch did not apply"
run gold "$(cat "$d/files")"
""".replace("$MARK", MARK)


def rows(parquet: Path, instances: set[str]) -> list[dict]:
    import pyarrow.parquet

    return [
        r
        for r in pyarrow.parquet.read_table(parquet).to_pylist()
        if r["repo"] in REPOS and (not instances or r["instance_id"] in instances)
    ]


def setup(work: Path, rows_: list[dict], environ: dict[str, str]) -> None:
    """The project (task file, modes.toml) and the stand-in agent's directory."""
    project = work / "project"
    (project / "tasks").mkdir(parents=True, exist_ok=True)
    rows_file = work / "rows.jsonl"
    rows_file.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows_))
    subprocess.run(
        [sys.executable, str(SOURCE_ROOT / "scripts" / "import_swebench.py"), "--rows",
         str(rows_file), "--out", str(project / "tasks" / f"{BENCH}.json")],
        check=True, env=environ,
    )  # fmt: skip
    shutil.copy(SOURCE_ROOT / "modes.toml", project / "modes.toml")
    agent = work / "agent"
    (agent / "tasks").mkdir(parents=True, exist_ok=True)
    (agent / "stand-in").write_text(STAND_IN)
    (agent / "stand-in").chmod(0o755)


def tasks_of(layout: Layout) -> list:
    return list(load_benchmarks(layout.tasks_dir)[BENCH].tasks)


def give_agent(work: Path, layout: Layout, task) -> None:
    d = work / "agent" / "tasks" / task.instance_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "command").write_text(sandbox_view.agent_test_command(task, layout))
    (d / "files").write_text(" ".join(envs.test_directives(task, layout)))
    (d / "test.patch").write_text(task.test_patch)
    (d / "gold.patch").write_text(task.patch)


def build(layout: Layout, task) -> dict:
    """The task's environment and its install at the base commit (what the sandbox shows),
    built if not current; the env.json with the instance.json as "instance" (None: the base is
    the setup commit), or why not."""
    began = time.monotonic()
    instance = envs.build_instance(layout, task)
    record = envs.env_record(task, layout)
    return dict(record or {"status": "not_built", "reason": "no environment built"},
                instance=instance, check_seconds=round(time.monotonic() - began, 1))  # fmt: skip


def import_problem(layout: Layout, task, seen: dict) -> str | None:
    """The preflight's import check of the task's environment (once per environment): doit's
    preflight refuses the whole run on the first failure, so the check runs it per task first
    and leaves such tasks out, counted."""
    view = sandbox_view.view_of(task, layout)
    if view is None:
        return None
    if view["digest"] not in seen:
        box = {"isolation": "srt", "endpoint": "127.0.0.1:1", "allow_hosts": [], "binds": []}
        seen[view["digest"]] = preflight.import_problem(layout, box, view, task)
    return seen[view["digest"]]


def sections(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    name = None
    for line in text.splitlines():
        if line.startswith(MARK):
            name = line[len(MARK) :].split()[0]
            found[name] = ""
        elif name:
            found[name] += line + "\n"
    return found


def judged(status: dict[str, dict[str, str]], p2p: list[str], f2p: list[str]) -> dict:
    """The three checks from the parsed logs of the steps ("base", "tests", "gold")."""

    def passed(step: str, names: list[str]) -> list[str]:
        return [n for n in names if status.get(step, {}).get(n) in ("PASSED", "XFAIL")]

    # A PASS_TO_PASS test the test patch adds (a new test, a new parameter) is not at the base:
    # it passes with the test patch before the gold patch, as the dataset defines the list.
    # (A base run that reported no test at all, say a collection error, counts them all.)
    base = status.get("base") or {}
    added = [n for n in p2p if base and n not in base]
    at_base = [n for n in p2p if n not in added]
    not_passed = set(at_base) - set(passed("base", at_base))
    not_passed |= set(added) - set(passed("tests", added))
    return {
        "p2p_green_at_base": not not_passed,
        "p2p_not_passed_at_base": sorted(not_passed)[:10],
        "p2p_added_by_test_patch": sorted(added)[:10],
        "f2p_red_before_gold": not passed("tests", f2p),
        "f2p_green_after_gold": len(passed("gold", f2p)) == len(f2p),
        "f2p_not_passed_after_gold": sorted(set(f2p) - set(passed("gold", f2p)))[:10],
    }


def verdict(layout: Layout, task, parse) -> dict:
    record = json.loads(layout.agent_json("raw", task.instance_id).read_text())
    phase = record["phases"][-1] if record.get("phases") else {}
    out = layout.agent_json("raw", task.instance_id).parent / phase.get("stdout", "none")
    logs = sections(out.read_text(errors="replace")) if out.is_file() else {}
    status = {k: parse(v, None) for k, v in logs.items()}
    return {
        "status": record["status"],
        "error": record.get("error"),
        "swe_env": record.get("swe_env"),
        **judged(status, list(task.pass_to_pass), list(task.fail_to_pass)),
        # What the tests tried to reach (srt's refusals: httpbin.org and the like); the sandbox
        # admits only the model endpoint, the official images the whole network.
        "blocked_hosts": sorted({b["host"] for b in phase.get("blocked") or []}),
        "stdout": str(out),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="/tmp/nginx-eval-swe-sandbox-check")
    parser.add_argument("--parquet", default=str(PARQUET))
    parser.add_argument("--instances", default="")
    parser.add_argument("--run", default="check", help="the run's name (results/<run>/)")
    args = parser.parse_args()
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    environ = dict(
        os.environ,
        NGINX_EVAL_ROOT=str(work / "project"),
        NGINX_EVAL_CACHE=os.environ.get("NGINX_EVAL_CACHE") or str(work / "cache"),
        NGINX_EVAL_RESULTS=str(work / "results"),
        NGINX_EVAL_REPO_URL=os.environ.get("NGINX_EVAL_REPO_URL")
        or "/work/.mirror/{owner}+{name}/repo",
        AGENT=str(work / "agent" / "stand-in"),
    )
    os.environ.update(environ)
    setup(work, rows(Path(args.parquet), set(filter(None, args.instances.split(",")))), environ)
    layout = Layout.from_env(run=args.run)
    tasks = tasks_of(layout)
    built = {}
    for task in tasks:
        give_agent(work, layout, task)
        built[task.instance_id] = build(layout, task)
        rec = built[task.instance_id]
        inst = rec["instance"]["status"] if rec.get("instance") else "the environment's"
        print(f"{task.instance_id}: environment {rec['status']}, install {inst}", flush=True)
    roots = {
        envs.environment_of(t, layout).python_root
        for t in tasks
        if services.standins_of(t.repo) and built[t.instance_id].get("status") == "built"
    }
    for root in roots - {None}:
        # Built once here: the agents of a run would each start building it at once.
        venv = services.services_venv(layout, root)  # type: ignore[arg-type]
        print(f"the stand-ins' venv: {venv}", flush=True)
    checked: dict = {}
    refused = {t.instance_id: p for t in tasks if (p := import_problem(layout, t, checked))}
    for iid, problem in refused.items():
        print(f"{iid}: left out, its environment does not import: {problem}", flush=True)
    began = time.monotonic()
    doit = subprocess.run(
        [sys.executable, "-m", "doit", "-f", str(SOURCE_ROOT / "dodo.py"), "run",
         f"{BENCH}:raw", f"run={args.run}", "strict=0", "report=0",
         "instances=" + ",".join(t.instance_id for t in tasks if t.instance_id not in refused)],
        env=environ, cwd=work,
    )  # fmt: skip
    seconds = round(time.monotonic() - began, 1)
    from swebench.harness.log_parsers import MAP_REPO_TO_PARSER

    results, counts = {}, {}
    for task in tasks:
        result = dict(environment=built[task.instance_id])
        if task.instance_id in refused:
            result["import_problem"] = refused[task.instance_id]
        if layout.agent_json("raw", task.instance_id).is_file():
            result.update(verdict(layout, task, MAP_REPO_TO_PARSER[task.repo]))
        results[task.instance_id] = result
        c = counts.setdefault(task.repo, dict.fromkeys(
            ("tasks", "env_built", "env_imports", "env_shown", "p2p_green_at_base",
             "f2p_red_before_gold", "f2p_green_after_gold", "all_three"), 0))  # fmt: skip
        c["tasks"] += 1
        instance = built[task.instance_id].get("instance")
        c_built = built[task.instance_id].get("status") == "built" and (
            instance is None or instance["status"] == "built"
        )
        c["env_built"] += c_built
        c["env_imports"] += c_built and task.instance_id not in refused
        c["env_shown"] += bool(result.get("swe_env"))
        for key in ("p2p_green_at_base", "f2p_red_before_gold", "f2p_green_after_gold"):
            c[key] += bool(result.get(key))
        c["all_three"] += all(
            result.get(k)
            for k in ("p2p_green_at_base", "f2p_red_before_gold", "f2p_green_after_gold")
        )
    summary = {"doit_exit": doit.returncode, "doit_seconds": seconds, "counts": counts,
               "tasks": results}  # fmt: skip
    (work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    for repo, c in counts.items():
        print(f"{repo}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    print(f"doit exit {doit.returncode} in {seconds} s; details in {work / 'summary.json'}")
    return 0 if doit.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
