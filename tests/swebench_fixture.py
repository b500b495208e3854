"""A SWE-bench task on a fixture Python repository, and an official-format evaluation of it.

``acme/pycalc`` is a Python package with a bug: ``pycalc.calc.add`` subtracts. Its history:

    p_base   add() subtracts; tests/test_calc.py tests mul()       (base of acme__pycalc-1)
    p_fix    add() fixed                                          (the gold patch: base..fix)

The task's row is in the dataset's own format (FAIL_TO_PASS and PASS_TO_PASS as JSON text, as
the Hugging Face export has them): its test_patch adds tests/test_calc.py::test_add, which fails
at the base and passes with the fix. The repository has no .gitignore, so the __pycache__ an agent
makes by running the code stays out of the patch only by the harness's own rule.

``grade_locally`` stands in for ``swebench.harness.run_evaluation`` without Docker: it applies
the prediction and the test patch to a checkout of the base, runs pytest there, and writes the
per-instance ``report.json`` and the run report field for field as swebench 5.0.2's
``harness.grading.get_eval_report`` and ``harness.reporting.make_run_report`` write them
(``official_run_report``), or, with ``use_package``, with those functions themselves (5.0.2
installed apart, SWEBENCH5_DIR; test_swebench.py compares the two).
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from time import time_ns

import pytest
from conftest import script_module
from fixture_repos import commit, git, write

# The real rows of SWE-bench Verified (shared/data/README.md beside the project): the folder
# SHARED_DATA_DIR names, else shared/data beside the project's checkout (as CI lays it out).
SHARED_DATA = Path(
    os.environ.get("SHARED_DATA_DIR")
    or Path(__file__).resolve().parent.parent.parent / "shared" / "data"
)
VERIFIED = SHARED_DATA / "swebench-verified.parquet"
needs_verified = pytest.mark.skipif(
    not VERIFIED.is_file(),
    reason=f"no {VERIFIED}: the rows of SWE-bench Verified are in shared/data beside the "
    f"project (or set SHARED_DATA_DIR to their folder)",
)

IID = "acme__pycalc-1"
CALC = "def add(a, b):\n    return {}\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = "from pycalc.calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
TEST_ADD = (
    "from pycalc.calc import add, mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
    "\n\ndef test_add():\n    assert add(2, 3) == 5\n"
)
STATEMENT = "pycalc.calc.add(2, 3) returns -1, but the sum of 2 and 3 is 5."
FIX = "sed -i 's/return a - b/return a + b/' pycalc/calc.py"

# The stand-in agent (AGENT=...): answers each shipped prompt by a phrase of it and fixes the bug
# of the task it is given, as an agent would: on acme/pycalc it also runs the code (with bytecode
# on, so __pycache__ is left behind) and, when verifying, the tests; on the nginx fixture
# (tiny) it fixes calc.c.
STAND_IN = r"""#!/bin/bash
case "$1" in
*"write a short plan"*) echo "make add() add" > .plan.md ;;
*"Check your fix"*) if [ -d pycalc ]; then python3 -m pytest -q -p no:cacheprovider tests; fi ;;
*) rm -f .plan.md
   # The task file holds the gold and the test patch: the sandbox hides it.
   cat "TASKFILE" >/dev/null 2>&1 && echo "TASK FILE READ" \
       || echo "task file hidden"
   if [ -d pycalc ]; then
       FIX
       env -u PYTHONDONTWRITEBYTECODE python3 -c 'import pycalc.calc as c; print(c.add(2, 3))'
   else
       sed -i -e 's/a - b/a + b/' -e 's/a \* b + (a > 1)/a * b/' src/core/calc.c
   fi ;;
