"""The preflight of `doit run`: before the first task, the program each agent phase about to run
starts must be on PATH and must start (an agent program's ``--version`` runs, agent/programs/;
its output is the version agent.json records), in the sandbox the mode uses when it has one
(another agent is looked up there with bash's ``type``, never run); the program's credentials
are there, its model endpoint answers, and where it has an API key the API takes it
(key_problem: a request that costs nothing, a bad key one line naming the program in
seconds). It also clears a stop that refused credentials left on the run
(gate.py), and runs the sandbox's self-test (selftest.py) before the first isolated agent. cli's
reporter runs it: only doit's reporter sees which tasks were selected."""

import os
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..core.errors import UserError
from ..core.tasknames import AGENT, task_name, unit_name
from ..doitext.invocation import reachable
from ..meter.proxy import PROGRAM_OF_API, MeterProxy
from ..run.commandline import command_program
from ..run.record import note_self_test
from . import sandbox, selftest, swe_view
from .gate import clear_stop
from .programs import registry
from .programs.base import Program, resolve_program
from .programs.claude import CLAUDE
from .prompts import missing_prompt
from .selftest import endpoint_problem
from .stage import agent_finished

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..core.records import SweEnvView
    from ..run.benchmark import AnyTask
    from ..run.context import StageContext
    from ..run.modes import AgentMode
    from .sandbox import Box


def program_found(program: str, env: Mapping[str, str]) -> bool:
    """Whether bash, run as the agent's phases are, finds `program` (on PATH, or a builtin)."""
    if "/" in program:
        # A relative path is resolved in the workspace, which does not exist yet.
        return not os.path.isabs(program) or os.access(program, os.X_OK)
    out = subprocess.run(
        ["bash", "-c", 'type -t -- "$1"', "bash", program], env=env, capture_output=True, text=True
    )
    return bool(out.stdout.strip())


def agents_to_run(
    ctx: "StageContext", tasks: Mapping[str, Any], selected: Iterable[str]
) -> Iterator[tuple["AgentMode", "AnyTask"]]:
    """(mode, task) of every agent task doit is about to run: reachable from the selected tasks,
    and without a finished agent.json for its current inputs (or forgotten)."""
    reachable_names = reachable(tasks, selected)
    for bench, mode, task in ctx.agent_units():
        name = task_name(AGENT, unit_name(bench, mode, task))
        if name not in reachable_names:
            continue
        if missing_prompt(ctx.layout.templates_dir, mode, task):
            yield mode, task  # its inputs cannot be rendered: the preflight refuses it by name
        elif not agent_finished(ctx.layout, mode, task, name, ctx.unit_agent_inputs(mode, task)[1]):
            yield mode, task


def program_problem(
    layout: "Layout",
    program: str,
    env: Mapping[str, str],
    box: "Box | None",
    reached: set[tuple[str, str]] | None = None,
    probed: set[tuple[str, str, str | None]] | None = None,
) -> str | None:
    """Why `program` cannot start as a phase of a mode with sandbox settings `box` starts it,
    or None. A problem that is the machine's, not the mode's (no credentials, a model endpoint
    out of reach), is raised as a UserError of its own. reached: the (sandbox, endpoint) pairs
    already found reachable in this preflight, added to; probed: the probe_key of the programs
    already found starting in their sandbox (folded_checks)."""
    if not program_found(program, env):
        return f"program {program!r} is not on PATH"
    path = resolve_program(program, env)
    known = registry.of_path(path)
    refused = known.credentials_problem(env) if known else None
    if refused:
        # Not a mistake of modes.toml: said without naming a place in it.
        raise UserError(refused)
    if box and (path or "/" not in program):
        if probe_key(box, program, path) in (probed or set()):
            endpoint_checked(layout, box, env, known, reached)
            return None
        problem = sandbox.start_problem(
            probe_argv(program, path, known is not None),
            hidden=sandbox.hidden_paths(layout),
            box=box,
            environ=env,
            programs=[path] if path else [],
            support=sandbox.write_support(layout.sandbox_support),
        )
        if problem:
            return f"program {program!r} does not start in the sandbox: {problem}"
    elif known and not known.version(path, env, layout.agent_versions):
        return f"program {program!r} does not run: `{program} --version` printed no version"
    endpoint_checked(layout, box, env, known, reached)
    return None


