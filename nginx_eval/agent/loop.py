"""A loop phase (modes.toml: ``loop = {...}``): a fresh call of the phase's command per
iteration (never one continuing a session), until the workspace's ``marker_file`` holds a line
``marker``, at most ``max`` iterations, or ``no_progress`` iterations in a row that changed
nothing, or the phase's time is spent.

Memory passes through files and the prompt: each iteration's prompt gets its number
(``{{ iteration }}``), the text the previous call ended with (``{{ previous_output }}``), the
commit message it wrote (``{{ previous_message }}``), the harness's feedback on it
(``{{ feedback }}``: no commit message written, the call failed) and the file to write this
iteration's message to (``{{ message_file }}``). After each call the harness commits the
workspace (``git add -A``, ``git commit -F`` with that file, or a message of its own when the
agent wrote none; nothing when nothing changed). The agents' scratch directory ``.tmp/`` is a
harness file (workspace/stage.py: excluded from commits and from the patch), as is every other
one: the patch is still the workspace's diff from the base commit (patch/stage.py).

The attempt's ``loop`` record (core/records.py: LoopRecord): the phase, the iterations run, how
the loop ended (LoopEnd), the commits made, whether the marker was written. The phase's status:
completed on the marker; failed at the limit or without progress; timeout when its time ran
out; a call that failed ends the loop with the call's status.
"""

import subprocess
import time
from pathlib import Path

from ..core.outcomes import COMPLETED, FAILED, TIMEOUT
from ..core.records import LoopEnd, LoopRecord
from ..run.modes import Loop, Phase
from . import phases, prompts

GIT = ["git", "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgsign=false"]


def git(ws: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(GIT + list(args), cwd=ws, capture_output=True, text=True, check=False)


def commit(ws: Path, message: str, message_file: Path) -> str | None:
    """The commit of everything the iteration changed (None when nothing did)."""
    git(ws, "add", "-A")
    if git(ws, "diff", "--cached", "--quiet").returncode == 0:
        return None
    message_file.parent.mkdir(parents=True, exist_ok=True)
    message_file.write_text(message if message.strip() else "(empty message)\n", encoding="utf-8")
    done = git(ws, "commit", "-q", "--no-verify", "-F", str(message_file))
    if done.returncode != 0:
        return None
    return git(ws, "rev-parse", "HEAD").stdout.strip() or None


def marker_written(ws: Path, spec: Loop) -> bool:
    path = ws / spec.marker_file
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return False
    return any(line.strip() == spec.marker for line in lines)


def run_loop(
    run: phases.PhaseRunner, i: int, phase: Phase, prompt: str, state: phases.Attempt
) -> tuple[str, str]:
    """The loop (module docstring); its record in state.loop; (status, reason)."""
    assert phase.loop is not None
    spec = phase.loop
    limit = phases.phase_timeout(run.mode, phase, state.started)
    deadline = time.monotonic() + limit
    record: LoopRecord = {
        "phase": phase.name,
        "iterations": 0,
        "ended": LoopEnd.LIMIT,
        "commits": 0,
        "marker": False,
        "max": spec.max,
    }
    state.loop = record
    values = {"previous_output": "", "previous_message": "", "feedback": ""}
    quiet = 0
    status, reason = COMPLETED, ""
    for n in range(1, spec.max + 1):
        left = deadline - time.monotonic()
        if left <= 1:
            record["ended"] = LoopEnd.TIME
            status, reason = TIMEOUT, f"the loop's {limit:g} s ran out after {n - 1} iterations"
            break
        message_file = spec.message_file.replace("{iteration}", str(n))
        (run.ws / message_file).unlink(missing_ok=True)
        text = prompts.fill(
            prompt,
            state.artifacts,
            dict(values, iteration=str(n), message_file=message_file),
        )
        record["iterations"] = n
        status, reason = phases.run_one(
            run, i, phase, text, state, left, stem=f"{i}-{phase.name}-{n}"
        )
        call = state.phases[-1]
        call["iteration"] = n
        if status == TIMEOUT:
            record["ended"] = LoopEnd.TIME
            break
        if status != COMPLETED:
            record["ended"] = LoopEnd.ERROR
            return status, f"iteration {n}: {reason}"
        message_path = run.ws / message_file
        message = message_path.read_text(errors="replace") if message_path.is_file() else ""
        feedback = []
        if not message.strip():
            feedback.append(
                f"Iteration {n} wrote no commit message to {message_file}; the harness "
                f"committed its changes with a message of its own. Write the message this time."
            )
            message = f"iteration {n} of {phase.name} (no message written by the agent)\n"
        sha = commit(run.ws, message, run.logs / f"{i}-{phase.name}-{n}.commit-message.txt")
        call["commit"] = sha
        record["commits"] += 1 if sha else 0
        quiet = 0 if sha else quiet + 1
        if marker_written(run.ws, spec):
            record["ended"], record["marker"] = LoopEnd.MARKER, True
            status, reason = COMPLETED, ""
            break
        if not sha:
            feedback.append(f"Iteration {n} changed nothing.")
        values = {
            "previous_output": state.artifacts.get(phase.name, ""),
            "previous_message": message,
            "feedback": " ".join(feedback),
        }
        if quiet >= spec.no_progress:
            record["ended"] = LoopEnd.NO_PROGRESS
            status = FAILED
            reason = f"{quiet} iterations in a row changed nothing, and {spec.marker_file} " + (
                f"does not hold the line {spec.marker!r}"
            )
            break
    else:
        status = FAILED
        reason = f"{spec.max} iterations, and {spec.marker_file} does not hold {spec.marker!r}"
    record["marker"] = marker_written(run.ws, spec) if run.ws.is_dir() else False
    return status, reason
