"""The sandbox's loopback belongs to the agent: an HTTP proxy inside the sandbox, in front of srt's.

srt gives a phase no network but its own loopback, and points the proxy variables at a bridge
to its filtering proxy on the host. A client that sends a loopback address there reaches the
host's loopback (refused, or the model endpoint); one that bypasses the proxy for loopback
(srt's NO_PROXY) reaches the sandbox's own, unrecorded. Neither lets an agent test the server it
started and keep the host out of reach on the record, so each phase runs this proxy first and
the proxy variables name it (sandbox.INNER); NO_PROXY stays unset (but for a stand-in's address
that must time out: swe_view.DIRECT_VAR). For each connection it reads
the first request and decides:

- a loopback host (localhost, 127.0.0.0/8, ::1, a name /etc/hosts maps there) on a port
  something in the sandbox listens on: the agent's own server (or a SWE-bench task's stand-in
  for an internet host), connected to directly (CONNECT tunnelled; a plain request sent in
  origin form with ``Connection: close``, as a server expects it);
- anything else, and always the model endpoint: forwarded byte for byte to srt's proxy, which
  admits the endpoint and the mode's hosts and refuses the rest on the record.

Clients that use no proxy (Perl's IO::Socket, nginx-tests' own clients) reach the sandbox's
loopback directly. It runs as ``python3 -c <this file> UPSTREAM ENDPOINT`` under the system's
Python with the standard library only (the project is not visible inside the sandbox), prints
the port it listens on, and ends with the sandbox.
"""

# It runs under the sandbox's python3, as old as 3.9 over a SWE-bench environment's /usr: its
# annotations stay strings there.
from __future__ import annotations

import ipaddress
import socket
import sys
import threading
from urllib.parse import urlsplit

HEAD_LIMIT = 65536
LOCAL_CONNECT_TIMEOUT = 2.0
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
HOP_HEADERS = (b"proxy-authorization", b"proxy-connection", b"connection", b"keep-alive")


def hosts_file_names(path: str = "/etc/hosts") -> frozenset[str]:
    """The names the hosts file maps to a loopback address: a SWE-bench task's stand-ins for
    the internet (swebench/services.py) are served in the sandbox under the names its tests use."""
    names: set[str] = set()
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return frozenset()
    for line in lines:
        fields = line.split("#", 1)[0].split()
        try:
            local = len(fields) > 1 and ipaddress.ip_address(fields[0]).is_loopback
        except ValueError:
            local = False
        if local:
            names.update(n.lower().rstrip(".") for n in fields[1:])
    return frozenset(names)


HOSTS_FILE_NAMES = hosts_file_names()


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower().rstrip(".")
    if host in LOOPBACK_NAMES or host.endswith(".localhost") or host in HOSTS_FILE_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def local_addresses(host: str) -> list[tuple[socket.AddressFamily, str]]:
    """(family, address) pairs to try for a loopback host, IPv4 first for names."""
    host = host.strip("[]")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")]
    return [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, str(ip))]


def split_host_port(authority: str, default_port: int) -> tuple[str, int]:
    """("host", port) of "host:port", "[v6]:port" or "host"."""
    parts = urlsplit("//" + authority)
    return (parts.hostname or ""), (parts.port or default_port)


def request_target(head: bytes) -> tuple[str, str, int, str]:
    """(method, host, port, origin-form target) of a request head sent to a proxy; host is ""
    for a target the proxy cannot place (it then goes upstream unchanged)."""
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    words = line.split(" ")
    if len(words) != 3:
        return "", "", 0, ""
    method, target, _ = words
    if method.upper() == "CONNECT":
        host, port = split_host_port(target, 443)
        return method, host, port, target
    parts = urlsplit(target)
    if parts.scheme.lower() not in ("http", "ws") or not parts.hostname:
        return method, "", 0, target
    origin = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return method, parts.hostname, parts.port or 80, origin


def origin_form(head: bytes, origin: str) -> bytes:
    """The request head as a server expects it: origin-form target, no proxy headers, and
    ``Connection: close`` (later requests on the connection would still be meant for the proxy)."""
    lines = head[:-4].split(b"\r\n") if head.endswith(b"\r\n\r\n") else head.split(b"\r\n")
    method, _, version = lines[0].split(b" ")
    kept = [h for h in lines[1:] if h.split(b":", 1)[0].strip().lower() not in HOP_HEADERS]
    return b"\r\n".join(
        [
            b" ".join([method, origin.encode("latin-1"), version]),
            *kept,
            b"Connection: close",
            b"",
            b"",
        ]
    )


def connect_local(host: str, port: int) -> socket.socket | None:
    """A connection to a server listening on the sandbox's loopback, or None."""
    for family, address in local_addresses(host):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.settimeout(LOCAL_CONNECT_TIMEOUT)
        try:
            sock.connect((address, port))
        except OSError:
            sock.close()
            continue
        sock.settimeout(None)
        return sock
    return None


def read_head(client: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data and len(data) < HEAD_LIMIT:
        chunk = client.recv(8192)
        if not chunk:
            break
        data += chunk
    return data


def copy(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            chunk = source.recv(65536)
            if not chunk:
                break
            sink.sendall(chunk)
    except OSError:
        pass
    try:
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def splice(client: socket.socket, server: socket.socket, first: bytes) -> None:
    if first:
        server.sendall(first)
    back = threading.Thread(target=copy, args=(server, client), daemon=True)
    back.start()
    copy(client, server)
    back.join()
    server.close()
    client.close()


def serve(client: socket.socket, upstream: tuple[str, int], endpoint: tuple[str, int]) -> None:
    try:
        data = read_head(client)
        end = data.find(b"\r\n\r\n")
        head, rest = (data[: end + 4], data[end + 4 :]) if end >= 0 else (data, b"")
        method, host, port, origin = request_target(head)
        local = None
        if host and is_loopback(host) and (host.strip("[]").lower(), port) != endpoint:
            local = connect_local(host, port)
        if local is None:
            splice(client, socket.create_connection(upstream), data)
        elif method.upper() == "CONNECT":
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            splice(client, local, rest)
        else:
            splice(client, local, origin_form(head, origin) + rest)
    except OSError:
        client.close()


def main(argv: list[str]) -> None:
    """argv: the proxy URL srt gave the phase, and the model endpoint (host:port)."""
    upstream = split_host_port(urlsplit(argv[1]).netloc.rpartition("@")[2], 3128)
    host, port = split_host_port(argv[2], 443)
    endpoint = (host.lower(), port)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    print(listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client, upstream, endpoint), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv)
