"""The four modes as the benchmark's users run them (issue 50), through `doit run` on the fixture
benchmark: impl's loop, full's scripted planner with critique and reducer at once and its
consensus on Codex falling back to Claude, nlcmd's one planner call driving subagents; and a
mode whose agent home holds a Claude Code plugin tree. impl, the plugin tree's mode, full with
Codex answering and nlcmd are read on one run (`planned`), full with Codex failing on one of its
own (`fallback`); full's and nlcmd's loops end on their first call (impl's shows the fresh
calls after it).

The shipped modes run the real Claude Code and Codex CLIs against the stand-ins
(tests/anthropic_standin.py, tests/openai_standin.py); what is asserted is the stand-ins'
request logs: the calls in order, each one's model, which were in flight at once. How a loop
ends (marker, limit, no progress) and `score = "finished"` are checked with a scripted agent
(a Python script as the phase's command, unisolated), which costs no CLI start.
"""

import json
import shutil
import sys
import textwrap

import openai_standin
import pytest
from anthropic_standin import StandIn, call, say
from conftest import SOURCE_ROOT, Project
from test_agent_claude import FIX, needs_srt
from workflow_scripts import (
    CODEX,
    CODEX_PLAN,
    COMMAND,
    CONSENSUS,
    CRITIQUE,
    FIXTURE_MESSAGE,
    NLCMD_CODEX,
    OPUS,
    PROPOSE,
    REDUCE,
    SONNET,
    SUBAGENTS,
    UNDERSTAND,
    agent_call,
    cli_environment,
    full_scripts,
    iteration,
    nlcmd_scripts,
    overlapped,
    printf_quoted,
)
from workflow_scripts import calls as standin_calls

from nginx_eval.meter import summary


class Workflow:
    """The fixture project with the shipped modes.toml, the real CLIs first on PATH, the
    stand-ins as their APIs."""

    def __init__(self, project, claude_program, api, codex_program=None, openai_api=None):
        self.project, self.api, self.openai = project, api, openai_api
        shutil.copy(SOURCE_ROOT / "modes.toml", project.root / "modes.toml")
        project.env = cli_environment(
            project.base, project.env, claude_program, api, codex_program, openai_api
        )

    def run(self, *modes, env=None, check=True):
        return self.project.doit(
            "run", *(f"tiny:{m}" for m in modes), "instances=tiny-add", env=env, check=check
        )

    def agent(self, mode):
        return self.project.read(mode, "tiny-add", "agent.json")

    def calls(self, markers):
        """[(marker, model, first request time, last answer time)] of each marker's requests
        at the Anthropic stand-in, in the order they began."""
        return [c[:4] for c in standin_calls(self.api, markers)]


# The plans the consensus writes (the Codex stand-in's; the opus fallback's, PLANNER_SCRIPT's;
# the command's consensus subagent's file), which the loop's prompt carries after them.
PLAN_BY_OPUS = "PLAN-BY-OPUS: apply the fix."
PLAN_OF_SUBAGENTS = "PLAN-OF-SUBAGENTS: apply the fix"


def one_call_loop(plan: str) -> dict:
    """A loop that ends on its first call: keyed by the `plan` its prompt carries (longer than
    the phrase of the call's number, so that the stand-in takes it: the longest marker found),
    the call fixes the bug, writes its commit message and the marker file at once. impl's loop
    (loop_script) shows the fresh calls after the first."""
    assert len(plan) > len(iteration(1))
    write = (
        f"mkdir -p .tmp && printf {printf_quoted(FIXTURE_MESSAGE)} > .tmp/commit-message-1.txt"
        " && printf 'Fix the bug\\nISSUE FIXED\\nThe fix is in.\\n' > .tmp/finalize.txt"
    )
    return {plan: [[say("Fixing it."), call("Bash", command=f"{FIX} && {write}")], [say("Done.")]]}


