"""Stage 3, agent: run a mode's phases in the workspace, under time limits.

Output ``agent.json``::

    {"inputs": sha256, "mode": str, "instance_id": str,
     "status": "completed" | "failed" | "timeout" | "error",
     "error": str,                          # why, for every status but "completed" ("" then):
                                            # "phase solve: exit code 3", "phase solve: timed out
                                            # after 1800 s", "phase solve: command not found
                                            # (exit 127)", "phase x: the workspace no longer exists"
     "wall_seconds": float,
     "phases": [{"name",
                 "command",                 # what ran: $AGENT's words and the other variables'
                                            # values put in (secret-looking names stay as
                                            # written), placeholders filled, {prompt} shown as
                                            # "$(cat <prompt file>)"
                 "command_template",        # the same with {model} filled and the other
                                            # placeholders as written ({prompt}): the command
                                            # of the mode, equal for every task it ran
                 "model",                   # the mode's model if the command that ran names
                                            # {model}, else null (e.g. AGENT replaced it)
                 "exit_code", "timed_out", "wall_seconds",
                 "stdout", "stderr", "prompt_file",
                 "cost_usd", "tokens": {...}, "num_turns"}],
     "cost_usd": float | null, "tokens": {"input", "output", "cache_read", "cache_creation"} | null}

A phase that fails (exit code, time limit, command not found, workspace gone) is also one line
on stderr when it happens: ``nginx-eval: agent <mode>/<instance> failed: exit code 3 (log: <the
phase's stderr file>)``.

An agent run costs money, so it is repeated only when its inputs change (mode command, prompt,
model, problem statement, the values of environment variables its command names) or after ``doit forget`` (see doitdb.py). The inputs digest is stored in
agent.json; an action that finds a matching agent.json returns at once, even when doit's database
was lost.
"""

import json
import os
import re
import shlex
import sys
import time
from functools import lru_cache

import jinja2

from . import jsonio, sandbox, stamps
from .doitdb import consume_forgotten, forgotten
from .errors import failing_on_user_error
from .modes import render_command
from .procs import kill_leftovers, run_limited
from .workspace import ISSUE_FILE, ensure_fresh_workspace, mark_agent_started, workspace_inputs

STATUSES = ("completed", "failed", "timeout", "error")


@lru_cache(maxsize=8)
def prompt_environment(templates_dir):
    # One per directory: each template is compiled once, not once per task (the no-op run
    # renders every prompt to check that agent runs are still current).
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir)),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def render_prompt(templates_dir, template_name, task, mode, phase):
    env = prompt_environment(str(templates_dir))
    return env.get_template(template_name).render(
        task=task, mode=mode, phase=phase, problem_statement=task.problem_statement,
        issue_file=ISSUE_FILE, instance_id=task.instance_id)


def rendered_prompts(templates_dir, mode, task):
    return [render_prompt(templates_dir, p.prompt, task, mode, p) if p.prompt else ""
            for p in mode.phases]


ENV_REFERENCE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def referenced_environment(mode):
    """Values of the environment variables the mode's commands use ($AGENT, ${AGENT:-...}): a
    command that means another agent under another AGENT must not reuse the old agent's runs."""
    names = sorted({n for p in mode.phases for n in ENV_REFERENCE.findall(p.command)})
    env = dict(os.environ, **dict(mode.env))
    return {n: env.get(n) for n in names}


def agent_inputs(mode, task, prompts):
    inputs = {"mode": mode.fingerprint(), "prompts": prompts,
              "environment": referenced_environment(mode), "workspace": workspace_inputs(task)}
    box = sandbox.settings(mode)
    if box:         # only when on, so that runs made without a sandbox keep their digest
        inputs["sandbox"] = box
    return jsonio.digest(inputs)


def parse_claude_json(stdout_text):
    """Cost, tokens and turns from Claude Code's ``--output-format json`` result, if present."""
    for line in reversed(stdout_text.strip().splitlines() or [""]):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(data, dict) or ("total_cost_usd" not in data and "usage" not in data):
            continue
        usage = data.get("usage") or {}
        return {
            "cost_usd": data.get("total_cost_usd"),
            "num_turns": data.get("num_turns"),
            "is_error": data.get("is_error"),
            "tokens": {
                "input": usage.get("input_tokens", 0),
                "output": usage.get("output_tokens", 0),
                "cache_read": usage.get("cache_read_input_tokens", 0),
                "cache_creation": usage.get("cache_creation_input_tokens", 0),
            },
        }
    # Whole-document JSON (pretty printed)
    try:
        data = json.loads(stdout_text)
        if isinstance(data, dict) and "total_cost_usd" in data:
            return parse_claude_json(json.dumps(data))
    except json.JSONDecodeError:
        pass
    return {}


def _sum_tokens(phases):
    total, seen = {}, False
    for p in phases:
        for k, v in (p.get("tokens") or {}).items():
            seen = True
            total[k] = total.get(k, 0) + (v or 0)
    return total if seen else None


def say_failed(mode, task, reason, log=None):
    """The console line of a failed agent phase, printed when it happens."""
    where = f" (log: {log})" if log else ""
    print(f"nginx-eval: agent {mode.name}/{task.instance_id} failed: {reason}{where}",
          file=sys.stderr, flush=True)


