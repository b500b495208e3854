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

The report and the site render in a process of their own (report/apart.py: ``python -m
nginx_eval.report.apart``), which imports the statistics and charts each time, most of its
processor time. The server imports them too, at the first rendering a doit asks for (until then
each fork copies a smaller process), and forks that process itself: a doit of the server asks
for it on a socket it got at its fork (report/apart.py's ``procs.run_limited``, replaced), with
the rendering's stdin, stdout and stderr passed along, its environment, working directory and
umask; the server forks a child that runs ``report/apart.py: main`` and ends with its
exit status, answers ``{"pid"}``, then ``{"status"}`` once it has ended, while it waits for the
doit. The doit kills it at its time limit, as core/procs.py would; the server kills what a killed
doit left rendering. A doit runs tasks in threads: a fork of the doit itself could copy a lock
another thread held.
"""

import atexit
import gc
import inspect
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
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
# What a rendering of the report imports (report/stats.py, report/charts.py).
RENDERING = (
    "scipy.stats",
    "statsmodels.regression.linear_model",
    "statsmodels.stats.contingency_tables",
    "statsmodels.stats.multitest",
    "statsmodels.stats.power",
    "matplotlib.pyplot",
)
APART = "nginx_eval.report.apart"
# What report/apart.py tells core/procs.py's run_limited of its command.
RENDERING_OPTIONS = {"cwd", "env", "timeout", "stdin", "stdout", "stderr"}


# -- the server -------------------------------------------------------------------------------


def _serve(requests, replies):
    """Fork a child per request; returns (request, its end of the rendering channel) in the
    child only."""
    while True:
        line = requests.readline()
        if not line:
            sys.exit(0)
        request = json.loads(line)
        renderings, channel = _message_pair()
        pid = os.fork()
        if pid == 0:
            requests.close()
            replies.close()
            renderings.close()
            return request, channel
        channel.close()
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        status, cpu = _wait_serving_renderings(pid, renderings, (requests, replies))
        replies.write(json.dumps({"status": status, "cpu": cpu}) + "\n")
        replies.flush()


def _wait_serving_renderings(pid, renderings, server_files):
    """Wait for the doit `pid`, forking the renderings it asks for on `renderings` meanwhile;
    returns its wait status and the processor seconds of it and its renderings."""
    doit = os.pidfd_open(pid)
    watched = [doit, renderings]
    running = {}  # pidfd -> (pid, the rendering's reply socket)
    cpu = 0.0
    while True:
        ready = select.select([*watched, *running], [], [])[0]
        for pidfd in set(ready) & set(running):
            rendering, reply = running.pop(pidfd)
            os.close(pidfd)
            _, status, usage = os.wait4(rendering, 0)
            cpu += usage.ru_utime + usage.ru_stime
            with reply:
                reply.sendall(json.dumps({"status": status}).encode())
        if renderings in ready:
            asked = _fork_rendering(renderings, server_files)
            if asked:
                running[os.pidfd_open(asked[0])] = asked
            else:  # the doit closed its end: it is ending
                watched.remove(renderings)
        if doit in ready:
            break
    for pidfd, (rendering, reply) in running.items():  # a doit killed while it rendered
        os.kill(rendering, signal.SIGKILL)
        _, _, usage = os.wait4(rendering, 0)
        cpu += usage.ru_utime + usage.ru_stime
        os.close(pidfd)
        reply.close()
    renderings.close()
    os.close(doit)
    _, status, usage = os.wait4(pid, 0)
    return status, cpu + usage.ru_utime + usage.ru_stime


def _fork_rendering(renderings, server_files):
    """Start the rendering a doit asked for: (pid, reply socket), or None when the doit ended."""
    message, fds, _, _ = socket.recv_fds(renderings, 1 << 20, 4)
    if not message:
        return None
    reply = socket.socket(fileno=fds[0])
    _import_rendering()
    pid = os.fork()
    if pid == 0:
        renderings.close()
        reply.close()
        for stream in server_files:
            stream.close()
        _render(json.loads(message), *fds[1:])
    for fd in fds[1:]:
        os.close(fd)
    reply.sendall(json.dumps({"pid": pid}).encode())
    return pid, reply


def _import_rendering():
    """The rendering's imports, in the server, before its first rendering: a server whose doits
    render nothing stays smaller, and a doit forked from it costs less."""
    if all(name in sys.modules for name in RENDERING):
        return
    import matplotlib

    matplotlib.use("Agg")  # as report/charts.py sets it before it imports pyplot
    for name in RENDERING:
        __import__(name)
    gc.freeze()  # as the preloaded modules: shared with the children, untouched by collections


def _render(request, stdin, stdout, stderr):
    """The forked rendering: report/apart.py's main with the command's files and environment."""

    def render():
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(fd, target)
            os.close(fd)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 (fd 0 stays open)
        from nginx_eval.report import apart

        return apart.main()

    _run_and_exit(render)


def _run_and_exit(program):
    """Run `program` and end this process as Python ends on what it returned or raised: the
    same exit status and traceback, other threads joined, atexit handlers run, stdout and stderr
    flushed; then os._exit. Python's own exit would go on to tear down every module, writing to
    each page of the objects it shares with the server: a copy of most of the server's memory,
    for each doit."""
    try:
        status = _exit_status(program())
    except SystemExit as e:
        status = _exit_status(e.code)
    except BaseException:
        traceback.print_exc()
        status = 1
    try:
        threading._shutdown()  # what Python calls first at its exit: joins non-daemon threads
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


def _exit_status(code):
    """The exit status of a Python that ends on SystemExit(code)."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=sys.stderr)
    return 1


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


class RenderingsOfTheServer:
    """report/apart.py's ``procs`` in a doit of the server: its ``python -m
    nginx_eval.report.apart`` forked by the server (see the module docstring); every other
    attribute is core/procs.py's."""

    def __init__(self, procs, channel):
        self._procs = procs
        self._channel = channel
        self._lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self._procs, name)

    def run_limited(self, argv, **how):
        if list(argv[1:]) != ["-m", APART] or set(how) - RENDERING_OPTIONS:
            return self._procs.run_limited(argv, **how)
        return self._rendered(**how)

    def _rendered(self, cwd, env, timeout, stdin, stdout, stderr):
        """run_limited's Outcome of the rendering the server forked."""
        if self._procs.interrupted():
            raise self._procs.Interrupted()
        start = time.monotonic()
        umask = os.umask(0)
        os.umask(umask)
        request = json.dumps({"cwd": str(cwd), "env": dict(env), "umask": umask}).encode()
        files = [_fileno(stdin, 0), _fileno(stdout, 1), _fileno(stderr, 2)]
        mine, theirs = _message_pair()
        with mine:
            with self._lock, theirs:
                socket.send_fds(self._channel, [request], [theirs.fileno(), *files])
            pid = json.loads(mine.recv(1 << 16))["pid"]
            mine.settimeout(timeout)
            try:
                ended = mine.recv(1 << 16)
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                mine.settimeout(None)
                mine.recv(1 << 16)
                ended = None
        return self._procs.Outcome(
            exit_code=os.waitstatus_to_exitcode(json.loads(ended)["status"]) if ended else None,
            seconds=round(time.monotonic() - start, 3),
            timed_out=ended is None,
            cpu_seconds=None,  # the server reaps it, and counts it with the doit
        )


