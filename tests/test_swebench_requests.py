"""The SWE-bench path end to end on a real repository: two rows of psf/requests from the shipped
SWE-bench Verified parquet, imported by scripts/import_swebench.py, run by the shipped modes
(``gold``, and ``raw`` with a stand-in agent given by AGENT=) from a local mirror of psf/requests,
to predictions.jsonl files that the official harness's own loader reads (when the swebench
package is installed) and whose patches apply at the rows' base commits; the doctor and the
report on them, in SWE-bench's words.

Runs only where NGINX_EVAL_REPO_URL names a local mirror of psf/requests (a bare clone at
``{owner}+{name}`` of the template, beside the nginx mirrors), e.g.::

    git clone --bare https://github.com/psf/requests /srv/mirrors/psf+requests/repo
    export NGINX_EVAL_REPO_URL='/srv/mirrors/{owner}+{name}/repo'
    python -m pytest tests/test_swebench_requests.py

and the rows (swebench_fixture.VERIFIED); elsewhere it skips, saying which is missing.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import swebench_fixture as sf
from conftest import SOURCE_ROOT, section
from test_sandbox import needs_srt

from nginx_eval.core.gitcmd import remote_problem
from nginx_eval.swebench import harness

BENCH = "swebench-verified"
REPO = "psf/requests"
# A row of 2013 (requests 1.1, FAIL_TO_PASS in test_requests.py) and one of 2015 (2.9).
ROWS = ("psf__requests-1142", "psf__requests-2931")
TEMPLATE = os.environ.get("NGINX_EVAL_REPO_URL", "")
MIRROR = TEMPLATE.format(owner="psf", name="requests") if TEMPLATE else ""


def mirror_problem() -> str | None:
    if not TEMPLATE:
        return "NGINX_EVAL_REPO_URL is not set"
    if "://" in MIRROR or not Path(MIRROR).is_dir():
        return f"{MIRROR} (NGINX_EVAL_REPO_URL for {REPO}) is no local mirror"
    return remote_problem(MIRROR)


pytestmark = [
    sf.needs_verified,
    pytest.mark.skipif(
        mirror_problem() is not None,
        reason=f"needs a local mirror of {REPO} at NGINX_EVAL_REPO_URL's {{owner}}+{{name}} "
        f"(tests/test_swebench_requests.py says how): {mirror_problem()}",
    ),
    pytest.mark.slow,
]

# The stand-in agent: one change to the package, as an agent's patch, and a file of bytecode
# (which never reaches the patch).
STAND_IN = r"""#!/bin/bash
printf '\n# reviewed for the report\n' >> requests/__init__.py
env -u PYTHONDONTWRITEBYTECODE python3 -c \
    'import py_compile; py_compile.compile("requests/__init__.py")'
