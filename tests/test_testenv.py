"""The environment a test file runs in (nginx_eval/testenv.py): daemons nginx-tests start must run
as root, as the harness and CI do."""

import os
import shutil
import textwrap
from pathlib import Path

import pytest

from nginx_eval.core.layout import Layout
from nginx_eval.prove.stage import run_prove_files
from nginx_eval.prove.tap import parse_tap
from nginx_eval.prove.env import daemon_shims

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the memcached refusal happens only as root"),
    pytest.mark.skipif(not shutil.which("memcached"),
                       reason="memcached not installed (scripts/setup-debian.sh installs it)"),
]

# What memcached.t, memcached_keepalive.t and gunzip_memcached.t do: start memcached as a forked
# daemon, with no -u, then talk to it.
MEMCACHED_T = textwrap.dedent("""\
    #!/usr/bin/perl
    use strict;
    use warnings;
    use Test::More;
    use IO::Socket::INET;
    plan(tests => 1);
    my $port = 20000 + $$ % 10000;
    my $pid = fork();
    if ($pid == 0) { exec('memcached', '-l', '127.0.0.1', '-p', $port, '-U', '0'); exit 0; }
    my $s;
    for (1 .. 50) {
        $s = IO::Socket::INET->new(PeerAddr => "127.0.0.1:$port") and last;
        select undef, undef, undef, 0.1;
    }
    my $reply = '';
    if ($s) { print $s "version\\r\\n"; $reply = <$s> // ''; }
    like($reply, qr/^VERSION /, 'memcached answers');
    kill 'TERM', $pid;
    waitpid($pid, 0);
    """)


def run_memcached_test(tmp_path, layout):
    tree = tmp_path / "tests"
    (tree / "lib").mkdir(parents=True)
    (tree / "memcached.t").write_text(MEMCACHED_T)
    binary = tmp_path / "objs" / "nginx"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    tap_dir = tmp_path / "tap"
    run_prove_files(layout, tree, binary, ["memcached.t"], 60, tap_dir)
    return (parse_tap("memcached.t", (tap_dir / "memcached.t.tap").read_text()),
            (tap_dir / "memcached.t.stderr").read_text())


def test_memcached_runs_as_root_in_a_test(tmp_path):
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    result, stderr = run_memcached_test(tmp_path, layout)
    assert result.results == {"memcached.t:1 memcached answers": True}, stderr
    shim = Path(daemon_shims(layout)) / "memcached"
    assert shim.read_text().endswith(f"exec '{shutil.which('memcached')}' -u root \"$@\"\n")


def test_without_the_shim_memcached_refuses_root(tmp_path, monkeypatch):
    # The hazard is real: the same file, with no shim on PATH, does not get an answer.
    monkeypatch.setattr("nginx_eval.prove.stage.daemon_shims", lambda layout: None)
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    result, stderr = run_memcached_test(tmp_path, layout)
    assert result.results == {"memcached.t:1 memcached answers": False}
