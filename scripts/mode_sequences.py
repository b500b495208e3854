#!/usr/bin/env python3
"""The call sequences of the shipped workflow modes on real nginx tasks (issue 50): each of raw,
impl, full and nlcmd, and full once more with its Codex consensus failing, run through
``doit run nginx:<mode>`` with the real Claude Code and Codex CLIs, in the sandbox, against the
stand-in APIs (tests/anthropic_standin.py, tests/openai_standin.py) started here on 127.0.0.1.

    NGINX_EVAL_REPO_URL='/srv/mirrors/{owner}+{name}/repo' \\
        python scripts/mode_sequences.py [--tasks ID,ID,ID] [--out FILE] [--work DIR]

The stand-ins answer as tests/workflow_scripts.py scripts them for the fixture benchmark
(tests/test_workflow_modes.py), with the task's gold fix (the mirror's diff base..fix, written
with a heredoc and ``git apply``) as the fix and its commit's message as the commit message.
Printed, per task and mode, and written as JSON to --out: the calls in order (program, model,
start and end in seconds from the attempt's start, read from the stand-ins' request logs),
which overlapped in time (a call and the calls made inside it aside), how the loop ended
(agent.json's ``loop``), the verdict (grade.json's ``status``) and which program and model ran
each phase by the report (report.json's ``workflow``). The builds are made first, by a gold run
of the tasks on two workers; the modes then run one task at a time, each in a run of its own
(run=<scenario>-<commit>: its report is of that task alone), cache and results under --work,
with strict=0.
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(SOURCE))
sys.path.insert(0, str(SOURCE / "tests"))
import agent_clis  # noqa: E402
import anthropic_standin  # noqa: E402
import claude_cli  # noqa: E402
import openai_standin  # noqa: E402
import workflow_scripts as ws  # noqa: E402
from nginx_mirrors import doit_run  # noqa: E402

from nginx_eval.agent.programs import registry  # noqa: E402
from nginx_eval.agent.sandbox import sandbox_problem  # noqa: E402
from nginx_eval.core import jsonio  # noqa: E402

# Small builds: no configure flags, one short test file, a fix of a few lines.
DEFAULT_TASKS = (
    "nginx__nginx-f35475c083d4",  # range_clearing.t, 2022
    "nginx__nginx-85137dd2a639",  # merge_slashes.t, 2019
    "nginx__nginx-2ac24f1c88b7",  # http_uri.t, 2019
)
# (name, mode, the Codex stand-in fails)
SCENARIOS = (
    ("raw", "raw", False),
    ("impl", "impl", False),
    ("full", "full", False),
    ("full-fallback", "full", True),
    ("nlcmd", "nlcmd", False),
)
LOOP_MAX = 10
# Each marker's call, by name; `within`: the call it is made inside of.
NAMES = {
    ws.RAW: "solve",
    ws.UNDERSTAND: "understander",
    ws.PROPOSE: "proposer",
    ws.CRITIQUE: "critique",
    ws.REDUCE: "reducer",
    ws.CONSENSUS: "consensus",
    ws.COMMAND: "plan (/plan-issue)",
    **{m: f"subagent {k}" for k, m in ws.SUBAGENTS.items()},
    ws.NLCMD_CODEX: "codex exec of the consensus subagent",
    **{ws.iteration(n): f"implement {n}" for n in range(1, LOOP_MAX + 1)},
}
WITHIN = {
    **{m: ws.COMMAND for m in ws.SUBAGENTS.values()},
    ws.NLCMD_CODEX: ws.SUBAGENTS["consensus"],
}
MARKERS = list(NAMES)
# time.time() - time.monotonic(): the stand-ins record monotonic times, agent.json's phases
# are seconds from the attempt's start, whose wall time the trajectory gives.
CLOCK = time.time() - time.monotonic()


def git(repo: str, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", repo, *args], capture_output=True, text=True, check=True
    ).stdout


def scripts(scenario: str, mode: str, fix: str, message: str):
    """(Anthropic script, its faults, OpenAI script, OpenAI faults) of one scenario."""
    if mode == "raw":
        return ws.raw_script(fix), [], {}, []
    if mode == "impl":
        return ws.loop_script(fix, message), [], {}, []
    made = ws.full_scripts if mode == "full" else ws.nlcmd_scripts
    script, faults, codex = made(fix, message)
    failing = [openai_standin.Fault(status=500)] if scenario.endswith("fallback") else []
    return script, faults, codex, failing


def attempt_began(task_dir: Path, agent: dict) -> float | None:
    """The wall time the last attempt began: its trajectory's first step's, less that phase's
    start in the attempt."""
    atif = jsonio.read_json(task_dir / agent["atif"]) if agent.get("atif") else None
    if not atif or not atif.get("steps") or not agent.get("phases"):
        return None
    first = datetime.datetime.fromisoformat(atif["steps"][0]["timestamp"].replace("Z", "+00:00"))
    return first.timestamp() - agent["phases"][0]["started"]


def ancestors(marker: str) -> list[str]:
    """The calls `marker`'s call is made inside of, nearest first."""
    out = []
    while marker in WITHIN:
        marker = WITHIN[marker]
        out.append(marker)
    return out


