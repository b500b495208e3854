"""Faults on the fixture benchmark: hostile agents, broken patches, hanging and crashing tests,
kill -9 of doit in every stage, a second doit process, a damaged doit database.

Every test ends by checking that the tasks the fault did not touch got exactly the verdict of a
clean, uninterrupted run (``reference``), and where processes were involved, that none is left.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import DODO, Project, without_timings

# Every test here starts doit, make, prove, the sandbox or the CLI (conftest.py).
E2E = True

PAUSING_DODO = Path(__file__).resolve().parent / "pausing_dodo.py"
MODES = ("fake", "gold", "none")
# results.jsonl fields that are wall-clock times, the run name (when runs are compared) and the
# agent's command as it ran (it names the project's directory, which differs between projects).
NOT_COMPARED = ("build_seconds", "agent_seconds", "run", "agent_commands")
PHASE_TIMEOUT = 3  # the fake mode's time limit in the shared project


def outcome(project, run="default", modes=MODES):
    """What a run decided, by (mode, instance id): results.jsonl rows and grade.json contents,
    without wall times and input digests (which hold the digests of files with wall times)."""
    rows, grades = {}, {}
    for mode in modes:
        mode_dir = project.results / run / mode
        for line in (mode_dir / "results.jsonl").read_text().splitlines():
            row = json.loads(line)
            rows[(mode, row["instance_id"])] = without_timings(row, NOT_COMPARED)
        for path in mode_dir.glob("*/grade.json"):
            grade = json.loads(path.read_text())
            grade.pop("inputs")
            grades[(mode, path.parent.name)] = grade
    return rows, grades


def assert_intact(project, reference, units, run="default"):
    """Each (mode, instance id) in `units` has the row and verdict of the clean run."""
    rows, grades = outcome(project, run, {m for m, _ in units})
    ref_rows, ref_grades = reference["outcome"]
    for unit in units:
        assert rows[unit] == ref_rows[unit], unit
        assert grades[unit] == ref_grades[unit], unit


def processes_with(marker):
    """Live processes whose environment carries FAKE_AGENT_MARKER=marker."""
    needle = f"FAKE_AGENT_MARKER={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ and state != "Z":
            found.append(int(entry))
    return found


def kill_marked(marker):
    for pid in processes_with(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def marker():
    """A unique value for FAKE_AGENT_MARKER; the test fails if a process still carries it."""
    value = uuid.uuid4().hex
    yield value
    left = processes_with(value)
    kill_marked(value)
    assert left == [], f"processes left running: {left}"


def wait_until(condition, proc, what, seconds=60):
    """Poll `condition` until it holds; fail if doit (`proc`) ends first or time runs out."""
    deadline = time.monotonic() + seconds
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(
                f"doit ended ({proc.returncode}) before {what}:\n"
                f"{proc.stdout.read()}\n{proc.stderr.read()}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {seconds} s")
        time.sleep(0.05)


def wait_for(path, proc, seconds=60):
    wait_until(lambda: Path(path).exists(), proc, f"{path} appeared", seconds)


def start_doit(project, *args, env=None, dodo=DODO):
    """doit in a session of its own, so that a test can kill it and its workers at once."""
    args = project.run_args(args)  # as conftest.Project.doit
    return subprocess.Popen(
        [sys.executable, "-m", "doit", "-f", str(dodo), *args],
        env=dict(project.env, **(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def kill_doit(proc):
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def git(cwd, *args):
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout


# -- the clean run, and a project shared by the tests that add runs of their own -------------------


def fault_benchmark(project):
    """tasks/faults.json: the fixture's two tasks plus copies of tiny-add for single faults."""
    add, mul = project.tasks
    calc_add = list(add["fail_to_pass"]) + list(add["pass_to_pass"])
    tasks = [add, mul]
    for iid in ("p-bogus", "p-binary", "p-outside", "p-absolute", "p-symlink", "p-missing"):
        tasks.append(dict(add, instance_id=iid))
    for behaviour in HOSTILE:  # the hostile agents' (fixture `hostile`)
        tasks.append(dict(add, instance_id=hostile_id(behaviour)))
    # A test file that hangs after one assertion; its per-file limit is 2 s.
    tasks.append(
        dict(
            add,
            instance_id="t-hang",
            test_files=["calc_add.t", "hang.t"],
            pass_to_pass=calc_add[1:] + ["hang.t:1 before the hang", "hang.t:2 after the hang"],
            test_timeout=2,
        )
    )
    # A file whose prove crashes (a fake prove, see test_prove_crash_is_an_environment_error).
    tasks.append(
        dict(
            add,
            instance_id="t-crash",
            test_files=["flaky.t"],
            fail_to_pass=["flaky.t:1 add two numbers"],
            pass_to_pass=[],
        )
    )
    (project.root / "tasks" / "faults.json").write_text(json.dumps({"tasks": tasks}, indent=2))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A project with one clean run of `doit run tiny` (run "default"): the verdicts every fault
    test compares the untouched tasks with. Fault tests that need no fresh cache add runs of
    their own names to it (they share its clones and builds)."""
    project = Project(tmp_path_factory.mktemp("shared"))
    modes = (project.root / "modes.toml").read_text()
    (project.root / "modes.toml").write_text(
        modes.replace("timeout = 20", f"timeout = {PHASE_TIMEOUT}")
    )
    project.doit("run", "tiny")
    fault_benchmark(project)
    # A second mode with two phases, added after the clean run (which it is not part of).
    with open(project.root / "modes.toml", "a") as f:
        f.write(f"""
