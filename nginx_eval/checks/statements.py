"""Problem statements a user would write: does a statement give the fix away, and does it say
how to reproduce the bug? ``doit run <bench>:lint`` checks the statement of every selected task.

A statement *gives the fix away* when it shares with the gold patch's added lines (the diff from
base to fix) or with the test commit's added lines in the task's test files:

- a distinctive word: an identifier with an underscore (snake_case, ngx_*, NGX_*), a camelCase
  word (not a capitalized name such as SmarterMail or OpenSSL), a name written as a call
  (``name()``), or a long number (6 digits or more, or 0x and 4 hex digits or more); or
- a whole line: 12 characters or more holding two words or more (spacing, backquotes and comment
  markers aside).

Words an nginx user sees are not flagged: those of the base's string literals (directive,
parameter and variable names, and the messages nginx prints, which name calls such as
"SSL_do_handshake() failed"), the CGI names of the headers the statement shows (HTTP_COOKIE
for Cookie: what a FastCGI, SCGI or uwsgi application sees), COMMON_WORDS, and, against the tests
only, the words of the statement's own configuration blocks: a user's configuration looks like a
test's, while a directive in it that only the fix introduces is still flagged against the fix.
Lines of the tests that are configuration (their first word is a name the base knows, also in a
comment) or HTTP (a request, status or header line) are not compared.

Warnings (a heuristic; they never fail the check): the statement of an HTTP task (a task whose
area is given and is not stream or mail) has no configuration block, or shows no request. The
lint also fails for a task without a fairness audit (its ``audit`` field, run/benchmark.py).
"""

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import UserFailure
from ..core.gitcmd import blobs_in_tree, gold_diff, gold_diffs, lookup_objects, read_blobs
from ..core.layout import Layout
from ..core.stamps import TaskDict
from ..core.tasknames import repo_task
from ..run.benchmark import Task, unaudited

if TYPE_CHECKING:
    from ..run.context import StageContext

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|0[xX][0-9A-Fa-f]+|[0-9]+")
CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\(\)")
CAMEL = re.compile(r"[a-z][A-Z]")
NAME = re.compile(r"[A-Z][A-Za-z]*")  # capitalized, letters only: a product, a protocol
# Words shaped like identifiers that any user writes.
COMMON_WORDS = frozenset(("macOS", "iOS", "HTTP_"))
NON_HTTP_AREAS = ("stream", "mail")
# A line of nginx configuration: a name, maybe arguments, then ";", "{" or "}" (and a comment); in
# a comment, a directive with an underscore may come without its ";" (BARE_DIRECTIVE), while a
# sentence ("the body is sent") is not configuration.
DIRECTIVE = re.compile(r"^\s*([a-z_][a-z0-9_]*)(?:\s+[^#]*?)?\s*[;{}]\s*(?:#.*)?$")
BARE_DIRECTIVE = re.compile(r"^([a-z][a-z0-9]*_[a-z0-9_]*)(?:\s+[^#;{]*)?$")
HEADER_NAME = re.compile(r"(?:^\s*|`)([A-Za-z][A-Za-z0-9-]*):\s", re.M)
METHODS = "GET|HEAD|POST|PUT|DELETE|OPTIONS|PATCH|CONNECT|PRI"
HTTP_LINE = re.compile(
    rf"^(?:(?:{METHODS})\s+\S+(?:\s+HTTP/[0-9.]+)?|HTTP/[0-9.]+\s+[0-9]{{3}}.*"
    r"|:?[A-Za-z][A-Za-z0-9-]*:\s.*)$"
)
# A request shown: a method, a backquoted path, curl or s_client, "request /x", "send a ...
# request", or a connection to a port (a TLS handshake, a stream or mail session).
REQUEST = re.compile(
    rf"\b(?:{METHODS})\b|:method|\bcurl\b|\bs_client\b|`/[^`\s]*`"
    r"|(?i:\brequest(?:s|ed|ing)?\s+(?:to\s+)?`?/"
    r"|\bsend(?:s|ing)?\s+(?:\w+\s+){0,2}requests?\b"
    r"|\bconnect\w*\b.{0,200}?\bport\s+[0-9]+)",
    re.S,
)
STRING_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"')  # on one line
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's id of the empty tree
MIN_LINE, MIN_LINE_WORDS = 12, 2