esac
"""


def importer():
    """scripts/import_swebench.py as a module (a script, not a package module)."""
    return script_module("import_swebench")


def make_pycalc(path):
    """The repository at `path`; {"p_base", "p_fix", "gold", "test_patch"}."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    write(path / "pycalc" / "__init__.py", "")
    write(path / "pycalc" / "calc.py", CALC.format("a - b"))
    write(path / "tests" / "__init__.py", "")
    write(path / "tests" / "test_calc.py", TESTS)
    write(path / "setup.cfg", "[metadata]\nname = pycalc\n")
    out = {"p_base": commit(path, "pycalc: add and mul")}
    write(path / "pycalc" / "calc.py", CALC.format("a + b"))
    out["p_fix"] = commit(path, "Fix add")
    out["gold"] = git(path, "diff", out["p_base"], out["p_fix"]) + "\n"
    write(path / "tests" / "test_calc.py", TEST_ADD)
    out["test_patch"] = git(path, "diff") + "\n"
    git(path, "checkout", "-q", "--", ".")
    return out


def dataset_row(commits):
    """The task's row as the dataset export has it."""
    return {
        "instance_id": IID,
        "repo": "acme/pycalc",
        "base_commit": commits["p_base"],
        "problem_statement": STATEMENT,
        "version": "0.1",
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
        "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_mul"]),
        "patch": commits["gold"],
        "test_patch": commits["test_patch"],
        "environment_setup_commit": commits["p_base"],
        "created_at": "2024-05-01T12:00:00Z",
        "hints_text": "",
        "difficulty": "<15 min fix",
    }


def add_swebench(project):
    """The fixture project (conftest.Project) with acme/pycalc beside its repositories and
    tasks/swebench-verified.json imported from an export of the task's row; the commits."""
    commits = make_pycalc(project.mirrors / "acme+pycalc")
    rows = project.base / "verified.jsonl"
    rows.write_text(json.dumps(dataset_row(commits)) + "\n")
    import_rows(project, rows, "swebench-verified.json")
    return commits


def import_rows(project, rows, task_file, *options):
    """scripts/import_swebench.py OPTIONS on the rows file `rows`, into the project's
    tasks/`task_file`."""
    subprocess.run(
        [
            sys.executable,
            str(Path(__file__).parent.parent / "scripts" / "import_swebench.py"),
            *options,
            "--rows",
            str(rows),
            "--out",
            str(project.root / "tasks" / task_file),
        ],
        check=True,
        capture_output=True,
        env=project.env,
    )


def stand_in_agent(directory, task_file="/nonexistent"):
    """The stand-in's script in `directory`; task_file: the one it tries to read."""
    script = Path(directory) / "stand-in-python-agent"
    script.write_text(STAND_IN.replace("FIX", FIX).replace("TASKFILE", str(task_file)))
    script.chmod(0o755)
    return str(script)


# -- the official harness's evaluation, without Docker --------------------------------------------
START, END = ">>>>> Start Test Output", ">>>>> End Test Output"  # harness/constants


def test_log(mirror, base, patches, workdir):
    """What the harness's eval script logs: the tests of the task, run with pytest -rA on the
    base with `patches` applied (git apply), between its markers."""
    tree = Path(workdir)
    subprocess.run(["git", "clone", "-q", str(mirror), str(tree)], check=True)
    subprocess.run(["git", "-C", str(tree), "checkout", "-q", base], check=True)
    applied = True
    for patch in patches:
        if patch.strip():
            done = subprocess.run(
                ["git", "-C", str(tree), "apply", "-"], input=patch.encode(), capture_output=True
            )
            applied = applied and done.returncode == 0
    if not applied:
        return ">>>>> Patch Apply Failed\n"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "tests/test_calc.py"],
        cwd=tree,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
    )
    return f"{START}\n{run.stdout}\n{END}\n"


# swebench 5.0.2's get_eval_report of each instance in a['instances'], written to its 'out'.
PACKAGE_REPORTS = (
    "from swebench.harness.grading import get_eval_report\n"
    "from swebench.types import TestSpec\n"
    "for i in a['instances']:\n"
    "    spec = TestSpec(instance_id=i['iid'], image='none', eval_script_list=[], repo=i['repo'], "
    "version=i['version'], FAIL_TO_PASS=i['f2p'], PASS_TO_PASS=i['p2p'], "
    "log_parser='parse_log_pytest', eval_type='pass_and_fail')\n"
    "    report = get_eval_report(spec, i['prediction'], i['log'], include_tests_status=True)\n"
    "    with open(i['out'], 'w') as f:\n"
    "        f.write(json.dumps(report, indent=4))\n"
)


