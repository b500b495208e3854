"""Reading what ``prove -v FILE`` printed: the assertions of one test file, and whether the stream
can be trusted.

prove -v echoes the test's TAP and adds lines of its own. Two of its rewrites matter: a whole-file
skip (``1..0 # SKIP reason``) arrives as ``file.t .. skipped: reason``, and ``Bail out!`` as
``Bailout called.  Further testing stopped:  reason``. Skip lines of nginx-tests carry no
description (``ok 19 # skip FCGI not installed``), so skips are kept by number.

The stream is also written to by anything that inherits the test's stdout. The harness keeps
nginx's own output out of it (prove/env.py's output guard), and this parser checks the stream
anyway: Test::More numbers assertions 1, 2, 3... and prints one plan, so a repeated number, a number
out of sequence, a number past the plan or a second plan means someone else wrote TAP into the
stream. Such a file is ``tampered``: its assertions count for nothing.

Assertion ids are ``"<file>:<number> <description>"`` (``"<file>:<number>"`` without one):
numbers make them unique (nginx-tests repeats names within a file) and the pinned test commit
keeps them stable.
"""

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

PROVE_SKIPPED = re.compile(r"^(?P<file>\S+) \.+ skipped: ?(?P<reason>.*)$")
PROVE_BAILOUT = re.compile(r"^Bailout called\.\s+Further testing stopped:?\s*(?P<reason>.*)$")
# The summary prove prints after a failed file: its wait status, as waitpid gave it.
PROVE_WAIT_STATUS = re.compile(r"^(?P<file>\S+) \(Wstat: (?P<status>\d+)\b")


def assertion_id(file: str, number: int, description: str | None) -> str:
    desc = re.sub(r"^-\s*", "", (description or "").strip()).strip()
    return f"{file}:{number} {desc}" if desc else f"{file}:{number}"


def assertion_number(ident: str) -> int:
    """The number of an assertion id (``h2.t:12 name`` -> 12)."""
    return int(ident.split(":", 1)[1].split(" ", 1)[0])


@dataclass
class FileResult:
    file: str
    planned: int | None = None
    skip_all: str | None = None  # the reason, when the whole file skipped
    # id -> True (pass) / False (fail), ran only
    results: dict[str, bool] = field(default_factory=dict)
    # number -> id, of the assertions that ran
    numbers: dict[int, str] = field(default_factory=dict)
    # number -> reason, of "ok N # skip"
    skipped: dict[int, str] = field(default_factory=dict)
    bailed_out: str | None = None
    tampered: list[str] = field(default_factory=list)  # why the stream cannot be trusted
    signal: int | None = None  # the signal that ended the test file's process, from prove's summary

    @property
    def seen(self) -> int:
        """How many numbered assertion lines the file printed (ran or skipped)."""
        return len(self.numbers) + len(self.skipped)

    @property
    def complete(self) -> bool:
        """The file printed a plan and as many assertions as it planned."""
        return self.planned is not None and self.seen >= self.planned

    def ran(self, ident: str) -> bool:
        """Whether the assertion `ident` ran (passed or failed, not skipped)."""
        return self.numbers.get(assertion_number(ident)) == ident


def _read_prove_line(fr: FileResult, file: str, line: str) -> bool:
    """Take prove's rewrites of a whole-file skip and of a bail-out; whether `line` was one."""
    skipped = PROVE_SKIPPED.match(line)
    if skipped and skipped["file"] == file:
        fr.skip_all = skipped["reason"].strip() or "skipped"
        return True
    bail = PROVE_BAILOUT.match(line)
    if bail:
        fr.bailed_out = bail["reason"].strip() or "bail out"
        return True
    waited = PROVE_WAIT_STATUS.match(line)
    if waited and waited["file"] == file:
        fr.signal = (int(waited["status"]) & 0x7F) or None
        return True
    return False


def _read_plan(fr: FileResult, parsed: Any, line: str, expected: int) -> None:
    """Take a plan line; `expected` is the number the next assertion should have."""
    if fr.planned is not None:
        fr.tampered.append(f"a second plan ({line.strip()})")
    elif expected - 1 > parsed.expected_tests:
        # A plan at the end (done_testing) must cover what came before it.
        fr.tampered.append(f"assertion {expected - 1} past the plan of {parsed.expected_tests}")
    fr.planned = parsed.expected_tests
    if parsed.expected_tests == 0 and parsed.skip:
        fr.skip_all = parsed.directive.reason or "skipped"


