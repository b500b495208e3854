"""The vocabulary the task miner pairs tests and fixes by: the topic words of a text (STOP words
and short words left out, plurals folded), and the area of nginx that a test file's name
(``h2_``, ``proxy_``...) or a commit subject's prefix ("HTTP/2:") points to, with the source
paths of each area.

Shared by the reading of both histories, the scoring and the stubs (nginx_eval/mining/)."""

import re

WORD_RE = re.compile(r"[a-z][a-z0-9_]+")
STOP = set("""
a an and the of to in on for with without by from at as is are be been was were it its this that
these those not no yes or if unless when then than into via per after before more less also only
test tests tests added add adds adding fixed fix fixes fixing use used using now new old some
all any one two three first last case cases handling handle handled support supported proper
properly improved improve better check checks checking avoid avoided possible possibly style
nginx ngx http https request requests response responses header headers value values local todo
yet unless has version adjusted committed keep kept more various work works working make made
missing correct correctly invalid valid error errors ticket src c h t pl lib
""".split())

# test file prefix -> area word, and area word -> nginx source path fragments / subject prefixes
AREA_BY_PREFIX = [
    ("h2_", "http2"), ("h3_", "http3"), ("quic_", "quic"), ("http2", "http2"),
    ("proxy_h2", "proxy"), ("grpc", "grpc"),
    ("stream_ssl", "stream"), ("stream_", "stream"), ("mail_", "mail"), ("smtp", "mail"),
    ("imap", "mail"), ("pop3", "mail"),
    ("ssl_", "ssl"), ("ssl.", "ssl"), ("proxy_ssl", "ssl"), ("upstream_", "upstream"),
    ("proxy_cache", "cache"), ("fastcgi_cache", "cache"), ("scgi_cache", "cache"),
    ("uwsgi_cache", "cache"), ("proxy_", "proxy"), ("proxy.", "proxy"), ("fastcgi", "fastcgi"),
    ("scgi", "scgi"), ("uwsgi", "uwsgi"), ("memcached", "memcached"),
    ("range", "range"), ("slice", "slice"), ("gzip", "gzip"), ("gunzip", "gzip"),
    ("sub_filter", "sub"), ("ssi", "ssi"), ("dav", "dav"), ("mp4", "mp4"), ("flv", "flv"),
    ("image_filter", "image"), ("xslt", "xslt"), ("perl", "perl"), ("js", "njs"),
    ("rewrite", "rewrite"), ("auth_request", "auth"), ("auth_basic", "auth"),
    ("limit_req", "limit"), ("limit_conn", "limit"), ("geo", "geo"), ("map", "map"),
    ("charset", "charset"), ("autoindex", "autoindex"), ("access_log", "log"),
    ("error_log", "log"), ("realip", "realip"), ("headers", "headers"), ("http_", "http"),
    ("index", "http"), ("tunnel", "tunnel"), ("resolver", "resolver"), ("split_clients", "split"),
    ("secure_link", "secure"), ("ocsp", "ssl"), ("sticky", "upstream"),
]

AREA_PATHS = {
    "http2": ["src/http/v2/"], "http3": ["src/http/v3/", "src/event/quic/"],
    "quic": ["src/event/quic/"], "stream": ["src/stream/"], "mail": ["src/mail/"],
    "ssl": ["src/event/ngx_event_openssl", "_ssl_module", "ssl"],
    "upstream": ["src/http/ngx_http_upstream", "src/stream/ngx_stream_upstream", "upstream"],
    "cache": ["ngx_http_file_cache", "src/http/ngx_http_upstream", "cache"],
    "proxy": ["ngx_http_proxy", "ngx_http_upstream", "proxy"], "grpc": ["ngx_http_grpc"],
    "fastcgi": ["ngx_http_fastcgi"], "scgi": ["ngx_http_scgi"], "uwsgi": ["ngx_http_uwsgi"],
    "memcached": ["ngx_http_memcached"], "range": ["range_filter"], "slice": ["slice_filter"],
    "gzip": ["gzip", "gunzip"], "sub": ["sub_filter"], "ssi": ["ssi_filter"],
    "dav": ["dav_module"], "mp4": ["mp4_module"], "flv": ["flv_module"],
    "image": ["image_filter"], "xslt": ["xslt_filter"], "perl": ["src/http/modules/perl/"],
    "njs": [], "rewrite": ["rewrite_module", "ngx_http_script", "ngx_regex"],
    "auth": ["auth_request", "auth_basic", "ngx_http_core_module"],
    "limit": ["limit_req", "limit_conn"], "geo": ["geo_module"], "map": ["map_module"],
    "charset": ["charset_filter"], "autoindex": ["autoindex"], "log": ["log_module", "ngx_log"],
    "realip": ["realip"], "headers": ["headers_filter", "ngx_http_request", "ngx_http_parse"],
    "http": ["src/http/ngx_http", "src/core/", "src/event/"], "tunnel": ["tunnel"],
    "resolver": ["ngx_resolver"], "split": ["split_clients"], "secure": ["secure_link"],
}

SUBJECT_AREA = {
    "http/2": "http2", "http/3": "http3", "quic": "quic", "stream": "stream", "mail": "mail",
    "ssl": "ssl", "ocsp": "ssl", "sni": "ssl", "upstream": "upstream", "cache": "cache",
    "proxy": "proxy", "grpc": "grpc", "fastcgi": "fastcgi", "scgi": "scgi", "uwsgi": "uwsgi",
    "range filter": "range", "slice filter": "slice", "gzip": "gzip", "ssi": "ssi",
    "sub filter": "sub", "dav": "dav", "mp4": "mp4", "image filter": "image", "xslt": "xslt",
    "perl": "perl", "rewrite": "rewrite", "auth request": "auth", "auth basic": "auth",
    "geo": "geo", "map": "map", "charset": "charset", "autoindex": "autoindex",
    "access log": "log", "realip": "realip", "headers filter": "headers", "core": "http",
    "events": "http", "resolver": "resolver", "tunnel": "tunnel", "split clients": "split",
    "secure link": "secure", "sticky": "upstream", "upstream keepalive": "upstream",
}


def words(text):
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


def test_area(name):
    """The area of a test file, by the prefix of its name (AREA_BY_PREFIX); "http" by default."""
    base = name.rsplit("/", 1)[-1]
    for prefix, area in AREA_BY_PREFIX:
        if base.startswith(prefix):
            return area
    return "http"


def subject_area(subject):
    """The area a commit subject's prefix names ("HTTP/2: ..."), or "" for none known."""
    head = subject.split(":", 1)[0].strip().lower() if ":" in subject[:30] else ""
    return SUBJECT_AREA.get(head, "")


def file_topic_words(name):
    """The topic words of a test file's name, less those of its area prefix ("proxy_" of
    proxy_connection_headers.t): the area is scored apart, and its word would match every
    commit of the area."""
    base = name.rsplit("/", 1)[-1][:-2]
    prefix = next((prefix for prefix, _ in AREA_BY_PREFIX if base.startswith(prefix)), "")
    return words(base) - words(prefix)
