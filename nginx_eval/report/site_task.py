"""One page of the run's site (site.py): what one mode did on one task, as plain data for
``templates/site/task.html.j2``. Read from the unit's stage files only (grade.json, agent.json,
patch.json, model.patch, build.json, build.log, prove.json and the TAP files it names, the
agent's prompt files and transcripts), whose schemas are in the docstrings of the modules that
write them; nothing here runs a stage or computes a statistic.

Everything long is cut to a limit and links to the file that holds it whole: the page is what a
reader skims, the result files stay the record. Transcripts are Claude Code's (agent.py copies
them next to agent.json); only their ``user`` and ``assistant`` lines say what happened. A phase
of another program (Codex, Gemini CLI) is shown from its trajectory in the attempt's ATIF file
(agent.json's ``atif``, transcript/atif.py), which each attempt's line links.

agent.json may also hold what isolation recorded (when the sandbox records it; older records have
none of it, and the page then says nothing of it): ``"isolation": "srt" | "none"``, per phase
``"blocked": [{"host", "port", "time"}]`` (network connections refused) and at the top
``"flags": [{"kind", "phase", "detail"}]``. ``time`` is an ISO 8601 string or seconds since the
epoch; a blocked attempt whose time places it among the turns is marked there as well.
"""

import datetime
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core import jsonio
from ..core.gitcmd import GitError, gold_diff
from ..core.layout import Layout
from ..core.outcomes import CONTAMINATED, NOT_SCORED, UNFINISHED_AGENT, outcome
from ..core.records import read_record
from ..run.benchmark import AnyTask
from ..run.swebench import SweTask
from ..transcript.blocks import content_blocks, result_text

# A record read from JSON (agent.json, grade.json, prove.json, a transcript entry, ...), and what
# a page is given of it.
Record = Mapping[str, Any]
View = dict[str, Any]
# What a page shows inline at most; the rest is behind a link to the file.
LOG_TAIL_BYTES = 8_000  # the end of build.log (where a build fails)
TAP_BYTES = 16_000  # the start of each TAP stream
DIFF_LINES = 1_500  # lines of each diff
PROMPT_CHARS = 6_000
TEXT_CHARS = 3_000  # what the agent says in one block
INPUT_CHARS = 2_000  # a tool call's input (an edit's old and new text)
# A tool call's result: its first lines. Results are most of an agent's page, so a page shares
# a budget among its calls: a short trajectory shows more of each result, a long one the first
# lines of each (scripts/bench_site.py measures what that makes of a full run's site).
RESULT_CHARS = 1_500  # at most
RESULT_CHARS_MIN = 240  # at least (about three lines)
RESULTS_PER_PAGE = 40_000  # the budget of a page
COLLAPSE_LINES = 8  # longer texts are collapsed (<details>) behind their first line
COLLAPSE_CHARS = 600

ASSERTION = re.compile(r"^(?P<file>[^:]+):(?P<number>\d+)(?: (?P<description>.*))?$")
# A transcript line of a user or an assistant entry (most lines are the CLI's bookkeeping, some
# of them large: they are skipped before they are parsed).
CONVERSATION_LINE = re.compile(r'"type":\s*"(?:user|assistant)"')
TAP_LINE = re.compile(r"^(?:not ok|ok)\b\s*(?P<number>\d+)")


# -- small shapes the template shows ---------------------------------------------------------------
def text_block(text: object, limit: int) -> View:
    """{"text", "first", "lines", "chars", "cut", "long", "reasoning"}: `text` up to `limit`
    characters; long texts are collapsed behind their first line."""
    text = str(text or "")
    shown = text if len(text) <= limit else text[:limit]
    first = next((line for line in text.splitlines() if line.strip()), "")
    lines = text.count("\n") + 1 if text else 0
    return {
        "text": shown,
        "first": first[:160],
        "lines": lines,
        "chars": len(text),
        "cut": len(text) - len(shown),
        "long": lines > COLLAPSE_LINES or len(text) > COLLAPSE_CHARS,
        "reasoning": False,  # a model's reasoning rather than what it said (ATIF's)
    }


def link(path: str | Path, page: str | Path) -> str:
    """The relative link from the page file `page` to `path` (a result file), "/" separated."""
    return os.path.relpath(path, os.path.dirname(page)).replace(os.sep, "/")