@pytest.fixture(scope="module")
def planned(claude_program, codex_program, tmp_path_factory):
    """One `doit run` of the shipped impl, full (Codex answering its consensus) and nlcmd and of
    a mode `kit` (add_plugin_mode), which the tests of all four read: their stand-in scripts
    have no marker in common (full's and nlcmd's loops are keyed by their plans,
    one_call_loop)."""
    project = Project(tmp_path_factory.mktemp("planned"))
    with StandIn() as api, openai_standin.StandIn() as openai_api:
        workflow = Workflow(project, claude_program, api, codex_program, openai_api)
        kit_script = add_plugin_mode(workflow)
        full_script, full_faults, full_codex = full_scripts(FIX)
        nlcmd_script, nlcmd_faults, nlcmd_codex = nlcmd_scripts(FIX)
        api.script = {
            **full_script,
            **nlcmd_script,
            **kit_script,
            **one_call_loop(CODEX_PLAN),
            **one_call_loop(PLAN_OF_SUBAGENTS),
        }
        api.faults = full_faults + nlcmd_faults
        openai_api.script = {**full_codex, **nlcmd_codex}
        workflow.run("impl", "kit", "full", "nlcmd")
        yield workflow


@pytest.fixture(scope="module")
def fallback(claude_program, codex_program, tmp_path_factory):
    """One `doit run` of the shipped full whose Codex consensus meets an API that answers 500."""
    project = Project(tmp_path_factory.mktemp("fallback"))
    with StandIn() as api, openai_standin.StandIn() as openai_api:
        workflow = Workflow(project, claude_program, api, codex_program, openai_api)
        script, api.faults, openai_api.script = full_scripts(FIX)
        api.script = {**script, **one_call_loop(PLAN_BY_OPUS)}
        openai_api.faults = [openai_standin.Fault(status=500)]
        workflow.run("full")
        yield workflow


@needs_srt
def test_impl_is_a_loop_of_fresh_calls_that_ends_on_the_marker(planned):
    workflow = planned
    assert {r["marker"] for r in workflow.api.messages_requests() if r["marker"]} >= {
        iteration(1),
        iteration(2),
    }
    agent = workflow.agent("impl")
    assert agent["status"] == "completed", agent["error"]
    calls = agent["phases"]
    assert [(p["name"], p.get("iteration"), p["model"]) for p in calls] == [
        ("implement", 1, SONNET),
        ("implement", 2, SONNET),
    ]
    # Fresh calls: two sessions; the second's prompt carries the first's output and message.
    first = workflow.api.messages_requests(iteration(1))
    second = workflow.api.messages_requests(iteration(2))
    sessions = {r["headers"].get("x-claude-code-session-id") for r in first + second}
    assert len(sessions) == 2 and calls[0]["session_id"] != calls[1]["session_id"]
    # gh succeeded without reaching anything; the push was refused (agent/stubs.py).
    shell = json.dumps(first[-1]["body"]["messages"][-1])
    assert "gh=0" in shell and "push=1" in shell and "refused by the benchmark harness" in shell, (
        shell
    )
    prompt = json.dumps(second[0]["body"]["messages"][0])
    assert "FIRST-CALL-OUTPUT: the fix is in." in prompt and "Make add() add" in prompt
    loop = agent["loop"]
    assert loop == {
        "phase": "implement",
        "iterations": 2,
        "ended": "marker",
        "commits": 1,
        "marker": True,
        "max": 10,
    }
    assert agent["attempts"][-1]["loop"] == loop
    # The harness committed call 1 with the agent's message; call 2 changed nothing.
    assert calls[0]["commit"] and calls[1]["commit"] is None
    # The attempt's trajectory: each iteration a phase with its own conversation, stamped with
    # the time it began.
    task_dir = workflow.project.task_dir("impl", "tiny-add")
    trajectory = json.loads((task_dir / agent["atif"]).read_text())
    first, second = (json.dumps(t) for t in trajectory["subagent_trajectories"])
    assert iteration(1) in first and iteration(2) not in first and iteration(2) in second
    began = [s["timestamp"] for s in trajectory["steps"]]
    assert began[0] < began[1], began
    patch = workflow.project.read("impl", "tiny-add", "patch.json")
    assert patch["files"] == ["src/core/calc.c"]
    assert workflow.project.read("impl", "tiny-add", "grade.json")["status"] == "resolved"
    (row,) = [
        json.loads(line)
        for line in (workflow.project.results / "default" / "impl" / "results.jsonl")
        .read_text()
        .splitlines()
    ]
    assert row["score"] == "on_disk" and row["loop"]["ended"] == "marker"
    print(f"\nimpl: {[(p['name'], p['iteration'], p['model']) for p in calls]}, loop {loop}")


