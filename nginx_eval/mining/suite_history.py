"""Reading the nginx-tests history: the signal of each test commit that may test an nginx fix.

A commit's patch is read test file by test file (``read_test_patch``): the lines it adds, the
TODO guards it sets (``local $TODO = ... unless $t->has_version('X.Y.Z')``, also continued on a
later line) and the assertions and comments they cover, the abbreviated nginx hashes it quotes;
a guard that holds only with another SSL library than OpenSSL marks the patch as no signal.
``test_signals`` turns each commit into a signal (the schema is in its docstring), and
``names_used`` tells which directives and variables a test's text uses."""

import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nginx_eval.core import gitcmd

VERSION_RE = re.compile(r"has_version\(\s*'(\d+\.\d+\.\d+)'\s*\)")
GUARD_RE = re.compile(r"\$TODO|todo_skip|todo_alerts|skip_all|TODO")
TICKET_RE = re.compile(r"ticket\s*#?(\d+)", re.I)
HASH_RE = re.compile(r"\b([0-9a-f]{9,12})\b")  # "fixed in 3afd85e4b" in test comments
DESC_RE = re.compile(
    r"""(?:like|is|isnt|unlike|ok|is_deeply)\s*\(.*?,\s*['"]([^'"]{3,80})['"]\s*\)"""
)
COMMENT_RE = re.compile(r"^\s*#\s*(.+)$")
# A guard that holds only when nginx is built with another SSL library than OpenSSL, the one the
# harness builds with: "local $TODO = ... if $t->has_module('AWS-LC') and !$t->has_version(...)".
FOREIGN_GUARD_RE = re.compile(
    r"\bif\b.*?(?<!!)\$t->has_module\('[^']*(?:BoringSSL|AWS-LC|LibreSSL)"
)
# The names a test's config (a line's first word: a directive) and $variables use.
CONF_WORD_RE = re.compile(r"^\s*([a-z][a-z0-9_]*)\s", re.M)
VAR_USE_RE = re.compile(r"\$\{?([a-z][a-z0-9_]*)")


@dataclass
class SuiteChanges:
    """What the patch of one nginx-tests commit does to its test files."""

    files: set[str] = field(default_factory=set)  # .t files it adds lines to
    added: set[str] = field(default_factory=set)  # files it creates
    # .t file -> guard versions
    guarded: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    texts: list[str] = field(default_factory=list)  # assertion descriptions of its added lines
    # descriptions, comments its guards cover
    guarded_texts: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # its added lines (the config a test uses)
    refs: set[str] = field(default_factory=set)  # abbreviated hashes in its added lines
    foreign: bool = False  # a guard for another SSL library only


@dataclass
class _Reading:
    """Where read_test_patch is in one file: the added statement it reads, the comments since
    the last assertion, and whether it is inside a block that a guard makes TODO."""

    statement: list[str] = field(default_factory=list)
    added: bool = False  # the commit adds a line of that statement
    comments: list[str] = field(default_factory=list)
    in_guard: bool = False


def guard_version(statement: str) -> str | None:
    """The X.Y.Z of an added statement that makes assertions TODO unless has_version('X.Y.Z'),
    or that continues such a condition from a line before ("or ...has_version(...)"); None for
    any other statement."""
    m = VERSION_RE.search(statement)
    if m and (
        GUARD_RE.search(statement)
        or statement.lstrip().startswith(("or ", "and ", "if ", "unless "))
    ):
        return m.group(1)
    return None


def read_statement(patch: SuiteChanges, path: str, reading: _Reading) -> None:
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
        patch.guarded_texts.extend(reading.comments)  # what the guarded assertions are about
        reading.in_guard = True


def read_line(patch: SuiteChanges, path: str, text: str, reading: _Reading, added: bool) -> None:
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
        reading.in_guard = False  # the end of a TODO block


def read_test_patch(body: str) -> SuiteChanges:
    """The SuiteChanges of a commit's patch (the text after its log line)."""
    patch, reading = SuiteChanges(), _Reading()
    current: str | None = None
    creates: bool | None = None
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
            reading = _Reading()  # another place in the file
        elif line.startswith(("+", " ")):
            read_line(patch, current, line[1:], reading, line.startswith("+"))
    return patch


def test_signal(sha: str, ct: int, subject: str, patch: SuiteChanges) -> dict[str, Any] | None:
    """The signal of one nginx-tests commit (see test_signals), or None when it adds no test
    lines, only adjusts TODOs without a version guard, or guards only for another SSL
    library."""
    if not patch.files or (patch.foreign and not patch.guarded):
        return None
    tickets = set(TICKET_RE.findall(subject))
    base: dict[str, Any] = {
        "commit": sha,
        "date": ct,
        "subject": subject,
        "tickets": tickets,
        "text": " ".join(patch.texts),
        "guarded_text": " ".join(patch.guarded_texts),
        "added": "\n".join(patch.lines),
        "refs": patch.refs | set(HASH_RE.findall(subject)),
    }
    if patch.guarded:
        return dict(
            base,
            kind="todo",
            files={f: v for f, v in patch.guarded.items()},
            versions=set().union(*patch.guarded.values()),
        )
    subj = subject.lower()
    if "todo" in subj and "adjust" in subj:
        return None  # pure TODO bookkeeping without a version guard
    chosen = sorted(patch.added) or sorted(patch.files)
    return dict(
        base,
        kind="ticket" if tickets else "topic",
        files={f: set() for f in chosen[:3]},
        versions=set(),
    )


def test_signals(git_dir: str | Path, since: str) -> list[dict[str, Any]]:
    """Scan nginx-tests commits. Returns a list of signals: {kind, commit, date, subject,
    files: {file: set(versions)}, versions, text, guarded_text, added, tickets, refs}"""
    signals: list[dict[str, Any]] = []
    for sha, ct, subject, body in gitcmd.commit_patches(git_dir, since, "*.t"):
        signal = test_signal(sha, ct, subject, read_test_patch(body))
        if signal:
            signals.append(signal)
    return signals


def names_used(text: str, introduced_at: Mapping[str, float]) -> dict[str, float]:
    """{name: when it was introduced} of the names of `introduced_at` that a test's text uses:
    a config line's first word (a directive), a $variable."""
    used = set(CONF_WORD_RE.findall(text)) | set(VAR_USE_RE.findall(text))
    return {name: introduced_at[name] for name in used if name in introduced_at}
