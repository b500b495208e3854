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


@pytest.fixture
def server():
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
