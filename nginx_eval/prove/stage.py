"""Stage 6, prove: run the task's test files with ``prove -v`` against the built binary.

The tests run in the nginx-tests tree of the task's test commit (with an authored task's own files),
checked before each prove (prove/tree.py), in an environment the harness pins, with an output guard
in front of nginx (prove/env.py), each file in a network of its own (prove/network.py) and, with the
pinned toolchain, in its root filesystem (core/rootfs.py). Each file runs with its own time limit
(task.test_timeout) in its own process group, so a hanging test and the nginx it started are killed.
Its output: ``tap/<file>.tap`` (the TAP stream), ``.stderr`` and ``.nginx.log``.

A file that did not run to its end (skipped entirely, no plan, died, bailed out, a tampered
stream) or skipped a graded assertion, in either run, runs once more against the task's base build
(``reference``, ``tap/reference/``): grade/stage.py decides from it whose fault that was. With
``rerun_failed=1`` (then, and only then, part of prove's config) a file with a graded assertion
that failed or did not run runs once more against the same binary (``tap/<file>.rerun.tap``),
and grade/stage.py takes the rerun's verdict. A prove whose grade was an environment error is
not kept: the next ``doit run`` proves again.

``prove.json`` (core/records.py: ProveJson, where each field is explained)::

    {"inputs", "binary", "binary_key", "test_commit", "environment": {name: value},
     "files": {"<file>": {"exit_code", "timed_out", "seconds", "cpu_seconds", "tap", "stderr",
                          "nginx_log", "missing", "network": "private" | "shared"}},
     "reference": {"<file>": the same record}, "reference_key",
     "reruns": {"<file>": the same record},   # rerun_failed=1 only
     "notes": [str], "versions": {"perl", "openssl"} | null, "toolchain": {"name", "digest"}}
"""

import contextlib
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..build.cache import binary_path, verify_build
from ..build.stage import ensure_build
from ..cluster import executor
from ..cluster.node import on_node
from ..core import inputs, jsonio, limits, locks, rootfs, stamps
from ..core.outcomes import BUILT, ENV_ERROR
from ..core.procs import kill_leftovers, run_limited
from ..core.records import BuildRecord, ProveJson, ProveRun, write_record
from ..core.stamps import TaskDict
from ..core.tasknames import BUILD, PROVE, task_name, tests_task_name, unit_name
from . import network as private_network
from . import tree as testtree
from .env import (
    OPENSSL_CONF_FILE,
    OUTPUT_GUARD,
    PERL_DIR,
    daemon_shims,
    environment_inputs,
    output_guard,
    prove_environment,
    tool_versions,
)
from .tap import FileResult, needs_reference, parse_tap
from .tree import task_tests_tree

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..run.benchmark import Task
    from ..run.context import StageContext


def ports_for(tests_tree: Path, network: str) -> AbstractContextManager[None]:
    """What a prove holds while it runs: on the shared network, a fixed-port test tree queues
    for the machine's one fixed-port slot (prove/network.py); otherwise nothing."""
    if network == "shared" and private_network.uses_fixed_ports(tests_tree):
        return locks.locked(private_network.FIXED_PORT_LOCK)
    return contextlib.nullcontext()


