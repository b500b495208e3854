"""The tools a build runs, and how: the compiler's identity (part of every build key, with the
toolchain's digest), configure's command line and environment (feature_test_cc.sh, no ccache),
make's environment (ccache), the programs a build cannot do without, and where a step runs: in the
pinned toolchain's root filesystem under bubblewrap (core/rootfs.py; `in_toolchain`), or with the
host's own tools when NGINX_EVAL_TOOLCHAIN=host.

build/stage.py runs the steps; this module only says which programs, with which flags and variables.
"""

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import jsonio, rootfs
from ..core.gitcmd import git_environment
from ..core.layout import PACKAGE_DIR

if TYPE_CHECKING:
    from ..core.layout import Layout

# Programs a build runs; a missing one is the environment's fault, found before building. With
# the pinned toolchain the compiler and make are the root filesystem's, the rest the host's
# (the harness copies trees and applies patches itself).
REQUIRED_TOOLS = ("make", "cc", "tar", "git", "cp")
TOOLCHAIN_TOOLS = ("make", "cc")
CCACHE_WRAPPERS = "/usr/lib/ccache"
# Added to every build's --with-cc-opt:
# -g0: nginx compiles with -g. Debug information never changes the code GCC generates (GCC checks
#      this with -fcompare-debug), and nobody reads it here; leaving it out saves a fifth of every
#      compile.
# -MD: the compiler writes the headers it read to a .d file, which is what ccache's depend mode
#      needs. Without it ccache runs the preprocessor on every miss: a clean make with an empty
#      cache took 11.6 s instead of 7.8 s without ccache; with -MD it takes 8.1 s.
EXTRA_CC_OPT = "-g0 -MD"
# Options added after those (NGINX_EVAL_CC_OPT, part of every build's key): the test suite's
# real-nginx builds add -O0, half the compiler's time, since what the harness decides of a
# build does not depend on how far GCC optimised it.
CC_OPT_VARIABLE = "NGINX_EVAL_CC_OPT"


def extra_cc_opt() -> str:
    """The options added to every build's --with-cc-opt: EXTRA_CC_OPT, then NGINX_EVAL_CC_OPT."""
    more = os.environ.get(CC_OPT_VARIABLE, "").strip()
    return f"{EXTRA_CC_OPT} {more}" if more else EXTRA_CC_OPT


# The compiler configure runs: it keeps the executables of configure's test programs (see there).
FEATURE_TEST_CC = PACKAGE_DIR / "build" / "feature_test_cc.sh"
# Changes whenever a Debian package is installed, removed or upgraded.
PACKAGE_DATABASE = "/var/lib/dpkg/status"


def compiler_identity() -> dict[str, str]:
    """What makes two builds of the same source different: the toolchain (its digest, or
    "host"), the compiler and its version."""
    return _compiler_identity(rootfs.current(), extra_cc_opt())


@lru_cache(maxsize=2)
def _compiler_identity(toolchain: rootfs.Toolchain, cc_opt: str) -> dict[str, str]:
    if toolchain.pinned:
        cc = rootfs.which(toolchain, "cc") if rootfs.problem(toolchain) is None else None
        version = rootfs.first_line(toolchain, ("cc", "--version")) if cc else None
        return {
            "toolchain": rootfs.key_part(toolchain),
            "cc": cc or "",
            "version": version or "",
            "cc_opt": cc_opt,
        }
    cc = shutil.which("cc") or "cc"
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    except OSError:
        out = ""
    return {
        "toolchain": rootfs.HOST,
        "cc": os.path.realpath(cc),
        "version": out.splitlines()[0] if out else "",
        "cc_opt": cc_opt,
    }


def toolchain_line() -> str:
    """The toolchain a build ran in, for its log: "debian-12 root filesystem 158a4c4d3877
    (/opt/nginx-eval/toolchain)" or "host (pin off)"."""
    toolchain = rootfs.current()
    where = f" ({toolchain.directory})" if toolchain.directory else ""
    return rootfs.describe(rootfs.record(toolchain)) + where


