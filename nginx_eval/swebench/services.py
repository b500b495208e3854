"""Servers a repository's tests reach over the internet, run on this machine's loopback for a
local verdict (verdict.py) when the machine cannot reach them.

psf/requests' tests (before 2.9) send their requests to httpbin.org, or to ``HTTPBIN_URL`` when
it is set; the official image reaches httpbin.org, a machine with no route to the internet does
not, and every FAIL_TO_PASS test would fail with the gold patch as without it. So a local
verdict of such a repository starts httpbin (the package httpbin.org runs, HTTPBIN pinned) on a
free port of the loopback, in a venv of its own made like an environment (envs.py: bwrap over
bookworm's root filesystem, cached under ``layout.swe_env_dir``), and sets ``HTTPBIN_URL``.
"""

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from ..core import jsonio, rootfs
from ..core.layout import Layout
from ..core.records import read_record, versioned, write_record
from . import envs

HTTPBIN = ("httpbin==0.10.4",)
PYTHON = "3.11"
# Repositories whose tests read HTTPBIN_URL: the service a verdict starts for them.
HTTPBIN_REPOS = frozenset({"psf/requests"})
START_TIMEOUT = 60.0


def httpbin_venv(layout: Layout) -> Path | str:
    """The venv httpbin runs in (built when missing), or why there is none."""
    root = envs.python_root(PYTHON, {})
    if isinstance(root, str):
        return root
    problem = envs.ensure_rootfs(root)
    if problem:
        return problem
    key = "httpbin-" + jsonio.digest({"pins": HTTPBIN, "rootfs": root.digest()})[:12]
    directory = layout.swe_env_dir(key)
    rec = read_record(directory / "env.json")
    if rec:
        return directory / "venv" if rec.get("status") == envs.BUILT else str(rec.get("reason"))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "venv").mkdir(exist_ok=True)
    empty = directory / "testbed"
    empty.mkdir(exist_ok=True)
    log = directory / "build.log"
    outcome = envs.run_script(
        layout,
        root,
        f"{root.executable} -m venv {envs.VENV_AT}\n"
        f"{envs.VENV_AT}/bin/python -m pip install {' '.join(HTTPBIN)}",
        log,
        mounts=[("--bind", directory / "venv", envs.VENV_AT), ("--bind", empty, envs.TESTBED)],
        timeout=envs.BUILD_TIMEOUT,
    )
    ok = not outcome.timed_out and outcome.exit_code == 0
    reason = None if ok else f"httpbin's venv was not built ({log}): {envs.last_lines(log)}"
    write_record(
        directory / "env.json",
        versioned({"status": envs.BUILT if ok else envs.NOT_BUILT, "reason": reason}),
    )
    return directory / "venv" if ok else str(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_services(layout: Layout, repo: str, log: Path) -> Iterator[dict[str, str]]:
    """The environment variables that point a verdict's tests of `repo` at the servers started
    for it (none for most repositories), the servers stopped when it ends; what they print goes
    nowhere. A server that cannot start is said in `log`, and the tests run without it."""
    if repo not in HTTPBIN_REPOS:
        yield {}
        return
    venv = httpbin_venv(layout)
    if isinstance(venv, str):
        with open(log, "a") as f:
            f.write(f"no local httpbin: {venv}\n")
        yield {}
        return
    root = envs.python_root(PYTHON, {})
    assert not isinstance(root, str)
    port = free_port()
    argv = rootfs.command_in(
        root.root,
        [f"{envs.VENV_AT}/bin/python", "-m", "httpbin.core", "--port", str(port)],
        cwd="/",
        network=True,
        mounts=[("--ro-bind", venv, envs.VENV_AT)],
        uid=0,
    )
    # Its log of every request would only bury the tests' output.
    proc = subprocess.Popen(
        argv,
        env=rootfs.environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            time.sleep(0.2)
        yield {"HTTPBIN_URL": f"http://127.0.0.1:{port}/"}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
