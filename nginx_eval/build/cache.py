"""The content-addressed cache of builds, ``<cache>/builds/``: keys, published builds, failure
records, and their removal.

A build's key (BuildSpec.key) is the digest of (base commit, configure flags, patch bytes,
compiler identity); ``builds/<key>/`` holds ``tree/``, ``build.log`` and ``build.json`` (its schema
is in build/stage.py's docstring). Builds are made in ``builds/.tmp/`` and published by renaming
(publish): no reader ever sees half a build. A published tree is read-only and its build.json
records the binary's sha256 and stat (verify_build, binary_intact): a changed binary is noticed
before anything runs it or starts from it. A build that failed because of the environment is never
published: its record and log go to ``builds/.failed/<key>.json|.log`` (record_env_error), and this
run does not try it again (failed_here), the next one does.
"""

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import inputs, jsonio, runstate
from ..core.outcomes import BUILT, ENV_ERROR
from ..core.records import FORMAT_VERSION, BuildFields, BuildRecord, write_record
from ..core.trees import remove_tree, set_write_bits
from ..doitext import cleaning
from .toolchain import compiler_identity

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..run.benchmark import Task

EMPTY_PATCH_SHA = jsonio.digest(b"")


@dataclass(frozen=True)
class BuildSpec:
    """What a build is made of; `key` names it in the cache, so equal specs share one build
    (identical patches of any mode or run, and the empty patch, which is the base build)."""

    base_commit: str
    flags: tuple[str, ...]
    patch_sha: str = EMPTY_PATCH_SHA

    @classmethod
    def of(cls, base_commit: str, flags: Iterable[str], patch: bytes = b"") -> "BuildSpec":
        return cls(base_commit, tuple(flags), jsonio.digest(patch))

    @classmethod
    def base_of(cls, task: "Task") -> "BuildSpec":
        """The base build (empty patch) of a benchmark task."""
        return cls(task.base_commit, tuple(task.configure_flags))

    @property
    def is_base(self) -> bool:
        return self.patch_sha == EMPTY_PATCH_SHA

    @property
    def key(self) -> str:
        return inputs.digest(
            {
                "base": self.base_commit,
                "flags": list(self.flags),
                "patch": self.patch_sha,
                "compiler": compiler_identity(),
            }
        )[:32]


def binary_path(layout: "Layout", key: str) -> Path:
    return layout.build_dir(key) / "tree" / "objs" / "nginx"


# -- published builds: read-only, with the binary's digest ----------------------------------------


def _binary_stat(path: str | Path) -> list[int]:
    """What changes whenever the binary is written (ctime cannot be set back), for a quick check."""
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def verify_build(layout: "Layout", record: BuildRecord) -> str | None:
    """None when the published build's objs/nginx still has the digest recorded when it was
    published, else a one-line reason. (As root a read-only tree can still be written to.)"""
    path = binary_path(layout, record["key"])
    if not record.get("binary_sha256"):
        return f"build {record['key']} has no recorded binary digest"
    if not path.is_file():
        return f"{path} is missing"
    if jsonio.file_digest(path) != record["binary_sha256"]:
        return f"{path} changed after it was published (sha256 differs)"
    return None


def binary_intact(layout: "Layout", record: BuildRecord) -> bool:
    """verify_build's answer, cheaply when the binary's stat is still the one recorded."""
    try:
        if _binary_stat(binary_path(layout, record["key"])) == record.get("binary_stat"):
            return bool(record.get("binary_sha256"))
    except OSError:
        return False
    return verify_build(layout, record) is None


def published_build(layout: "Layout", key: str) -> BuildRecord | None:
    """The published record of build `key`, or None when there is none to trust: a built one
    whose binary changed or that predates binary digests, a failed base build of before
    env_error existed (a base that does not build is the environment's fault)."""
    record: BuildRecord | None = jsonio.read_json(layout.build_dir(key) / "build.json")
    if not record:
        return None
    if record["status"] == BUILT and not binary_intact(layout, record):
        return None
    if record["status"] != BUILT and record.get("patch_sha256") == EMPTY_PATCH_SHA:
        return None
    return record


def damage(layout: "Layout", key: str) -> str | None:
    """Why the published build `key` cannot be trusted although it was built, or None."""
    record = jsonio.read_json(layout.build_dir(key) / "build.json")
    if record and record["status"] == BUILT:
        return verify_build(layout, record)
    return None


