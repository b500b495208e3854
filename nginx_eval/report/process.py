"""The report's process figures (issue 50): what each attempt's agent did, read from its ATIF
trajectory (``agent/trajectory.atif.json``, transcript/atif.py), the form every program's attempt
has; and, per mode, how often each behaviour came with a resolved task. The rules, as
docs/report.md states them for readers:

- every tool call of the attempt counts (every phase and subagent), in the order of the
  timestamps of the answers that made them;
- a **build** or **test** is a shell tool call (SHELL_TOOLS) one of whose simple commands is
  ``make``/``configure`` (is_build), or ``prove``/``pytest``/a ``.t`` file (is_test); a test
  **failed** when its result shows a non-zero exit status as the program prints it, a TAP
  ``not ok`` or ``Result: FAIL`` (failed);
- an **edit** is an editing tool (EDIT_TOOLS) on a file outside the harness's ``.tmp/`` and not
  a document, or a shell command that edits in place or redirects into a source file (is_edit).

Per attempt (AttemptProcess): built, tested, failed_test_before_edit (a failed test came before
the first edit, or the attempt edited nothing), edited, seconds_to_first_edit (from the first
phase's start, the root step's timestamp; else the earliest timestamp the trajectory holds).
Per mode (process_facts; core/records.py: ProcessSection), over the scored tasks with a
trajectory: each behaviour's share, the resolved rate with and without it and Fisher's exact
test (scipy.stats.fisher_exact); the time to the first edit's medians, resolved and not, and the
Mann-Whitney U test between them (scipy.stats.mannwhitneyu); both two-sided.
"""

import datetime
import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypedDict

from ..core import jsonio
from ..core.outcomes import NOT_SCORED, RESOLVED
from ..core.records import ModeProcess, ProcessBehaviour, ProcessFirstEdit, ProcessSection
from .modes import rate_of, rounded
from .records import row_outcome

SHELL_TOOLS = {"Bash", "exec_command", "run_shell_command", "shell", "local_shell"}
EDIT_TOOLS = {"Edit", "Write", "MultiEdit", "NotebookEdit", "apply_patch", "replace", "write_file"}
SOURCE_SUFFIXES = (".c", ".h", ".cc", ".cpp", ".t", ".pl", ".pm", ".xs", ".py", ".conf")
DOCUMENT_SUFFIXES = (".md", ".txt")
SCRATCH_DIR = ".tmp"
BEHAVIOURS = ("built", "tested", "failed_test_before_edit", "edited")

_SEGMENTS = re.compile(r"[;&|\n()`]+|\$\(")
_PREFIXES = {"env", "time", "sudo", "exec", "nice", "command"}
_EXIT = re.compile(r"(?:^|\n)\s*(?:Exit code|Process exited with code|Exit Code:)\s*(-?\d+)")
_TAP_FAIL = re.compile(r"(?m)^\s*not ok\b(?!.*#\s*TODO)|\bResult: FAIL\b")
_REDIRECT = re.compile(r"(?:>>?|\btee\s+(?:-a\s+)?)\s*['\"]?([^\s;&|<>'\"]+)")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?[^\n]*\n.*?\n\s*\1\b", re.DOTALL)
_PATCH_FILE = re.compile(r"(?m)^\*\*\* (?:Update|Add|Delete) File: (.+)$")


class AttemptProcess(TypedDict):
    """What one attempt's agent did (module docstring)."""

    built: bool
    tested: bool
    failed_test_before_edit: bool
    edited: bool
    seconds_to_first_edit: float | None


def _moment(stamp: Any) -> datetime.datetime | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        moment = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def _result_text(content: Any) -> str:
    """A result's text; Gemini's is its functionResponse as JSON, whose "output" is the text."""
    text = content if isinstance(content, str) else json.dumps(content)
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return text
        if isinstance(parsed, dict):
            return "\n".join(str(v) for v in parsed.values() if isinstance(v, str)) or text
    return text


def _calls(
    trajectory: Mapping[str, Any],
) -> Iterator[tuple[datetime.datetime | None, str, dict[str, Any], str]]:
    """(when, tool name, arguments, result text) of every tool call in the trajectory and the
    trajectories embedded in it, in their order in each."""
    for step in trajectory.get("steps") or []:
        results = {
            r.get("source_call_id"): r.get("content")
            for r in (step.get("observation") or {}).get("results") or []
            if isinstance(r, dict)
        }
        for call in step.get("tool_calls") or []:
            arguments = call.get("arguments")
            yield (
                _moment(step.get("timestamp")),
                str(call.get("function_name") or ""),
                arguments if isinstance(arguments, dict) else {},
                _result_text(results.get(call.get("tool_call_id"), "")),
            )
    for sub in trajectory.get("subagent_trajectories") or []:
        yield from _calls(sub)


def _earliest(trajectory: Mapping[str, Any]) -> datetime.datetime | None:
    moments = [_moment(s.get("timestamp")) for s in trajectory.get("steps") or []]
    moments += [_earliest(sub) for sub in trajectory.get("subagent_trajectories") or []]
    known = [m for m in moments if m]
    return min(known) if known else None


