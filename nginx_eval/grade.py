"""Stage 7, grade: a pure function from TAP output and a task to a verdict.

Assertion ids are ``"<file>:<number> <description>"`` (just ``"<file>:<number>"`` without a
description): numbers make them unique (nginx-tests repeats names within a file) and the pinned
test commit keeps them stable. Rules:

- ``ok`` (also ``ok ... # TODO``, an unexpected pass) passes; ``not ok`` fails, and so does
  ``not ok ... # TODO`` (prove counts it as passing; we must not);
- ``ok ... # SKIP`` did not run, so it is not a pass;
- a file that skips entirely (``1..0 # SKIP``: a missing module or Perl dependency), that does not
  exist, that produced no plan and no assertions (prove itself failed), or whose prove was killed
  by a signal other than at the time limit (prove crashed, or something killed it: the test did not
  decide, whatever TAP came out) is an environment error, never a pass;
- a file killed at its time limit keeps the assertions it printed; the rest fail.

``grade.json``::

    {"inputs", "instance_id", "mode",
     "status": "resolved" | "partially_resolved" | "unresolved" | "patch_failed" |
               "compile_failed" | "env_error",
     "resolved": bool,
     "fail_to_pass": {"passed": [...], "failed": [...]},
     "pass_to_pass": {"passed": [...], "failed": [...]},
     "env_errors": [str], "timed_out_files": [...], "skipped_assertions": [...],
     "agent_status": str | null, "build_status": str}
"""

import re
from dataclasses import dataclass, field

from doit.tools import config_changed
from tap.parser import Parser

from . import jsonio

OUTCOMES = ("resolved", "partially_resolved", "unresolved", "patch_failed", "compile_failed",
            "env_error")


def assertion_id(file, number, description):
    desc = re.sub(r"^-\s*", "", (description or "").strip()).strip()
    return f"{file}:{number} {desc}" if desc else f"{file}:{number}"


@dataclass
class FileResult:
    file: str
    planned: int | None = None
    skip_all: str | None = None            # the reason, when the whole file skipped
    results: dict = field(default_factory=dict)     # id -> True (pass) / False (fail)
    skipped: list = field(default_factory=list)     # ids of "ok # SKIP"
    bailed_out: str | None = None


def parse_tap(file, text):
    """Parse the output of ``prove -v FILE`` (or the raw TAP of FILE)."""
    fr = FileResult(file)
    for line in Parser().parse_text(text):
        if line.category == "plan":
            fr.planned = line.expected_tests
            if line.expected_tests == 0 and line.skip:
                fr.skip_all = line.directive.reason or "skipped"
        elif line.category == "test":
            if line.number is None:      # prove's own "ok" summary line, not an assertion
                continue
            ident = assertion_id(file, line.number, line.description)
            if line.skip:
                fr.skipped.append(ident)
                fr.results[ident] = False
            else:
                # `not ok # TODO` has ok == False: a failure here, whatever prove says.
                fr.results[ident] = bool(line.ok)
        elif line.category == "bail":
            fr.bailed_out = line.reason or "bail out"
    return fr


def file_env_error(fr, record):
    if record.get("missing"):
        return f"{fr.file}: test file does not exist at the test commit"
    if fr.skip_all is not None:
        return f"{fr.file}: skipped entirely ({fr.skip_all})"
    if not record.get("timed_out") and fr.planned is None and not fr.results:
        return f"{fr.file}: prove produced no TAP (exit code {record.get('exit_code')})"
    # A test script that dies makes prove exit 1 or 255; prove itself ending by a signal
    # (a negative exit code from subprocess) was not the patch's doing.
    code = record.get("exit_code")
    if not record.get("timed_out") and isinstance(code, int) and code < 0:
        return f"{fr.file}: prove was killed by signal {-code}"
    return None


def split(ids, results):
    passed = [i for i in ids if results.get(i) is True]
    return {"passed": passed, "failed": [i for i in ids if results.get(i) is not True]}


def grade(task, build_status, prove_files, tap_texts, agent_status=None):
    """The verdict of one task. tap_texts: {file: prove stdout}; prove_files: prove.json files."""
    verdict = {"instance_id": task.instance_id, "agent_status": agent_status,
               "build_status": build_status, "env_errors": [], "timed_out_files": [],
               "skipped_assertions": []}
    empty = {"passed": [], "failed": []}
    if build_status != "built":
        return dict(verdict, status=build_status, resolved=False,
                    fail_to_pass=dict(empty, failed=list(task.fail_to_pass)),
                    pass_to_pass=dict(empty, failed=list(task.pass_to_pass)))
    results = {}
    for file in task.test_files:
        record = prove_files.get(file, {"missing": True})
        fr = parse_tap(file, tap_texts.get(file, ""))
        problem = file_env_error(fr, record)
        if problem:
            verdict["env_errors"].append(problem)
        if record.get("timed_out"):
            verdict["timed_out_files"].append(file)
        if fr.bailed_out:
            verdict["env_errors"].append(f"{file}: bailed out ({fr.bailed_out})")
        verdict["skipped_assertions"] += [i for i in fr.skipped
                                          if i in task.fail_to_pass or i in task.pass_to_pass]
        results.update(fr.results)
    f2p, p2p = split(task.fail_to_pass, results), split(task.pass_to_pass, results)
    resolved = not f2p["failed"] and not p2p["failed"] and not verdict["env_errors"]
    if verdict["env_errors"]:
        status = "env_error"
    elif resolved:
        status = "resolved"
    elif f2p["passed"]:
        status = "partially_resolved"
    else:
        status = "unresolved"
    return dict(verdict, status=status, resolved=resolved, fail_to_pass=f2p, pass_to_pass=p2p)


def grade_task(layout, mode_name, task, config, file_dep):
    inputs = jsonio.inputs_digest(config, file_dep)
    out = layout.grade_json(mode_name, task.instance_id)
    if jsonio.fresh_output(out, inputs):
        return
    iid = task.instance_id
    build = jsonio.read_json(layout.build_json(mode_name, iid))
    prove = jsonio.read_json(layout.prove_json(mode_name, iid))
    agent = jsonio.read_json(layout.agent_json(mode_name, iid))
    texts = {}
    for file, rec in prove["files"].items():
        path = layout.tap_dir(mode_name, iid) / rec["tap"]
        texts[file] = path.read_text(errors="replace") if path.exists() else ""
    verdict = grade(task, build["status"], prove["files"], texts,
                    agent_status=agent["status"] if agent else None)
    jsonio.write_json(out, dict(verdict, inputs=inputs, mode=mode_name))


def gen_tasks(ctx):
    for bench, mode, task in ctx.units():
        name = ctx.unit_name(bench, mode, task)
        iid = task.instance_id
        config = {"f2p": list(task.fail_to_pass), "p2p": list(task.pass_to_pass),
                  "files": list(task.test_files)}
        file_dep = [str(ctx.layout.build_json(mode.name, iid)),
                    str(ctx.layout.prove_json(mode.name, iid))]
        if mode.runs_agent:
            file_dep.append(str(ctx.layout.agent_json(mode.name, iid)))
        yield {
            "basename": "grade",
            "name": name,
            "doc": f"verdict for the {mode.name} patch of {iid}",
            "actions": [(grade_task, [ctx.layout, mode.name, task, config, file_dep])],
            "file_dep": file_dep,
            "targets": [str(ctx.layout.grade_json(mode.name, iid))],
            "uptodate": [config_changed(config)],
        }