[modes.twice]
isolation = "none"
[[modes.twice.phases]]
name = "first"
timeout = {PHASE_TIMEOUT}
command = "{project.agent}"
[[modes.twice.phases]]
name = "second"
timeout = {PHASE_TIMEOUT}
command = "{project.agent}"
""")
    return {
        "project": project,
        "outcome": outcome(project),
        "patch": {
            iid: (project.task_dir("fake", iid) / "model.patch").read_bytes()
            for iid in ("tiny-add", "tiny-mul")
        },
        "agent_calls": len(project.agent_calls()),
    }


# -- hostile agents --------------------------------------------------------------------------------


# Each behaviour's agent on a copy of tiny-add of its own (h-<behaviour>, tasks/faults.json).
HOSTILE = (
    "hang",
    "fork-ignore-term",
    "nonzero",
    "commit",
    "branches",
    "rewrite",
    "delete-workspace",
    "bigfile",
    "binary",
    "outside",
    "break",
)


def hostile_id(behaviour):
    return f"h-{behaviour}"


@pytest.fixture(scope="module")
def hostile(reference):
    """One run (run=hostile) of fake on every hostile agent's task and on tiny-mul, whose agent
    fixes its bug beside them: what the tests of the hostile agents read, each its own task.
    keep_workspaces=1: the tests look at what the agents left in their workspaces. (project,
    the FAKE_AGENT_MARKER of the run's agents, the processes carrying it when the run ended)."""
    project = reference["project"]
    marker = uuid.uuid4().hex
    env = {"FAKE_AGENT_MARKER": marker}
    for behaviour in HOSTILE:
        env["FAKE_AGENT_" + re.sub(r"[^A-Za-z0-9]", "_", hostile_id(behaviour))] = behaviour
    ids = ",".join([*map(hostile_id, HOSTILE), "tiny-mul"])
    project.doit(
        "run", "faults:fake", "run=hostile", "keep_workspaces=1", f"instances={ids}", env=env
    )
    left = processes_with(marker)
    kill_marked(marker)
    return project, marker, left


def run_hostile(reference, hostile, behaviour):
    """The hostile run's task of `behaviour` (its agent misbehaving so), after checking that
    tiny-mul, beside it, got the clean run's verdict and that no agent's process is left.
    Returns (project, agent.json, patch.json, grade.json of the task)."""
    project, marker, left = hostile
    assert left == [] and processes_with(marker) == []  # the forks in sessions of their own too
    assert_intact(project, reference, [("fake", "tiny-mul")], run="hostile")
    iid = hostile_id(behaviour)
    return (
        project,
        project.read("fake", iid, "agent.json", "hostile"),
        project.read("fake", iid, "patch.json", "hostile"),
        project.read("fake", iid, "grade.json", "hostile"),
    )


def hostile_file(project, behaviour, name):
    return project.task_dir("fake", hostile_id(behaviour), "hostile") / name


@pytest.mark.parametrize("behaviour", ["hang", "fork-ignore-term"])
def test_agent_past_its_limit_is_killed_with_everything_it_started(reference, hostile, behaviour):
    project, agent, patch, grade = run_hostile(reference, hostile, behaviour)
    assert agent["status"] == "timeout" and agent["phases"][0]["timed_out"]
    # SIGTERM at the limit, SIGKILL after the grace period: not an hour of sleep.
    assert agent["wall_seconds"] < PHASE_TIMEOUT + 3 + 5
    assert patch["bytes"] == 0 and grade["status"] == "unresolved"


@pytest.mark.parametrize("behaviour", ["nonzero", "commit", "branches", "rewrite"])
def test_patch_is_the_diff_of_the_files_whatever_the_agent_did_to_git(
    reference, hostile, behaviour
):
    project, agent, patch, grade = run_hostile(reference, hostile, behaviour)
    patch_bytes = hostile_file(project, behaviour, "model.patch").read_bytes()
    assert patch_bytes == reference["patch"]["tiny-add"]
    assert grade["status"] == "resolved"
    ws = project.cache / "workspaces" / "hostile" / "fake" / hostile_id(behaviour)
    base = project.commits["c_add_bug"]
    if behaviour == "nonzero":
        assert agent["status"] == "failed" and agent["phases"][0]["exit_code"] == 3
        assert grade["agent_status"] == "failed"
    else:
        assert agent["status"] == "completed"
        assert git(ws, "rev-parse", "HEAD").strip() != base  # the agent did commit
    if behaviour == "branches":
        assert "v9.9.9-agent" in git(ws, "tag").split()
        assert "agent/spare" in git(ws, "branch", "--format=%(refname:short)").split()
    if behaviour == "rewrite":
        assert base not in git(ws, "rev-list", "--all").split()


def test_agent_that_deletes_its_workspace_yields_the_deletion(reference, hostile):
    project, agent, patch, grade = run_hostile(reference, hostile, "delete-workspace")
    base_files = git(
        project.mirrors / "acme+tiny", "ls-tree", "-r", "--name-only", project.commits["c_add_bug"]
    ).split()
    assert agent["status"] == "completed"
    assert sorted(patch["files"]) == sorted(base_files) and patch["lines_added"] == 0
    build = project.read("fake", hostile_id("delete-workspace"), "build.json", "hostile")
    assert build["status"] == "compile_failed" and grade["status"] == "compile_failed"


def test_later_phase_without_a_workspace_fails_the_agent_not_the_run(reference, marker):
    project = reference["project"]
    project.doit(
        "run",
        "tiny:twice",
        "run=twice",
        env={"FAKE_AGENT_tiny_add": "delete-workspace", "FAKE_AGENT_MARKER": marker},
    )
    agent = project.read("twice", "tiny-add", "agent.json", "twice")
    assert agent["status"] == "failed" and [p["name"] for p in agent["phases"]] == ["first"]
    assert agent["error"] == "phase second: the workspace no longer exists"
    assert project.read("twice", "tiny-add", "grade.json", "twice")["status"] == "compile_failed"
    # tiny-mul's agent fixed its bug twice over: the same patch as the clean run's.
    assert (
        project.task_dir("twice", "tiny-mul", "twice") / "model.patch"
    ).read_bytes() == reference["patch"]["tiny-mul"]
    assert project.read("twice", "tiny-mul", "grade.json", "twice")["status"] == "resolved"


def test_big_new_file_is_left_out_and_noted(reference, hostile):
    project, agent, patch, grade = run_hostile(reference, hostile, "bigfile")
    assert patch["skipped_files"] == [{"path": "core.dump", "bytes": 100 << 20}]
    assert "core.dump" in patch["note"]
    patch_bytes = hostile_file(project, "bigfile", "model.patch").read_bytes()
    assert patch_bytes == reference["patch"]["tiny-add"]
    assert grade["status"] == "resolved"


def test_binary_file_from_an_agent_is_patched_and_built(reference, hostile):
    project, agent, patch, grade = run_hostile(reference, hostile, "binary")
    assert patch["binary"] and "src/core/table.bin" in patch["files"]
    assert b"GIT binary patch" in hostile_file(project, "binary", "model.patch").read_bytes()
    assert grade["status"] == "resolved"


def test_files_written_outside_the_tree_are_not_part_of_the_patch(reference, hostile):
    project, agent, patch, grade = run_hostile(reference, hostile, "outside")
    assert (project.cache / "workspaces" / "hostile" / "fake" / "escape.txt").exists()
    # The symlink inside the tree is a change like any other (a link, not the file behind it).
    assert sorted(patch["files"]) == ["escape-link", "src/core/calc.c"]
    text = hostile_file(project, "outside", "model.patch").read_text()
    assert "new file mode 120000" in text and "outside the tree" not in text
    assert grade["status"] == "resolved"


def test_compile_failure_is_a_verdict(reference, hostile):
    project, agent, patch, grade = run_hostile(reference, hostile, "break")
    build = project.read("fake", hostile_id("break"), "build.json", "hostile")
    assert build["status"] == "compile_failed" and grade["status"] == "compile_failed"
    assert "error" in hostile_file(project, "break", "build.log").read_text()


# -- patches that must not apply, tests that hang, prove that crashes ------------------------------


def predictions(project, path, patches):
    path.write_text(
        "".join(
            json.dumps({"instance_id": iid, "model_name_or_path": "faults", "model_patch": text})
            + "\n"
            for iid, text in patches.items()
        )
    )
    return path


def assert_gold_intact(project, reference, run, iid="tiny-mul"):
    """Mode file scored the gold patch of `iid`: the verdict of gold in the clean run."""
    grade = project.read("file", iid, "grade.json", run)
    ref = reference["outcome"][1][("gold", iid)]
    assert {k: v for k, v in grade.items() if k not in ("inputs", "mode")} == {
        k: v for k, v in ref.items() if k != "mode"
    }


def new_file_patch(path, text):
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/{path}\n@@ -0,0 +1 @@\n+{text}\n"
    )


