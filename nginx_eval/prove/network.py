"""Run a test file in a network namespace of its own, whose only interface is an up loopback.

Why: nginx-tests listen on 127.0.0.1. Test trees older than nginx-tests d66bb70 ("parallel tests
support") listen on fixed ports (8080, 8081, ...); newer ones pick a random port in
8000-8999 after a bind probe, which another process can still take before nginx binds it. Two
proves at once (parallel doit workers, validation's repeats, a second run on the machine) then
fail each other with "bind() ... failed" or talk to each other's servers, and that is graded as
the patch's failure. In a namespace of its own, each prove has every port to itself.

A network namespace needs CAP_SYS_ADMIN, which the harness has as root. Where the kernel refuses
it (an unprivileged container) or NGINX_EVAL_PRIVATE_NETWORK=0 turns it off, `problem()` says
why, proves run on the shared network, and the
files of a fixed-port tree take a machine-wide lock so that no two of them run at once
(`fixed_port_lock`); the doctor reports which of the two applies.

The namespace is entered by prove/namespaces.py, a program of its own in front of each test
file (`command`), which also gives the file a PID namespace of its own: the patch's program can
signal no process outside its test file's (neither the harness nor other units' proves). The pinned
toolchain's bwrap makes both namespaces itself (core/rootfs.py).
"""

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

# NGINX_EVAL_PRIVATE_NETWORK=0 runs tests on the machine's network (to watch them with tcpdump).
ENV_OFF = "NGINX_EVAL_PRIVATE_NETWORK"
NAMESPACES_PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "namespaces.py")
# Where fixed-port trees queue without a private network: one file for the machine, since the
# ports they bind are the machine's.
FIXED_PORT_LOCK = os.path.join(tempfile.gettempdir(), "nginx-eval-fixed-ports.lock")


def command(argv: Sequence[str]) -> list[str]:
    """`argv` run in a private network. Python starts isolated and without site (-I -S): this
    program needs the standard library alone, and site's import of the editable install is
    most of Python's start, paid before every test file (docs/performance.md)."""
    return [sys.executable, "-I", "-S", NAMESPACES_PROGRAM, *argv]


def problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why tests do not get a private network here, or None."""
    env = os.environ if environ is None else environ
    if env.get(ENV_OFF, "") == "0":
        return f"turned off by {ENV_OFF}=0"
    return _probe()


@lru_cache(maxsize=1)
def _probe() -> str | None:
    """Why the kernel refuses a network namespace, or None: asked once per process."""
    try:
        probe = subprocess.run(command(["true"]), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the probe did not run: {e}"
    if probe.returncode != 0:
        return probe.stderr.strip() or f"the probe exited with {probe.returncode}"
    return None


def uses_fixed_ports(tests_tree: str | Path) -> bool:
    """Whether the nginx-tests tree predates parallel tests: its Test::Nginx has no port()."""
    try:
        with open(
            os.path.join(tests_tree, "lib", "Test", "Nginx.pm"), encoding="utf-8", errors="replace"
        ) as f:
            return "\nsub port" not in f.read()
    except OSError:
        return False  # not nginx-tests (a fixture): nothing known about its ports