@dataclass(frozen=True)
class Evidence:
    """What a task's statement is compared with."""

    fix_lines: tuple[str, ...]  # lines the gold patch adds
    test_lines: tuple[str, ...]  # lines the test commit adds to the task's test files (of an
    # authored task: every line of its own files, which the project adds)
    vocabulary: frozenset[str]  # words of the string literals of the base's src/


def words(text: str) -> set[str]:
    return set(WORD.findall(text))


def is_distinctive(word: str) -> bool:
    if word[0].isdigit():
        return len(word) >= 6  # 6 digits, or 0x and 4 hex digits
    core = word.strip("_")
    if "_" in core:
        return any(c.isalpha() for c in core)
    return bool(CAMEL.search(word)) and not NAME.fullmatch(word)


def distinctive_words(text: str) -> set[str]:
    return {w for w in words(text) if is_distinctive(w)} | set(CALL.findall(text))


def added_lines(diff: bytes, paths: Iterable[str] | None = None) -> list[str]:
    """The lines a git diff (bytes) adds, of the files `paths` only when given."""
    lines: list[str] = []
    keep, in_header = True, False
    for raw in diff.decode("utf-8", "replace").splitlines():
        if raw.startswith("diff --git "):
            keep = paths is None or any(raw.endswith(f" b/{p}") for p in paths)
            in_header = True
        elif raw.startswith("@@"):
            in_header = False
        elif keep and not in_header and raw.startswith("+"):
            lines.append(raw[1:])
    return lines