def binary_patch(project, tmp_path):
    """The fix of tiny-add plus a new binary file, as git diff --binary writes it."""
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", str(project.mirrors / "acme+tiny"), str(clone)], check=True
    )
    git(clone, "checkout", "-q", project.commits["c_add_fix"])
    (clone / "src" / "core" / "table.bin").write_bytes(bytes(range(256)) * 4)
    git(clone, "add", "-A")
    return git(clone, "diff", "--cached", "--binary", "--full-index", project.commits["c_add_bug"])


def test_patches_that_do_not_apply_or_reach_outside_the_tree(reference, tmp_path):
    project = reference["project"]
    escape = project.base / "escapes"
    bogus = (
        "diff --git a/src/core/calc.c b/src/core/calc.c\n--- a/src/core/calc.c\n"
        "+++ b/src/core/calc.c\n@@ -1,2 +1,2 @@\n-this line is not there\n-nor this\n"
        "+neither\n+is this\n"
    )
    symlink = (
        "diff --git a/evil b/evil\nnew file mode 120000\n--- /dev/null\n+++ b/evil\n"
        f"@@ -0,0 +1 @@\n+{escape}\n\\ No newline at end of file\n"
        + new_file_patch("evil/escape-symlink.txt", "escaped")
    )
    preds = predictions(
        project,
        tmp_path / "preds.jsonl",
        {
            "tiny-mul": project.gold_patch("tiny-mul"),
            "p-bogus": bogus,
            "p-binary": binary_patch(project, tmp_path),
            "p-outside": new_file_patch("../../escape-outside.txt", "escaped"),
            "p-absolute": new_file_patch(f"{escape}/escape-absolute.txt", "escaped"),
            "p-symlink": symlink,
        },
    )
    escape.mkdir()
    ids = "tiny-mul,p-bogus,p-binary,p-outside,p-absolute,p-symlink,p-missing"
    project.doit("run", "faults:file", f"predictions={preds}", "run=patches", f"instances={ids}")
    status = {
        iid: project.read("file", iid, "grade.json", "patches")["status"]
        for iid in ids.split(",")
        if iid != "p-missing"
    }
    assert status == {
        "tiny-mul": "resolved",
        "p-bogus": "patch_failed",
        "p-binary": "resolved",
        "p-outside": "patch_failed",
        "p-absolute": "patch_failed",
        "p-symlink": "patch_failed",
    }
    assert project.read("file", "p-binary", "patch.json", "patches")["binary"]
    # A task without a row in the file is not scored (as in SWE-bench), not an empty patch.
    assert not project.task_dir("file", "p-missing", "patches").exists()
    log = (project.task_dir("file", "p-outside", "patches") / "build.log").read_text()
    assert "invalid path" in log
    # Nothing was written outside a build tree, anywhere.
    assert list(escape.iterdir()) == []
    assert list(project.base.rglob("escape-*.txt")) == []
    assert_gold_intact(project, reference, "patches")