def build_env(layout: "Layout", tree: str | Path, *, patched: bool = False) -> dict[str, str]:
    """The environment of every step of a build in `tree`: make compiles through ccache (the
    host's, when it has one; always in the pinned toolchain, which carries it), which only reads
    the shared caches for a `patched` tree (READ_ONLY_CACHES). A step in the toolchain gets what
    `in_toolchain` keeps of it."""
    env = dict(os.environ)
    if patched:
        env.update(READ_ONLY_CACHES)
    pinned = rootfs.current().pinned
    if pinned or (os.path.isdir(CCACHE_WRAPPERS) and shutil.which("ccache")):
        if not pinned:
            env["PATH"] = CCACHE_WRAPPERS + os.pathsep + env.get("PATH", "")
        env["CCACHE_DIR"] = str(layout.ccache_dir)
        # Every build has its own directory: paths relative to it let builds share cache hits.
        env["CCACHE_BASEDIR"] = str(tree)
        env["CCACHE_NOHASHDIR"] = "1"
        # Depend mode takes the headers from the compiler's own -MD output (see EXTRA_CC_OPT)
        # instead of running the preprocessor a second time on every miss.
        env["CCACHE_DEPEND"] = "1"
    # git apply below a tree inside another repository must not see that repository, nor one
    # an inherited GIT_DIR names: the git module's one environment.
    return git_environment(tree, base=env)


def missing_tool(env: Mapping[str, str]) -> str | None:
    """The first of REQUIRED_TOOLS not on the build environment's PATH (the compiler and make in
    the pinned toolchain's root filesystem), or None. ccache's directory does not count: its
    `cc` only works with a real compiler on PATH."""
    toolchain = rootfs.current()
    path = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != CCACHE_WRAPPERS)
    for tool in REQUIRED_TOOLS:
        if toolchain.pinned and tool in TOOLCHAIN_TOOLS:
            if not rootfs.which(toolchain, tool):
                return f"{tool} (in the toolchain's root filesystem {toolchain.root})"
        elif not shutil.which(tool, path=path):
            return tool
    return None


# A patched tree's steps run the patch's code (auto/configure, the Makefile it writes): they read
# the caches every build shares, ccache's store and configure's kept test programs, and never
# write them, or a patch could plant objects and test programs in other units' builds (the base
# builds that judge it and the other modes' among them). build_env sets these for a patched
# tree; in the pinned toolchain in_toolchain then binds both stores read-only.
READ_ONLY_CACHES = {
    "CCACHE_READONLY": "1",
    "CCACHE_NOSTATS": "1",  # the statistics are a write too
    "NGINX_EVAL_FEATURE_TESTS_READONLY": "1",  # feature_test_cc.sh
}
# What a build step in the toolchain keeps of the build's environment (build_env, configure_env).
STEP_VARIABLES = (
    "CCACHE_DIR",
    "CCACHE_BASEDIR",
    "CCACHE_NOHASHDIR",
    "CCACHE_DEPEND",
    "NGINX_EVAL_REAL_CC",
    "NGINX_EVAL_FEATURE_TESTS",
    "NGINX_EVAL_CC_ID",
    *READ_ONLY_CACHES,
)
# ccache's temporary files when its store is read-only: bwrap's own /tmp.
READ_ONLY_CCACHE_TEMPDIR = "/tmp/ccache"