def package_instance(iid, prediction, log_path, row, out):
    """What PACKAGE_REPORTS needs of one instance, whose report.json goes to `out`."""
    return {
        "iid": iid,
        "repo": row["repo"],
        "version": row["version"],
        "f2p": json.loads(row["FAIL_TO_PASS"]),
        "p2p": json.loads(row["PASS_TO_PASS"]),
        "prediction": prediction,
        "log": str(log_path),
        "out": str(out),
    }


def instance_report(iid, prediction, log_path, row):
    """report.json of one instance, its fields as swebench 5.0.2's get_eval_report writes them
    (with ``use_package``, grade_locally runs that function itself: PACKAGE_REPORTS)."""
    text = Path(log_path).read_text()
    passed = {line.split()[1] for line in text.splitlines() if line.startswith("PASSED ")}
    f2p, p2p = json.loads(row["FAIL_TO_PASS"]), json.loads(row["PASS_TO_PASS"])
    found = START in text
    return {
        iid: {
            "patch_is_None": False,
            "patch_exists": True,
            "patch_successfully_applied": found,
            "resolved": found and all(t in passed for t in f2p + p2p),
            "infra_failure": False,
        }
    }


def official_run_report(predictions, dataset, run_id, report_dir, logs):
    """The run report of swebench 5.0.2's reporting.make_run_report (client None), field for
    field, from the instances' report.json under `logs` (logs/run_evaluation)."""
    completed, resolved, unresolved, errors, empty, incomplete = (set() for _ in range(6))
    for instance in dataset:
        iid = instance["instance_id"]
        if iid not in predictions:
            incomplete.add(iid)
            continue
        prediction = predictions[iid]
        if prediction.get("model_patch", None) in ["", None]:
            empty.add(iid)
            continue
        report_file = (
            Path(logs)
            / run_id
            / prediction["model_name_or_path"].replace("/", "__")
            / iid
            / "report.json"
        )
        if report_file.exists():
            completed.add(iid)
            try:
                content = report_file.read_text().strip()
                if not content:
                    errors.add(iid)
                    continue
                (resolved if json.loads(content)[iid]["resolved"] else unresolved).add(iid)
            except (json.JSONDecodeError, KeyError):
                errors.add(iid)
        else:
            errors.add(iid)
    report = {
        "total_instances": len(dataset),
        "submitted_instances": len(predictions),
        "completed_instances": len(completed),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(unresolved),
        "infra_failure_instances": 0,
        "ambiguous_failure_instances": 0,
        "empty_patch_instances": len(empty),
        "error_instances": len(errors),
        "completed_ids": sorted(completed),
        "incomplete_ids": sorted(incomplete),
        "empty_patch_ids": sorted(empty),
        "submitted_ids": sorted(predictions),
        "resolved_ids": sorted(resolved),
        "unresolved_ids": sorted(unresolved),
        "infra_failure_ids": [],
        "ambiguous_failure_ids": [],
        "failure_reasons": {},
        "error_ids": sorted(errors),
        "schema_version": 2,
    }
    path = Path(report_dir) / (
        next(iter(predictions.values()))["model_name_or_path"].replace("/", "__")
        + f".{run_id}.json"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=4) + "\n")
    return path