def test_hanging_test_file_is_killed_at_its_limit(reference, tmp_path, marker):
    project = reference["project"]
    preds = predictions(
        project,
        tmp_path / "preds.jsonl",
        {"t-hang": project.gold_patch("tiny-add"), "tiny-mul": project.gold_patch("tiny-mul")},
    )
    start = time.monotonic()
    project.doit(
        "run",
        "faults:file",
        f"predictions={preds}",
        "run=hang-file",
        "instances=t-hang,tiny-mul",
        env={"FAKE_AGENT_MARKER": marker},
    )
    assert time.monotonic() - start < 60
    grade = project.read("file", "t-hang", "grade.json", "hang-file")
    prove = project.read("file", "t-hang", "prove.json", "hang-file")
    assert prove["files"]["hang.t"]["timed_out"] and not prove["files"]["calc_add.t"]["timed_out"]
    assert grade["timed_out_files"] == ["hang.t"]
    # What it printed before the limit counts; the rest fails.
    assert "hang.t:1 before the hang" in grade["pass_to_pass"]["passed"]
    assert grade["pass_to_pass"]["failed"] == ["hang.t:2 after the hang"]
    assert grade["status"] == "partially_resolved" and grade["fail_to_pass"]["failed"] == []
    assert processes_with(marker) == []  # the sleeping test script too
    assert_gold_intact(project, reference, "hang-file")


