#!/usr/bin/env python3
"""Propose candidate nginx-eval tasks from the histories of nginx and nginx-tests.

Offline: reads two local git directories (bare mirrors are fine) and writes a candidates file:
task stubs in the benchmark schema (fail_to_pass / pass_to_pass empty, problem_statement "TODO")
under a top-level ``"candidates": true``, which the loader accepts for validation only
(nginx_eval/benchmark.py). Written as ``tasks/<name>.json``, it is validated with
``doit run <name>:validate``; scripts/promote_tasks.py then adds the valid stubs, with their
derived assertions and a statement each, to a benchmark file.

Signals, from strongest to weakest:

1. TODO guards. An nginx-tests commit adds ``local $TODO = ... unless $t->has_version('X.Y.Z')``
   (or ``todo_skip`` / ``todo_alerts`` / ``plan(skip_all)`` conditioned on ``has_version``): the
   fix is expected in nginx X.Y.Z, so the nginx commits between the previous mainline release and
   ``release-X.Y.Z`` (or HEAD when X.Y.Z is not released yet) are the candidates, wherever in
   that window they sit. A guard that holds only with another SSL library
   (``if $t->has_module('AWS-LC') and !$t->has_version(...)``) is no signal: the harness builds
   with OpenSSL, where such assertions pass or fail whatever the fix.
2. Abbreviated nginx commit hashes quoted in the test commit ("fixed in 3afd85e4b"): for a TODO
   guard, the only candidates. Shared ticket numbers ("ticket #1234") in the subjects of a test
   commit and an nginx commit.
3. Topic similarity alone (test commits that add or change .t files, nginx commits within a few
   weeks), which finds fixes whose tests landed without a TODO guard.

Candidates are scored (score) by topic words shared between the test side (commit subject, file
names less their area prefix; the assertions and comments a guard covers, kept lines too; the
other assertion texts) and the nginx side (subject and touched file names, more weakly its
message), the area of the test file versus the subject prefix ("HTTP/2:") and the share of the
touched sources in that area, the directives and variables a commit adds (used by the test:
evidence; none used: a feature the test does not exercise), and date proximity (weak within a
release window). Portability commits (BoringSSL, win32, select) and refactorings lose points.
A commit older than a directive or variable the test uses is dropped (its build could not run
the test), and one that an earlier candidate of about its score precedes in the same sources
loses points (its base would already hold that fix). The top few per test signal are kept;
a stub's notes give its rank among its test's candidates ("#1 for its test").

A stub's configure_flags and perl_modules are what its test files need, read by
nginx_eval/testsuite.py as the doctor reads them: the flags that build every module their has()
calls name (with --with-stream / --with-mail for a stream or mail module), the non-core Perl modules
they load or call.

Usage:
    python scripts/mine_tasks.py --nginx <git dir> --tests <git dir> --out tasks/candidates.json \
        [--since 2020-01-01] [--limit N] [--per-signal K]
"""

import argparse
import json
import math
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

# The nginx_eval next to this script, whichever one is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from nginx_eval import gitcmd  # noqa: E402
from nginx_eval.testsuite import configure_flags_for, requirements_in_order  # noqa: E402

VERSION_RE = re.compile(r"has_version\(\s*'(\d+\.\d+\.\d+)'\s*\)")
GUARD_RE = re.compile(r"\$TODO|todo_skip|todo_alerts|skip_all|TODO")
TICKET_RE = re.compile(r"ticket\s*#?(\d+)", re.I)
HASH_RE = re.compile(r"\b([0-9a-f]{9,12})\b")       # "fixed in 3afd85e4b" in test comments
WORD_RE = re.compile(r"[a-z][a-z0-9_]+")
RELEASE_RE = re.compile(r"^release-(\d+)\.(\d+)\.(\d+)$")
DESC_RE = re.compile(r"""(?:like|is|isnt|unlike|ok|is_deeply)\s*\(.*?,\s*['"]([^'"]{3,80})['"]\s*\)""")
COMMENT_RE = re.compile(r"^\s*#\s*(.+)$")
# A guard that holds only when nginx is built with another SSL library than OpenSSL, the one the
# harness builds with: "local $TODO = ... if $t->has_module('AWS-LC') and !$t->has_version(...)".
FOREIGN_GUARD_RE = re.compile(
    r"\bif\b.*?(?<!!)\$t->has_module\('[^']*(?:BoringSSL|AWS-LC|LibreSSL)")
