"""Scoring and pairing: which nginx commits are the likeliest fixes a test signal tests.

``score`` adds up the points of a commit for a signal (nginx_eval/mining/suite_history.py):
the topic they share (``topic_points``: words, the area of the subject and of the sources),
the evidence that ties them (``evidence_points``: a quoted hash, a shared ticket, a directive or
variable the commit adds and the test uses) and the shape of the change (``shape_points``: days
apart, size, ports and refactorings). ``top_candidates`` keeps the best commits of a signal,
dropping those older than a name the test uses and demoting follow-ups; ``best_proposals``
keeps one proposal per fix, from the signal that scores it highest."""

import argparse
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nginx_eval.mining.nginx_history import NginxHistory, code_files
from nginx_eval.mining.suite_history import TICKET_RE, names_used
from nginx_eval.mining.topics import file_topic_words, subject_area, words
from nginx_eval.prove.areas import AREA_PATHS, test_area

# Subjects of commits that rarely change what a test sees on Linux (epoll) with OpenSSL.
PORTABILITY_RE = re.compile(
    r"boringssl|aws-lc|libressl|quictls|win32|windows|msvc|solaris|"
    r"freebsd|macos|cygwin|\bselect\b|kqueue|eventport|devpoll|"
    r"\bcompat(?:ibility)?\b|compil|\bbuild\b|\btypos?\b",
    re.I,
)
# A commit of nginx or a signal of nginx-tests, as nginx_history.py and suite_history.py read them.
Record = Mapping[str, Any]
# (score, commit, reasons) of a candidate fix for a signal.
Scored = tuple[float, Record, list[str]]
# (primary, guarded, secondary) topic words of a signal (signal_words).
SignalWords = tuple[set[str], set[str], set[str]]
REFACTOR_RE = re.compile(
    r"refactor|factored out|extracted|changed interface|simplified|"
    r"\bmoved\b|renamed|clean ?up|\bstyle\b|\bunified\b|\bcomments?\b",
    re.I,
)


def commit_words(c: Record) -> set[str]:
    """The topic words of an nginx commit: its subject and the names of the files it touches."""
    return words(c["subject"]) | words(" ".join(p.rsplit("/", 1)[-1] for p in c["files"]))


def area_focus(areas: Iterable[str], c: Record) -> float:
    """The share of a commit's C sources that lie in the test files' areas (AREA_PATHS)."""
    code = code_files(c)
    frags = [frag for a in areas for frag in AREA_PATHS.get(a, []) if frag]
    return sum(any(frag in f for frag in frags) for f in code) / len(code) if code else 0.0


def topic_points(sig: Record, c: Record, sig_words: SignalWords) -> tuple[float, list[str]]:
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
        reasons.append(
            "words:"
            + ",".join(sorted(shared)[:6])
            + ("/" + ",".join(sorted(hinted)[:3]) if hinted else "")
            + ("+" + ",".join(sorted(extra)[:4]) if extra else "")
        )
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


def evidence_points(
    sig: Record, c: Record, introduced: set[str], used: Mapping[str, float]
) -> tuple[float, list[str]]:
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


def shape_points(sig: Record, c: Record) -> tuple[float, list[str]]:
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


def score(
    sig: Record, c: Record, sig_words: SignalWords, introduced: set[str], used: Mapping[str, float]
) -> tuple[float, list[str]]:
    """(points, reasons) of nginx commit `c` as the fix a test signal tests: topic_points,
    evidence_points (`introduced`: the names `c` introduces; `used`: those the test uses)
    and shape_points."""
    total, reasons = 0.0, []
    for points, why in (
        topic_points(sig, c, sig_words),
        evidence_points(sig, c, introduced, used),
        shape_points(sig, c),
    ):
        total += points
        reasons += why
    return total, reasons


def signal_words(sig: Record) -> SignalWords:
    """(primary, guarded, secondary) topic words of a test signal: its commit subject and file
    names describe the topic, the assertions its guards make TODO say what the fix changes,
    its other assertion texts only hint."""
    return (
        words(sig["subject"]) | set().union(*map(file_topic_words, sig["files"])),
        words(sig["guarded_text"]),
        words(sig["text"]),
    )


def top_candidates(
    sig: Record,
    cands: Iterable[Record],
    history: NginxHistory,
    min_score: float,
    per_signal: int,
) -> list[Scored]:
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


def demote_followups(scored: Sequence[Scored]) -> list[Scored]:
    """`scored` with 2 points off each commit that an earlier one, scoring at most 4 points
    less, precedes in the same sources: the earlier is the likelier fix, and the later one's
    base (its parent) would already hold it, so its test could not tell the two apart."""
    out = []
    for s, c, why in scored:
        files = code_files(c)
        before = [
            (s2, a)
            for s2, a, _ in scored
            if a["date"] < c["date"] and s2 >= s - 4.0 and files & code_files(a)
        ]
        if before:
            _, likelier = max(before, key=lambda x: x[0])
            s, why = s - 2.0, why + [f"after:{likelier['sha'][:9]}"]
        out.append((s, c, why))
    return out


def best_proposals(
    signals: Iterable[Record], history: NginxHistory, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """One proposal per fix, best first, at most args.limit (0: all): {"_score", "_sig",
    "_commit", "_why", "_rank"} of the test signal that scores it highest (_rank: its place
    among that signal's candidates, 1 the best)."""
    proposals: dict[tuple[str, str], dict[str, Any]] = {}  # (fix, test_commit) -> proposal
    for sig in signals:
        cands = history.candidates(sig, args.window_days)
        top = top_candidates(sig, cands, history, args.min_score, args.per_signal)
        for rank, (s, c, why) in enumerate(top, 1):
            key = (c["sha"], sig["commit"])
            if key in proposals and proposals[key]["_score"] >= s:
                continue
            proposals[key] = {"_score": s, "_sig": sig, "_commit": c, "_why": why, "_rank": rank}
    # one stub per fix: the best-scoring test signal wins
    best: dict[str, dict[str, Any]] = {}
    for (fix, _), p in proposals.items():
        if fix not in best or p["_score"] > best[fix]["_score"]:
            best[fix] = p
    ranked = sorted(best.values(), key=lambda p: -p["_score"])
    return ranked[: args.limit] if args.limit else ranked