@needs_srt
@pytest.mark.e2e
@pytest.mark.parametrize("codex_fails", [False, True], ids=["codex", "fallback"])
def test_full_plans_in_five_calls_with_two_at_once_then_loops(request, codex_fails):
    workflow_codex = request.getfixturevalue("fallback" if codex_fails else "planned")
    agent = workflow_codex.agent("full")
    assert agent["status"] == "completed", agent["error"]
    calls = workflow_codex.calls([UNDERSTAND, PROPOSE, CRITIQUE, REDUCE, CONSENSUS])
    claude_calls = [(c[0], c[1]) for c in calls]
    expected = [(UNDERSTAND, SONNET), (PROPOSE, OPUS)]
    assert claude_calls[:2] == expected
    assert {c[0]: c[1] for c in calls[2:4]} == {CRITIQUE: OPUS, REDUCE: OPUS}
    critique, reduce = (next(c for c in calls if c[0] == m) for m in (CRITIQUE, REDUCE))
    assert overlapped(critique, reduce), calls
    # The metering proxy counts each of the two under its own phase, though they ran at once.
    metered = {p["name"]: p["metered"] for p in agent["phases"]}
    assert metered["critique"]["calls"] >= 1 and metered["reducer"]["calls"] >= 1, metered
    codex = workflow_codex.openai.responses_requests(CONSENSUS)
    assert codex and all(r["model"] == CODEX for r in codex)
    # The consensus read all four reports.
    text = json.dumps(codex[0]["body"])
    for mark in ("MAP:", "PROPOSAL:", "CRITIQUE:", "REDUCTION:"):
        assert mark in text
    names = [
        (p["name"], p.get("program"), p["model"], p.get("fallback", False)) for p in agent["phases"]
    ]
    loop = PLAN_BY_OPUS if codex_fails else CODEX_PLAN
    if codex_fails:
        assert claude_calls[4:] == [(CONSENSUS, OPUS)]
        assert names[4:6] == [
            ("consensus", "codex", CODEX, False),
            ("consensus", "claude", OPUS, True),
        ]
        assert agent["phases"][4]["replaced_by"] == f"claude {OPUS}"
        plan = "PLAN-BY-OPUS"
    else:
        assert len(claude_calls) == 4 and names[4] == ("consensus", "codex", CODEX, False)
        plan = "PLAN-BY-CODEX"
    assert [n[0] for n in names] == ["understander", "proposer", "critique", "reducer"] + [
        "consensus"
    ] * (2 if codex_fails else 1) + ["implement"]
    # The loop got the plan (its one call is keyed by it: one_call_loop).
    loop_prompt = json.dumps(workflow_codex.api.messages_requests(loop)[0]["body"])
    assert plan in loop_prompt and iteration(1) in loop_prompt
    assert agent["loop"]["ended"] == "marker" and agent["loop"]["iterations"] == 1
    assert min(c[2] for c in workflow_codex.calls([loop])) > max(c[3] for c in calls)
    assert workflow_codex.project.read("full", "tiny-add", "grade.json")["status"] == "resolved"
    # The report names the consensus that ran, the planner's share and how the loop ended.
    run_dir = workflow_codex.project.render("instances=tiny-add")
    report = json.loads((run_dir / "report.json").read_text())
    (facts,) = [m for m in report["workflow"]["modes"] if m["name"] == "full"]
    consensus = next(p for p in facts["phases"] if p["name"] == "consensus")
    if codex_fails:
        assert consensus["ran"] == {f"codex {CODEX}": 1, f"claude {OPUS}": 1}
    else:
        assert consensus["ran"] == {f"codex {CODEX}": 1}
    assert 0 < facts["planner"]["time_share"] < 1 and facts["loops"]["ended"] == {"marker": 1}
    md = (run_dir / "report.md").read_text()
    assert "## Phases and loops" in md and f"codex {CODEX} ×1" in md
    # What the agent did, from its trajectory: the loop's first call edited calc.c with sed,
    # nothing built or tested; the edit came while that call ran.
    (process,) = [m for m in report["process"]["modes"] if m["name"] == "full"]
    did = {b["name"]: b["attempts"] for b in process["behaviours"]}
    assert did == {"built": 0, "tested": 0, "failed_test_before_edit": 0, "edited": 1}
    first, edit = agent["phases"][0], process["first_edit"]["median"]
    fixing = next(p for p in agent["phases"] if p.get("iteration") == 1)
    assert fixing["started"] - 0.01 <= first["started"] + edit <= fixing["ended"] + 0.01
    assert "## What the agents did" in md
    print(
        f"\nfull ({'fallback' if codex_fails else 'codex'}): {names}; critique and reducer "
        f"overlapped: {critique[2]:.2f}-{critique[3]:.2f} / {reduce[2]:.2f}-{reduce[3]:.2f}"
    )


