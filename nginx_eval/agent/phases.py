"""How an attempt's phases are sequenced (modes.toml's header): one after another; a group's at
the same time on the same workspace; a loop phase's fresh calls (loop.py); a phase's fallback
when it fails for a reason of its own; a phase's time as a share of the mode's.

Artifacts: each phase's output, named by the phase: the newest file its ``output`` glob matches
in the workspace, else the text its program's result ended with. A later phase's prompt includes
one as ``{{ artifacts.<phase> }}``. Prompts are rendered before the run (their text is an agent
input, agent/stage.py: agent_inputs), so what only the run knows (artifacts, a loop's iteration
and its previous output) is rendered as a mark and put in as the phase starts (agent/prompts.py:
fill). Each artifact is also kept in
``agent/artifacts/<phase>.md`` and named by its phase record's ``artifact``.

A phase record (core/records.py: AgentPhase) gains ``program``, ``fallback`` (this record is
the fallback's run), ``replaced_by`` (on a record whose phase failed and whose fallback ran),
``group``, ``started``/``ended`` (seconds since the attempt began) and, in a loop, ``iteration``
and ``commit``.
"""

import glob
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ..core import jsonio, limits
from ..core.outcomes import COMPLETED, ERROR, FAILED, INFRA_ERROR
from ..core.records import AgentPhase, Flag, LoopRecord
from ..run.modes import MIN_SHARE_SECONDS, AgentMode, Phase
from .programs import registry
from .programs.base import AUTH, Models, Program
from .programs.claude import CLAUDE
from .prompts import fill

# A phase that ends so is the program's doing, not the task's: its fallback runs (a timeout is
# the task's; a 401 of a program whose fallback is another's need not stop the run).
FALLBACK_STATUSES = (INFRA_ERROR, AUTH, ERROR, FAILED)
# What of a program's printed output is an artifact when the harness cannot read its result.
OUTPUT_CHARS = 20000


@dataclass
class Attempt:
    """An attempt's state: what its phases leave as they run (AgentRun.run_phases makes it,
    run_all fills it), then what AgentRun.attempt adds; agent/stage.py's agent_record makes
    agent.json of the attempts."""

    status: str = COMPLETED  # agent.json's status, or AUTH (programs/base.py: the run stops)
    error: str = ""  # "phase <name>: <reason>", "" while every phase completes
    phases: list[AgentPhase] = field(default_factory=list)  # the records, in the order run
    sessions: dict[str, Models] = field(default_factory=dict)  # {session: its models so far}
    session: str | None = None  # the last phase's session: the one a --continue continues
    # phase records with their transcript entries and status, for trajectory.md
    rendered: list[dict[str, Any]] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)  # {phase name: its status}
    artifacts: dict[str, str] = field(default_factory=dict)  # {phase name: its artifact}
    started: float = field(default_factory=time.monotonic)  # for the phases' times
    started_at: float = field(default_factory=time.time)  # the same moment by the clock
    # (label, hint) of the program whose credentials were refused (status AUTH)
    credentials: tuple[str, str] | None = None
    loop: LoopRecord | None = None  # loop.py's record, when a loop phase ran
    calls: list[dict[str, Any]] = field(default_factory=list)  # the metering proxy's records
    trajectory: str | None = None  # "agent/trajectory.md", None without Claude Code's
    atif: str | None = None  # "agent/trajectory.atif.json"
    logs: str = ""  # its logs' folder, relative to the task's results


class GroupThread(threading.local):
    """While a group runs (run_group): each member thread's own values."""

    slot_held: bool = False  # the group holds the agent slot for its members (holds_slot)
    member: int | None = None  # 1, 2, ...: its token file's suffix (token_file)
    env: dict[str, str] | None = None  # its phase's environment (agent/stage.py: phase_env)


class PhaseRunner(Protocol):
    """What sequencing the phases asks of an agent run (agent/stage.py: AgentRun)."""

    mode: AgentMode
    prompts: Sequence[str]
    env: dict[str, str]  # the attempt's environment of a phase's command
    out: Path  # agent.json: its folder is the task's results
    ws: Path
    logs: Path
    token_file: Path
    parallel: GroupThread | None  # set while a group runs

    def run_phase(
        self,
        i: int,
        phase: Phase,
        prompt: str,
        state: "Attempt",
        timeout: float | None = None,
        stem: str | None = None,
    ) -> tuple[str, str]: ...

    def workspace_gone(self, phase: Phase, state: "Attempt") -> "Attempt": ...

    def sync_login(self) -> None: ...


