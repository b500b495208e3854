"""Benchmark files: ``tasks/<name>.json`` → a validated list of Task.

The file's schema, each task's fields and the fairness audit's are docs/benchmark.md's "The task
file" (tests/test_docs.py checks that its table names REQUIRED and OPTIONAL); the version and
changelog rules are docs/benchmark-versions.md. Loading checks all of them, and a mistake is one
UserError naming the file, the task and the field. A file with ``"kind": "swebench"`` holds
SWE-bench rows instead (run/swebench.py); the default kind, "nginx", is this module's.

``version`` names the file's tasks as they are: results made with two versions are not results of
one benchmark (run.json and the report record it; grade.json stamps it). The newest changelog
entry must name ``version`` and the file's task count, so adding or dropping tasks without an
entry is refused (_check_version). A task's ``audit`` must record a change that fixes each of its
findings (_check_audit); ``doit run <bench>:lint`` refuses a task without one.

A *candidates file* (``"candidates": true``, scripts/mine_tasks.py) holds mined stubs awaiting
validation: fail_to_pass may be empty and the statement the placeholder, and only its validation
runs on it (pipeline.check_candidates). A benchmark file refuses both.

An *authored* task (``"tests": "authored"``) grades with test files the project writes, kept
beside the benchmark file (``tasks/tests/<file>.t``): each of its test_files found there is
authored, the others come from nginx-tests at test_commit, and at least one must be authored. Its
test tree is the nginx-tests tree plus its authored files, named by a digest of their names and
contents (``Task.tests_tree_id``), so an edited file makes a new tree; the files' contents are
read when the benchmark loads and travel with the Task (a node of executor=ray writes the tree).
"""

import datetime
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from ..core import inputs
from ..core.errors import UserError
from ..core.gitcmd import gold_diff
from . import swebench, swebench_pro
from .swebench import NGINX, SWEBENCH

HEX40 = re.compile(r"^[0-9a-f]{40}$")
REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
INSTANCE_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
BENCHMARK_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
VERSION = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
CHANGELOG_FIELDS = {
    "version": (str, "a string"),
    "date": (str, "a string"),
    "tasks": (int, "a whole number"),
    "changes": (str, "a string"),
}
DEFAULT_TEST_TIMEOUT = 180
TEST_SOURCES = ("nginx-tests", "authored")  # a task's "tests"; the first is the default
AUTHORED_DIR = "tests"  # authored test files, beside the benchmark file
PLACEHOLDER_STATEMENT = "TODO"  # what the miner writes until a human writes the statement

REQUIRED: dict[str, type] = {
    "instance_id": str,
    "repo": str,
    "test_repo": str,
    "base_commit": str,
    "fix_commit": str,
    "test_commit": str,
    "test_files": list,
    "configure_flags": list,
    "fail_to_pass": list,
    "pass_to_pass": list,
    "problem_statement": str,
}
OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "perl_modules": list,
    "test_timeout": (int, float),
    "area": str,
    "fix_date": str,
    "gold_size": dict,
    "notes": str,
    "audit": dict,
    "tests": str,
}
AUDIT_FIELDS: dict[str, type] = {
    "date": str,
    "statement_sufficient": bool,
    "tests_fair": bool,
    "over_strict": list,
    "changes": list,
}
AUDIT_OPTIONAL: dict[str, type] = {"alternative": dict, "notes": str}
AUDIT_FIXES = ("statement", "dropped")
AUDIT_CHANGED_FIELDS = ("problem_statement", "fail_to_pass")
# A task's object in the file, once _check_fields has found it one.
Raw = dict[str, Any]


# Task.to_json's optional keys at the value that leaves them out (core/inputs.py).
TASK_DEFAULTS: dict[str, Any] = {"tests": TEST_SOURCES[0], "authored": None}


