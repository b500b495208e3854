"""Stage 5, build: ``objs/nginx`` for base + patch, addressed by content.

A build is keyed by (base commit, configure flags, patch bytes, compiler identity) and lives in
``<cache>/builds/<key>/``: ``tree/`` (the patched source and tree/objs/nginx), ``build.log``
(configure, make and patch output) and ``build.json`` (core/records.py: BuildRecord)::

    {"key", "status": "built"|"patch_failed"|"compile_failed"|"env_error",
     "kind": "clean"|"incremental"|"sibling"|null, "seconds", "cpu_seconds", "base_commit",
     "configure_flags", "patch_sha256", "compiler", "build_system",
     "binary_sha256", "binary_stat",      # built only
     "reason"}                            # env_error only: one line

Per task, ``results/<run>/<mode>/<id>/build.json`` is the build record plus {"inputs", "binary",
"reused", "wait_seconds"} (records.BuildJson) and ``build.log`` a copy of the log.

Identical patches share one build, and the empty patch is the base build; a later patch starts
from a copy of its base's build and make recompiles only what it touches, a patch of the build
system (auto/, configure) gets a clean one, and a base build may start from a "sibling" base
with the same auto/ and configure. Builds are made in a private temporary directory and
published by renaming it under a per-key lock; a published tree is read-only and its binary's
sha256 is checked before anything starts from it (cache.verify_build). Only the patch's failures
are verdicts (``compile_failed``, ``patch_failed``, published with their log); a failure of the
environment is ``env_error``, never published (docs/verdicts.md#build). The steps are in
build/steps.py, the cache in build/cache.py, mtimes in build/mtimes.py, the order in build/plan.py.
"""

import contextlib
import contextvars
import shutil
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ..cluster import executor
from ..core import jsonio, limits, rootfs, stamps
from ..core.locks import locked
from ..core.outcomes import BUILT, ENV_ERROR, BuildStatus
from ..core.records import BuildFields, BuildJson, BuildRecord, write_record
from ..core.stamps import TaskDict
from ..core.tasknames import (
    BASE,
    BUILD,
    PATCH,
    base_subtask,
    base_task_name,
    repo_task,
    task_name,
    unit_name,
)
from ..core.trees import remove_tree
from ..doitext.backend import forgotten
from ..patch.stage import touched_paths
from . import steps as buildsteps
from .cache import (
    BuildSpec,
    binary_path,
    build_is_published,
    damage,
    failed_here,
    publish,
    published_build,
    record_env_error,
    remove_base_build,
    remove_task_build,
    result_build_ok,
    verify_build,
)
from .plan import build_system_id, find_sibling
from .steps import Failure
from .toolchain import build_env, compiler_identity, missing_tool, toolchain_line

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..run.benchmark import Task
    from ..run.context import StageContext

BUILD_SYSTEM_PATHS = ("auto/", "configure", "Makefile", "objs/")


def touches_build_system(files: Iterable[str]) -> bool:
    return any(f == p or f.startswith(p) for f in files for p in BUILD_SYSTEM_PATHS)


def _key_lock(layout: "Layout", key: str) -> AbstractContextManager[None]:
    return locked(layout.lock(f"build-{key}"))


# -- failures: the patch's verdict, or the environment's fault ------------------------------------


def _failure_reason(
    layout: "Layout", bare: Path, spec: BuildSpec, failure: Failure, directory: Path
) -> str | None:
    """Why a failed build is an env_error, or None when it is the patch's verdict: the
    environment failed it, or the base (empty patch) does not build here."""
    with open(directory / "build.log", "rb") as f:
        log_text = f.read().decode("utf-8", "replace")
    why = buildsteps.environment_fault(failure, log_text, directory)
    if why:
        return why
    if spec.is_base:
        # The tasks are validated to build: a base that does not is this machine's problem.
        step, code = failure
        return (
            f"the base commit does not build ({step} exited with {code}: "
            f"{buildsteps.first_error(log_text)})"
        )
    base = ensure_build(layout, bare, spec.base_commit, spec.flags, b"")
    if base["status"] != BUILT:
        return f"the base commit does not build here: {base.get('reason')}"
    return None