def grade_locally(
    predictions_path, rows, run_id, report_dir, mirror, work, use_package=False, errors=()
):
    """Evaluate a predictions file as run_evaluation would (module docstring), in `work`;
    `errors`: instance ids whose evaluation fails (no report.json: the harness's error_ids).
    The run report's path."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    logs = work / "logs" / "run_evaluation"
    predictions = {
        p["instance_id"]: p
        for p in map(json.loads, Path(predictions_path).read_text().splitlines())
    }
    by_id = {r["instance_id"]: r for r in rows}
    by_package = []  # the instances whose report.json the package writes
    for iid, pred in predictions.items():
        if not pred["model_patch"] or iid in errors:
            continue
        folder = logs / run_id / pred["model_name_or_path"].replace("/", "__") / iid
        folder.mkdir(parents=True)
        log = folder / "test_output.txt"
        log.write_text(
            test_log(
                mirror,
                by_id[iid]["base_commit"],
                [pred["model_patch"], by_id[iid]["test_patch"]],
                work / f"tree-{iid}-{run_id}",
            )
        )
        if use_package:
            by_package.append(package_instance(iid, pred, log, by_id[iid], folder / "report.json"))
        else:
            report = instance_report(iid, pred, log, by_id[iid])
            (folder / "report.json").write_text(json.dumps(report, indent=4))
    if not use_package:
        return official_run_report(predictions, rows, run_id, report_dir, logs)
    # 5.0.2's own get_eval_report and make_run_report, in one Python (its import is 2.4 s of a
    # processor), run where the harness runs (it reads logs/run_evaluation relative to its
    # working directory).
    made = swebench5(
        PACKAGE_REPORTS + "from swebench.harness.reporting import make_run_report\n"
        "print(make_run_report(a['predictions'], a['rows'], a['run_id'], None, a['report_dir']))",
        {
            "instances": by_package,
            "predictions": predictions,
            "rows": rows,
            "run_id": run_id,
            "report_dir": str(report_dir),
        },
        cwd=work,
    )
    return (work / made.strip().splitlines()[-1]).resolve()


# swebench 5.0.2, whose run report official_run_report writes, installed apart by
# scripts/setup-debian.sh: the extras pin 4.1.0 (its specifications; nginx_eval/swebench/envs.py),
# which writes an older report.
SWEBENCH5_DIR = Path(os.environ.get("SWEBENCH5_DIR", "/opt/nginx-eval/swebench-5.0.2"))


def swebench_importable():
    """Whether swebench 5.0.2's reporting module is in SWEBENCH5_DIR."""
    return (SWEBENCH5_DIR / "swebench" / "harness" / "reporting.py").is_file() and any(
        SWEBENCH5_DIR.glob("swebench-5.*.dist-info")
    )


