#!/usr/bin/env python3
"""Do real SWE-bench Pro rows run to files its harness accepts? (docs/benchmark.md#swe-bench-pro;
issue 52, item 3's done-when.)

With ``--rows`` (an export of the Pro dataset): the chosen rows are imported
(scripts/import_swebench.py --pro) into a project of their own under ``--work``, and ``doit run
swebench-pro:raw swebench-pro:gold`` runs there, ``raw`` with a stand-in agent (its AGENT
command) that applies the row's gold patch in the workspace inside the default sandbox, as an
agent would edit it; the agent stage then takes the workspace's diff as for any agent. Then, and
with ``--files DIR`` on the two files of any mode, the files are checked with the official
harness's OWN code (``swe_bench_pro_eval.py`` of scaleapi/SWE-bench_Pro-os, imported from
``--harness``): its ``main()`` runs as it would (pandas reads samples.jsonl, fills nulls, indexes
by instance_id; patches.json read, matched to the samples), with its per-instance evaluation
replaced where the container starts by one that does what the harness does up to there with its
own functions (prepare_run, assemble_workspace_files: run_script.sh and parser.py from
run_scripts/<id>/, the entry script from the two Dockerfiles of dockerfiles/, binary hunks
stripped; write_files_local; get_dockerhub_image_uri). Per instance, the entry script's own lines
from ``cd /app`` to the test run (reset to the base, ``git apply -v /workspace/patch.diff``, the
last line of before_repo_set_cmd) then run in a clone of the task's repository, /app and
/workspace being the clone and the instance's workspace; and where the row's gold patch is
known, the tree they leave is compared with the base plus the gold patch plus the same test
files. What the harness would do next needs the task's image (``docker pull`` of the printed
image, then ``bash /workspace/entryscript.sh`` in it: the test run and parser.py); the check
stops there and says so.

The harness is ``--harness`` (default: the SWEBENCH_PRO_HARNESS environment variable): a checkout
of scaleapi/SWE-bench_Pro-os, or a bare clone of it, from which the files the harness reads for
the instances are exported. Repositories: the run's cache where the project ran, else
NGINX_EVAL_REPO_URL's ``{owner}+{name}`` template, else GitHub; ``--depth-one`` runs on copies
holding only the rows' base and fix commits (depth_one_copies), for snapshots that lack blobs of
their history.

Per instance a line; everything in ``<work>/check.json`` (schema: check_files's docstring).
The exit status is 0 when every instance passed every check, 1 otherwise.

    python3 scripts/check_swebench_pro.py --rows pro.jsonl --harness DIR
        (--instances ID,ID | --repos owner/name,... [--per-repo N]) [--depth-one] [--work DIR]
        [--run R]
    python3 scripts/check_swebench_pro.py --files results/<run>/<mode> --harness DIR [--work DIR]
"""

import argparse
import contextlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

SOURCE_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(SOURCE_ROOT))

from nginx_eval.core.layout import Layout, repo_url  # noqa: E402
from nginx_eval.run.benchmark import load_benchmark  # noqa: E402
from nginx_eval.swebench import pro  # noqa: E402

