"""Headless Chromium for the tests, as a person would open a page: driven over the DevTools
protocol on a pipe (``--remote-debugging-pipe``: no port, no network, no websocket library), it
loads a file:// page and reports what its console said, what it requested, the links it holds
and a screenshot.

Chromium reads the protocol's commands from its fd 3 and writes answers and events to its fd 4,
one JSON message per NUL-terminated chunk. As root it needs ``--no-sandbox``.

``problems(report, root)`` turns a page's report into the list of what is wrong with it: console
errors and uncaught exceptions, failed loads, requests that leave the file system, and links that
point to no file (or to no element of a file, for a ``#fragment``).
"""

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

PROGRAMS = ("chromium", "chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--mute-audio",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)
# Every link and resource of a page, with the ids its fragments may point to.
COLLECT = """JSON.stringify({
  links: Array.from(document.querySelectorAll("a[href], link[href], img[src], script[src]"),
                    e => e.href || e.src),
  ids: Array.from(document.querySelectorAll("[id]"), e => e.id)})"""


def find_chromium():
    """The Chromium program on PATH, or None."""
    return next((shutil.which(p) for p in PROGRAMS if shutil.which(p)), None)


@dataclass
class PageReport:
    url: str
    errors: list = field(default_factory=list)  # what the console and the loader reported
    requests: list = field(default_factory=list)  # every URL the page requested
    links: list = field(default_factory=list)  # hrefs and srcs, resolved
    ids: list = field(default_factory=list)
    screenshot: bytes = b""
    value: object = None  # what load()'s script returned


class ProtocolError(Exception):
    pass


class Chromium:
    """One headless Chromium; ``load(path)`` opens a page in a new tab and reports on it."""

    def __init__(self, program=None, size=(1000, 700), timeout=60):
        self.program = program or find_chromium()
        self.size, self.timeout = size, timeout
        self.profile = tempfile.mkdtemp(prefix="nginx-eval-chromium-")
        # Our ends stay here; Chromium's ends go to its fds 3 and 4 (moved above 10 first, so
        # that the redirections cannot overwrite one another; bash: dash takes one-digit fds).
        to_read, self._to_browser = os.pipe()
        self._from_browser, from_write = os.pipe()
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_read, from_write)]
        for fd in (to_read, from_write):
            os.close(fd)
        script = f'exec "$0" "$@" 3<&{high[0]} 4>&{high[1]} {high[0]}<&- {high[1]}>&-'
        self.log = open(Path(self.profile) / "stderr.log", "wb")
        self.proc = subprocess.Popen(
            [
                "bash",
                "-c",
                script,
                self.program,
                *FLAGS,
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            pass_fds=high,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        for fd in high:
            os.close(fd)
        self._buffer, self._next_id, self.events = b"", 0, []

    # -- the protocol ------------------------------------------------------------------------
    def _read(self, deadline):
        """The next message (answer or event), or ProtocolError at the deadline."""
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProtocolError("Chromium did not answer in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise ProtocolError(
                        f"Chromium exited ({self.proc.poll()}): {self.stderr()[-2000:]}"
                    )
                self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, session=None):
        """Send one command; its result (events that arrive meanwhile go to self.events)."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._to_browser, data) :]
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise ProtocolError(f"{method}: {answer['error']}")
                return answer.get("result") or {}
            self.events.append(answer)

    def wait_for(self, method, session):
        deadline = time.monotonic() + self.timeout
        for event in self.events:
            if event.get("method") == method and event.get("sessionId") == session:
                return event
        while True:
            event = self._read(deadline)
            self.events.append(event)
            if event.get("method") == method and event.get("sessionId") == session:
                return event

    # -- a page ------------------------------------------------------------------------------
    def load(self, path, script=None, fragment=None):
        """Open the file `path` in a new tab (scrolled to `#fragment`); its PageReport (console
        errors, requests, links, a PNG screenshot of the window). `script`: a JavaScript
        expression evaluated once the page has loaded, after the screenshot (report.value)."""
        url = Path(path).resolve().as_uri() + (f"#{fragment}" if fragment else "")
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.send(f"{domain}.enable", session=session)
        width, height = self.size
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session,
        )
        first = len(self.events)
        self.send("Page.navigate", {"url": url}, session)
        self.wait_for("Page.loadEventFired", session)
        # What the page's scripts do on load has run; let late console messages arrive.
        self.evaluate("new Promise(done => setTimeout(done, 100))", session)
        found = json.loads(self.evaluate(COLLECT, session))
        shot = self.send("Page.captureScreenshot", {"format": "png"}, session)
        report = PageReport(
            url=url,
            links=found["links"],
            ids=found["ids"],
            screenshot=base64.b64decode(shot["data"]),
        )
        if script:
            report.value = self.evaluate(script, session)
        for event in self.events[first:]:
            if event.get("sessionId") == session:
                _note(report, event)
        self.send("Target.closeTarget", {"targetId": target})
        return report

    def evaluate(self, expression, session):
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            session,
        )
        if result.get("exceptionDetails"):
            raise ProtocolError(f"{expression!r}: {_exception_text(result['exceptionDetails'])}")
        return result.get("result", {}).get("value")

    def stderr(self):
        try:
            return (Path(self.profile) / "stderr.log").read_text(errors="replace")
        except OSError:
            return ""

    def close(self):
        try:
            self.send("Browser.close")
        except (ProtocolError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _exception_text(details):
    exception = details.get("exception") or {}
    return exception.get("description") or details.get("text") or "exception"


def _note(report, event):
    """Record what one protocol event says about the page."""
    method, params = event.get("method"), event.get("params") or {}
    if method == "Runtime.exceptionThrown":
        report.errors.append(f"uncaught: {_exception_text(params.get('exceptionDetails', {}))}")
    elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        words = [str(a.get("value", a.get("description", ""))) for a in params.get("args", [])]
        report.errors.append(f"console.{params['type']}: {' '.join(words)}")
    elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
        entry = params["entry"]
        report.errors.append(
            f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".rstrip()
        )
    elif method == "Network.requestWillBeSent":
        report.requests.append(params.get("request", {}).get("url", ""))
    elif method == "Network.loadingFailed" and not params.get("canceled"):
        report.errors.append(f"load failed: {params.get('errorText')}")


# -- what is wrong with a page ------------------------------------------------------------------
class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        self.ids.update(v for k, v in attrs if k == "id" and v)


def ids_of(path):
    parser = _Ids()
    parser.feed(Path(path).read_text(errors="replace"))
    return parser.ids


def link_problem(url):
    """Why a link of a page does not resolve on the file system, or None."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme in ("data", "about"):
        return None
    if parsed.scheme != "file":
        return f"leaves the file system: {url}"
    path = Path(urllib.parse.unquote(parsed.path))
    if not path.exists():
        return f"no such file: {path}"
    if (
        parsed.fragment
        and path.suffix == ".html"
        and urllib.parse.unquote(parsed.fragment) not in ids_of(path)
    ):
        return f"no element #{parsed.fragment} in {path}"
    return None


def problems(report):
    """Everything wrong with a loaded page (an empty list for a good one)."""
    found = list(report.errors)
    found += [
        f"request leaves the file system: {u}"
        for u in report.requests
        if urllib.parse.urlsplit(u).scheme not in ("file", "data", "about")
    ]
    for url in dict.fromkeys(report.links):
        why = link_problem(url)
        if why:
            found.append(f"link {why}")
    return found