CALLS = "agent/calls.jsonl.gz"


@needs_srt
def test_nlcmd_is_one_opus_call_driving_subagents_then_the_loop(planned):
    """The consensus subagent asks Codex from its Bash tool, as its definition says
    (templates/agent-homes/planner/agents/consensus.md): metered under the plan phase."""
    workflow = planned
    subs = SUBAGENTS
    agent = workflow.agent("nlcmd")
    assert agent["status"] == "completed", agent["error"]
    plan = agent["phases"][0]
    assert (plan["name"], plan["model"]) == ("plan", OPUS)
    assert plan["artifact_source"] == ".tmp/4-consensus.md"
    top = workflow.api.messages_requests(COMMAND)
    assert {r["model"] for r in top} == {OPUS}
    calls = workflow.calls(list(subs.values()))
    assert [c[0] for c in calls[:2]] == [subs["understander"], subs["proposer"]], calls
    assert {c[0] for c in calls[2:4]} == {subs["critic"], subs["reducer"]}, calls
    assert calls[4][0] == subs["consensus"], calls
    # Each stage began after the ones it reads had answered (foreground subagents, as the
    # command asks: Claude Code starts them in the background unless told otherwise).
    assert calls[0][3] <= calls[1][2] <= min(calls[2][2], calls[3][2]), calls
    assert max(calls[2][3], calls[3][3]) <= calls[4][2], calls
    models = {c[0]: c[1] for c in calls}
    # The mode's models, not the CLI's own newest sonnet (claude-sonnet-5-5 for `model: sonnet`).
    assert models[subs["understander"]] == SONNET
    assert all(models[subs[k]] == OPUS for k in ("proposer", "critic", "reducer", "consensus"))
    assert overlapped(calls[2], calls[3]), calls
    loop_prompt = json.dumps(workflow.api.messages_requests(PLAN_OF_SUBAGENTS)[0]["body"])
    assert "PLAN-OF-SUBAGENTS" in loop_prompt and iteration(1) in loop_prompt
    assert agent["loop"]["ended"] == "marker"
    (asked,) = [r for r in workflow.openai.responses_requests(NLCMD_CODEX) if r.get("usage")]
    calls_of_codex = [
        c
        for c in summary.read_calls(workflow.project.task_dir("nlcmd", "tiny-add") / CALLS)
        if c["program"] == "codex" and c["tokens"]
    ]
    # The consensus's definition names the mode's codex model, which the model was told.
    told = json.dumps(workflow.api.messages_requests(subs["consensus"])[0]["body"]["system"])
    assert f"-m {CODEX}" in told and asked["model"] == CODEX
    assert [(c["phase"], c["model"]) for c in calls_of_codex] == [("plan", CODEX)]
    assert plan["metered"]["models"][asked["model"]]["program"] == "codex"
    # Half the mode's time for the plan (1800 s), the rest for the loop.
    assert "--model " + OPUS in plan["command"]
    assert workflow.project.read("nlcmd", "tiny-add", "grade.json")["status"] == "resolved"
    print(
        f"\nnlcmd: plan on {OPUS}; subagents {[(c[0], c[1]) for c in calls]}; the consensus's "
        f"Codex: {asked['model']}, phase plan, {calls_of_codex[0]['cost_usd']:.8f} USD"
    )


# -- the loop's endings and score = "finished", with a scripted agent --------------------------

SCRIPTED = textwrap.dedent(
    """\
    import os, re, subprocess, sys
    prompt = open(sys.argv[1]).read()
    n = int(re.search(r"this is call (\\d+) of", prompt).group(1))
    how = sys.argv[2]
    os.makedirs(".tmp", exist_ok=True)
    if how != "idle":
        with open(f".tmp/commit-message-{n}.txt", "w") as f:
            f.write(f"step {n}\\n")
    if how == "marker" and n == 1:
        subprocess.run(["sed", "-i", "s/a - b/a + b/", "src/core/calc.c"], check=True)
    if how == "marker" and n == 2:
        open(".tmp/finalize.txt", "w").write("title\\nIssue resolved\\n")
    if how == "limit":
        open(f"step-{n}.txt", "w").write("x\\n")
    print("output of call", n)
    """
)


