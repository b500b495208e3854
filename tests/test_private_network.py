"""Each test file runs in a network and a process namespace of its own (prove/network.py,
prove/namespaces.py, prove.run_prove_files).

The scenarios run the real prove on .t files that hold a fixed port, as nginx-tests before
parallel support did, two proves at once from two threads, as parallel doit workers do.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from nginx_eval.core.layout import Layout
from nginx_eval.prove import network as private_network
from nginx_eval.prove.stage import run_prove_files
from nginx_eval.prove.tap import parse_tap

pytestmark = pytest.mark.skipif(
    private_network.problem() is not None,
    reason=f"no network namespace here: {private_network.problem()}",
)

# Holds PORT for HOLD seconds, and writes when it held it to LOG.
HOLDING_TEST = r"""#!/usr/bin/perl
use strict;
use IO::Socket::INET;
use Time::HiRes qw/ time sleep /;

print "1..1\n";
my $start = time();
my $s = IO::Socket::INET->new(LocalAddr => '127.0.0.1:@PORT@', Listen => 5, ReuseAddr => 1);
if (!$s) {
	print "not ok 1 - bind: $!\n";
	exit 0;
}
sleep(@HOLD@);
open(my $log, '>>', '@LOG@') or die;
printf $log "%.3f %.3f\n", $start, time();
close($log);
print "ok 1 - held the port\n";
"""
FIXED_PORT_LIBRARY = "package Test::Nginx;\n\nsub new { bless {}, shift }\n\n1;\n"
PARALLEL_LIBRARY = FIXED_PORT_LIBRARY.replace("\n1;", "\nsub port {\n\treturn 8080;\n}\n\n1;")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def holding_tree(tmp_path, library, hold=1.5):
    tree = tmp_path / "tests"
    (tree / "lib" / "Test").mkdir(parents=True)
    (tree / "lib" / "Test" / "Nginx.pm").write_text(library)
    log = tmp_path / "held.log"
    port = free_port()
    for name in ("first.t", "second.t"):
        (tree / name).write_text(
            HOLDING_TEST.replace("@PORT@", str(port))
            .replace("@HOLD@", str(hold))
            .replace("@LOG@", str(log))
        )
    return tree, log, port


def run_two_at_once(tmp_path, tree):
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    binary = tmp_path / "objs" / "nginx"
    binary.parent.mkdir()
    binary.write_text("")
    results = {}

    def one(name):
        results[name] = run_prove_files(layout, tree, binary, [name], 60, tmp_path / "tap" / name)

    threads = [threading.Thread(target=one, args=(n,)) for n in ("first.t", "second.t")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    passed = {}
    for name, files in results.items():
        tap = (tmp_path / "tap" / name / files[name]["tap"]).read_text()
        passed[name] = parse_tap(name, tap).results.get(f"{name}:1 held the port") is True
    return results, passed


def intervals(log):
    return sorted(tuple(map(float, line.split())) for line in log.read_text().splitlines())


def test_program_gives_an_up_loopback_and_no_other_interface():
    script = (
        "import socket\n"
        "print(sorted(l.split(':')[0].strip() for l in open('/proc/net/dev')"
        ".read().splitlines()[2:]))\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
        "c = socket.create_connection(s.getsockname()); print('connected')\n"
    )
    out = subprocess.run(
        private_network.command([sys.executable, "-c", script]),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.splitlines() == ["['lo']", "connected"]


def test_a_port_taken_on_the_machine_is_free_inside(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        script = f"import socket; socket.socket().bind(('127.0.0.1', {port})); print('bound')"
        inside = subprocess.run(
            private_network.command([sys.executable, "-c", script]), capture_output=True, text=True
        )
        outside = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert inside.stdout.strip() == "bound", inside.stderr
    assert "Address already in use" in outside.stderr


def test_program_without_a_command_is_a_usage_error():
    done = subprocess.run(private_network.command([]), capture_output=True, text=True)
    assert done.returncode == 2 and "usage" in done.stderr


def test_turned_off_by_the_environment():
    assert private_network.problem({private_network.ENV_OFF: "0"}).startswith("turned off")
    assert private_network.problem({private_network.ENV_OFF: "1"}) is None


def test_fixed_port_trees_are_told_by_their_test_library(tmp_path):
    old, _, _ = holding_tree(tmp_path / "old", FIXED_PORT_LIBRARY)
    new, _, _ = holding_tree(tmp_path / "new", PARALLEL_LIBRARY)
    assert private_network.uses_fixed_ports(old)
    assert not private_network.uses_fixed_ports(new)
    assert not private_network.uses_fixed_ports(tmp_path / "no-tree")


@pytest.mark.e2e
def test_two_proves_of_one_fixed_port_both_pass_in_private_networks(tmp_path):
    tree, log, _ = holding_tree(tmp_path, FIXED_PORT_LIBRARY)
    results, passed = run_two_at_once(tmp_path, tree)
    assert passed == {"first.t": True, "second.t": True}
    assert {files[name]["network"] for name, files in results.items()} == {"private"}
    (a_start, a_end), (b_start, b_end) = intervals(log)
    assert b_start < a_end, "the two files were meant to hold the port at the same time"


@pytest.mark.e2e
def test_on_the_shared_network_fixed_port_files_take_turns(tmp_path, monkeypatch):
    monkeypatch.setenv(private_network.ENV_OFF, "0")
    tree, log, _ = holding_tree(tmp_path, FIXED_PORT_LIBRARY)
    results, passed = run_two_at_once(tmp_path, tree)
    assert passed == {"first.t": True, "second.t": True}
    assert {files[name]["network"] for name, files in results.items()} == {"shared"}
    (a_start, a_end), (b_start, b_end) = intervals(log)
    assert b_start >= a_end


@pytest.mark.e2e
def test_the_shared_network_really_collides_without_the_turns(tmp_path, monkeypatch):
    # Why the private network matters: a tree that claims parallel support takes no turns, and
    # two files binding the same port on the machine's network fail each other.
    monkeypatch.setenv(private_network.ENV_OFF, "0")
    tree, log, _ = holding_tree(tmp_path, PARALLEL_LIBRARY)
    _, passed = run_two_at_once(tmp_path, tree)
    assert sorted(passed.values()) == [False, True]


# A test file that does what a hostile build could: signal a process of the host it was told of,
# signal every process it may, and leave one running that no token or process group finds.
REACHING_TEST = r"""#!/usr/bin/perl
use strict;
use POSIX ();