def read_head(path: str | Path, limit: int) -> tuple[str | None, int]:
    """(text of the first `limit` bytes, size in bytes) of a file; (None, 0) if it is missing."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return None, 0
    return data.decode("utf-8", "replace"), size


def read_tail(path: str | Path, limit: int) -> tuple[str | None, int]:
    """(text of the last `limit` bytes, size in bytes) of a file; (None, 0) if it is missing."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - limit))
            data = f.read()
    except OSError:
        return None, 0
    return data.decode("utf-8", "replace"), size


# -- the verdict -----------------------------------------------------------------------------------
def tap_lines(text: str | None) -> dict[int, str]:
    """{assertion number: its line} of a TAP stream (`prove -v` output; the first line of each
    number, subtests' indented lines left out)."""
    found: dict[int, str] = {}
    for line in (text or "").splitlines():
        m = TAP_LINE.match(line)
        if m:
            found.setdefault(int(m.group("number")), line.rstrip())
    return found


def strict_verdict(grade: Record | None) -> str | None:
    """grade.json's "strict" verdict, when the grade has one, as a status word: it may be a string
    or {"status" | "verdict" | "resolved"}; None when absent."""
    strict = (grade or {}).get("strict")
    if strict is None:
        return None
    if isinstance(strict, dict):
        word = strict.get("status") or strict.get("verdict")
        if word is None and "resolved" in strict:
            word = "resolved" if strict["resolved"] else "unresolved"
        return str(word) if word is not None else None
    if isinstance(strict, bool):
        return "resolved" if strict else "unresolved"
    return str(strict)


def assertions(grade: Record, streams: Mapping[str, str | None]) -> list[View]:
    """Every graded assertion: {"kind": "fail_to_pass" | "pass_to_pass", "id", "result": "passed"
    | "failed" | "skipped", "tap": its TAP line or None}. `streams`: {test file: TAP text} of
    the stream each file was judged by (the rerun's, with rerun_failed=1)."""
    skipped = set(grade.get("skipped_assertions") or [])
    lines = {f: tap_lines(text) for f, text in streams.items()}
    rows = []
    for kind in ("fail_to_pass", "pass_to_pass"):
        group = grade.get(kind) or {}
        passed = set(group.get("passed") or [])
        for ident in (group.get("passed") or []) + (group.get("failed") or []):
            m = ASSERTION.match(ident)
            line = lines.get(m.group("file"), {}).get(int(m.group("number"))) if m else None
            result = "passed" if ident in passed else "skipped" if ident in skipped else "failed"
            rows.append({"kind": kind, "id": ident, "result": result, "tap": line})
    order = {"failed": 0, "skipped": 1, "passed": 2}
    return sorted(rows, key=lambda r: (r["kind"] != "fail_to_pass", order[r["result"]]))


def not_scored(unit_outcome: str | None, agent: dict | None) -> dict | None:
    """Why a unit is not scored (outcomes.NOT_SCORED), from its agent.json: {"outcome", "why":
    the agent's error line (or the contamination's evidence), "again": whether the next `doit
    run` runs it again}; None for a unit that is scored."""
    if unit_outcome not in NOT_SCORED:
        return None
    agent = agent or {}
    if unit_outcome == CONTAMINATED:
        detail = next(
            (
                f.get("detail")
                for f in agent.get("flags") or []
                if isinstance(f, dict) and f.get("kind") == "contamination"
            ),
            None,
        )
        why = f"the fix reached the agent ({detail})" if detail else "the fix reached the agent"
        return {"outcome": unit_outcome, "why": why, "again": False}
    if unit_outcome not in UNFINISHED_AGENT:
        # eval_error: SWE-bench's official harness could not evaluate the patch; a new report
        # of it, not the next doit run, scores it.
        return {
            "outcome": unit_outcome,
            "again": False,
            "why": "the official harness could not evaluate the patch",
        }
    return {
        "outcome": unit_outcome,
        "again": True,
        "why": agent.get("error") or UNFINISHED_AGENT[unit_outcome],
    }


