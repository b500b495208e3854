"""Which part of nginx a test file of nginx-tests exercises: its area, by the prefix of its name
(``h2_``, ``proxy_``...), and the source paths of each area. The task miner pairs tests with fixes
by it (nginx_eval/mining/); the strict stage chooses the regression files of a patch by it.
"""

from collections.abc import Iterable

# test file prefix -> area word, and area word -> nginx source path fragments / subject prefixes
AREA_BY_PREFIX = [
    ("h2_", "http2"),
    ("h2.", "http2"),
    ("h3_", "http3"),
    ("h3.", "http3"),
    ("quic_", "quic"),
    ("http2", "http2"),
    ("proxy_h2", "proxy"),
    ("grpc", "grpc"),
    ("stream_ssl", "stream"),
    ("stream_", "stream"),
    ("mail_", "mail"),
    ("smtp", "mail"),
    ("imap", "mail"),
    ("pop3", "mail"),
    ("ssl_", "ssl"),
    ("ssl.", "ssl"),
    ("proxy_ssl", "ssl"),
    ("upstream_", "upstream"),
    ("proxy_cache", "cache"),
    ("fastcgi_cache", "cache"),
    ("scgi_cache", "cache"),
    ("uwsgi_cache", "cache"),
    ("proxy_", "proxy"),
    ("proxy.", "proxy"),
    ("fastcgi", "fastcgi"),
    ("scgi", "scgi"),
    ("uwsgi", "uwsgi"),
    ("memcached", "memcached"),
    ("range", "range"),
    ("slice", "slice"),
    ("gzip", "gzip"),
    ("gunzip", "gzip"),
    ("sub_filter", "sub"),
    ("ssi", "ssi"),
    ("dav", "dav"),
    ("mp4", "mp4"),
    ("flv", "flv"),
    ("image_filter", "image"),
    ("xslt", "xslt"),
    ("perl", "perl"),
    ("js", "njs"),
    ("rewrite", "rewrite"),
    ("auth_request", "auth"),
    ("auth_basic", "auth"),
    ("limit_req", "limit"),
    ("limit_conn", "limit"),
    ("geo", "geo"),
    ("map", "map"),
    ("charset", "charset"),
    ("autoindex", "autoindex"),
    ("access_log", "log"),
    ("error_log", "log"),
    ("realip", "realip"),
    ("headers", "headers"),
    ("http_", "http"),
    ("index", "http"),
    ("tunnel", "tunnel"),
    ("resolver", "resolver"),
    ("split_clients", "split"),
    ("secure_link", "secure"),
    ("ocsp", "ssl"),
    ("sticky", "upstream"),
]

AREA_PATHS = {
    "http2": ["src/http/v2/"],
    "http3": ["src/http/v3/", "src/event/quic/"],
    "quic": ["src/event/quic/"],
    "stream": ["src/stream/"],
    "mail": ["src/mail/"],
    "ssl": ["src/event/ngx_event_openssl", "_ssl_module", "ssl"],
    "upstream": ["src/http/ngx_http_upstream", "src/stream/ngx_stream_upstream", "upstream"],
    "cache": ["ngx_http_file_cache", "src/http/ngx_http_upstream", "cache"],
    "proxy": ["ngx_http_proxy", "ngx_http_upstream", "proxy"],
    "grpc": ["ngx_http_grpc"],
    "fastcgi": ["ngx_http_fastcgi"],
    "scgi": ["ngx_http_scgi"],
    "uwsgi": ["ngx_http_uwsgi"],
    "memcached": ["ngx_http_memcached"],
    "range": ["range_filter"],
    "slice": ["slice_filter"],
    "gzip": ["gzip", "gunzip"],
    "sub": ["sub_filter"],
    "ssi": ["ssi_filter"],
    "dav": ["dav_module"],
    "mp4": ["mp4_module"],
    "flv": ["flv_module"],
    "image": ["image_filter"],
    "xslt": ["xslt_filter"],
    "perl": ["src/http/modules/perl/"],
    "njs": [],
    "rewrite": ["rewrite_module", "ngx_http_script", "ngx_regex"],
    "auth": ["auth_request", "auth_basic", "ngx_http_core_module"],
    "limit": ["limit_req", "limit_conn"],
    "geo": ["geo_module"],
    "map": ["map_module"],
    "charset": ["charset_filter"],
    "autoindex": ["autoindex"],
    "log": ["log_module", "ngx_log"],
    "realip": ["realip"],
    "headers": ["headers_filter", "ngx_http_request", "ngx_http_parse"],
    "http": ["src/http/ngx_http", "src/core/", "src/event/"],
    "tunnel": ["tunnel"],
    "resolver": ["ngx_resolver"],
    "split": ["split_clients"],
    "secure": ["secure_link"],
}


def test_area(name: str) -> str:
    """The area of a test file, by the prefix of its name (AREA_BY_PREFIX); "http" by default."""
    base = name.rsplit("/", 1)[-1]
    for prefix, area in AREA_BY_PREFIX:
        if base.startswith(prefix):
            return area
    return "http"


def area_files(test_names: Iterable[str], touched: Iterable[str]) -> list[str]:
    """The test files (of `test_names`) whose area's source paths (AREA_PATHS) a patch that
    touches the source paths `touched` changes, ranked: files whose name shares a word with a
    touched file's name first (ngx_http_gzip_filter_module.c: gzip*.t), then by name."""
    sources = [p for p in touched if p.endswith((".c", ".h"))]
    words = {w for p in sources for w in _name_words(p)}
    ranked = []
    for name in test_names:
        frags = AREA_PATHS.get(test_area(name), [])
        in_area = any(frag and frag in p for p in sources for frag in frags)
        named = bool(words & _name_words(name))
        if in_area or named:
            ranked.append((not named, not in_area, name))
    return [name for *_, name in sorted(ranked)]


# Words of source and test file names that say nothing of what a file is about.
_GENERIC = {
    "ngx",
    "http",
    "module",
    "filter",
    "stream",
    "mail",
    "core",
    "src",
    "modules",
    "t",
    "c",
    "h",
    "event",
    "os",
    "unix",
    "v2",
    "v3",
}


def _name_words(path: str) -> set[str]:
    base = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return {w for w in base.lower().split("_") if len(w) > 2 and w not in _GENERIC}