def endpoint_checked(
    layout: "Layout",
    box: "Box | None",
    env: Mapping[str, str],
    program: Program | None,
    reached: set[tuple[str, str]] | None,
) -> None:
    """For an agent program, its model endpoint reachable from `box` (UserError if not),
    unless `reached` holds it; then it does. Its key: credentials_checked."""
    if program is None:
        return
    key = endpoint_key(box, env, program)
    if key not in (reached if reached is not None else set()):
        problem = endpoint_problem(layout, box, env, program)
        if problem:
            raise UserError(f"{problem}; no agent started")
        if reached is not None:
            reached.add(key)


KEY_TIMEOUT = 10


def key_problem(program: Program, env: Mapping[str, str]) -> str | None:
    """Why the program's API refuses its key (one line naming the program), or None: asked
    from this machine with a request that costs nothing (Program.key_probe); an API that
    cannot be asked so is left to the agent's own first call."""
    probe = program.key_probe(env)
    if probe is None:
        return None
    url, headers = probe
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=KEY_TIMEOUT
        ):
            return None
    except urllib.error.HTTPError as e:
        body = e.read(2000).decode("utf-8", "replace")
        if e.code in (401, 403) or "API_KEY_INVALID" in body:
            return (
                f"{program.label}: the API refused the credentials ({url} answered HTTP "
                f"{e.code}): fix {program.credentials_hint}"
            )
        return None
    except (OSError, ValueError):
        return None  # reachability is endpoint_problem's


def endpoint_key(
    box: "Box | None", env: Mapping[str, str], program: Program = CLAUDE
) -> tuple[str, str]:
    return (repr(box), selftest.endpoint_url(env, program))


def probe_key(box: "Box", program: str, path: str | None) -> tuple[str, str, str | None]:
    return (repr(box), program, path)


def probe_argv(program: str, path: str | None, known: bool) -> list[str]:
    """What the preflight runs in the sandbox to see `program` start: an agent program's
    ``--version`` (it has a path, registry.of_path), bash's ``type`` for another program,
    which is never run."""
    if known and path:
        return [path, "--version"]
    return ["bash", "-c", 'type -t -- "$1"', "bash", program]


def folded_checks(
    modes: Iterable["AgentMode"], box: "Box", env: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, Any], list[str]]:
    """The sandbox checks program_problem would make for the phases of `modes` (all with the
    sandbox `box` and the environment `env`), to run in the self-test's sandbox start
    (selftest.run_with_checks) instead of a start each: ({name: bash condition}, {name: the
    probed or reached key it stands for}, the programs' paths). A program that is not found
    or lacks credentials is left to program_problem, which says so."""
    conditions: dict[str, str] = {}
    keys: dict[str, Any] = {}
    paths: list[str] = []
    for mode in modes:
        for phase in mode.every_phase:
            program = command_program(phase.command, env)
            if not program or not program_found(program, env):
                continue
            path = resolve_program(program, env)
            known = registry.of_path(path)
            if (known and known.credentials_problem(env)) or not (path or "/" not in program):
                continue
            name = f"program {program}"
            conditions[name] = selftest.probe_condition(probe_argv(program, path, bool(known)))
            keys[name] = probe_key(box, program, path)
            paths += [path] if path and path not in paths else []
            if known:
                conditions[f"endpoint {known.name}"] = selftest.endpoint_condition(env, known)
                keys[f"endpoint {known.name}"] = endpoint_key(box, env, known)
    return conditions, keys, paths


def credentials_checked(ctx: "StageContext", modes: Iterable["AgentMode"]) -> None:
    """First of all, in seconds: every phase names a program the harness knows, and each agent
    program a phase starts has credentials its API takes (key_problem, asked from this
    machine); UserError naming the program otherwise."""
    asked: set[tuple[str, str]] = set()
    for mode in modes:
        env = dict(os.environ, **dict(mode.env))
        for phase in mode.every_phase:
            where = f"mode {mode.name} phase {phase.name}"
            registry.of_phase(phase, ctx.layout.modes_file, where)
            known = registry.running(phase, phase.command, env)
            if known is None or (known.name, repr(known.key_probe(env))) in asked:
                continue
            asked.add((known.name, repr(known.key_probe(env))))
            missing = known.credentials_problem(env)
            if missing:
                raise UserError(missing)  # the machine's, not modes.toml's
            refused = key_problem(known, env)
            if refused:
                raise UserError(f"{refused}; no agent started")


