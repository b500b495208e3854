"""SWE-bench environments built here and the local verdict (nginx_eval/swebench/envs.py,
verdict.py): the fixture repository acme/pycalc (tests/swebench_fixture.py) with a specification
of its own, built with the host's Python (NGINX_EVAL_SWE_PYTHON=host, so that it runs on every
machine), its gold and empty patches graded by the local verdict; the swebench package's parser
and grading on logs of real pytest runs; and the real rows of SWE-bench Verified on the mirrors."""

import json
import subprocess

import pytest
from swebench_fixture import (
    IID,
    VERIFIED,
    add_swebench,
    dataset_row,
    make_pycalc,
    needs_verified,
)
from swebench_fixture import test_log as pycalc_log

from nginx_eval.core.layout import Layout
from nginx_eval.run.swebench import OPTIONAL, REQUIRED, SweTask, parse_task
from nginx_eval.swebench import envs, verdict

THREE = ("psf/requests", "pallets/flask", "pytest-dev/pytest")
MIRRORS = "/work/.mirror/{owner}+{name}/repo"


def task_of(row: dict) -> SweTask:
    fields = {k: row[k] for k in REQUIRED + OPTIONAL if row.get(k) is not None}
    return parse_task(fields, "rows", 0)


def pycalc_spec(python: str) -> dict:
    """acme/pycalc's specification: offline (no bootstrap, the host's pytest and setuptools),
    its setup.py written by pre_install (the checkout has only setup.cfg), a development
    install (setup.py develop: the host may have no wheel package for pip's editable one)."""
    return {
        "acme/pycalc": {
            "0.1": {
                "python": python,
                "bootstrap": [],
                "venv_options": ["--system-site-packages", "--without-pip"],
                "pre_install": ["printf 'from setuptools import setup\\nsetup()\\n' > setup.py"],
                "install": "python setup.py --quiet develop --no-deps",
                "test_cmd": "python -m pytest -rA -p no:cacheprovider",
                "log_parser": "parse_log_pytest",
            }
        }
    }


@pytest.fixture
def pycalc(tmp_path, monkeypatch):
    """(layout, task, commits) of acme/pycalc with its own specification."""
    commits = make_pycalc(tmp_path / "mirrors" / "acme+pycalc")
    found = envs.host_python()
    assert found, "the tests run with a python3 on PATH"
    specs = tmp_path / "specs.json"
    specs.write_text(json.dumps(pycalc_spec(found[0])))
    monkeypatch.setenv(envs.SPECS_VAR, str(specs))
    monkeypatch.setenv(envs.PYTHON_VAR, envs.HOST)
    monkeypatch.setenv("NGINX_EVAL_REPO_URL", str(tmp_path / "mirrors" / "{owner}+{name}"))
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    return layout, task_of(dataset_row(commits)), commits


@pytest.mark.e2e
def test_environment_built_and_local_verdicts(pycalc):
    layout, task, commits = pycalc
    rec = envs.build(layout, task)
    assert rec["status"] == envs.BUILT, rec["reason"]
    assert rec["suite"] == envs.HOST and rec["bytes"] > 0 and rec["format_version"] >= 1
    view = envs.sandbox_view(task, layout)
    assert view is not None and view.venv.is_dir() and view.rootfs.as_posix() == "/"
    assert view.environment["VIRTUAL_ENV"] == "/opt/swe-env" and view.testbed == "/testbed"
    # The install's own file of the checkout goes to the agent's workspace too.
    assert view.testbed_files and (view.testbed_files / "setup.py").is_file()
    # The editable install points at /testbed, where a checkout is bound later.
    pth = "".join(p.read_text() for p in view.venv.rglob("*.pth"))
    assert "/testbed" in pth
    assert envs.test_command(task, layout) == (
        "python -m pytest -rA -p no:cacheprovider tests/test_calc.py"
    )
    assert envs.build(layout, task)["seconds"] == rec["seconds"]  # cached: not built again

    outcomes = {}
    for mode, patch in (("gold", task.patch.encode()), ("none", b""), ("bad", b"garbage\n")):
        out = layout.local_verdict_json(mode, IID)
        got = verdict.local_verdict(
            layout, task, patch, mode, out, layout.local_verdict_log(mode, IID)
        )
        assert json.loads(out.read_text())["status"] == got["status"]
        outcomes[mode] = got
    assert outcomes["gold"]["status"] == "resolved", layout.local_verdict_log("gold", IID)
    assert outcomes["gold"]["tests"]["FAIL_TO_PASS"]["success"] == ["tests/test_calc.py::test_add"]
    assert outcomes["none"]["status"] == "unresolved"
    assert outcomes["none"]["tests"]["FAIL_TO_PASS"]["failure"] == ["tests/test_calc.py::test_add"]
    assert outcomes["none"]["tests"]["PASS_TO_PASS"]["success"] == ["tests/test_calc.py::test_mul"]
    assert outcomes["bad"]["status"] == "patch_failed" and outcomes["bad"]["resolved"] is False
    assert not layout.swe_verdict_scratch("gold", IID).exists()  # the copy of the venv is gone


def test_not_built_with_the_reason(tmp_path, monkeypatch):
    """A spec whose Python no Debian suite offers: not built, and why, without building."""
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    specs = tmp_path / "specs.json"
    specs.write_text(json.dumps(pycalc_spec("2.7")))
    monkeypatch.setenv(envs.SPECS_VAR, str(specs))
    monkeypatch.delenv(envs.PYTHON_VAR, raising=False)
    task = task_of(dataset_row({"p_base": "a" * 40, "gold": "", "test_patch": ""}))
    rec = envs.build(layout, task)
    assert rec["status"] == envs.NOT_BUILT
    assert "Python 2.7" in rec["reason"] and "no Debian suite" in rec["reason"]
    assert envs.sandbox_view(task, layout) is None
    out = tmp_path / "v.json"
    got = verdict.local_verdict(layout, task, b"", "none", out, tmp_path / "v.log")
    assert got["status"] == "not_built" and got["resolved"] is None


