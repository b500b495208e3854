"""``doit run ... dry_run=1``: what the command would do, before any money or time is spent.

It asks each task the command reaches the question `doit run` would ask (doitext/pruning.py:
the stages' own uptodate checks, stamps.py) and prints, stage by stage, the units already done
and those to run; then the agent runs it would start, with their expected cost and time from
the finished agent runs of the same mode in every run under results/ (agent.json's cost_usd and
wall_seconds), or "unknown" where there are none. It starts nothing (no agent, clone, build or
prove) and writes nothing: no run.json, no lock, no doit database row, no cached build plan
(cli.load_dodo returns before any of them; pipeline.Context keeps the plan in memory).

A task after one that runs counts as to run (it may turn out current once the other has run),
except an agent run, whose inputs are known before anything runs;
a task that only doit's database can answer (results.jsonl, validation.md: file_dep) counts as
"to check" when everything before it is done.
"""

import glob
import math
import os
import statistics
import sys
from dataclasses import dataclass

from .agent.prompts import missing_prompt
from .core import jsonio
from .core.errors import UserError
from .core.limits import chosen_counts
from .core.outcomes import UNFINISHED_AGENT
from .core.tasknames import AGENT, BASE, BUILD, TESTS, VALIDATE, WORKSPACE, task_name, unit_name
from .doitext.invocation import LOADER_OPTIONS_WITH_VALUE, command_targets
from .doitext.pruning import ALWAYS, Wants, full_name, own_answer, settling
from .pipeline import DEFAULT_TASK, Context, expand_default, redo_forgotten, stage_dicts

# Stages whose actions check their output again when doit runs them anyway (`-a`): an agent
# and a build are never paid for twice (stamps.py), a workspace, test tree or base build that
# is there is kept, a validation's runs are kept.
CHECKS_ITSELF = (AGENT, BUILD, WORKSPACE, TESTS, BASE, VALIDATE)


@dataclass
class StageCounts:
    done: int = 0
    run: int = 0
    check: int = 0


@dataclass
class Earlier:
    """The finished agent runs of one mode found under results/ (every run)."""

    runs: int
    costs: list
    seconds: list


def earlier_runs(results_root: str | os.PathLike[str], mode_name: str) -> Earlier:
    """Finished agent runs of `mode_name` in every run of `results_root`: the count, and the
    costs and wall seconds they recorded (an agent CLI that reports no cost has none)."""
    costs, seconds, runs = [], [], 0
    for path in glob.glob(
        os.path.join(glob.escape(str(results_root)), "*", mode_name, "*", "agent.json")
    ):
        record = jsonio.read_json(path)
        if not isinstance(record, dict) or record.get("status") in UNFINISHED_AGENT:
            continue
        runs += 1
        if isinstance(record.get("cost_usd"), (int, float)):
            costs.append(float(record["cost_usd"]))
        if isinstance(record.get("wall_seconds"), (int, float)):
            seconds.append(float(record["wall_seconds"]))
    return Earlier(runs, costs, seconds)


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def agent_line(mode_name: str, count: int, earlier: Earlier, at_once: int) -> str:
    """One mode's agent runs to start, with the expected cost and time, or "unknown"."""
    head = f"  {mode_name}: {count} agent run{'s' if count != 1 else ''}"
    if earlier.costs:
        mean = statistics.fmean(earlier.costs)
        cost = (
            f"expected cost ${mean * count:.2f} (${mean:.2f} each, the mean of "
            f"{len(earlier.costs)} earlier run{'s' if len(earlier.costs) != 1 else ''})"
        )
    else:
        cost = "expected cost unknown (no earlier run of this mode recorded a cost)"
    if earlier.seconds:
        each = statistics.fmean(earlier.seconds)
        waves = math.ceil(count / max(1, at_once))
        time = (
            f"time {minutes(each)} each, about {minutes(each * waves)} with "
            f"{min(count, at_once)} at once"
        )
    else:
        time = "time unknown"
    return f"{head}: {cost}, {time}"


