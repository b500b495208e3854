"""Stage 5, build: ``objs/nginx`` for base + patch, addressed by content.

A build is keyed by (base commit, configure flags, patch bytes, compiler identity) and lives in
``<cache>/builds/<key>/``::

    tree/           the source with the patch applied, and tree/objs/nginx
    build.log       configure, make (and patch) output
    build.json      {"key", "status": "built"|"patch_failed"|"compile_failed"|"env_error",
                     "kind": "clean"|"incremental"|"sibling"|null, "seconds", "base_commit",
                     "configure_flags", "patch_sha256", "compiler", "build_system",
                     "binary_sha256", "binary_stat" (built only: sha256 of tree/objs/nginx,
                     and its [size, mtime_ns, ctime_ns] for a quick check that it is unchanged),
                     "reason" (env_error only: one line)}

Identical patches from any mode or run share one build, and the empty patch is the base build. The
first patch on a (base, flags) pair pays for one clean base build; every later patch starts from a
copy of it (mtimes kept) and make recompiles only what the patch touches and what depends on it. A
patch that touches the build system (auto/, configure) gets a clean build. A base build starts
from the published base build of the nearest other commit with the same auto/ and configure (a
"sibling"): configure would write the same files, so only the changed sources are recompiled.
Builds happen in a private temporary directory and are published by renaming it, under a per-key
lock: no reader ever sees half a build, and a killed build leaves only a temporary directory that
is discarded. Failed builds are published too, with their log, so a broken patch is not rebuilt.

Timestamps are not trusted: a copied tree (``cp -a`` of a published one, mtimes kept) may hold
objects dated after the sources a patch changes (a clock stepped back, a cache from another host).
Before make, the files a patch or a sibling sync changed get an mtime later than every other file of
the tree; after make, each changed source must be older than the objects that read it and than
objs/nginx, or the build falls back to a clean one (_unproven). A published tree is read-only and
its build.json records the binary's sha256 (verify_build): a tampered base is rebuilt clean before
anything starts from it.

Only the patch's failures are verdicts. A build that fails where the base (empty patch) builds is
``compile_failed`` (or ``patch_failed``) and published. A failure of the environment (a tool not on
PATH, a build step or the compiler killed by a signal, a full disk), a failing base build, and any
build of a base that does not build are ``env_error``: never published, the record and log go to
``<cache>/builds/.failed/<key>.json|.log`` and the next doit run tries again (within one process a
failed build is not tried again).
A clean build's configure finds its test programs in ``<cache>/feature-tests/`` when an earlier
configure built the same ones (feature_test_cc.sh); make compiles through ccache.

Per task, ``results/<run>/<mode>/<id>/build.json`` is the build record plus {"inputs", "binary",
"reused", "wait_seconds"} (status "env_error" with its "reason" included) and ``build.log`` is a
copy of the log.
"""

import contextlib
import contextvars
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import time
from functools import lru_cache

from doit.tools import config_changed

from . import cleaning, jsonio
from .gitcmd import extract_tree, isolated_env
from .layout import PACKAGE_DIR
from .locks import locked
from .patch import touched_paths
from .procs import run_limited
from .repositories import repo_task

BUILD_TIMEOUT = 1800
# What _run returns for a step past BUILD_TIMEOUT (as timeout(1) does): the patch's verdict, unlike
# a negative return code, which says that a signal from outside killed the step.
TIMED_OUT = 124
# Programs a build runs; a missing one is the environment's fault, found before building.
REQUIRED_TOOLS = ("make", "cc", "tar", "git", "cp")
# Less free space than this where a build failed: the disk, not the patch, failed it.
MIN_FREE_BYTES = 64 << 20
# gcc's own lines when the kernel killed the compiler (out of memory): at the start of a line,
# a location or the driver's name, then the message, up to the end of the line. A patch's #error
# or #include text comes after "error: " or is followed by more text, so it cannot forge them.
COMPILER_KILLED = re.compile(
    r"^[^\s:]+(?::\d+)*: (?:fatal error: Killed signal terminated program \S+"
    r"|internal compiler error: Killed(?: \(program \S+\))?)$", re.M)
CCACHE_WRAPPERS = "/usr/lib/ccache"
BUILD_SYSTEM_PATHS = ("auto/", "configure", "Makefile", "objs/")
# Added to every build's --with-cc-opt:
# -g0: nginx compiles with -g. Debug information never changes the code GCC generates (GCC checks
#      this with -fcompare-debug), and nobody reads it here; leaving it out saves a fifth of every
#      compile.
# -MD: the compiler writes the headers it read to a .d file, which is what ccache's depend mode
#      needs. Without it ccache runs the preprocessor on every miss: a clean make with an empty
#      cache took 11.6 s instead of 7.8 s without ccache; with -MD it takes 8.1 s.
EXTRA_CC_OPT = "-g0 -MD"
# The compiler configure runs: it keeps the executables of configure's test programs (see there).
FEATURE_TEST_CC = PACKAGE_DIR / "feature_test_cc.sh"
# Changes whenever a Debian package is installed, removed or upgraded.
PACKAGE_DATABASE = "/var/lib/dpkg/status"