# Directives and variables a patch adds to nginx's tables; the names a test's config and
# $variables use.
DIRECTIVE_RE = re.compile(r'^\+\s*\{\s*ngx_string\("([a-z][a-z0-9_]*)"\),\s*$')
CONF_FLAGS_RE = re.compile(r"^\+\s*NGX_\w*CONF")
VARIABLE_RE = re.compile(r'^\+\s*\{\s*ngx_string\("([a-z][a-z0-9_]*)"\),\s*NULL,')
NAME_RE = re.compile(r'ngx_string\("([a-z][a-z0-9_]*)"\)')
CONF_WORD_RE = re.compile(r"^\s*([a-z][a-z0-9_]*)\s", re.M)
VAR_USE_RE = re.compile(r"\$\{?([a-z][a-z0-9_]*)")
# Subjects of commits that rarely change what a test sees on Linux (epoll) with OpenSSL.
PORTABILITY_RE = re.compile(r"boringssl|aws-lc|libressl|quictls|win32|windows|msvc|solaris|"
                            r"freebsd|macos|cygwin|\bselect\b|kqueue|eventport|devpoll|"
                            r"\bcompat(?:ibility)?\b|compil|\bbuild\b|\btypos?\b", re.I)
REFACTOR_RE = re.compile(r"refactor|factored out|extracted|changed interface|simplified|"
                         r"\bmoved\b|renamed|clean ?up|\bstyle\b|\bunified\b|\bcomments?\b",
                         re.I)

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
    out = set()
    for w in WORD_RE.findall(text.lower().replace("/", " ").replace("-", " ")):
        if w in STOP or len(w) < 3:
            continue
        for part in w.split("_"):
            if len(part) >= 3 and part not in STOP:
                out.add(part[:-1] if part.endswith("s") and len(part) > 4 else part)
    return out


def vkey(v):
    return tuple(int(x) for x in v.split("."))


def test_area(name):
    base = name.rsplit("/", 1)[-1]
    for prefix, area in AREA_BY_PREFIX:
        if base.startswith(prefix):
            return area
    return "http"


def subject_area(subject):
    head = subject.split(":", 1)[0].strip().lower() if ":" in subject[:30] else ""
    return SUBJECT_AREA.get(head, "")


def nginx_commits(git_dir, since):
    """[{sha, date, day, subject, files, add, rem}] for non-merge commits since `since` (day:
    the committer date, YYYY-MM-DD, a task's fix_date)."""
    return [{"sha": c["sha"], "date": c["time"], "day": c["day"], "subject": c["subject"],
             "files": [path for _, _, path in c["numstat"]],
             "add": sum(added or 0 for added, _, _ in c["numstat"]),
             "rem": sum(removed or 0 for _, removed, _ in c["numstat"])}
            for c in gitcmd.commit_numstats(git_dir, since)]


def is_code_commit(c):
    s = c["subject"].lower()
    if re.match(r"^(nginx-[\d.]+-release|version bump|year \d+|style|updated (openssl|pcre|zlib))", s):
        return False
    if s.startswith(("gh:", "misc:", "contrib:", "readme", "win32:", "configure:")):
        return False
    code = [f for f in c["files"] if f.startswith("src/") and f.endswith((".c", ".h"))]
    if not code or code == ["src/core/nginx.h"]:
        return False
    return True


def release_tags(git_dir):
    """{"X.Y.Z": the commit of tag release-X.Y.Z}."""
    tags = {}
    for name, commit in gitcmd.tag_commits(git_dir).items():
        m = RELEASE_RE.match(name)
        if m:
            tags[".".join(m.groups())] = commit
    return tags