def in_toolchain(
    argv: list[str], tree: str | Path, env: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) that run a build step (configure, make) in `tree`: unchanged with the
    host's toolchain; in the pinned one, bwrap in its root filesystem with the build's directory
    (the tree's parent) bound read-write, ccache's store and configure's kept test programs
    read-write, or read-only for a patched tree (READ_ONLY_CACHES in `env`), no network, and the
    root filesystem's PATH (ccache's compilers first, or configure_env's `cc`)."""
    toolchain = rootfs.current()
    if not toolchain.pinned:
        return argv, dict(env)
    shared = [env[name] for name in ("CCACHE_DIR", "NGINX_EVAL_FEATURE_TESTS") if env.get(name)]
    read_only = env.get("CCACHE_READONLY") == "1"
    writable = [Path(tree).parent] + ([] if read_only else shared)
    feature_bin = env.get("NGINX_EVAL_FEATURE_TESTS")
    path = (
        f"{feature_bin}/bin:{rootfs.PATH}"
        if env.get("NGINX_EVAL_REAL_CC")
        else f"{rootfs.CCACHE_PATH}:{rootfs.PATH}"
    )
    kept = {name: env[name] for name in STEP_VARIABLES if name in env}
    if read_only:
        kept["CCACHE_TEMPDIR"] = READ_ONLY_CCACHE_TEMPDIR
    for name in ("CCACHE_DIR", "NGINX_EVAL_FEATURE_TESTS"):
        if name in kept:
            Path(kept[name]).mkdir(parents=True, exist_ok=True)
    return (
        rootfs.command(
            toolchain, argv, cwd=tree, writable=writable, readable=shared if read_only else ()
        ),
        rootfs.environment(kept, path=path),
    )


def configure_argv(flags: Iterable[str]) -> list[str]:
    """./auto/configure with the task's flags, extra_cc_opt() added to its --with-cc-opt (the
    last --with-cc-opt wins, so it is merged into an existing one)."""
    flags, extra = list(flags), extra_cc_opt()
    for i in reversed(range(len(flags))):
        if flags[i].startswith("--with-cc-opt="):
            flags[i] += " " + extra
            break
    else:
        flags.append("--with-cc-opt=" + extra)
    return ["./auto/configure", *flags]


def feature_test_identity() -> str:
    """What configure's cached test programs depend on besides their command line and source:
    the compiler, and the system's libraries and headers (any package change starts afresh;
    the pinned toolchain's are its digest, part of the compiler's identity)."""
    packages = None
    if not rootfs.current().pinned:
        try:
            packages = os.stat(PACKAGE_DATABASE).st_mtime_ns
        except OSError:
            pass
    return jsonio.digest({"compiler": compiler_identity(), "packages": packages})


def install_feature_test_cc(layout: "Layout") -> Path:
    """The directory whose `cc` is feature_test_cc.sh, written into the cache when missing or
    outdated (an executable bit cannot be relied on in an installed package)."""
    bin_dir = layout.feature_tests / "bin"
    jsonio.install_executable(bin_dir / "cc", FEATURE_TEST_CC.read_bytes())
    return bin_dir


def configure_env(layout: "Layout", env: Mapping[str, str]) -> dict[str, str]:
    """configure's environment: feature_test_cc.sh as `cc`, and no ccache, which cannot cache a
    link and only adds a process to each test (docs/performance.md). The Makefile configure
    writes says `cc`, which make, with build_env's PATH, finds in ccache's directory. With the
    pinned toolchain the real compiler is the root filesystem's (in_toolchain sets PATH)."""
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != CCACHE_WRAPPERS]
    toolchain = rootfs.current()
    if toolchain.pinned:
        real_cc = rootfs.which(toolchain, "cc") and "/usr/bin/cc"
    else:
        real_cc = shutil.which("cc", path=os.pathsep.join(path))
    if not real_cc:
        return dict(env, PATH=os.pathsep.join(path))
    return dict(
        env,
        PATH=os.pathsep.join([str(install_feature_test_cc(layout)), *path]),
        NGINX_EVAL_REAL_CC=real_cc,
        NGINX_EVAL_FEATURE_TESTS=str(layout.feature_tests),
        NGINX_EVAL_CC_ID=feature_test_identity(),
    )