def local_verdict_view(local: Record | None, log: Path, page: Path) -> View | None:
    """What the page says of a SWE-bench unit's local verdict (swebench/verdict.py, swe_local=1),
    labelled local: its status, the FAIL_TO_PASS and PASS_TO_PASS tests that did not pass, and
    its files; None when the unit has none."""
    if not local:
        return None
    tests = local.get("tests") or {}
    kinds = []
    for kind in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        got = tests.get(kind) or {}
        passed, failed = got.get("success") or [], got.get("failure") or []
        kinds.append(
            {
                "kind": kind,
                "passed": len(passed),
                "total": len(passed) + len(failed),
                "failed": failed,
            }
        )
    return {
        "status": local.get("status"),
        "reason": local.get("reason"),
        "tests": kinds if tests else [],
        "test_command": local.get("test_command"),
        "seconds": local.get("seconds"),
        "log_href": link(log, page) if log.exists() else None,
    }


def verdict(grade: dict | None, streams: dict, agent: dict | None = None) -> dict | None:
    """What the page says of the grade. A unit that is not scored has no strict verdict to show
    (grade.json's is null; older grades said "not resolved"), and says why it is not scored."""
    if not grade:
        return None
    unit_outcome = outcome(dict(grade, contaminated=(agent or {}).get("contaminated")))
    unscored = not_scored(unit_outcome, agent)
    return {
        "status": grade.get("status"),
        "outcome": unit_outcome,
        "not_scored": unscored,
        "resolved": grade.get("resolved"),
        "strict": None if unscored else strict_verdict(grade),
        "agent_status": grade.get("agent_status"),
        "build_status": grade.get("build_status"),
        "env_errors": grade.get("env_errors") or [],
        "file_failures": grade.get("file_failures") or [],
        "timed_out_files": grade.get("timed_out_files") or [],
        "changed_on_rerun": grade.get("changed_on_rerun") or [],
        "first_run_status": grade.get("first_run_status"),
        "assertions": assertions(grade, streams),
    }


# -- the patches -----------------------------------------------------------------------------------
def diff_kind(line: str) -> str:
    if line.startswith(
        (
            "diff --git",
            "index ",
            "--- ",
            "+++ ",
            "new file",
            "deleted file",
            "similarity",
            "rename ",
            "old mode",
            "new mode",
            "Binary files",
            "GIT binary patch",
        )
    ):
        return "meta"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return "ctx"


def diff_view(text: str | None, other_files: Iterable[str] = ()) -> View | None:
    """A unified diff, highlighted: {"files": [{"path", "in_other", "added", "removed",
    "lines": [(kind, line)]}], "lines", "cut"}, at most DIFF_LINES lines; None for no text.
    `in_other`: the other patch (the gold fix, or the model's) touches the file too."""
    if text is None:
        return None
    files: list[dict[str, Any]] = []
    shown, total = 0, 0
    other = set(other_files)
    for line in text.splitlines():
        total += 1
        if line.startswith("diff --git") or not files:
            path = line.split(" b/", 1)[-1] if line.startswith("diff --git") else ""
            files.append(
                {"path": path, "in_other": path in other, "added": 0, "removed": 0, "lines": []}
            )
        f = files[-1]
        kind = diff_kind(line)
        f["added"] += kind == "add"
        f["removed"] += kind == "del"
        if shown < DIFF_LINES:
            f["lines"].append((kind, line))
            shown += 1
    return {
        "files": [f for f in files if f["lines"] or f["path"]],
        "lines": total,
        "cut": total - shown,
    }


def diff_files(text: str | None) -> list[str]:
    return [
        line.split(" b/", 1)[-1]
        for line in (text or "").splitlines()
        if line.startswith("diff --git")
    ]


@lru_cache(maxsize=256)
def _gold_from_clone(bare: str, base: str, fix: str) -> str | None:
    try:
        return gold_diff(bare, base, fix).decode("utf-8", "replace")
    except GitError:
        return None


def gold_patch(layout: Layout, task: AnyTask) -> str | None:
    """The fix's diff: the gold mode's model.patch of this run, else from the bare clone in the
    cache; None when neither is there."""
    path = layout.model_patch("gold", task.instance_id)
    if path.exists():
        return path.read_text(encoding="utf-8", errors="replace")
    # A SWE-bench row carries its gold patch (run/swebench.py).
    if not task.fix_commit and isinstance(task, SweTask):
        return task.patch
    bare = layout.bare_repo(task.repo)
    if bare.is_dir():
        return _gold_from_clone(str(bare), task.base_commit, task.fix_commit)
    return None