@dataclass(frozen=True)
class Task:
    instance_id: str
    repo: str
    test_repo: str
    base_commit: str
    fix_commit: str
    test_commit: str
    test_files: tuple[str, ...]
    configure_flags: tuple[str, ...]
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    problem_statement: str
    perl_modules: tuple[str, ...] = ()
    test_timeout: float = DEFAULT_TEST_TIMEOUT
    area: str = ""
    fix_date: str = ""  # YYYY-MM-DD, or "" when the task file does not say
    gold_size: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # The fairness audit (module docstring); None: not audited.
    audit: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    tests: str = TEST_SOURCES[0]
    # ((file name, its bytes), ...) of an authored task's own files
    authored: tuple[tuple[str, bytes], ...] = ()

    kind = NGINX  # the benchmark kind (a SWE-bench task: run/swebench.SweTask)
    templates = ""  # its prompts: templates/ itself

    @property
    def authored_digests(self) -> dict[str, str]:
        """{authored file: sha256 of its content}."""
        return {name: hashlib.sha256(data).hexdigest() for name, data in self.authored}

    @property
    def tests_tree_id(self) -> str:
        """The name of the task's test tree: its test commit, followed for an authored task by
        a digest of its files' names and contents (another content, another tree)."""
        if not self.authored:
            return self.test_commit
        digest = hashlib.sha256(json.dumps(sorted(self.authored_digests.items())).encode())
        return f"{self.test_commit}+{digest.hexdigest()[:16]}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "instance_id": self.instance_id,
            "repo": self.repo,
            "test_repo": self.test_repo,
            "base_commit": self.base_commit,
            "fix_commit": self.fix_commit,
            "test_commit": self.test_commit,
            "test_files": list(self.test_files),
            "configure_flags": list(self.configure_flags),
            "fail_to_pass": list(self.fail_to_pass),
            "pass_to_pass": list(self.pass_to_pass),
            "problem_statement": self.problem_statement,
            "perl_modules": list(self.perl_modules),
            "test_timeout": self.test_timeout,
            "area": self.area,
            "tests": self.tests,
            # an authored task's own files (a task of nginx-tests runs none of them)
            "authored": None if self.tests == TEST_SOURCES[0] else self.authored_digests,
        }
        return inputs.canonical(out, TASK_DEFAULTS)


# A task of either kind of benchmark: the stages up to the patch take both.
AnyTask = Task | swebench.SweTask


@dataclass(frozen=True)
class Benchmark:
    name: str
    path: Path
    tasks: "tuple[AnyTask, ...]"
    digest: str
    candidates: bool = False  # a candidates file (module docstring): validation only
    version: str | None = None  # "MAJOR.MINOR", None for an unversioned file
    changelog: tuple[dict[str, Any], ...] = ()  # its entries, newest first
    kind: str = NGINX  # "nginx", or "swebench" (run/swebench.py)
    # A SWE-bench benchmark's dataset, {"name", "split"} (and "harness" for SWE-bench Pro,
    # run/swebench_pro.py); None for nginx.
    dataset: dict[str, str] | None = field(default=None, compare=False, hash=False)

    def refuse_candidates(self, target: str) -> None:
        """UserError naming the file when it is a candidates file, which `target` (a doit task
        name) may not run on."""
        if self.candidates:
            raise UserError(
                f"is a candidates file (mined tasks to be validated with `doit run "
                f"{self.name}:validate`, then promoted into a benchmark with "
                f"scripts/promote_tasks.py); '{target}' does not run on it",
                file=self.path,
            )

    def select(
        self, instances: Sequence[str] | None = None, limit: int | None = None
    ) -> "list[AnyTask]":
        tasks = list(self.tasks)
        if instances:
            known = {t.instance_id for t in tasks}
            unknown = [i for i in instances if i not in known]
            if unknown:
                raise UserError(
                    f"unknown instance id(s) {', '.join(unknown)}",
                    file=self.path,
                    field="instances",
                )
            tasks = [t for t in tasks if t.instance_id in set(instances)]
        if limit is not None:
            tasks = tasks[:limit]
        return tasks


def is_date(text: object) -> bool:
    """Whether `text` is a calendar date written YYYY-MM-DD."""
    if not isinstance(text, str) or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
        return False
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def version_key(version: str) -> tuple[int, int]:
    """(MAJOR, MINOR) of a version string "MAJOR.MINOR"."""
    major, minor = version.split(".")
    return int(major), int(minor)


def next_version(version: str, major: bool = False) -> str:
    """The version after `version`: the next MINOR, or with `major` the next MAJOR (".0")."""
    ma, mi = version_key(version)
    return f"{ma + 1}.0" if major else f"{ma}.{mi + 1}"


