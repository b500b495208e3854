"""The steps of one build in a private directory: a clean build (extract, apply, configure, make)
or one from a copy of a published build (apply or sync, stamp, make, prove the timestamps), each
step under a time limit with its output in the build's log; and what a failed step says about the
environment.

build/stage.py decides which build to make and from what, and what a failure means for the verdict.
"""

import contextlib
import contextvars
import os
import re
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ..core import limits
from ..core.gitcmd import apply_argv, apply_patch, changed_files, extract_tree
from ..core.outcomes import BuildStatus
from ..core.procs import run_limited
from ..core.records import BuildRecord
from ..core.trees import set_write_bits
from ..patch.stage import touched_paths
from .mtimes import stamp_changed, unproven
from .toolchain import configure_argv, configure_env, in_toolchain

if TYPE_CHECKING:
    from ..core.layout import Layout

BUILD_TIMEOUT = 1800
# What _run returns for a step past BUILD_TIMEOUT (as timeout(1) does): the patch's verdict, unlike
# a negative return code, which says that a signal from outside killed the step.
TIMED_OUT = 124
# Less free space than this where a build failed: the disk, not the patch, failed it.
MIN_FREE_BYTES = 64 << 20
# gcc's own lines when the kernel killed the compiler (out of memory): at the start of a line,
# a location or the driver's name, then the message, up to the end of the line. A patch's #error
# or #include text comes after "error: " or is followed by more text, so it cannot forge them.
COMPILER_KILLED = re.compile(
    r"^[^\s:]+(?::\d+)*: (?:fatal error: Killed signal terminated program \S+"
    r"|internal compiler error: Killed(?: \(program \S+\))?)$",
    re.M,
)

# The token file of the build in progress in this thread (steps_token): its steps run through
# procs.run_limited, in a session of their own, so that an interrupted doit finds and stops them.
_token_file: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "build_token_file", default=None
)


# The CPU seconds of the build in progress in this thread, summed over its steps (steps_token):
# what the build costs the machine, whatever else ran beside it (scripts/bench.py's floor).
_cpu_seconds: contextvars.ContextVar[list[float | None] | None] = contextvars.ContextVar(
    "build_cpu_seconds", default=None
)

# The step that failed a build, and its exit code: ("make", 2).
Failure = tuple[str, int]


@contextlib.contextmanager
def steps_token(path: str | Path) -> Iterator[list[float | None]]:
    """Within it, this thread's build steps carry the token file `path`; it yields a list whose
    one number is the CPU seconds of those steps so far (None once a step's is unknown)."""
    seconds: list[float | None] = [0.0]
    token, cpu = _token_file.set(str(path)), _cpu_seconds.set(seconds)
    try:
        yield seconds
    finally:
        _cpu_seconds.reset(cpu)
        _token_file.reset(token)


def _count_cpu(seconds: float | None) -> None:
    total = _cpu_seconds.get()
    if total is not None and total[0] is not None:
        total[0] = None if seconds is None else total[0] + seconds


def _run(
    argv: Sequence[str],
    cwd: str | Path,
    env: Mapping[str, str],
    log: BinaryIO,
    timeout: float = BUILD_TIMEOUT,
    run: Callable[[float], tuple[int, bool]] | None = None,
    shown: Sequence[str] | None = None,
) -> int:
    """Run the step `argv` (through `run(timeout)` -> (exit code, timed out) when given, else
    procs.run_limited) with its output in the log; its exit code, or TIMED_OUT. shown: the
    command the log names (the step itself, not the bwrap around it)."""
    log.write(f"$ {' '.join(shown or argv)}\n".encode())
    log.flush()
    try:
        if run is None:
            outcome = run_limited(
                argv,
                cwd=cwd,
                env=env,
                timeout=timeout,
                stdout=log,
                stderr=subprocess.STDOUT,
                token_file=_token_file.get(),
            )
            _count_cpu(outcome.cpu_seconds)
            exit_code, timed_out = outcome.exit_code, outcome.timed_out
        else:
            exit_code, timed_out = run(timeout)
        if timed_out:
            log.write(f"\n[nginx-eval] timed out after {timeout} s\n".encode())
            return TIMED_OUT
        assert exit_code is not None  # run_limited's is None only past the limit
        return exit_code
    except OSError as e:
        # A patch can delete or unset the executable bit of ./auto/configure: a compile failure.
        log.write(f"\n[nginx-eval] cannot run {argv[0]}: {e.strerror}\n".encode())
        return 127


def _make(tree: Path, env: Mapping[str, str], log: BinaryIO) -> int:
    # Compiling is what builds= limits (limits.py); applying a patch or copying a tree is not.
    make = ["make", f"-j{os.cpu_count() or 2}"]
    argv, step_env = in_toolchain(make, tree, env)
    with limits.slot("build"):
        return _run(argv, tree, step_env, log, shown=make)


def _apply(tree: Path, patch_file: Path, env: Mapping[str, str], log: BinaryIO) -> int:
    # git runs through the git module (GitPython), not procs: a patch applies in moments.
    return _run(
        apply_argv(patch_file),
        tree,
        env,
        log,
        run=lambda timeout: apply_patch(tree, patch_file, env, log, timeout),
    )


def _configure(
    layout: "Layout", tree: Path, flags: Iterable[str], env: Mapping[str, str], log: BinaryIO
) -> int:
    configure = configure_argv(flags)
    argv, step_env = in_toolchain(configure, tree, configure_env(layout, env))
    with limits.slot("build"):
        return _run(argv, tree, step_env, log, shown=configure)


