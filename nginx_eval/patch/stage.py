"""Stage 4, patch: the candidate patch of one (mode, task) as ``model.patch`` + ``patch.json``.

Agent modes: the diff of the workspace's files against the base commit, new files included,
computed with the bare clone's objects and a throw-away index, never with the workspace's own
.git, so an agent that commits, rewrites history or deletes .git still yields the diff of what is
on disk. Left out: ignored files; the harness's files (workspace.HARNESS_FILES) and what configure
and make write (workspace.BUILD_OUTPUTS; for a SWE-bench task what running Python leaves,
workspace.PYTHON_OUTPUTS), .gitignore or not, listed in patch.json as left out; any new file over
MAX_NEW_FILE_BYTES, listed as skipped. An agent run that did not finish (``infra_error``,
``not_run``) has an empty patch and a note saying so: its work is not scored, and `doit run` runs
it again. Built-ins: ``gold`` is ``git diff base fix`` from the bare clone (a SWE-bench row's own
``patch``); ``none`` is empty. Predictions modes: the ``model_patch`` of the task's row.

``patch.json`` (core/records.py: PatchJson)::

    {"inputs", "source": "workspace"|"gold"|"none"|"predictions", "sha256", "bytes",
     "files": [paths], "lines_added", "lines_removed", "binary": bool,
     "skipped_files": [{"path", "bytes"}],
     "left_out": [{"path": str, "files": int, "reason": "harness file"|"build output"}],
     "note": str}

``left_out`` has one entry per name of HARNESS_FILES and BUILD_OUTPUTS (a directory's ends in /)
under which the workspace has files differing from the base, new or changed, with their number;
it is empty for the other sources.
"""

import base64
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, assert_never

from ..core import inputs, jsonio, stamps
from ..core.errors import UserError, failing_on_user_error
from ..core.gitcmd import ScratchIndex, scratch_index
from ..core.outcomes import COMPLETED, UNFINISHED_AGENT
from ..core.records import LeftOut, PatchJson, PatchStats, SkippedFile, write_record
from ..core.stamps import TaskDict
from ..core.tasknames import AGENT, PATCH, repo_task, task_name, unit_name
from ..run.benchmark import gold_patch
from ..run.modes import AgentMode, GoldMode, Mode, NoneMode, PredictionsMode, read_predictions
from ..run.swebench import NGINX, SWEBENCH, SweTask
from ..workspace.stage import BUILD_OUTPUTS, HARNESS_FILES, PYTHON_OUTPUTS, release_workspace

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..run.benchmark import AnyTask, Task
    from ..run.context import StageContext

# An agent mode's patch: (patch, skipped new files, left-out paths, note).
AgentPatch = tuple[bytes, list[SkippedFile], list[LeftOut], str]

MAX_NEW_FILE_BYTES = 1 << 20
# Never part of an agent's patch, whatever the base's .gitignore says: (name, reason, pathspec
# magic, pattern): top-level paths, and for a SWE-bench task Python's outputs at any depth.
LEFT_OUT = [(name, "harness file", "literal", name) for name in HARNESS_FILES] + [
    (name, "build output", "literal", name) for name in BUILD_OUTPUTS
]
LEFT_OUT_PYTHON = [(name, "harness file", "literal", name) for name in HARNESS_FILES] + [
    (name, "build output", "glob", "**/" + name + ("**" if name.endswith("/") else ""))
    for name in PYTHON_OUTPUTS
]


def left_out_of(kind: str) -> list:
    return LEFT_OUT_PYTHON if kind == SWEBENCH else LEFT_OUT


def _left_out(index: ScratchIndex, kind: str = NGINX) -> list[LeftOut]:
    """The entries of left_out_of(kind) under which the workspace differs from the base (the
    scratch index still holds the base's version there), with the number of files."""
    table = left_out_of(kind)
    specs = [f":(top,{magic}){pattern}" for _, _, magic, pattern in table]
    # Ignored files count too: on a base with a .gitignore the record says the same. One
    # listing for every entry: each git command reads the whole workspace.
    found = index.untracked(*specs) + index.modified(*specs)
    entries: list[LeftOut] = []
    for (name, reason, magic, _), spec in zip(table, specs, strict=True):
        if not found:
            break
        if magic == "literal":
            files = sum(1 for path in found if _under_literal(path, name))
        else:  # a glob: git's own matching
            files = len(index.untracked(spec)) + len(index.modified(spec))
        if files:
            entries.append({"path": name, "files": files, "reason": reason})
    return entries