def self_test(
    layout: "Layout",
    box: "Box",
    env: Mapping[str, str],
    checks: Mapping[str, str] | None = None,
    programs: Iterable[str] = (),
    mode: "AgentMode | None" = None,
) -> set[str]:
    """selftest.run_with_checks, kept in run.json; UserError when it failed: an agent that
    could not build, run and reach what it changed would be scored on the sandbox. Returns the
    names of `checks` that passed."""
    result, passed = selftest.run_with_checks(layout, box, env, checks or {}, programs)
    if result["steps"]:
        sandbox.note_started(env)
    elif mode is not None:
        # Not one step: if srt cannot start a sandbox here at all, that is the one line to say.
        sandbox.check_available(mode, layout.modes_file)
    note_self_test(layout, result)
    if not result["ok"]:
        raise UserError(f"{result['failed']}; no agent started (docs/sandbox.md)")
    return passed


def preflight(ctx: "StageContext", tasks: Mapping[str, Any], selected: Iterable[str]) -> None:
    """Every agent phase about to run starts a program that exists and runs
    (commandline.command_program), in its sandbox if it has one, after the sandbox's self-test
    (selftest.py) passed once."""
    clear_stop(ctx.layout)
    families: dict[str, AgentMode] = {}
    units = list(agents_to_run(ctx, tasks, selected))
    for mode, task in units:
        missing = missing_prompt(ctx.layout.templates_dir, mode, task)
        if missing:
            raise missing
        families.setdefault(mode.family, mode)
    credentials_checked(ctx, families.values())
    meters: dict[str, MeterProxy] = {}
    try:
        sandbox_checks(ctx, families.values(), meters)
    finally:
        for meter in meters.values():
            meter.stop()
    upstream_checked(ctx.layout, meters.values())
    environments_checked(ctx, units)


def environments_checked(
    ctx: "StageContext", units: Iterable[tuple["AgentMode", "AnyTask"]]
) -> None:
    """Each SWE-bench environment an isolated agent is about to be shown imports its package
    in the sandbox, /testbed a checkout of the task's base (once per install shown and sandbox):
    UserError naming the task otherwise. Where the clone is not there yet, no environment can
    have been built from it either."""
    checked: set[tuple[str, str]] = set()
    for mode, task in units:
        box, view = sandbox.settings(mode), ctx.swe_env(task)
        if not box or not view or (view["digest"], repr(box)) in checked:
            continue
        checked.add((view["digest"], repr(box)))
        problem = swe_view.view_problem(view) or import_problem(ctx.layout, box, view, task)
        if problem:
            raise UserError(
                f"the SWE-bench environment {view['digest']} in the sandbox: {problem}; "
                f"no agent started",
                task=task.instance_id,
            )


def import_problem(layout: "Layout", box: "Box", view: "SweEnvView", task: "AnyTask") -> str | None:
    """Why `python -c "import <package>"` fails in the sandbox showing `view` (one line), or
    None (also when the task's clone is not there to check out)."""
    with tempfile.TemporaryDirectory(prefix="nginx-eval-testbed-") as scratch:
        if not swe_view.checkout(layout.bare_repo(task.repo), task.base_commit, scratch):
            return None
        swe_view.put_testbed_files(view, scratch)
        problem = sandbox.start_problem(
            ["bash", "-c", swe_view.import_condition(view) + " && echo imported"],
            hidden=sandbox.hidden_paths(layout),
            box=box,
            environ=dict(os.environ),
            support=sandbox.write_support(layout.sandbox_support),
            view=view,
            workspace=scratch,
        )
    if problem:
        return f'`python -c "import {view["package"]}"` failed: {problem}'
    return None