FAKE_PROVE = """#!/bin/sh
# prove that crashes on one file, after printing some TAP: its verdict must not count.
# (The file is named here: prove's environment is the harness's own, not the caller's.) It reads
# address 1, a real fault: as its namespace's init it would ignore a SIGSEGV sent by itself.
for arg; do file=$arg; done
if [ "$file" = "{crash}" ]; then
    echo "$file .."
    echo "1..2"
    echo "ok 1 - add two numbers"
    exec perl -e 'my $crash = unpack "p", pack "J", 1'
fi
exec {prove} "$@"
"""


def test_prove_crash_is_an_environment_error(reference, tmp_path):
    project = reference["project"]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real_prove = subprocess.run(["which", "prove"], capture_output=True, text=True).stdout.strip()
    (bin_dir / "prove").write_text(FAKE_PROVE.format(prove=real_prove, crash="flaky.t"))
    (bin_dir / "prove").chmod(0o755)
    preds = predictions(
        project,
        tmp_path / "preds.jsonl",
        {"t-crash": project.gold_patch("tiny-add"), "tiny-mul": project.gold_patch("tiny-mul")},
    )
    project.doit(
        "run",
        "faults:file",
        f"predictions={preds}",
        "run=crash",
        "instances=t-crash,tiny-mul",
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}"},
    )
    prove = project.read("file", "t-crash", "prove.json", "crash")
    assert prove["files"]["flaky.t"]["exit_code"] == -signal.SIGSEGV
    grade = project.read("file", "t-crash", "grade.json", "crash")
    # The one fail_to_pass assertion did print "ok": still not a pass.
    assert grade["status"] == "env_error" and not grade["resolved"]
    assert grade["env_errors"] == [f"flaky.t: prove was killed by signal {int(signal.SIGSEGV)}"]
    assert_gold_intact(project, reference, "crash")


# The fixture's main() (src/core/nginx.c) with what `add` runs before it prints its sum, for the
# hostile patches below: `{before}` is C code, `{result}` the sum it prints.
HOSTILE_MAIN = """
int main(int argc, char **argv)
{{
    if (argc == 2 && strcmp(argv[1], "-V") == 0) {{
        printf("tiny version: 1.0\\nconfigure arguments: %s\\n", NGX_CONFIGURE);
        return 0;
    }}
    if (argc != 4) return 2;
    int a = atoi(argv[2]), b = atoi(argv[3]);
    if (strcmp(argv[1], "add") == 0) {{ {before} printf("%d\\n", {result}); }}
    else if (strcmp(argv[1], "mul") == 0) printf("%d\\n", calc_mul(a, b));
    else return 2;
    return 0;
}}
"""


