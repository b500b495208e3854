"""A server on the host's loopback for the tests of what an agent may reach: it records the path of
every GET and answers with the text its `answer` gives (the request handler in, bytes out)."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Recording(BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.paths.append(self.path)
        body = self.server.answer(self)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve(answer=lambda request: f"host server {request.path}\n".encode()):
    """A started ThreadingHTTPServer on 127.0.0.1 (its `paths`: what was asked); shut it down."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recording)
    server.paths, server.answer = [], answer
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