# -- build and prove -------------------------------------------------------------------------------
def build_view(build: Record | None, log_path: Path, page: Path) -> View | None:
    if not build and not log_path.exists():
        return None
    tail, size = read_tail(log_path, LOG_TAIL_BYTES)
    compiler = (build or {}).get("compiler")
    return {
        "status": (build or {}).get("status"),
        "kind": (build or {}).get("kind"),
        "seconds": (build or {}).get("seconds"),
        "reused": (build or {}).get("reused"),
        "flags": (build or {}).get("configure_flags") or [],
        "compiler": compiler.get("version") if isinstance(compiler, dict) else None,
        "log": {
            "text": tail,
            "bytes": size,
            "cut": tail is not None and size > len(tail.encode("utf-8", "replace")),
            "href": link(log_path, page),
        }
        if tail is not None
        else None,
    }


def test_file_view(name: str, record: Record, tap_dir: Path, page: Path, label: str = "") -> View:
    """One test file's run: its facts, the start of its TAP stream, links to its output files."""

    def path_of(key: str) -> Path | None:
        return tap_dir / record[key] if record.get(key) else None

    tap = path_of("tap")
    text, size = read_head(tap, TAP_BYTES) if tap else (None, 0)
    links = [
        (what, link(p, page))
        for what, p in (
            ("TAP", tap),
            ("stderr", path_of("stderr")),
            ("nginx log", path_of("nginx_log")),
        )
        if p is not None and p.exists()
    ]
    return {
        "file": name,
        "label": label,
        "exit_code": record.get("exit_code"),
        "timed_out": record.get("timed_out"),
        "seconds": record.get("seconds"),
        "missing": record.get("missing"),
        "network": record.get("network"),
        "tap": text,
        "bytes": size,
        "cut": text is not None and size > TAP_BYTES,
        "links": links,
    }


def prove_streams(prove: Record, tap_dir: Path) -> dict[str, Path]:
    """{test file: path of the TAP stream the grade judged it by}: a file's rerun, when it had one
    (rerun_failed=1), else its run."""
    streams = {}
    for group in ("files", "reruns"):
        for name, record in ((prove or {}).get(group) or {}).items():
            if record.get("tap"):
                streams[name] = tap_dir / record["tap"]
    return streams


def shown_streams(prove: Record | None, tap_dir: Path) -> list[Path]:
    """Every TAP stream prove.json names (runs, reruns, the base build's reference runs): what
    the page shows of the tests."""
    return [
        tap_dir / record["tap"]
        for group in ("files", "reruns", "reference")
        for record in ((prove or {}).get(group) or {}).values()
        if record.get("tap")
    ]


def prove_view(prove: Record | None, tap_dir: Path, page: Path) -> View | None:
    if not prove:
        return None
    runs = []
    for group, label in (("files", ""), ("reruns", "rerun"), ("reference", "base build")):
        for name, record in sorted((prove.get(group) or {}).items()):
            runs.append(test_file_view(name, record, tap_dir, page, label))
    return {"runs": runs, "notes": prove.get("notes") or [], "versions": prove.get("versions")}


# -- the agent -------------------------------------------------------------------------------------
def when(value: object) -> datetime.datetime | None:
    """A datetime (UTC) of an ISO 8601 string or seconds since the epoch; None otherwise."""
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return datetime.datetime.fromtimestamp(value, datetime.UTC)
        if isinstance(value, str) and value:
            parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None


def transcript_entries(path: str | Path) -> list[dict[str, Any]]:
    """The user and assistant entries of a transcript file, in order (its other lines are the
    CLI's bookkeeping)."""
    entries: list[dict[str, Any]] = []
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except OSError:
        return entries
    with f:
        for line in f:
            if not CONVERSATION_LINE.search(line):
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("type") in ("user", "assistant"):
                entries.append(entry)
    return entries


def _blocks(entry: Record) -> list[dict[str, Any]]:
    return content_blocks((entry.get("message") or {}).get("content"))


