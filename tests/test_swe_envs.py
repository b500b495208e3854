"""SWE-bench environments built here and the local verdict (nginx_eval/swebench/envs.py,
verdict.py): the fixture repository acme/pycalc (tests/swebench_fixture.py) with a specification
of its own, built with the host's Python (NGINX_EVAL_SWE_PYTHON=host, so that it runs on every
machine), its gold and empty patches graded by the local verdict; the swebench package's parser
and grading on logs of real pytest runs; and the real rows of SWE-bench Verified on the mirrors."""

import functools
import json
import re
import shutil
import subprocess
from types import SimpleNamespace

import pytest
import swebench_fixture as sf
from conftest import SOURCE_ROOT, patched_environ
from fixture_repos import commit, write
from swebench_fixture import IID, VERIFIED, dataset_row, make_pycalc, needs_verified
from swebench_fixture import test_log as pycalc_log

from nginx_eval.core.layout import Layout
from nginx_eval.run.modes import parse_modes
from nginx_eval.run.swebench import OPTIONAL, REQUIRED, SweTask, parse_task
from nginx_eval.swebench import envs, verdict
from nginx_eval.swebench import stage as swe_stage

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


@pytest.mark.e2e
def test_the_sandbox_shows_the_install_at_the_tasks_base_commit(tmp_path, monkeypatch):
    """The environment is installed at environment_setup_commit; a task whose base is another
    commit is shown a copy of its venv with the repository installed again at the base (the
    official instance image), its own files of the checkout too; the environment stays as it
    was built. An install that fails at the base shows nothing, and says why."""
    mirror = tmp_path / "mirrors" / "acme+pycalc"
    commits = make_pycalc(mirror)
    write(mirror / "setup.cfg", "[metadata]\nname = pycalc\nversion = 0.2\n")
    setup = commit(mirror, "pycalc 0.2")
    write(mirror / "setup.cfg", "[metadata\n")
    broken = commit(mirror, "a setup.cfg that does not parse")
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    specs = tmp_path / "specs.json"
    found = envs.host_python()
    assert found
    specs.write_text(json.dumps(pycalc_spec(found[0])))
    monkeypatch.setenv(envs.SPECS_VAR, str(specs))
    monkeypatch.setenv(envs.PYTHON_VAR, envs.HOST)
    monkeypatch.setenv("NGINX_EVAL_REPO_URL", str(tmp_path / "mirrors" / "{owner}+{name}"))
    task = task_of({**dataset_row(commits), "environment_setup_commit": setup})
    inst = envs.build_instance(layout, task)
    assert inst and inst["status"] == envs.BUILT, inst
    env = envs.env_record(task, layout)
    assert env and env["status"] == envs.BUILT and inst["env_key"] == env["key"]
    assert (inst["base_commit"], inst["key"]) == (
        commits["p_base"],
        f"{env['key']}-{commits['p_base'][:12]}",
    )
    view = envs.sandbox_view(task, layout)
    assert view and view.key == inst["key"]
    assert view.venv == layout.swe_instance_dir(inst["key"]) / "venv"
    assert view.venv.is_dir() and view.testbed_files

    def version(generated):
        info = (generated / "pycalc.egg-info" / "PKG-INFO").read_text()
        return re.search(r"^Version: (.*)$", info, re.M).group(1)

    assert version(layout.swe_env_dir(env["key"]) / envs.GENERATED) == "0.2"  # the setup's
    assert version(view.testbed_files) == "0.0.0"  # the base's setup.cfg names none
    # The copy shares the files the install left as they were with the environment (hard
    # links): its record counts only its own.
    env_venv = layout.swe_env_dir(env["key"]) / "venv"
    pth = next(env_venv.rglob(envs.STARTUP_PTH)).relative_to(env_venv)
    assert (view.venv / pth).stat().st_ino == (env_venv / pth).stat().st_ino
    assert 0 < inst["bytes"] < envs.bytes_of(view.venv)
    assert envs.build_instance(layout, task) == inst  # current: not built again
    bad = task_of(
        {**dataset_row(commits), "base_commit": broken, "environment_setup_commit": setup}
    )
    failed = envs.build_instance(layout, bad)
    assert failed and failed["status"] == envs.NOT_BUILT
    assert "the install exited with" in failed["reason"], failed
    assert envs.sandbox_view(bad, layout) is None
    assert not layout.swe_instance_scratch(failed["key"]).exists()


