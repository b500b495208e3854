"""The local verdict of a SWE-bench unit: its patch graded here, without Docker, in the task's
environment (envs.py), as the official harness's eval script grades it in the task's image.

A fresh checkout of the task's base (with the files the environment's install wrote there),
the patch (``git apply``, else ``patch --fuzz=5``, as the harness tries), then in bubblewrap over
the environment's root filesystem, the checkout at /testbed and a copy of the venv at its fixed
path (the eval script installs the repository again, into the venv): the spec's eval commands,
the install, the test files reset to the base, the test patch, and the spec's test command on
the test files with a time limit. The log is parsed by the swebench package's own parser of the
repository and graded by its get_eval_tests_report / get_resolution_status: resolved when every
FAIL_TO_PASS and PASS_TO_PASS test passes. ``local-verdict.json`` (core/records.LocalVerdictJson)
lies beside ``local-verdict.log``.
"""

import hashlib
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import gitcmd, jsonio
from ..core.errors import UserError
from ..core.layout import Layout
from ..core.records import LocalVerdictJson, write_record
from . import envs, services

if TYPE_CHECKING:
    from ..run.swebench import SweTask

TEST_TIMEOUT = 1800.0  # seconds: the official harness's default --timeout
VERDICT_VERSION = 2  # raised when what a verdict does changes: every unit is graded again
LABEL = "local"  # how reports name this verdict, beside the official one
# The markers swebench's grading looks for (constants of swebench 4.1.0).
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
RESET_FAILED = ">>>>> Reset Failed"
TESTS_ERROR = ">>>>> Tests Errored"
TESTS_TIMEOUT = ">>>>> Tests Timed Out"


def validated(layout: Layout) -> dict[str, bool]:
    """{instance_id: whether its local verdict passed validation (gold resolved and none not, on
    this machine's kind)}, from tasks/swebench-local-validation.jsonl (written from
    scripts/validate_swebench_local.py's output); empty when the file is missing."""
    path = layout.swebench_local_validation
    if not path.exists():
        return {}
    return {r["instance_id"]: bool(r["ok"]) for r in jsonio.read_jsonl(path)}


def apply_patch(testbed: Path, patch: bytes) -> str | None:
    """Apply `patch` in `testbed` as the harness does (git apply, then patch --fuzz=5); None when
    it applied, otherwise what the last attempt said."""
    if not patch.strip():
        return None
    said = ""
    # git apply is all or nothing: a failed attempt leaves the checkout as it was.
    for argv in (["git", "apply", "--verbose", "-"], ["patch", "--batch", "--fuzz=5", "-p1"]):
        done = subprocess.run(
            argv, cwd=testbed, input=patch, capture_output=True, env=gitcmd.git_environment(testbed)
        )
        if done.returncode == 0:
            return None
        said = envs.last_lines_of((done.stdout + done.stderr).decode(errors="replace"))
    return said or "the patch does not apply"


def eval_script(task: "SweTask", spec: dict[str, Any], test_command: str) -> str:
    """The eval script's commands (swebench's make_eval_script_list_py), for sh -x in TESTBED
    with the venv's PATH."""
    files = " ".join(envs.test_files(task))
    reset = f"git checkout {task.base_commit} {files}" if files else ":"
    lines = [f". {envs.VENV_AT}/bin/activate", *spec.get("eval_commands", [])]
    lines += [
        "git status",
        f"git -c core.fileMode=false diff {task.base_commit}",
    ]
    if spec.get("install"):
        lines.append(spec["install"])
    lines += [
        f"{reset} || {{ echo '{RESET_FAILED}'; exit 1; }}",
        f"git apply -v /tmp/swe-verdict/test.patch || {{ echo '{APPLY_PATCH_FAIL}'; exit 1; }}",
        "echo '>>>>> Start Test Output'",
        f"{test_command} || true",
        "echo '>>>>> End Test Output'",
        reset,
    ]
    return "\n".join(lines)


def parser_named(name: str) -> Callable[[str, Any], dict[str, str]]:
    """The swebench log parser of that name (specs.json names each repository's)."""
    from swebench.harness.log_parsers import MAP_REPO_TO_PARSER, python

    found = {fn.__name__: fn for fn in MAP_REPO_TO_PARSER.values()}
    fn = found.get(name) or getattr(python, name, None)
    if fn is None:
        raise UserError(f"the swebench package has no log parser {name!r}")
    return fn


