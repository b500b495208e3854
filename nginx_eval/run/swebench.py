"""SWE-bench task files: the second kind of benchmark, beside nginx's (run/benchmark.py).

A task file whose top level says ``"kind": "swebench"`` holds rows of the SWE-bench Verified
dataset, with the dataset's own field names (scripts/import_swebench.py makes it from an export
of the dataset)::

    {"name": "swebench-verified", "kind": "swebench", "description": "...",
     "dataset": {"name": "SWE-bench/SWE-bench_Verified", "split": "test"},   # what the official
                                              # harness is given as --dataset_name and --split
     "version": "1.0", "changelog": [...],    # optional, as for nginx (run/benchmark.py)
     "tasks": [ROW, ...]}

ROW fields (REQUIRED, each a string unless marked)::

    instance_id, repo ("owner/name"), base_commit (40 hex), problem_statement, version,
    FAIL_TO_PASS, PASS_TO_PASS (lists of test names; the dataset's JSON strings are accepted
    and read as lists), patch (the gold patch), test_patch, environment_setup_commit;
    created_at optional (the report's date split reads its day as the task's fix_date)

Such a task runs through the same agent stage as an nginx task, with prompts of its own from
``templates/swebench/`` (adapt_mode: the nginx prompts name nginx, and their text is an input of
every nginx agent run). ``patch`` (the ``gold`` mode's patch and the evidence of contamination)
and ``test_patch`` stay in the task file, which the agent's sandbox hides. No build, prove,
strict, grade, validation or lint: grading is the official harness's (nginx_eval/swebench/;
docs/benchmark.md#swe-bench-verified).
"""

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..core.errors import UserError
from .modes import AgentMode, GoldMode, Mode

NGINX, SWEBENCH = "nginx", "swebench"  # Benchmark.kind
# Prompt templates and slash commands of SWE-bench tasks, under the templates directory.
TEMPLATES = "swebench"
REQUIRED = (
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "patch",
    "test_patch",
    "environment_setup_commit",
)
OPTIONAL = ("created_at",)
LISTS = ("FAIL_TO_PASS", "PASS_TO_PASS")
DEFAULT_DATASET = {"name": "SWE-bench/SWE-bench_Verified", "split": "test"}
# What the built-in gold mode (run/modes.py) applies on a SWE-bench task.
GOLD_DESCRIPTION = "the dataset's gold patch (the row's `patch`; upper bound)"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
INSTANCE_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class SweTask:
    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    version: str
    fail_to_pass: tuple
    pass_to_pass: tuple
    patch: str = field(repr=False)  # gold: never the agent's
    test_patch: str = field(repr=False)  # the harness's: never the agent's
    environment_setup_commit: str = ""
    created_at: str = ""
    # A SWE-bench Pro row's (run/swebench_pro.py): what its harness's raw samples hold.
    language: str = ""
    before_repo_set_cmd: str = field(default="", repr=False)
    selected_test_files: tuple = field(default=(), repr=False)
    dockerhub_tag: str = ""

    kind = SWEBENCH
    templates = TEMPLATES
    # What the stages shared with nginx tasks ask of a task, answered for this kind: no fix
    # commit (the gold patch is the row's), no test repository, files, flags or audit.
    fix_commit = test_commit = ""
    test_files = configure_flags = authored = ()
    tests = "swe-bench"  # the report's split by test source: the dataset's tests
    audit = None

    @property
    def test_repo(self) -> str:
        return self.repo

    @property
    def area(self) -> str:
        """The report's breakdown by area is by repository."""
        return self.repo

    @property
    def fix_date(self) -> str:
        return self.created_at[:10]

    @property
    def pro(self) -> bool:
        """A SWE-bench Pro task (only a Pro row has a repo_language)."""
        return bool(self.language)

    @property
    def docs(self) -> str:
        """The section of docs/benchmark.md on this task's dataset."""
        section = "swe-bench-pro" if self.pro else "swe-bench-verified"
        return f"docs/benchmark.md#{section}"

    def to_json(self) -> dict:
        return {
            "instance_id": self.instance_id,
            "repo": self.repo,
            "base_commit": self.base_commit,
            "version": self.version,
        }


def list_field(
    raw: dict, name: str, where: dict, what: str = "test names", literals: bool = False
) -> list[str]:
    """A list-of-strings field (`what` names its items in an error) as a list. The Hugging Face
    export stores JSON strings; other exports real lists: a parquet list column read by pyarrow
    is a list, by pandas a numpy array (read through its ``tolist``). `literals`: a Python list
    literal too (SWE-bench Pro's harness eval()s its text; ast.literal_eval runs nothing)."""
    value = raw[name]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            try:
                if not literals:
                    raise ValueError(name)
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                text = "JSON or Python text" if literals else "JSON text"
                raise UserError(
                    f"must be a list of {what} (or its {text})", **where, field=name
                ) from None
    elif not isinstance(value, (list, tuple, dict)) and callable(getattr(value, "tolist", None)):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise UserError(
            f"must be a list of {what}, got {type(value).__name__}", **where, field=name
        )
    return list(value)