def nginx_c_patch(project, task, commit, text):
    """The patch of tiny-add that turns its base into `commit` with src/core/nginx.c `text`."""
    work = project.root.parent / f"nginx-c-{uuid.uuid4().hex[:8]}"
    git(project.mirrors / "acme+tiny", "worktree", "add", "-q", "--detach", str(work), commit)
    try:
        (work / "src" / "core" / "nginx.c").write_text(text)
        return git(work, "diff", "--binary", "--full-index", task["base_commit"])
    finally:
        git(project.mirrors / "acme+tiny", "worktree", "remove", "--force", str(work))


# A patch whose program SIGKILLs every process it may when it adds (calc_add.t runs that first):
# the fix of tiny-add plus a hostile nginx.c. In the test file's PID namespace that is the file's
# own processes, not prove (the namespace's init), not the harness, not a bystander of the host.
# Where the bystander can be signalled (no namespace) it kills nothing: the test fails instead of
# taking the machine with it.
KILLER_MAIN = """#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>
#include "calc.h"
#include "ngx_auto_config.h"

static void kill_everything(void)
{
    if (kill(BYSTANDER, 0) == 0) return;
    kill(-1, SIGKILL);
}
"""
KILLER_MAIN += HOSTILE_MAIN.format(before="kill_everything();", result="calc_add(a, b)")


def test_a_patch_whose_program_kills_every_process_it_may_is_the_patchs_fault(reference, tmp_path):
    project = reference["project"]
    task = next(t for t in project.tasks if t["instance_id"] == "tiny-add")
    bystander = subprocess.Popen(["sleep", "600"])
    try:
        hostile = KILLER_MAIN.replace(
            '#include "calc.h"', f'#include "calc.h"\n#define BYSTANDER {bystander.pid}'
        )
        patch = nginx_c_patch(project, task, task["fix_commit"], hostile)
        preds = predictions(project, tmp_path / "preds.jsonl", {"tiny-add": patch})
        project.doit("run", "tiny:file", f"predictions={preds}", "run=killer", "instances=tiny-add")
        assert bystander.poll() is None, "the patch's program killed a process of the host"
    finally:
        bystander.kill()
        bystander.wait()
    prove = project.read("file", "tiny-add", "prove.json", "killer")
    # prove, the namespace's init, lives on and reports the file killed under it; the base runs
    # the file to its end (its bug fails one assertion: exit code 1).
    assert prove["files"]["calc_add.t"]["exit_code"] == 1
    assert prove["reference"]["calc_add.t"]["exit_code"] == 1
    grade = project.read("file", "tiny-add", "grade.json", "killer")
    assert (grade["status"], grade["env_errors"]) == ("unresolved", [])
    assert grade["file_failures"] == [
        {
            "file": "calc_add.t",
            "kind": "died",
            "reason": "test file died: killed by signal 9 after 0 of 3 assertions; "
            "the base build runs it",
        }
    ]
    # A verdict, not an environment error: the next run keeps it.
    _, executed = project.doit(
        "run", "tiny:file", f"predictions={preds}", "run=killer", "instances=tiny-add"
    )
    assert not any(e.startswith(("prove:", "grade:")) for e in executed)


# A patch whose program, when it adds, writes the passing rest of the test's TAP into the test
# file's own stdout (its pipe to prove, through /proc), then kills the test file: prove reads a
# complete stream of passes from a file killed by signal 9. As root (the host's toolchain) the
# program may open that pipe; under the pin it may not (test_rootfs.py).
FORGER_MAIN = """#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "calc.h"
#include "ngx_auto_config.h"

static int test_file(void)
{
    char path[64], comm[64];
    int pid = (int) getppid(), parent;
    while (pid > 1) {
        snprintf(path, sizeof(path), "/proc/%d/comm", pid);
        FILE *f = fopen(path, "r");
        if (f == NULL) return 0;
        if (fgets(comm, sizeof(comm), f) == NULL) comm[0] = '\\0';
        fclose(f);
        if (strcmp(comm, "perl\\n") == 0) return pid;
        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        f = fopen(path, "r");
        if (f == NULL) return 0;
        if (fscanf(f, "%*d (%*[^)]) %*c %d", &parent) != 1) parent = 0;
        fclose(f);
        pid = parent;
    }
    return 0;
}

static void forge(void)
{
    static const char rest[] =
        "ok 1 - add two numbers\\nok 2 - add zeros\\nok 3 - mul still works\\n";
    char path[64];
    int pid = test_file(), fd;
    if (pid == 0) return;
    snprintf(path, sizeof(path), "/proc/%d/fd/1", pid);
    fd = open(path, O_WRONLY);
    if (fd < 0) return;
    if (write(fd, rest, sizeof(rest) - 1) < 0) return;
    close(fd);
    kill(pid, SIGKILL);
}
"""
FORGER_MAIN += HOSTILE_MAIN.format(before="forge();", result="a - b")