def call_summary(name: str, tool_input: Record) -> str:
    """One line naming what a tool call acts on (its command, file, pattern...)."""
    for key in ("command", "cmd", "file_path", "path", "pattern", "description", "url", "query"):
        if isinstance(tool_input.get(key), str) and tool_input[key].strip():
            return " ".join(tool_input[key].split())[:160]
    return ""


# The shell tools of the programs (Claude Code's Bash, Codex's exec_command, Gemini CLI's
# run_shell_command) and the argument that holds the command: shown as the command itself.
SHELL_TOOLS = {"Bash": "command", "exec_command": "cmd", "run_shell_command": "command"}


def tool_call(block: Record, results: Mapping[Any, tuple[str, Any]]) -> View:
    """{"name", "summary", "input", "shell", "result", "error"} of a tool call ({"id", "name",
    "input"}); results: {call id: (text, is_error)}."""
    tool_input: Record = block["input"] if isinstance(block.get("input"), dict) else {}
    name = block.get("name") or "?"
    command = tool_input.get(SHELL_TOOLS.get(name, ""))
    shown = command if isinstance(command, str) else None
    if shown is None:
        shown = json.dumps(tool_input, indent=1, ensure_ascii=False)
    result = results.get(block.get("id"))
    return {
        "name": name,
        "summary": call_summary(name, tool_input),
        "input": text_block(shown, INPUT_CHARS),
        "shell": isinstance(command, str),
        "result": text_block(result[0], RESULT_CHARS) if result else None,
        "error": bool(result and result[1]),
    }


def conversation(entries: Iterable[Record]) -> tuple[View | None, list[View]]:
    """(prompt, turns) of the entries of one conversation (the main one, or a subagent's). A turn
    is one answer of the model (the assistant entries of one message) with the tool calls it made
    and their results: {"n", "time", "model", "texts": [text_block], "calls": [tool_call]}."""
    results = {}
    for e in entries:
        if e.get("type") == "user":
            for b in _blocks(e):
                if b.get("type") == "tool_result":
                    results[b.get("tool_use_id")] = (result_text(b), b.get("is_error"))
    prompt = None
    turns: list[dict[str, Any]] = []
    by_message: dict[Any, Any] = {}
    for e in entries:
        if e.get("type") == "user":
            if prompt is None:
                texts = [b.get("text", "") for b in _blocks(e) if b.get("type") == "text"]
                if texts:
                    prompt = text_block("\n".join(texts), PROMPT_CHARS)
            continue
        message = e.get("message") or {}
        key = message.get("id") or e.get("requestId") or e.get("uuid")
        turn = by_message.get(key)
        if turn is None:
            turn = {
                "n": len(turns) + 1,
                "time": e.get("timestamp"),
                "model": message.get("model"),
                "texts": [],
                "calls": [],
                "blocked": [],
            }
            by_message[key] = turn
            turns.append(turn)
        for b in _blocks(e):
            if b.get("type") == "text" and b.get("text", "").strip():
                turn["texts"].append(text_block(b["text"], TEXT_CHARS))
            elif b.get("type") == "tool_use":
                turn["calls"].append(tool_call(b, results))
    return prompt, turns


# -- ATIF trajectories (transcript/atif.py): the phases of programs whose sessions are not read --


def atif_phases(path: str | Path | None) -> dict[int, dict[str, Any]]:
    """{phase number (1-based): its trajectory} of an attempt's ATIF file (the root's embedded
    trajectories, ``<session>/phase-<n>-<name>``); {} when there is none."""
    root = jsonio.read_json(path) if path else None
    out = {}
    for sub in (root or {}).get("subagent_trajectories") or []:
        m = re.search(r"/phase-(\d+)-[^/]*$", str(sub.get("trajectory_id") or ""))
        if m:
            out[int(m.group(1))] = sub
    return out