def phase_timeout(mode: AgentMode, phase: Phase, started: float) -> float:
    """The phase's time limit: its own, or its share of the mode's (at least
    MIN_SHARE_SECONDS), "rest" being what the phases before it left."""
    if phase.share is None:
        return phase.timeout
    if phase.share == "rest":
        left = mode.timeout - (time.monotonic() - started)
        return max(MIN_SHARE_SECONDS, left)
    return max(MIN_SHARE_SECONDS, mode.timeout * float(phase.share))


def result_text(run: PhaseRunner, record: Mapping[str, Any], phase: Phase) -> str:
    """The whole text the phase's program ended with (the record keeps its first characters)."""
    reader = registry.running(phase, phase.command, run.env) or CLAUDE
    try:
        text = "\n".join(
            (run.out.parent / record[s]).read_text(errors="replace") for s in reader.result_streams
        )
    except (OSError, KeyError):
        return ""
    result = reader.parse_result(text)
    if result is None:
        # Another agent (AGENT, a script): what it printed, its last part if long.
        return text.strip()[-OUTPUT_CHARS:]
    return str(result.get("result") or "") if not result.get("is_error") else ""


def artifact_of(run: PhaseRunner, phase: Phase, record: AgentPhase) -> str:
    """The phase's artifact (module docstring), kept in agent/artifacts/<phase>.md."""
    text = ""
    if phase.output:
        found = [p for p in glob.glob(str(run.ws / phase.output)) if os.path.isfile(p)]
        if found:
            text = Path(max(found, key=os.path.getmtime)).read_text(errors="replace")
            record["artifact_source"] = os.path.relpath(max(found, key=os.path.getmtime), run.ws)
    if not text:
        text = result_text(run, record, phase)
        record["artifact_source"] = "result" if text else None
    path = run.logs / "artifacts" / f"{phase.name}.md"
    jsonio.write_text(path, text)
    record["artifact"] = str(path.relative_to(run.out.parent))
    return text


def program_name(run: PhaseRunner, phase: Phase) -> str | None:
    """The program the phase's command ran (None: another agent's, e.g. AGENT's)."""
    program = registry.running(phase, phase.command, run.env)
    return program.name if program else None


def run_one(
    run: PhaseRunner,
    i: int,
    phase: Phase,
    prompt: str,
    state: Attempt,
    timeout: float,
    stem: str | None = None,
) -> tuple[str, str]:
    """The phase once, then its fallback if it failed for a reason of its own; (status,
    reason) of the one that ran last."""
    start = time.monotonic() - state.started
    status, reason = run.run_phase(i, phase, prompt, state, timeout=timeout, stem=stem)
    record = state.phases[-1]
    record["program"] = program_name(run, phase)
    record["started"] = round(start, 3)
    record["ended"] = round(time.monotonic() - state.started, 3)
    if status in FALLBACK_STATUSES and phase.fallback is not None:
        fallback = phase.fallback
        record["replaced_by"] = f"{fallback.program} {fallback.model or run.mode.model}".strip()
        state.credentials = None
        start = time.monotonic() - state.started
        left = max(1.0, timeout - (time.monotonic() - state.started - record["started"]))
        status, reason = run.run_phase(
            i, fallback, prompt, state, timeout=left, stem=f"{stem or f'{i}-{phase.name}'}-fallback"
        )
        last = state.phases[-1]
        last["program"] = program_name(run, fallback)
        last["fallback"] = True
        last["started"] = round(start, 3)
        last["ended"] = round(time.monotonic() - state.started, 3)
        phase = fallback
    if status == COMPLETED:
        state.artifacts[phase.name] = artifact_of(run, phase, state.phases[-1])
    return status, reason


