"""The stand-ins for the internet a SWE-bench task's tests reach (swebench/services.py), each
mechanism on its own: the private network's route that makes a connection to an unroutable
address time out, the names its tests use mapped to the stand-in servers, and their certificate
trusted through the checkout's own CA bundle, bound over it with the checkout untouched.
The servers run from a venv of this Python (its Werkzeug) with a small WSGI application standing
in for httpbin; the real one is measured in docs/benchmark.md."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from unittest.mock import patch

import pytest
from test_swe_sandbox import fixed_view

from nginx_eval.agent import loopback, swe_view
from nginx_eval.core import rootfs
from nginx_eval.swebench import services

CONNECT = """
import socket, time
s = socket.socket(); s.settimeout(0.5); t = time.monotonic()
try:
    s.connect(("10.255.255.1", 80)); print("connected")
except socket.timeout:
    print("timed out", round(time.monotonic() - t, 1))
except OSError as e:
    print("refused", e.errno)
"""


def private_network_works():
    """Whether this machine lets a command have a network namespace with `ip` in it."""
    if not shutil.which("unshare") or not shutil.which("ip"):
        return False
    probe = services.outer_prefix("/dev/null")[:-3] + ["true"]
    return subprocess.run(probe, capture_output=True).returncode == 0


needs_netns = pytest.mark.skipif(
    not private_network_works(), reason="no network namespace with `ip` on this machine"
)


@needs_netns
def test_a_connection_to_an_unroutable_address_times_out_as_on_the_internet(tmp_path):
    """With no route at all the connect fails at once (ENETUNREACH); with the stand-ins' route
    into the loopback it is dropped, and the client's own timeout ends it."""
    net = tmp_path / "net.sh"
    net.write_text(services.NET_SETUP)
    unshare = services.outer_prefix(net)[: services.outer_prefix(net).index("--")]
    alone = subprocess.run(
        [*unshare, "--", sys.executable, "-c", CONNECT], capture_output=True, text=True
    )
    assert alone.stdout.startswith("refused 101"), alone.stdout + alone.stderr
    routed = subprocess.run(
        [*services.outer_prefix(net), sys.executable, "-c", CONNECT],
        capture_output=True,
        text=True,
    )
    assert routed.stdout.strip() == "timed out 0.5", routed.stdout + routed.stderr


HTTPBIN_STAND_IN = """
def app(environ, start_response):
    body = ("httpbin " + environ["HTTP_HOST"] + environ["PATH_INFO"]).encode()
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return [body]
"""

CLIENT = """
import socket, ssl, sys, urllib.request
context = ssl.create_default_context(cafile=sys.argv[1])
opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context),
                                     urllib.request.ProxyHandler({}))
for url in ("https://httpbin.org/get", "http://httpbin.org/status/301",
            "https://www.google.co.uk/"):
    print(url, opener.open(url, timeout=5).read().decode().strip())
try:
    socket.getaddrinfo("doesnotexist.google.com", 80)
except socket.gaierror:
    print("doesnotexist.google.com does not resolve")
"""


def services_venv(tmp_path):
    """A venv of this Python (its Werkzeug) with the stand-in httpbin package in it."""
    venv = tmp_path / "services-venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "httpbin").mkdir()
    (site / "httpbin" / "__init__.py").write_text(HTTPBIN_STAND_IN)
    return venv


def test_the_stand_ins_are_made_for_a_run_with_the_checkouts_bundle_and_the_ca(tmp_path):
    """offline() writes the hosts file, the resolver, the servers' configuration and a copy of
    the checkout's CA bundle with the run's CA appended; the checkout keeps its own."""
    checkout = tmp_path / "testbed"
    (checkout / "requests").mkdir(parents=True)
    (checkout / "requests" / "cacert.pem").write_bytes(b"ORIGINAL BUNDLE\n")
    with patch.object(services, "services_venv", return_value=tmp_path / "venv"):
        made = services.offline(None, "psf/requests", None, tmp_path / "run", checkout)  # type: ignore[arg-type]
    assert isinstance(made, services.Offline)
    run = tmp_path / "run"
    hosts = (run / "hosts").read_text()
    assert "127.0.0.1\thttpbin.org\n" in hosts and "127.0.0.1\twww.google.co.uk\n" in hosts
    assert (run / "resolv.conf").read_text() == "nameserver 127.0.0.1\n"
    bundle = made.bundles["requests/cacert.pem"].read_bytes()
    assert bundle.startswith(b"ORIGINAL BUNDLE\n") and bundle.endswith(
        (run / "ca.pem").read_bytes()
    )
    assert (checkout / "requests" / "cacert.pem").read_bytes() == b"ORIGINAL BUNDLE\n"
    config = json.loads((run / "standins.json").read_text())
    assert config["httpbin"] == ["httpbin.org"] and config["https_port"] == 443
    assert ("--ro-bind", made.bundles["requests/cacert.pem"], "/testbed/requests/cacert.pem") in (
        made.mounts("/testbed")
    )
    assert services.offline(None, "pallets/flask", None, run, checkout) is None  # type: ignore[arg-type]