def phase_of(name: str, program: str, phases: list[dict]) -> list[float] | None:
    """[started, ended] of the agent.json phase that made call `name` on `program`: the phase
    of that name ("implement 2": iteration 2; "plan (/plan-issue)": plan), None for a call
    made inside another (a subagent)."""
    words = name.split(" ")
    for p in phases:
        if p["name"] == words[0] and p.get("program") == program:
            if len(words) == 2 and words[1].isdigit() and p.get("iteration") != int(words[1]):
                continue
            return [p["started"], p["ended"]]
    return None


def sequence(api, openai_api, began: float | None, phases: list[dict]) -> dict:
    """The calls the stand-ins saw, in order (each with its phase's span in agent.json), and
    which overlapped."""
    seen = ws.calls(api, MARKERS, openai_api)
    shift = CLOCK - began if began is not None else -seen[0][2] if seen else 0.0
    calls = [
        {
            "call": NAMES[marker],
            "program": program,
            "model": model,
            "start": round(start + shift, 2),
            "end": round(end + shift, 2),
            "requests": len(
                (api.messages_requests if program == "claude" else openai_api.responses_requests)(
                    marker
                )
            ),
            "phase": None if marker in WITHIN else phase_of(NAMES[marker], program, phases),
            **({"within": NAMES[WITHIN[marker]]} if marker in WITHIN else {}),
        }
        for marker, model, start, end, program in seen
    ]
    nested = {(m, a) for m in WITHIN for a in ancestors(m)}
    nested |= {(a, m) for m, a in nested}
    overlaps = [
        [NAMES[a[0]], NAMES[b[0]]]
        for i, a in enumerate(seen)
        for b in seen[i + 1 :]
        if ws.overlapped(a, b) and (a[0], b[0]) not in nested
    ]
    return {"calls": calls, "overlaps": overlaps, "relative_to": "attempt" if began else "first"}


def deviations(r: dict) -> list[str]:
    """How run `r` differs from the sequence its mode should issue (docs/agents.md#modes)."""
    calls = [(c["call"], c["program"], c["model"]) for c in r["calls"]]
    loop = [("implement 1", "claude", ws.SONNET), ("implement 2", "claude", ws.SONNET)]
    pairs = {frozenset(p) for p in r["overlaps"]}
    found = []
    if r["mode"] == "raw":
        want = [("solve", "claude", ws.SONNET)]
    elif r["mode"] == "impl":
        want = loop
    elif r["mode"] == "full":
        review = [("critique", "claude", ws.OPUS), ("reducer", "claude", ws.OPUS)]
        want = [("understander", "claude", ws.SONNET), ("proposer", "claude", ws.OPUS)]
        want += calls[2:4] if sorted(calls[2:4]) == review else review  # either order
        want += [("consensus", "codex", ws.CODEX)]
        want += [("consensus", "claude", ws.OPUS)] if r["codex_fails"] else []
        want += loop
        if frozenset(("critique", "reducer")) not in pairs:
            found.append("critique and reducer did not overlap")
        ran = (r["ran"] or {}).get("consensus")
        told = {f"codex {ws.CODEX}": 1, **({f"claude {ws.OPUS}": 1} if r["codex_fails"] else {})}
        if ran != told:
            found.append(f"the report says the consensus ran on {ran}, not {told}")
    else:
        sub = {k: ws.OPUS for k in ws.STAGE_NAMES} | {"understander": ws.SONNET}
        subagents = [(f"subagent {k}", "claude", m) for k, m in sub.items()]
        review = sorted(subagents[2:4])
        want = [("plan (/plan-issue)", "claude", ws.OPUS), *subagents[:2]]
        want += calls[3:5] if sorted(calls[3:5]) == review else subagents[2:4]
        want += [subagents[4], ("codex exec of the consensus subagent", "codex", ws.CODEX)]
        want += loop
        if frozenset(("subagent critic", "subagent reducer")) not in pairs:
            found.append("the critic and reducer subagents did not overlap")
    if calls != want:
        found.append(f"calls {calls}, not {want}")
    if r["mode"] != "raw" and (r["loop"] or {}).get("ended") != "marker":
        found.append(f"the loop ended {(r['loop'] or {}).get('ended')}, not on the marker")
    if r["verdict"] != "resolved":
        found.append(f"verdict {r['verdict']}")
    return found


