"""Stage 3, agent: run a mode's phases in the workspace, under time limits. Output
``agent.json`` (core/records.py: AgentJson) and ``agent/`` (logs, prompts, transcripts, the
metering proxy's calls): ``{"inputs", "mode", "instance_id", "status", "error", "attempts":
[...], "agent_version", "wall_seconds", "phases": [{"name", "command", "command_template",
"model", "exit_code", "timed_out", ..., "cost_usd", "tokens", "transcript", "blocked",
"sandbox_log"}], "cost_usd", "tokens", "cost_source", "metered", "self_reported", "trajectory",
"atif", "isolation", "toolchain", "web_tools", "flags", "contaminated", "tests_tree"}``

What a program's outputs mean (status, cost, sessions, transcripts, slash commands) is its
module's in agent/programs/ (the phase's ``program``, Claude Code by default); what holds an
agent back (refused credentials, the budget, the backoff) is agent/gate.py's. A run that ends
in ``infra_error`` is tried again in a fresh workspace up to ``agent_retries`` times; refused
credentials (401/403) write no agent.json and stop the run with one line naming the program;
with ``max_cost`` spent an agent is ``not_run``. ``infra_error`` and ``not_run`` records are not
finished: the next ``doit run`` tries again. A failed phase is one line on stderr when it
happens (docs/agents.md#when-an-agent-fails). Each attempt's programs get their homes afresh in
Layout.agent_home (Claude Code's CLAUDE_CONFIG_DIR is that directory; the others' are in it).

An agent run costs money, so it is repeated only when its inputs change (agent_inputs: the mode's
command, prompt, model and ``tests`` tree, the problem statement, the values of the environment
variables its command names, the slash commands, the agent home's files, the web tools closed,
the program's version) or after ``doit forget`` (doitext/backend.py). The inputs digest is
stored in agent.json; an action that finds a finished agent.json of the same inputs returns at
once, even when doit's database was lost.
"""

import base64
import contextlib
import datetime
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ..cluster import executor
from ..cluster.node import UnitLost, on_node
from ..core import gitcmd, inputs, jsonio, rootfs, stamps
from ..core.errors import UserError, failing_on_user_error
from ..core.layout import Layout
from ..core.outcomes import (
    COMPLETED,
    ERROR,
    FAILED,
    INFRA_ERROR,
    NOT_RUN,
    is_agent_status,
    is_unfinished,
)
from ..core.procs import Outcome, kill_leftovers, run_limited
from ..core.records import (
    AgentAttempt,
    AgentJson,
    AgentPhase,
    AgentTestsTree,
    CallTokens,
    Flag,
    LeftOut,
    MeteredRun,
    RemoteDiff,
    RemoteDiffJson,
    SkippedFile,
    StandinsView,
    SweEnvView,
    TestsTree,
    Tokens,
    write_record,
)
from ..core.stamps import TaskDict
from ..core.tasknames import AGENT, WORKSPACE, task_name, unit_name
from ..core.trees import remove_tree
from ..doitext.backend import consume_forgotten, forgotten
from ..meter import pricing
from ..meter import summary as metered
from ..meter.proxy import MeterProxy
from ..run.benchmark import AnyTask, gold_patch
from ..run.commandline import command_program, render_command, with_program_option
from ..run.modes import AgentMode, Phase
from ..suite import stage as suite
from ..transcript import atif
from ..transcript import files as ct
from ..workspace.stage import (
    ISSUE_FILE,
    hand_to_agent,
    mark_agent_started,
    release_workspace,
    workspace_inputs,
)
from . import attempts as attempts_module
from . import phases, sandbox, stubs, swe_view, trajectory, wire
from .gate import (
    CredentialsRefused,
    backoff_seconds,
    check_not_stopped,
    clear_stop,
    keep_attempt_logs,
    over_budget,
    stop_the_run,
    wait_interruptibly,
)
from .phases import Attempt
from .programs import base as program_base
from .programs import registry
from .programs.base import AUTH, Program, session_problem
from .programs.claude import CLAUDE
from .prompts import missing_prompt, refuse_missing_prompt, rendered_prompts, with_tests_dir

if TYPE_CHECKING:
    from ..run.context import StageContext

# patch/stage.py's workspace_diff (bare clone, workspace, base commit, task kind): (patch bytes,
# skipped new files, left-out paths); passed in, since it is a later stage's rule.
WorkspaceDiff = Callable[
    [str | Path, str | Path, str, str], tuple[bytes, list[SkippedFile], list[LeftOut]]
]


class UnitShown(TypedDict):
    """agent_unit's keyword arguments beside the workspace: the tests tree, a SWE-bench task's
    environment as the sandbox shows it and the servers its tests reach."""

    tests_tree: "TestsTree | None"
    swe_env: SweEnvView | None
    services: "Services | None"


class UnitAnswer(TypedDict):
    """What agent_unit answers (from a node too: executor.py)."""

    record: AgentJson | None  # None: the credentials were refused
    refused: list[str] | None  # [unit, reason, program label, fix]
    diff: RemoteDiff | None  # on a node only


# swebench/services.sandbox_standins, through the context: (layout, task, directory, workspace,
# log) -> the stand-ins for the internet the task's tests reach, made for the attempt, or None.
Services = Callable[[Layout, Any, Path, Path, Path], AbstractContextManager[StandinsView | None]]


ENV_REFERENCE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def referenced_environment(mode: AgentMode) -> dict[str, str | None]:
    """Values of the environment variables the mode's commands use ($AGENT, ${AGENT:-...}): a
    command that means another agent under another AGENT must not reuse the old agent's runs."""
    names = sorted({n for p in mode.every_phase for n in ENV_REFERENCE.findall(p.command)})
    env = dict(os.environ, **dict(mode.env))
    return {n: env.get(n) for n in names}


def web_tools_for(mode: AgentMode) -> bool:
    """Whether the mode's programs get their web tools: with ``web_tools = true``, or
    unisolated (where nothing else is closed either)."""
    return mode.web_tools or mode.isolation == "none"