"""


def read_jsonl(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


@needs_srt
def test_two_requests_rows_from_import_to_predictions_the_harness_reads(project):
    import pyarrow.parquet  # here, not at collection: every xdist worker collects every module

    rows = {
        r["instance_id"]: r
        for r in pyarrow.parquet.read_table(sf.VERIFIED).to_pylist()
        if r["instance_id"] in ROWS
    }
    assert set(rows) == set(ROWS)
    env = dict(project.env, NGINX_EVAL_REPO_URL=TEMPLATE)
    done = subprocess.run(
        [
            sys.executable,
            str(SOURCE_ROOT / "scripts" / "import_swebench.py"),
            "--rows",
            str(sf.VERIFIED),
            "--out",
            str(project.root / "tasks" / f"{BENCH}.json"),
            "--instances",
            ",".join(ROWS),
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    shutil.copy(SOURCE_ROOT / "modes.toml", project.root / "modes.toml")
    stand_in = project.base / "stand-in-requests-agent"
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    env["AGENT"] = str(stand_in)

    # The doctor names the repository and how it is had: not cloned yet, its mirror answers.
    proc, _ = project.doit("run", "doctor", f"bench={BENCH}", "run=req", check=False, env=env)
    assert (
        f"OK      repositories of the SWE-bench tasks: {REPO} (reachable at {MIRROR})"
    ) in proc.stdout.splitlines(), proc.stdout

    proc, executed = project.doit(
        "run", f"{BENCH}:gold", f"{BENCH}:raw", "run=req", "keep_workspaces=1", env=env
    )
    assert any(t.startswith("repos") for t in executed)  # cloned from the mirror
    out = project.results / "req"
    gold, raw = (
        read_jsonl(out / "gold" / "predictions.jsonl"),
        read_jsonl(out / "raw" / "predictions.jsonl"),
    )
    assert [p["instance_id"] for p in gold] == [p["instance_id"] for p in raw] == list(ROWS)
    # gold is the rows' own gold patch; raw ran the stand-in, so no model is claimed for it.
    assert [p["model_patch"] for p in gold] == [rows[i]["patch"] for i in ROWS]
    assert {p["model_name_or_path"] for p in gold} == {"nginx-eval/gold"}
    assert {p["model_name_or_path"] for p in raw} == {"nginx-eval/raw"}
    for p in raw:
        assert p["model_patch"].startswith(
            "diff --git a/requests/__init__.py b/requests/__init__.py"
        )
        assert "+# reviewed for the report" in p["model_patch"] and ".pyc" not in p["model_patch"]
    for p in gold + raw:
        assert harness.prediction_problems([p]) == []
    if sf.swebench_importable():
        for mode, preds in (("gold", gold), ("raw", raw)):
            loaded = sf.predictions_as_the_harness_reads_them(out / mode / "predictions.jsonl")
            assert loaded == preds
    # What the harness does first: each patch and the row's test patch apply at the base.
    tree = project.base / "requests-check"
    subprocess.run(["git", "clone", "-q", MIRROR, str(tree)], check=True)
    for p in gold + raw:
        row = rows[p["instance_id"]]
        subprocess.run(
            ["git", "-C", str(tree), "checkout", "-q", "-f", row["base_commit"]], check=True
        )
        for patch in (p["model_patch"], row["test_patch"]):
            check = subprocess.run(
                ["git", "-C", str(tree), "apply", "--check", "-"],
                input=patch.encode(),
                capture_output=True,
            )
            assert check.returncode == 0, (p["instance_id"], check.stderr)
    # The command each mode's results print, with the harness's default --max_workers said so.
    for mode in ("gold", "raw"):
        pred = out / mode / "predictions.jsonl"
        rid = harness.run_id("req", mode, harness.predictions_digest(pred))
        assert (
            f"{BENCH}:{mode}: 2 prediction(s) in {pred}; grade them where Docker is: python -m "
            f"swebench.harness.run_evaluation --dataset_name SWE-bench/SWE-bench_Verified "
            f"--split test --predictions_path {pred} --max_workers 4 --run_id {rid} "
            f"--report_dir {out / 'evaluation'} (--max_workers 4 is the harness's default; "
            f"give at most three quarters of the grading machine's cores)"
        ) in proc.stdout.splitlines()

    # The report before any grading: SWE-bench's words, no nginx's.
    project.render("run=req")
    md = (out / "report.md").read_text()
    assert section(md, "Paired comparisons").strip() == (
        "No mode is graded by the official harness yet: nothing to compare until two are. "
        "Awaiting grading: `gold`, `raw` (the commands are in SWE-bench grading below)."
    )
    # The outcomes a SWE-bench row can have, not nginx's build, prove and partial credit.
    summary = section(md, "Summary")
    assert "| mode | resolved | unresolved | timeout | agent error | resolved, 95% CI |" in summary
    assert (
        section(md, "By test source")
        .strip()
        .startswith(
            "Tasks graded by the tests of their SWE-bench rows (FAIL_TO_PASS and PASS_TO_PASS"
        )
    )
    assert "nginx" not in section(md, "Per task").lower()
    assert "--max_workers 4" in section(md, "SWE-bench grading")