def ran_by_report(run_dir: Path, mode: str) -> dict | None:
    """{phase: {"<program> <model>": calls}} of the mode in report.json's workflow section."""
    report = jsonio.read_json(run_dir / "report.json") or {}
    for facts in (report.get("workflow") or {}).get("modes") or []:
        if facts.get("name") == mode:
            return {p["name"]: p["ran"] for p in facts["phases"]}
    return None


def run_one(work, cache, env, api, openai_api, scenario, mode, task, repo) -> dict:
    iid = task["instance_id"]
    diff = git(repo, "diff", task["base_commit"], task["fix_commit"])
    message = git(repo, "log", "-1", "--format=%B", task["fix_commit"]).strip() + "\n"
    fix = ws.apply_patch_command(diff)
    script, faults, codex, codex_faults = scripts(scenario, mode, fix, message)
    api.script, api.faults = script, faults
    openai_api.script, openai_api.faults = codex, codex_faults
    api.requests.clear()
    openai_api.requests.clear()
    # A run of its own per scenario and task: its report is of that task alone.
    run = f"{scenario}-{iid.rsplit('-', 1)[-1]}"
    task_dir = work / "results" / run / mode / iid
    # A second run of the script in the same --work runs the agents again: what a run left is
    # what keeps its units up to date.
    shutil.rmtree(task_dir, ignore_errors=True)
    start = time.monotonic()
    doit_run(
        work,
        cache,
        f"nginx:{mode}",
        f"instances={iid}",
        f"run={run}",
        "strict=0",
        env=env,
        timeout=3600,
        report=True,  # ran_by_report reads it
    )
    wall = time.monotonic() - start
    agent = jsonio.read_json(task_dir / "agent.json")
    grade = jsonio.read_json(task_dir / "grade.json")
    phases = [
        {
            k: p.get(k)
            for k in (
                "name",
                "iteration",
                "program",
                "model",
                "started",
                "ended",
                "fallback",
                "replaced_by",
                "exit_code",
            )
            if p.get(k) is not None
        }
        for p in agent["phases"]
    ]
    return {
        "task": iid,
        "scenario": scenario,
        "mode": mode,
        "codex_fails": scenario.endswith("fallback"),
        **sequence(api, openai_api, attempt_began(task_dir, agent), phases),
        "phases": phases,
        "agent_status": agent["status"],
        "agent_error": agent["error"],
        "loop": agent.get("loop"),
        "verdict": grade["status"],
        "ran": ran_by_report(work / "results" / run, mode),
        "wall_seconds": round(wall, 1),
    }


def show(r: dict) -> str:
    lines = [
        f"== {r['task']} {r['scenario']}: verdict {r['verdict']}, agent {r['agent_status']}"
        f"{' (' + r['agent_error'] + ')' if r['agent_error'] else ''}, {r['wall_seconds']} s"
    ]
    for c in r["calls"]:
        inside = f"  [in {c['within']}]" if "within" in c else ""
        if c["phase"]:
            inside += f"  (phase {c['phase'][0]:.2f}-{c['phase'][1]:.2f})"
        lines.append(
            f"   {c['start']:8.2f} {c['end']:8.2f}  {c['program']:6} {c['model']:18} "
            f"{c['call']}{inside}"
        )
    lines.append(f"   overlapped: {'; '.join(' & '.join(p) for p in r['overlaps']) or 'none'}")
    lines.append(f"   loop: {json.dumps(r['loop'])}")
    lines.append(f"   report ran: {json.dumps(r['ran'])}")
    lines.append(f"   as expected: {'; '.join(r['deviations']) or 'yes'}")
    return "\n".join(lines)