@lru_cache(maxsize=1)
def compiler_identity():
    """What makes two builds of the same source different: the compiler and its version."""
    cc = shutil.which("cc") or "cc"
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    except OSError:
        version = ""
    return {"cc": os.path.realpath(cc), "version": version.splitlines()[0] if version else "",
            "cc_opt": EXTRA_CC_OPT}


def build_key(base_commit, flags, patch_sha, compiler):
    return jsonio.digest({"base": base_commit, "flags": list(flags), "patch": patch_sha,
                          "compiler": compiler})[:32]


EMPTY_PATCH_SHA = jsonio.digest(b"")


def touches_build_system(files):
    return any(f == p or f.startswith(p) for f in files for p in BUILD_SYSTEM_PATHS)


def build_env(layout, tree):
    env = dict(os.environ)
    if os.path.isdir(CCACHE_WRAPPERS) and shutil.which("ccache"):
        env["PATH"] = CCACHE_WRAPPERS + os.pathsep + env.get("PATH", "")
        env["CCACHE_DIR"] = str(layout.ccache_dir)
        # Every build has its own directory: paths relative to it let builds share cache hits.
        env["CCACHE_BASEDIR"] = str(tree)
        env["CCACHE_NOHASHDIR"] = "1"
        # Depend mode takes the headers from the compiler's own -MD output (see EXTRA_CC_OPT)
        # instead of running the preprocessor a second time on every miss.
        env["CCACHE_DEPEND"] = "1"
    # git apply below a tree inside another repository must not see that repository.
    env.update(isolated_env({"GIT_CEILING_DIRECTORIES": str(os.path.dirname(tree))}))
    return env


# The token file of the build in progress in this thread (ensure_build): its steps run through
# procs.run_limited, in a session of their own, so that an interrupted doit finds and stops them.
_token_file = contextvars.ContextVar("build_token_file", default=None)


def _run(argv, cwd, env, log, timeout=BUILD_TIMEOUT):
    log.write(f"$ {' '.join(argv)}\n".encode())
    log.flush()
    try:
        outcome = run_limited(argv, cwd=cwd, env=env, timeout=timeout, stdout=log,
                              stderr=subprocess.STDOUT, token_file=_token_file.get())
        if outcome.timed_out:
            log.write(f"\n[nginx-eval] timed out after {timeout} s\n".encode())
            return TIMED_OUT
        return outcome.exit_code
    except OSError as e:
        # A patch can delete or unset the executable bit of ./auto/configure: a compile failure.
        log.write(f"\n[nginx-eval] cannot run {argv[0]}: {e.strerror}\n".encode())
        return 127


def _make(tree, env, log):
    return _run(["make", f"-j{os.cpu_count() or 2}"], tree, env, log)


def _apply(tree, patch_file, env, log):
    return _run(["git", "apply", "--whitespace=nowarn", "-p1", str(patch_file)], tree, env, log)


def missing_tool(env):
    """The first of REQUIRED_TOOLS not on the build environment's PATH, or None. ccache's
    directory does not count: its `cc` only works with a real compiler on PATH."""
    path = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                           if p != CCACHE_WRAPPERS)
    return next((tool for tool in REQUIRED_TOOLS if not shutil.which(tool, path=path)), None)


def configure_argv(flags):
    """./auto/configure with the task's flags, EXTRA_CC_OPT added to its --with-cc-opt (the
    last --with-cc-opt wins, so it is merged into an existing one)."""
    flags = list(flags)
    for i in reversed(range(len(flags))):
        if flags[i].startswith("--with-cc-opt="):
            flags[i] += " " + EXTRA_CC_OPT
            break
    else:
        flags.append("--with-cc-opt=" + EXTRA_CC_OPT)
    return ["./auto/configure", *flags]


def feature_test_identity():
    """What configure's cached test programs depend on besides their command line and source:
    the compiler, and the system's libraries and headers (any package change starts afresh)."""
    try:
        packages = os.stat(PACKAGE_DATABASE).st_mtime_ns
    except OSError:
        packages = None
    return jsonio.digest({"compiler": compiler_identity(), "packages": packages})


def install_feature_test_cc(layout):
    """The directory whose `cc` is feature_test_cc.sh, written into the cache when missing or
    outdated (an executable bit cannot be relied on in an installed package)."""
    bin_dir = layout.feature_tests / "bin"
    script = FEATURE_TEST_CC.read_bytes()
    target = bin_dir / "cc"
    if not target.is_file() or target.read_bytes() != script:
        bin_dir.mkdir(parents=True, exist_ok=True)
        tmp = bin_dir / f".cc.{os.getpid()}.{threading.get_ident()}"
        tmp.write_bytes(script)
        tmp.chmod(0o755)
        os.replace(tmp, target)
    return bin_dir


def configure_env(layout, env):
    """configure's environment: feature_test_cc.sh as `cc`, and no ccache, which cannot cache a
    link and only adds a process to each test (0.23 s per configure). The Makefile configure
    writes says `cc`, which make, with build_env's PATH, finds in ccache's directory."""
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != CCACHE_WRAPPERS]
    real_cc = shutil.which("cc", path=os.pathsep.join(path))
    if not real_cc:
        return dict(env, PATH=os.pathsep.join(path))
    return dict(env, PATH=os.pathsep.join([str(install_feature_test_cc(layout)), *path]),
                NGINX_EVAL_REAL_CC=real_cc, NGINX_EVAL_FEATURE_TESTS=str(layout.feature_tests),
                NGINX_EVAL_CC_ID=feature_test_identity())