def code_blocks(text: str) -> list[list[str]]:
    """The code blocks of a markdown text, each a list of lines: fenced ones, and runs of lines
    indented by 4 spaces or a tab that follow a blank line."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    fenced, prev_blank = False, True
    for line in text.splitlines():
        fence = line.lstrip().startswith(("```", "~~~"))
        indented = line.startswith(("    ", "\t")) and (prev_blank or current is not None)
        if fenced or (indented and not fence):
            current = [] if current is None else current
            current.append(line)
        elif line.strip() or fence:
            blocks.append(current or [])
            current = None
        if fence:
            if fenced and current is not None:
                current.pop()  # the closing fence itself
                blocks.append(current)
                current = None
            fenced = not fenced
        prev_blank = not line.strip()
    blocks.append(current or [])
    return [b for b in blocks if any(line.strip() for line in b)]


def config_blocks(text: str) -> list[list[str]]:
    """The code blocks that hold nginx configuration (a line `name [args];` or `name ... {`)."""
    return [b for b in code_blocks(text) if any(DIRECTIVE.match(line) for line in b)]


COMMENT_START = re.compile(r"^(?:/\*+|\*+/?|//+|#+)\s*")
COMMENT_END = re.compile(r"\s*\*+/$")


def normalized(line: str) -> str:
    """A line without its comment markers, backquotes and repeated spaces."""
    text = COMMENT_START.sub("", line.strip().replace("`", ""))
    return " ".join(COMMENT_END.sub("", text).split())


def is_user_level(line: str, vocabulary: frozenset[str]) -> bool:
    """A test line a user writes too: configuration, an HTTP request, status or header line."""
    text = normalized(line)
    directive = DIRECTIVE.match(text) or BARE_DIRECTIVE.match(text)
    return (
        text in ("}", "{")
        or bool(HTTP_LINE.match(text))
        or bool(directive and directive.group(1) in vocabulary)
    )


def cgi_names(statement: str) -> set[str]:
    """HTTP_<NAME> of each header `Name: value` the statement shows."""
    return {"HTTP_" + name.upper().replace("-", "_") for name in HEADER_NAME.findall(statement)}


def shared_lines(statement: str, lines: Iterable[str]) -> list[str]:
    """The lines of `lines` (normalized) that the statement holds whole."""
    mine = [normalized(line) for line in statement.splitlines()]
    found: set[str] = set()
    for line in {normalized(line) for line in lines}:
        if len(line) < MIN_LINE or len(WORD.findall(line)) < MIN_LINE_WORDS:
            continue
        # The pattern only for a line the statement holds at all: compiling one for each of a
        # fix's lines was most of the lint's time.
        holders = [text for text in mine if line in text]
        pattern = re.compile(rf"(?<!\w){re.escape(line)}(?!\w)") if holders else None
        if pattern and any(pattern.search(text) for text in holders):
            found.add(line)
    return sorted(found)


def leaked_words(statement: str, evidence: Evidence) -> dict[str, list[str]]:
    """{word: ["fix", "tests"]}: the statement's distinctive words a user does not see that the
    fix's or the tests' added lines hold."""
    exempt = evidence.vocabulary | COMMON_WORDS | cgi_names(statement)
    configuration = words("\n".join(line for b in config_blocks(statement) for line in b))
    mine = distinctive_words(statement) - exempt
    leaks: dict[str, list[str]] = {}
    for word in sorted(mine & words("\n".join(evidence.fix_lines))):
        leaks.setdefault(word, []).append("fix")
    for word in sorted((mine - configuration) & words("\n".join(evidence.test_lines))):
        leaks.setdefault(word, []).append("tests")
    return leaks


def warnings_for(statement: str, area: str | None) -> list[str]:
    if not area or area in NON_HTTP_AREAS:
        return []
    missing = [] if config_blocks(statement) else ["no configuration block"]
    return missing + ([] if REQUEST.search(statement) else ["no request"])


def check_statement(statement: str, area: str | None, evidence: Evidence) -> dict[str, Any]:
    """{"words": {word: [sources]}, "lines": {"fix"|"tests": [lines]}, "warnings": [str]};
    a statement gives the fix away when it has words or lines."""
    tests = [line for line in evidence.test_lines if not is_user_level(line, evidence.vocabulary)]
    lines = {
        "fix": shared_lines(statement, evidence.fix_lines),
        "tests": shared_lines(statement, tests),
    }
    return {
        "words": leaked_words(statement, evidence),
        "lines": {k: v for k, v in lines.items() if v},
        "warnings": warnings_for(statement, area),
    }


def gives_fix_away(result: dict[str, Any]) -> bool:
    return bool(result["words"] or result["lines"])


def literal_words(data: bytes) -> frozenset[str]:
    """The words of the string literals of a file's lines; none in a binary file (a NUL in its
    first 8000 bytes, as git decides)."""
    if b"\0" in data[:8000]:
        return frozenset()
    text = data.decode("utf-8", "replace")
    return frozenset(w for m in STRING_LITERAL.finditer(text) for w in WORD.findall(m.group(0)))


class SourceVocabulary:
    """The words of the string literals in a commit's source files, each version of a file read
    once: the base commits of a benchmark's tasks share most of their files (docs/performance.md,
    "String literals by blob")."""

    def __init__(self) -> None:
        self._of_blob: dict[str, frozenset[str]] = {}

    def words_at(self, git_dir: str | Path, commit: str, *pathspecs: str) -> frozenset[str]:
        blobs = blobs_in_tree(git_dir, commit, *pathspecs).values()
        unread = [oid for oid in blobs if oid not in self._of_blob]
        for oid, data in read_blobs(git_dir, unread).items():
            self._of_blob[oid] = literal_words(data)
        return frozenset().union(*(self._of_blob[oid] for oid in blobs))


def task_evidence(layout: Layout, task: Task, sources: SourceVocabulary | None = None) -> Evidence:
    """The Evidence of a task, from the bare clones of its repositories (and an authored task's
    own files: the nginx-tests files it shares were not written for its fix)."""
    return tasks_evidence(layout, [task], sources)[0]


def tasks_evidence(
    layout: Layout, tasks: Sequence[Task], sources: SourceVocabulary | None = None
) -> list[Evidence]:
    """task_evidence of each of `tasks`, in order: the diffs of a repository from one git call
    (gold_diffs) and the test commits' parents from another, not a few calls a task."""
    sources = sources or SourceVocabulary()
    fix_diffs = _diffs(layout, [(t.repo, t.base_commit, t.fix_commit) for t in tasks])
    tested = [t for t in tasks if not t.authored]
    parents: dict[str, dict[str, tuple[str, str]]] = {}
    for repo in {t.test_repo for t in tested}:
        names = [f"{t.test_commit}^" for t in tested if t.test_repo == repo]
        parents[repo] = lookup_objects(layout.bare_repo(repo), names)
    test_pairs = [
        (t.test_repo, parents[t.test_repo].get(f"{t.test_commit}^", ("", EMPTY_TREE))[1])
        + (t.test_commit,)
        for t in tested
    ]
    test_diffs = iter(_diffs(layout, test_pairs))  # in the order of `tested`
    found = []
    for task, fix_diff in zip(tasks, fix_diffs, strict=True):
        if task.authored:
            test_lines = [
                line
                for _, data in task.authored
                for line in data.decode("utf-8", "replace").splitlines()
            ]
        else:
            test_lines = added_lines(next(test_diffs), task.test_files)
        found.append(
            Evidence(
                fix_lines=tuple(added_lines(fix_diff)),
                test_lines=tuple(test_lines),
                vocabulary=sources.words_at(layout.bare_repo(task.repo), task.base_commit, "src"),
            )
        )
    return found


