"""The vocabulary the task miner pairs tests and fixes by: the topic words of a text (STOP words
and short words left out, plurals folded), and the area of nginx that a test file's name
(``h2_``, ``proxy_``...) or a commit subject's prefix ("HTTP/2:") points to, with the source
paths of each area.

Shared by the reading of both histories, the scoring and the stubs (nginx_eval/mining/)."""

import re

from ..prove.areas import AREA_BY_PREFIX

WORD_RE = re.compile(r"[a-z][a-z0-9_]+")
STOP = set(
    """
a an and the of to in on for with without by from at as is are be been was were it its this that
these those not no yes or if unless when then than into via per after before more less also only
test tests tests added add adds adding fixed fix fixes fixing use used using now new old some
all any one two three first last case cases handling handle handled support supported proper
properly improved improve better check checks checking avoid avoided possible possibly style
nginx ngx http https request requests response responses header headers value values local todo
yet unless has version adjusted committed keep kept more various work works working make made
missing correct correctly invalid valid error errors ticket src c h t pl lib
""".split()
)

SUBJECT_AREA = {
    "http/2": "http2",
    "http/3": "http3",
    "quic": "quic",
    "stream": "stream",
    "mail": "mail",
    "ssl": "ssl",
    "ocsp": "ssl",
    "sni": "ssl",
    "upstream": "upstream",
    "cache": "cache",
    "proxy": "proxy",
    "grpc": "grpc",
    "fastcgi": "fastcgi",
    "scgi": "scgi",
    "uwsgi": "uwsgi",
    "range filter": "range",
    "slice filter": "slice",
    "gzip": "gzip",
    "ssi": "ssi",
    "sub filter": "sub",
    "dav": "dav",
    "mp4": "mp4",
    "image filter": "image",
    "xslt": "xslt",
    "perl": "perl",
    "rewrite": "rewrite",
    "auth request": "auth",
    "auth basic": "auth",
    "geo": "geo",
    "map": "map",
    "charset": "charset",
    "autoindex": "autoindex",
    "access log": "log",
    "realip": "realip",
    "headers filter": "headers",
    "core": "http",
    "events": "http",
    "resolver": "resolver",
    "tunnel": "tunnel",
    "split clients": "split",
    "secure link": "secure",
    "sticky": "upstream",
    "upstream keepalive": "upstream",
}


def words(text: str) -> set[str]:
    """The topic words of `text`: lower-case words and their parts split at "_", STOP words and
    words under three letters left out, a plural's final "s" dropped."""
    out = set()
    for w in WORD_RE.findall(text.lower().replace("/", " ").replace("-", " ")):
        if w in STOP or len(w) < 3:
            continue
        for part in w.split("_"):
            if len(part) >= 3 and part not in STOP:
                out.add(part[:-1] if part.endswith("s") and len(part) > 4 else part)
    return out


def subject_area(subject: str) -> str:
    """The area a commit subject's prefix names ("HTTP/2: ..."), or "" for none known."""
    head = subject.split(":", 1)[0].strip().lower() if ":" in subject[:30] else ""
    return SUBJECT_AREA.get(head, "")


def file_topic_words(name: str) -> set[str]:
    """The topic words of a test file's name, less those of its area prefix ("proxy_" of
    proxy_connection_headers.t): the area is scored apart, and its word would match every
    commit of the area."""
    base = name.rsplit("/", 1)[-1][:-2]
    prefix = next((prefix for prefix, _ in AREA_BY_PREFIX if base.startswith(prefix)), "")
    return words(base) - words(prefix)