def _under_literal(path: bytes, name: str) -> bool:
    """Whether git's literal pathspec `name` (top-relative; a trailing / for a directory)
    matches `path`."""
    prefix = os.fsencode(name)
    return (
        path.startswith(prefix)
        if name.endswith("/")
        else (path == prefix or path.startswith(prefix + b"/"))
    )


def workspace_diff(
    bare: str | Path, workspace: str | Path, base: str, kind: str = NGINX
) -> tuple[bytes, list[SkippedFile], list[LeftOut]]:
    """(patch bytes, skipped new files, left-out paths) of `workspace` against `base`, using a
    scratch index (new blobs go to a scratch store, so the bare clone never grows agent junk);
    kind: the benchmark's (what is left out, left_out_of)."""
    if not os.path.isdir(workspace):
        os.makedirs(workspace)
    with scratch_index(bare, workspace, base) as index:
        # Excluded from `add`, a tracked file keeps the base's version in the index: no diff.
        excludes = [
            f":(exclude,top,{magic}){pattern}" for _, _, magic, pattern in left_out_of(kind)
        ]
        skipped: list[SkippedFile] = []
        new: list[bytes] = []
        for rel in index.untracked(".", *excludes, standard_excludes=True):
            path = os.path.join(workspace, os.fsdecode(rel))
            size = os.lstat(path).st_size
            if size > MAX_NEW_FILE_BYTES:
                skipped.append({"path": os.fsdecode(rel), "bytes": size})
            else:
                new.append(rel)
        # Not one `add -A` with the excludes: it fails ("paths are ignored") when an exclude names
        # a path the base's .gitignore ignores (objs/ on the bases that have one). Tracked files
        # first, then the new files by name.
        index.add_tracked(".", *excludes)
        if new:
            index.add_new(new)
        left_out = _left_out(index, kind)
        return index.diff(base), skipped, left_out


def _header_path(line: str) -> str:
    path = line[4:].split("\t", 1)[0].strip()
    return path[2:] if path[:2] in ("a/", "b/") else path


def patch_stats(patch: bytes) -> PatchStats:
    """Files, added and removed lines of a git diff or a plain unified diff (predictions made
    elsewhere often have no `diff --git` headers)."""
    files: list[str] = []
    added, removed, binary = 0, 0, False
    git_header, old_path = False, None
    for line in patch.decode("utf-8", "replace").splitlines():
        if line.startswith("diff --git "):
            parts = line.split(" b/", 1)
            files.append(parts[1] if len(parts) == 2 else line[11:])
            git_header = True
        elif line.startswith("--- "):
            old_path = _header_path(line)
        elif line.startswith("+++ "):
            if not git_header:
                new_path = _header_path(line)
                name = old_path if new_path == "/dev/null" else new_path
                if name is not None:  # a removal with no --- line before it names no file
                    files.append(name)
            git_header = False
        elif line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
        elif line.startswith("GIT binary patch") or line.startswith("Binary files "):
            binary = True
    return {"files": files, "lines_added": added, "lines_removed": removed, "binary": binary}


# C escapes of git's quoted names (quote_c_style); octal escapes are bytes.
_C_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "t": "\t",
    "n": "\n",
    "v": "\v",
    "f": "\f",
    "r": "\r",
    '"': '"',
    "\\": "\\",
}
_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
# A timestamp after a name with no tab between (diff -u writes a tab, some tools spaces).
_TIMESTAMP = re.compile(r"\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [+-]\d{4})?$")


def _unquote(text: str) -> tuple[str, str] | None:
    """(name, rest) of the C-quoted name `text` starts with, or None when it is not closed."""
    out, i = bytearray(), 1
    while i < len(text):
        c = text[i]
        if c == '"':
            return out.decode("utf-8", "surrogateescape"), text[i + 1 :]
        if c == "\\" and i + 1 < len(text):
            if text[i + 1] in "01234567":
                # Git writes three digits; a patch made elsewhere must not crash the build stage.
                digits = re.match("[0-7]{1,3}", text[i + 1 : i + 4])
                assert digits  # text[i + 1] is an octal digit
                out.append(int(digits[0], 8) & 0xFF)
                i += 1 + len(digits[0])
                continue
            c = _C_ESCAPES.get(text[i + 1], text[i + 1])
            i += 1
        out += c.encode("utf-8", "surrogateescape")
        i += 1
    return None


