"""`python -m doit ARGS` for the tests, forked from a process that has imported doit and the
package once.

A doit the tests start spends most of its processor time starting Python and importing doit,
Jinja2 and nginx_eval, the same each time. Each test worker starts one server (this module run
as a program, a child of the worker); for each command it forks a child that becomes what
``python -m doit ARGS`` is once its imports are done: the caller's environment, working directory
and umask, stdin from /dev/null, stdout and stderr to the caller's files, ``sys.argv`` and
``__main__`` as ``-m doit`` sets them. The child leaves the server's code and ends as a Python
program ends (threads joined, atexit handlers run), with doit's exit status. The server itself
starts no thread, so a fork of it is a clean process.

Protocol, one JSON line each way per message: the worker sends a request
``{"argv", "env", "cwd", "umask", "stdout", "stderr"}``; the server answers ``{"pid"}`` once the
child runs and ``{"status", "cpu"}`` once it has ended (the wait status; the processor seconds of
the child and what it reaped). The worker closes its end of the protocol at exit; the server ends.
"""

import atexit
import gc
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# What `python -m doit -f dodo.py run ...` imports before it runs anything.
PRELOAD = (
    "doit.doit_cmd",
    "nginx_eval.cli",
    "nginx_eval.pipeline",
    "git",
    "gitdb.exc",
    "tap.parser",
)


# -- the server -------------------------------------------------------------------------------


def _serve(requests, replies):
    """Fork a child per request; returns the request in the child only."""
    while True:
        line = requests.readline()
        if not line:
            sys.exit(0)
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            requests.close()
            replies.close()
            return request
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status, usage = os.wait4(pid, 0)
        cpu = usage.ru_utime + usage.ru_stime
        replies.write(json.dumps({"status": status, "cpu": cpu}) + "\n")
        replies.flush()


def _become(request):
    """This forked child as `python -m doit` started with the request's settings."""
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    os.close(stdin)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, fd)
        os.close(out)
    sys.path[0] = request["cwd"]  # -m puts the working directory first
    sys.path.remove(request["source_root"])
    sys.argv = [sys.argv[0], *request["argv"]]


def main(source_root, requests_fd, replies_fd):
    sys.argv = ["-m"]  # as `python -m` has it while it imports (doit names itself after it)
    sys.path.insert(1, source_root)  # the package next to dodo.py, as dodo.py imports it
    for name in PRELOAD:
        __import__(name)
    requests = os.fdopen(int(requests_fd), "r")
    replies = os.fdopen(int(replies_fd), "w")
    for stream in (requests, replies):
        os.set_inheritable(stream.fileno(), False)
    gc.freeze()  # the preloaded modules stay shared with the children: no collection touches them
    request = _serve(requests, replies)
    _become(dict(request, source_root=source_root))
    import runpy

    runpy.run_module("doit", run_name="__main__", alter_sys=True)


# -- the worker's side ------------------------------------------------------------------------


class DoitServer:
    """One server per process that uses it (see the module docstring)."""

    def __init__(self, source_root: Path):
        requests_r, self._requests_w = os.pipe()
        self._replies_r, replies_w = os.pipe()
        self._process = subprocess.Popen(
            [sys.executable, __file__, str(source_root), str(requests_r), str(replies_w)],
            pass_fds=(requests_r, replies_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        os.close(requests_r)
        os.close(replies_w)
        self._requests = os.fdopen(self._requests_w, "w")
        self._replies = os.fdopen(self._replies_r, "r")
        self._lock = threading.Lock()
        # The processor time of the doits run so far: the worker does not reap them, the server
        # does, so the worker's own accounting of its children leaves them out.
        self.cpu_seconds = 0.0

    def _reply(self, timeout=None):
        if timeout is not None and not select.select([self._replies], [], [], timeout)[0]:
            return None
        line = self._replies.readline()
        if not line:
            raise RuntimeError(f"the doit server ended ({self._process.wait()})")
        return json.loads(line)

    def run(self, argv, env, timeout):
        """(exit status, stdout, stderr) of `python -m doit *argv` in `env` and this process's
        working directory and umask; subprocess.TimeoutExpired after `timeout` s (doit killed)."""
        umask = os.umask(0)
        os.umask(umask)
        with self._lock, tempfile.TemporaryDirectory(prefix="doit-") as scratch:
            out, err = Path(scratch, "stdout"), Path(scratch, "stderr")
            request = {
                "argv": [str(a) for a in argv],
                "env": dict(env),
                "cwd": os.getcwd(),
                "umask": umask,
                "stdout": str(out),
                "stderr": str(err),
            }
            self._requests.write(json.dumps(request) + "\n")
            self._requests.flush()
            pid = self._reply()["pid"]
            ended = self._reply(timeout)
            if ended is None:
                os.kill(pid, signal.SIGKILL)
                self._reply()
                raise subprocess.TimeoutExpired(
                    ["doit", *argv], timeout, output=out.read_text(), stderr=err.read_text()
                )
            self.cpu_seconds += ended["cpu"]
            status = os.waitstatus_to_exitcode(ended["status"])
            return status, out.read_text(), err.read_text()

    def close(self):
        self._requests.close()
        self._process.wait(timeout=30)
        self._replies.close()


_servers: dict[int, DoitServer] = {}


def server(source_root: Path) -> DoitServer:
    """This process's server, started on first use."""
    if os.getpid() not in _servers:
        _servers[os.getpid()] = started = DoitServer(source_root)
        atexit.register(started.close)
    return _servers[os.getpid()]


if __name__ == "__main__":
    main(*sys.argv[1:])