print "1..3\n";
# Where the host's processes can be signalled, nothing is killed: the file fails instead.
if (kill(0, $ENV{BYSTANDER})) {
	print "not ok 1 - the host's processes are out of reach\n";
	exit 0;
}
print "ok 1 - the host's processes are out of reach\n";
my $child = fork() // die "fork: $!";
if (!$child) {
	POSIX::setsid();
	%ENV = ();
	exec('sleep', '@LEFT@') or POSIX::_exit(1);
}
print "ok 2 - prove is the namespace's first process\n" if getppid() == 1;
my $killed = kill('KILL', -1);
print "ok 3 - kill -1 reached what the file started ($killed)\n";
"""


def processes_running(argv):
    """Host pids of the processes whose command line is `argv`."""
    wanted = "\0".join(argv).encode() + b"\0"
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if f.read() == wanted:
                        found.append(int(entry))
            except OSError:
                pass
    return found


@pytest.mark.e2e
def test_a_test_file_reaches_no_process_of_the_host_and_leaves_none(tmp_path):
    left = "297.25"  # a sleep nothing else on the machine runs
    tree = tmp_path / "tests"
    tree.mkdir()
    (tree / "reach.t").write_text(REACHING_TEST.replace("@LEFT@", left))
    bystander = subprocess.Popen(["sleep", "300"])
    try:
        layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "out")
        binary = tmp_path / "objs" / "nginx"
        binary.parent.mkdir()
        binary.write_text("")
        runs = run_prove_files(
            layout,
            tree,
            binary,
            ["reach.t"],
            60,
            tmp_path / "tap",
            extra_env={"BYSTANDER": str(bystander.pid)},
        )
        tap = (tmp_path / "tap" / "reach.t.tap").read_text()
        assert bystander.poll() is None, "the test file killed a process of the host"
    finally:
        bystander.kill()
        bystander.wait()
    results = parse_tap("reach.t", tap).results
    assert list(results.values()) == [True, True, True], tap
    assert runs["reach.t"]["exit_code"] == 0
    assert processes_running(["sleep", left]) == []


def test_the_namespaces_program_ends_as_its_command_does():
    def status(script):
        return subprocess.run(private_network.command(["sh", "-c", script])).returncode

    # The command is the PID namespace's init: a SIGKILL of its own from inside does not end it...
    assert status("exit 3") == 3
    assert status("kill -KILL $$; exit 4") == 4
    # ...one from outside does, and the program ends by the same signal.
    sleeping = ["sleep", "29.75"]
    started = subprocess.Popen(private_network.command(sleeping))
    deadline = time.monotonic() + 10
    while not processes_running(sleeping) and time.monotonic() < deadline:
        time.sleep(0.02)
    (inside,) = processes_running(sleeping)
    os.kill(inside, signal.SIGKILL)
    assert started.wait(timeout=10) == -signal.SIGKILL