def phase_command(mode: AgentMode, phase: Phase, environ: dict) -> tuple[str, bool | None]:
    """(the command a phase runs, whether its program's web tools are open to it; None: the
    command does not run the program the phase names, e.g. AGENT's). A program that closes
    them on its command line (Claude Code's --disallowedTools=WebSearch,WebFetch) gets its
    option after its program word, where the mode closes them; AGENT's own command line is
    left as it is (commandline.with_program_option). The others close them in the home the
    harness writes for them (programs/*.py: prepare_home)."""
    program = registry.running(phase, phase.command, environ)
    if program is None:
        return phase.command, None
    option = program.web_option()
    if web_tools_for(mode):
        return phase.command, True
    if option is None:
        return phase.command, False
    closed = with_program_option(phase.command, environ, option)
    return (closed, False) if closed else (phase.command, True)


def web_tools_open(mode: AgentMode, environ: dict) -> bool | None:
    """agent.json's web_tools: whether any phase's program has its web tools (None: no phase
    runs the program it names)."""
    known = [
        w for w in (phase_command(mode, p, environ)[1] for p in mode.every_phase) if w is not None
    ]
    return any(known) if known else None


def agent_version(layout: Layout, mode: AgentMode) -> str | None:
    """The `--version` of the programs the mode's phases start, or None."""
    env = dict(os.environ, **dict(mode.env))
    versions = []
    for p in mode.every_phase:
        program = registry.running(p, p.command, env)
        if program:
            path = program_base.resolve_program(command_program(p.command, env), env)
            versions.append(program.version(path, env, layout.agent_versions))
    return ", ".join(dict.fromkeys(v for v in versions if v)) or None


# agent_inputs' optional fields at the value that leaves them out (core/inputs.py): no sandbox
# (isolation = "none"), no Claude Code phase with its web tools closed, no other program, no
# program that answers `--version`, no tests tree (a mode without `tests`).
AGENT_INPUT_DEFAULTS: dict[str, Any] = {
    "sandbox": None,
    "no_web_tools": {"option": CLAUDE.web_option(), "phases": []},
    "programs": {},
    "agent_version": None,
    "tests_tree": None,
}


def mode_inputs(layout: Layout, mode: AgentMode) -> dict[str, Any]:
    """The part of agent_inputs that is the mode's, the same for each of its tasks (asked once
    per mode: resolving its programs for each task is a cost of every doit command)."""
    env = dict(os.environ, **dict(mode.env))
    fields = {
        "mode": mode.fingerprint(),
        "environment": referenced_environment(mode),
        "sandbox": sandbox.settings(mode),
        # An input, though the command template is unchanged: closing the web tools changes
        # what the agent can do, so the isolated Claude Code runs made with them open run once
        # more.
        "no_web_tools": {
            "option": CLAUDE.web_option(),
            "phases": [
                p.name
                for p in mode.every_phase
                if phase_command(mode, p, env)[1] is False and p.program == CLAUDE.name
            ],
        },
        "programs": {
            p.name: {"program": p.program, "web_tools": phase_command(mode, p, env)[1]}
            for p in mode.every_phase
            if p.program != CLAUDE.name
        },
        "agent_version": agent_version(layout, mode),
    }
    return inputs.canonical(fields, AGENT_INPUT_DEFAULTS)


def agent_inputs(
    layout: Layout,
    mode: AgentMode,
    task: AnyTask,
    prompts: Sequence[str],
    of_mode: Mapping[str, Any] | None = None,
    tests_tree: Mapping[str, Any] | None = None,
) -> str | None:
    """The digest of an agent run's inputs, or None while a mode with `tests` cannot know its
    tree (suite.as_of: the clones are not there yet); of_mode: mode_inputs(layout, mode), and
    tests_tree: suite.as_of of the task, if known."""
    tree = None
    if mode.tests:
        tree = tests_tree or suite.as_of(layout, task)
        if tree is None:
            return None
    fields = dict(
        of_mode or mode_inputs(layout, mode),
        prompts=prompts,
        workspace=workspace_inputs(task),
        tests_tree=None if tree is None else tree["commit"],
    )
    return inputs.digest(fields, AGENT_INPUT_DEFAULTS)


def is_finished(record: Mapping[str, Any] | None) -> bool:
    """A record that says the run is over (not an infra error or a run the budget held back)."""
    return record is not None and bool(record) and not is_unfinished(record.get("status"))


def agent_finished(
    layout: Layout, mode: AgentMode, task: AnyTask, agent_task_name: str, inputs: str | None = None
) -> bool:
    """The agent run of (mode, task) is finished for its current inputs (its agent.json was made
    from them) and not forgotten: it will not run again, so it needs no workspace (`doit clean`
    removed it; patch.write_patch keeps the patch taken from it). inputs: agent_inputs of the
    unit, when the caller has them."""
    if forgotten(layout, agent_task_name):
        return False
    if missing_prompt(layout.templates_dir, mode, task):
        return False  # it cannot run; the preflight says why
    if inputs is None:
        inputs = agent_inputs(
            layout, mode, task, rendered_prompts(layout.templates_dir, mode, task)
        )
    return inputs is not None and is_finished(
        stamps.made_from(layout.agent_json(mode.name, task.instance_id), inputs)
    )


def say(mode: AgentMode, task: AnyTask, what: str, reason: str, log: Path | None = None) -> None:
    """The console line of an agent that failed or did not run, printed when it happens."""
    where = f" (log: {log})" if log else ""
    print(
        f"nginx-eval: agent {mode.name}/{task.instance_id} {what}: {reason}{where}",
        file=sys.stderr,
        flush=True,
    )