def run_group(
    run: PhaseRunner, members: list[tuple[int, Phase, str]], state: Attempt
) -> tuple[str, str, str]:
    """A group's phases at once on the workspace as it is, one agent slot for all of them;
    their records in the order of modes.toml; the first failure's (status, reason)."""
    # Artifacts of earlier phases only: a member never waits for another's. Their statuses
    # are the attempt's own dict, shared.
    before = dict(state.artifacts)
    subs = [
        replace(
            state,
            phases=[],
            rendered=[],
            flags=[],
            sessions=dict(state.sessions),
            artifacts=dict(before),
        )
        for _ in members
    ]
    with limits.slot("agent"):
        local = run.parallel = GroupThread()
        try:

            def member(k: int) -> tuple[str, str]:
                local.slot_held, local.member = True, k + 1
                i, phase, prompt = members[k]
                text = fill(prompt, before)
                return run_one(
                    run, i, phase, text, subs[k], phase_timeout(run.mode, phase, state.started)
                )

            with ThreadPoolExecutor(max_workers=len(members)) as pool:
                outcomes = list(pool.map(member, range(len(members))))
        finally:
            run.parallel = None
    for (_, phase, _), sub in zip(members, subs, strict=True):
        state.phases += sub.phases
        state.rendered += sub.rendered
        state.flags += sub.flags
        state.sessions.update(sub.sessions)
        state.artifacts.update({k: v for k, v in sub.artifacts.items() if k not in before})
        if sub.credentials:
            state.credentials = sub.credentials
        for record in sub.phases:
            record["group"] = phase.group
    for (_, phase, _), (status, reason) in zip(members, outcomes, strict=True):
        if status != COMPLETED:
            return status, reason, phase.name
    return COMPLETED, "", ""


def own_transcripts(
    sizes: Mapping[str, int], run: PhaseRunner, record: Mapping[str, Any], program: Program | None
) -> dict[str, int]:
    """Of the transcripts that grew while phases ran at once, those of this phase's session
    (their file names carry the session id: Claude Code's <session>.jsonl, Codex's
    rollout-...-<thread>.jsonl); all of them when its session is not known."""
    streams = program.result_streams if program else ("stdout",)
    try:
        text = "\n".join((run.out.parent / record[s]).read_text(errors="replace") for s in streams)
    except (OSError, KeyError):
        return dict(sizes)
    session = (program.parse_result(text) or {}).get("session_id") if program else None
    mine = {p: n for p, n in sizes.items() if session and str(session) in Path(p).name}
    return mine or dict(sizes)


def token_file(run: PhaseRunner) -> Path:
    """Where a phase's command keeps its token (core/procs.py: claiming one kills what holds it):
    the run's, or one of each group member's own beside it."""
    member = run.parallel.member if run.parallel is not None else None
    return Path(f"{run.token_file}-{member}") if member else Path(run.token_file)


def token_files(run: PhaseRunner) -> list[Path]:
    """The run's token file and its group members' (what a killed doit may have left running)."""
    return [Path(run.token_file)] + sorted(
        Path(run.token_file).parent.glob(f"{Path(run.token_file).name}-*")
    )


def holds_slot(run: PhaseRunner) -> AbstractContextManager[object]:
    """The agent slot a phase takes to run: none inside a group, whose slot is held for all
    its members (a machine with one agent slot would otherwise run them one by one)."""
    if run.parallel is not None and run.parallel.slot_held:
        return nullcontext()
    return limits.slot("agent")


def units(mode: AgentMode, prompts: Sequence[str]) -> list[list[tuple[int, Phase, str]]]:
    """The mode's phases (1-based index, phase, prompt) in the order they run: a group's as
    one unit."""
    out: list[list[tuple[int, Phase, str]]] = []
    for i, (phase, prompt) in enumerate(zip(mode.phases, prompts, strict=True), 1):
        if out and phase.group and out[-1][0][1].group == phase.group:
            out[-1].append((i, phase, prompt))
        else:
            out.append([(i, phase, prompt)])
    return out


def run_all(run: PhaseRunner, state: Attempt) -> Attempt:
    """Every unit of the mode (units) in turn, until one fails; state as AgentRun.run_phases
    makes it, with ``loop`` (loop.py's record of a loop phase) when one ran."""
    from . import loop  # loop.py uses this module's run_one

    for unit in units(run.mode, run.prompts):
        if not run.ws.is_dir():
            return run.workspace_gone(unit[0][1], state)
        i, phase, prompt = unit[0]
        if len(unit) > 1:
            status, reason, name = run_group(run, unit, state)
        elif phase.loop is not None:
            status, reason = loop.run_loop(run, i, phase, prompt, state)
            name = phase.name
        else:
            timeout = phase_timeout(run.mode, phase, state.started)
            status, reason = run_one(run, i, phase, fill(prompt, state.artifacts), state, timeout)
            name = phase.name
        run.sync_login()
        if status != COMPLETED:
            state.status, state.error = status, f"phase {name}: {reason}"
            break
    return state