def _sync_tree(bare: Path, tree: Path, old_commit: str, new_commit: str) -> list[tuple[str, str]]:
    """Turn a build tree of old_commit into one of new_commit: [(status, path)] of the files
    that differ (the caller stamps the written ones, see mtimes.stamp_changed)."""
    changed = changed_files(bare, old_commit, new_commit)
    for status, path in changed:
        if status == "D":
            (tree / path).unlink(missing_ok=True)
    wanted = [path for status, path in changed if status != "D"]
    for i in range(0, len(wanted), 500):
        # touch: changed files must look newer than the objects built from the old commit.
        extract_tree(bare, new_commit, tree, wanted[i : i + 500], touch=True)
    return changed


def _copy_published_tree(layout: "Layout", origin: BuildRecord, tree: Path) -> None:
    subprocess.run(
        ["cp", "-a", "--reflink=auto", str(layout.build_dir(origin["key"]) / "tree"), str(tree)],
        check=True,
    )
    set_write_bits(tree, True)  # the published tree is read-only


def _change_copied_tree(
    bare: Path,
    tree: Path,
    origin: BuildRecord,
    kind: str,
    base_commit: str,
    patch_file: Path | None,
    env: Mapping[str, str],
    log: BinaryIO,
) -> tuple[list[str], None] | tuple[None, tuple[BuildStatus, Failure]]:
    """Bring the copy of `origin` to base_commit (kind "sibling") or apply the patch
    ("incremental"): (the written paths, None), or (None, (status, failure)) when git apply
    failed."""
    if kind == "sibling":
        synced = _sync_tree(bare, tree, origin["base_commit"], base_commit)
        log.write(
            f"[nginx-eval] {len(synced)} files differ; configure skipped (same auto/)\n".encode()
        )
        return [path for status, path in synced if status != "D"], None
    assert patch_file is not None  # an incremental build applies the patch
    code = _apply(tree, patch_file, env, log)
    if code != 0:
        return None, ("patch_failed", ("git apply", code))
    return touched_paths(patch_file.read_bytes()), None


def build_from(
    layout: "Layout",
    bare: Path,
    tree: Path,
    origin: BuildRecord,
    kind: str,
    base_commit: str,
    patch_file: Path | None,
    env: Mapping[str, str],
    log: BinaryIO,
) -> tuple[BuildStatus, Failure | None] | None:
    """A build that starts from a copy of the published build `origin` (kind "incremental":
    apply the patch; "sibling": sync to base_commit): (status, failure), or None when make's
    work cannot be trusted and a clean build must decide."""
    log.write(
        f"[nginx-eval] {kind} build from build {origin['key']} "
        f"({origin['base_commit'][:12]})\n".encode()
    )
    _copy_published_tree(layout, origin, tree)
    changed, failed = _change_copied_tree(
        bare, tree, origin, kind, base_commit, patch_file, env, log
    )
    if failed:
        return failed
    assert changed is not None
    stamp_changed(tree, changed)
    code = _make(tree, env, log)
    if code != 0 and kind == "incremental":
        return "compile_failed", ("make", code)
    # Never let the shortcut decide a verdict: fall back to a clean build.
    if code != 0:
        log.write(f"[nginx-eval] {kind} build failed; building clean\n".encode())
        return None
    why = unproven(tree, changed)
    if why:
        log.write(f"[nginx-eval] make did not rebuild everything: {why}; building clean\n".encode())
        return None
    return "built", None


def build_clean(
    layout: "Layout",
    bare: Path,
    tree: Path,
    base_commit: str,
    flags: Iterable[str],
    patch_file: Path | None,
    env: Mapping[str, str],
    log: BinaryIO,
) -> tuple[BuildStatus, Failure | None]:
    """configure and make from the commit's files: (status, failure)."""
    extract_tree(bare, base_commit, tree)
    if patch_file:
        code = _apply(tree, patch_file, env, log)
        if code != 0:
            return "patch_failed", ("git apply", code)
    code = _configure(layout, tree, flags, env, log)
    if code != 0:
        return "compile_failed", ("configure", code)
    code = _make(tree, env, log)
    if code != 0:
        return "compile_failed", ("make", code)
    return "built", None


# -- what a failed step says about the environment ------------------------------------------------


def _free_bytes(path: str | Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


# A compiler's or configure's diagnostic ("src/x.c:82:5: error: ...", "./auto/configure:
# error: ..."); then make's "Error 2". configure's summary line "nginx error log file: ..." is
# neither.
ERROR_LINES = (re.compile(r"\berror:", re.I), re.compile(r"\bError \d+"))


def first_error(log_text: str) -> str:
    """The first line of a build log that names an error, for a one-line reason."""
    lines = [line.strip() for line in log_text.splitlines()]
    for pattern in ERROR_LINES:
        found = next((line for line in lines if pattern.search(line)), None)
        if found:
            return found
    return ""


def environment_fault(failure: Failure, log_text: str, directory: str | Path) -> str | None:
    """Why a failed build step (failure: (step, return code)) was the environment's doing, or
    None. A step killed by a signal, the compiler killed (gcc's own lines, see COMPILER_KILLED),
    a full disk (free space asked of the file system, never read from a log a patch writes)."""
    step, code = failure
    if code < 0:
        return f"{step} was killed by signal {-code}"
    killed = COMPILER_KILLED.search(log_text)
    if killed:
        return f"the compiler was killed (out of memory?): {killed.group(0)}"
    free = _free_bytes(directory)
    if free < MIN_FREE_BYTES:
        return f"only {free >> 20} MiB free in {directory}"
    return None
