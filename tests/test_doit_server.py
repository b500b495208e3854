"""The tests' doit server (doit_server.py) runs what `python -m doit` runs, as it would run it."""

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import SOURCE_ROOT
from doit_server import DoitServer

E2E = True

DODO = textwrap.dedent(
    """
    import os, sys

    def task_show():
        def show():
            umask = os.umask(0)
            print(os.getcwd(), os.environ.get("SEEN"), oct(umask), sys.argv[1:], sys.stdin.read())
            print("to stderr", file=sys.stderr)
        return {"actions": [show], "verbosity": 2}

    def task_fail():
        return {"actions": ["exit 3"]}

    def task_sleep():
        return {"actions": ["sleep 60"]}
    """
)


@pytest.fixture(scope="module")
def server():
    """One server for the module's tests (its start imports the statistics and charts)."""
    started = DoitServer(SOURCE_ROOT)
    yield started
    started.close()


def as_subprocess(argv, env):
    proc = subprocess.run(
        [sys.executable, "-m", "doit", *argv], env=env, capture_output=True, text=True
    )
    return proc.returncode, proc.stdout, proc.stderr


def test_a_forked_doit_prints_and_exits_as_python_m_doit(server, tmp_path, monkeypatch):
    (tmp_path / "dodo.py").write_text(DODO)
    monkeypatch.chdir(tmp_path)
    env = dict(os.environ, SEEN="from the request")
    before = os.umask(0o027)
    try:
        for argv in (
            ["-f", "dodo.py", "--db-file", ".db", "show"],
            ["-f", "dodo.py", "--db-file", ".db", "fail"],
            ["-f", "dodo.py", "--db-file", ".db", "nosuchtask"],
        ):
            assert server.run(argv, env, timeout=60) == as_subprocess(argv, env), argv
    finally:
        os.umask(before)
    status, out, err = server.run(["-f", "dodo.py", "--db-file", ".db", "show"], env, 60)
    assert (status, err) == (0, "to stderr\n")
    argv = ["-f", "dodo.py", "--db-file", ".db", "show"]
    assert f"{tmp_path} from the request {oct(before)} {argv} \n" in out


def test_a_doit_past_its_time_is_killed(server, tmp_path, monkeypatch):
    (tmp_path / "dodo.py").write_text(DODO)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(subprocess.TimeoutExpired):
        server.run(["-f", "dodo.py", "--db-file", ".db", "sleep"], dict(os.environ), timeout=1)
    # The server took the killed child's status and serves the next command.
    assert server.run(["-f", "dodo.py", "--db-file", ".db", "fail"], dict(os.environ), 60)[0] == 1


RENDERING_DODO = textwrap.dedent(
    """
    import os
    from nginx_eval.report import apart

    def rendering(code, timeout=None):
        def action():
            if timeout:
                apart.TIMEOUT_SECONDS = timeout
            print("doit", os.getpid(), flush=True)
            apart.run_apart(exec, code)
        return {"actions": [action], "verbosity": 2}

    def task_prints():
        return rendering("import os; print('rendered in', os.getcwd(), os.environ['SEEN'])")

    def task_parent():
        return rendering("import os; print('parent', os.getppid())")

    def task_refuses():
        return rendering("from nginx_eval.core.errors import UserError; raise UserError('no')")

    def task_fails():
        return rendering("import sys; print('said', file=sys.stderr); sys.exit(5)")

    def task_hangs():
        code = "import os, time; print('hung', os.getpid(), flush=True); time.sleep(60)"
        return rendering(code, 1)

    def task_outlives():
        code = "import os, time; open('pid', 'w').write(str(os.getpid())); time.sleep(60)"
        return rendering(code)
    """
)


def without_pids(text):
    return "\n".join(
        w for w in text.splitlines() if not w.startswith(("doit ", "parent ", "hung "))
    )


def test_a_rendering_forked_by_the_server_does_what_python_m_apart_does(
    server, tmp_path, monkeypatch
):
    """report/apart.py's child, forked by the server instead of started: the same output,
    errors, exit status and time limit as `python -m nginx_eval.report.apart` under
    `python -m doit`; its parent is the server."""
    (tmp_path / "dodo.py").write_text(RENDERING_DODO)
    monkeypatch.chdir(tmp_path)
    env = dict(os.environ, SEEN="seen")
    forked = {}
    for task in ("prints", "refuses", "fails", "hangs"):
        argv = ["-f", "dodo.py", "--db-file", ".db", task]
        forked[task], started = server.run(argv, env, timeout=60), as_subprocess(argv, env)
        assert forked[task][0] == started[0], task
        assert without_pids(forked[task][1]) == without_pids(started[1]), task
        assert forked[task][2] == started[2], task
    assert forked["prints"][0] == 0 and f"rendered in {tmp_path} seen\n" in forked["prints"][1]
    # doit says a task's exception on its stdout.
    status, out, _ = forked["refuses"]
    assert status == 2 and "nginx_eval.core.errors.UserError: no\n" in out, out
    assert "RuntimeError: exec exited with 5: said\n" in forked["fails"][1]
    out = forked["hangs"][1]
    assert "RuntimeError: exec timed out after 1 s: \n" in out, out
    hung = int(next(w for w in out.splitlines() if w.startswith("hung ")).split()[1])
    with pytest.raises(ProcessLookupError):
        os.kill(hung, 0)
    _, out, _ = server.run(["-f", "dodo.py", "--db-file", ".db", "parent"], env, 60)
    words = dict(line.split() for line in out.splitlines() if line.startswith(("doit", "parent")))
    assert words["parent"] != words["doit"]
    _, out, _ = as_subprocess(["-f", "dodo.py", "--db-file", ".db", "parent"], env)
    words = dict(line.split() for line in out.splitlines() if line.startswith(("doit", "parent")))
    assert words["parent"] == words["doit"]


def test_a_rendering_ends_with_its_doit(server, tmp_path, monkeypatch):
    (tmp_path / "dodo.py").write_text(RENDERING_DODO)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(subprocess.TimeoutExpired):
        server.run(["-f", "dodo.py", "--db-file", ".db", "outlives"], dict(os.environ), timeout=3)
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "pid").read_text()), 0)
    assert server.run(["-f", "dodo.py", "--db-file", ".db", "parent"], dict(os.environ), 60)[0] == 0


def test_a_doits_start_and_end_that_arrive_together_are_both_read():
    # A quick doit's two replies can reach the pipe before the first is read: the second must
    # not wait for more data (a buffered readline had taken it along, and a select on the pipe
    # then waited out the doit's time limit).
    reader = DoitServer.__new__(DoitServer)
    read_end, write_end = os.pipe()
    reader._replies_r, reader._pending = read_end, b""
    try:
        os.write(write_end, b'{"pid": 7}\n{"status": 0, "cpu": 0.1}\n')
        assert reader._reply() == {"pid": 7}
        assert reader._reply(timeout=1) == {"status": 0, "cpu": 0.1}
        assert reader._reply(timeout=0.05) is None
    finally:
        os.close(read_end)
        os.close(write_end)