def _content(value: object) -> str:
    """An observation's content as text (ATIF allows a string or a list of parts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            p.get("text", "") if isinstance(p, dict) else str(p) for p in value if p is not None
        )
    return "" if value is None else json.dumps(value, ensure_ascii=False)


def atif_conversation(
    trajectory: Record,
) -> tuple[View | None, list[View], list[View]]:
    """(prompt, turns, subagents) of an ATIF trajectory in conversation()'s shapes: its first
    user step the prompt, each agent step a turn (its message, reasoning collapsed, tool calls
    with the observation's results by call id), embedded trajectories subagents."""
    steps = [s for s in trajectory.get("steps") or [] if isinstance(s, dict)]
    prompt = next(
        (text_block(s.get("message"), PROMPT_CHARS) for s in steps if s.get("source") == "user"),
        None,
    )
    turns: list[dict[str, Any]] = []
    for step in steps:
        if step.get("source") != "agent":
            continue
        results = {
            r.get("source_call_id"): (_content(r.get("content")), False)
            for r in (step.get("observation") or {}).get("results") or []
            if isinstance(r, dict)
        }
        texts = []
        if str(step.get("reasoning_content") or "").strip():
            texts.append(dict(text_block(step["reasoning_content"], TEXT_CHARS), reasoning=True))
        message = _content(step.get("message"))
        if message.strip():
            texts.append(text_block(message, TEXT_CHARS))
        calls = [
            tool_call(
                {
                    "id": c.get("tool_call_id"),
                    "name": c.get("function_name"),
                    "input": c.get("arguments"),
                },
                results,
            )
            for c in step.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        turns.append(
            {
                "n": len(turns) + 1,
                "time": step.get("timestamp"),
                "model": step.get("model_name"),
                "texts": texts,
                "calls": calls,
                "blocked": [],
            }
        )
    subagents: list[View] = []
    for sub in trajectory.get("subagent_trajectories") or []:
        _, sub_turns, _ = atif_conversation(sub)
        subagents.append(
            {
                "id": str(sub.get("trajectory_id") or "").rsplit("/", 1)[-1],
                "turns": sub_turns,
                "models": sorted({t["model"] for t in sub_turns if t["model"]}),
            }
        )
    return prompt, turns, subagents


def mark_blocked(turns: Sequence[View], blocked: Iterable[Record]) -> list[Record]:
    """Put each blocked attempt on the turn it happened in: the last that started before it.
    Returns those whose time places them on no turn (no time, or before the first)."""
    unplaced = []
    starts = [(when(t["time"]), t) for t in turns]
    for attempt in blocked:
        at = when(attempt.get("time"))
        before = [t for start, t in starts if start is not None and at is not None and start <= at]
        if before:
            before[-1]["blocked"].append(attempt)
        else:
            unplaced.append(attempt)
    return unplaced


def phase_view(
    layout: Layout,
    mode: str,
    iid: str,
    phase: Record,
    flags: Sequence[Record],
    page: Path,
    atif: Record | None = None,
    atif_href: str | None = None,
) -> View:
    """What the page shows of one phase: its steps from its transcript (Claude Code's), else
    from `atif`, its trajectory in the attempt's ATIF file (Codex's, Gemini CLI's: read from the
    proxy's record of the calls), linked as atif_href."""
    task_dir = layout.task_dir(mode, iid)
    transcript = task_dir / phase["transcript"] if phase.get("transcript") else None
    entries = transcript_entries(transcript) if transcript else []
    prompt, turns = conversation([e for e in entries if not e.get("agentId")])
    subagent_views: list[View] = []
    steps_from = "transcript" if entries else None
    if not entries and atif and any(s.get("source") == "agent" for s in atif.get("steps") or []):
        prompt, turns, subagent_views = atif_conversation(atif)
        steps_from = "atif"
    if prompt is None and phase.get("prompt_file"):
        text, _ = read_head(task_dir / phase["prompt_file"], PROMPT_CHARS + 1)
        prompt = text_block(text, PROMPT_CHARS) if text is not None else None
    subagents: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        if e.get("agentId"):
            subagents.setdefault(e["agentId"], []).append(e)
    blocked = [b for b in phase.get("blocked") or [] if isinstance(b, dict)]
    unplaced = mark_blocked(turns, blocked)
    logs = [
        (what, link(task_dir / phase[key], page))
        for what, key in (
            ("transcript", "transcript"),
            ("stdout", "stdout"),
            ("stderr", "stderr"),
            ("prompt", "prompt_file"),
        )
        if phase.get(key) and (task_dir / phase[key]).exists()
    ]
    if steps_from == "atif" and atif_href:
        logs.insert(0, ("ATIF trajectory", atif_href))
    return {
        "name": phase.get("name"),
        "program": phase.get("program"),
        "exit_code": phase.get("exit_code"),
        "timed_out": phase.get("timed_out"),
        "wall_seconds": phase.get("wall_seconds"),
        "cost_usd": phase.get("cost_usd"),
        "tokens": phase.get("tokens"),
        "num_turns": phase.get("num_turns"),
        "session_id": phase.get("session_id"),
        "terminal_reason": phase.get("terminal_reason"),
        "model": phase.get("model"),
        "command": phase.get("command"),
        "result": text_block(phase["result"], TEXT_CHARS) if phase.get("result") else None,
        "permission_denials": phase.get("permission_denials") or [],
        "blocked": blocked,
        "blocked_unplaced": unplaced,
        "flags": [f for f in flags if f.get("phase") == phase.get("name")],
        "prompt": prompt,
        "turns": turns,
        "has_transcript": bool(steps_from),
        "steps_from": steps_from,
        "subagents": subagent_views
        + [
            {
                "id": agent_id,
                "turns": conversation(es)[1],
                "models": sorted(
                    {
                        model
                        for e in es
                        if e.get("type") == "assistant"
                        and (model := (e.get("message") or {}).get("model")) is not None
                    }
                ),
            }
            for agent_id, es in subagents.items()
        ],
        "logs": logs,
        "transcript_href": next(
            (h for what, h in logs if what in ("transcript", "ATIF trajectory")), None
        ),
    }


def attempt_atifs(task_dir: Path, agent: Record, name: str) -> list[tuple[int, Path]]:
    """[(attempt number, the ATIF file's path)] of every attempt that left one: the last's is
    agent.json's ``atif``; an earlier one's, `name`, moved with its logs (``attempts[i].logs``)."""
    attempts = [a for a in agent.get("attempts") or [] if isinstance(a, dict)]
    out = []
    for n, a in enumerate(attempts, 1):
        if n == len(attempts) and agent.get("atif"):
            path = task_dir / agent["atif"]
        elif a.get("logs"):
            path = task_dir / a["logs"] / name
        else:
            continue
        if path.is_file():
            out.append((n, path))
    if not attempts and agent.get("atif") and (task_dir / agent["atif"]).is_file():
        out.append((1, task_dir / agent["atif"]))
    return out


def share_results(phases: Sequence[View]) -> None:
    """Cut every tool result of the phases (subagents too) to an equal share of the page's
    budget (RESULTS_PER_PAGE), between RESULT_CHARS_MIN and RESULT_CHARS."""
    calls = [
        c
        for p in phases
        for turns in [p["turns"]] + [s["turns"] for s in p["subagents"]]
        for t in turns
        for c in t["calls"]
        if c["result"]
    ]
    limit = max(RESULT_CHARS_MIN, min(RESULT_CHARS, RESULTS_PER_PAGE // max(1, len(calls))))
    for call in calls:
        result = call["result"]
        if len(result["text"]) > limit:
            result["text"] = result["text"][:limit]
            result["cut"] = result["chars"] - limit


def agent_view(
    layout: Layout, mode: str, iid: str, agent: Record | None, page: Path
) -> View | None:
    if not agent:
        return None
    flags = [f for f in agent.get("flags") or [] if isinstance(f, dict)]
    task_dir = layout.task_dir(mode, iid)
    atif_path = task_dir / agent["atif"] if agent.get("atif") else None
    atif_href = link(atif_path, page) if atif_path and atif_path.is_file() else None
    trajectories = atif_phases(atif_path) if atif_href else {}
    phases = [
        phase_view(layout, mode, iid, p, flags, page, trajectories.get(n), atif_href)
        for n, p in enumerate(agent.get("phases") or [], 1)
    ]
    share_results(phases)
    named = {p["name"] for p in phases}
    return {
        "status": agent.get("status"),
        "error": agent.get("error"),
        "version": agent.get("agent_version"),
        "cost_usd": agent.get("cost_usd"),
        "tokens": agent.get("tokens"),
        "wall_seconds": agent.get("wall_seconds"),
        "attempts": len(agent.get("attempts") or []),
        "isolation": agent.get("isolation"),
        "flags": flags,
        "flags_elsewhere": [f for f in flags if f.get("phase") not in named],
        "blocked": sum(len(p["blocked"]) for p in phases),
        "phases": phases,
        "atifs": [
            (n, link(path, page))
            for n, path in attempt_atifs(task_dir, agent, layout.agent_atif(mode, iid).name)
        ],
    }


# -- the page --------------------------------------------------------------------------------------
def agent_files(layout: Layout, mode: str, iid: str, agent: Record | None) -> list[Path]:
    """The agent's files a page is made from besides agent.json: prompts, transcripts and the
    attempt's ATIF file."""
    task_dir = layout.task_dir(mode, iid)
    return [
        task_dir / p[key]
        for p in (agent or {}).get("phases") or []
        for key in ("prompt_file", "transcript")
        if p.get(key)
    ] + ([task_dir / agent["atif"]] if agent and agent.get("atif") else [])


def page_files(layout: Layout, mode: str, task: AnyTask) -> list[Path]:
    """Every file the task page of (mode, task) is made from."""
    iid = task.instance_id
    prove = read_record(layout.prove_json(mode, iid))
    agent = read_record(layout.agent_json(mode, iid))
    return (
        [
            layout.grade_json(mode, iid),
            layout.agent_json(mode, iid),
            layout.patch_json(mode, iid),
            layout.model_patch(mode, iid),
            layout.build_json(mode, iid),
            layout.build_log(mode, iid),
            layout.prove_json(mode, iid),
            layout.model_patch("gold", iid),
            layout.local_verdict_json(mode, iid),
        ]
        + shown_streams(prove, layout.tap_dir(mode, iid))
        + agent_files(layout, mode, iid, agent)
    )


def task_facts(task: AnyTask) -> dict[str, Any]:
    """The task's fields a page shows (also part of the page's inputs)."""
    return {
        "instance_id": task.instance_id,
        "repo": task.repo,
        "test_repo": task.test_repo,
        "base_commit": task.base_commit,
        "fix_commit": task.fix_commit,
        "test_commit": task.test_commit,
        "test_files": list(task.test_files),
        "configure_flags": list(task.configure_flags),
        "area": task.area,
        "fix_date": task.fix_date,
        "problem_statement": task.problem_statement,
    }


def task_context(layout: Layout, mode: str, task: AnyTask, modes: Sequence[str]) -> View:
    """What templates/site/task.html.j2 shows of (mode, task); `modes`: the run's modes (links
    to the same task in each)."""
    iid = task.instance_id
    page = layout.site_page(mode, iid)
    grade = read_record(layout.grade_json(mode, iid))
    prove = read_record(layout.prove_json(mode, iid))
    agent = read_record(layout.agent_json(mode, iid))
    tap_dir = layout.tap_dir(mode, iid)
    streams = {
        name: read_head(path, 1 << 20)[0] for name, path in prove_streams(prove, tap_dir).items()
    }
    patch_path = layout.model_patch(mode, iid)
    patch = (
        patch_path.read_text(encoding="utf-8", errors="replace") if patch_path.exists() else None
    )
    gold = None if mode == "gold" else gold_patch(layout, task)
    return {
        "run": layout.run,
        "mode": mode,
        "task": task_facts(task),
        "root": link(layout.site_dir, page) + "/",
        "modes": [
            {"name": m, "href": link(layout.site_page(m, iid), page), "current": m == mode}
            for m in modes
        ],
        "index": link(layout.site_index, page),
        "results_dir": link(layout.task_dir(mode, iid), page) + "/",
        "grade_href": link(layout.grade_json(mode, iid), page) if grade else None,
        "verdict": verdict(grade, streams, agent),
        "local_verdict": local_verdict_view(
            read_record(layout.local_verdict_json(mode, iid)),
            layout.local_verdict_log(mode, iid),
            page,
        ),
        "local_verdict_href": (
            link(layout.local_verdict_json(mode, iid), page)
            if layout.local_verdict_json(mode, iid).exists()
            else None
        ),
        "patch": diff_view(patch, diff_files(gold)),
        "patch_json": read_record(layout.patch_json(mode, iid)),
        "patch_href": link(patch_path, page) if patch is not None else None,
        "gold": diff_view(gold, diff_files(patch)),
        "build": build_view(
            read_record(layout.build_json(mode, iid)), layout.build_log(mode, iid), page
        ),
        "prove": prove_view(prove, tap_dir, page),
        "agent": agent_view(layout, mode, iid, agent, page),
    }