def run_prove_files(
    layout: "Layout",
    tests_tree: Path,
    binary: Path,
    test_files: Sequence[str],
    timeout: float,
    tap_dir: Path,
    token_file: str | Path | None = None,
    suffix: str = "",
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, ProveRun]:
    """Run each file against `binary`; return {file: record}. Output files go to tap_dir, named
    after the file plus `suffix` (".rerun"); token_file: see procs.kill_leftovers; extra_env:
    added to the pinned environment (a sanitizer's options)."""
    tap_dir.mkdir(parents=True, exist_ok=True)
    guard = output_guard(layout, binary)
    env = dict(
        prove_environment(tests_tree, guard, binary, daemon_shims(layout)),
        **(extra_env or {}),
    )
    network = "shared" if private_network.problem() else "private"
    toolchain = rootfs.current()
    files: dict[str, ProveRun] = {}
    for name in test_files:
        stem = name.replace("/", "__") + suffix
        tap_path, err_path = tap_dir / f"{stem}.tap", tap_dir / f"{stem}.stderr"
        log_path = tap_dir / f"{stem}.nginx.log"
        # The record of a file that does not exist; a run's outcome replaces its last fields.
        record: ProveRun = {
            "tap": tap_path.name,
            "stderr": err_path.name,
            "nginx_log": log_path.name,
            "network": network,
            "exit_code": None,
            "timed_out": False,
            "seconds": 0.0,
            "cpu_seconds": None,
            "missing": True,
        }
        if not (tests_tree / name).is_file():
            tap_path.write_text("")
            err_path.write_text(f"[nginx-eval] {name} does not exist at this test commit\n")
            files[name] = record
            continue
        log_path.write_bytes(b"")
        argv = ["prove", "--norc", "-v", name]
        if toolchain.pinned:
            # The tests, the build's tree (the binary, objs/src for Perl modules), the guard and
            # the harness's Perl module read-only; writable only nginx's log and the sanitizers'
            # reports (strict's san/), never the TAP and stderr files, which prove writes through
            # descriptors opened here. bwrap gives the loopback.
            argv = rootfs.command(
                toolchain,
                argv,
                cwd=tests_tree,
                readable=[
                    tests_tree,
                    Path(binary).parent.parent,
                    guard.parent,
                    OPENSSL_CONF_FILE,
                    PERL_DIR,
                ],
                writable=[log_path, tap_dir / "san"],
                network=network == "shared",
            )
        elif network == "private":
            argv = private_network.command(argv)
        with (
            open(tap_path, "wb") as so,
            open(err_path, "wb") as se,
            limits.slot("prove"),
            ports_for(tests_tree, network),
        ):
            outcome = run_limited(
                argv,
                cwd=str(tests_tree),
                env=dict(env, NGINX_EVAL_NGINX_LOG=str(log_path)),
                timeout=timeout,
                stdout=so,
                stderr=se,
                token_file=token_file,
                children_first=True,
            )
        if outcome.timed_out:
            with open(err_path, "ab") as se:
                se.write(f"\n[nginx-eval] killed after {timeout} s\n".encode())
        files[name] = {
            **record,
            "exit_code": outcome.exit_code,
            "timed_out": outcome.timed_out,
            "seconds": outcome.seconds,
            "cpu_seconds": outcome.cpu_seconds,
            "missing": False,
        }
    return files


def graded_in(task: "Task", name: str) -> list[str]:
    """The graded assertion ids (fail_to_pass, pass_to_pass) of the test file `name`."""
    return [
        i for i in list(task.fail_to_pass) + list(task.pass_to_pass) if i.startswith(f"{name}:")
    ]


def _parsed(tap_dir: Path, name: str, record: ProveRun) -> FileResult:
    return parse_tap(name, (tap_dir / record["tap"]).read_text(errors="replace"))


def files_needing_reference(
    task: "Task", tap_dir: Path, files: Mapping[str, ProveRun]
) -> list[str]:
    """The files whose problems only a run of the base build can attribute (tapstream)."""
    return [
        name
        for name, record in files.items()
        if needs_reference(_parsed(tap_dir, name, record), record, graded_in(task, name))
    ]


def files_to_rerun(task: "Task", tap_dir: Path, files: Mapping[str, ProveRun]) -> list[str]:
    """The files of the test commit with a graded assertion that did not pass (failed, did not
    run, or its stream cannot be trusted): rerun_failed=1 runs each once more."""
    out = []
    for name, record in files.items():
        if record["missing"]:
            continue  # nothing to run again: an environment error either way
        fr = _parsed(tap_dir, name, record)
        if fr.tampered or not all(fr.results.get(i) is True for i in graded_in(task, name)):
            out.append(name)
    return out