BENCH = "swebench-pro"
MODES = ("raw", "gold")
HARNESS_VAR = "SWEBENCH_PRO_HARNESS"
# What swe_bench_pro_eval.py reads besides the files it is given, relative to its working
# directory: itself, its image helper, and per instance its scripts and Dockerfiles.
HARNESS_FILES = (pro.SCRIPT, "helper_code/image_uri.py")
INSTANCE_PATHS = (
    "run_scripts/{}",
    "dockerfiles/base_dockerfile/{}",
    "dockerfiles/instance_dockerfile/{}",
)
# The entry script's lines this check runs: from the line after "# apply patch" to the line
# before "# run test" (create_entryscript's text).
APPLY_START, APPLY_END = "# apply patch", "# run test"
LIST_FIELDS = ("fail_to_pass", "pass_to_pass", "selected_test_files_to_run")
NEXT_STEP = (
    "stopped before the container: next the harness pulls {image} and runs "
    "/workspace/entryscript.sh in it (run_script.sh, then parser.py on its logs), which needs "
    "Docker or Modal"
)
# The stand-in agent: applies the gold patch beside it to the workspace it is started in. Its
# directory is readable in the sandbox (the phase's program), the task file is not.
STAND_IN = r"""#!/bin/bash
case "$1" in
*"write a short plan"*|*"Check your fix"*) exit 0 ;;
esac
patch=$(dirname "$(readlink -f "$0")")/tasks/$NGINX_EVAL_INSTANCE/gold.patch
git apply --whitespace=nowarn "$patch" && echo "stand-in: applied $patch"
"""


# -- the harness ---------------------------------------------------------------------------------
def harness_dir(source: Path, instances: list[str], work: Path) -> tuple[Path, str]:
    """(a directory the harness runs in, its commit or "checkout"): `source` itself when it is
    a checkout; from a bare clone, its HEAD's files the harness reads for `instances`, exported
    into `work` (an instance without them stays without them, as in a checkout)."""
    if (source / pro.SCRIPT).is_file():
        return source, "checkout"

    def git(*words: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "--git-dir", str(source), *words], capture_output=True)

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        raise SystemExit(
            f"check_swebench_pro: {source}: neither a checkout of {pro.HARNESS_REPO} (no "
            f"{pro.SCRIPT}) nor a git clone of it"
        )
    commit = head.stdout.decode().strip()
    paths = list(HARNESS_FILES)
    for iid in instances:
        for pattern in INSTANCE_PATHS:
            path = pattern.format(iid)
            if git("ls-tree", "HEAD", path).stdout.strip():
                paths.append(path)
    out = work / f"harness-{commit[:12]}"
    out.mkdir(parents=True, exist_ok=True)
    archive = git("archive", commit, *paths)
    if archive.returncode != 0:
        raise SystemExit(f"check_swebench_pro: git archive of {source}: {archive.stderr.decode()}")
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out, commit