def preflight_meter(meters: dict[str, MeterProxy], env: Mapping[str, str]) -> MeterProxy:
    """A metering proxy of the preflight's own (no record written) in front of the upstreams
    `env` names, one per set of them: an isolated phase reaches its model only through the
    attempt's proxy (stage.AgentRun.start_meter), so the sandbox checks go that way too."""
    upstreams: dict[str, str] = {}
    for program in registry.programs():
        upstreams.setdefault(program.api, program.upstream(env))
    key = repr(sorted(upstreams.items()))
    if key not in meters:
        meters[key] = MeterProxy(upstreams, {"preflight": True}, environ=env).start()
    return meters[key]


def upstream_problem(layout: "Layout", meters: Iterable[MeterProxy]) -> str | None:
    """The upstream leg of the sandbox's endpoint checks: a call a preflight proxy could not
    forward (its own 502) is an upstream out of this machine's reach, where the proxy runs; one
    line in endpoint_problem's words, or None."""
    for meter in meters:
        for call in meter.calls:
            if not str(call.get("error") or "").startswith("upstream unreachable"):
                continue
            program = registry.named(PROGRAM_OF_API[call["api"]])
            return endpoint_problem(layout, None, meter.environ, program) or (
                f"{program.label}: the model endpoint {meter.upstreams[call['api']]} cannot be "
                f"reached from this machine: {call['error']}"
            )
    return None


def upstream_checked(layout: "Layout", meters: Iterable[MeterProxy]) -> None:
    problem = upstream_problem(layout, meters)
    if problem:
        raise UserError(f"{problem}; no agent started")


def proxy_environment(meter: MeterProxy) -> dict[str, str]:
    """Every program's endpoint variables pointed at `meter`, as a phase's are."""
    return {
        k: v
        for p in registry.programs()
        for k, v in p.endpoint_environment(meter.base_url(p.api)).items()
    }


def reached_problem(
    layout: "Layout", box: "Box | None", env: Mapping[str, str], program: Program
) -> str | None:
    """endpoint_problem the way a phase reaches the endpoint: from `box` through a metering
    proxy of its own, which reaches the upstream from this machine (`doit run doctor`)."""
    if not box:
        return endpoint_problem(layout, None, env, program)
    meters: dict[str, MeterProxy] = {}
    try:
        meter = preflight_meter(meters, env)
        proxied = sandbox.through_proxy(box, meter.endpoint)
        problem = endpoint_problem(layout, proxied, dict(env, **proxy_environment(meter)), program)
    finally:
        for m in meters.values():
            m.stop()
    return problem or upstream_problem(layout, meters.values())


def sandbox_checks(
    ctx: "StageContext", modes: Iterable["AgentMode"], meters: dict[str, MeterProxy]
) -> None:
    """preflight's checks of each mode's programs and endpoints, in its sandbox (through a
    preflight proxy, as its phases run) or on this machine."""
    families = list(modes)
    reached: set[tuple[str, str]] = set()
    probed: set[tuple[str, str, str | None]] = set()
    tested = False
    for mode in families:
        box = sandbox.settings(mode)
        env = dict(os.environ, **dict(mode.env))
        if box:
            meter = preflight_meter(meters, env)
            proxied = sandbox.through_proxy(box, meter.endpoint)
            endpoints = proxy_environment(meter)
            # Never a fallback to an unisolated run: no agent starts without its sandbox. Whether
            # srt starts here at all is the self-test's first sign (self_test).
            sandbox.check_available(mode, ctx.layout.modes_file, start=tested)
            box, env = proxied, dict(env, **endpoints)
            if not tested:
                alike = [
                    m
                    for m in families
                    if sandbox.settings(m) == sandbox.settings(mode)
                    and dict(m.env) == dict(mode.env)
                ]
                checks, keys, paths = folded_checks(alike, box, env)
                for name in self_test(ctx.layout, box, env, checks, paths, mode):
                    if name.startswith("endpoint"):
                        reached.add(keys[name])
                    else:
                        probed.add(keys[name])
                tested = True
        for phase in mode.every_phase:
            program = command_program(phase.command, env)
            problem = program and program_problem(ctx.layout, program, env, box, reached, probed)
            if problem:
                raise UserError(
                    problem,
                    file=ctx.layout.modes_file,
                    item=f"mode {mode.name} phase {phase.name}",
                    field="command",
                )