SCENARIOS = ("marker", "limit", "idle")


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """One run of two modes per scenario of the scripted agent, up to their patches, which the
    scenario's test reads: loopy-<scenario> (score on_disk) and loopy-done-<scenario> (score
    finished)."""
    project = Project(tmp_path_factory.mktemp("scripted"))
    script = project.base / "agent.py"
    script.write_text(SCRIPTED)
    shutil.copy(SOURCE_ROOT / "modes.toml", project.root / "modes.toml")
    with open(project.root / "modes.toml", "a") as f:
        for scenario in SCENARIOS:
            for name, score in (("loopy", "on_disk"), ("loopy-done", "finished")):
                name = f"{name}-{scenario}"
                f.write(
                    f'\n[modes.{name}]\nisolation = "none"\nscore = "{score}"\ntimeout = 600\n'
                    f'[[modes.{name}.phases]]\nname = "implement"\n'
                    f'prompt = "prompt_loop.md.j2"\n'
                    f'share = "rest"\nloop = {{ max = 3, no_progress = 2 }}\n'
                    f'command = "{sys.executable} {script} {{prompt_file}} {scenario}"\n'
                )
    # Their attempts and patches: no grade is read.
    modes = [f"patch:tiny/{m}-{s}/tiny-add" for s in SCENARIOS for m in ("loopy", "loopy-done")]
    project.doit("run", *modes)
    return project


@pytest.mark.e2e
@pytest.mark.parametrize(
    "scenario, ended, iterations, commits",
    [("marker", "marker", 2, 1), ("limit", "limit", 3, 3), ("idle", "no_progress", 2, 0)],
)
def test_a_loop_ends_on_the_marker_at_its_limit_or_without_progress(
    scripted, scenario, ended, iterations, commits
):
    loopy, done = f"loopy-{scenario}", f"loopy-done-{scenario}"
    for mode in (loopy, done):
        agent = scripted.read(mode, "tiny-add", "agent.json")
        assert agent["loop"]["ended"] == ended and agent["loop"]["iterations"] == iterations
        assert agent["loop"]["commits"] == commits
        assert agent["status"] == ("completed" if ended == "marker" else "failed")
        assert [p["iteration"] for p in agent["phases"]] == list(range(1, iterations + 1))
    # Each call after the first is told what the one before printed, and the feedback.
    prompt = (
        scripted.task_dir(loopy, "tiny-add") / "agent" / "1-implement-2.prompt.md"
    ).read_text()
    assert "output of call 1" in prompt
    if scenario == "idle":
        assert "wrote no commit message" in prompt and "changed nothing" in prompt
    on_disk = scripted.read(loopy, "tiny-add", "patch.json")
    finished = scripted.read(done, "tiny-add", "patch.json")
    if scenario == "marker":
        assert on_disk["files"] == finished["files"] == ["src/core/calc.c"]
    elif scenario == "limit":
        # What the loop left on disk is scored by default; the harness's .tmp/ never is.
        assert on_disk["files"] == ["step-1.txt", "step-2.txt", "step-3.txt"]
        assert finished["files"] == [] and "not scored" in finished["note"]