def attempt_start(trajectory: Mapping[str, Any]) -> datetime.datetime | None:
    """When the attempt began: its first phase's step, else the earliest step of any."""
    steps = trajectory.get("steps") or []
    return (_moment(steps[0].get("timestamp")) if steps else None) or _earliest(trajectory)


def shell_command(name: str, arguments: Mapping[str, Any]) -> str | None:
    """The command line of a shell tool call (Claude Code's Bash, Codex's exec_command, Gemini's
    run_shell_command), None for another tool."""
    if name not in SHELL_TOOLS:
        return None
    command = arguments.get("command", arguments.get("cmd"))
    if isinstance(command, list):
        return " ".join(str(c) for c in command)
    return str(command) if command is not None else None


def _programs(command: str) -> list[list[str]]:
    """The words of each simple command of a command line, from the program's name on."""
    out = []
    for segment in _SEGMENTS.split(_HEREDOC.sub("", command)):
        words = segment.split()
        while words and ("=" in words[0] and not words[0].startswith("=") or words[0] in _PREFIXES):
            words = words[1:]
        if words and words[0] == "timeout":
            words = [w for w in words[1:] if not w.startswith("-")][1:]
        if words:
            out.append(words)
    return out


def is_build(command: str) -> bool:
    return any(
        w[0].rsplit("/", 1)[-1] in ("make", "gmake", "configure") for w in _programs(command)
    )


def is_test(command: str) -> bool:
    for words in _programs(command):
        program = words[0].rsplit("/", 1)[-1]
        if program in ("prove", "pytest") or program.endswith(".t"):
            return True
        if program == "perl" and any(w.endswith(".t") for w in words[1:]):
            return True
        if program.startswith("python") and words[1:3] == ["-m", "pytest"]:
            return True
    return False


def failed(result: str) -> bool:
    """A tool result that shows failure: a non-zero exit status, a TAP `not ok` or FAIL."""
    status = _EXIT.search(result)
    return bool(status and int(status.group(1)) != 0) or bool(_TAP_FAIL.search(result))


def _counts_as_edited(path: str) -> bool:
    parts = path.replace("\\", "/").split("/")
    return SCRATCH_DIR not in parts and not path.endswith(DOCUMENT_SUFFIXES)


def _in_place_flag(word: str) -> bool:
    """sed's or perl's flag of editing in place: -i, -i.bak, -pi, -pie, --in-place."""
    return word.startswith("--in-place") or (
        word.startswith("-") and not word.startswith("--") and "i" in word[1:3]
    )


def is_edit(name: str, arguments: Mapping[str, Any]) -> bool:
    command = shell_command(name, arguments)
    if command is not None:
        for words in _programs(command):
            program = words[0].rsplit("/", 1)[-1]
            if program == "apply_patch":
                targets = _PATCH_FILE.findall(command)
                if not targets or any(_counts_as_edited(t.strip()) for t in targets):
                    return True
            elif program == "patch" or (program == "git" and words[1:2] in (["apply"], ["am"])):
                return True
            elif program in ("sed", "perl") and any(_in_place_flag(w) for w in words[1:]):
                return True
        body = _HEREDOC.sub("", command)
        return any(t.endswith(SOURCE_SUFFIXES) for t in _REDIRECT.findall(body))
    if name not in EDIT_TOOLS:
        return False
    if name == "apply_patch":
        patch = str(arguments.get("input") or arguments.get("patch") or "")
        targets = _PATCH_FILE.findall(patch)
        return not targets or any(_counts_as_edited(t.strip()) for t in targets)
    path = arguments.get("file_path") or arguments.get("path") or arguments.get("notebook_path")
    return _counts_as_edited(str(path)) if path else True


def attempt_process(trajectory: Mapping[str, Any]) -> AttemptProcess:
    """An attempt's process figures from its root ATIF trajectory (module docstring)."""
    calls = list(_calls(trajectory))
    # Stable: the calls of one answer, and of answers without a time, keep their order.
    order = sorted(
        range(len(calls)),
        key=lambda i: (calls[i][0] or datetime.datetime.max.replace(tzinfo=datetime.UTC), i),
    )
    built = tested = failed_first = False
    first_edit: int | None = None
    for i in order:
        _, name, arguments, result = calls[i]
        command = shell_command(name, arguments)
        if command is not None:
            built = built or is_build(command)
            if is_test(command):
                tested = True
                failed_first = failed_first or (first_edit is None and failed(result))
        if first_edit is None and is_edit(name, arguments):
            first_edit = i
    seconds = None
    start = attempt_start(trajectory)
    edited_at = calls[first_edit][0] if first_edit is not None else None
    if start and edited_at:
        seconds = round(max(0.0, (edited_at - start).total_seconds()), 3)
    return {
        "built": built,
        "tested": tested,
        "failed_test_before_edit": failed_first,
        "edited": first_edit is not None,
        "seconds_to_first_edit": seconds,
    }