def _strip1(name: str) -> str:
    """`name` as `git apply -p1` reads it: the first component off, runs of slashes squashed."""
    if "/" in name:
        name = name.split("/", 1)[1]
    return re.sub("/+", "/", name)


def _side_name(text: str) -> str:
    """The name of a ---/+++ line (what follows the marker), as written."""
    if text.startswith('"'):
        quoted = _unquote(text)
        if quoted:
            return quoted[0]
    if "\t" in text:
        return text.split("\t", 1)[0]
    return _TIMESTAMP.sub("", text.rstrip())


def _git_header_names(text: str) -> list[str]:
    """The two names of a `diff --git` line (what follows `diff --git `), as written. Unquoted
    names with spaces leave the split open; git then takes the split whose names are equal, and
    for a rename or copy the `rename`/`copy` lines, which name both sides anyway."""
    if text.startswith('"'):
        first = _unquote(text)
        if not first:
            return []
        rest = first[1].lstrip(" ")
        second = _unquote(rest) if rest.startswith('"') else (rest, "")
        return [first[0], second[0]] if second else [first[0]]
    if '"' in text:
        # Git quotes every name holding a '"', so here only the second name is quoted.
        i = text.find(' "')
        second = _unquote(text[i + 1 :]) if i >= 0 else None
        return [text[:i], second[0]] if second else []
    splits = [(text[:i], text[i + 1 :]) for i, c in enumerate(text) if c == " "]
    if len(splits) == 1:
        return list(splits[0])
    equal = [s for s in splits if _strip1(s[0]) == _strip1(s[1])]
    return list(equal[0]) if equal else []


def _in_hunk(line: str, old_left: int, new_left: int) -> tuple[int, int, bool]:
    """(old_left, new_left, True) when `line` is body of the hunk being read, with the counts
    left after it; (0, 0, False) when the hunk ended early (git apply would refuse it anyway)."""
    # Inside a hunk a removed "-- x" line reads "--- x": only the counts say it is body.
    marker = line[:1]
    if marker in (" ", ""):
        return old_left - 1, new_left - 1, True
    if marker == "-":
        return old_left - 1, new_left, True
    if marker == "+":
        return old_left, new_left - 1, True
    if marker == "\\":
        return old_left, new_left, True
    return 0, 0, False


def _copy_or_rename_path(line: str) -> str:
    # git apply strips p - 1 components from these, i.e. none with -p1.
    name = line.split(" ", 2)[2]
    quoted = _unquote(name) if name.startswith('"') else None
    return quoted[0] if quoted else name


def _minus_plus_paths(line: str, next_line: str) -> list[str]:
    names = (_side_name(side) for side in (line[4:], next_line.rstrip("\r")[4:]))
    return [_strip1(name) for name in names if name != "/dev/null"]


def touched_paths(patch: bytes) -> list[str]:
    """Every path `patch` touches, old and new sides, as `git apply -p1` (how the harness applies
    patches) reads them: both names of `diff --git` lines and of ---/+++ pairs with their first
    component stripped, `rename`/`copy` from/to lines as they are; never /dev/null. In order,
    without repeats. A rename out of auto/ thus still counts as touching auto/."""
    lines = patch.decode("utf-8", "surrogateescape").split("\n")
    paths, old_left, new_left, git_header = [], 0, 0, False
    for n, line in enumerate(lines):
        line = line.rstrip("\r")
        if old_left > 0 or new_left > 0:
            old_left, new_left, body = _in_hunk(line, old_left, new_left)
            if body:
                continue
        hunk = _HUNK.match(line)
        if hunk:
            old_left = int(hunk[1]) if hunk[1] is not None else 1
            new_left = int(hunk[2]) if hunk[2] is not None else 1
            git_header = False
        elif line.startswith("diff --git "):
            paths += [_strip1(name) for name in _git_header_names(line[11:])]
            git_header = True
        elif git_header and line.startswith(
            ("rename from ", "rename to ", "copy from ", "copy to ")
        ):
            paths.append(_copy_or_rename_path(line))
        elif line.startswith("--- ") and n + 1 < len(lines) and lines[n + 1].startswith("+++ "):
            # Like git apply, a --- line counts only with its +++ line after it (a commit
            # message may hold one).
            paths += _minus_plus_paths(line, lines[n + 1])
            git_header = False
    return list(dict.fromkeys(p for p in paths if p))


