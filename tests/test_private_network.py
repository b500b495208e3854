"""Each test file runs in a network of its own (prove/network.py, prove.run_prove_files).

The scenarios run the real prove on .t files that hold a fixed port, as nginx-tests before
parallel support did, two proves at once from two threads, as parallel doit workers do.
"""

import socket
import subprocess
import sys
import threading

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