def publish(layout: "Layout", tmp: Path, record: BuildRecord) -> None:
    """Make tmp, a finished build, the published build of record["key"]."""
    tree = tmp / "tree"
    if record["status"] == BUILT:
        record["binary_sha256"] = jsonio.file_digest(tree / "objs" / "nginx")
        # Read-only: builds that start from it copy it, proves run it; nobody writes to it.
        set_write_bits(tree, False)
        record["binary_stat"] = _binary_stat(tree / "objs" / "nginx")
    else:
        # Keep the log, drop the tree: a failed build is cached as its verdict.
        remove_tree(tree, ignore_errors=True)
    # in the record the caller returns too: a build made now is the one a later reader finds
    record["format_version"] = FORMAT_VERSION
    write_record(tmp / "build.json", record)
    final = layout.build_dir(record["key"])
    remove_tree(final, ignore_errors=True)
    os.replace(tmp, final)
    for stale in (layout.failed_build_json(record["key"]), layout.failed_build_log(record["key"])):
        stale.unlink(missing_ok=True)


def build_is_published(layout: "Layout", record: BuildRecord) -> bool:
    """A result's build is usable if its cache entry still exists (the cache may be cleaned) and,
    when built, still has the binary it was published with. An env_error never is: the next
    run tries again."""
    if record["status"] == ENV_ERROR:
        return False
    published = jsonio.read_json(layout.build_dir(record["key"]) / "build.json")
    if not published:
        return False
    if record["status"] != BUILT:
        return True
    if published.get("binary_sha256") == record.get("binary_sha256"):
        # The cache's own record knows the binary's stat now: after the entry was made again
        # (cleaned, then built anew with the same key) the result's copy has an older stat, and
        # every check would hash the whole binary.
        return binary_intact(layout, published)
    return verify_build(layout, record) is None


def result_build_ok(layout: "Layout", mode_name: str, iid: str) -> bool:
    record = jsonio.read_json(layout.build_json(mode_name, iid))
    return bool(record) and build_is_published(layout, record)


# -- env_error records: never published, tried again by the next process ---------------------------

# The env_error records of the builds that failed in this run are kept in the run's state
# (core/runstate.py): the next doit run tries them again, this one does not (every candidate of
# a base that does not build would).


def failed_here(layout: "Layout", key: str) -> BuildRecord | None:
    """The env_error record of build `key` if it failed in this run, else None."""
    return runstate.current().failed_builds.get((str(layout.cache), key))


def record_env_error(
    layout: "Layout", fields: BuildFields, reason: str, log_bytes: bytes, remember: bool = True
) -> BuildRecord:
    """An env_error record, not published: its record and log go to builds/.failed/ for the
    task's result, and (remember) this run does not try the build again. fields: the
    build's record, or what it holds before the build ran."""
    record: BuildRecord = {
        **fields,
        "status": "env_error",
        "reason": reason,
        "format_version": FORMAT_VERSION,
    }
    try:
        jsonio.write_bytes(layout.failed_build_log(record["key"]), log_bytes)
        write_record(layout.failed_build_json(record["key"]), {**record, "pid": os.getpid()})
    except OSError:
        pass  # a full disk: the reason still reaches the task's result
    if remember:
        runstate.current().failed_builds[str(layout.cache), record["key"]] = record
    print(
        f"nginx-eval: warning: build {record['key']} of {record['base_commit'][:12]}: "
        f"environment error: {reason}",
        file=sys.stderr,
    )
    return record


# -- removal (`doit clean`) ------------------------------------------------------------------------


def build_keys_of_other_runs(layout: "Layout") -> set[str | None]:
    """Keys of the builds that results of runs other than layout.run point to (per-task
    build.json, and validation records): `doit clean` of one run leaves those alone."""
    keys: set[str | None] = set()
    if not layout.results_root.is_dir():
        return keys
    for run_dir in layout.results_root.iterdir():
        if run_dir.name == layout.run or not run_dir.is_dir():
            continue
        for path in run_dir.glob("*/*/build.json"):
            keys.add((jsonio.read_json(path) or {}).get("key"))
        for path in run_dir.glob("validate/*/validation.json"):
            for side in ((jsonio.read_json(path) or {}).get("build") or {}).values():
                keys.add((side or {}).get("key"))
    return keys


def remove_build(layout: "Layout", key: str | None, dryrun: bool = False) -> None:
    """Remove the build `key` unless another run's results use it; counted for `doit clean`'s
    summary (cleaning.py). dryrun: only count it."""
    if key and key not in build_keys_of_other_runs(layout):
        cleaning.say(cleaning.record("build", layout.build_dir(key)), dryrun)
        if not dryrun:
            remove_tree(layout.build_dir(key), ignore_errors=True)


def remove_task_build(layout: "Layout", mode_name: str, iid: str, dryrun: bool = False) -> None:
    """`doit clean`: the cache build this result used, unless another run's results use it.
    The result files stay; a later run rebuilds what it needs."""
    remove_build(
        layout, (jsonio.read_json(layout.build_json(mode_name, iid)) or {}).get("key"), dryrun
    )


def remove_base_build(layout: "Layout", task: "Task", dryrun: bool = False) -> None:
    remove_build(layout, BuildSpec.base_of(task).key, dryrun)