def test_the_report_gives_the_users_ratios_with_intervals():
    from nginx_eval.report.workflow import workflow_facts

    def row(seconds, cost, resolved=True, marker=True):
        return {
            "agent_seconds": seconds,
            "cost_usd": cost,
            "resolved": resolved,
            "loop": {"iterations": 2, "ended": "marker" if marker else "limit", "marker": marker},
            "phase_figures": [
                {
                    "name": "plan",
                    "program": "claude",
                    "model": OPUS,
                    "seconds": seconds / 2,
                    "cost_usd": cost / 2,
                    "loop": False,
                },
                {
                    "name": "implement",
                    "program": "claude",
                    "model": SONNET,
                    "seconds": seconds / 2,
                    "cost_usd": cost / 2,
                    "loop": True,
                },
            ],
        }

    rows = {
        "full": {f"t{i}": row(100 + i, 1.0 + i) for i in range(5)},
        "nlcmd": {f"t{i}": row(260 + 3 * i, 2.0 + i, marker=i != 0) for i in range(5)},
        "impl": {f"t{i}": row(50 + i, 0.5) for i in range(5)},
    }
    facts = workflow_facts(rows, ["impl", "full", "nlcmd"])
    pairs = {(p["a"], p["b"]): p for p in facts["pairs"]}
    nlcmd_full = pairs[("nlcmd", "full")]
    assert nlcmd_full["time"]["tasks"] == 5
    assert nlcmd_full["time"]["ratio"] == pytest.approx(
        sum(260 + 3 * i for i in range(5)) / 510, abs=1e-4
    )
    low, high = nlcmd_full["time"]["interval"]
    assert low < nlcmd_full["time"]["ratio"] < high
    assert pairs[("full", "impl")]["cost"]["ratio"] == pytest.approx(15 / 2.5, abs=1e-4)
    nlcmd = next(m for m in facts["modes"] if m["name"] == "nlcmd")
    assert nlcmd["planner"]["time_share"] == 0.5
    assert nlcmd["loops"]["ended"] == {"limit": 1, "marker": 4}
    assert nlcmd["loops"]["resolved_without_marker"] == ["t0"]


PLUGIN_COMMAND = "Review this checkout with the kit's two reviewers"


def add_plugin_mode(workflow):
    """Mode `kit`: its agent home holds a Claude Code plugin tree unchanged (a command and two
    subagents on models of their own), its one phase's prompt runs the plugin's command; and
    the stand-in's script of that command and of the subagents."""
    templates = workflow.project.root / "templates"
    shutil.copytree(SOURCE_ROOT / "templates", templates)
    plugin = templates / "agent-homes" / "kit" / "plugins" / "review-kit"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(
        json.dumps({"name": "review-kit", "version": "0.1.0", "description": "two reviewers"})
    )
    (plugin / "commands").mkdir()
    (plugin / "commands" / "review.md").write_text(
        f"---\ndescription: review\n---\n{PLUGIN_COMMAND}: $ARGUMENTS\n"
    )
    (plugin / "agents").mkdir()
    for name, model in (("fast", "haiku"), ("deep", "opus")):
        (plugin / "agents" / f"{name}.md").write_text(
            f"---\nname: {name}\ndescription: the {name} reviewer\ntools: Read, Grep\n"
            f"model: {model}\n---\nYou review code {name}ly.\n"
        )
    (templates / "prompt_review.md.j2").write_text("/review-kit:review {{ issue_file }}\n")
    with open(workflow.project.root / "modes.toml", "a") as f:
        f.write(
            '\n[modes.kit]\nmodel = "claude-sonnet-4-5"\nagent_home = "kit"\n'
            '[[modes.kit.phases]]\nname = "review"\nprompt = "prompt_review.md.j2"\n'
            'command = "claude --plugin-dir {agent_home}/plugins --allowedTools '
            'Agent,Read,Grep --output-format json --model {model} -p {prompt}"\n'
        )
    return {
        PLUGIN_COMMAND: [
            [
                agent_call("review-kit:fast", "SUB-FAST-MARK"),
                agent_call("review-kit:deep", "SUB-DEEP-MARK"),
            ],
            [say("Reviewed.")],
        ],
        "SUB-FAST-MARK": [[say("fast review")]],
        "SUB-DEEP-MARK": [[say("deep review")]],
    }


@needs_srt
def test_a_plugin_tree_in_the_agent_home_loads_with_its_subagents_and_their_models(planned):
    """A mode's agent home holding a Claude Code plugin tree unchanged: its command runs, and
    its two subagents, called by their plugin-qualified names, reach the API with their own
    models."""
    workflow = planned
    agent = workflow.agent("kit")
    assert agent["status"] == "completed", agent["error"]
    fast = workflow.api.messages_requests("SUB-FAST-MARK")
    deep = workflow.api.messages_requests("SUB-DEEP-MARK")
    assert fast and deep, [r["marker"] for r in workflow.api.messages_requests()]
    assert "haiku" in fast[0]["model"] and "opus" in deep[0]["model"]
    assert {r["model"] for r in workflow.api.messages_requests(PLUGIN_COMMAND)} == {SONNET}
    print(f"\nplugin subagents: fast {fast[0]['model']}, deep {deep[0]['model']}")