def version_window(git_dir, tags, version, cache):
    """Set of nginx commit shas expected to contain the fix for `version`."""
    if version in cache:
        return cache[version]
    shas = set()
    try:
        if version in tags:
            merged = [t[len("release-"):] for t in gitcmd.tags_merged_into(
                git_dir, f"release-{version}", "release-*")]
            older = sorted((v for v in merged if RELEASE_RE.match("release-" + v)
                            and vkey(v) < vkey(version)), key=vkey)
            rng = [f"release-{version}"] + ([f"^release-{older[-1]}"] if older else [])
        else:
            reach = [t[len("release-"):] for t in gitcmd.tags_merged_into(git_dir, "HEAD",
                                                                           "release-*")]
            older = sorted((v for v in reach if vkey(v) < vkey(version)), key=vkey)
            rng = ["HEAD"] + ([f"^release-{older[-1]}"] if older else [])
        shas = set(gitcmd.non_merge_commits(git_dir, rng))
    except gitcmd.GitError:
        shas = set()
    cache[version] = shas
    return shas


def names_added(patch):
    """The directives and variables a patch adds to nginx's command and variable tables."""
    names, previous = set(), ""
    for line in patch.splitlines():
        m = DIRECTIVE_RE.match(previous)
        if m and CONF_FLAGS_RE.match(line):
            names.add(m.group(1))
        m = VARIABLE_RE.match(line)
        if m:
            names.add(m.group(1))
        previous = line
    return names


def introduced_names(git_dir, since, oldest):
    """{commit: the directive and variable names it adds} for the commits since `since` that
    add names nginx did not have at commit `oldest` (an http directive that a later commit
    adds to stream too is that commit's as well)."""
    known = set(NAME_RE.findall(gitcmd.matches_in_tree(git_dir, oldest, NAME_RE.pattern, "src")))
    introduced = {}
    for sha, _, _, patch in gitcmd.commit_patches(git_dir, since, "src/*.c"):
        new = names_added(patch) - known
        if new:
            introduced[sha] = new
    return introduced


def first_added(introduced, commits):
    """{name: the time of the first of `commits` to add it} for the names of `introduced`."""
    times = {c["sha"]: c["date"] for c in commits}
    first = {}
    for sha, names in introduced.items():
        for name in names:
            first[name] = min(times.get(sha, math.inf), first.get(name, math.inf))
    return first


def names_used(text, introduced_at):
    """{name: when it was introduced} of the names of `introduced_at` that a test's text uses:
    a config line's first word (a directive), a $variable."""
    used = set(CONF_WORD_RE.findall(text)) | set(VAR_USE_RE.findall(text))
    return {name: introduced_at[name] for name in used if name in introduced_at}


@dataclass
class SuiteChanges:
    """What the patch of one nginx-tests commit does to its test files."""
    files: set = field(default_factory=set)         # .t files it adds lines to
    added: set = field(default_factory=set)         # files it creates
    guarded: dict = field(default_factory=lambda: defaultdict(set))  # .t file -> guard versions
    texts: list = field(default_factory=list)       # assertion descriptions of its added lines
    guarded_texts: list = field(default_factory=list)  # descriptions, comments its guards cover
    lines: list = field(default_factory=list)       # its added lines (the config a test uses)
    refs: set = field(default_factory=set)          # abbreviated hashes in its added lines
    foreign: bool = False                           # a guard for another SSL library only


@dataclass
class _Reading:
    """Where read_test_patch is in one file: the added statement it reads, the comments since
    the last assertion, and whether it is inside a block that a guard makes TODO."""
    statement: list = field(default_factory=list)
    added: bool = False                 # the commit adds a line of that statement
    comments: list = field(default_factory=list)
    in_guard: bool = False