def reference_runs(
    layout: "Layout",
    task: "Task",
    build: BuildRecord,
    names: Sequence[str],
    tests_tree: Path,
    tap_dir: Path,
    token_file: str | Path | None,
) -> tuple[dict[str, ProveRun] | None, str | None]:
    """({file: record} of the base build's runs of `names`, the base build's key); ({}, None)
    when the base does not build here (then the environment is at fault); (None, key) when the
    candidate is the base build itself."""
    base = ensure_build(
        layout, layout.bare_repo(task.repo), task.base_commit, task.configure_flags, b""
    )
    if base["status"] != BUILT:
        return {}, None
    if base["key"] == build["key"]:
        return None, base["key"]  # the candidate is the base: its own runs are the reference
    files = run_prove_files(
        layout,
        tests_tree,
        binary_path(layout, base["key"]),
        names,
        task.test_timeout,
        tap_dir / "reference",
        token_file=token_file,
    )
    return (
        {
            name: {
                **rec,
                "tap": f"reference/{rec['tap']}",
                "stderr": f"reference/{rec['stderr']}",
                "nginx_log": f"reference/{rec['nginx_log']}",
            }
            for name, rec in files.items()
        },
        base["key"],
    )


def grade_was_env_error(layout: "Layout", mode_name: str, iid: str) -> bool:
    return (jsonio.read_json(layout.grade_json(mode_name, iid)) or {}).get("status") == ENV_ERROR


def verdict_kept(layout: "Layout", mode_name: str, iid: str) -> bool:
    """doit's uptodate: a prove whose grade blamed the environment is done again."""
    return not grade_was_env_error(layout, mode_name, iid)


def prove_built(
    layout: "Layout",
    task: "Task",
    build: BuildRecord,
    record: ProveJson,
    tap_dir: Path,
    token_file: str | Path,
    rerun_failed: bool,
) -> None:
    """Fill `record` (prove.json) with the runs of the built binary, its reruns and the base
    build's reference runs."""
    problem = verify_build(layout, build)
    if problem:
        raise RuntimeError(f"{problem}; `doit run` again rebuilds it")
    tree, notes = task_tests_tree(layout, task)
    binary = binary_path(layout, build["key"])
    files = run_prove_files(
        layout, tree, binary, task.test_files, task.test_timeout, tap_dir, token_file=token_file
    )
    record.update(
        {
            "binary": str(binary),
            "binary_key": build["key"],
            "files": files,
            "notes": notes,
            "environment": prove_environment(
                tree, output_guard(layout, binary), binary, daemon_shims(layout)
            ),
            "versions": tool_versions(),
            "toolchain": rootfs.record(rootfs.current()),
        }
    )
    reruns: dict[str, ProveRun] = {}
    if rerun_failed:
        reruns = run_prove_files(
            layout,
            tree,
            binary,
            files_to_rerun(task, tap_dir, files),
            task.test_timeout,
            tap_dir,
            token_file=token_file,
            suffix=".rerun",
        )
        record["reruns"] = reruns
    # The grade decides from the rerun (where there is one): the reference must cover both runs.
    needing = set(files_needing_reference(task, tap_dir, files)) | set(
        files_needing_reference(task, tap_dir, reruns)
    )
    needed = [name for name in files if name in needing]
    if needed:
        refs, key = reference_runs(layout, task, build, needed, tree, tap_dir, token_file)
        decided = dict(files, **reruns)
        record["reference"] = {n: decided[n] for n in needed} if refs is None else refs
        record["reference_key"] = key


def prove_task(
    layout: "Layout", mode_name: str, task: "Task", config: dict[str, Any], files: list[str]
) -> None:
    inputs = stamps.inputs_digest(config, files)
    executor.run(
        "prove",
        prove_unit,
        layout,
        mode_name,
        task.instance_id,
        [mode_name, task, inputs, bool(config.get("rerun_failed"))],
        ship_in=["build.json", "model.patch"],
        ship_out=["prove.json", "tap/"],
        repos=[
            (task.repo, {task.base_commit: [[task.instance_id, "base_commit"]]}),
            (task.test_repo, {task.test_commit: [[task.instance_id, "test_commit"]]}),
        ],
    )