def classify(ctx: Context, argv: list[str]) -> tuple[dict, dict]:
    """({stage: StageCounts}, {mode name: agent runs to start}) of `doit run argv`, in the
    order of the pipeline's stages."""
    dicts = list(redo_forgotten(stage_dicts(ctx), ctx.layout))
    found = settling(dicts, argv, [DEFAULT_TASK])
    if found is None:
        raise UserError(
            "dry_run=1 needs task names, not a pattern or a file (only doit knows what those reach)"
        )
    by_name, reached, is_settled = found
    always = any(a in ALWAYS for a in argv)
    stages: dict[str, StageCounts] = {}
    agents: dict[str, int] = {}
    starting: set[str] = set()
    wants: Wants = {}  # what own_answer learns of the uptodate functions, kept for every task
    bench = ctx.benchmark
    for d in dicts:
        name = full_name(d) if "basename" in d else None
        if name is None or name not in reached or not d.get("actions"):
            continue
        # The report's task is named after the benchmark (<bench>:report) or `default`.
        stage = "report" if d["basename"] in (bench.name, DEFAULT_TASK) else d["basename"]
        counts = stages.setdefault(stage, StageCounts())
        if always and not (d["basename"] in CHECKS_ITSELF and own_answer(d, wants)):
            state = "run"
        elif is_settled(name) or (d["basename"] == AGENT and own_answer(d, wants)):
            # An agent run's inputs (agent_inputs) are known before anything runs: what it
            # says now it says after the tasks before it, which would only make its workspace.
            state = "done"
        elif d.get("file_dep") and all(is_settled(dep) for dep in d.get("task_dep") or ()):
            state = "check"
        else:
            state = "run"
        setattr(counts, state, getattr(counts, state) + 1)
        if d["basename"] == AGENT and state == "run":
            mode = name.split(":", 1)[1].split("/")[1]
            agents[mode] = agents.get(mode, 0) + 1
            starting.add(name)
    # An agent run whose mode lacks a prompt template: the run's preflight would refuse it.
    for unit_bench, unit_mode, task in ctx.agent_units():
        if task_name(AGENT, unit_name(unit_bench, unit_mode, task)) in starting:
            missing = missing_prompt(ctx.layout.templates_dir, unit_mode, task)
            if missing:
                raise missing
    return stages, agents


def command_words(argv: list[str]) -> list[str]:
    """The words of `doit run` after the command name, without dry_run= and doit's loader
    options (-f dodo.py): the command the preview describes."""
    words, out = list(argv), []
    while words:
        word = words.pop(0)
        if word in LOADER_OPTIONS_WITH_VALUE:
            words = words[1:]
        elif word != "run" and not word.startswith("dry_run="):
            out.append(word)
    return out


def preview_lines(ctx: Context, argv: list[str]) -> list[str]:
    """What `doit run argv dry_run=1` prints."""
    stages, agents = classify(ctx, argv)
    targets = expand_default(ctx, command_targets(argv))
    bench = ctx.benchmark
    modes = sorted(
        {
            t.split(":", 1)[1]
            for t in targets
            if t.startswith(f"{bench.name}:") and t.split(":", 1)[1] in ctx.modes
        }
        | ({m.name for m in ctx.group_mode_list()} if bench.name in targets else set())
    )
    n = len(ctx.tasks)
    shown = " ".join(command_words(argv))
    lines = [
        f"nginx-eval: dry run of `doit run {shown}`"
        f" in run {ctx.layout.run}: benchmark {bench.name}, {n} "
        f"task{'s' if n != 1 else ''}"
        + (f", modes {', '.join(modes)}" if modes else "")
        + "; nothing is started or written"
    ]
    rows = [
        (stage, str(c.done), str(c.run), str(c.check) if c.check else "")
        for stage, c in stages.items()
    ]
    head = ("stage", "done", "to run", "to check")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
    for r in [head] + rows:
        lines.append(
            "  "
            + "  ".join(
                [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in (1, 2, 3)]
            ).rstrip()
        )
    if any(c.check for c in stages.values()):
        lines.append("  (to check: doit's database decides; milliseconds each)")
    if not any(c.run for c in stages.values()):
        lines.append("nothing to run: every unit of the command is done")
    cache = ctx.layout.cache
    lines.append(
        f"cache: {cache} ("
        + (
            "NGINX_EVAL_CACHE"
            if os.environ.get("NGINX_EVAL_CACHE")
            else "the default; NGINX_EVAL_CACHE moves it"
        )
        + ("" if cache.is_dir() else "; empty: every clone and build is made there")
        + f"), results: {ctx.layout.run_dir}"
    )
    total = sum(agents.values())
    lines.append(f"agent runs to start: {total}")
    at_once = chosen_counts(ctx.options)["agent"]
    for mode in sorted(agents):
        lines.append(
            agent_line(mode, agents[mode], earlier_runs(ctx.layout.results_root, mode), at_once)
        )
    if total and ctx.options.max_cost:
        lines.append(
            f"  the run's budget: max_cost=${ctx.options.max_cost:g} (agent runs stop "
            "starting once the recorded cost reaches it)"
        )
    return lines


def print_preview(ctx: Context, argv: list[str]) -> None:
    """Print preview_lines on stdout."""
    sys.stdout.write("\n".join(preview_lines(ctx, argv)) + "\n")
    sys.stdout.flush()