def guard_version(statement):
    """The X.Y.Z of an added statement that makes assertions TODO unless has_version('X.Y.Z'),
    or that continues such a condition from a line before ("or ...has_version(...)"); None for
    any other statement."""
    m = VERSION_RE.search(statement)
    if m and (GUARD_RE.search(statement)
              or statement.lstrip().startswith(("or ", "and ", "if ", "unless "))):
        return m.group(1)
    return None


def read_statement(patch, path, reading):
    """Take in the statement `reading` holds, now complete: its assertion descriptions (those
    of an added statement count as the commit's), and the guard an added statement sets. A
    guard for another SSL library only marks the patch: built with OpenSSL, nginx passes or
    fails such assertions whatever the fix."""
    statement, added = " ".join(reading.statement), reading.added
    reading.statement, reading.added = [], False
    descs = DESC_RE.findall(statement)
    if added:
        patch.texts.extend(descs)
    if reading.in_guard:
        patch.guarded_texts.extend(descs)
    if descs:
        reading.comments = []
    version = guard_version(statement) if added else None
    if version and FOREIGN_GUARD_RE.search(statement):
        patch.foreign = True
    elif version:
        patch.guarded[path].add(version)
        patch.guarded_texts.extend(reading.comments)    # what the guarded assertions are about
        reading.in_guard = True


def read_line(patch, path, text, reading, added):
    """Take in one line of test file `path` (without its diff mark) that the commit adds or,
    not `added`, keeps: a kept line only tells what an added guard is about."""
    if added:
        patch.files.add(path)
        patch.lines.append(text)
        patch.refs.update(HASH_RE.findall(text))
    comment = COMMENT_RE.match(text)
    if comment:
        reading.comments.append(comment.group(1))
        if reading.in_guard:
            patch.guarded_texts.append(comment.group(1))
        return
    reading.statement.append(text.strip())
    reading.added = reading.added or added
    # a statement ends with ; { or }; a long run without one (a heredoc) is read in pieces
    if text.rstrip().endswith((";", "{", "}")) or len(reading.statement) >= 12:
        read_statement(patch, path, reading)
    if text.strip() == "}":
        reading.in_guard = False                    # the end of a TODO block


def read_test_patch(body):
    """The SuiteChanges of a commit's patch (the text after its log line)."""
    patch, current, creates, reading = SuiteChanges(), None, None, _Reading()
    for line in body.splitlines():
        if line.startswith("diff --git "):
            current, creates, reading = line.split(" b/", 1)[-1], None, _Reading()
        elif line.startswith("--- /dev/null"):
            creates = True
        elif line.startswith("+++ "):
            if creates and current:
                patch.added.add(current)
        elif not (current and current.endswith(".t")) or line.startswith("-"):
            continue
        elif line.startswith("@@"):
            reading = _Reading()                    # another place in the file
        elif line.startswith(("+", " ")):
            read_line(patch, current, line[1:], reading, line.startswith("+"))
    return patch


def test_signal(sha, ct, subject, patch):
    """The signal of one nginx-tests commit (see test_signals), or None when it adds no test
    lines, only adjusts TODOs without a version guard, or guards only for another SSL
    library."""
    if not patch.files or (patch.foreign and not patch.guarded):
        return None
    tickets = set(TICKET_RE.findall(subject))
    base = {"commit": sha, "date": ct, "subject": subject, "tickets": tickets,
            "text": " ".join(patch.texts), "guarded_text": " ".join(patch.guarded_texts),
            "added": "\n".join(patch.lines),
            "refs": patch.refs | set(HASH_RE.findall(subject))}
    if patch.guarded:
        return dict(base, kind="todo", files={f: v for f, v in patch.guarded.items()},
                    versions=set().union(*patch.guarded.values()))
    subj = subject.lower()
    if "todo" in subj and "adjust" in subj:
        return None                      # pure TODO bookkeeping without a version guard
    chosen = sorted(patch.added) or sorted(patch.files)
    return dict(base, kind="ticket" if tickets else "topic",
                files={f: set() for f in chosen[:3]}, versions=set())