def agent_finished(layout, mode, task, agent_task_name):
    """The agent run of (mode, task) is finished for its current inputs (its agent.json was made
    from them) and not forgotten: it will not run again, so it needs no workspace (`doit clean`
    removed it; patch.write_patch keeps the patch taken from it)."""
    if forgotten(layout, agent_task_name):
        return False
    inputs = agent_inputs(mode, task, rendered_prompts(layout.templates_dir, mode, task))
    return bool(stamps.made_from(layout.agent_json(mode.name, task.instance_id), inputs))


def run_agent(layout, mode, task, prompts, inputs, agent_task_name):
    out = layout.agent_json(mode.name, task.instance_id)
    forgotten = consume_forgotten(layout, agent_task_name)
    if not forgotten and stamps.made_from(out, inputs):
        return
    # An agent of a killed doit may still be running in this workspace: stop it before the
    # workspace is recreated under it.
    token_file = layout.running_token(mode.name, task.instance_id, "agent")
    kill_leftovers(token_file)
    ensure_fresh_workspace(layout, mode.name, task)
    mark_agent_started(layout, mode.name, task)
    ws = layout.workspace(mode.name, task.instance_id)
    logs = layout.agent_logs(mode.name, task.instance_id)
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(dict(mode.env))
    env["NGINX_EVAL_INSTANCE"] = task.instance_id
    phases, status, error = [], "completed", ""
    box = sandbox.settings(mode)
    if box:
        sandbox.check_available(mode)
    start = time.monotonic()
    for i, (phase, prompt) in enumerate(zip(mode.phases, prompts), 1):
        if not ws.is_dir():
            # An earlier phase deleted the workspace: nothing to run the next phase in.
            status, error = "failed", f"phase {phase.name}: the workspace no longer exists"
            say_failed(mode, task, error, out.parent / phases[-1]["stderr"] if phases else None)
            break
        stem = f"{i}-{phase.name}"
        prompt_file = logs / f"{stem}.prompt.md"
        prompt_file.write_text(prompt, encoding="utf-8")
        values = {"workspace": str(ws), "issue_file": str(ws / ISSUE_FILE), "prompt": prompt,
                  "prompt_file": str(prompt_file), "model": mode.model,
                  "instance_id": task.instance_id, "log_dir": str(logs), "phase": phase.name}
        command = render_command(phase.command, env, values)
        names_model = "{model}" in render_command(phase.command, env, record=True)
        template = render_command(phase.command, env, {"model": mode.model}, record=True)
        stdout_path, stderr_path = logs / f"{stem}.stdout", logs / f"{stem}.stderr"
        with open(stdout_path, "wb") as so, open(stderr_path, "wb") as se:
            argv = ["bash", "-c", command]
            if box:
                argv = sandbox.wrap(argv, workspace=ws, log_dir=logs, sandbox=box, environ=env,
                                    hidden=sandbox.hidden_paths(layout))
            outcome = run_limited(argv, cwd=str(ws), env=env,
                                  timeout=phase.timeout, stdout=so, stderr=se,
                                  token_file=token_file)
        shown = {"prompt": f'"$(cat {shlex.quote(str(prompt_file))})"'}
        record = {"name": phase.name,
                  "command": render_command(phase.command, env, values, shown, record=True),
                  "command_template": template,
                  "model": (mode.model or None) if names_model else None,
                  "exit_code": outcome.exit_code,
                  "timed_out": outcome.timed_out, "wall_seconds": outcome.seconds,
                  "stdout": str(stdout_path.relative_to(out.parent)),
                  "stderr": str(stderr_path.relative_to(out.parent)),
                  "prompt_file": str(prompt_file.relative_to(out.parent))}
        record.update(parse_claude_json(stdout_path.read_text(errors="replace")))
        phases.append(record)
        if outcome.timed_out:
            status, reason = "timeout", f"timed out after {phase.timeout:g} s"
        elif outcome.exit_code == 127:
            status, reason = "error", "command not found (exit 127)"
        elif outcome.exit_code != 0:
            status, reason = "failed", f"exit code {outcome.exit_code}"
        else:
            continue
        error = f"phase {phase.name}: {reason}"
        say_failed(mode, task, reason, stderr_path)
        break
    costs = [p["cost_usd"] for p in phases if p.get("cost_usd") is not None]
    jsonio.write_json(out, {
        "inputs": inputs, "mode": mode.name, "instance_id": task.instance_id,
        "status": status, "error": error, "phases": phases,
        "wall_seconds": round(time.monotonic() - start, 3),
        "cost_usd": round(sum(costs), 6) if costs else None,
        "tokens": _sum_tokens(phases),
    })


def gen_tasks(ctx):
    for bench, mode, task in ctx.agent_units():
        prompts = rendered_prompts(ctx.layout.templates_dir, mode, task)
        inputs = agent_inputs(mode, task, prompts)
        name = ctx.unit_name(bench, mode, task)
        yield {
            "basename": "agent",
            "name": name,
            "doc": f"run mode {mode.name} on {task.instance_id}",
            # An AGENT a shell cannot read is one error line (cli's preflight says it first).
            "actions": [(failing_on_user_error, [run_agent, ctx.layout, mode, task, prompts,
                                                 inputs, f"agent:{name}"])],
            "targets": [str(ctx.layout.agent_json(mode.name, task.instance_id))],
            "task_dep": [f"workspace:{name}"],
            # The stamps.py protocol; agent_inputs is the digest (stamps.stage_task's would
            # change it, and with it every paid agent.json already made).
            "uptodate": [(agent_finished, [ctx.layout, mode, task, f"agent:{name}"])],
        }
