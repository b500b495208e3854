"""The doctor's report: what it found (Finding) and how that reads.

OK lines collapsed per kind, one line per problem, one install line and the verdict, whose
formats doctor.py's docstring shows beside what the doctor checks; doctor.py finds, this module
writes.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..core.tasknames import repo_task

NOT_CHECKED = "not checked"  # kind of a warning about something the doctor could not check
SWEBENCH_GRADING = "SWE-bench grading"  # kind: whether the official harness runs here
REPOSITORY = "repository"  # kind: a SWE-bench task's repository, cloned or reachable
TOOLCHAIN_LIST = "scripts/toolchain-packages.txt"


# How a finding stands: checked and fine, a warning, something missing, something wrong.
Level = Literal["ok", "warn", "missing", "error"]


@dataclass
class Finding:
    level: Level
    kind: str  # "tool", "isolation", "agent sandbox", "agent" (an agent mode's
    # program, credentials, endpoint), "library", "perl module", "daemon",
    # "configure", "tests",
    # "openssl" (the configuration for tests), "certificate" (one a test
    # file makes), NOT_CHECKED (what: the repository that is not cloned),
    # SWEBENCH_GRADING (Docker and the swebench package, for a SWE-bench
    # benchmark), REPOSITORY (what: a SWE-bench task's owner/name; note:
    # how it is had, or why it cannot be cloned), "toolchain" (the pinned
    # root filesystem, core/rootfs.py)
    what: str
    who: tuple[str, ...] = ()  # task ids / "task (file)"
    package: str = ""
    note: str = ""
    toolchain: bool = False  # looked for in the pinned toolchain's root filesystem


def _who(who: Iterable[str], limit: int = 4) -> str:
    """The first `limit` of `who`, and how many more."""
    names = list(who)
    text = ", ".join(names[:limit])
    return text + (f" and {len(names) - limit} more" if len(names) > limit else "")


def verdict(findings: Sequence[Finding], bench: str | None = None) -> str:
    """The last line: "all good" only when everything was checked and nothing is wrong."""
    problems = [f for f in findings if f.level in ("missing", "error")]
    parts = [f"{len(problems)} problem(s)"] if problems else []
    repos = sorted({f.what for f in findings if f.kind == NOT_CHECKED})
    if repos:
        clone = f"`doit run {' '.join(repo_task(r) for r in repos)}`"
        if bench:
            clone += f" or `doit run {bench}:gold`"
        parts.append(
            f"not checked: {', '.join(repos)} not cloned (see WARN above); run {clone} "
            "(with the same run=/instances=), then the doctor again"
        )
    return "doctor: " + ("; ".join(parts) or "all good")


def render(
    findings: Sequence[Finding], ntasks: int | None = None, bench: str | None = None
) -> tuple[str, bool]:
    """(report text, ok): OK lines collapsed per kind, one line per problem, the install line,
    the verdict. ok: nothing is missing or wrong (what was not checked does not count)."""
    lines = [f"doctor: checking {ntasks} task(s)"] if ntasks is not None else []
    lines += _ok_lines(findings)
    packages: list[str] = []
    toolchain: list[str] = []
    for f in findings:
        line = _problem_line(f)
        if line:
            lines.append(line)
        if f.level == "missing":
            (toolchain if f.toolchain else packages).append(f.package)
    problems = [f for f in findings if f.level in ("missing", "error")]
    packages = list(dict.fromkeys(packages))
    if packages:
        lines.append("To install everything missing: apt-get install " + " ".join(packages))
    toolchain = list(dict.fromkeys(toolchain))
    if toolchain:
        lines.append(
            f"To add everything missing to the toolchain: add {' '.join(toolchain)} to "
            f"{TOOLCHAIN_LIST}, then run scripts/make-toolchain.sh"
        )
    lines.append(verdict(findings, bench))
    return "\n".join(lines), not problems


def _ok_lines(findings: Sequence[Finding]) -> list[str]:
    """One OK line per kind, naming everything of that kind that was found."""
    ok_by_kind: dict[str, list[str]] = {}
    lines: list[str] = []
    for f in findings:
        if f.level == "ok":
            ok_by_kind.setdefault(f.kind, []).append(f.what)
    for kind in (
        "toolchain",
        "tool",
        "isolation",
        "agent sandbox",
        "agent",
        "openssl",
        "library",
        "perl module",
        "daemon",
        "configure",
        "certificate",
        REPOSITORY,
        SWEBENCH_GRADING,
    ):
        if kind in ok_by_kind:
            names = list(dict.fromkeys(ok_by_kind[kind]))
            label = {
                "configure": "has() modules enabled by configure_flags",
                "library": "libraries",
                "toolchain": "toolchain",
                "isolation": "isolation",
                "agent sandbox": "agent sandbox",
                "agent": "agent modes",
                "openssl": "OpenSSL for tests",
                SWEBENCH_GRADING: SWEBENCH_GRADING,
                REPOSITORY: "repositories of the SWE-bench tasks",
                "certificate": "certificates the test files make, accepted by OpenSSL",
            }.get(kind, kind + "s")
            lines.append(f"OK      {label}: {', '.join(names)}")
    return lines


def _problem_line(f: Finding) -> str | None:
    """The MISSING, TASK ERROR or WARN line of a finding (None for an OK one)."""
    needed = f" (needed by {_who(f.who)})" if f.who else ""
    if f.level == "missing":
        note = f"; {f.note}" if f.note else ""
        if f.toolchain:
            return (
                f"MISSING {f.kind} {f.what}{needed} in the toolchain -> add {f.package} to "
                f"{TOOLCHAIN_LIST} and run scripts/make-toolchain.sh{note}"
            )
        return f"MISSING {f.kind} {f.what}{needed} -> apt-get install {f.package}{note}"
    if f.kind == "toolchain" and f.level in ("error", "warn"):
        return f"TOOLCHAIN {f.note}" if f.level == "error" else f"WARN    {f.note}"
    if f.level == "error":
        if f.kind == REPOSITORY:
            return f"CANNOT CLONE {f.what}{needed}: {f.note}"
        if f.kind == "certificate":
            return f"CANNOT RUN {_who(f.who)}: {f.note}"
        if f.kind == "agent":
            # Every mode the problem stops, named in full: each is a command that would fail.
            return f"CANNOT RUN mode{'s' if len(f.who) > 1 else ''} {', '.join(f.who)}: {f.note}"
        return (
            f"TASK ERROR {f.note}"
            if f.kind == "configure"
            else f"TASK ERROR {_who(f.who)}: {f.what} {f.note}"
        )
    if f.level == "warn":
        if f.kind == "tool":
            where = " in the toolchain" if f.toolchain else ""
            return (
                f"WARN    tool {f.what} not found{where} ({f.note}) -> apt-get install {f.package}"
            )
        if f.kind == "isolation":
            return f"WARN    no {f.what}: {f.note}"
        if f.kind == "setup":
            return f"WARN    package {f.what} (needed by {_who(f.who)}) is {f.note}"
        if f.kind in ("openssl", "agent", SWEBENCH_GRADING):
            return f"WARN    {f.note}"
        return f"WARN    {f.note} (tasks {_who(f.who)})"
    return None
