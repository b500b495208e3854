"""The environment a test file runs in (nginx_eval/prove/env.py): daemons nginx-tests start must run
as root, as the harness and CI do; OpenSSL judges certificates by the harness's configuration."""

import os
import shutil
import textwrap
from pathlib import Path

import pytest

from nginx_eval.core.layout import Layout
from nginx_eval.prove import env as testenv
from nginx_eval.prove.env import OPENSSL_CONF_FILE, daemon_shims, environment_inputs
from nginx_eval.prove.stage import run_prove_files
from nginx_eval.prove.tap import parse_tap

as_root_with_memcached = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the memcached refusal happens only as root"),
    pytest.mark.skipif(
        not shutil.which("memcached"),
        reason="memcached not installed (scripts/setup-debian.sh installs it)",
    ),
]


def memcached_test(func):
    for mark in as_root_with_memcached:
        func = mark(func)
    return func


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
    return (
        parse_tap("memcached.t", (tap_dir / "memcached.t.tap").read_text()),
        (tap_dir / "memcached.t.stderr").read_text(),
    )


@pytest.mark.e2e
@memcached_test
def test_memcached_runs_as_root_in_a_test(tmp_path):
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    result, stderr = run_memcached_test(tmp_path, layout)
    assert result.results == {"memcached.t:1 memcached answers": True}, stderr
    shim = Path(daemon_shims(layout)) / "memcached"
    assert shim.read_text().endswith(f"exec '{shutil.which('memcached')}' -u root \"$@\"\n")


@pytest.mark.e2e
@memcached_test
def test_without_the_shim_memcached_refuses_root(tmp_path, monkeypatch):
    # The hazard is real: the same file, with no shim on PATH, does not get an answer.
    monkeypatch.setattr("nginx_eval.prove.stage.daemon_shims", lambda layout: None)
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    result, stderr = run_memcached_test(tmp_path, layout)
    assert result.results == {"memcached.t:1 memcached answers": False}


# What mail_capability.t of 2017 does: make a 1024-bit certificate with a config of its own, then
# have it loaded (here by `openssl s_client -cert`, which checks it as nginx does, aimed at a
# socket that is not there).
OLD_CERTIFICATE_T = textwrap.dedent("""\
    #!/usr/bin/perl
    use strict;
    use warnings;
    use Test::More;
    use File::Temp qw/ tempdir /;
    plan(tests => 2);
    my $d = tempdir(CLEANUP => 1);
    open my $f, '>', "$d/openssl.conf" or die;
    print $f "[ req ]\\ndefault_bits = 1024\\nencrypt_key = no\\n"
        . "distinguished_name = dn\\n[ dn ]\\n";
    close $f;
    system("openssl req -x509 -new -config '$d/openssl.conf' -subj '/CN=localhost/' "
        . "-out '$d/c.crt' -keyout '$d/c.key' >/dev/null 2>&1") == 0 or die "no certificate";
    my $out = `openssl s_client -unix '$d/none' -cert '$d/c.crt' -key '$d/c.key' </dev/null 2>&1`;
    unlike($out, qr/error setting certificate/, 'certificate accepted');
    is($ENV{OPENSSL_CONF}, '@CONF@', 'the harness configuration');
    """)


def run_old_certificate_test(tmp_path, conf):
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    tree = tmp_path / "tests"
    (tree / "lib").mkdir(parents=True)
    (tree / "old_cert.t").write_text(OLD_CERTIFICATE_T.replace("@CONF@", str(conf)))
    binary = tmp_path / "objs" / "nginx"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    tap_dir = tmp_path / "tap"
    run_prove_files(layout, tree, binary, ["old_cert.t"], 60, tap_dir)
    return (
        parse_tap("old_cert.t", (tap_dir / "old_cert.t.tap").read_text()).results,
        (tap_dir / "old_cert.t.stderr").read_text(),
    )


@pytest.mark.e2e
@pytest.mark.skipif(not shutil.which("openssl"), reason="needs the openssl program")
def test_a_test_file_runs_under_the_harness_openssl_configuration(tmp_path):
    results, stderr = run_old_certificate_test(tmp_path, OPENSSL_CONF_FILE)
    assert results == {
        "old_cert.t:1 certificate accepted": True,
        "old_cert.t:2 the harness configuration": True,
    }, stderr


@pytest.mark.e2e
@pytest.mark.skipif(not shutil.which("openssl"), reason="needs the openssl program")
def test_at_debians_default_level_the_old_certificate_is_refused(tmp_path, monkeypatch):
    # The hazard is real: the same file under security level 2 (Debian 12's default).
    level2 = tmp_path / "level2.cnf"
    level2.write_text(OPENSSL_CONF_FILE.read_text().replace("@SECLEVEL=0", "@SECLEVEL=2"))
    monkeypatch.setattr(testenv, "OPENSSL_CONF_FILE", level2)
    results, _ = run_old_certificate_test(tmp_path, level2)
    assert results == {
        "old_cert.t:1 certificate accepted": False,
        "old_cert.t:2 the harness configuration": True,
    }


def test_the_openssl_configuration_is_an_input_of_prove(tmp_path, monkeypatch):
    # An edit to the configuration proves again: its content, not only its path, is an input.
    conf = tmp_path / "openssl.cnf"
    conf.write_text(OPENSSL_CONF_FILE.read_text())
    monkeypatch.setattr(testenv, "OPENSSL_CONF_FILE", conf)
    before = environment_inputs(tmp_path / "tests")
    assert before["OPENSSL_CONF"] == str(conf)
    conf.write_text(conf.read_text().replace("@SECLEVEL=0", "@SECLEVEL=1"))
    after = environment_inputs(tmp_path / "tests")
    assert after["openssl_conf"] != before["openssl_conf"]
    assert {k: v for k, v in after.items() if k != "openssl_conf"} == {
        k: v for k, v in before.items() if k != "openssl_conf"
    }