def _read_assertion(fr: FileResult, file: str, parsed: Any, expected: int) -> int:
    """Take a numbered assertion line; return the number the next one should have."""
    number = parsed.number
    if number in fr.numbers or number in fr.skipped:
        fr.tampered.append(f"assertion {number} printed twice")
        return expected
    if number != expected:
        fr.tampered.append(f"assertion {number} out of sequence (expected {expected})")
    if fr.planned is not None and number > fr.planned:
        fr.tampered.append(f"assertion {number} past the plan of {fr.planned}")
    if parsed.skip:
        fr.skipped[number] = parsed.directive.reason or "skipped"
        return number + 1
    ident = assertion_id(file, number, parsed.description)
    fr.numbers[number] = ident
    # `not ok # TODO` has ok == False: a failure here, whatever prove says.
    fr.results[ident] = bool(parsed.ok)
    return number + 1


def parse_tap(file: str, text: str) -> FileResult:
    """The FileResult of the output of ``prove -v FILE`` (or of the raw TAP of FILE)."""
    fr = FileResult(file)
    # Imported here: tap.parser brings yaml and unittest, a third of the time every doit
    # command took to import the harness, and only proves and grades parse a stream.
    from tap.parser import Parser

    parser, expected = Parser(), 1
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if _read_prove_line(fr, file, line):
            continue
        parsed = parser.parse_line(line)
        if parsed.category == "plan":
            _read_plan(fr, parsed, line, expected)
        elif parsed.category == "bail":
            fr.bailed_out = parsed.reason or "bail out"
        elif parsed.category == "test" and parsed.number is not None:
            # A line without a number is prove's own "ok" after a passing file.
            expected = _read_assertion(fr, file, parsed, expected)
    return fr


@dataclass
class Problem:
    """Why a test file did not run to its end. kind: "env" (never the patch's doing),
    "tampered", "not_started" (no plan, or skipped entirely) or "died"."""

    kind: str
    text: str


def file_problem(fr: FileResult, record: Mapping[str, Any]) -> Problem | None:
    """The Problem of a file's run (its FileResult and prove.json record, a ProveRun, or
    {"missing": True}), or None."""
    if record.get("missing"):
        return Problem("env", "test file does not exist at the test commit")
    code, timed_out = record.get("exit_code"), record.get("timed_out")
    # prove itself ending by a signal (a negative exit code from subprocess): the test did not
    # decide, whatever TAP came out. The patched nginx may be what killed it: the base build's
    # run of the same file decides (grade.judge_file).
    if not timed_out and isinstance(code, int) and code < 0:
        return Problem("killed", f"prove was killed by signal {-code}")
    if fr.tampered:
        return Problem("tampered", "TAP written by someone else: " + "; ".join(fr.tampered[:3]))
    if fr.skip_all is not None:
        return Problem("not_started", f"skipped entirely ({fr.skip_all})")
    if fr.bailed_out:
        return Problem("died", f"bailed out ({fr.bailed_out})")
    if timed_out:
        return None  # killed at the limit: what it printed counts, the rest fails
    if fr.signal:
        # Killed (by the patch's program, or a crash of Perl), as prove itself fails it: a
        # complete stream too, which another process could have written before the kill.
        if fr.planned is not None:
            where = f"after {fr.seen} of {fr.planned} assertions"
        else:
            where = f"after {fr.seen} assertions, before its plan" if fr.seen else "before its plan"
        return Problem("died", f"killed by signal {fr.signal} {where}")
    if fr.planned is None:
        return Problem(
            "not_started",
            "no plan"
            + (f" after {fr.seen} assertions" if fr.seen else f" and no TAP (exit code {code})"),
        )
    if not fr.complete:
        return Problem("died", f"died after {fr.seen} of {fr.planned} assertions")
    return None


def counted_results(fr: FileResult, record: Mapping[str, Any]) -> dict[str, bool]:
    """The assertions of a file's run that count: none of a stream another process may have
    written, a tampered one or one whose test file was killed by a signal (not the harness's,
    at the time limit: what such a file printed counts)."""
    if fr.tampered or (fr.signal and not record.get("timed_out")):
        return {}
    return dict(fr.results)


def graded_skips(fr: FileResult, graded: Iterable[str]) -> list[str]:
    """The graded assertion ids (of this file) that printed ``ok N # skip``."""
    return [i for i in graded if assertion_number(i) in fr.skipped]


def needs_reference(fr: FileResult, record: Mapping[str, Any], graded: Iterable[str]) -> bool:
    """Whether only a run of the base build can say whose fault this file's problem is."""
    problem = file_problem(fr, record)
    return bool(graded_skips(fr, graded)) if problem is None else problem.kind != "env"