def test_signals(git_dir, since):
    """Scan nginx-tests commits. Returns a list of signals: {kind, commit, date, subject,
    files: {file: set(versions)}, versions, text, guarded_text, added, tickets, refs}"""
    signals = []
    for sha, ct, subject, body in gitcmd.commit_patches(git_dir, since, "*.t"):
        signal = test_signal(sha, ct, subject, read_test_patch(body))
        if signal:
            signals.append(signal)
    return signals


def referenced(sig, by_prefix):
    """nginx commits named by abbreviated hash in the test commit (subject or added lines)."""
    out = []
    for r in sig.get("refs", ()):
        c = by_prefix.get(r[:9])
        if c and c["sha"].startswith(r):
            out.append(c)
    return out


def code_files(c):
    """The C sources a commit touches, nginx.h (the version) left out."""
    return {f for f in c["files"]
            if f.startswith("src/") and f.endswith((".c", ".h")) and f != "src/core/nginx.h"}


def commit_words(c):
    """The topic words of an nginx commit: its subject and the names of the files it touches."""
    return words(c["subject"]) | words(" ".join(p.rsplit("/", 1)[-1] for p in c["files"]))


def area_focus(areas, c):
    """The share of a commit's C sources that lie in the test files' areas (AREA_PATHS)."""
    code = code_files(c)
    frags = [frag for a in areas for frag in AREA_PATHS.get(a, []) if frag]
    return sum(any(frag in f for frag in frags) for f in code) / len(code) if code else 0.0


def topic_points(sig, c, sig_words):
    """Points for the topic a commit shares with a test signal: words of the test's subject
    and file names (3 each), of what its guards make TODO (2 each, at most 3), of its other
    assertions (1 each, at most 4) in the commit's subject and file names; words of the
    test's subject, file names or guarded assertions that only the commit's message has (1
    each, at most 3); the area of its subject, and the share of its sources in the test's
    area."""
    primary, guarded, secondary = sig_words
    cw = commit_words(c)
    shared, hinted = primary & cw, (guarded - primary) & cw
    extra = (secondary - primary - guarded) & cw
    s = 3.0 * len(shared) + 3.0 * len(shared) / max(4, len(primary)) if shared else 0.0
    told = ((primary | guarded) & c.get("told", set())) - cw
    s += 2.0 * min(len(hinted), 3) + 1.0 * min(len(extra), 4) + 1.0 * min(len(told), 3)
    reasons = []
    if shared or hinted or extra:
        reasons.append("words:" + ",".join(sorted(shared)[:6])
                       + ("/" + ",".join(sorted(hinted)[:3]) if hinted else "")
                       + ("+" + ",".join(sorted(extra)[:4]) if extra else ""))
    if told:
        reasons.append("told:" + ",".join(sorted(told)[:3]))
    areas = {test_area(f) for f in sig["files"]}
    sarea = subject_area(c["subject"])
    if sarea and sarea in areas:
        s += 3.0
        reasons.append(f"area:{sarea}")
    focus = area_focus(areas, c)
    if focus:
        s += 1.0 + 2.0 * focus
        reasons.append(f"paths:{focus:.1f}")
    return s, reasons


def evidence_points(sig, c, introduced, used):
    """Points for what ties a commit to a test signal beyond the topic: the test names its
    hash (15) or shares a ticket (12); the commit introduces a directive or variable the test
    uses (6), or only ones the test does not use (-5: a feature the test does not exercise)."""
    s, reasons = 0.0, []
    if any(c["sha"].startswith(r) for r in sig.get("refs", ())):
        s += 15.0
        reasons.append("hashref")
    if sig["tickets"] and sig["tickets"] & set(TICKET_RE.findall(c["subject"])):
        s += 12.0
        reasons.append("ticket")
    if introduced & used.keys():
        s += 6.0
        reasons.append("uses:" + ",".join(sorted(introduced & used.keys())[:3]))
    elif introduced:
        s -= 5.0
        reasons.append("unused:" + ",".join(sorted(introduced)[:3]))
    return s, reasons