def _check_version(
    data: object, path: Path, ntasks: int
) -> tuple[str | None, tuple[dict[str, Any], ...]]:
    """(version, changelog entries) of a file's top-level object; UserError naming the file,
    the changelog entry and the field at fault."""
    if not isinstance(data, dict) or ("version" not in data and "changelog" not in data):
        return None, ()
    version, changelog = data.get("version"), data.get("changelog")
    if version is None:
        raise UserError(
            "is missing: a file with a changelog names its version (the newest entry's)",
            file=path,
            field="version",
        )
    if not isinstance(version, str) or not VERSION.match(version):
        raise UserError(
            f'must be "MAJOR.MINOR" (e.g. "1.0"), got {version!r}', file=path, field="version"
        )
    if not isinstance(changelog, list) or not changelog:
        raise UserError(
            "must be a non-empty list of entries {version, date, tasks, changes}, "
            "newest first, when the file has a version",
            file=path,
            field="changelog",
        )
    for i, entry in enumerate(changelog):
        _check_changelog_entry(entry, path, i)
    for i, (newer, older) in enumerate(pairwise(changelog), 1):
        item = f"changelog entry {i} (version {older['version']})"
        if version_key(older["version"]) >= version_key(newer["version"]):
            raise UserError(
                f"must be older than the entry before it ({newer['version']}): "
                "entries go newest first, each version once",
                file=path,
                item=item,
                field="version",
            )
        if older["date"] > newer["date"]:
            raise UserError(
                f"is later than that of the newer entry {newer['version']} ({newer['date']})",
                file=path,
                item=item,
                field="date",
            )
    newest = changelog[0]
    if newest["version"] != version:
        raise UserError(
            f"is {version!r}, but the newest changelog entry is "
            f"{newest['version']!r}: add an entry for this version",
            file=path,
            field="version",
        )
    if newest["tasks"] != ntasks:
        raise UserError(
            f"the newest entry (version {version}) says {newest['tasks']} tasks, the "
            f"file has {ntasks}: tasks were added or dropped without a new version; "
            "add a changelog entry and raise version",
            file=path,
            field="changelog",
        )
    return version, tuple(changelog)