def test_the_environments_task_builds_the_installs_isolated_agents_are_shown(tmp_path):
    """swe-env:<name> builds, besides the environment, the install at the base commit of each
    task an isolated agent mode runs (what its sandbox shows), and is current only when those
    are; gold, none and an unisolated agent need none."""
    modes = parse_modes(
        {"modes": {"boxed": {"phases": [{"command": "x"}]},
                   "open": {"phases": [{"command": "x"}], "isolation": "none"}}},
        "m.toml",
    )  # fmt: skip
    row = dataset_row({"p_base": "a" * 40, "gold": "", "test_patch": ""})
    one, two = task_of(row), task_of({**row, "instance_id": "acme__pycalc-2"})
    units = [(None, modes[m], t) for m in ("gold", "none", "open") for t in (one, two)]
    units.append((None, modes["boxed"], two))
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    ctx = SimpleNamespace(units=lambda: iter(units), layout=layout)
    (task,) = swe_stage.env_tasks(ctx)
    assert task["name"] == "acme+pycalc-0.1"
    assert task["actions"][0][1] == [swe_stage.build_env, ctx.layout, one, [two]]
    assert task["uptodate"][0][1] == [ctx.layout, one, [two]]


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


@functools.cache
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
    """swe_local=1 on the fixture project: one swe-env task for acme/pycalc 0.1 (built with the
    host's Python) shared by gold, none and the shipped raw mode (the stand-in agent, isolated),
    whose agent waits for it and is shown it; a local-verdict task per unit, results.jsonl's
    local fields beside the official ones (none here: no Docker), the environment as a sandbox
    shows it, the report's local section, nothing run again on a second run."""
    sf_commits = sf.add_swebench(project)
    shutil.copy(SOURCE_ROOT / "modes.toml", project.root / "modes.toml")
    project.env["AGENT"] = sf.stand_in_agent(
        project.base, project.root / "tasks" / "swebench-verified.json"
    )
    found = envs.host_python()
    assert found
    specs = tmp_path / "specs.json"
    specs.write_text(json.dumps(pycalc_spec(found[0])))
    project.env.update({envs.SPECS_VAR: str(specs), envs.PYTHON_VAR: envs.HOST})
    modes = ("swebench-verified:gold", "swebench-verified:none", "swebench-verified:raw")
    _, executed = project.doit("run", *modes, "swe_local=1")
    assert [t for t in executed if t.startswith("swe-env:")] == ["swe-env:acme+pycalc-0.1"]
    assert len([t for t in executed if t.startswith("local-verdict:")]) == 3
    # The agent started once its environment was built, and was shown it and told of it.
    first = [t.split(":")[0] for t in executed if t.startswith(("swe-env:", "agent:"))]
    assert first == ["swe-env", "agent"]
    agent = project.read("raw", IID, "agent.json")
    assert agent["status"] == "completed" and agent["swe_env"]["python"] == found[0], agent
    prompt = (project.task_dir("raw", IID) / agent["phases"][0]["prompt_file"]).read_text()
    assert "python -m pytest -rA -p no:cacheprovider <test files or test ids>" in prompt
    rows = {}
    for mode in ("gold", "none"):
        (row,) = [json.loads(x) for x in (project.results / "default" / mode / "results.jsonl")
                  .read_text().splitlines()]  # fmt: skip
        rows[mode] = row
    assert (rows["gold"]["local_status"], rows["gold"]["local_resolved"]) == ("resolved", True)
    assert (rows["none"]["local_status"], rows["none"]["local_resolved"]) == ("unresolved", False)
    assert rows["gold"]["resolved"] is None  # the official verdict's field stays the harness's
    verdicts = {
        m: json.loads((project.results / "default" / m / IID / "local-verdict.json").read_text())
        for m in ("gold", "none")
    }
    add, mul = "tests/test_calc.py::test_add", "tests/test_calc.py::test_mul"
    assert verdicts["gold"]["tests"]["FAIL_TO_PASS"] == {"success": [add], "failure": []}
    assert verdicts["none"]["tests"]["FAIL_TO_PASS"] == {"success": [], "failure": [add]}
    assert verdicts["none"]["tests"]["PASS_TO_PASS"] == {"success": [mul], "failure": []}
    assert verdicts["gold"]["test_command"].endswith(
        "pytest -rA -p no:cacheprovider tests/test_calc.py"
    )
    # The environment as a sandbox shows it; a patch that applies neither way.
    layout = Layout.from_env(project.root, environ=project.env)
    task = task_of(sf.dataset_row(sf_commits))
    with patched_environ(project.env):
        rec = envs.env_record(task, layout)
        assert rec and rec["status"] == envs.BUILT and rec["suite"] == envs.HOST, rec
        assert rec["bytes"] > 0 and rec["format_version"] >= 1
        view = envs.sandbox_view(task, layout)
        assert view is not None and view.venv.is_dir() and view.rootfs.as_posix() == "/"
        assert view.environment["VIRTUAL_ENV"] == "/opt/swe-env" and view.testbed == "/testbed"
        # The install's own file of the checkout goes to the agent's workspace too.
        assert view.testbed_files and (view.testbed_files / "setup.py").is_file()
        # The editable install points at /testbed, where a checkout is bound later.
        assert "/testbed" in "".join(p.read_text() for p in view.venv.rglob("*.pth"))
        # The venv's Python drops the proxy variables the sandbox's view names, and only then.
        show = "import os; print(sorted(k for k in os.environ if k.lower().endswith('_proxy')))"
        python = str(view.venv / "bin" / "python")
        proxied = {"HTTP_PROXY": "http://127.0.0.1:9", "no_proxy": "localhost"}
        for unset, seen in (
            ({}, "['HTTP_PROXY', 'no_proxy']"),
            ({envs.UNSET_VAR: view.environment[envs.UNSET_VAR]}, "[]"),
        ):
            out = subprocess.run(
                [python, "-c", show], env={**proxied, **unset}, capture_output=True, text=True
            )
            assert out.stdout.strip() == seen, out.stderr
        assert envs.test_command(task, layout) == verdicts["gold"]["test_command"]
        out = tmp_path / "bad" / "local-verdict.json"
        got = verdict.local_verdict(layout, task, b"garbage\n", "bad", out, out.with_suffix(".log"))
    assert (got["status"], got["resolved"]) == ("patch_failed", False)
    assert json.loads(out.read_text())["status"] == "patch_failed"
    assert not layout.swe_verdict_scratch("bad", IID).exists()
    project.render(site=True)
    md = (project.results / "default" / "report.md").read_text()
    assert "Local verdicts (`swe_local=1`)" in md
    # Each unit's page of the site says its local verdict, labelled as such.
    page = layout.site_page("none", IID).read_text()
    assert "Local verdict</h3>" in page and "not by the official harness: <b>unresolved</b>" in page
    assert "FAIL_TO_PASS: 0 of 1 passed; not passed: <code>tests/test_calc.py::test_add</code>" in (
        page
    )
    assert "No grade yet" not in page
    assert re.search(rf'href="[^"]*/none/{IID}/local-verdict\.json"', page), page
    assert "| `gold` | 1 resolved | — | — |" in md and "| `none` | 1 unresolved | — | — |" in md
    assert (rows["gold"]["local_validated"], rows["none"]["local_validated"]) == (None, None)
    # The task's local verdict failed validation (gold not resolved here): it stays shown, and
    # counts as no verdict.
    (project.root / "tasks" / "swebench-local-validation.jsonl").write_text(
        json.dumps({"instance_id": IID, "ok": False, "gold": "unresolved"}) + "\n"
    )
    _, again = project.doit("run", *modes, "swe_local=1")
    assert not [t for t in again if t.startswith(("swe-env:", "local-verdict:", "agent:"))]
    (row,) = [json.loads(x) for x in (project.results / "default" / "gold" / "results.jsonl")
              .read_text().splitlines()]  # fmt: skip
    assert (row["local_status"], row["local_resolved"], row["local_validated"]) == (
        "resolved",
        None,
        False,
    )
    project.render()
    md = (project.results / "default" / "report.md").read_text()
    assert f"| `gold` | 1 resolved | — | `{IID}` |" in md