def shape_points(sig, c):
    """Points for the shape of the change: near the test commit in time (weakly so within a
    TODO guard's release window, where the fix may sit anywhere), small (small fixes are more
    typical for benchmark tasks than large features), and by its subject neither a port to
    another platform or SSL library nor a refactoring."""
    days = abs(sig["date"] - c["date"]) / 86400.0
    s = 1.5 * math.exp(-days / 45.0) if sig["kind"] == "todo" else 3.0 * math.exp(-days / 20.0)
    reasons = [f"{days:.0f}d"]
    size = c["add"] + c["rem"]
    if size > 400:
        s -= 2.0
    elif size <= 60:
        s += 0.5
    if PORTABILITY_RE.search(c["subject"]):
        s -= 4.0
        reasons.append("portability")
    elif REFACTOR_RE.search(c["subject"]):
        s -= 3.0
        reasons.append("refactoring")
    return s, reasons


def score(sig, c, sig_words, introduced, used):
    """(points, reasons) of nginx commit `c` as the fix a test signal tests: topic_points,
    evidence_points (`introduced`: the names `c` introduces; `used`: those the test uses)
    and shape_points."""
    total, reasons = 0.0, []
    for points, why in (topic_points(sig, c, sig_words),
                        evidence_points(sig, c, introduced, used), shape_points(sig, c)):
        total += points
        reasons += why
    return total, reasons


def pick_files(files, c):
    """The test files of a signal most related to fix commit `c` (at most two)."""
    fix_words = words(c["subject"]) | words(" ".join(p.rsplit("/", 1)[-1] for p in c["files"]))
    sarea = subject_area(c["subject"])
    paths = " ".join(c["files"])

    def rel(f):
        area = test_area(f)
        r = len(words(f[:-2]) & fix_words)
        r += 2 if area == sarea else 0
        r += 1 if any(frag and frag in paths for frag in AREA_PATHS.get(area, [])) else 0
        return r

    ranked = sorted(files, key=lambda f: (-rel(f), f))
    top = rel(ranked[0])
    return [f for f in ranked if rel(f) == top][:2]


def needs_of(git_dir, commit, files):
    """(configure flags, Perl modules) the test files need at `commit`, as the doctor reads them
    (nginx_eval/testsuite.py): the flags that build every module their has() calls name, the
    non-core modules they load or call."""
    names, perl = [], []
    for f in files:
        data = gitcmd.file_at(git_dir, commit, f)
        if data is None:
            continue
        req = requirements_in_order(data.decode(errors="replace"))
        names += req["nginx_modules"]
        perl += req["perl_modules"]
    return configure_flags_for(dict.fromkeys(names)), list(dict.fromkeys(perl))


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nginx", required=True, help="git dir of nginx")
    ap.add_argument("--tests", required=True, help="git dir of nginx-tests")
    ap.add_argument("--out", required=True)
    ap.add_argument("--since", default="2020-01-01")
    ap.add_argument("--limit", type=int, default=0, help="keep at most N candidates (0: all)")
    ap.add_argument("--per-signal", type=int, default=4,
                    help="candidate fixes kept per test signal")
    ap.add_argument("--min-score", type=float, default=4.0)
    ap.add_argument("--window-days", type=int, default=45,
                    help="date window for signals without a version guard")
    return ap.parse_args(argv)