@pytest.mark.e2e
@needs_netns
def test_the_tests_names_reach_the_stand_ins_over_http_and_https_trusted_by_the_bundle(tmp_path):
    """In bubblewrap as a verdict runs the tests: httpbin.org and www.google.co.uk reach the
    stand-in servers by the private /etc/hosts, https verified with the bundle bound over the
    checkout's (and nothing else), an unknown name fails at once."""
    checkout = tmp_path / "testbed"
    (checkout / "requests").mkdir(parents=True)
    (checkout / "requests" / "cacert.pem").write_bytes(b"")
    (checkout / "client.py").write_text(CLIENT)
    venv = services_venv(tmp_path)
    with patch.object(services, "services_venv", return_value=venv):
        made = services.offline(None, "psf/requests", None, tmp_path / "run", checkout)  # type: ignore[arg-type]
    assert isinstance(made, services.Offline)
    argv = rootfs.command_in(
        Path("/"),
        [*made.launcher, sys.executable, "client.py", "/testbed/requests/cacert.pem"],
        cwd="/testbed",
        network=True,
        mounts=[("--bind", checkout, "/testbed"), *made.mounts("/testbed")],
        uid=0,
    )
    done = subprocess.run(
        [*made.outer, *argv], capture_output=True, text=True, timeout=60, env=rootfs.environment()
    )
    assert done.stdout.splitlines() == [
        "https://httpbin.org/get httpbin httpbin.org/get",
        "http://httpbin.org/status/301 httpbin httpbin.org/status/301",
        "https://www.google.co.uk/ <!doctype html><title>stand-in</title>",
        "doesnotexist.google.com does not resolve",
    ], done.stdout + done.stderr
    assert done.returncode == 0


def test_the_sandbox_view_runs_the_stand_ins_in_its_own_network(tmp_path):
    """An attempt's view: the network set up by the host's root, the files shown read-only,
    the bundle over the workspace's file, the launcher before the command, and the addresses
    the tests reach without a proxy."""
    made = services.Offline(tmp_path, tmp_path / "venv", {"requests/cacert.pem": tmp_path / "b"})
    (tmp_path / "ca.pem").write_bytes(b"CA\n")
    standins = services.sandbox_view(made, "/testbed", ("10.255.255.1", "httpbin.org"))
    lines = swe_view.view_lines(fixed_view(), "/ws", standins)
    assert f"net {tmp_path}/net.sh" in lines
    assert (
        f"ro {tmp_path} /opt/swe-standins" in lines and f"ro {tmp_path}/hosts /etc/hosts" in lines
    )
    assert f"over {tmp_path}/b requests/cacert.pem" in lines
    assert lines[-2:] == [
        "launch /opt/swe-services/bin/python /opt/swe-standins/standin_server.py "
        "/opt/swe-standins/standins.json --",
        "setenv NGINX_EVAL_SANDBOX_DIRECT 10.255.255.1,httpbin.org",
    ]
    if os.path.isfile(services.SYSTEM_BUNDLE):
        assert f"ro {tmp_path}/system-bundle.pem {services.SYSTEM_BUNDLE}" in lines
        assert (tmp_path / "system-bundle.pem").read_bytes().endswith(b"\nCA\n")


def test_the_loopback_proxy_serves_the_hosts_files_loopback_names_itself(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n127.0.0.1\thttpbin.org  # stand-in\n10.0.0.1 other\n")
    names = loopback.hosts_file_names(str(hosts))
    assert names == {"localhost", "httpbin.org"}
    with patch.object(loopback, "HOSTS_FILE_NAMES", names):
        assert loopback.is_loopback("HTTPBIN.ORG") and not loopback.is_loopback("other")
    assert loopback.hosts_file_names(str(tmp_path / "missing")) == frozenset()


def test_the_stand_in_server_answers_by_host(tmp_path, monkeypatch):
    """httpbin's application for its names, the plain page for any other host."""
    from nginx_eval.swebench import standin_server

    (tmp_path / "httpbin").mkdir()
    (tmp_path / "httpbin" / "__init__.py").write_text(HTTPBIN_STAND_IN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "httpbin", raising=False)
    app = standin_server.application(["httpbin.org"])
    said = []

    def start(status, headers):
        said.append(status)

    got = app({"HTTP_HOST": "HTTPBIN.org:443", "PATH_INFO": "/get"}, start)
    assert got == [b"httpbin HTTPBIN.org:443/get"]
    page = app({"HTTP_HOST": "www.google.co.uk", "REQUEST_METHOD": "GET"}, start)
    assert page == [standin_server.OTHER_BODY] and said == ["200 OK", "200 OK"]
    assert standin_server.host_of({"HTTP_HOST": "[::1]:80"}) == "[::1]"