def test_grading_of_real_pytest_logs(tmp_path, monkeypatch):
    """swebench's parser and grading on what pytest -rA printed on the fixture's tests: the test
    patch alone fails FAIL_TO_PASS, with the gold patch everything passes."""
    commits = make_pycalc(tmp_path / "pycalc")
    task = task_of(dataset_row(commits))
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    facts = envs.package_facts(layout)
    base = pycalc_log(tmp_path / "pycalc", commits["p_base"], [task.test_patch], tmp_path / "a")
    fixed = pycalc_log(
        tmp_path / "pycalc", commits["p_base"], [task.patch, task.test_patch], tmp_path / "b"
    )
    resolved, report = verdict.grade(base, task, "parse_log_pytest", facts)
    assert not resolved and report["FAIL_TO_PASS"]["failure"] == ["tests/test_calc.py::test_add"]
    resolved, report = verdict.grade(fixed, task, "parse_log_pytest", facts)
    assert resolved and report["PASS_TO_PASS"]["success"] == ["tests/test_calc.py::test_mul"]
    # A log without the markers (the test patch did not apply) grades nothing as passed.
    resolved, _ = verdict.grade(verdict.APPLY_PATCH_FAIL + "\n", task, "parse_log_pytest", facts)
    assert not resolved


def verified_rows() -> list[dict]:
    import pyarrow.parquet as pq

    return [r for r in pq.read_table(VERIFIED).to_pylist() if r["repo"] in THREE]


@needs_verified
def test_real_rows_specs_and_test_files(tmp_path, monkeypatch):
    """On the rows of requests, flask and pytest: the test files are swebench's own
    get_test_directives; each has a specification and a suite (3.9: bullseye, 3.11: bookworm)."""
    from swebench.harness.test_spec.python import get_test_directives

    monkeypatch.delenv(envs.SPECS_VAR, raising=False)
    monkeypatch.delenv(envs.PYTHON_VAR, raising=False)
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    rows = verified_rows()
    assert len(rows) == 28
    for row in rows:
        task = task_of(row)
        assert envs.test_directives(task, layout) == get_test_directives(row)
        env = envs.environment_of(task, layout)
        assert env.problem is None and env.python_root is not None
        assert env.python_root.suite == {"3.9": "bullseye", "3.11": "bookworm"}[env.python]
    assert {envs.env_name(r["repo"], r["version"]) for r in rows} >= {
        "psf+requests-2.0",
        "pallets+flask-2.3",
        "pytest-dev+pytest-5.4",
    }


@needs_verified
@pytest.mark.parametrize("repo", THREE)
def test_real_rows_commits_in_the_mirrors(repo):
    """Every base and environment setup commit of the three repositories is in its mirror."""
    owner, name = repo.split("/")
    mirror = MIRRORS.format(owner=owner, name=name)
    done = subprocess.run(
        ["git", "--git-dir", mirror, "rev-parse", "--git-dir"], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"no mirror of {repo} at {mirror}")
    commits = {c for r in verified_rows() if r["repo"] == repo
               for c in (r["base_commit"], r["environment_setup_commit"])}  # fmt: skip
    missing = subprocess.run(
        ["git", "--git-dir", mirror, "cat-file", "--batch-check"],
        input="".join(f"{c}^{{commit}}\n" for c in sorted(commits)),
        capture_output=True,
        text=True,
    ).stdout
    assert "missing" not in missing, missing


def test_the_pipeline_builds_once_and_grades_each_unit_locally(project, tmp_path):
    """swe_local=1 on the fixture project: one swe-env task for acme/pycalc 0.1 shared by gold
    and none, a local-verdict task per unit, results.jsonl's local fields beside the official
    ones (none here: no Docker), nothing run again on a second run."""
    sf_commits = add_swebench(project)
    found = envs.host_python()
    assert found
    specs = tmp_path / "specs.json"
    specs.write_text(json.dumps(pycalc_spec(found[0])))
    project.env.update({envs.SPECS_VAR: str(specs), envs.PYTHON_VAR: envs.HOST})
    modes = ("swebench-verified:gold", "swebench-verified:none")
    _, executed = project.doit("run", *modes, "swe_local=1")
    assert [t for t in executed if t.startswith("swe-env:")] == ["swe-env:acme+pycalc-0.1"]
    assert sorted(t.split(":")[0] for t in executed if t.startswith("local-verdict:")) == [
        "local-verdict",
        "local-verdict",
    ]
    rows = {}
    for mode in ("gold", "none"):
        (row,) = [json.loads(x) for x in (project.results / "default" / mode / "results.jsonl")
                  .read_text().splitlines()]  # fmt: skip
        rows[mode] = row
    assert (rows["gold"]["local_status"], rows["gold"]["local_resolved"]) == ("resolved", True)
    assert (rows["none"]["local_status"], rows["none"]["local_resolved"]) == ("unresolved", False)
    assert rows["gold"]["resolved"] is None  # the official verdict's field stays the harness's
    assert sf_commits["p_base"]
    project.render()
    md = (project.results / "default" / "report.md").read_text()
    assert "Local verdicts (`swe_local=1`)" in md
    assert "| `gold` | 1 resolved | — |" in md and "| `none` | 1 unresolved | — |" in md
    _, again = project.doit("run", *modes, "swe_local=1")
    assert not [t for t in again if t.startswith(("swe-env:", "local-verdict:"))]