class NginxHistory:
    """The nginx side of the search: its code commits, by id and by abbreviated id, each with
    the words of its message ("told"); its release tags, with the commits of each release
    window asked of git once; the directives and variables each commit adds, and when each
    name first came."""

    def __init__(self, git_dir, since):
        self.git_dir = git_dir
        commits = nginx_commits(git_dir, since)
        self.commits = [c for c in commits if is_code_commit(c)]
        self.by_sha = {c["sha"]: c for c in self.commits}
        self.by_prefix = {c["sha"][:9]: c for c in self.commits}
        self.tags = release_tags(git_dir)
        self._windows = {}
        self.introduced = introduced_names(git_dir, since, commits[-1]["sha"]) if commits else {}
        messages = gitcmd.commit_messages(git_dir, since)
        for c in self.commits:
            c["told"] = words(messages.get(c["sha"], ""))     # what its message says it does
        self.introduced_at = first_added(self.introduced, commits)

    def candidates(self, sig, window_days):
        """The commits that may be the fix a test signal tests: for a TODO guard the commits
        it names by hash, when it names any, else those of its versions' release windows; for
        other signals those of the days around the test commit and those it names by hash."""
        named = referenced(sig, self.by_prefix)
        if sig["kind"] == "todo":
            if named:
                return named            # "fixed in 3afd85e4b": no need to guess
            pool = set()
            for v in sig["versions"]:
                pool |= version_window(self.git_dir, self.tags, v, self._windows)
            return [self.by_sha[s] for s in pool if s in self.by_sha]
        lo, hi = sig["date"] - window_days * 86400, sig["date"] + 10 * 86400
        cands = [c for c in self.commits if lo <= c["date"] <= hi]
        return cands + [c for c in named if not lo <= c["date"] <= hi]


def file_topic_words(name):
    """The topic words of a test file's name, less those of its area prefix ("proxy_" of
    proxy_connection_headers.t): the area is scored apart, and its word would match every
    commit of the area."""
    base = name.rsplit("/", 1)[-1][:-2]
    prefix = next((prefix for prefix, _ in AREA_BY_PREFIX if base.startswith(prefix)), "")
    return words(base) - words(prefix)


def signal_words(sig):
    """(primary, guarded, secondary) topic words of a test signal: its commit subject and file
    names describe the topic, the assertions its guards make TODO say what the fix changes,
    its other assertion texts only hint."""
    return (words(sig["subject"]) | set().union(*map(file_topic_words, sig["files"])),
            words(sig["guarded_text"]), words(sig["text"]))


def top_candidates(sig, cands, history, min_score, per_signal):
    """The best `per_signal` (score, commit, reasons) of `cands` for a test signal that score
    at least `min_score`, best first. A TODO guard is strong evidence; a ticket signal whose
    ticket the commit does not name is weak. A commit older than a directive or variable the
    test uses is no candidate: neither its build nor its base's could run the test."""
    sig_words = signal_words(sig)
    used = names_used(sig["added"], history.introduced_at)
    scored = []
    for c in cands:
        if any(when > c["date"] for when in used.values()):
            continue
        s, why = score(sig, c, sig_words, history.introduced.get(c["sha"], set()), used)
        if sig["kind"] == "todo":
            s += 4.0
        elif sig["kind"] == "ticket" and "ticket" not in why:
            s -= 3.0
        if s >= min_score:
            scored.append((s, c, why))
    scored = demote_followups(scored)
    scored.sort(key=lambda x: -x[0])
    return scored[:per_signal]


def demote_followups(scored):
    """`scored` with 2 points off each commit that an earlier one, scoring at most 4 points
    less, precedes in the same sources: the earlier is the likelier fix, and the later one's
    base (its parent) would already hold it, so its test could not tell the two apart."""
    out = []
    for s, c, why in scored:
        files = code_files(c)
        before = [(s2, a) for s2, a, _ in scored
                  if a["date"] < c["date"] and s2 >= s - 4.0 and files & code_files(a)]
        if before:
            _, likelier = max(before, key=lambda x: x[0])
            s, why = s - 2.0, why + [f"after:{likelier['sha'][:9]}"]
        out.append((s, c, why))
    return out


