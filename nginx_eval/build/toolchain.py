"""The tools a build runs, and how: the compiler's identity (part of every build key),
configure's command line and environment (feature_test_cc.sh, no ccache), make's environment
(ccache) and the programs a build cannot do without.

build/stage.py runs the steps; this module only says which programs, with which flags and variables.
"""

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import jsonio
from ..core.gitcmd import git_environment
from ..core.layout import PACKAGE_DIR

if TYPE_CHECKING:
    from ..core.layout import Layout

# Programs a build runs; a missing one is the environment's fault, found before building.
REQUIRED_TOOLS = ("make", "cc", "tar", "git", "cp")
CCACHE_WRAPPERS = "/usr/lib/ccache"
# Added to every build's --with-cc-opt:
# -g0: nginx compiles with -g. Debug information never changes the code GCC generates (GCC checks
#      this with -fcompare-debug), and nobody reads it here; leaving it out saves a fifth of every
#      compile.
# -MD: the compiler writes the headers it read to a .d file, which is what ccache's depend mode
#      needs. Without it ccache runs the preprocessor on every miss: a clean make with an empty
#      cache took 11.6 s instead of 7.8 s without ccache; with -MD it takes 8.1 s.
EXTRA_CC_OPT = "-g0 -MD"
# The compiler configure runs: it keeps the executables of configure's test programs (see there).
FEATURE_TEST_CC = PACKAGE_DIR / "build" / "feature_test_cc.sh"
# Changes whenever a Debian package is installed, removed or upgraded.
PACKAGE_DATABASE = "/var/lib/dpkg/status"


@lru_cache(maxsize=1)
def compiler_identity() -> dict[str, str]:
    """What makes two builds of the same source different: the compiler and its version."""
    cc = shutil.which("cc") or "cc"
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout
    except OSError:
        version = ""
    return {
        "cc": os.path.realpath(cc),
        "version": version.splitlines()[0] if version else "",
        "cc_opt": EXTRA_CC_OPT,
    }


def build_env(layout: "Layout", tree: str | Path) -> dict[str, str]:
    """The environment of every step of a build in `tree`: make compiles through ccache."""
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
    # git apply below a tree inside another repository must not see that repository, nor one
    # an inherited GIT_DIR names: the git module's one environment.
    return git_environment(tree, base=env)


def missing_tool(env: Mapping[str, str]) -> str | None:
    """The first of REQUIRED_TOOLS not on the build environment's PATH, or None. ccache's
    directory does not count: its `cc` only works with a real compiler on PATH."""
    path = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != CCACHE_WRAPPERS)
    return next((tool for tool in REQUIRED_TOOLS if not shutil.which(tool, path=path)), None)


def configure_argv(flags: Iterable[str]) -> list[str]:
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


def feature_test_identity() -> str:
    """What configure's cached test programs depend on besides their command line and source:
    the compiler, and the system's libraries and headers (any package change starts afresh)."""
    try:
        packages = os.stat(PACKAGE_DATABASE).st_mtime_ns
    except OSError:
        packages = None
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
    writes says `cc`, which make, with build_env's PATH, finds in ccache's directory."""
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != CCACHE_WRAPPERS]
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