def load_harness(directory: Path) -> ModuleType:
    """swe_bench_pro_eval.py of `directory`, imported as it imports itself (its directory first
    on sys.path, for helper_code). Needs pandas and tqdm; modal and docker it imports lazily."""
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))
    spec = importlib.util.spec_from_file_location("swe_bench_pro_eval", directory / pro.SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_main(
    module: ModuleType, directory: Path, samples: Path, patches: Path, out: Path
) -> tuple[dict, str, dict]:
    """The harness's main() on the two files, its evaluation stopped where the container starts
    (module docstring); ({instance id: what its evaluation got and made}, what main printed,
    the eval_results.json main wrote: every instance false, none having been tested)."""
    calls: dict[str, dict] = {}

    def stop_before_container(
        patch, sample, output_dir, dockerhub_username, scripts_dir, prefix="", redo=False,
        block_network=False, docker_platform=None,
    ):  # fmt: skip
        uid = sample["instance_id"]
        got: dict = {"sample": {k: sample[k] for k in sample.index}, "patch": patch}
        got["prefix"] = prefix
        got["image"] = module.get_dockerhub_image_uri(
            uid, dockerhub_username, sample.get("repo", "")
        )
        _, _, workspace = module.prepare_run(uid, output_dir, prefix, True)
        try:
            files, entry = module.assemble_workspace_files(uid, scripts_dir, patch, sample)
        except FileNotFoundError as e:
            got["missing"] = str(e)
        else:
            module.write_files_local(workspace, files)
            module.write_patch_snapshot(output_dir, uid, prefix, patch)
            got.update(workspace=os.path.abspath(workspace), entryscript=entry)
            got["stripped"] = files["patch.diff"] != patch
        calls[uid] = got
        return None  # as the harness's own evaluation when its run yields no output

    module.eval_with_modal = stop_before_container
    argv = [
        pro.SCRIPT,
        f"--raw_sample_path={samples.resolve()}",
        f"--patch_path={patches.resolve()}",
        f"--output_dir={out.resolve()}",
        "--scripts_dir=run_scripts",
        "--num_workers=1",
        f"--dockerhub_username={pro.DOCKERHUB_USER}",
    ]
    out.mkdir(parents=True, exist_ok=True)
    printed = io.StringIO()
    saved = sys.argv
    try:
        sys.argv = argv
        with (
            contextlib.chdir(directory),
            contextlib.redirect_stdout(printed),
            contextlib.redirect_stderr(io.StringIO()),  # tqdm's bar
        ):
            module.main()
    finally:
        sys.argv = saved
    results = json.loads((out / pro.RESULTS).read_text())
    return calls, printed.getvalue(), results


# -- the checks ----------------------------------------------------------------------------------
def apply_lines(entryscript: str) -> list[str]:
    """The entry script's lines that set the tree up: after "# apply patch", before "# run
    test" (cd /app, git reset --hard, git checkout, git apply -v, before_repo_set_cmd's last)."""
    lines = [line.strip() for line in entryscript.splitlines()]
    start = lines.index(APPLY_START)
    end = next(n for n, line in enumerate(lines) if line.startswith(APPLY_END))
    return [line for line in lines[start + 1 : end] if line.strip()]


def run_apply(lines: list[str], tree: Path, workspace: str) -> list[dict]:
    """Each line run with bash in `tree`, /app being `tree` and /workspace `workspace`, until one
    fails; [{"line", "exit", "output"}]."""
    done = []
    for line in lines:
        if line.strip() == "cd /app":
            command = f"cd {tree}"
        else:
            command = line.replace("/workspace/", workspace.rstrip("/") + "/")
        run = subprocess.run(
            ["bash", "-c", command], cwd=tree, capture_output=True, text=True, errors="replace"
        )
        done.append(
            {"line": line, "exit": run.returncode, "output": (run.stdout + run.stderr)[-2000:]}
        )
        if run.returncode != 0:
            break
    return done


def clone(source: str, tree: Path) -> None:
    """A clone of `source` sharing its objects, no checkout (the entry script resets it)."""
    shutil.rmtree(tree, ignore_errors=True)
    tree.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["git", "clone", "-q", "--shared", "--no-checkout", source, str(tree)],
        check=True, capture_output=True,
    )  # fmt: skip


