"""The environment a test process gets: pinned, not inherited, and an output guard before nginx.

prove runs with ``--norc`` (no ~/.proverc) in an environment the harness builds
(``prove_environment``): PATH, HOME, TMPDIR, USER, LOGNAME and PERL5LIB pass through, no
inherited ``TEST_NGINX_*`` does (``TEST_NGINX_UNSAFE`` alone adds assertions).
``TEST_NGINX_GLOBALS`` is ``NGINX_EVAL_TEST_GLOBALS`` plus, as root, ``user root;`` unless that
already names a user (nginx refuses two; as root its workers would otherwise switch to ``nobody``
and fail on the test's private temp directory). The environment is recorded in prove.json and is
part of prove's inputs (prove/stage.py).

``TEST_NGINX_BINARY`` is an output guard (nginx_output_guard.sh): nginx run as a server writes to
``tap/<file>.nginx.log``, not to the TAP stream. ``TEST_NGINX_MODULES`` names the build's objs/.
As root, ``daemon_shims`` puts first on PATH a `memcached` that runs the real one with ``-u
root``, without which memcached refuses to start as root.

``OPENSSL_CONF`` is the harness's own OpenSSL configuration (openssl_tests.cnf: security level 0),
never the system's: Debian's default level 2 refuses the 1024-bit keys and SHA-1 signatures of
older test trees' certificates, in nginx and in the tests' clients. Its digest is one of prove's
inputs; the doctor checks the selected test files' certificates against it (doctor.py).

``tool_versions`` names the perl and openssl of prove.json's ``versions``. With the pinned
toolchain (core/rootfs.py) a test runs in its root filesystem as its ordinary account: its HOME,
TMPDIR, USER, LOGNAME and PATH, PERL5LIB the test tree's lib/ alone, no ``user root;``, no daemon
shims, every Perl undumpable (``PERL5OPT``: perl/NginxEval/Undumpable.pm); the toolchain's and the
module's digests are prove's inputs.
"""

import os
import shutil
import subprocess
from collections.abc import Mapping
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import rootfs
from ..core.jsonio import file_digest, install_executable
from ..core.layout import PACKAGE_DIR
from ..core.locks import locked
from ..core.procs import run_query
from ..core.trees import remove_tree

if TYPE_CHECKING:
    from ..core.layout import Layout

OUTPUT_GUARD = PACKAGE_DIR / "prove" / "nginx_output_guard.sh"
OPENSSL_CONF_FILE = PACKAGE_DIR / "prove" / "openssl_tests.cnf"
# Perl modules every Perl of a test run loads in the pinned toolchain (PERL5OPT): NginxEval/.
PERL_DIR = PACKAGE_DIR / "prove" / "perl"
UNDUMPABLE_MODULE = PERL_DIR / "NginxEval" / "Undumpable.pm"
# Variables of the harness's own environment a test may see; everything else is set here.
PASSED_THROUGH = ("PATH", "HOME", "TMPDIR", "USER", "LOGNAME")
# Daemons nginx-tests start that refuse to run as root without these options (daemon_shims).
ROOT_DAEMON_OPTIONS = {"memcached": ("-u", "root")}
# Extra `TEST_NGINX_GLOBALS` a user wants (e.g. a `user` directive of their own).
GLOBALS_VAR = "NGINX_EVAL_TEST_GLOBALS"


def output_guard(layout: "Layout", binary: str | Path) -> Path:
    """The output guard's directory for `binary` (see the module docstring): `nginx`, the guard,
    and `src`, a link to the build's objs/src (Test::Nginx looks for the perl module's library
    beside TEST_NGINX_BINARY)."""
    guard_dir = layout.output_guard(binary)
    script = OUTPUT_GUARD.read_text().replace("@REAL_NGINX@", _sh_quote(str(binary)))
    guard = guard_dir / "nginx"
    if guard.is_file() and guard.read_text() == script:
        return guard
    # One writer at a time: the proves of one binary (threads of one doit too) all get here
    # at once, and a second writer's remove_tree would pull the guard from under the first's test.
    with locked(layout.lock(f"guard-{guard_dir.name}")):
        if guard.is_file() and guard.read_text() == script:
            return guard
        tmp = guard_dir.with_name(f".{guard_dir.name}.{os.getpid()}")
        remove_tree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        (tmp / "nginx").write_text(script)
        (tmp / "nginx").chmod(0o755)
        os.symlink(os.path.join(os.path.dirname(binary), "src"), tmp / "src")
        remove_tree(guard_dir, ignore_errors=True)
        os.replace(tmp, guard_dir)
    return guard


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def tests_run_as_root() -> bool:
    """Whether test processes run as root: the harness's user, but never in the pinned
    toolchain (its account is an ordinary one)."""
    return os.geteuid() == 0 and not rootfs.current().pinned