def swebench5(code, args, cwd=None):
    """The standard output of `code` run by a Python that imports swebench from SWEBENCH5_DIR,
    with `args` (JSON) as the variable `a`."""
    out = subprocess.run(
        [sys.executable, "-c", "import json, sys\na = json.load(sys.stdin)\n" + code],
        input=json.dumps(args),
        cwd=cwd,
        env=dict(os.environ, PYTHONPATH=str(SWEBENCH5_DIR)),
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def predictions_as_the_harness_reads_them(path):
    """swebench 5.0.2's get_predictions_from_file on the predictions file `path`."""
    return json.loads(
        swebench5(
            "from swebench.harness.utils import get_predictions_from_file\n"
            "print(json.dumps(get_predictions_from_file(a, 'unused', 'test')))",
            str(path),
        ).splitlines()[-1]
    )


# -- SWE-bench Pro: the same bug as a Pro row, and its harness's evaluation without Docker ---------
# The real rows of SWE-bench Pro (public) are not in shared/data: SWEBENCH_PRO_ROWS names an export
# of them (docs/benchmark.md#swe-bench-pro: 100 real rows from a public mirror).
PRO_ROWS = Path(os.environ.get("SWEBENCH_PRO_ROWS") or "/nonexistent/swebench-pro.jsonl")
needs_pro_rows = pytest.mark.skipif(
    not PRO_ROWS.is_file(),
    reason="no rows of SWE-bench Pro: set SWEBENCH_PRO_ROWS to an export of them "
    "(docs/benchmark.md#swe-bench-pro says where the public rows are)",
)
PRO_IID = "instance_acme__pycalc-" + "0" * 40 + "-vnan"
PRO_LINE = re.compile(r"^(tests/\S+)\s+(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)")


def add_pro_tests_commit(mirror, commits):
    """The fix with its tests, a commit no branch holds (a Pro row's before_repo_set_cmd checks
    the task's test files out of its fix commit)."""
    write(mirror / "tests" / "test_calc.py", TEST_ADD)
    git(mirror, "add", "tests/test_calc.py")
    tree = git(mirror, "write-tree").strip()
    sha = git(mirror, "commit-tree", tree, "-p", commits["p_fix"], "-m", "Fix add, with tests")
    git(mirror, "reset", "-q", "--hard")
    return sha.strip()


def pro_row(commits, tests_commit):
    """The task's row as the SWE-bench Pro export has it (lists as Python literals, as most of
    the real rows have them)."""
    base = commits["p_base"]
    return {
        "repo": "acme/pycalc",
        "instance_id": PRO_IID,
        "base_commit": base,
        "patch": commits["gold"],
        "test_patch": commits["test_patch"],
        "problem_statement": STATEMENT,
        "requirements": "- `add(a, b)` must return the sum of `a` and `b`.",
        "interface": "No new interfaces are introduced.",
        "repo_language": "python",
        "fail_to_pass": "['tests/test_calc.py::test_add']",
        "pass_to_pass": '["tests/test_calc.py::test_mul"]',
        "issue_specificity": '["minor_bug"]',
        "issue_categories": '["back_end_knowledge"]',
        "before_repo_set_cmd": f"git reset --hard {base}\ngit clean -fd \ngit checkout {base} \n"
        f"git checkout {tests_commit} -- tests/test_calc.py",
        "selected_test_files_to_run": '["tests/test_calc.py"]',
        "dockerhub_tag": "acme.pycalc-acme__pycalc-" + "0" * 40,
    }


def add_swebench_pro(project, commits):
    """tasks/swebench-pro.json of the fixture project, imported from an export of pro_row;
    the row."""
    row = pro_row(commits, add_pro_tests_commit(project.mirrors / "acme+pycalc", commits))
    rows = project.base / "pro.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    import_rows(project, rows, "swebench-pro.json", "--pro")
    return row


def grade_pro_locally(samples_path, patches_path, output_dir, mirror, work, errors=()):
    """Evaluate patches.json as swe_bench_pro_eval.py does (its entry script: reset to the base,
    `git apply` the patch, the last line of before_repo_set_cmd, the selected test files run, the
    output parsed as its Python parser.py does: `tests/...  PASSED` lines of pytest -v), without
    Docker: `<output_dir>/<id>/<prefix>_output.json` and eval_results.json ({id: every
    fail_to_pass and pass_to_pass test passed}). `errors`: ids whose run yields no output (the
    harness's None). The eval_results.json path."""
    output_dir, work = Path(output_dir), Path(work)
    samples = {
        s["instance_id"]: s for s in map(json.loads, Path(samples_path).read_text().splitlines())
    }
    results = {}
    for entry in json.loads(Path(patches_path).read_text()):
        iid, sample = entry["instance_id"], samples[entry["instance_id"]]
        if iid in errors:
            results[iid] = False
            continue
        tree = work / f"tree-{iid}-{time_ns()}"
        subprocess.run(["git", "clone", "-q", str(mirror), str(tree)], check=True)
        subprocess.run(["git", "-C", str(tree), "reset", "-q", "--hard", sample["base_commit"]])
        subprocess.run(
            ["git", "-C", str(tree), "apply", "-v", "-"],
            input=entry["patch"].encode(),
            capture_output=True,
        )
        last = sample["before_repo_set_cmd"].strip().split("\n")[-1]
        subprocess.run(["bash", "-c", last], cwd=tree, check=True, capture_output=True)
        files = json.loads(sample["selected_test_files_to_run"])
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", *files],
            cwd=tree,
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
        )
        tests = []
        for line in run.stdout.splitlines():
            m = PRO_LINE.match(line)
            if m:
                status = {"XFAIL": "PASSED", "XPASS": "FAILED"}.get(m.group(2), m.group(2))
                tests.append({"name": m.group(1), "status": status})
        (output_dir / iid).mkdir(parents=True, exist_ok=True)
        (output_dir / iid / f"{entry['prefix']}_output.json").write_text(
            json.dumps({"tests": tests})
        )
        passed = {t["name"] for t in tests if t["status"] == "PASSED"}
        wanted = set(json.loads(sample["fail_to_pass"])) | set(json.loads(sample["pass_to_pass"]))
        results[iid] = wanted <= passed
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "eval_results.json").write_text(json.dumps(results))
    return output_dir / "eval_results.json"