def test_a_patch_that_writes_its_tests_passes_and_kills_the_file_is_unresolved(reference, tmp_path):
    project = reference["project"]
    task = next(t for t in project.tasks if t["instance_id"] == "tiny-add")
    patch = nginx_c_patch(project, task, task["base_commit"], FORGER_MAIN)
    preds = predictions(project, tmp_path / "preds.jsonl", {"tiny-add": patch})
    project.doit("run", "tiny:file", f"predictions={preds}", "run=forger", "instances=tiny-add")
    tap = (project.task_dir("file", "tiny-add", "forger") / "tap" / "calc_add.t.tap").read_text()
    # The forged stream reached prove: three passes after the test's own plan...
    assert "1..3\nok 1 - add two numbers\nok 2 - add zeros\nok 3 - mul still works\n" in tap
    assert "Wstat: 9" in tap
    # ...and counts for nothing: the file died.
    grade = project.read("file", "tiny-add", "grade.json", "forger")
    assert (grade["status"], grade["resolved"]) == ("unresolved", False)
    assert grade["file_failures"] == [
        {
            "file": "calc_add.t",
            "kind": "died",
            "reason": "test file died: killed by signal 9 after 3 of 3 assertions; "
            "the base build runs it",
        }
    ]


# -- kill -9 of doit in the middle of every stage --------------------------------------------------

# Where each kill lands: the path of the harness's next write when doit is killed (see
# pausing_dodo.py); "agent" kills while the agent of tiny-mul is running.
KILL_POINTS = {
    "workspace": r"workspaces/default/fake/tiny-mul\.json$",  # repository made, stamp not yet
    "agent": None,
    "patch": r"fake/tiny-mul/patch\.json$",  # model.patch written, not its record
    "build": r"builds/\.tmp/[^/]+/build\.json$",  # built, not published
    "prove": r"fake/tiny-mul/prove\.json$",  # TAP written, not its record
    "grade": r"fake/tiny-mul/grade\.json$",
    "results": r"fake/predictions\.jsonl$",  # results.jsonl written, not this
}


@pytest.mark.parametrize("stage", list(KILL_POINTS))
def test_kill_9_in_a_stage_then_rerun_gives_the_uninterrupted_results(
    project, reference, marker, stage, tmp_path
):
    env = {"FAKE_AGENT_MARKER": marker}
    pause = tmp_path / "paused"
    # One task at a time (-n 1): tiny-add's agent has finished when tiny-mul's pauses, so which
    # agent ran to its end before the kill is known.
    if stage == "agent":
        env["FAKE_AGENT_GATE_tiny_mul"] = str(tmp_path / "gate")
        pause = tmp_path / "gate.waiting"
        proc = start_doit(project, "run", "-n", "1", "tiny", env=env)
    else:
        env.update(
            NGINX_EVAL_TEST_PAUSE_AT=KILL_POINTS[stage], NGINX_EVAL_TEST_PAUSE_MARKER=str(pause)
        )
        proc = start_doit(project, "run", "-n", "1", "tiny", env=env, dodo=PAUSING_DODO)
    wait_for(pause, proc)
    kill_doit(proc)
    # The rerun: plain doit, as a user would type it.
    project.doit("run", "tiny", env={"FAKE_AGENT_MARKER": marker})
    assert outcome(project) == reference["outcome"]
    calls = sorted(project.agent_calls())
    # A finished agent is never paid for twice; the one killed mid-run runs again.
    assert calls == (
        ["tiny-add", "tiny-mul", "tiny-mul"] if stage == "agent" else ["tiny-add", "tiny-mul"]
    )
    tmp_builds = project.cache / "builds" / ".tmp"
    assert not tmp_builds.exists() or list(tmp_builds.iterdir()) == []
    _, executed = project.doit("run", "tiny")
    assert executed == []