def prediction_for(predictions_path: str | Path, instance_id: str) -> tuple[bytes | None, str]:
    """The model_patch for `instance_id` in a SWE-bench predictions file (.jsonl or .json list)."""
    row = read_predictions(predictions_path).get(instance_id)
    if row is None:
        return None, ""
    return row[0].encode("utf-8"), row[1]


def unfinished_agent_note(layout: "Layout", mode: AgentMode, task: "Task") -> str:
    """Why the agent run of (mode, task) has no patch to score, or "" when it finished."""
    agent = jsonio.read_json(layout.agent_json(mode.name, task.instance_id)) or {}
    why = UNFINISHED_AGENT.get(agent.get("status", ""))
    if not why:
        return ""
    return (
        f"no patch: the agent run ended in {agent['status']} ({agent.get('error') or why}); "
        f"`doit run` runs it again"
    )


def unscored_note(layout: "Layout", mode: AgentMode, task: "Task") -> str:
    """Why a mode that scores only finished attempts (``score = "finished"``) scores nothing
    of this run, or "" (its status is completed, or the mode scores what is on disk)."""
    if mode.score != "finished":
        return ""
    agent = jsonio.read_json(layout.agent_json(mode.name, task.instance_id)) or {}
    if agent.get("status") == COMPLETED:
        return ""
    return (
        f"not scored: mode {mode.name} scores only attempts that finished (score = "
        f'"finished"), and this one ended in {agent.get("status")} ({agent.get("error")})'
    )


def remote_agent_diff(layout: "Layout", mode: AgentMode, task: "Task") -> AgentPatch | None:
    """With executor=ray, (patch, skipped, left_out, note) as the node that ran the agent took
    them from its workspace (agent._remote_agent), when made for this agent.json; else None."""
    kept = jsonio.read_json(layout.remote_diff(mode.name, task.instance_id))
    agent = jsonio.read_json(layout.agent_json(mode.name, task.instance_id)) or {}
    if not kept or kept.get("agent_inputs") != agent.get("inputs"):
        return None
    return (
        base64.b64decode(kept["patch_base64"]),
        kept["skipped"],
        kept["left_out"],
        _skipped_note(kept["skipped"]),
    )


def _skipped_note(skipped: Sequence[SkippedFile]) -> str:
    if not skipped:
        return ""
    return f"left out {len(skipped)} new file(s) over {MAX_NEW_FILE_BYTES} bytes: " + ", ".join(
        s["path"] for s in skipped[:5]
    )


def agent_patch(layout: "Layout", mode: AgentMode, task: "Task", out: Path) -> AgentPatch:
    """(patch, skipped, left_out, note) of an agent mode: the workspace's diff; the patch kept
    from an earlier diff when the workspace is gone; nothing for a run that did not finish."""
    note = unfinished_agent_note(layout, mode, task) or unscored_note(layout, mode, task)
    if note:
        return b"", [], [], note
    remote = remote_agent_diff(layout, mode, task)
    if remote:
        return remote
    if not (jsonio.read_json(layout.workspace_stamp(mode.name, task.instance_id)) or {}).get(
        "agent_started"
    ):
        # The agent's workspace is gone (`doit clean`) and a fresh one stands in its place: its
        # diff would be empty, not the agent's work. The patch taken from the agent's workspace
        # is kept; without one, only running the agent again can say.
        old_patch = layout.model_patch(mode.name, task.instance_id)
        if not old_patch.exists():
            raise UserError(
                f"the workspace of agent run {mode.name}/{task.instance_id} is gone; "
                f"`doit forget agent:<benchmark>/{mode.name}/{task.instance_id}` "
                f"runs the agent again",
                task=task.instance_id,
                field="workspace",
            )
        old = jsonio.read_json(out) or {}
        return (
            old_patch.read_bytes(),
            old.get("skipped_files", []),
            old.get("left_out", []),
            old.get("note", ""),
        )
    patch, skipped, left_out = workspace_diff(
        layout.bare_repo(task.repo),
        layout.workspace(mode.name, task.instance_id),
        task.base_commit,
        task.kind,
    )
    return patch, skipped, left_out, _skipped_note(skipped)