def _check_changelog_entry(entry: object, path: Path, index: int) -> None:
    item = f"changelog entry {index}"
    if not isinstance(entry, dict):
        raise UserError(
            "must be a JSON object {version, date, tasks, changes}", file=path, item=item
        )
    if isinstance(entry.get("version"), str):
        item += f" (version {entry['version']})"
    for name, (kind, words) in CHANGELOG_FIELDS.items():
        if name not in entry:
            raise UserError("is missing", file=path, item=item, field=name)
        value = entry[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise UserError(
                f"must be {words}, got {json.dumps(value)}", file=path, item=item, field=name
            )
    unknown = set(entry) - set(CHANGELOG_FIELDS)
    if unknown:
        raise UserError(f"unknown field(s) {', '.join(sorted(unknown))}", file=path, item=item)
    if not VERSION.match(entry["version"]):
        raise UserError(
            f'must be "MAJOR.MINOR", got {entry["version"]!r}',
            file=path,
            item=item,
            field="version",
        )
    if not is_date(entry["date"]):
        raise UserError(
            f"must be a date YYYY-MM-DD, got {entry['date']!r}", file=path, item=item, field="date"
        )
    if entry["tasks"] < 0:
        raise UserError("must not be negative", file=path, item=item, field="tasks")
    if not entry["changes"].strip():
        raise UserError("must say what changed", file=path, item=item, field="changes")


def _check_str_list(
    value: list[Any],
    path: Path,
    iid: str,
    name: str,
    *,
    nonempty: bool = False,
    unique: bool = False,
) -> None:
    if not all(isinstance(v, str) and v.strip() for v in value):
        raise UserError("must be a list of non-empty strings", file=path, task=iid, field=name)
    if nonempty and not value:
        raise UserError("must not be empty", file=path, task=iid, field=name)
    if unique:
        seen, dups = set(), []
        for v in value:
            if v in seen:
                dups.append(v)
            seen.add(v)
        if dups:
            raise UserError(f"duplicate entries {dups[:3]}", file=path, task=iid, field=name)


def _check_fields(raw: Any, path: Path, index: int) -> str:
    """Check that `raw` is an object with every required field, each of its type, and no unknown
    field; return its instance_id. Until the id is known good, errors name the task by position."""
    where = f"#{index}"
    if not isinstance(raw, dict):
        raise UserError("must be a JSON object", file=path, task=where)
    iid = raw.get("instance_id")
    if isinstance(iid, str) and iid:
        where = iid
    for name, kind in REQUIRED.items():
        if name not in raw:
            raise UserError("is missing", file=path, task=where, field=name)
        if not isinstance(raw[name], kind):
            raise UserError(
                f"must be a {kind.__name__}, got {type(raw[name]).__name__}",
                file=path,
                task=where,
                field=name,
            )
    for name, kinds in OPTIONAL.items():
        if name in raw and not isinstance(raw[name], kinds):
            raise UserError(
                f"has the wrong type ({type(raw[name]).__name__})",
                file=path,
                task=where,
                field=name,
            )
    unknown = set(raw) - set(REQUIRED) - set(OPTIONAL)
    if unknown:
        raise UserError(f"unknown field(s) {', '.join(sorted(unknown))}", file=path, task=where)
    iid = raw["instance_id"]  # a string: REQUIRED
    if not INSTANCE_ID.match(iid):
        raise UserError("must match [A-Za-z0-9_.-]+", file=path, task=where, field="instance_id")
    return iid


def _check_repos_and_commits(raw: Raw, path: Path, iid: str) -> None:
    """Repositories are owner/name; commits are full hashes (a branch or HEAD would move), and
    the fix is not the base."""
    for name in ("repo", "test_repo"):
        if not REPO.match(raw[name]):
            raise UserError(
                f"must be owner/name, got {raw[name]!r}", file=path, task=iid, field=name
            )
    for name in ("base_commit", "fix_commit", "test_commit"):
        if not HEX40.match(raw[name]):
            raise UserError(
                f"must be a full 40-hex commit hash, got {raw[name]!r}",
                file=path,
                task=iid,
                field=name,
            )
    if raw["base_commit"] == raw["fix_commit"]:
        raise UserError("equals base_commit", file=path, task=iid, field="fix_commit")


def _check_tests(raw: Raw, path: Path, iid: str, candidates: bool) -> None:
    """The test files are relative .t paths; every assertion id names one of them, and none is
    both fail_to_pass and pass_to_pass (it cannot both fail and pass without the fix). A
    candidate's fail_to_pass may be empty: its validation derives it."""
    _check_str_list(raw["test_files"], path, iid, "test_files", nonempty=True, unique=True)
    for f in raw["test_files"]:
        if f.startswith("/") or ".." in f.split("/") or not f.endswith(".t"):
            raise UserError(
                f"{f!r} must be a relative path to a .t file",
                file=path,
                task=iid,
                field="test_files",
            )
    _check_str_list(raw["configure_flags"], path, iid, "configure_flags")
    _check_str_list(
        raw["fail_to_pass"], path, iid, "fail_to_pass", nonempty=not candidates, unique=True
    )
    _check_str_list(raw["pass_to_pass"], path, iid, "pass_to_pass", unique=True)
    both = set(raw["fail_to_pass"]) & set(raw["pass_to_pass"])
    if both:
        raise UserError(
            f"also listed in fail_to_pass: {sorted(both)[:3]}",
            file=path,
            task=iid,
            field="pass_to_pass",
        )
    files = set(raw["test_files"])
    for name in ("fail_to_pass", "pass_to_pass"):
        for ident in raw[name]:
            if ident.split(":", 1)[0] not in files:
                raise UserError(
                    f"{ident!r} names no file in test_files", file=path, task=iid, field=name
                )


def _check_optional_values(raw: Raw, path: Path, iid: str, candidates: bool) -> None:
    """The problem statement says something (a candidate's may still be the placeholder); the
    optional fields hold sensible values."""
    statement = raw["problem_statement"].strip()
    if not statement and not candidates:
        raise UserError("must not be empty", file=path, task=iid, field="problem_statement")
    if statement == PLACEHOLDER_STATEMENT and not candidates:
        raise UserError(
            f"is the miner's placeholder {PLACEHOLDER_STATEMENT!r}: write the bug "
            "report (scripts/promote_tasks.py takes statements from a file)",
            file=path,
            task=iid,
            field="problem_statement",
        )
    _check_str_list(raw.get("perl_modules", []), path, iid, "perl_modules")
    fix_date = raw.get("fix_date", "")
    if fix_date and not is_date(fix_date):
        raise UserError(
            f"must be a date YYYY-MM-DD, got {fix_date!r}", file=path, task=iid, field="fix_date"
        )
    if raw.get("test_timeout", DEFAULT_TEST_TIMEOUT) <= 0:
        raise UserError("must be positive", file=path, task=iid, field="test_timeout")


def _audit_error(message: str, path: Path, iid: str, where: str = "") -> UserError:
    return UserError(message, file=path, task=iid, field="audit" + where)


def _check_audit_entry(
    entry: Any,
    path: Path,
    iid: str,
    where: str,
    required: Mapping[str, type],
    optional: Iterable[str] = (),
) -> None:
    """An audit object or list entry: a dict with its required string/bool/list fields."""
    if not isinstance(entry, dict):
        raise _audit_error("must be a JSON object", path, iid, where)
    for name, kind in required.items():
        if name not in entry:
            raise _audit_error("is missing", path, iid, f"{where}.{name}")
        value = entry[name]
        if not isinstance(value, kind):
            raise _audit_error(
                f"must be {_kind_words(kind)}, got {json.dumps(value)}",
                path,
                iid,
                f"{where}.{name}",
            )
        if isinstance(value, str) and not value.strip():
            raise _audit_error("must not be empty", path, iid, f"{where}.{name}")
    unknown = set(entry) - set(required) - set(optional)
    if unknown:
        raise _audit_error(f"unknown field(s) {', '.join(sorted(unknown))}", path, iid, where)


def _kind_words(kind: type) -> str:
    return {str: "a string", bool: "true or false", list: "a list", dict: "an object"}[kind]


def _check_audit(raw: Raw, path: Path, iid: str) -> None:
    """The task's audit (docs/benchmark.md#the-fairness-audit), when it has one: its fields, and
    that every finding is fixed by a change that the task as it stands reflects."""
    audit = raw.get("audit")
    if audit is None:
        return
    _check_audit_entry(audit, path, iid, "", AUDIT_FIELDS, AUDIT_OPTIONAL)
    if not is_date(audit["date"]):
        raise _audit_error(f"must be a date YYYY-MM-DD, got {audit['date']!r}", path, iid, ".date")
    changed, dropped = set(), set()
    for i, change in enumerate(audit["changes"]):
        where = f".changes[{i}]"
        kind = change.get("field") if isinstance(change, dict) else None
        if kind not in AUDIT_CHANGED_FIELDS:
            raise _audit_error(
                f"must name the field changed, one of {', '.join(AUDIT_CHANGED_FIELDS)}",
                path,
                iid,
                where + ".field",
            )
        extra = {"dropped": list} if kind == "fail_to_pass" else {}
        _check_audit_entry(change, path, iid, where, {"field": str, "why": str, **extra})
        for ident in change.get("dropped", []):
            if not isinstance(ident, str) or ident.split(":", 1)[0] not in raw["test_files"]:
                raise _audit_error(
                    f"{ident!r} names no assertion of a file in test_files",
                    path,
                    iid,
                    where + ".dropped",
                )
            if ident in raw["fail_to_pass"] or ident in raw["pass_to_pass"]:
                raise _audit_error(
                    f"{ident!r} is dropped but still graded", path, iid, where + ".dropped"
                )
        if kind == "fail_to_pass" and not change["dropped"]:
            raise _audit_error("must name the assertions dropped", path, iid, where + ".dropped")
        changed.add(kind)
        dropped.update(change.get("dropped", []))
    if not audit["statement_sufficient"] and "problem_statement" not in changed:
        raise _audit_error(
            "is false, but no change amends the problem_statement",
            path,
            iid,
            ".statement_sufficient",
        )
    for i, finding in enumerate(audit["over_strict"]):
        where = f".over_strict[{i}]"
        _check_audit_entry(
            finding, path, iid, where, {"assertion": str, "why": str, "fixed_by": str}
        )
        ident, fixed_by = finding["assertion"], finding["fixed_by"]
        if fixed_by not in AUDIT_FIXES:
            raise _audit_error(
                f"must be one of {', '.join(AUDIT_FIXES)}, got {fixed_by!r}",
                path,
                iid,
                where + ".fixed_by",
            )
        if fixed_by == "dropped" and ident not in dropped:
            raise _audit_error(
                f"{ident!r} is fixed by dropping it, but no fail_to_pass change drops it",
                path,
                iid,
                where + ".assertion",
            )
        if fixed_by == "statement" and (
            ident not in raw["fail_to_pass"] or "problem_statement" not in changed
        ):
            raise _audit_error(
                f"{ident!r} is fixed by the statement: it must be in "
                "fail_to_pass and a change must amend the problem_statement",
                path,
                iid,
                where + ".assertion",
            )
    if audit["tests_fair"] == bool(audit["over_strict"]):
        raise _audit_error(
            "must be false exactly when over_strict names assertions", path, iid, ".tests_fair"
        )
    if "alternative" in audit:
        alternative = audit["alternative"]
        _check_audit_entry(
            alternative,
            path,
            iid,
            ".alternative",
            {"resolved_before": bool, "resolved": bool},
            ("strict",),
        )
        if not isinstance(alternative.get("strict"), (bool, type(None))):
            raise _audit_error("must be true, false or null", path, iid, ".alternative.strict")


def authored_files(raw: Raw, path: str | Path, iid: str) -> tuple[tuple[str, bytes], ...]:
    """((name, bytes), ...) of the task's authored test files (module docstring), () for a task
    of nginx-tests; UserError naming the file, the task and the field when "tests" is neither,
    or when an authored task has no file in the authored directory."""
    source = raw.get("tests", TEST_SOURCES[0])
    if source not in TEST_SOURCES:
        raise UserError(
            f"must be one of {', '.join(map(repr, TEST_SOURCES))}, got {source!r}",
            file=path,
            task=iid,
            field="tests",
        )
    if source != "authored":
        return ()
    folder = Path(path).parent / AUTHORED_DIR
    found = []
    for name in raw["test_files"]:
        candidate = folder / name
        if candidate.is_file():
            try:
                found.append((name, candidate.read_bytes()))
            except OSError as e:
                raise UserError(
                    f"cannot read the authored test file {candidate}: {e.strerror}",
                    file=path,
                    task=iid,
                    field="test_files",
                ) from None
    if not found:
        raise UserError(
            f'is "authored", but none of test_files ({", ".join(raw["test_files"])}) '
            f"is in {folder}: an authored task grades with at least one file of "
            "its own there",
            file=path,
            task=iid,
            field="tests",
        )
    return tuple(found)


def parse_task(raw: Any, path: Path, index: int, candidates: bool = False) -> Task:
    """The Task of entry `index` of a benchmark file (of a candidates file: `candidates`); its
    first mistake raises UserError naming the file, the task and the field."""
    iid = _check_fields(raw, path, index)
    _check_repos_and_commits(raw, path, iid)
    _check_tests(raw, path, iid, candidates)
    _check_optional_values(raw, path, iid, candidates)
    _check_audit(raw, path, iid)
    authored = authored_files(raw, path, iid)
    return Task(
        instance_id=iid,
        repo=raw["repo"],
        test_repo=raw["test_repo"],
        base_commit=raw["base_commit"],
        fix_commit=raw["fix_commit"],
        test_commit=raw["test_commit"],
        test_files=tuple(raw["test_files"]),
        configure_flags=tuple(raw["configure_flags"]),
        fail_to_pass=tuple(raw["fail_to_pass"]),
        pass_to_pass=tuple(raw["pass_to_pass"]),
        problem_statement=raw["problem_statement"],
        perl_modules=tuple(raw.get("perl_modules", ())),
        test_timeout=raw.get("test_timeout", DEFAULT_TEST_TIMEOUT),
        area=raw.get("area", ""),
        fix_date=raw.get("fix_date", ""),
        gold_size=raw.get("gold_size", {}),
        audit=raw.get("audit"),
        tests=raw.get("tests", TEST_SOURCES[0]),
        authored=authored,
    )


def unaudited(tasks: "Iterable[AnyTask]") -> list[str]:
    """The ids of the tasks that carry no fairness audit (``doit run <bench>:lint`` refuses
    them)."""
    return [t.instance_id for t in tasks if t.audit is None]


def load_benchmark(path: str | Path) -> "Benchmark":
    """Load and validate one benchmark file; UserError names the file, task and field at fault."""
    path = Path(path)
    name = path.stem
    if not BENCHMARK_NAME.match(name):
        raise UserError("a benchmark file name must be a plain identifier", file=path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot read: {e.strerror}", file=path) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(
            f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}", file=path
        ) from None
    raw_tasks = data.get("tasks") if isinstance(data, dict) else data
    if not isinstance(raw_tasks, list):
        raise UserError('expected {"tasks": [...]} or a list of tasks', file=path, field="tasks")
    kind = data.get("kind", NGINX) if isinstance(data, dict) else NGINX
    if kind not in (NGINX, SWEBENCH):
        raise UserError(f"must be {NGINX!r} or {SWEBENCH!r}, got {kind!r}", file=path, field="kind")
    if kind == SWEBENCH:
        return _swebench_benchmark(name, path, text, data, raw_tasks)
    candidates = data.get("candidates", False) if isinstance(data, dict) else False
    if not isinstance(candidates, bool):
        raise UserError(f"must be true or false, got {candidates!r}", file=path, field="candidates")
    tasks = _unique_tasks(
        path, (parse_task(raw, path, i, candidates) for i, raw in enumerate(raw_tasks))
    )
    version, changelog = _check_version(data, path, len(tasks))
    return Benchmark(
        name=name,
        path=path,
        tasks=tuple(tasks),
        digest=_digest(text, tasks),
        candidates=candidates,
        version=version,
        changelog=changelog,
    )


