"""SWE-bench Pro (public) task files: rows of ScaleAI/SWE-bench_Pro beside SWE-bench Verified's.

A Pro task file is a SWE-bench task file (run/swebench.py, ``"kind": "swebench"``) whose
``dataset`` names the Pro harness::

    "dataset": {"name": "ScaleAI/SWE-bench_Pro", "split": "test", "harness": "swe-bench-pro"}

and whose rows keep the Pro dataset's own field names (scripts/import_swebench.py --pro makes it
from an export of the dataset)::

    instance_id, repo ("owner/name"), base_commit (40 hex), problem_statement, requirements,
    interface, repo_language (python | go | js | ts), fail_to_pass, pass_to_pass (lists of test
    names; the dataset's text, JSON or a Python list literal as the harness's eval() reads it,
    is accepted), patch (gold), test_patch, before_repo_set_cmd (shell lines; the harness runs
    the last), selected_test_files_to_run (list, as the test lists);
    optional: dockerhub_tag (the task's image tag in jefzda/sweap-images), issue_specificity,
    issue_categories (kept as the dataset's text)

The agent is told what the official SWE-agent scaffold tells it (the harness's
helper_code/create_problem_statement.py): the problem statement, then "Requirements:" and "New
interfaces introduced:", each text as its authors wrote it where the dataset JSON-serialized it
(plain_text); the task file keeps the dataset's text. Everything else of the row is the
grader's: the sandbox hides the file.
Grading is the Pro harness's (swebench/pro.py).
"""

import json
from pathlib import Path

from ..core.errors import UserError
from .swebench import SweTask, checked_fields, known_row, list_field

HARNESS = "swe-bench-pro"  # dataset["harness"] of a Pro task file
DATASET = {"name": "ScaleAI/SWE-bench_Pro", "split": "test", "harness": HARNESS}
LANGUAGES = ("python", "go", "js", "ts")
LISTS = ("fail_to_pass", "pass_to_pass", "selected_test_files_to_run")
REQUIRED = (
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "requirements",
    "interface",
    "repo_language",
    "patch",
    "test_patch",
    "before_repo_set_cmd",
) + LISTS
OPTIONAL = ("dockerhub_tag", "issue_specificity", "issue_categories")


def is_pro(dataset: dict | None) -> bool:
    """Whether a benchmark's dataset (Benchmark.dataset) is graded by the Pro harness."""
    return bool(dataset) and dataset.get("harness") == HARNESS  # type: ignore[union-attr]


def check_row(raw: object, where: dict) -> dict:
    """A Pro dataset row reduced to the task file's fields (REQUIRED, OPTIONAL present), the
    lists as lists; UserError naming `where` (file, row), the task and the field at fault."""
    raw, where = checked_fields(raw, where, REQUIRED, LISTS, ("base_commit",))
    if raw["repo_language"] not in LANGUAGES:
        raise UserError(
            f"must be one of {', '.join(LANGUAGES)}, got {raw['repo_language']!r}",
            **where,
            field="repo_language",
        )
    for name in ("problem_statement", "patch", "before_repo_set_cmd"):
        if not raw[name].strip():
            raise UserError("must not be empty", **where, field=name)
    row = {name: raw[name] for name in REQUIRED}
    row.update({name: list_field(raw, name, where, "strings", literals=True) for name in LISTS})
    for name in ("fail_to_pass", "selected_test_files_to_run"):
        if not row[name]:
            raise UserError("must name at least one test", **where, field=name)
    for name in OPTIONAL:
        if raw.get(name) is not None:
            if not isinstance(raw[name], str):
                raise UserError(
                    f"must be a string, got {type(raw[name]).__name__}", **where, field=name
                )
            row[name] = raw[name]
    return row


def plain_text(value: str) -> str:
    """A text field as its authors wrote it: some rows of the dataset hold problem_statement,
    requirements and interface JSON-serialized (one JSON string literal: quotes around, \\n for
    each newline; scaleapi/SWE-bench_Pro-os issue 66), which the official scaffold passes on as
    they are; such a value is decoded, any other returned unchanged."""
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return value
        if isinstance(decoded, str):
            return decoded
    return value


def statement(row: dict) -> str:
    """What the agent is given: the official scaffold's problem statement of a row, its three
    texts decoded where the dataset serialized them (plain_text)."""
    problem, requirements, interface = (
        plain_text(row[k]) for k in ("problem_statement", "requirements", "interface")
    )
    return f"{problem}\n\nRequirements:\n{requirements}\n\nNew interfaces introduced:\n{interface}"


def parse_task(raw: dict, path: Path, index: int) -> SweTask:
    """The SweTask of entry `index` of a Pro task file; UserError naming file, task and field."""
    row = known_row(raw, path, index, check_row, REQUIRED + OPTIONAL)
    return SweTask(
        instance_id=row["instance_id"],
        repo=row["repo"],
        base_commit=row["base_commit"],
        problem_statement=statement(row),
        version=row["repo_language"],
        fail_to_pass=tuple(row["fail_to_pass"]),
        pass_to_pass=tuple(row["pass_to_pass"]),
        patch=row["patch"],
        test_patch=row["test_patch"],
        language=row["repo_language"],
        before_repo_set_cmd=row["before_repo_set_cmd"],
        selected_test_files=tuple(row["selected_test_files_to_run"]),
        dockerhub_tag=row.get("dockerhub_tag", ""),
    )