def write_patch(layout: "Layout", mode: Mode, task: "Task", config: Any, files: list[str]) -> None:
    inputs = stamps.inputs_digest(config, files)
    out = layout.patch_json(mode.name, task.instance_id)
    skipped: list[SkippedFile] = []
    left_out: list[LeftOut] = []
    note = ""
    match mode:
        case GoldMode():
            patch = gold_patch(task, layout.bare_repo(task.repo))
        case NoneMode():
            patch = b""
        case PredictionsMode():
            predicted, _ = prediction_for(mode.predictions, task.instance_id)
            if predicted is None:
                patch, note = b"", "no prediction for this instance"
            else:
                patch = predicted
        case AgentMode():
            patch, skipped, left_out, note = agent_patch(layout, mode, task, out)
        case _:
            assert_never(mode)
    jsonio.write_bytes(layout.model_patch(mode.name, task.instance_id), patch)
    record: PatchJson = {
        "inputs": inputs,
        "source": "workspace" if isinstance(mode, AgentMode) else mode.kind,
        "sha256": jsonio.digest(patch),
        "bytes": len(patch),
        "skipped_files": skipped,
        "left_out": left_out,
        "note": note,
        **patch_stats(patch),
    }
    write_record(out, record)


def take_patch(
    layout: "Layout",
    mode: Mode,
    task: "Task",
    keep_workspace: bool,
    config: Any,
    files: list[str],
) -> None:
    """The doit action: write_patch, then, for a finished agent run, its workspace goes. What is
    scored of it is in model.patch, and workspaces add up: each holds the history up to the base,
    and a run of several agent modes on the shipped tasks would fill the disk with them before it
    ends (docs/performance.md). keep_workspace (``keep_workspaces=1``): left for a look at what the
    agent left behind, until ``doit clean``."""
    write_patch(layout, mode, task, config, files)
    if (
        isinstance(mode, AgentMode)
        and not keep_workspace
        and not unfinished_agent_note(layout, mode, task)
    ):
        release_workspace(layout, mode.name, task)


# The patch task's optional inputs at the value that leaves them out (core/inputs.py): a mode
# scored on what is on disk, a patch that is not gold's.
PATCH_INPUT_DEFAULTS: dict[str, Any] = {"score": "on_disk", "fix": None}


def gold_fix(task: "AnyTask") -> str:
    """What names a gold patch: an nginx task's fix commit, a SWE-bench row's patch's digest."""
    return jsonio.digest(task.patch) if isinstance(task, SweTask) else task.fix_commit


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    keep = bool(ctx.options and ctx.options.keep_workspaces)
    for bench, mode, task in ctx.units():
        name = unit_name(bench, mode, task)
        iid = task.instance_id
        # The test repository's clone too: its checks come before the first build.
        files: list[str | Path] = []
        task_dep = list(dict.fromkeys([repo_task(task.repo), repo_task(task.test_repo)]))
        fields = {
            "kind": mode.kind,
            "base": task.base_commit,
            "score": mode.score if isinstance(mode, AgentMode) else "on_disk",
            # A SWE-bench row's gold patch is its own (no fix commit): its digest.
            "fix": gold_fix(task) if isinstance(mode, GoldMode) else None,
        }
        slice_ = inputs.canonical(fields, PATCH_INPUT_DEFAULTS)
        if isinstance(mode, AgentMode):
            files.append(ctx.layout.agent_json(mode.name, iid))
            task_dep.append(task_name(AGENT, name))
        elif isinstance(mode, PredictionsMode):
            files.append(mode.predictions)
        yield stamps.stage_task(
            basename=PATCH,
            name=name,
            doc=f"the {mode.name} patch for {iid}",
            action=failing_on_user_error,
            args=[take_patch, ctx.layout, mode, task, keep],
            config=slice_,
            files=files,
            task_dep=task_dep,
            targets=[ctx.layout.patch_json(mode.name, iid), ctx.layout.model_patch(mode.name, iid)],
        )