class AgentRun:
    """One agent run of (mode, task): its attempts, each in a fresh workspace, phase by phase."""

    def __init__(
        self,
        layout: Layout,
        mode: AgentMode,
        task: AnyTask,
        prompts: Sequence[str],
        tests_tree: TestsTree | None = None,
        swe_env: SweEnvView | None = None,
        services: "Services | None" = None,
    ) -> None:
        self.layout, self.mode, self.task, self.prompts = layout, mode, task, prompts
        # agent.json's: the tree, and a note of each attempt that extracted it again
        self.tests_tree: AgentTestsTree | None = (
            {**tests_tree, "notes": []} if tests_tree is not None else None
        )
        # A SWE-bench task's environment, shown in each isolated phase's sandbox (swe_view.py),
        # and the servers its tests reach over the internet, on this machine's loopback.
        self.swe_env = swe_env if sandbox.settings(mode) else None
        self.services = services if self.swe_env else None
        self.standins: StandinsView | None = None
        self.tests_dir: Path | None = None
        self.out = layout.agent_json(mode.name, task.instance_id)
        self.ws = layout.workspace(mode.name, task.instance_id)
        self.logs = layout.agent_logs(mode.name, task.instance_id)
        # The user's environment says where their credentials are; the agent's says its home.
        self.user_env = dict(os.environ, **dict(mode.env))
        self.config = layout.agent_home(mode.name, task.instance_id)
        # Every program's home variable, so that one started by another (codex from Claude
        # Code's Bash tool) finds the harness's home too, never the operator's.
        self.base_env = dict(self.user_env, NGINX_EVAL_INSTANCE=task.instance_id)
        for program in registry.programs():
            self.base_env.update(program.home_environment(self.config))
        # gh and git's remote commands stubbed (stubs.py), first on every phase's PATH.
        self.base_env["PATH"] = os.pathsep.join(
            [str(stubs.stub_dir(self.config)), self.base_env.get("PATH", os.defpath)]
        )
        # Every program's base URL names the attempt's proxy (start_meter): a program that
        # another starts (Codex from Claude Code's Bash) is counted too.
        self.env = dict(self.base_env)
        self.programs = list(registry.programs())
        self.meter: MeterProxy | None = None
        self.endpoint_env: dict[str, str] = {}
        self.attempts_made = 0
        self.box = sandbox.settings(mode)
        self.evidence: attempts_module.FixEvidence | None = None
        self.logins: dict[str, bytes | None] = {}
        self.token_file = layout.running_token(mode.name, task.instance_id, "agent")
        # While a group runs: its threads' state (agent/phases.py).
        self.parallel: phases.GroupThread | None = None

    def attempt(self) -> Attempt:
        """Every phase once in a fresh workspace: its status, error, phases, trajectory, atif
        and calls. The attempt's model calls go through a metering proxy of its own
        (start_meter), whose records become each phase's "metered" and the run's cost and
        tokens (cost_and_tokens)."""
        # An agent of a killed doit may still be running in this workspace: stop it before the
        # workspace is recreated under it.
        for token_file in phases.token_files(self):
            kill_leftovers(token_file)
        self.ws, self.tests_dir, notes = hand_to_agent(
            self.layout, self.mode, self.task, self.tests_tree
        )
        swe_view.put_testbed_files(self.swe_env, self.ws)
        if self.tests_tree:
            self.tests_tree = {**self.tests_tree, "notes": self.tests_tree["notes"] + notes}
        self.logs.mkdir(parents=True, exist_ok=True)
        meter = self.start_meter()
        remove_tree(self.config)
        self.config.mkdir(parents=True)
        self.config.chmod(0o700)  # it holds the operator's credentials
        # The homes are written once the proxy listens: a program whose home names its endpoint
        # (Codex's config.toml base_url) is given the proxy's, as the variables are.
        endpoints = dict(self.user_env, **self.endpoint_env)
        try:
            for program in self.programs:  # Claude Code first: its home is self.config
                self.logins[program.name] = program.prepare_home(
                    self.config, self.mode.home_files, endpoints, web_tools_for(self.mode)
                )
            stubs.write_stubs(self.config, self.user_env)  # after the homes: Claude Code's is this
            with self.running_services():
                state = self.run_phases()
        finally:
            meter.stop()
            # Its transcripts are in the logs by now; the home holds a copy of the login.
            self.sync_login()
            remove_tree(self.config)
        state.calls = list(meter.calls)
        for record in state.phases:
            record["metered"] = metered.totals(
                c for c in state.calls if c.get("phase") == record["name"]
            )
        state.trajectory = self.write_trajectory(state.rendered)
        state.atif = self.write_atif(state)
        return state

    @contextlib.contextmanager
    def running_services(self) -> Iterator[None]:
        """The task's stand-ins for the internet (self.services) for the attempt: every phase's
        sandbox runs them (swe_view.view_lines), as a local verdict does."""
        if self.services is None:
            yield
            return
        directory = self.logs / "standins"
        with self.services(
            self.layout, self.task, directory, self.ws, self.logs / "services.log"
        ) as standins:
            self.standins = standins
            try:
                yield
            finally:
                self.standins = None

    def start_meter(self) -> MeterProxy:
        """The attempt's metering proxy (meter/proxy.py), started, every program's base URL
        pointed at it; the upstream of each API is the operator's (their environment and the
        mode's env), the first program's API the default."""
        self.attempts_made += 1
        upstreams: dict[str, str] = {}
        for program in self.programs:
            upstreams.setdefault(program.api, program.upstream(self.user_env))
        calls = self.layout.agent_calls(self.mode.name, self.task.instance_id)
        bodies = self.layout.agent_call_bodies(self.mode.name, self.task.instance_id)
        for path in (calls, bodies):  # a killed run's, never appended to
            path.unlink(missing_ok=True)
        self.meter = MeterProxy(
            upstreams,
            {
                "run": self.layout.run,
                "mode": self.mode.name,
                "task": self.task.instance_id,
                "attempt": self.attempts_made,
            },
            calls,
            bodies,
            environ=self.user_env,
        ).start()
        self.endpoint_env = {}
        for program in self.programs:
            self.endpoint_env.update(program.endpoint_environment(self.meter.base_url(program.api)))
        self.env = dict(self.base_env, **self.endpoint_env)
        return self.meter

    def phase_endpoints(self, name: str) -> dict[str, str]:
        """Every program's base URL with the proxy's prefix naming phase `name`
        (meter/proxy.py: PHASE_PREFIX)."""
        assert self.meter is not None
        out: dict[str, str] = {}
        for program in self.programs:
            out.update(program.endpoint_environment(self.meter.phase_base_url(program.api, name)))
        return out

    def phase_endpoint_option(self, template: str, program: Program | None, name: str) -> str:
        """`template` with its program's endpoint_option naming phase `name` after its program
        word (as it is when the program has none, or the command does not name its
        program itself: AGENT's)."""
        option = (
            program.endpoint_option(self.meter.phase_base_url(program.api, name))
            if program is not None and self.meter is not None
            else None
        )
        if option is None:
            return template
        return with_program_option(template, self.env, option) or template

    def phase_env(self) -> dict[str, str]:
        """The environment of the phase this thread runs: a group member's own, else the
        attempt's."""
        return (self.parallel.env if self.parallel is not None else None) or self.env

    def sync_login(self) -> None:
        """A login a CLI refreshed goes back to the user's (programs/claude.py)."""
        for program in registry.programs():
            self.logins[program.name] = program.sync_credentials(
                self.config, self.user_env, self.logins.get(program.name)
            )

    def run_phases(self) -> Attempt:
        """The mode's phases as agent/phases.py sequences them."""
        return phases.run_all(self, Attempt())

    def workspace_gone(self, phase: Phase, state: Attempt) -> Attempt:
        """An earlier phase deleted the workspace: nothing to run the next phase in."""
        state.status = FAILED
        state.error = f"phase {phase.name}: the workspace no longer exists"
        last = state.phases[-1]["stderr"] if state.phases else None
        say(self.mode, self.task, "failed", state.error, self.out.parent / last if last else None)
        return state

    def run_phase(
        self,
        i: int,
        phase: Phase,
        prompt: str,
        state: Attempt,
        timeout: float | None = None,
        stem: str | None = None,
    ) -> tuple[str, str]:
        """Run one phase, add its record to `state`; (status, reason). timeout: its limit
        (default its own), stem: its logs' names (default <i>-<name>)."""
        stem = stem or f"{i}-{phase.name}"
        timeout = phase.timeout if timeout is None else timeout
        prompt = with_tests_dir(prompt, self.tests_dir)
        prompt_file = self.logs / f"{stem}.prompt.md"
        prompt_file.write_text(prompt, encoding="utf-8")
        values = {
            "workspace": str(self.ws),
            "issue_file": str(self.ws / ISSUE_FILE),
            "prompt": prompt,
            "prompt_file": str(prompt_file),
            "model": phase.model or self.mode.model,
            "instance_id": self.task.instance_id,
            "log_dir": str(self.logs),
            "phase": phase.name,
            # The attempt's home (Claude Code's CLAUDE_CONFIG_DIR) holding the mode's
            # agent_home files: e.g. --plugin-dir {agent_home}/plugins loads a plugin tree.
            "agent_home": str(self.config),
        }
        template, _ = phase_command(self.mode, phase, self.env)
        record = self.phase_record(phase, template, stem, values, prompt_file)
        state.phases.append(record)
        path = program_base.resolve_program(command_program(template, self.env), self.env)
        program = registry.running(phase, template, self.env)
        slash = program.slash_command(prompt) if program else None
        undefined = program and slash and program.undefined_command(slash, self.ws, self.config)
        if undefined:
            (self.out.parent / record["stdout"]).write_bytes(b"")
            (self.out.parent / record["stderr"]).write_text(undefined + "\n", encoding="utf-8")
            say(self.mode, self.task, "failed", undefined, self.out.parent / record["stderr"])
            return ERROR, undefined
        before = program.transcript_sizes(self.config, self.ws) if program else {}
        if self.meter is not None:
            self.meter.phase = phase.name
        if self.parallel is not None:
            # Phases running at once: each names itself in its base URLs (the proxy's phase
            # prefix), so that every call is counted under the phase that made it; a program
            # whose home names its endpoint is given its phase's on its command line.
            self.parallel.env = dict(self.env, **self.phase_endpoints(phase.name))
            template = self.phase_endpoint_option(template, program, phase.name)
        command = render_command(template, self.env, values)
        outcome = self.launch(command, record, timeout, stem, path)
        after = program.transcript_sizes(self.config, self.ws) if program else {}
        if self.parallel is not None:
            # Phases running at once grow each other's transcripts: its own are named by its
            # session.
            after = phases.own_transcripts(after, self, record, program)
        lines = program.new_transcript_lines(before, after) if program else []
        status, reason = self.read_phase(
            record, outcome, lines, state, phase, slash, stem, program, timeout
        )
        state.statuses[phase.name] = status
        state.flags += self.scan(phase.name, record, ct.entries_of(lines), program)
        if status == AUTH:
            state.credentials = (program or CLAUDE).label, (program or CLAUDE).credentials_hint
        if status not in (COMPLETED, AUTH):
            say(self.mode, self.task, "failed", reason, self.out.parent / record["stderr"])
        return status, reason

    def phase_record(
        self, phase: Phase, template: str, stem: str, values: Mapping[str, str], prompt_file: Path
    ) -> AgentPhase:
        names_model = "{model}" in render_command(template, self.env, record=True)
        model = phase.model or self.mode.model
        shown = {"prompt": f'"$(cat {shlex.quote(str(prompt_file))})"'}
        relative = lambda p: str(p.relative_to(self.out.parent))
        return {
            "name": phase.name,
            "command": render_command(template, self.env, values, shown, record=True),
            "command_template": render_command(template, self.env, {"model": model}, record=True),
            "model": (model or None) if names_model else None,
            "exit_code": None,
            "timed_out": False,
            "wall_seconds": 0.0,
            "stdout": relative(self.logs / f"{stem}.stdout"),
            "stderr": relative(self.logs / f"{stem}.stderr"),
            "prompt_file": relative(prompt_file),
            **CLAUDE.result_fields(None),
            "cost_usd": None,
            "tokens": None,
            "models": {},
            "cost_source": None,
            "transcript": None,
            "blocked": None,
            "sandbox_log": None,
        }

    def launch(
        self, command: str, record: AgentPhase, timeout: float, stem: str, program: str | None
    ) -> Outcome:
        if self.box:
            outcome = self.launch_isolated(self.box, command, record, timeout, stem, program)
        else:
            with (
                open(self.out.parent / record["stdout"], "wb") as so,
                open(self.out.parent / record["stderr"], "wb") as se,
                phases.holds_slot(self),
            ):
                outcome = run_limited(
                    ["bash", "-c", command],
                    cwd=str(self.ws),
                    env=self.phase_env(),
                    timeout=timeout,
                    stdout=so,
                    stderr=se,
                    token_file=phases.token_file(self),
                )
        record["exit_code"] = outcome.exit_code
        record["timed_out"] = outcome.timed_out
        record["wall_seconds"] = outcome.seconds
        return outcome

    def launch_isolated(
        self,
        box: sandbox.Box,
        command: str,
        record: AgentPhase,
        timeout: float,
        stem: str,
        program: str | None,
    ) -> Outcome:
        """The phase in srt (sandbox.py): its settings and debug log beside its other logs, each
        refused connection in record["blocked"]."""
        settings_file = self.logs / f"{stem}.srt.json"
        log_file = self.logs / f"{stem}.sandbox.log"
        stderr_file = self.out.parent / record["stderr"]
        stderr_file.write_bytes(b"")
        log_file.write_bytes(b"")
        tmp = tempfile.mkdtemp(prefix="nginx-eval-agent-tmp-")
        support = sandbox.write_support(self.layout.sandbox_support)
        try:
            # The one model endpoint the sandbox lets through is the attempt's proxy.
            # The others' upstreams are not: every program's calls go through it.
            box = sandbox.through_proxy(box, self.meter.endpoint) if self.meter else box
            view = (
                swe_view.write_view(
                    self.logs / f"{stem}.view", self.swe_env, self.ws, self.standins
                )
                if self.swe_env
                else None
            )
            argv, env = sandbox.isolated_command(
                command,
                endpoint=box["endpoint"],
                settings=sandbox.srt_settings(
                    box,
                    workspace=self.ws,
                    writable=[self.logs, tmp],
                    hidden=sandbox.hidden_paths(self.layout),
                    environ=self.env,
                    programs=[program] if program else [],
                    support=support,
                    private=[s for p in registry.programs() for s in p.user_state(self.user_env)],
                    readable=[self.tests_dir] if self.tests_dir else [],
                ),
                settings_file=settings_file,
                stderr_file=stderr_file,
                environ=self.phase_env(),
                tmp=tmp,
                support=support,
                view_file=view,
            )
            before = sandbox.present_mount_points(self.ws)
            with (
                open(self.out.parent / record["stdout"], "wb") as so,
                sandbox.TimestampedLog(log_file) as log,
                phases.holds_slot(self),
            ):
                outcome = run_limited(
                    argv,
                    cwd=str(self.ws),
                    env=env,
                    timeout=timeout,
                    stdout=so,
                    stderr=log.fd,
                    token_file=phases.token_file(self),
                    inside_first=True,
                )
            if self.ws.is_dir():
                sandbox.remove_mount_points(self.ws, before)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        record["blocked"] = sandbox.blocked_connections(log_file.read_text(errors="replace"))
        record["sandbox_log"] = str(log_file.relative_to(self.out.parent))
        return outcome

    def fix_evidence(self) -> attempts_module.FixEvidence:
        """What would show the fix reached the agent (attempts_module.FixEvidence), once per run."""
        if self.evidence is None:
            bare = self.layout.bare_repo(self.task.repo)
            gold = gold_patch(self.task, bare)
            lines = attempts_module.fix_lines(
                gold.decode("utf-8", "replace"),
                lambda found: gitcmd.lines_in_tree(bare, self.task.base_commit, found),
            )
            self.evidence = attempts_module.FixEvidence(self.task.fix_commit, lines)
        return self.evidence

    def scan(
        self, phase: str, record: AgentPhase, entries: list[dict[str, Any]], program: Program | None
    ) -> list[Flag]:
        """The phase's flags (attempts.py): from its transcript where the harness reads its
        tool calls (Claude Code's), else from its command logs."""
        scope = attempts_module.Scope(
            self.ws,
            own=[self.logs, self.config, self.tests_dir],
            harness=sandbox.hidden_paths(self.layout) + [sandbox.local_mirror_root(self.env)],
        )
        if program and program.scans_transcript:
            flags, contamination = attempts_module.scan_transcript(
                phase, entries, scope, self.fix_evidence()
            )
            return flags + contamination
        logs = "".join(
            (self.out.parent / record[k]).read_text(errors="replace") for k in ("stdout", "stderr")
        )
        return attempts_module.scan_log(phase, logs)

    def read_phase(
        self,
        record: AgentPhase,
        outcome: Outcome,
        lines: list[str],
        state: Attempt,
        phase: Phase,
        slash: str | None,
        stem: str,
        program: Program | None,
        timeout: float,
    ) -> tuple[str, str]:
        """Fill the record from the program's result and transcript; (status, reason). Another
        agent's output is read as Claude Code's (JSON like its result, if any, is taken)."""
        reader: Program = program or CLAUDE
        logs: Mapping[str, Any] = record  # the program's result_streams name its log fields
        result = reader.parse_result(
            "\n".join(
                (self.out.parent / logs[s]).read_text(errors="replace")
                for s in reader.result_streams
            )
        )
        entries = ct.entries_of(lines)
        record.update(reader.result_fields(result))
        session = record["session_id"] or reader.session_of(entries)
        # At the time limit procs.run_limited sends SIGTERM to the process group (the CLI is
        # bash's exec'd command) and to the run's token carriers, SIGKILL 3 s later
        # (proctree.py): on SIGTERM the CLI writes its cost-state line, so a killed phase's
        # cost comes from the transcript. Isolated, the agent's processes get their SIGTERM
        # first (proctree.stop_inside_first): bubblewrap signalled first would take the CLI
        # with it before it writes that line.
        before = state.sessions.get(session, {}) if session else {}
        usage, cumulative = reader.phase_usage(result, entries, before)
        record.update(usage)
        record["session_id"] = session
        if session:
            state.sessions[session] = cumulative
        continues = reader.continues_session(record["command_template"])
        status, reason = reader.phase_status(
            outcome.timed_out,
            timeout,
            outcome.exit_code,
            result,
            entries,
            slash,
            session_problem(continues, state.session, session),
        )
        state.session = session or state.session
        if lines:
            path = self.logs / f"{stem}.transcript.jsonl"
            jsonio.write_text(path, "\n".join(lines) + "\n")
            record["transcript"] = str(path.relative_to(self.out.parent))
            if reader.scans_transcript:  # trajectory.py renders Claude Code's
                state.rendered.append({**record, "entries": entries, "status": status})
        return status, reason

    def prompt_text(self, record: AgentPhase) -> str:
        return (self.out.parent / record["prompt_file"]).read_text(errors="replace")

    def write_atif(self, state: Attempt) -> str:
        """agent/trajectory.atif.json (transcript/atif.py): every phase that ran, its
        conversation read from its transcript, each answer's metrics from the proxy."""
        # By the phase's log: a loop's iterations share its name, each with a transcript of its own.
        rendered = {r["stdout"]: r for r in state.rendered}
        version = agent_version(self.layout, self.mode)
        bodies = wire.read_bodies(
            self.layout.agent_call_bodies(self.mode.name, self.task.instance_id)
        )
        programs = {p.name: p.program for p in self.mode.phases}
        phases = []
        for record in state.phases:
            seen = rendered.get(record["stdout"])
            program = registry.PROGRAMS.get(programs.get(record["name"], ""))
            began = phase_time(state.started_at, record.get("started"))
            if seen:
                conversation = atif.claude_conversation(seen["entries"])
            elif program and program is not CLAUDE:
                # Its own session logs are not read: the proxy's record of its calls is; the
                # calls of a loop's iteration are those made while it ran.
                ended = phase_time(state.started_at, record.get("ended"))
                calls = [
                    c
                    for c in state.calls
                    if c.get("phase") == record["name"]
                    and c.get("program") == program.name
                    and (
                        "iteration" not in record
                        or not (began and ended)
                        or began <= str(c.get("started")) <= ended
                    )
                ]
                conversation = wire.conversation(program.name, program.api, calls, bodies)
            else:
                conversation = None
            phases.append(
                {
                    "name": record["name"],
                    "status": state.statuses.get(record["name"]),
                    "prompt": self.prompt_text(record),
                    "result": record.get("result"),
                    "conversation": conversation,
                    "version": version,
                    "started_at": began,
                }
            )
        path = self.layout.agent_atif(self.mode.name, self.task.instance_id)
        session = (
            f"{self.layout.run}/{self.mode.name}/{self.task.instance_id}/"
            f"attempt-{self.attempts_made}"
        )
        agent = {
            "name": f"nginx-eval mode {self.mode.name}",
            "version": version or "unknown",
            "model_name": self.mode.model or None,
        }
        jsonio.write_text(
            path, atif.dumps(atif.attempt_trajectory(session, agent, phases, state.calls))
        )
        return str(path.relative_to(self.out.parent))

    def write_trajectory(self, rendered: list[dict[str, Any]]) -> str | None:
        if not rendered:
            return None
        path = self.logs / "trajectory.md"
        jsonio.write_text(
            path, trajectory.render(f"{self.mode.name}/{self.task.instance_id}", rendered)
        )
        return str(path.relative_to(self.out.parent))