def grade(log: str, task: "SweTask", parser: str, facts: dict[str, Any]) -> tuple[bool, dict]:
    """(resolved, swebench's report {FAIL_TO_PASS: {success, failure}, PASS_TO_PASS: ...}) of
    an eval log, by swebench's get_logs_eval reading (markers, the parser between them, the
    whole log when nothing is found there), get_eval_tests_report and get_resolution_status."""
    from swebench.harness import grading
    from swebench.harness.constants import FAIL_ONLY_REPOS, EvalType, ResolvedStatus

    start, end = facts["start"], facts["end"]
    gold = {"FAIL_TO_PASS": list(task.fail_to_pass), "PASS_TO_PASS": list(task.pass_to_pass)}
    bad = any(code in log for code in (APPLY_PATCH_FAIL, RESET_FAILED, TESTS_ERROR, TESTS_TIMEOUT))
    if bad or start not in log or end not in log:
        status_map: dict[str, str] = {}
    else:
        parse = parser_named(parser)
        status_map = parse(log.split(start)[1].split(end)[0], None) or parse(log, None)
    eval_type = EvalType.FAIL_ONLY if task.repo in FAIL_ONLY_REPOS else EvalType.PASS_AND_FAIL
    report = grading.get_eval_tests_report(status_map, gold, eval_type=eval_type)
    resolved = grading.get_resolution_status(report) == ResolvedStatus.FULL.value
    return resolved, report


def local_verdict(
    layout: Layout,
    task: "SweTask",
    patch: bytes,
    mode: str,
    out: Path,
    log: Path,
    timeout: float = TEST_TIMEOUT,
) -> LocalVerdictJson:
    """Grade `patch` of `task` here and write `out` (local-verdict.json) and `log`."""
    start = time.monotonic()
    env = envs.build(layout, task)
    facts = envs.package_facts(layout)
    base: LocalVerdictJson = {
        "instance_id": task.instance_id,
        "mode": mode,
        "env_key": env["key"],
        "status": "not_built",
        "resolved": None,
        "reason": None,
        "tests": None,
        "test_command": "",
        "exit_code": None,
        "timed_out": False,
        "seconds": 0.0,
        "patch_sha256": hashlib.sha256(patch).hexdigest(),
    }
    if env["status"] != envs.BUILT:
        rec: LocalVerdictJson = {**base, "reason": f"no environment: {env['reason']}"}
        jsonio.write_text(log, f"no environment: {env['reason']}\n")
        write_record(out, rec)
        return rec
    environment = envs.environment_of(task, layout)
    assert environment.python_root is not None and environment.spec is not None  # built
    command = envs.test_command(task, layout)
    base["test_command"] = command
    scratch = layout.swe_verdict_scratch(mode, task.instance_id)
    shutil.rmtree(scratch, ignore_errors=True)
    testbed = scratch / "testbed"
    try:
        envs.checkout(envs.source_of(layout, task.repo), task.base_commit, testbed, tags=True)
        envs.put_generated(environment.directory, testbed)
        problem = apply_patch(testbed, patch)
        if problem is not None:
            jsonio.write_text(log, f"{APPLY_PATCH_FAIL}\n{problem}\n")
            rec = {
                **base,
                "status": "patch_failed",
                "resolved": False,
                "reason": f"the patch does not apply: {problem}"[:600],
                "seconds": round(time.monotonic() - start, 1),
            }
            write_record(out, rec)
            return rec
        (scratch / "test.patch").write_text(task.test_patch)
        venv = scratch / "venv"
        subprocess.run(["cp", "-a", str(environment.venv), str(venv)], check=True)
        jsonio.write_text(log, f"# {task.instance_id} ({mode}): {command}\n")
        mounts: list[tuple[str, str | Path, str]] = [
            ("--bind", venv, envs.VENV_AT),
            ("--bind", testbed, envs.TESTBED),
            ("--ro-bind", scratch, "/tmp/swe-verdict"),
        ]
        standins = services.offline(
            layout, task.repo, environment.python_root, scratch / "standins", testbed
        )
        if isinstance(standins, str):
            with open(log, "a") as f:
                f.write(f"no stand-ins for the internet: {standins}\n")
        outer, launcher = [], []
        if isinstance(standins, services.Offline):
            mounts += standins.mounts(envs.TESTBED)
            outer, launcher = standins.outer, standins.launcher
        outcome = envs.run_script(
            layout,
            environment.python_root,
            eval_script(task, environment.spec, command),
            log,
            mounts=mounts,
            timeout=timeout,
            outer=outer,
            launcher=launcher,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if outcome.timed_out:
        with open(log, "a") as f:
            f.write(f"\n{TESTS_TIMEOUT} after {timeout:.0f} s\n")
    text = log.read_text(errors="replace")
    parser = facts["parsers"].get(task.repo, "parse_log_pytest")
    resolved, report = grade(text, task, parser, facts)
    rec = {
        **base,
        "status": "resolved" if resolved else "unresolved",
        "resolved": resolved,
        "reason": "the tests timed out" if outcome.timed_out else None,
        "tests": {k: v for k, v in report.items() if k in ("FAIL_TO_PASS", "PASS_TO_PASS")},
        "exit_code": outcome.exit_code,
        "timed_out": outcome.timed_out,
        "seconds": round(time.monotonic() - start, 1),
    }
    write_record(out, rec)
    return rec