def _unique_tasks(path: Path, parsed: "Iterable[AnyTask]") -> "list[AnyTask]":
    """The parsed tasks of a task file, in order; UserError at the first instance_id seen twice."""
    tasks, seen = [], set()
    for task in parsed:
        if task.instance_id in seen:
            raise UserError(
                "duplicate instance_id", file=path, task=task.instance_id, field="instance_id"
            )
        seen.add(task.instance_id)
        tasks.append(task)
    return tasks


def _swebench_benchmark(
    name: str, path: Path, text: str, data: Any, raw_tasks: list[Any]
) -> "Benchmark":
    """A task file of SWE-bench rows (run/swebench.py; SWE-bench Pro's: run/swebench_pro.py)."""
    dataset = swebench.dataset_of(data, path)
    parse = swebench_pro.parse_task if swebench_pro.is_pro(dataset) else swebench.parse_task
    tasks = _unique_tasks(path, (parse(raw, path, i) for i, raw in enumerate(raw_tasks)))
    version, changelog = _check_version(data, path, len(tasks))
    return Benchmark(
        name=name,
        path=path,
        tasks=tuple(tasks),
        digest=_digest(text, tasks),
        version=version,
        changelog=changelog,
        kind=SWEBENCH,
        dataset=dataset,
    )


def gold_patch(task: "AnyTask", bare: str | Path) -> bytes:
    """The fix's diff: a SWE-bench row carries it (its patch); an nginx task's is the diff from
    its base to its fix commit in the bare clone `bare`."""
    if isinstance(task, swebench.SweTask):
        return task.patch.encode("utf-8")
    return gold_diff(bare, task.base_commit, task.fix_commit)


def _digest(text: str, tasks: "Sequence[AnyTask]") -> str:
    """The benchmark's sha256: of its file, and of its authored test files when it has any (an
    edited test changes what the benchmark grades; a file without them keeps its plain digest)."""
    authored = {
        t.instance_id: t.authored_digests for t in tasks if isinstance(t, Task) and t.authored
    }
    if authored:
        text += "\n" + json.dumps(authored, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def load_benchmarks(tasks_dir: str | Path) -> dict[str, "Benchmark"]:
    """Every ``*.json`` benchmark in `tasks_dir`, by name."""
    return {p.stem: load_benchmark(p) for p in sorted(Path(tasks_dir).glob("*.json"))}