def _base_does_not_build(layout: "Layout", fields: BuildFields, base: BuildRecord) -> BuildRecord:
    """The env_error of a candidate whose base build failed; its log is the base's."""
    reason = f"the base build {base['key']} failed: {base.get('reason') or base['status']}"
    try:
        base_log = layout.failed_build_log(base["key"]).read_bytes()
    except OSError:
        base_log = b""
    return record_env_error(layout, fields, reason, f"[nginx-eval] {reason}\n".encode() + base_log)


def _refused(layout: "Layout", fields: BuildFields) -> BuildRecord | None:
    """The env_error of a build that cannot start, or None: the pinned toolchain cannot be used
    or a tool is missing (checked each time, it costs nothing: once the tool is installed, the
    build goes ahead), or the build failed earlier in this process."""
    unusable = rootfs.problem(rootfs.current())
    tool = None if unusable else missing_tool(build_env(layout, layout.build_dir(fields["key"])))
    if unusable or tool:
        reason = f"the pinned toolchain: {unusable}" if unusable else f"{tool} is not on PATH"
        return record_env_error(
            layout, fields, reason, f"[nginx-eval] {reason}\n".encode(), remember=False
        )
    return failed_here(layout, fields["key"])


# -- building ----------------------------------------------------------------------------------


def _checked_origin(
    layout: "Layout", bare: Path, origin: BuildRecord, log: BinaryIO
) -> BuildRecord | None:
    """The published base build `origin` to start from, after checking its binary: a tampered
    one is removed and built again clean (None when that fails)."""
    why = verify_build(layout, origin)
    if why is None:
        return origin
    log.write(
        f"[nginx-eval] build {origin['key']} is not intact ({why}); rebuilding it clean\n".encode()
    )
    with _key_lock(layout, origin["key"]):
        current = jsonio.read_json(layout.build_dir(origin["key"]) / "build.json")
        if current and verify_build(layout, current):
            remove_tree(layout.build_dir(origin["key"]), ignore_errors=True)
    rebuilt = ensure_build(
        layout, bare, origin["base_commit"], origin["configure_flags"], b"", clean=True
    )
    return rebuilt if rebuilt["status"] == BUILT else None


def _build_tree(
    layout: "Layout",
    bare: Path,
    tmp: Path,
    base_commit: str,
    flags: Sequence[str],
    patch_file: Path | None,
    origin: BuildRecord | None,
    kind: str,
    env: dict[str, str],
    log: BinaryIO,
) -> tuple[BuildStatus, str, Failure | None]:
    """Build in tmp/tree, from `origin` if it is trusted, else clean: (status, kind, failure),
    failure the (step, return code) of the step that failed."""
    tree = tmp / "tree"
    if origin:
        origin = _checked_origin(layout, bare, origin, log)
    if origin:
        outcome = buildsteps.build_from(
            layout, bare, tree, origin, kind, base_commit, patch_file, env, log
        )
        if outcome:
            return outcome[0], kind, outcome[1]
        remove_tree(tree, ignore_errors=True)
    status, failure = buildsteps.build_clean(
        layout, bare, tree, base_commit, flags, patch_file, env, log
    )
    if status == BUILT and not (tree / "objs" / "nginx").is_file():
        status, failure = "compile_failed", ("make", 0)
    return status, "clean", failure