def phase_time(attempt_began: float | None, offset: float | None) -> str | None:
    """The time `offset` seconds into an attempt that began at `attempt_began` (epoch seconds),
    as the metering proxy writes its calls' (ISO 8601, UTC, milliseconds): None if either is
    unknown."""
    if attempt_began is None or offset is None:
        return None
    moment = datetime.datetime.fromtimestamp(attempt_began + offset, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def run_attempts(run: AgentRun, retries: int) -> list[Attempt]:
    """The attempts of a run: again after an infra_error, up to `retries` more times."""
    attempts = []
    for n in range(1, retries + 2):
        state = run.attempt()
        if state.status == AUTH:
            label, fix = state.credentials or (CLAUDE.label, CLAUDE.credentials_hint)
            stop_the_run(
                run.layout, f"{run.mode.name}/{run.task.instance_id}", state.error, label, fix
            )
        attempts.append(state)
        if state.status != INFRA_ERROR or n > retries:
            break
        state.logs = str(keep_attempt_logs(run.logs, n).relative_to(run.out.parent))
        wait = backoff_seconds(n)
        say(
            run.mode,
            run.task,
            "will try again",
            f"attempt {n} of {retries + 1} ended in infra_error; attempt {n + 1} in {wait:g} s",
        )
        wait_interruptibly(wait)
    attempts[-1].logs = str(run.logs.relative_to(run.out.parent))
    return attempts


def agent_tokens(tokens: CallTokens) -> Tokens:
    """The proxy's token counts in agent.json's vocabulary (records.Tokens): Anthropic's
    cache_creation for the cache writes."""
    return {
        "input": tokens["input"],
        "output": tokens["output"],
        "cache_read": tokens["cache_read"],
        "cache_creation": tokens["cache_write"],
        "reasoning": tokens["reasoning"],
    }


def cost_and_tokens(
    calls: Sequence[Mapping[str, Any]], phases: Sequence[Mapping[str, Any]]
) -> tuple[float | None, Tokens | None, str | None]:
    """(cost_usd, tokens, cost_source) of attempts: the metered figures when the proxy saw
    calls and priced them all; else what the program said of itself (Claude Code's result or
    transcript); else the metered tokens without a cost, or nothing."""
    seen = metered.totals(calls)
    own_cost, own_tokens = program_base.summed_cost(phases), program_base.summed_tokens(phases)
    if seen["calls"] and seen["cost_usd"] is not None:
        return seen["cost_usd"], agent_tokens(seen["tokens"]), "metered"
    if own_cost is not None or own_tokens:
        return own_cost, own_tokens, "self-reported"
    if seen["calls"]:
        return None, agent_tokens(seen["tokens"]), "metered"
    return None, None, None


def metered_record(
    calls: Sequence[Mapping[str, Any]], phases: Sequence[Mapping[str, Any]]
) -> MeteredRun:
    """agent.json's "metered" (records.MeteredRun): the proxy's totals, the price table, and how
    far the program's own cost is from them."""
    seen = metered.totals(calls)
    own = program_base.summed_cost(phases)
    # Nothing to compare when the proxy saw no billed call: a program that reports a cost of
    # its own without a call through it (another agent's JSON, a stand-in) is not metered.
    compared = seen["billed_calls"] > 0
    return {
        **seen,
        "price_table": pricing.table(),
        "self_reported_cost_usd": own,
        "difference": metered.relative_difference(seen["cost_usd"], own) if compared else None,
    }


def attempt_record(attempt: Attempt) -> AgentAttempt:
    """agent.json's record of one attempt."""
    record: AgentAttempt = {
        "status": attempt.status,
        "error": attempt.error,
        "logs": attempt.logs,
        "cost_usd": cost_and_tokens(attempt.calls, attempt.phases)[0],
        "calls": len(attempt.calls),
    }
    if attempt.loop is not None:
        record["loop"] = attempt.loop
    return record


def agent_record(
    inputs: str, run: AgentRun, attempts: Sequence[Attempt], version: str | None
) -> AgentJson:
    last, phases = attempts[-1], [p for a in attempts for p in a.phases]
    # An attempt whose credentials were refused (AUTH) stopped the run before: no record.
    assert is_agent_status(last.status), last.status
    calls = [c for a in attempts for c in a.calls]
    cost, tokens, source = cost_and_tokens(calls, phases)
    flags = attempts_module.dedupe([f for a in attempts for f in a.flags])
    # The phases' own time: no workspace set-up, no wait for a slot or between attempts.
    seconds = sum(p["wall_seconds"] or 0 for p in phases)
    record: AgentJson = {
        "inputs": inputs,
        "mode": run.mode.name,
        "instance_id": run.task.instance_id,
        "status": last.status,
        "error": last.error,
        "phases": last.phases,
        "attempts": [attempt_record(a) for a in attempts],
        "agent_version": version,
        "wall_seconds": round(seconds, 3),
        "cost_usd": cost,
        "tokens": tokens,
        "cost_source": source,
        "metered": metered_record(calls, phases),
        "self_reported": {
            "cost_usd": program_base.summed_cost(phases),
            "tokens": program_base.summed_tokens(phases),
        },
        "trajectory": last.trajectory,
        "atif": last.atif,
        "isolation": "srt" if run.box else "none",
        "toolchain": (
            sandbox.sandbox_toolchain(rootfs.current())
            if run.box
            else {"name": rootfs.HOST, "digest": None}
        ),
        "web_tools": web_tools_open(run.mode, run.env),
        "flags": flags,
        "contaminated": any(f["kind"] == "contamination" for f in flags),
        "tests_tree": run.tests_tree,
        "swe_env": swe_view.record(run.swe_env),
    }
    if last.loop is not None:
        record["loop"] = last.loop
    return record


def not_run_record(
    inputs: str, mode: AgentMode, task: AnyTask, max_cost: float | None, spent: float
) -> AgentJson:
    error = (
        (
            f"the run's budget max_cost={max_cost:g} USD was spent ({spent:.2f} USD recorded) "
            f"before this agent started"
        )
        if max_cost
        else ""
    )
    return {
        "inputs": inputs,
        "mode": mode.name,
        "instance_id": task.instance_id,
        "status": NOT_RUN,
        "error": error,
        "attempts": [],
        "agent_version": None,
        "wall_seconds": 0.0,
        "phases": [],
        "cost_usd": None,
        "tokens": None,
        "cost_source": None,
        "metered": None,
        "self_reported": None,
        "trajectory": None,
        "atif": None,
        "isolation": "srt" if sandbox.settings(mode) else "none",
        "web_tools": None,
        "flags": [],
        "contaminated": False,
        "tests_tree": None,
    }


def agent_unit(
    layout: Layout,
    mode: AgentMode,
    task: AnyTask,
    prompts: Sequence[str],
    inputs: str,
    retries: int,
    workspace_diff: WorkspaceDiff | None,
    keep_workspace: bool = False,
    tests_tree: TestsTree | None = None,
    swe_env: SweEnvView | None = None,
    services: "Services | None" = None,
) -> UnitAnswer:
    """The agent run of (mode, task), with its tests tree (suite.as_of, made here if missing,
    a Ray node's own): its attempts and logs (agent/), and {"record": agent.json's
    record, "refused": [unit, reason] when the credentials were refused, "diff": the workspace's
    diff (patch.workspace_diff, passed in: a later stage's rule) when it ran on a node for a
    coordinator elsewhere (executor.py), else None}. On a node the workspace goes once its diff
    is taken, as patch.take_patch removes it here (keep_workspace: keep_workspaces=1)."""
    if on_node():
        clear_stop(layout)  # the coordinator checked its own stop file
    if sandbox.settings(mode):
        sandbox.check_available(mode)  # never a fallback to an unisolated run
        problem = swe_env and swe_view.view_problem(swe_env)
        if problem:
            raise UserError(
                f"the SWE-bench environment of the sandbox: {problem}", task=task.instance_id
            )
    run = AgentRun(layout, mode, task, prompts, tests_tree, swe_env, services)
    try:
        attempts = run_attempts(run, retries)
    except CredentialsRefused as e:
        if not on_node():
            raise
        return {
            "record": None,
            "refused": [e.unit, e.reason, e.program, e.fix],
            "diff": None,
        }
    record = agent_record(inputs, run, attempts, agent_version(layout, mode))
    diff: RemoteDiff | None = None
    if on_node():
        # On a node the caller hands the patch stage's rule (pipeline.Context.workspace_diff).
        assert workspace_diff is not None
        patch, skipped, left_out = workspace_diff(
            layout.bare_repo(task.repo), run.ws, task.base_commit, task.kind
        )
        diff = {
            "patch_base64": base64.b64encode(patch).decode(),
            "skipped": skipped,
            "left_out": left_out,
        }
        if not keep_workspace:
            release_workspace(layout, mode.name, task)
    return {"record": record, "refused": None, "diff": diff}


def _remote_agent(
    layout: Layout,
    mode: AgentMode,
    task: AnyTask,
    prompts: Sequence[str],
    inputs: str,
    retries: int,
    workspace_diff: WorkspaceDiff | None,
    keep_workspace: bool,
    tests_tree: TestsTree | None,
    swe_env: SweEnvView | None = None,
    services: "Services | None" = None,
) -> AgentJson:
    """agent_unit on a node; its diff kept for the patch stage (patch.agent_patch), since the
    workspace here is not the one the agent changed."""
    repos = [(task.repo, {task.base_commit: [[task.instance_id, "base_commit"]]})]
    if tests_tree:
        repos.append((tests_tree["repo"], {tests_tree["commit"]: [[task.instance_id, "tests"]]}))
    try:
        value: UnitAnswer = executor.run(
            "agent",
            agent_unit,
            layout,
            mode.name,
            task.instance_id,
            [
                mode,
                task,
                prompts,
                inputs,
                retries,
                workspace_diff,
                keep_workspace,
                tests_tree,
                swe_env,
                services,
            ],
            ship_out=["agent/"],
            repos=repos,
            forward=registry.forwarded_prefixes(),
        )
    except UnitLost as e:
        error = f"every node that ran it was lost: {e.errors[-1]}"
        record: AgentJson = {
            **not_run_record(inputs, mode, task, None, 0),
            "status": INFRA_ERROR,
            "error": error,
            "attempts": [
                {"status": INFRA_ERROR, "error": why, "logs": None, "cost_usd": None}
                for why in e.errors
            ],
        }
        say(mode, task, "failed", error)
        return record
    if value["refused"]:
        stop_the_run(layout, *value["refused"])
    if value["diff"] is not None:
        kept: RemoteDiffJson = {**value["diff"], "agent_inputs": inputs}
        jsonio.write_json(layout.remote_diff(mode.name, task.instance_id), kept)
        mark_agent_started(layout, mode.name, task)
    assert value["record"] is not None  # refused credentials stopped the run above
    return value["record"]


def run_agent(
    layout: Layout,
    mode: AgentMode,
    task: AnyTask,
    prompts: Sequence[str],
    inputs: str | None,
    agent_task_name: str,
    max_cost: float | None = None,
    retries: int = 2,
    workspace_diff: WorkspaceDiff | None = None,
    keep_workspace: bool = False,
    swe_env: SweEnvView | None = None,
    services: "Services | None" = None,
    swe_env_at_run: "Callable[[Any, Layout], SweEnvView | str] | None" = None,
) -> None:
    """The agent stage's action. swe_env_at_run: given when the task's SWE-bench environment
    was still to be built when the tasks were made (pipeline.Context.swe_env_pending): the
    prompts describe it, so it is looked up now, and an agent whose environment could not be
    built does not start (the next run's prompt says there is none)."""
    out = layout.agent_json(mode.name, task.instance_id)
    if (
        inputs is not None
        and not forgotten(layout, agent_task_name)
        and is_finished(stamps.made_from(out, inputs))
    ):
        return
    tests_tree = suite.needed(suite.as_of(layout, task), task) if mode.tests else None
    if inputs is None:
        # Not known when the tasks were made (the clones came later in this command): now.
        inputs = agent_inputs(layout, mode, task, prompts, tests_tree=tests_tree)
        # Its tests tree is known here (or needed() refused): the digest is there.
        assert inputs is not None
        if not forgotten(layout, agent_task_name) and is_finished(stamps.made_from(out, inputs)):
            return
    check_not_stopped(layout)
    if swe_env is None and swe_env_at_run is not None:
        found = swe_env_at_run(task, layout)
        if isinstance(found, str):
            raise UserError(
                f"the SWE-bench environment its prompt describes was not built ({found}); "
                "no agent started, and the next run's prompt says there is none",
                task=task.instance_id,
            )
        swe_env = found
    spent = over_budget(layout, max_cost)
    # What the agent is shown besides its workspace, here or on a node.
    shown = UnitShown(tests_tree=tests_tree, swe_env=swe_env, services=services)
    if spent is not None:
        record = not_run_record(inputs, mode, task, max_cost, spent)
        say(mode, task, "not run", record["error"])
    elif executor.is_remote():
        record = _remote_agent(
            layout, mode, task, prompts, inputs, retries, workspace_diff, keep_workspace, **shown
        )
    else:
        answer = agent_unit(layout, mode, task, prompts, inputs, retries, None, **shown)
        assert answer["record"] is not None  # refused credentials raise here
        record = answer["record"]
    # `doit forget` is answered once a new record replaces the old one: a run stopped before
    # (refused credentials, Ctrl-C) leaves the request pending.
    consume_forgotten(layout, agent_task_name)
    write_record(out, record)


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    for bench, mode, task in ctx.agent_units():
        name = unit_name(bench, mode, task)
        agent_task = task_name(AGENT, name)
        missing = missing_prompt(ctx.layout.templates_dir, mode, task)
        if missing:
            # Never current, and its action is the error's line (the preflight says it first).
            yield {
                "basename": AGENT,
                "name": name,
                "doc": f"run mode {mode.name} on {task.instance_id}",
                "actions": [(failing_on_user_error, [refuse_missing_prompt, missing])],
                "targets": [str(ctx.layout.agent_json(mode.name, task.instance_id))],
                "task_dep": [task_name(WORKSPACE, name)],
                "uptodate": [False],
            }
            continue
        prompts, inputs = ctx.unit_agent_inputs(mode, task)
        pending = ctx.swe_env_pending(task) if sandbox.settings(mode) else None
        yield {
            "basename": AGENT,
            "name": name,
            "doc": f"run mode {mode.name} on {task.instance_id}",
            # An AGENT a shell cannot read is one error line (cli's preflight says it first).
            "actions": [
                (
                    failing_on_user_error,
                    [
                        run_agent,
                        ctx.layout,
                        mode,
                        task,
                        prompts,
                        inputs,
                        agent_task,
                        ctx.options.max_cost,
                        ctx.options.agent_retries,
                        ctx.workspace_diff,
                        bool(ctx.options.keep_workspaces),
                        ctx.swe_env(task),
                        ctx.swe_services,
                        ctx.swe_env_at_run if pending else None,
                    ],
                )
            ],
            "targets": [str(ctx.layout.agent_json(mode.name, task.instance_id))],
            # An environment still to be built is built before the agent that is shown it.
            "task_dep": [task_name(WORKSPACE, name), *([pending[0]] if pending else [])],
            # The stamps.py protocol; agent_inputs is the digest (stamps.stage_task's would
            # change it, and with it every paid agent.json already made).
            "uptodate": [(agent_finished, [ctx.layout, mode, task, agent_task, inputs])],
        }