def markdown(figures: dict) -> str:
    """A table per scenario of a --out file: each call (program, model) with its requests' span
    on each task, in seconds from the attempt's start, and in brackets its phase's (the
    program's start to its exit); then overlaps, loop endings, verdicts."""
    ids = figures["tasks"]
    short = [i.rsplit("-", 1)[-1] for i in ids]
    out = []
    for scenario, _, _ in SCENARIOS:
        runs = {r["task"]: r for r in figures["runs"] if r["scenario"] == scenario}
        if not runs:
            continue
        first = runs[ids[0]]
        out += [f"**{scenario}**", ""]
        out.append("| call | program | model | " + " | ".join(short) + " |")
        out.append("|---|---|---|" + "---|" * len(ids))
        for n, c in enumerate(first["calls"]):
            spans = []
            for iid in ids:
                calls = runs[iid]["calls"]
                same = calls[n] if n < len(calls) and calls[n]["call"] == c["call"] else None
                if same is None:  # a pair that ran at once, in the other order
                    same = next((d for d in calls if d["call"] == c["call"]), None)
                span = f"{same['start']:.1f}–{same['end']:.1f}" if same else "—"
                if same and same.get("phase"):
                    span += " [{:.1f}–{:.1f}]".format(*same["phase"])
                spans.append(span)
            depth = len(ancestors(next(m for m, n in NAMES.items() if n == c["call"])))
            name = "↳ " * depth + c["call"]
            out.append(f"| {name} | {c['program']} | {c['model']} | " + " | ".join(spans) + " |")
        overlaps = sorted({" & ".join(sorted(p)) for r in runs.values() for p in r["overlaps"]})
        loops = Counter((r["loop"] or {}).get("ended", "no loop") for r in runs.values())
        verdicts = Counter(r["verdict"] for r in runs.values())
        out += [
            "",
            f"Overlapped: {'; '.join(overlaps) or 'none'}. Loop: "
            + ", ".join(f"{k} ×{v}" for k, v in loops.items())
            + ". Verdicts: "
            + ", ".join(f"{k} ×{v}" for k, v in verdicts.items())
            + ". `doit run` wall time per task: "
            + ", ".join(f"{runs[i]['wall_seconds']:.0f}" for i in ids)
            + " s.",
            "",
        ]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS))
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--work", type=Path, help="the project's cache and results (default: new)")
    parser.add_argument(
        "--markdown", type=Path, help="print the tables of a --out file made before, and stop"
    )
    args = parser.parse_args()
    if args.markdown:
        print(markdown(jsonio.read_json(args.markdown)))
        return
    url = os.environ.get("NGINX_EVAL_REPO_URL", "")
    if "{owner}" not in url:
        sys.exit("nginx-eval: error: NGINX_EVAL_REPO_URL must name the mirrors ({owner}+{name})")
    problem = sandbox_problem()
    if problem:
        sys.exit(f"nginx-eval: error: no usable agent sandbox: {problem}")
    claude, why = claude_cli.find_or_install()
    codex, why_codex = agent_clis.find_or_install(registry.named("codex"))
    if not claude or not codex:
        sys.exit(f"nginx-eval: error: {why or why_codex}")
    repo = url.format(owner="nginx", name="nginx")
    shipped = {t["instance_id"]: t for t in jsonio.read_json(SOURCE / "tasks/nginx.json")["tasks"]}
    ids = args.tasks.split(",")
    unknown = [i for i in ids if i not in shipped]
    if unknown:
        sys.exit(f"nginx-eval: error: --tasks: not in tasks/nginx.json: {', '.join(unknown)}")
    work = args.work or Path(tempfile.mkdtemp(prefix="mode-sequences-"))
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "cache"
    began = time.monotonic()
    results = []
    with anthropic_standin.StandIn() as api, openai_standin.StandIn() as openai_api:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("NGINX_EVAL_", "TEST_NGINX"))
        }
        env.update(
            NGINX_EVAL_REPO_URL=url,
            NGINX_EVAL_TOOLCHAIN=os.environ.get("NGINX_EVAL_TOOLCHAIN", "host"),
        )
        clis = Path(tempfile.mkdtemp(dir=work, prefix="clis-"))  # each run's stand-ins' own
        env = ws.cli_environment(clis, env, claude, api, codex, openai_api)
        print(f"+ builds: nginx:gold on {len(ids)} tasks ({work})", flush=True)
        doit_run(
            work,
            cache,
            "-n",
            "2",
            "nginx:gold",
            f"instances={','.join(ids)}",
            "strict=0",
            "report=0",
            "run=builds",
            env=env,
            timeout=3600,
        )
        builds = time.monotonic() - began
        print(f"  {builds:.0f} s", flush=True)
        for iid in ids:
            for scenario, mode, _ in SCENARIOS:
                r = run_one(work, cache, env, api, openai_api, scenario, mode, shipped[iid], repo)
                r["deviations"] = deviations(r)
                results.append(r)
                print(show(r), flush=True)
    total = time.monotonic() - began
    print(f"wall time {total:.0f} s (builds {builds:.0f} s), on {os.cpu_count()} processors")
    if args.out:
        jsonio.write_text(
            args.out,
            json.dumps(
                {
                    "date": datetime.date.today().isoformat(),
                    "tasks": ids,
                    "claude_code": claude_cli.setup_setting("CLAUDE_CODE_VERSION"),
                    "codex": claude_cli.setup_setting(registry.named("codex").version_setting),
                    "wall_seconds": round(total, 1),
                    "builds_seconds": round(builds, 1),
                    "runs": results,
                },
                indent=2,
            )
            + "\n",
        )
    off = [f"{r['task']} {r['scenario']}" for r in results if r["deviations"]]
    if off:
        sys.exit(f"not the expected sequence: {', '.join(off)}")
    print(f"every mode issued its expected sequence on {len(ids)} tasks")


if __name__ == "__main__":
    main()