def _fresh_build_dir(layout: "Layout", key: str) -> Path:
    """The temporary directory of build `key`, empty (called under the key's lock)."""
    tmp = layout.build_tmp(key)
    # Under the key's lock every other temporary directory of this key is a killed build's.
    for stale in tmp.parent.glob(f"{key}.*"):
        remove_tree(stale, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def _build_logged(
    layout: "Layout",
    bare: Path,
    tmp: Path,
    spec: BuildSpec,
    patch: bytes,
    origin: BuildRecord | None,
    kind: str,
    damaged: str | None,
    clock: limits.Stopwatch,
) -> tuple[BuildStatus, str, Failure | None, float | None]:
    """_build_tree in tmp, its output in tmp/build.log: (status, kind, failure, CPU seconds of
    its steps)."""
    patch_file = None
    if not spec.is_base:
        patch_file = tmp / "model.patch"
        patch_file.write_bytes(patch)
    with open(tmp / "build.log", "wb") as log:
        log.write(f"[nginx-eval] toolchain: {toolchain_line()}\n".encode())
        if damaged:
            log.write(
                f"[nginx-eval] published build {spec.key} is not intact ({damaged}); "
                f"building it again\n".encode()
            )
        with buildsteps.steps_token(layout.running_build_token(spec.key)) as cpu:
            status, kind, failure = _build_tree(
                layout,
                bare,
                tmp,
                spec.base_commit,
                spec.flags,
                patch_file,
                origin,
                kind,
                build_env(layout, tmp / "tree", patched=not spec.is_base),
                log,
            )
        log.write(f"\n[nginx-eval] {status} ({kind}) in {clock.seconds():.1f} s\n".encode())
    cpu_seconds = None if cpu[0] is None else round(cpu[0], 3)
    return status, kind, failure, cpu_seconds


# The keys this call of build_unit built and published (its "reused": a build another worker
# published while this one waited for its lock is reused too); None outside build_unit.
_made_here: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar(
    "made_here", default=None
)


def _build_locked(
    layout: "Layout",
    bare: Path,
    spec: BuildSpec,
    patch: bytes,
    fields: BuildFields,
    damaged: str | None,
    origin: BuildRecord | None,
    kind: str,
) -> BuildRecord:
    """The build, made under its key's lock from `origin` (or clean), then published, or an
    unpublished env_error."""
    # Another worker published it, or failed it in this process, while we waited.
    done = published_build(layout, spec.key) or failed_here(layout, spec.key)
    if done:
        return done
    tmp = _fresh_build_dir(layout, spec.key)
    clock = limits.Stopwatch()  # the build's time, not its waits for a build slot
    status, kind, failure, cpu = _build_logged(
        layout, bare, tmp, spec, patch, origin, kind, damaged, clock
    )
    record: BuildRecord = {
        **fields,
        "status": status,
        "kind": kind,
        "seconds": round(clock.seconds(), 3),
        "cpu_seconds": cpu,
    }
    reason = None
    if status != BUILT:
        assert failure is not None  # every status but "built" names the failed step
        reason = _failure_reason(layout, bare, spec, failure, tmp)
    if reason:
        log_bytes = (
            tmp / "build.log"
        ).read_bytes() + f"[nginx-eval] env_error: {reason}\n".encode()
        remove_tree(tmp, ignore_errors=True)
        return record_env_error(layout, record, reason, log_bytes)
    publish(layout, tmp, record)
    made = _made_here.get()
    if made is not None:
        made.add(spec.key)
    return record


def _ensure_candidate(
    layout: "Layout",
    bare: Path,
    spec: BuildSpec,
    patch: bytes,
    fields: BuildFields,
    damaged: str | None,
) -> BuildRecord:
    """A patch's build: from a copy of its base build, or clean when the patch touches the
    build system."""
    base = None
    if not touches_build_system(touched_paths(patch)):
        base = ensure_build(layout, bare, spec.base_commit, spec.flags, b"")
        if base["status"] != BUILT:
            return _base_does_not_build(layout, fields, base)
    with _key_lock(layout, spec.key):
        return _build_locked(layout, bare, spec, patch, fields, damaged, base, "incremental")


def _ensure_base(
    layout: "Layout",
    bare: Path,
    spec: BuildSpec,
    fields: BuildFields,
    damaged: str | None,
    clean: bool,
) -> BuildRecord:
    """A base build: from the closest published base of another commit with the same build
    system (a sibling), or clean (always when `clean`)."""
    system_id = build_system_id(bare, spec.base_commit)
    fields = {**fields, "build_system": system_id}
    find = lambda: (
        find_sibling(layout, bare, spec.base_commit, spec.flags, fields["compiler"], system_id)
        if system_id and not clean
        else None
    )
    sibling = find()
    with contextlib.ExitStack() as held:
        if system_id and not sibling and not clean:
            # The first base build of a build-system group holds the group's lock, so that the
            # others start from it instead of racing it through clean builds. Once one is
            # published, the rest of the group builds side by side.
            group = jsonio.digest([system_id, list(spec.flags), fields["compiler"]])[:16]
            held.enter_context(locked(layout.lock(f"build-group-{group}")))
            sibling = find()
        held.enter_context(_key_lock(layout, spec.key))
        return _build_locked(layout, bare, spec, b"", fields, damaged, sibling, "sibling")


def ensure_build(
    layout: "Layout",
    bare: Path,
    base_commit: str,
    flags: Sequence[str],
    patch: bytes,
    clean: bool = False,
) -> BuildRecord:
    """The build record of base + patch, building it if needed (safe across processes): the
    published one, or an unpublished one with status "env_error" and a "reason" when the
    environment failed the build (docs/verdicts.md#build). clean: no base or sibling to
    start from (a tampered base build is rebuilt so)."""
    spec = BuildSpec.of(base_commit, flags, patch)
    record = published_build(layout, spec.key)
    if record:
        return record
    # A published binary that changed is built again, a base clean (nothing is known of what
    # else changed in its tree).
    damaged = damage(layout, spec.key)
    fields: BuildFields = {
        "key": spec.key,
        "kind": None,
        "seconds": 0.0,
        "base_commit": base_commit,
        "configure_flags": list(flags),
        "patch_sha256": spec.patch_sha,
        "compiler": compiler_identity(),
        "build_system": None,
    }
    refused = _refused(layout, fields)
    if refused:
        return refused
    if spec.is_base:
        return _ensure_base(layout, bare, spec, fields, damaged, clean or bool(damaged))
    return _ensure_candidate(layout, bare, spec, patch, fields, damaged)


# -- doit ------------------------------------------------------------------------------------------


def build_task(
    layout: "Layout", mode_name: str, task: "Task", doit_name: str, config: Any, files: list[str]
) -> None:
    inputs = stamps.inputs_digest(config, files)
    out = layout.build_json(mode_name, task.instance_id)
    # Checked again here (stamps.py): a build takes minutes. With executor=ray the build is in
    # a node's cache, not here: the record is what the coordinator has. After `doit forget` the
    # unit is made again: its build is content-addressed, so the cache's (checked against its
    # binary) is taken again, or compiled if `doit clean` removed it.
    current = stamps.made_from(out, inputs)
    if (
        current
        and not forgotten(layout, doit_name)
        and (executor.is_remote() or build_is_published(layout, current))
    ):
        return
    executor.run(
        "build",
        build_unit,
        layout,
        mode_name,
        task.instance_id,
        [mode_name, task, inputs],
        ship_in=["model.patch"],
        ship_out=["build.json", "build.log"],
        repos=[(task.repo, {task.base_commit: [[task.instance_id, "base_commit"]]})],
    )


def build_unit(layout: "Layout", mode_name: str, task: "Task", inputs: str) -> None:
    """The build of a unit's model.patch, and its build.json and build.log (executor.py)."""
    patch = layout.model_patch(mode_name, task.instance_id).read_bytes()
    start = time.monotonic()
    key = BuildSpec.of(task.base_commit, task.configure_flags, patch).key
    made: set[str] = set()
    token = _made_here.set(made)
    try:
        record = ensure_build(
            layout, layout.bare_repo(task.repo), task.base_commit, task.configure_flags, patch
        )
    finally:
        _made_here.reset(token)
    reused = record["status"] != ENV_ERROR and key not in made
    _copy_build_log(layout, record, layout.build_log(mode_name, task.instance_id))
    result: BuildJson = {
        **record,
        "inputs": inputs,
        "reused": reused,
        "binary": str(binary_path(layout, record["key"])),
        "wait_seconds": round(time.monotonic() - start, 3),
    }
    write_record(layout.build_json(mode_name, task.instance_id), result)


def _copy_build_log(layout: "Layout", record: BuildRecord, dest: Path) -> None:
    """The build's log into a task's results; an env_error's is in builds/.failed/ (when the
    disk let us write it)."""
    source = (
        layout.failed_build_log(record["key"])
        if record["status"] == ENV_ERROR
        else layout.build_dir(record["key"]) / "build.log"
    )
    try:
        shutil.copyfile(source, dest)
    except FileNotFoundError:
        jsonio.write_text(dest, f"[nginx-eval] {record['status']}: {record.get('reason')}\n")


def base_build_task(layout: "Layout", task: "Task") -> None:
    ensure_build(layout, layout.bare_repo(task.repo), task.base_commit, task.configure_flags, b"")


def base_build_published(layout: "Layout", task: "Task") -> bool:
    """doit's uptodate of a base task: false after an env_error (never published), so that the
    next run tries again. With executor=ray each node makes its base builds when a unit needs
    them (ensure_build): nothing to do here."""
    return executor.is_remote() or published_build(layout, BuildSpec.base_of(task).key) is not None


def unit_build_kept(layout: "Layout", mode_name: str, iid: str) -> bool:
    """doit's uptodate beside the digest: the unit's build is still in the cache (with
    executor=ray, in a node's cache: the record says whether it was built)."""
    if executor.is_remote():
        record = jsonio.read_json(layout.build_json(mode_name, iid))
        return bool(record) and record.get("status") != ENV_ERROR
    return result_build_ok(layout, mode_name, iid)


def _base_task_dicts(ctx: "StageContext") -> Iterator[TaskDict]:
    """A task per base build, in buildplan's order, each after the base it starts from."""
    for _, task, parent in ctx.base_build_plan():
        yield {
            "basename": BASE,
            "name": base_subtask(task),
            "doc": f"the base build of {task.base_commit[:12]} (shared by every mode and run)",
            "actions": [(base_build_task, [ctx.layout, task])],
            # Both clones first: a task whose commits or test files are missing fails there,
            # before any build starts.
            "task_dep": [repo_task(task.repo), repo_task(task.test_repo)]
            + ([parent] if parent else []),
            "uptodate": [(base_build_published, [ctx.layout, task])],
            "clean": [(remove_base_build, [ctx.layout, task])],
        }


def _unit_task_dicts(ctx: "StageContext") -> Iterator[TaskDict]:
    """A task per unit: the build of the mode's patch for the task."""
    compiler = compiler_identity()
    for bench, mode, task in ctx.nginx_units():
        iid = task.instance_id
        config = {
            "base": task.base_commit,
            "flags": list(task.configure_flags),
            "compiler": compiler,
        }
        name = unit_name(bench, mode, task)
        yield stamps.stage_task(
            basename=BUILD,
            name=name,
            doc=f"objs/nginx for the {mode.name} patch of {iid}",
            action=build_task,
            args=[ctx.layout, mode.name, task, task_name(BUILD, name)],
            config=config,
            files=[ctx.layout.model_patch(mode.name, iid)],
            task_dep=[repo_task(task.repo), base_task_name(task), task_name(PATCH, name)],
            targets=[ctx.layout.build_json(mode.name, iid), ctx.layout.build_log(mode.name, iid)],
            also_current=[(unit_build_kept, [ctx.layout, mode.name, iid])],
            clean=[(remove_task_build, [ctx.layout, mode.name, iid])],
        )


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    yield from _base_task_dicts(ctx)
    yield from _unit_task_dicts(ctx)