def best_proposals(signals, history, args):
    """One proposal per fix, best first, at most args.limit (0: all): {"_score", "_sig",
    "_commit", "_why", "_rank"} of the test signal that scores it highest (_rank: its place
    among that signal's candidates, 1 the best)."""
    proposals = {}                  # (fix, test_commit) -> proposal
    for sig in signals:
        cands = history.candidates(sig, args.window_days)
        top = top_candidates(sig, cands, history, args.min_score, args.per_signal)
        for rank, (s, c, why) in enumerate(top, 1):
            key = (c["sha"], sig["commit"])
            if key in proposals and proposals[key]["_score"] >= s:
                continue
            proposals[key] = {"_score": s, "_sig": sig, "_commit": c, "_why": why, "_rank": rank}
    # one stub per fix: the best-scoring test signal wins
    best = {}
    for (fix, _), p in proposals.items():
        if fix not in best or p["_score"] > best[fix]["_score"]:
            best[fix] = p
    ranked = sorted(best.values(), key=lambda p: -p["_score"])
    return ranked[:args.limit] if args.limit else ranked


def task_stub(p, nginx_dir, tests_dir):
    """The benchmark task a proposal suggests (fail_to_pass, pass_to_pass and the problem
    statement left to a human), or None when its fix has no parent to be the base."""
    c, sig = p["_commit"], p["_sig"]
    base = gitcmd.first_parent(nginx_dir, c["sha"])
    if base is None:
        return None
    files = pick_files(sig["files"], c)
    flags, perl = needs_of(tests_dir, sig["commit"], files)
    areas = sorted({test_area(f) for f in files})
    return {
        "instance_id": f"nginx__nginx-{c['sha'][:12]}",
        "repo": "nginx/nginx", "test_repo": "nginx/nginx-tests",
        "base_commit": base, "fix_commit": c["sha"], "fix_date": c["day"],
        "test_commit": sig["commit"],
        "test_files": files, "configure_flags": flags,
        "fail_to_pass": [], "pass_to_pass": [], "problem_statement": "TODO",
        "perl_modules": perl,
        "area": subject_area(c["subject"]) or (areas[0] if areas else "http"),
        "gold_size": {"files": len(c["files"]), "lines_added": c["add"],
                      "lines_removed": c["rem"]},
        "notes": (f"score {p['_score']:.1f} ({sig['kind']}"
                  f"{' ' + ','.join(sorted(sig['versions'])) if sig['versions'] else ''}"
                  f", #{p['_rank']} for its test); "
                  f"{' '.join(p['_why'])}; fix: {c['subject']}; test: {sig['subject']}"),
    }


def write_candidates(path, stubs):
    with open(path, "w", encoding="utf-8") as fh:
        json.dump({"name": "nginx-candidates", "candidates": True,
                   "description": "Task stubs proposed by scripts/mine_tasks.py; unvalidated.",
                   "tasks": stubs}, fh, indent=1)
        fh.write("\n")


def print_candidates(stubs, rows):
    """A line per stub: its score, fix, test commit, signal kind, test files and fix subject."""
    print(f"{'#':>3} {'score':>5} {'fix':12} {'test':8} {'kind':6} {'files':28} subject")
    for i, (s, (score_, kind, subject)) in enumerate(zip(stubs, rows), 1):
        print(f"{i:>3} {score_:5.1f} {s['fix_commit'][:12]} {s['test_commit'][:8]} "
              f"{kind:6} {','.join(s['test_files'])[:28]:28} {subject[:60]}")


def main(argv=None):
    args = parse_args(argv)
    t0 = time.time()
    since_ts = datetime.fromisoformat(args.since).replace(tzinfo=timezone.utc).timestamp()
    # A fix may land well before the test commit that checks it: nginx from 200 days earlier.
    early = datetime.fromtimestamp(since_ts - 200 * 86400, timezone.utc).strftime("%Y-%m-%d")
    history = NginxHistory(args.nginx, early)
    signals = test_signals(args.tests, args.since)
    stubs, rows = [], []
    for p in best_proposals(signals, history, args):
        stub = task_stub(p, args.nginx, args.tests)
        if stub is not None:
            stubs.append(stub)
            rows.append((p["_score"], p["_sig"]["kind"], p["_commit"]["subject"]))
    write_candidates(args.out, stubs)
    print_candidates(stubs, rows)
    print(f"{len(stubs)} candidates from {len(signals)} test signals, "
          f"{len(history.commits)} nginx commits, in {time.time() - t0:.1f} s -> {args.out}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