# -- a second doit process; a damaged doit database ----------------------------------------------


def test_second_doit_process_on_the_same_run_is_refused(project, reference, marker, tmp_path):
    gate = tmp_path / "gate"
    env = {"FAKE_AGENT_GATE_tiny_add": str(gate), "FAKE_AGENT_MARKER": marker}
    # The gated agent waits while seven doit commands run beside it: on a loaded machine that
    # took longer than the fixture's 20 s limit, and the agent timed out.
    modes = project.root / "modes.toml"
    modes.write_text(modes.read_text().replace("timeout = 20", "timeout = 600"))
    first = start_doit(project, "run", "tiny", env=env)
    try:
        wait_for(f"{gate}.waiting", first)
        results_dir = project.results / "default"
        run_lock = project.cache / "locks" / "run-default.lock"
        refusals = [
            (("run", "tiny"), {}, results_dir),
            (("forget", "agent:tiny/fake/tiny-add"), {}, results_dir),
            # Another cache, same results: the results directory is the one in use.
            (
                ("run", "tiny:gold"),
                {"NGINX_EVAL_CACHE": str(tmp_path / "other-cache")},
                results_dir,
            ),
            # Other results, same cache: the run's workspaces and database are in use.
            (
                ("run", "tiny:gold"),
                {"NGINX_EVAL_RESULTS": str(tmp_path / "other-results")},
                run_lock,
            ),
        ]
        for args, extra, path in refusals:
            proc, executed = project.doit(*args, check=False, env=extra)
            assert proc.returncode == 2 and executed == []
            assert proc.stderr.splitlines() == [
                f"nginx-eval: error: another doit process is using {path} (pid {first.pid}); "
                "wait for it or stop it"
            ]
        # Reading is allowed, and so is another run: what runs share has locks of its own.
        project.doit("list", "--all")
        info, _ = project.doit("info", "agent:tiny/fake/tiny-add", check=False)
        assert "run mode fake on tiny-add" in info.stdout and info.stderr == ""
        project.doit("run", "tiny:gold", "run=other")
        assert project.read("gold", "tiny-add", "grade.json", "other")["status"] == "resolved"
    finally:
        gate.touch()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, out + err
    assert outcome(project) == reference["outcome"]
    assert sorted(project.agent_calls()) == ["tiny-add", "tiny-mul"]
    assert list((project.cache / "doit").glob("*damaged*")) == []
    assert list(project.base.rglob("*.forgotten/*")) == []  # the refused forget did nothing


@pytest.mark.parametrize("damage", ["garbage", "torn"])
def test_damaged_doit_database_is_rebuilt_from_the_result_files(reference, damage):
    """The database of the clean run (``reference``), damaged in turn: each test leaves it
    rebuilt and the run up to date. The run's modes are named (the module's `twice` mode came
    after the clean run)."""
    project = reference["project"]
    targets = [f"tiny:{mode}" for mode in MODES]
    db = project.cache / "doit" / "default.db"
    for earlier in db.parent.glob("default.db.damaged-*"):  # set aside in the other damage's test
        earlier.unlink()
    calls = len(project.agent_calls())
    data = db.read_bytes()
    if damage == "garbage":
        db.write_bytes(os.urandom(len(data)))
    else:  # the header survives, the pages after it do not
        db.write_bytes(data[:100] + b"\xff" * (len(data) - 100))
    proc, executed = project.doit("run", *targets)
    assert "doit database" in proc.stderr and "was damaged" in proc.stderr
    assert len(list(db.parent.glob("default.db.damaged-*[0-9]"))) == 1
    # Each unit's freshness is read from its own output (stamps.py), not from the database: no
    # unit stage runs again, and the agents are not paid for again. Only the summaries, which
    # keep doit's file_dep check, are made again (in milliseconds).
    units = ("workspace:", "agent:", "patch:", "build:", "prove:", "grade:")
    assert [t for t in executed if t.startswith(units)] == []
    assert project.agent_calls()[calls:] == []
    assert outcome(project) == reference["outcome"]
    _, executed = project.doit("run", *targets)
    assert executed == []
