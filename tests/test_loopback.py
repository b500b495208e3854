"""The loopback proxy each sandboxed phase runs (nginx_eval/agent/loopback.py): which requests it
sends to a server on the loopback and which to srt's proxy, and what each receives. Run here on
the host's loopback, with a stand-in for srt's proxy that records what reaches it."""

import socket
import subprocess
import sys
import threading
import time

import pytest
from local_http import serve

from nginx_eval.agent import loopback
from nginx_eval.agent.loopback import is_loopback, origin_form, request_target


def test_loopback_hosts_are_the_names_and_addresses_of_the_loopback():
    for host in (
        "localhost",
        "LOCALHOST.",
        "127.0.0.1",
        "127.9.9.9",
        "::1",
        "[::1]",
        "ip6-localhost",
        "api.localhost",
    ):
        assert is_loopback(host), host
    for host in ("example.org", "10.0.0.1", "128.0.0.1", "[::2]", "localhost.example.org", ""):
        assert not is_loopback(host), host


def test_a_request_to_a_proxy_is_read_for_its_host_port_and_origin_form_target():
    assert request_target(b"GET http://127.0.0.1:8080/a?b=1 HTTP/1.1\r\nHost: x\r\n\r\n") == (
        "GET",
        "127.0.0.1",
        8080,
        "/a?b=1",
    )
    assert request_target(b"GET http://localhost/ HTTP/1.1\r\n\r\n") == (
        "GET",
        "localhost",
        80,
        "/",
    )
    assert request_target(b"GET http://[::1]:81 HTTP/1.1\r\n\r\n") == ("GET", "::1", 81, "/")
    assert request_target(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n")[:3] == ("CONNECT", "::1", 8443)
    assert request_target(b"CONNECT api.anthropic.com:443 HTTP/1.1\r\n\r\n")[1:3] == (
        "api.anthropic.com",
        443,
    )
    # Not a proxy request it can place: sent on unchanged.
    assert request_target(b"GET /plain HTTP/1.1\r\n\r\n")[1] == ""
    assert request_target(b"garbage")[1] == ""


def test_a_request_for_the_agents_server_loses_its_proxy_headers_and_keeps_the_rest():
    head = (
        b"POST http://127.0.0.1:8080/x?y HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
        b"Proxy-Authorization: Basic c3J0\r\nProxy-Connection: Keep-Alive\r\n"
        b"Connection: keep-alive\r\nContent-Length: 3\r\n\r\n"
    )
    assert origin_form(head, "/x?y") == (
        b"POST /x?y HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 3\r\n"
        b"Connection: close\r\n\r\n"
    )


class Recorder:
    """A TCP server that keeps what each connection sent and answers with a fixed reply."""

    def __init__(self, reply):
        self.reply, self.received = reply, []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            data = b""
            conn.settimeout(2)
            try:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            self.received.append(data)
            conn.sendall(self.reply)
            conn.close()


def origin_answer(request):
    return f"origin saw {request.path} {request.headers.get('Proxy-Authorization')}".encode()


@pytest.fixture
def proxy():
    upstream = Recorder(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 3\r\n\r\nsrt")
    model = serve(origin_answer)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-I",
            loopback.__file__,
            f"http://srt.user:token@localhost:{upstream.port}",
            f"127.0.0.1:{model.server_address[1]}",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    port = int(proc.stdout.readline())
    yield port, upstream, model.server_address[1]
    proc.kill()
    proc.wait()
    model.shutdown()


def ask(port, head):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head)
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    return data


def test_a_server_listening_on_the_loopback_is_reached_directly(proxy):
    port, upstream, _ = proxy
    origin = serve(origin_answer)
    target = f"127.0.0.1:{origin.server_address[1]}"
    reply = ask(
        port,
        f"GET http://{target}/page?q=1 HTTP/1.1\r\nHost: {target}\r\n"
        "Proxy-Authorization: Basic c3J0\r\n\r\n".encode(),
    )
    assert reply.startswith(b"HTTP/1.0 200") and reply.endswith(b"origin saw /page?q=1 None")
    # CONNECT: a tunnel to it.
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"CONNECT localhost:{origin.server_address[1]} HTTP/1.1\r\n\r\n".encode())
        assert s.recv(4096) == b"HTTP/1.1 200 Connection established\r\n\r\n"
        s.sendall(b"GET /tunnel HTTP/1.0\r\n\r\n")
        time.sleep(0.2)
        assert b"origin saw /tunnel" in s.recv(4096)
    origin.shutdown()
    assert upstream.received == []


def test_a_loopback_port_nothing_listens_on_goes_to_srt_byte_for_byte(proxy):
    port, upstream, _ = proxy
    free = socket.create_server(("127.0.0.1", 0))
    nobody = free.getsockname()[1]
    free.close()
    head = (
        f"GET http://127.0.0.1:{nobody}/fix.diff HTTP/1.1\r\nHost: 127.0.0.1:{nobody}\r\n"
        f"Proxy-Authorization: Basic c3J0\r\n\r\n"
    ).encode()
    assert ask(port, head).endswith(b"srt")
    assert upstream.received == [head]
    connect = b"CONNECT github.com:443 HTTP/1.1\r\nHost: github.com:443\r\n\r\n"
    assert ask(port, connect).startswith(b"HTTP/1.1 403")
    assert upstream.received[-1] == connect


def test_the_model_endpoint_always_goes_to_srt_even_with_a_server_on_its_port(proxy):
    port, upstream, model_port = proxy
    head = (
        f"POST http://127.0.0.1:{model_port}/v1/messages HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{model_port}\r\n\r\n"
    ).encode()
    assert ask(port, head).endswith(b"srt")
    assert upstream.received == [head]