def tree_of(tree: Path) -> str:
    """The git tree of what is on disk in `tree` (every file, a scratch index)."""
    env = dict(os.environ, GIT_INDEX_FILE=str(tree / ".git" / "check-index"))
    subprocess.run(["git", "-C", str(tree), "add", "-A", "-f", "."], env=env, check=True)
    return subprocess.run(
        ["git", "-C", str(tree), "write-tree"], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def gold_tree(tree: Path, base: str, gold: str, last_line: str) -> str | None:
    """The tree of the base with `gold` applied and the row's test files checked out (the last
    line of before_repo_set_cmd): what a patch equal to the gold one leaves; None when the gold
    patch does not apply."""
    subprocess.run(["git", "-C", str(tree), "reset", "-q", "--hard", base], check=True)
    subprocess.run(["git", "-C", str(tree), "clean", "-qfdx"], check=True)
    applied = subprocess.run(
        ["git", "-C", str(tree), "apply", "-"], input=gold.encode(), capture_output=True
    )
    if applied.returncode != 0:
        return None
    subprocess.run(["bash", "-c", last_line], cwd=tree, check=True, capture_output=True)
    return tree_of(tree)


def check_instance(
    got: dict | None, row: dict, task_lists: dict | None, gold: str | None, source: str, trees: Path
) -> dict:
    """The checks of one instance (check_files's docstring); `row`: its samples.jsonl line."""
    iid = row["instance_id"]
    checks: dict = {}
    if got is None:
        return {"instance_id": iid, "ok": False, "checks": {"reached": False}}
    sample = got["sample"]
    checks["reached"] = True
    # pandas' reading (read_json, fillna("")) keeps every field as samples.jsonl has it.
    checks["fields_kept"] = all(sample.get(k) == row[k] for k in row)
    # The lists as the harness reads them (main and create_entryscript eval() the text) equal
    # the task's.
    evaluated = {k: list(eval(sample[k])) for k in LIST_FIELDS}
    checks["lists_evaluate"] = evaluated == (
        task_lists or {k: json.loads(row[k]) for k in LIST_FIELDS}
    )
    checks["scripts_found"] = "missing" not in got
    result = {"instance_id": iid, "image": got["image"], "prefix": got["prefix"]}
    if "missing" in got:
        result["missing"] = got["missing"]
    else:
        checks["binary_hunks_kept"] = not got["stripped"]
        lines = apply_lines(got["entryscript"])
        tree = trees / iid
        clone(source, tree)
        steps = run_apply(lines, tree, got["workspace"])
        result["steps"] = steps
        checks["entry_steps_pass"] = len(steps) == len(lines) and all(s["exit"] == 0 for s in steps)
        checks["patch_applies"] = any("git apply" in s["line"] and s["exit"] == 0 for s in steps)
        if checks["entry_steps_pass"] and gold is not None:
            tested = tree_of(tree)
            last = row["before_repo_set_cmd"].strip().split("\n")[-1]
            expected = gold_tree(tree, row["base_commit"], gold, last)
            checks["tree_is_gold_tree"] = tested == expected
        shutil.rmtree(tree, ignore_errors=True)
    result["checks"] = checks
    result["ok"] = all(checks.values())
    result["next"] = NEXT_STEP.format(image=got["image"])
    return result


def check_files(
    harness: Path,
    mode_dir: Path,
    work: Path,
    source_of: Callable[[str], str],
    tasks: dict | None = None,
) -> dict:
    """The two files of `mode_dir` (patches.json, samples.jsonl) checked with the harness's own
    code in directory `harness` (harness_dir); source_of(repo) the clone URL of a repository;
    tasks: {instance id: SweTask} where the rows are known (their lists and gold patches). The
    record, written to <work>/check.json by main::

        {"harness", "files": {"samples", "patches"}, "printed": what main() printed,
         "eval_results_ids": the ids of the eval_results.json main wrote,
         "instances": [{"instance_id", "ok", "image", "prefix", "missing"?, "steps"?: [{"line",
           "exit", "output"}], "next", "checks": {"reached": main() gave it to its evaluation,
           "fields_kept": pandas kept every samples.jsonl field, "lists_evaluate": eval() of
           the three lists is the task's, "scripts_found": run_script.sh, parser.py and both
           Dockerfiles, "binary_hunks_kept": strip_binary_hunks left the patch as it was,
           "entry_steps_pass": every line of the entry script up to the test run exited 0,
           "patch_applies": its git apply did, "tree_is_gold_tree"?: (gold known) the tree it
           leaves is the base + gold patch + the row's test files}}]}
    """
    samples, patches = mode_dir / "samples.jsonl", mode_dir / "patches.json"
    rows = {r["instance_id"]: r for r in map(json.loads, samples.read_text().splitlines())}
    module = load_harness(harness)
    calls, printed, results = run_main(module, harness, samples, patches, work / "harness-output")
    instances = []
    for entry in json.loads(patches.read_text()):
        iid = entry["instance_id"]
        task = (tasks or {}).get(iid)
        lists = {k: list(getattr(task, _task_field(k))) for k in LIST_FIELDS} if task else None
        gold = task.patch if task else None
        row = rows.get(iid, {"instance_id": iid})
        instances.append(
            check_instance(
                calls.get(iid), row, lists, gold, source_of(row.get("repo", "")), work / "trees"
            )
        )
    return {
        "harness": str(harness),
        "files": {"samples": str(samples), "patches": str(patches)},
        "printed": printed,
        "eval_results_ids": sorted(results),
        "instances": instances,
    }


def _task_field(name: str) -> str:
    return "selected_test_files" if name == "selected_test_files_to_run" else name


# -- the run with the stand-in agent -------------------------------------------------------------
def choose(rows_path: Path, instances: str, repos: str, per_repo: int) -> list[str]:
    """Instance ids: `instances` as given, else the first `per_repo` rows of each of `repos`."""
    if instances:
        return [i.strip() for i in instances.split(",") if i.strip()]
    sys.path.insert(0, str(SOURCE_ROOT / "scripts"))
    from import_swebench import read_rows

    wanted = [r.strip() for r in repos.split(",") if r.strip()]
    chosen: dict[str, list[str]] = {r: [] for r in wanted}
    for _, row in read_rows(rows_path):
        if isinstance(row, dict) and row.get("repo") in chosen:
            if len(chosen[row["repo"]]) < per_repo:
                chosen[row["repo"]].append(row["instance_id"])
    return [i for r in wanted for i in chosen[r]]


def set_up(work: Path, rows_path: Path, ids: list[str], environ: dict) -> Path:
    """The project under `work` (its task file of the rows `ids`, the shipped modes.toml) and
    the stand-in agent with each row's gold patch; the task file."""
    project = work / "project"
    (project / "tasks").mkdir(parents=True, exist_ok=True)
    task_file = project / "tasks" / f"{BENCH}.json"
    subprocess.run(
        [sys.executable, str(SOURCE_ROOT / "scripts" / "import_swebench.py"), "--pro",
         "--rows", str(rows_path), "--out", str(task_file), "--instances", ",".join(ids)],
        check=True, env=environ,
    )  # fmt: skip
    shutil.copy(SOURCE_ROOT / "modes.toml", project / "modes.toml")
    agent = work / "agent"
    for task in load_benchmark(task_file).tasks:
        d = agent / "tasks" / task.instance_id
        d.mkdir(parents=True, exist_ok=True)
        (d / "gold.patch").write_text(task.patch)  # type: ignore[union-attr]
    (agent / "stand-in").write_text(STAND_IN)
    (agent / "stand-in").chmod(0o755)
    return task_file


def depth_one_copies(tasks: list, work: Path) -> str:
    """For each task's repository, a bare repository under `work` holding only the tasks' base
    and fix commits (the fix: named by before_repo_set_cmd's last line), each without its
    history (``git fetch --depth=1`` from NGINX_EVAL_REPO_URL's clone): for snapshots that lack
    blobs of their history, which the workspace's fetch of a base would need. The URL template
    of the copies."""
    commits: dict[str, set[str]] = {}
    for task in tasks:
        words = task.before_repo_set_cmd.strip().splitlines()[-1].split()
        fix = [w for w in words if len(w) == 40 and all(c in "0123456789abcdef" for c in w)]
        commits.setdefault(task.repo, set()).update([task.base_commit, *fix])
    upload = "git -c uploadpack.allowAnySHA1InWant=true upload-pack"
    for repo, shas in commits.items():
        copy = work / "mirrors" / repo.replace("/", "+")
        shutil.rmtree(copy, ignore_errors=True)
        subprocess.run(["git", "init", "-q", "--bare", str(copy)], check=True)
        source = repo_url(repo)
        subprocess.run(
            ["git", "-C", str(copy), "fetch", "-q", "--depth=1", f"--upload-pack={upload}",
             source if "://" in source else f"file://{source}",
             *(f"{sha}:refs/heads/c-{sha}" for sha in sorted(shas))],
            check=True,
        )  # fmt: skip
    return str(work / "mirrors" / "{owner}+{name}")


def summary_line(result: dict) -> str:
    passed = ", ".join(k for k, v in result["checks"].items() if v)
    failed = ",".join(k for k, v in result["checks"].items() if not v)
    return f"{result['instance_id']}: {'FAILED ' + failed if failed else 'ok'} ({passed})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=Path, help="an export of the Pro dataset's rows")
    parser.add_argument(
        "--files", type=Path, help="a mode's folder with patches.json, samples.jsonl"
    )
    parser.add_argument("--harness", type=Path, default=os.environ.get(HARNESS_VAR))
    parser.add_argument("--instances", default="")
    parser.add_argument("--repos", default="")
    parser.add_argument("--per-repo", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("/tmp/nginx-eval-swe-pro-check"))
    parser.add_argument("--run", default="pro-check", help="the run's name (results/<run>/)")
    parser.add_argument(
        "--depth-one",
        action="store_true",
        help="run on depth-1 copies of the rows' commits (snapshots that lack history blobs)",
    )
    args = parser.parse_args()
    if args.harness is None:
        parser.error(f"--harness (or {HARNESS_VAR}) must name the harness's checkout")
    if bool(args.rows) == bool(args.files):
        parser.error("give --rows (run and check) or --files (check a mode's files)")
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    report: dict = {}
    if args.files:
        modes = {"files": args.files.resolve()}
        tasks = None

        def source_of(repo: str) -> str:
            return repo_url(repo)
    else:
        ids = choose(args.rows, args.instances, args.repos, args.per_repo)
        if not ids:
            parser.error("no rows chosen: give --instances, or --repos of the rows")
        environ = dict(
            os.environ,
            NGINX_EVAL_ROOT=str(work / "project"),
            NGINX_EVAL_CACHE=os.environ.get("NGINX_EVAL_CACHE") or str(work / "cache"),
            NGINX_EVAL_RESULTS=str(work / "results"),
            AGENT=str(work / "agent" / "stand-in"),
        )
        task_file = set_up(work, args.rows.resolve(), ids, environ)
        tasks = {t.instance_id: t for t in load_benchmark(task_file).tasks}
        if args.depth_one:
            environ["NGINX_EVAL_REPO_URL"] = depth_one_copies(list(tasks.values()), work)
        began = time.monotonic()
        doit = subprocess.run(
            [sys.executable, "-m", "doit", "-f", str(SOURCE_ROOT / "dodo.py"), "run",
             *(f"{BENCH}:{m}" for m in MODES), f"run={args.run}", "strict=0", "report=0"],
            env=environ, cwd=work,
        )  # fmt: skip
        report["doit"] = {"exit": doit.returncode, "seconds": round(time.monotonic() - began, 1)}
        print(f"doit exit {doit.returncode} in {report['doit']['seconds']} s", flush=True)
        os.environ.update(environ)
        layout = Layout.from_env(run=args.run)
        modes = {m: layout.mode_dir(m) for m in MODES}

        def source_of(repo: str) -> str:
            bare = layout.bare_repo(repo)
            return str(bare) if (bare / "HEAD").exists() else repo_url(repo)

    all_ok = True
    for name, folder in modes.items():
        ids = [
            r["instance_id"]
            for r in map(json.loads, (folder / "samples.jsonl").read_text().splitlines())
        ]
        directory, commit = harness_dir(args.harness.resolve(), ids, work)
        began = time.monotonic()
        checked = check_files(directory, folder, work / name, source_of, tasks)
        checked.update(harness_commit=commit, seconds=round(time.monotonic() - began, 1))
        report[name] = checked
        print(f"{name}: {folder} ({checked['seconds']} s)")
        for result in checked["instances"]:
            print("  " + summary_line(result))
            all_ok = all_ok and result["ok"]
        if checked["instances"]:
            print("  " + checked["instances"][0]["next"].split(":", 1)[0])
    (work / "check.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"details in {work / 'check.json'}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