def checked_fields(
    raw: object,
    where: dict,
    required: tuple[str, ...],
    lists: tuple[str, ...],
    commits: tuple[str, ...],
) -> tuple[dict, dict]:
    """(raw, where with the task's id) once `raw` is an object whose `required` fields are there
    (strings but for `lists`), its instance_id and repo well formed and its `commits` full
    hashes; UserError naming `where` and the field at fault otherwise. What the rows of every
    SWE-bench dataset share (this module's check_row, swebench_pro.check_row)."""
    if not isinstance(raw, dict):
        raise UserError("must be a JSON object", **where)
    iid = raw.get("instance_id")
    if isinstance(iid, str) and iid:
        where = dict(where, task=iid)
    for name in required:
        if name not in raw or raw[name] is None:
            raise UserError("is missing", **where, field=name)
        if name not in lists and not isinstance(raw[name], str):
            raise UserError(
                f"must be a string, got {type(raw[name]).__name__}", **where, field=name
            )
    if not INSTANCE_ID.match(str(iid)):
        raise UserError("must match [A-Za-z0-9_.-]+", **where, field="instance_id")
    if not REPO.match(raw["repo"]):
        raise UserError(f"must be owner/name, got {raw['repo']!r}", **where, field="repo")
    for name in commits:
        if not HEX40.match(raw[name]):
            raise UserError(
                f"must be a full 40-hex commit hash, got {raw[name]!r}", **where, field=name
            )
    return raw, where


def check_row(raw: dict, where: dict) -> dict:
    """A dataset row reduced to the task file's fields (REQUIRED, OPTIONAL), the lists as lists;
    UserError naming `where` (file, task) and the field at fault."""
    raw, where = checked_fields(
        raw, where, REQUIRED, LISTS, ("base_commit", "environment_setup_commit")
    )
    if not raw["problem_statement"].strip():
        raise UserError("must not be empty", **where, field="problem_statement")
    row = {name: raw[name] for name in REQUIRED}
    row.update({name: list_field(raw, name, where) for name in LISTS})
    if not row["FAIL_TO_PASS"]:
        raise UserError("must name at least one test", **where, field="FAIL_TO_PASS")
    for name in OPTIONAL:
        if raw.get(name) is not None:
            row[name] = str(raw[name])
    return row


def known_row(
    raw: dict,
    path: Path,
    index: int,
    check: Callable[[dict, dict], dict],
    known: tuple[str, ...],
) -> dict:
    """Entry `index` of a task file checked by `check` (a check_row), its fields all `known`;
    UserError naming the file, task and field. What Verified's and Pro's parse_task share."""
    row = check(raw, {"file": path, "task": f"#{index}"})
    unknown = set(raw) - set(known)
    if unknown:
        raise UserError(
            f"unknown field(s) {', '.join(sorted(unknown))}", file=path, task=row["instance_id"]
        )
    return row


def parse_task(raw: dict, path: Path, index: int) -> SweTask:
    """The SweTask of entry `index` of a task file; UserError naming the file, task and field."""
    row = known_row(raw, path, index, check_row, REQUIRED + OPTIONAL)
    return SweTask(
        instance_id=row["instance_id"],
        repo=row["repo"],
        base_commit=row["base_commit"],
        problem_statement=row["problem_statement"],
        version=row["version"],
        fail_to_pass=tuple(row["FAIL_TO_PASS"]),
        pass_to_pass=tuple(row["PASS_TO_PASS"]),
        patch=row["patch"],
        test_patch=row["test_patch"],
        environment_setup_commit=row["environment_setup_commit"],
        created_at=row.get("created_at", ""),
    )


def dataset_of(data: dict, path: Path) -> dict:
    """The file's "dataset" ({"name", "split"}: what the official harness grades against; and
    "harness": "swe-bench-pro" for a SWE-bench Pro file, run/swebench_pro.py)."""
    dataset = data.get("dataset", DEFAULT_DATASET)
    if (
        not isinstance(dataset, dict)
        or not {"name", "split"} <= set(dataset) <= {"name", "split", "harness"}
        or not all(isinstance(v, str) and v for v in dataset.values())
        or dataset.get("harness", "swe-bench-pro") != "swe-bench-pro"
    ):
        raise UserError(
            'must be {"name": <dataset>, "split": <split>} (and "harness": "swe-bench-pro" '
            "for SWE-bench Pro)",
            file=path,
            field="dataset",
        )
    return dict(dataset)


# -- what the agent is told (modes adapted to this kind) ------------------------------------------
def adapt_mode(mode: Mode, templates_dir: Path, modes_file: Path | None) -> Mode:
    """`mode` (run/modes.py) as it runs on a SWE-bench task: no nginx-tests tree (``tests``
    does not apply), and its slash commands read from templates/swebench/commands/; UserError
    naming the mode when a prompt or command it needs has no SWE-bench version there. The
    built-in ``gold`` says what its patch is here: the row's gold patch, not a fix commit's
    diff."""
    if isinstance(mode, GoldMode):
        return replace(mode, description=GOLD_DESCRIPTION)
    if not isinstance(mode, AgentMode):
        return mode
    folder = Path(templates_dir) / TEMPLATES
    for phase in mode.phases:
        if phase.prompt and not (folder / phase.prompt).is_file():
            raise UserError(
                f"has no SWE-bench version of its prompt: {folder / phase.prompt} "
                f"is missing (the nginx prompts name nginx; a SWE-bench task gets "
                f"the prompts of {folder})",
                file=modes_file,
                item=f"mode {mode.name} phase {phase.name}",
                field="prompt",
            )
    commands = []
    for name, _ in mode.command_files:
        source = folder / "commands" / name
        if not source.is_file():
            raise UserError(
                f"has no SWE-bench version of the command {name!r}: {source} is missing",
                file=modes_file,
                item=f"mode {mode.name}",
                field="commands",
            )
        commands.append((name, source.read_text(encoding="utf-8")))
    return replace(mode, tests="", command_files=tuple(commands))