def test_globals(environ: Mapping[str, str] | None = None) -> str:
    """TEST_NGINX_GLOBALS: the user's extra globals, and `user root;` as root unless they name
    a user already."""
    env = os.environ if environ is None else environ
    extra = env.get(GLOBALS_VAR, "").strip()
    names_user = any(part.split()[:1] == ["user"] for part in extra.split(";"))
    if tests_run_as_root() and not names_user:
        extra = " ".join(filter(None, ["user root;", extra]))
    return extra


def tool_versions() -> dict[str, str | None]:
    """{"perl", "openssl"}: the versions prove.json records (see prove/stage.py), once per
    process and toolchain."""
    return _tool_versions(rootfs.current())


@lru_cache(maxsize=2)
def _tool_versions(toolchain: rootfs.Toolchain) -> dict[str, str | None]:
    if toolchain.pinned:
        return {
            "perl": rootfs.first_line(toolchain, ("perl", "-e", "print $^V")),
            "openssl": rootfs.first_line(toolchain, ("openssl", "version")),
        }
    return {
        "perl": _first_line(["perl", "-e", "print $^V"]),
        "openssl": _first_line(["openssl", "version"]),
    }


def _first_line(argv: list[str]) -> str | None:
    try:
        out = run_query(argv, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0] if out.returncode == 0 and lines else None


@cache  # one entry a program: prove and perl alternate
def _program(name: str) -> str | None:
    found = shutil.which(name)
    return os.path.realpath(found) if found else None


def pinned_environment(
    tests_tree: Path, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The part of a prove's environment that is the same for every binary: recorded in
    prove.json and part of prove's inputs (PATH through the programs it resolves to)."""
    env = os.environ if environ is None else environ
    inside = rootfs.current().pinned
    source = rootfs.environment() if inside else env
    pinned = {name: source[name] for name in PASSED_THROUGH if name in source and name != "PATH"}
    pinned.update(
        {
            "LC_ALL": "C",
            "LANG": "C",
            "TEST_NGINX_GLOBALS": test_globals(env),
            "OPENSSL_CONF": str(OPENSSL_CONF_FILE),
            "PERL5LIB": os.pathsep.join(
                filter(None, [str(tests_tree / "lib"), None if inside else env.get("PERL5LIB")])
            ),
        }
    )
    if inside:
        # Every Perl undumpable: the patch's nginx, the same account without capabilities,
        # cannot reach prove's or the test file's streams (NginxEval/Undumpable.pm). As root
        # (the host's toolchain) it could all the same: root may trace anything.
        pinned["PERL5OPT"] = f"-I{PERL_DIR} -MNginxEval::Undumpable"
    return pinned


def environment_inputs(tests_tree: Path) -> dict[str, str | None]:
    """prove's inputs of the environment: the pinned variables, the programs PATH resolves to,
    the content of the OpenSSL configuration (an edit to it proves again), the toolchain (its
    digest, or "host") and, pinned, the content of the Perl module that seals the test's Perl."""
    toolchain = rootfs.current()
    find = (lambda name: rootfs.which(toolchain, name)) if toolchain.pinned else _program
    found: dict[str, str | None] = dict(
        pinned_environment(tests_tree),
        prove=find("prove"),
        perl=find("perl"),
        openssl_conf=file_digest(OPENSSL_CONF_FILE),
        toolchain=rootfs.key_part(toolchain),
    )
    if toolchain.pinned:
        found["undumpable"] = file_digest(UNDUMPABLE_MODULE)
    return found


def daemon_shims(layout: "Layout", environ: Mapping[str, str] | None = None) -> Path | None:
    """As root, a directory of wrappers for the installed daemons of ROOT_DAEMON_OPTIONS, each
    running the real program with those options; None when not root or none is installed."""
    env = os.environ if environ is None else environ
    if not tests_run_as_root():
        return None
    shim_dir = layout.cache / "daemon-shims"
    path = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if p and p != str(shim_dir)
    )
    scripts = {}
    for daemon, options in sorted(ROOT_DAEMON_OPTIONS.items()):
        real = shutil.which(daemon, path=path)
        if real:
            scripts[daemon] = (
                f"#!/bin/sh\n# nginx-eval: {daemon} refuses to run as root "
                f"without {' '.join(options)} (prove/env.py)\n"
                f'exec {_sh_quote(real)} {" ".join(options)} "$@"\n'
            )
    if not scripts:
        return None
    for daemon, script in scripts.items():
        install_executable(shim_dir / daemon, script.encode())
    return shim_dir


def prove_environment(
    tests_tree: Path, guard: Path, binary: str | Path, shims: Path | None = None
) -> dict[str, str]:
    env = pinned_environment(tests_tree)
    if rootfs.current().pinned:
        env["PATH"] = rootfs.PATH
    elif "PATH" in os.environ:
        env["PATH"] = os.environ["PATH"]
    if shims:
        env["PATH"] = os.pathsep.join(filter(None, [str(shims), env.get("PATH")]))
    env.update(
        {"TEST_NGINX_BINARY": str(guard), "TEST_NGINX_MODULES": os.path.dirname(str(binary))}
    )
    return env