def _configure(layout, tree, flags, env, log):
    return _run(configure_argv(flags), tree, configure_env(layout, env), log)


def build_system_id(bare, commit):
    """The git tree id of auto/ (nginx's repository has no top-level configure: it runs
    auto/configure): equal ids mean configure writes the same files."""
    out = subprocess.run(["git", f"--git-dir={bare}", "rev-parse", "--verify", "--quiet",
                          f"{commit}:auto"], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else None


def build_system_ids(bare, commits):
    """{commit: tree id of its auto/} in one git call; empty while the clone does not exist."""
    if not os.path.isdir(bare):
        return {}
    out = subprocess.run(["git", f"--git-dir={bare}", "cat-file", "--batch-check"],
                         input="".join(f"{c}:auto\n" for c in commits),
                         capture_output=True, text=True)
    ids = {}
    for commit, line in zip(commits, out.stdout.splitlines()):
        fields = line.split()
        if len(fields) == 3 and fields[1] == "tree":
            ids[commit] = fields[0]
    return ids


def build_group_key(task, system_ids):
    return (task.repo, system_ids.get(task.base_commit, task.base_commit),
            tuple(task.configure_flags))


def tasks_build_system_ids(layout, tasks):
    ids = {}
    for repo in {t.repo for t in tasks}:
        ids.update(build_system_ids(layout.bare_repo(repo), [t.base_commit for t in tasks
                                                              if t.repo == repo]))
    return ids


def changed_paths(bare, pairs):
    """[the paths that differ between a and b for (a, b) in pairs], from one git call; None
    while the clone does not exist."""
    if not os.path.isdir(bare):
        return None
    if not pairs:
        return []
    out = subprocess.run(["git", f"--git-dir={bare}", "diff-tree", "-r", "--name-only", "--always",
                          "--stdin"], input="".join(f"{a} {b}\n" for a, b in pairs),
                         capture_output=True, text=True).stdout.splitlines()
    # For each pair, in order, diff-tree prints the first commit (--always: even when nothing
    # differs), then the changed paths.
    result, i = [], 0
    for line in out:
        if i < len(pairs) and line == pairs[i][0]:
            result.append([])
            i += 1
        elif result:
            result[-1].append(line)
    return result + [[] for _ in range(len(pairs) - len(result))]


# A changed header makes make recompile every object of its part of nginx (core, event, http...):
# its Makefile lets each object depend on all of that part's headers.
HEADER_REBUILD_COST = 50


def rebuild_cost(paths):
    """About how many objects make recompiles when `paths` change."""
    return sum(HEADER_REBUILD_COST if p.endswith(".h") else 1 for p in paths)


def fixes_touching_headers(layout, tasks):
    """Instance ids of the tasks whose fix (base..fix) changes a header, from one git call per
    repository; empty while the clone does not exist. A changed header makes make recompile most
    of nginx (HEADER_REBUILD_COST), and patches for such a bug tend to touch the same headers:
    these builds are the long ones."""
    heavy = set()
    for repo in {t.repo for t in tasks}:
        mine = [t for t in tasks if t.repo == repo]
        changed = changed_paths(layout.bare_repo(repo), [(t.base_commit, t.fix_commit)
                                                         for t in mine]) or []
        heavy.update(t.instance_id for t, paths in zip(mine, changed)
                     if any(p.endswith(".h") for p in paths))
    return heavy


def interleave_by_build_group(layout, tasks, system_ids=None, heavy=None):
    """The tasks in the order their builds should start: one task of each build group (same
    auto/ tree and flags) in turn. Base builds of one group take turns (see ensure_build), so
    tasks in benchmark order, where neighbours often share a group, would keep one of doit's
    workers waiting while the other builds; interleaved, the first round runs the groups' clean
    builds side by side and later rounds start from siblings.

    Longest work first, so that no long build is left for the end, when the other worker has
    nothing left to do: larger groups first (their first build unlocks the most sibling builds),
    and among groups of one size, and within a group, those whose fixes touch headers
    (fixes_touching_headers)."""
    groups = {}
    ids = tasks_build_system_ids(layout, tasks) if system_ids is None else system_ids
    heavy = fixes_touching_headers(layout, tasks) if heavy is None else heavy
    for t in tasks:
        groups.setdefault(build_group_key(t, ids), []).append(t)
    weight = lambda ts: (len(ts), sum(t.instance_id in heavy for t in ts))
    queues = [sorted(q, key=lambda t: t.instance_id not in heavy)
              for q in sorted(groups.values(), key=weight, reverse=True)]
    ordered = []
    while queues:
        ordered += [q.pop(0) for q in queues]
        queues = [q for q in queues if q]
    return ordered


def _changed_files(bare, a, b):
    out = subprocess.run(["git", f"--git-dir={bare}", "diff", "--no-renames", "--name-status",
                          "-z", a, b], capture_output=True, check=True).stdout.split(b"\0")
    pairs = [out[i:i + 2] for i in range(0, len(out) - 1, 2)]
    return [(status.decode(), os.fsdecode(path)) for status, path in pairs]


def find_sibling(layout, bare, base_commit, flags, compiler, system_id):
    """A published base build of another commit with the same build system, flags and compiler,
    closest to base_commit (rebuild_cost): the starting point of a base build that skips
    configure."""
    best = None
    for record_path in layout.builds.glob("*/build.json"):
        rec = jsonio.read_json(record_path)
        if (not rec or rec.get("status") != "built" or rec.get("patch_sha256") != EMPTY_PATCH_SHA
                or rec.get("configure_flags") != list(flags) or rec.get("compiler") != compiler
                or rec.get("build_system") != system_id or rec["base_commit"] == base_commit
                or not binary_path(layout, rec["key"]).is_file()):
            continue
        cost = rebuild_cost(p for _, p in _changed_files(bare, rec["base_commit"], base_commit))
        if best is None or cost < best[0]:
            best = (cost, rec)
    return best[1] if best else None


def _sync_tree(bare, tree, old_commit, new_commit):
    """Turn a build tree of old_commit into one of new_commit: [(status, path)] of the files
    that differ (the caller stamps the written ones, see _stamp_changed)."""
    changed = _changed_files(bare, old_commit, new_commit)
    for status, path in changed:
        if status == "D":
            (tree / path).unlink(missing_ok=True)
    wanted = [path for status, path in changed if status != "D"]
    for i in range(0, len(wanted), 500):
        # touch: changed files must look newer than the objects built from the old commit.
        extract_tree(bare, new_commit, tree, wanted[i:i + 500], touch=True)
    return changed


# -- timestamps: make must see every changed file, and prove that it did --------------------------

def _tree_files(tree):
    for dirpath, _, filenames in os.walk(tree):
        for name in filenames:
            yield os.path.join(dirpath, name)


def _stamp_changed(tree, paths):
    """Give the changed files `paths` (relative to tree) an mtime later than every other file of
    the tree, whatever the copied mtimes say: the newest other mtime + 1 s, and at least now.
    Files dated after now (a clock stepped back, a cache from another host) are first brought
    back to now; otherwise the stamp would lie in the future and what make writes would look
    older than its sources. Then wait until the clock has passed the stamp, for the same reason."""
    tree = os.path.realpath(tree)
    changed = {os.path.join(tree, p) for p in paths}
    now = time.time_ns()
    newest = 0
    for path in _tree_files(tree):
        if path in changed:
            continue
        mtime = os.lstat(path).st_mtime_ns
        if mtime > now:
            os.utime(path, ns=(now, now), follow_symlinks=False)
            mtime = now
        newest = max(newest, mtime)
    stamp = max(newest + 1_000_000_000, now)
    for path in changed:
        # Regular files inside the tree only: a patch may add symlinks, to anywhere.
        if (os.path.realpath(path).startswith(tree + os.sep) and os.path.lexists(path)
                and stat.S_ISREG(os.lstat(path).st_mode)):
            os.utime(path, ns=(stamp, stamp), follow_symlinks=False)
    # File times come from a clock that may lag time.time_ns() by a tick: a margin of 20 ms.
    time.sleep(max(0, stamp + 20_000_000 - time.time_ns()) / 1e9)


def _mtime(path):
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def _dependency_readers(tree):
    """{source: [objects whose compile read it]} from the compiler's .d files (EXTRA_CC_OPT's
    -MD), paths relative to tree; None when the tree has no .d file (its Makefile does not pass
    the option on)."""
    tree = str(tree)
    relative = lambda p: os.path.relpath(os.path.normpath(os.path.join(tree, p)), tree)
    readers, found = {}, False
    for path in _tree_files(os.path.join(tree, "objs")):
        if not path.endswith(".d"):
            continue
        found = True
        with open(path, errors="replace") as f:
            # "objs/src/core/nginx.o: src/core/nginx.c src/core/ngx_config.h \<newline> ..."
            rule = f.read().replace("\\\n", " ").split("\n", 1)[0]
        target, _, deps = rule.partition(": ")
        for dep in deps.split():
            readers.setdefault(relative(dep), []).append(relative(target))
    return readers if found else None


def _unproven(tree, paths):
    """Why the make that just ran may not have rebuilt what the changed files `paths` go into,
    or None. Each changed .c or .h file must be older than objs/nginx and than each object
    that reads it: its own (objs/<path>.o) and those whose .d file names it. Without .d files a
    header's readers are unknown and objs/nginx alone is checked. A source that no compile of
    this configuration reads (no object, no .d names it: src/os/win32/, a module left out) has
    nothing to prove."""
    sources = [p for p in paths if p.endswith((".c", ".h")) and os.path.isfile(tree / p)]
    readers = _dependency_readers(tree) if sources else None
    for src in sources:
        objects = list((readers or {}).get(src, []))
        own = f"objs/{src[:-2]}.o"
        if src.endswith(".c") and os.path.exists(tree / own):
            objects.append(own)
        if not objects and not (readers is None and src.endswith(".h")):
            continue
        changed_at = _mtime(tree / src)
        for target in objects + ["objs/nginx"]:
            if _mtime(tree / target) <= changed_at:
                return f"{target} is not newer than the changed {src}"
    return None


# -- failures: the patch's verdict, or the environment's fault ------------------------------------

# {(cache, key): env_error record} of the builds that failed in this process: the next doit run
# tries them again, this one does not (every candidate of a base that does not build would).
_failed_here = {}


def _free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _first_error(log_text):
    """The first line of a build log that names an error, for a one-line reason."""
    return next((line.strip() for line in log_text.splitlines() if "error" in line.lower()), "")


def _environment_fault(failure, log_text, directory):
    """Why a failed build step (failure: (step, return code)) was the environment's doing, or
    None. A step killed by a signal, the compiler killed (gcc's own lines, see COMPILER_KILLED),
    a full disk (measured, never read from a log a patch writes)."""
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


def _failure_reason(layout, bare, base_commit, flags, patch, failure, directory):
    """Why a failed build is an env_error, or None when it is the patch's verdict: the
    environment failed it, or the base (empty patch) does not build here."""
    with open(directory / "build.log", "rb") as f:
        log_text = f.read().decode("utf-8", "replace")
    why = _environment_fault(failure, log_text, directory)
    if why:
        return why
    if not patch:
        # The tasks are validated to build: a base that does not is this machine's problem.
        step, code = failure
        return (f"the base commit does not build ({step} exited with {code}: "
                f"{_first_error(log_text)})")
    base = ensure_build(layout, bare, base_commit, flags, b"")
    if base["status"] != "built":
        return f"the base commit does not build here: {base.get('reason')}"
    return None


def _env_error(layout, record, reason, log_bytes, remember=True):
    """An env_error record, not published: its record and log go to builds/.failed/ for the
    task's result, and (remember) this process does not try the build again."""
    record = dict(record, status="env_error", reason=reason)
    try:
        jsonio.write_bytes(layout.failed_build_log(record["key"]), log_bytes)
        jsonio.write_json(layout.failed_build_json(record["key"]), dict(record, pid=os.getpid()))
    except OSError:
        pass            # a full disk: the reason still reaches the task's result
    if remember:
        _failed_here[str(layout.cache), record["key"]] = record
    print(f"nginx-eval: warning: build {record['key']} of {record['base_commit'][:12]}: "
          f"environment error: {reason}", file=sys.stderr)
    return record


# -- published builds: read-only, with the binary's digest ----------------------------------------

def set_write_bits(path, writable, dirs_only=False):
    """Add the owner's write bit (writable) or remove everyone's under path, symlinks left alone."""
    for dirpath, _, filenames in os.walk(path):
        names = [dirpath] + ([] if dirs_only else [os.path.join(dirpath, f) for f in filenames])
        for name in names:
            mode = os.lstat(name).st_mode
            if stat.S_ISLNK(mode):
                continue
            mode = stat.S_IMODE(mode)
            os.chmod(name, mode | stat.S_IWUSR if writable
                     else mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def remove_tree(path):
    """shutil.rmtree for build directories, whose published trees are read-only: removing an
    entry needs the write bit of its directory back."""
    if os.path.isdir(path) and not os.path.islink(path):
        with contextlib.suppress(OSError):
            set_write_bits(path, True, dirs_only=True)
    shutil.rmtree(path, ignore_errors=True)


def _binary_stat(path):
    """What changes whenever the binary is written (ctime cannot be set back), for a quick check."""
    st = os.stat(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def verify_build(layout, record):
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


def binary_intact(layout, record):
    """verify_build's answer, cheaply when the binary's stat is still the one recorded."""
    try:
        if _binary_stat(binary_path(layout, record["key"])) == record.get("binary_stat"):
            return bool(record.get("binary_sha256"))
    except OSError:
        return False
    return verify_build(layout, record) is None


def published_build(layout, key):
    """The published record of build `key`, or None when there is none to trust: a built one
    whose binary changed or that predates binary digests, a failed base build of before
    env_error existed (a base that does not build is the environment's fault)."""
    record = jsonio.read_json(layout.build_dir(key) / "build.json")
    if not record:
        return None
    if record["status"] == "built" and not binary_intact(layout, record):
        return None
    if record["status"] != "built" and record.get("patch_sha256") == EMPTY_PATCH_SHA:
        return None
    return record


def _damage(layout, key):
    """Why the published build `key` cannot be trusted although it was built, or None."""
    record = jsonio.read_json(layout.build_dir(key) / "build.json")
    if record and record["status"] == "built":
        return verify_build(layout, record)
    return None


def _publish(layout, tmp, record):
    """Make tmp, a finished build, the published build of record["key"]."""
    tree = tmp / "tree"
    if record["status"] == "built":
        record["binary_sha256"] = jsonio.file_digest(tree / "objs" / "nginx")
        # Read-only: builds that start from it copy it, proves run it; nobody writes to it.
        set_write_bits(tree, False)
        record["binary_stat"] = _binary_stat(tree / "objs" / "nginx")
    else:
        # Keep the log, drop the tree: a failed build is cached as its verdict.
        remove_tree(tree)
    jsonio.write_json(tmp / "build.json", record)
    final = layout.build_dir(record["key"])
    remove_tree(final)
    os.replace(tmp, final)
    for stale in (layout.failed_build_json(record["key"]), layout.failed_build_log(record["key"])):
        stale.unlink(missing_ok=True)


def _checked_origin(layout, bare, origin, log):
    """The published base build `origin` to start from, after checking its binary: a tampered
    one is removed and built again clean (None when that fails)."""
    why = verify_build(layout, origin)
    if why is None:
        return origin
    log.write(f"[nginx-eval] build {origin['key']} is not intact ({why}); rebuilding it clean\n"
              .encode())
    with locked(layout.lock(f"build-{origin['key']}")):
        current = jsonio.read_json(layout.build_dir(origin["key"]) / "build.json")
        if current and verify_build(layout, current):
            remove_tree(layout.build_dir(origin["key"]))
    rebuilt = ensure_build(layout, bare, origin["base_commit"], origin["configure_flags"], b"",
                           clean=True)
    return rebuilt if rebuilt["status"] == "built" else None


# -- building ----------------------------------------------------------------------------------

def _build_from(layout, bare, tree, origin, kind, base_commit, patch_file, env, log):
    """A build that starts from a copy of the published build `origin` (kind "incremental":
    apply the patch; "sibling": sync to base_commit): (status, failure), or None when make's
    work cannot be trusted and a clean build must decide."""
    log.write(f"[nginx-eval] {kind} build from build {origin['key']} "
              f"({origin['base_commit'][:12]})\n".encode())
    subprocess.run(["cp", "-a", "--reflink=auto", str(layout.build_dir(origin["key"]) / "tree"),
                    str(tree)], check=True)
    set_write_bits(tree, True)          # the published tree is read-only
    if kind == "sibling":
        synced = _sync_tree(bare, tree, origin["base_commit"], base_commit)
        log.write(f"[nginx-eval] {len(synced)} files differ; configure skipped (same auto/)\n"
                  .encode())
        changed = [path for status, path in synced if status != "D"]
    else:
        code = _apply(tree, patch_file, env, log)
        if code != 0:
            return "patch_failed", ("git apply", code)
        changed = touched_paths(patch_file.read_bytes())
    _stamp_changed(tree, changed)
    code = _make(tree, env, log)
    if code != 0 and kind == "incremental":
        return "compile_failed", ("make", code)
    # Never let the shortcut decide a verdict: fall back to a clean build.
    if code != 0:
        log.write(f"[nginx-eval] {kind} build failed; building clean\n".encode())
        return None
    why = _unproven(tree, changed)
    if why:
        log.write(f"[nginx-eval] make did not rebuild everything: {why}; building clean\n".encode())
        return None
    return "built", None


def _build_clean(layout, bare, tree, base_commit, flags, patch_file, env, log):
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


def _build_tree(layout, bare, tmp, base_commit, flags, patch_file, origin, kind, env, log):
    """Build in tmp/tree, from `origin` if it is trusted, else clean: (status, kind, failure),
    failure the (step, return code) of the step that failed."""
    tree = tmp / "tree"
    if origin:
        origin = _checked_origin(layout, bare, origin, log)
    if origin:
        outcome = _build_from(layout, bare, tree, origin, kind, base_commit, patch_file, env, log)
        if outcome:
            return outcome[0], kind, outcome[1]
        remove_tree(tree)
    status, failure = _build_clean(layout, bare, tree, base_commit, flags, patch_file, env, log)
    if status == "built" and not (tree / "objs" / "nginx").is_file():
        status, failure = "compile_failed", ("make", 0)
    return status, "clean", failure


def ensure_build(layout, bare, base_commit, flags, patch, clean=False):
    """The build record of base + patch, building it if needed (safe across processes): the
    published one, or an unpublished one with status "env_error" and a "reason" when the
    environment failed the build (see the module's docstring). clean: no base or sibling to
    start from (a tampered base build is rebuilt so)."""
    compiler = compiler_identity()
    patch_sha = jsonio.digest(patch)
    key = build_key(base_commit, flags, patch_sha, compiler)
    record = published_build(layout, key)
    if record:
        return record
    # A published binary that changed is built again, a base clean (nothing is known of what
    # else changed in its tree).
    damage = _damage(layout, key)
    clean = clean or bool(damage and patch_sha == EMPTY_PATCH_SHA)
    fields = {"key": key, "kind": None, "seconds": 0.0, "base_commit": base_commit,
              "configure_flags": list(flags), "patch_sha256": patch_sha, "compiler": compiler,
              "build_system": None}
    # Checked each time (it costs nothing): once the tool is installed, the build goes ahead.
    tool = missing_tool(build_env(layout, layout.build_dir(key)))
    if tool:
        reason = f"{tool} is not on PATH"
        return _env_error(layout, fields, reason, f"[nginx-eval] {reason}\n".encode(),
                          remember=False)
    if (str(layout.cache), key) in _failed_here:
        return _failed_here[str(layout.cache), key]
    base = None
    if patch_sha != EMPTY_PATCH_SHA:
        if not touches_build_system(touched_paths(patch)):
            base = ensure_build(layout, bare, base_commit, flags, b"")
            if base["status"] != "built":
                return _base_does_not_build(layout, fields, base)
    system_id = build_system_id(bare, base_commit) if patch_sha == EMPTY_PATCH_SHA else None
    sibling = (find_sibling(layout, bare, base_commit, flags, compiler, system_id)
               if system_id and not clean else None)
    with contextlib.ExitStack() as held:
        if system_id and not sibling and not clean:
            # The first base build of a build-system group holds the group's lock, so that the
            # others start from it instead of racing it through clean builds. Once one is
            # published, the rest of the group builds side by side.
            group = jsonio.digest([system_id, list(flags), compiler])[:16]
            held.enter_context(locked(layout.lock(f"build-group-{group}")))
            sibling = find_sibling(layout, bare, base_commit, flags, compiler, system_id)
        held.enter_context(locked(layout.lock(f"build-{key}")))
        # Another worker published it, or failed it in this process, while we waited.
        record = published_build(layout, key) or _failed_here.get((str(layout.cache), key))
        if record:
            return record
        tmp = layout.build_tmp(key)
        # Under the key's lock every other temporary directory of this key is a killed build's.
        for stale in tmp.parent.glob(f"{key}.*"):
            remove_tree(stale)
        tmp.mkdir(parents=True)
        start = time.monotonic()
        patch_file = None
        if patch_sha != EMPTY_PATCH_SHA:
            patch_file = tmp / "model.patch"
            patch_file.write_bytes(patch)
        with open(tmp / "build.log", "wb") as log:
            if damage:
                log.write(f"[nginx-eval] published build {key} is not intact ({damage}); "
                          f"building it again\n".encode())
            token = _token_file.set(str(layout.running_build_token(key)))
            try:
                status, kind, failure = _build_tree(
                    layout, bare, tmp, base_commit, flags, patch_file, base or sibling,
                    "incremental" if base else "sibling", build_env(layout, tmp / "tree"), log)
            finally:
                _token_file.reset(token)
            log.write(f"\n[nginx-eval] {status} ({kind}) in {time.monotonic() - start:.1f} s\n"
                      .encode())
        record = dict(fields, status=status, kind=kind, build_system=system_id,
                      seconds=round(time.monotonic() - start, 3))
        reason = (_failure_reason(layout, bare, base_commit, flags, patch, failure, tmp)
                  if status != "built" else None)
        if reason:
            log_bytes = ((tmp / "build.log").read_bytes()
                         + f"[nginx-eval] env_error: {reason}\n".encode())
            remove_tree(tmp)
            return _env_error(layout, record, reason, log_bytes)
        _publish(layout, tmp, record)
    return record


def _base_does_not_build(layout, fields, base):
    """The env_error of a candidate whose base build failed; its log is the base's."""
    reason = f"the base build {base['key']} failed: {base.get('reason') or base['status']}"
    try:
        base_log = layout.failed_build_log(base["key"]).read_bytes()
    except OSError:
        base_log = b""
    return _env_error(layout, fields, reason, f"[nginx-eval] {reason}\n".encode() + base_log)


def binary_path(layout, key):
    return layout.build_dir(key) / "tree" / "objs" / "nginx"


def build_task(layout, mode_name, task, config, file_dep):
    inputs = jsonio.inputs_digest(config, file_dep)
    out = layout.build_json(mode_name, task.instance_id)
    current = jsonio.fresh_output(out, inputs)
    if current and build_is_published(layout, current):
        return
    patch = layout.model_patch(mode_name, task.instance_id).read_bytes()
    start = time.monotonic()
    key = build_key(task.base_commit, task.configure_flags, jsonio.digest(patch), compiler_identity())
    reused = (layout.build_dir(key) / "build.json").exists()
    record = ensure_build(layout, layout.bare_repo(task.repo), task.base_commit,
                          task.configure_flags, patch)
    _copy_build_log(layout, record, layout.build_log(mode_name, task.instance_id))
    jsonio.write_json(out, dict(record, inputs=inputs, reused=reused,
                                binary=str(binary_path(layout, record["key"])),
                                wait_seconds=round(time.monotonic() - start, 3)))


def _copy_build_log(layout, record, dest):
    """The build's log into a task's results; an env_error's is in builds/.failed/ (when the
    disk let us write it)."""
    source = (layout.failed_build_log(record["key"]) if record["status"] == "env_error"
              else layout.build_dir(record["key"]) / "build.log")
    try:
        shutil.copyfile(source, dest)
    except FileNotFoundError:
        jsonio.write_text(dest, f"[nginx-eval] {record['status']}: {record.get('reason')}\n")


def build_is_published(layout, record):
    """A result's build is usable if its cache entry still exists (the cache may be cleaned) and,
    when built, still has the binary it was published with. An env_error never is: the next
    run tries again."""
    if record["status"] == "env_error":
        return False
    if not (layout.build_dir(record["key"]) / "build.json").exists():
        return False
    return record["status"] != "built" or binary_intact(layout, record)


def result_build_ok(layout, mode_name, iid):
    record = jsonio.read_json(layout.build_json(mode_name, iid))
    return bool(record) and build_is_published(layout, record)


def build_keys_of_other_runs(layout):
    """Keys of the builds that results of runs other than layout.run point to (per-task
    build.json, and validation records): `doit clean` of one run leaves those alone."""
    keys = set()
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


def remove_build(layout, key, dryrun=False):
    """Remove the build `key` unless another run's results use it; counted for `doit clean`'s
    summary (cleaning.py). dryrun: only count it."""
    if key and key not in build_keys_of_other_runs(layout):
        cleaning.say(cleaning.record("build", layout.build_dir(key)), dryrun)
        if not dryrun:
            remove_tree(layout.build_dir(key))


def remove_task_build(layout, mode_name, iid, dryrun=False):
    """`doit clean`: the cache build this result used, unless another run's results use it.
    The result files stay; a later run rebuilds what it needs."""
    remove_build(layout, (jsonio.read_json(layout.build_json(mode_name, iid)) or {}).get("key"),
                 dryrun)


def remove_base_build(layout, task, dryrun=False):
    remove_build(layout, build_key(task.base_commit, task.configure_flags, EMPTY_PATCH_SHA,
                                   compiler_identity()), dryrun)


def base_task_name(task):
    flags = jsonio.digest(list(task.configure_flags))[:8]
    return f"base:{task.repo.replace('/', '+')}/{task.base_commit[:12]}-{flags}"


def base_build_task(layout, task):
    ensure_build(layout, layout.bare_repo(task.repo), task.base_commit, task.configure_flags, b"")


def base_build_published(layout, task):
    """doit's uptodate of a base task: false after an env_error (never published), so that the
    next run tries again."""
    key = build_key(task.base_commit, task.configure_flags, EMPTY_PATCH_SHA, compiler_identity())
    return published_build(layout, key) is not None


def sibling_tree(bare, commits):
    """{commit: the commit whose base build it should start from} for the base commits of one
    build group, commits[0] (built clean) the root: a minimum spanning tree by rebuild_cost,
    grown from the root (Prim), ties to the earlier commit in `commits`. Started from the root
    alone, a group whose commits fall into clusters rebuilt most of nginx once per base outside
    the root's cluster; along the tree, once per cluster. Empty while the clone does not exist."""
    pairs = [(a, b) for i, a in enumerate(commits) for b in commits[i + 1:]]
    changed = changed_paths(bare, pairs)
    if changed is None:
        return {}
    cost = {}
    for (a, b), paths in zip(pairs, changed):
        cost[a, b] = cost[b, a] = rebuild_cost(paths)
    parents, attached, rest = {}, commits[:1], commits[1:]
    while rest:
        _, i, parent = min((cost[a, b], i, a) for i, b in enumerate(rest) for a in attached)
        parents[rest[i]] = parent
        attached.append(rest.pop(i))
    return parents


def base_build_plan(layout, tasks):
    """[(base task name, a task with that base, name of the base task it starts from or None)]
    in build order. The first base of a group (same auto/ tree and flags) is built clean; every
    other waits, as a doit dependency, for its parent in sibling_tree and then starts from it
    (or from a closer sibling published by then), side by side with other groups' builds: a
    worker never sits on the group's lock while another group's clean build could run. Without
    a clone yet (the first run), groups are unknown: every base is its own group, and the lock
    in ensure_build still makes the group's first build go first."""
    ids = tasks_build_system_ids(layout, tasks)
    order, groups, task_of = [], {}, {}
    for t in interleave_by_build_group(layout, tasks, ids):
        name = base_task_name(t)
        if name not in task_of:
            task_of[name] = t
            order.append(name)
            groups.setdefault(build_group_key(t, ids), []).append(name)
    parent_of = {}
    for names in groups.values():
        bare = layout.bare_repo(task_of[names[0]].repo)
        by_commit = {task_of[n].base_commit: n for n in names}
        for commit, parent in sibling_tree(bare, list(by_commit)).items():
            parent_of[by_commit[commit]] = by_commit[parent]
    return [(name, task_of[name], parent_of.get(name)) for name in order]


def gen_tasks(ctx):
    compiler = compiler_identity()
    for name, task, parent in ctx.base_build_plan():
        yield {
            "basename": "base",
            "name": name.split(":", 1)[1],
            "doc": f"the base build of {task.base_commit[:12]} (shared by every mode and run)",
            "actions": [(base_build_task, [ctx.layout, task])],
            # Both clones first: a task whose commits or test files are missing fails there,
            # before any build starts.
            "task_dep": [repo_task(task.repo), repo_task(task.test_repo)]
                        + ([parent] if parent else []),
            "uptodate": [(base_build_published, [ctx.layout, task])],
            "clean": [(remove_base_build, [ctx.layout, task])],
        }
    for bench, mode, task in ctx.units():
        name = ctx.unit_name(bench, mode, task)
        iid = task.instance_id
        config = {"base": task.base_commit, "flags": list(task.configure_flags),
                  "compiler": compiler}
        file_dep = [str(ctx.layout.model_patch(mode.name, iid))]
        yield {
            "basename": "build",
            "name": name,
            "doc": f"objs/nginx for the {mode.name} patch of {iid}",
            "actions": [(build_task, [ctx.layout, mode.name, task, config, file_dep])],
            "file_dep": file_dep,
            "task_dep": [repo_task(task.repo), base_task_name(task)],
            "targets": [str(ctx.layout.build_json(mode.name, iid)),
                        str(ctx.layout.build_log(mode.name, iid))],
            "uptodate": [config_changed(config), (result_build_ok, [ctx.layout, mode.name, iid])],
            "clean": [(remove_task_build, [ctx.layout, mode.name, iid])],
        }