def _diffs(layout: Layout, triples: Sequence[tuple[str, str, str]]) -> list[bytes]:
    """gold_diff of each (repository, base, fix), in order: gold_diffs per repository, and one
    gold_diff for a root commit's (its base the empty tree, which diff-tree --stdin takes in
    no line with a commit)."""
    diffs: dict[int, bytes] = {}
    for repo in {r for r, _, _ in triples}:
        bare = layout.bare_repo(repo)
        mine = [i for i, (r, base, _) in enumerate(triples) if r == repo and base != EMPTY_TREE]
        for i, diff in zip(mine, gold_diffs(bare, [triples[i][1:] for i in mine]), strict=True):
            diffs[i] = diff
        for i, (r, base, fix) in enumerate(triples):
            if r == repo and base == EMPTY_TREE:
                diffs[i] = gold_diff(bare, base, fix)
    return [diffs[i] for i in range(len(triples))]


def finding_lines(instance_id: str, result: dict[str, Any]) -> list[str]:
    """What the lint prints for one task: nothing for a clean statement."""
    out: list[str] = []
    if result["words"]:
        out.append(
            f"{instance_id}: words shared with "
            + ", ".join(
                f"{word} ({' and '.join(sources)})" for word, sources in result["words"].items()
            )
        )
    for source, lines in result["lines"].items():
        out += [f"{instance_id}: line shared with the {source}: {line}" for line in lines]
    out += [f"{instance_id}: warning: {w}" for w in result["warnings"]]
    return out


def lint(layout: Layout, tasks: Sequence[Task]) -> UserFailure | None:
    """The doit action of <bench>:lint: a line per finding, a summary line; a UserFailure naming
    the tasks whose statements give the fix away, and the tasks without a fairness audit
    (field audit, benchmark.py); warnings alone pass."""
    flagged: list[str] = []
    warned = 0
    for task, evidence in zip(tasks, tasks_evidence(layout, tasks), strict=True):
        result = check_statement(task.problem_statement, task.area, evidence)
        for line in finding_lines(task.instance_id, result):
            print(line)
        flagged += [task.instance_id] if gives_fix_away(result) else []
        warned += bool(result["warnings"])
    missing = unaudited(tasks)
    for iid in missing:
        print(f"{iid}: no fairness audit (field audit, docs/benchmark.md#the-fairness-audit)")
    print(
        f"lint: {len(tasks)} statements, {len(flagged)} give the fix away, "
        f"{warned} with warnings, {len(missing)} without a fairness audit"
    )
    problems = []
    if flagged:
        problems.append(
            f"{len(flagged)} problem statement(s) share words or lines with the "
            f"fix or the tests: {', '.join(flagged)}"
        )
    if missing:
        problems.append(
            f"{len(missing)} task(s) without a fairness audit (field audit): {', '.join(missing)}"
        )
    return UserFailure("; ".join(problems)) if problems else None


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    repos = sorted({t.repo for t in ctx.tasks} | {t.test_repo for t in ctx.tasks})
    yield {
        "basename": ctx.benchmark.name,
        "name": "lint",
        "doc": f"check that no problem statement of {ctx.benchmark.name} gives the fix away",
        "actions": [(lint, [ctx.layout, ctx.tasks])],
        "task_dep": [repo_task(r) for r in repos],
        "verbosity": 2,
    }