def _node_build(layout: "Layout", mode_name: str, task: "Task", build: BuildRecord) -> BuildRecord:
    """On a node of executor=ray: the unit's build in the node's own cache, made there when
    the node lacks it (the same patch gives the same key)."""
    patch = layout.model_patch(mode_name, task.instance_id).read_bytes()
    made = ensure_build(
        layout, layout.bare_repo(task.repo), task.base_commit, task.configure_flags, patch
    )
    if made["key"] != build["key"] or made["status"] != BUILT:
        raise RuntimeError(
            f"build {build['key']} could not be made on this node: "
            f"{made.get('reason') or made['status']}"
        )
    return made


def prove_unit(
    layout: "Layout", mode_name: str, task: "Task", inputs: str, rerun_failed: bool
) -> None:
    """The runs of a unit's test files, and its prove.json and tap/ (executor.py)."""
    build: BuildRecord = jsonio.read_json(layout.build_json(mode_name, task.instance_id))
    token_file = layout.running_token(mode_name, task.instance_id, "prove")
    kill_leftovers(token_file)  # a test a killed doit left running
    tap_dir = layout.tap_dir(mode_name, task.instance_id)
    shutil.rmtree(tap_dir, ignore_errors=True)
    record: ProveJson = {
        "inputs": inputs,
        "test_commit": task.test_commit,
        "binary": None,
        "binary_key": None,
        "environment": {},
        "files": {},
        "reference": {},
        "reference_key": None,
        "notes": [],
        "versions": None,
        "toolchain": rootfs.record(rootfs.current()),
    }
    if rerun_failed:
        record["reruns"] = {}
    if build["status"] == BUILT:
        if on_node():
            build = _node_build(layout, mode_name, task, build)
        prove_built(layout, task, build, record, tap_dir, token_file, rerun_failed)
    write_record(layout.prove_json(mode_name, task.instance_id), record)


# prove's optional inputs at the value that leaves them out (core/inputs.py): a task of
# nginx-tests only, rerun_failed off.
PROVE_INPUT_DEFAULTS: dict[str, Any] = {"authored": {}, "rerun_failed": 0}


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    yield from testtree.gen_tasks(ctx)  # the tests:<commit> tasks, before the proves
    guard = jsonio.file_digest(OUTPUT_GUARD)
    environments = {}  # per test tree: the same for every unit of it
    for bench, mode, task in ctx.nginx_units():
        name = unit_name(bench, mode, task)
        iid = task.instance_id
        if task.tests_tree_id not in environments:
            environments[task.tests_tree_id] = environment_inputs(
                ctx.layout.tests_tree(task.tests_tree_id)
            )
        config = {
            "test_commit": task.test_commit,
            "test_files": list(task.test_files),
            "timeout": task.test_timeout,
            "base": task.base_commit,
            "environment": environments[task.tests_tree_id],
            "guard": guard,
            # An edited authored test is a new input (and a new tree): prove again.
            "authored": task.authored_digests,
            "rerun_failed": 1 if ctx.options.rerun_failed else 0,
        }
        yield stamps.stage_task(
            basename=PROVE,
            name=name,
            doc=f"prove {' '.join(task.test_files)} for the {mode.name} patch of {iid}",
            action=prove_task,
            args=[ctx.layout, mode.name, task],
            config=inputs.canonical(config, PROVE_INPUT_DEFAULTS),
            files=[ctx.layout.build_json(mode.name, iid)],
            task_dep=[tests_task_name(task.tests_tree_id), task_name(BUILD, name)],
            targets=[ctx.layout.prove_json(mode.name, iid)],
            # An environment error is no verdict to keep: prove again on the next run.
            also_current=[(verdict_kept, [ctx.layout, mode.name, iid])],
        )