BOXED_MODE = """
[modes.boxed]
description = "an isolated agent"
model = "fake-1"
isolation = "srt"
[[modes.boxed.phases]]
name = "solve"
prompt = "prompt_raw.md.j2"
command = "true {prompt}"
"""


@pytest.mark.e2e
def test_an_isolated_agent_waits_for_its_environment_and_its_prompt_says_so_from_the_start(
    project, tmp_path
):
    """swe_local=1 on a fresh cache: the agent's task waits for the swe-env task, and its prompt
    (so its inputs' digest) is the same before the environment is built as after: the first
    run shows the agent the environment, and a second run does not run it again. An agent
    whose environment could not be built does not start."""
    from nginx_eval import pipeline
    from nginx_eval.agent import stage as agent_stage
    from nginx_eval.core.errors import UserError
    from nginx_eval.run.options import Options

    sf.add_swebench(project)
    found = envs.host_python()
    assert found
    specs = tmp_path / "specs.json"
    specs.write_text(json.dumps(pycalc_spec(found[0])))
    project.env.update({envs.SPECS_VAR: str(specs), envs.PYTHON_VAR: envs.HOST})
    with open(project.root / "modes.toml", "a") as f:
        f.write(BOXED_MODE)
    argv = ["run", "swebench-verified:boxed", "swe_local=1"]

    def context():
        variables = dict(w.split("=", 1) for w in argv if "=" in w)
        return pipeline.load_context(project.root, argv, Options.parse(variables, argv))

    with patched_environ(project.env):
        ctx = context()
        (task,) = ctx.tasks
        mode = ctx.modes["boxed"]
        assert ctx.swe_env(task) is None
        assert ctx.swe_env_pending(task) == (
            "swe-env:acme+pycalc-0.1",
            {
                "python": found[0],
                "testbed": "/testbed",
                "test_command": "python -m pytest -rA -p no:cacheprovider",
            },
        )
        before = ctx.unit_agent_inputs(mode, task)
        assert "python -m pytest -rA -p no:cacheprovider" in before[0][0]
        (unit,) = [d for d in agent_stage.gen_tasks(ctx) if "/boxed/" in d["name"]]
        assert "swe-env:acme+pycalc-0.1" in unit["task_dep"]
        assert unit["actions"][0][1][-1] == ctx.swe_env_at_run
        # What the swe-env task does; then the agent is shown it, and its inputs are as made.
        layout = ctx.layout
        swe_stage.build_env(layout, task, [task])
        view = ctx.swe_env_at_run(task, layout)
        assert isinstance(view, dict) and view["test_command"] in before[0][0]
        after = context()
        assert after.swe_env(task) is not None and after.swe_env_pending(task) is None
        assert after.unit_agent_inputs(mode, task) == before
        (unit,) = [d for d in agent_stage.gen_tasks(after) if "/boxed/" in d["name"]]
        assert unit["task_dep"] == [t for t in unit["task_dep"] if not t.startswith("swe-env:")]
        # A build that failed: no agent starts, in one line; nothing written.
        with pytest.raises(UserError) as refused:
            agent_stage.run_agent(
                layout,
                mode,
                task,
                *before,
                "agent:x",
                swe_env_at_run=lambda t, lay: "pip install failed",
            )
        assert "was not built (pip install failed); no agent started" in str(refused.value)
        assert not layout.agent_json(mode.name, task.instance_id).exists()