def _message_pair():
    """Two connected sockets that keep each message whole (a request and its descriptors, a
    reply): on a stream, a pid and an exit status sent one after the other could arrive as
    one read."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def _fileno(stream, default):
    """The descriptor a child gets for `stream` (a file, a descriptor, or None: this process's)."""
    if stream is None:
        return default
    return stream if isinstance(stream, int) else stream.fileno()


def main(source_root, requests_fd, replies_fd):
    sys.argv = ["-m"]  # as `python -m` has it while it imports (doit names itself after it)
    sys.path.insert(1, source_root)  # the package next to dodo.py, as dodo.py imports it
    for name in PRELOAD:
        __import__(name)
    from nginx_eval import pipeline
    from nginx_eval.doitext import plugins

    # doit's plugin look-ups, its commands' before the dodo file is read: each child selects
    # from the server's one reading of the installed entry points.
    plugins.read_entry_points_once()
    plugins.installed_entry_points()
    # doit orders the task creators by their line (inspect.getsourcelines): pipeline.py's lines
    # and tokenize's expressions, read and compiled once here.
    inspect.getsourcelines(pipeline.doit_tasks)
    requests = os.fdopen(int(requests_fd), "r")
    replies = os.fdopen(int(replies_fd), "w")
    for stream in (requests, replies):
        os.set_inheritable(stream.fileno(), False)
    gc.freeze()  # the preloaded modules stay shared with the children: no collection touches them
    request, channel = _serve(requests, replies)
    _become(dict(request, source_root=source_root))
    from nginx_eval.report import apart

    apart.procs = RenderingsOfTheServer(apart.procs, channel)
    _run_and_exit(_doit)


def _doit():
    """`python -m doit` once its imports are done."""
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
        # Read with os.read and split here: a buffered file's readline can take the doit's end
        # along with its start when both arrived, and a select on the pipe would then wait for
        # a line already read (a quick `doit list` hung its test so).
        self._pending = b""
        self._lock = threading.Lock()
        # The processor time of the doits run so far: the worker does not reap them, the server
        # does, so the worker's own accounting of its children leaves them out.
        self.cpu_seconds = 0.0

    def _reply(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._pending:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._replies_r], [], [], left)[0]:
                    return None
            chunk = os.read(self._replies_r, 1 << 16)
            if not chunk:
                raise RuntimeError(f"the doit server ended ({self._process.wait()})")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
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
        os.close(self._replies_r)


_servers: dict[int, DoitServer] = {}


def server(source_root: Path) -> DoitServer:
    """This process's server, started on first use."""
    if os.getpid() not in _servers:
        _servers[os.getpid()] = started = DoitServer(source_root)
        atexit.register(started.close)
    return _servers[os.getpid()]


if __name__ == "__main__":
    main(*sys.argv[1:])
