"""The internet hosts a repository's tests reach, served on the loopback of a private network
namespace (services.py), then the command that runs the tests; the servers end with it.

    python standin_server.py CONFIG -- COMMAND ARG...

It runs inside the sandbox or the verdict's bubblewrap, under the services' venv (httpbin and
its Werkzeug), and imports nothing of the project. CONFIG (JSON, written by services.offline):
``{"httpbin": [names], "cert": path, "key": path, "http_port": 80, "https_port": 443,
"log": path}``. One threaded server per port, plain and TLS (the certificate names every host),
answers by the request's Host: a name of "httpbin" gets httpbin's application, any other host
the plain page of ``other`` (the tests that reach them look at the status and the redirects only).
"""

# It runs under Python 3.9 over a SWE-bench environment's /usr: its annotations stay strings.
from __future__ import annotations

import json
import logging
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

# A WSGI application, as the servers here call it.
App = Callable[[dict, Any], Any]

START_TIMEOUT = 30.0
OTHER_BODY = b"<!doctype html><title>stand-in</title>\n"


def host_of(environ: dict) -> str:
    """The request's host name, lower case, without its port."""
    host = environ.get("HTTP_HOST") or environ.get("SERVER_NAME", "")
    if host.startswith("["):
        return host[: host.find("]") + 1].lower()
    return host.rsplit(":", 1)[0].lower().rstrip(".")


def other(environ: dict, start_response: Any) -> list[bytes]:
    """Any host but httpbin's: 200 and a small page, for every method and path."""
    start_response(
        "200 OK", [("Content-Type", "text/html"), ("Content-Length", str(len(OTHER_BODY)))]
    )
    return [] if environ.get("REQUEST_METHOD") == "HEAD" else [OTHER_BODY]


def application(httpbin_names: list[str]) -> App:
    from httpbin import app as httpbin  # type: ignore[import-not-found]  # the services' venv

    names = {n.lower() for n in httpbin_names}

    def dispatch(environ: dict, start_response: Any) -> Any:
        return (httpbin if host_of(environ) in names else other)(environ, start_response)

    return dispatch


def serve(config: dict) -> list[Any]:
    """The servers, started on their threads; a port taken is an error (OSError)."""
    from werkzeug.serving import make_server

    app = application(config["httpbin"])
    servers = [make_server("127.0.0.1", config["http_port"], app, threaded=True)]
    servers.append(
        make_server(
            "127.0.0.1",
            config["https_port"],
            app,
            threaded=True,
            ssl_context=(config["cert"], config["key"]),
        )
    )
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    return servers


def wait_listening(ports: list[int]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    for port in ports:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def main(argv: list[str]) -> int:
    split = argv.index("--")
    with open(argv[1]) as f:
        config = json.load(f)
    command = argv[split + 1 :]
    # Every request would be logged on the tests' output: the log has them instead.
    logging.basicConfig(filename=config["log"], level=logging.INFO)
    serve(config)
    wait_listening([config["http_port"], config["https_port"]])
    child = subprocess.Popen(command)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: child.send_signal(number))
    code = child.wait()
    return 128 - code if code < 0 else code  # killed by a signal: as a shell says it


if __name__ == "__main__":
    sys.exit(main(sys.argv))