# -- per mode --------------------------------------------------------------------------------------
Figures = list[tuple[Mapping[str, Any], bool]]  # (an attempt's process, resolved)


def _fisher(with_it: list[bool], without: list[bool]) -> float | None:
    """Two-sided p of Fisher's exact test of resolved by behaviour; None when a margin is 0."""
    table = [
        [sum(with_it), len(with_it) - sum(with_it)],
        [sum(without), len(without) - sum(without)],
    ]
    if not with_it or not without or not any(with_it + without) or all(with_it + without):
        return None
    from scipy.stats import fisher_exact

    return float(fisher_exact(table).pvalue)


def _behaviour(name: str, figures: Figures) -> ProcessBehaviour:
    with_it = [resolved for f, resolved in figures if f[name]]
    without = [resolved for f, resolved in figures if not f[name]]
    return {
        "name": name,
        "attempts": len(with_it),
        "share": rate_of(len(with_it), len(figures)),
        "resolved_with": rate_of(sum(with_it), len(with_it)),
        "resolved_without": rate_of(sum(without), len(without)),
        "p": rounded(_fisher(with_it, without), 6),
    }


def _first_edit(figures: Figures) -> ProcessFirstEdit:
    times = [(f["seconds_to_first_edit"], r) for f, r in figures]
    resolved = [t for t, r in times if t is not None and r]
    unresolved = [t for t, r in times if t is not None and not r]
    known = resolved + unresolved
    p = None
    if resolved and unresolved:
        from scipy.stats import mannwhitneyu

        p = float(mannwhitneyu(resolved, unresolved, alternative="two-sided").pvalue)

    def median(values: list[float]) -> float | None:
        import statistics

        return round(statistics.median(values), 3) if values else None

    return {
        "attempts": len(known),
        "median": median(known),
        "median_resolved": median(resolved),
        "median_unresolved": median(unresolved),
        "p": rounded(p, 6),
    }


def mode_process(
    name: str, by_id: Mapping[str, Mapping[str, Any]], found: Mapping[str, AttemptProcess]
) -> ModeProcess | None:
    """One mode's process figures over its scored tasks with a trajectory (`found`: each task's
    attempt_process), or None when there is none."""
    figures: Figures = [
        (found[iid], row_outcome(row) == RESOLVED)
        for iid, row in sorted(by_id.items())
        if iid in found and row_outcome(row) not in NOT_SCORED
    ]
    if not figures:
        return None
    return {
        "name": name,
        "attempts": len(figures),
        "resolved": sum(r for _, r in figures),
        "behaviours": [_behaviour(b, figures) for b in BEHAVIOURS],
        "first_edit": _first_edit(figures),
    }


# The rules above, as this file states them: figures kept under other rules are read again.
RULES = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def _read_attempt(path: Path) -> AttemptProcess | None:
    trajectory = jsonio.read_json(path)
    if isinstance(trajectory, dict) and isinstance(trajectory.get("steps"), list):
        return attempt_process(trajectory)
    return None


def read_processes(
    layout: Any, rows: Mapping[str, Mapping[str, Mapping[str, Any]]]
) -> dict[str, dict[str, AttemptProcess]]:
    """{mode: {instance_id: attempt_process}} of the rows whose attempt left a trajectory (the
    last attempt's, as the row's other agent figures are); a file that is not a trajectory is
    left out, as a missing one is. Each trajectory is read once while its size and time stay
    (layout.process_figures: {"rules", "attempts": {path: {"stamp": [size, mtime_ns],
    "process": AttemptProcess | None}}}): a rendering re-reads only the attempts that changed."""
    kept = jsonio.read_json(layout.process_figures) or {}
    known = kept.get("attempts", {}) if kept.get("rules") == RULES else {}
    seen: dict[str, Any] = {}
    out: dict[str, dict[str, AttemptProcess]] = {}
    for mode, by_id in rows.items():
        for iid in by_id:
            path = layout.agent_atif(mode, iid)
            try:
                info = os.stat(path)
            except OSError:
                continue
            stamp = [info.st_size, info.st_mtime_ns]
            entry = known.get(str(path))
            if not (isinstance(entry, dict) and entry.get("stamp") == stamp):
                entry = {"stamp": stamp, "process": _read_attempt(path)}
            seen[str(path)] = entry
            if entry["process"]:
                out.setdefault(mode, {})[iid] = entry["process"]
    if seen != known:
        jsonio.write_json(layout.process_figures, {"rules": RULES, "attempts": seen})
    return out


def process_facts(
    rows: Mapping[str, Mapping[str, Mapping[str, Any]]],
    names: list[str],
    found: Mapping[str, Mapping[str, AttemptProcess]],
) -> ProcessSection | None:
    """The section's data: {"modes": [mode_process, ...]}, or None when no mode has an agent
    trajectory. found: {mode: {instance_id: attempt_process}} (records.py: read_trajectories)."""
    modes = [m for m in (mode_process(n, rows[n], found.get(n) or {}) for n in names) if m]
    return {"modes": modes} if modes else None
