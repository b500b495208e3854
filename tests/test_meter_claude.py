"""The metering proxy with the real Claude Code CLI (tests/claude_cli.py) against the Anthropic
stand-in, through the harness (issue 49): the shipped `plan-implement` mode, isolated, its
implement phase starting a subagent on another model. Every call goes through the attempt's
proxy; its metered tokens and cost are the stand-in's usage priced by hand at genai-prices'
published prices; the CLI's own cost agrees within 1%; its streams pass through; the key it was
given is in no file the run wrote; the attempt's ATIF trajectory passes harbor's own validator;
the phase's own figures (the CLI's result and transcript) count the subagent's model too. Those
are checked on one run (`subagent_run`). The usage parsing is checked on the bodies the CLI and
the stand-in exchanged (calls.bodies.jsonl.gz). A Codex CLI run from Claude Code's Bash tool
goes through the same proxy and is counted under its phase, also while another phase of its
group runs; phases that run at once (two Codex phases sharing one home, and a Claude Code phase)
are each metered under their own. Those are checked on one run of two modes (`grouped`)."""

import gzip
import json
import os
import secrets
import subprocess
import sys

import pytest
from anthropic_standin import Fault, StandIn, call, say
from claude_cli import SONNET, SONNET_PRICES, sonnet_cost, summed
from conftest import Project
from harbor.utils.trajectory_validator import TrajectoryValidator
from test_agent_claude import FIX, IMPLEMENT, PLAN, RAW, SUBTASK, ClaudeProject
from test_meter_apis import GPT5, GPT52
from test_meter_apis import by_hand as by_hand_openai
from test_record_schemas import mismatches

from nginx_eval.agent.programs.codex import CODEX
from nginx_eval.core import records
from nginx_eval.meter import summary, usage

# genai-prices 0.2.3's published prices (USD per million tokens) of the models the CLI asks
# for: the mode's, and its subagent's (the pinned CLI's "haiku"); the stand-in answers as asked.
PRICES = {
    SONNET: SONNET_PRICES,
    "claude-haiku-5-5": {
        "input_tokens": 0.10,
        "output_tokens": 0.50,
        "cache_creation_input_tokens": 0.125,
        "cache_read_input_tokens": 0.01,
    },
}


def by_hand(requests):
    """USD of the stand-in's answers, at each model's published prices."""
    total = 0.0
    for r in requests:
        total += sum(r["usage"][k] * p for k, p in PRICES[r["model"]].items()) / 1e6
    return total


def tokens_of(requests):
    return {
        "input": sum(r["usage"]["input_tokens"] for r in requests),
        "output": sum(r["usage"]["output_tokens"] for r in requests),
        "cache_read": sum(r["usage"]["cache_read_input_tokens"] for r in requests),
        "cache_creation": sum(r["usage"]["cache_creation_input_tokens"] for r in requests),
        "reasoning": 0,
    }


def files_holding(root, needle):
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            try:
                data = open(path, "rb").read()
            except OSError:
                continue
            if needle in data or (path.endswith(".gz") and needle in _gunzip(data)):
                found.append(path)
    return found


def _gunzip(data):
    try:
        return gzip.decompress(data)
    except (OSError, EOFError):
        return b""


@pytest.fixture(scope="module")
def subagent_run(claude_program, tmp_path_factory):
    """One run of the shipped plan-implement mode whose implement phase starts a subagent on
    another model, with a key of its own (`key`) and doit's output (`proc`): the tests of the
    metering and of the subagent's tokens read it."""
    project = Project(tmp_path_factory.mktemp("subagent"))
    with StandIn() as api:
        claude = ClaudeProject(project, claude_program, api)
        claude.key = f"sk-ant-meter-{secrets.token_hex(12)}"
        claude.api.api_key = claude.key
        claude.project.env["ANTHROPIC_API_KEY"] = claude.key
        claude.api.script[IMPLEMENT] = [
            [
                say("Asking for help."),
                call(
                    "Agent",
                    description="look around",
                    prompt=f"Please do {SUBTASK}",
                    subagent_type="general-purpose",
                    model="haiku",
                    run_in_background=False,
                ),
            ],
            [call("Bash", command=FIX)],
            [say("Implemented.")],
        ]
        claude.api.script[SUBTASK] = [
            [call("Bash", command="echo from the subagent")],
            [say("Done.")],
        ]
        claude.proc, _ = claude.run("tiny:plan-implement")
        yield claude


def test_every_call_of_an_attempt_is_metered_priced_and_kept_without_its_key(subagent_run):
    claude, key, proc = subagent_run, subagent_run.key, subagent_run.proc
    agent = claude.agent("plan-implement")
    assert agent["status"] == "completed" and agent["isolation"] == "srt"
    answered = [r for r in claude.api.messages_requests() if r["usage"]]
    assert {r["marker"] for r in answered} == {PLAN, IMPLEMENT, SUBTASK}

    # Metered: the stand-in's usage, priced by hand; the run's figures are the metered ones.
    assert agent["cost_source"] == "metered"
    assert agent["cost_usd"] == pytest.approx(by_hand(answered), rel=1e-9)
    assert agent["tokens"] == tokens_of(answered)
    metered = agent["metered"]
    assert (metered["calls"], metered["billed_calls"], metered["unpriced_calls"]) == (
        # all but the preflight's two: the key's from this machine, the endpoint's from the
        # sandbox through a proxy of the preflight's own
        len(claude.api.requests) - 2,
        len(answered),
        0,
    )
    assert metered["price_table"] == "genai-prices 0.2.3"
    plan, implement = agent["phases"]
    assert plan["metered"]["cost_usd"] == pytest.approx(
        by_hand([r for r in answered if r["marker"] == PLAN]), rel=1e-9
    )
    assert implement["metered"]["cost_usd"] == pytest.approx(
        by_hand([r for r in answered if r["marker"] != PLAN]), rel=1e-9
    )
    assert {m["program"] for m in implement["metered"]["models"].values()} == {"claude"}
    assert len(implement["metered"]["models"]) == 2  # the subagent's model apart
    # The CLI's own report agrees within 1% (both kept; the report warns past 1%).
    assert metered["self_reported_cost_usd"] == pytest.approx(
        sum(p["cost_usd"] for p in agent["phases"]), rel=1e-9
    )
    assert metered["difference"] <= 0.01, metered
    assert agent["self_reported"]["cost_usd"] == metered["self_reported_cost_usd"]
    print(
        f"metered {agent['cost_usd']:.6f} USD, Claude Code's own "
        f"{metered['self_reported_cost_usd']:.6f} USD (difference {metered['difference']:.2e})"
    )

    # The record: a line per call, attributed; streams passed on as they came.
    calls = summary.read_calls(claude.path("plan-implement", "agent/calls.jsonl.gz"))
    assert len(calls) == metered["calls"]
    assert mismatches(agent, records.AgentJson) == []  # the schemas of core/records.py
    assert [m for c in calls for m in mismatches(c, records.CallRecord)] == []
    assert {(c["run"], c["mode"], c["task"], c["attempt"]) for c in calls} == {
        ("default", "plan-implement", "tiny-add", 1)
    }
    assert [c["phase"] for c in calls] == sorted(
        (c["phase"] for c in calls), key=["plan", "implement"].index
    )
    streamed = [c for c in calls if c["tokens"]]
    assert all(c["stream"] and c["status"] == 200 and c["program"] == "claude" for c in streamed)
    assert all(0 < c["first_byte_ms"] <= c["seconds"] * 1000 for c in streamed)

    # Each API body the CLI got says what the stand-in billed (usage.py on captured bodies).
    bodies = [
        json.loads(line)
        for line in gzip.decompress(
            claude.path("plan-implement", "agent/calls.bodies.jsonl.gz").read_bytes()
        ).splitlines()
    ]
    parsed = []
    for b in bodies:
        response = b["response"]
        assert b["request"]["headers"].get("x-api-key") in (None, "[redacted]")
        if response["status"] == 200 and b["request"]["method"] == "POST":
            parsed.append(
                usage.parse_call(
                    "anthropic",
                    b["request"]["path"],
                    response["body"].encode(),
                    response["headers"].get("content-type"),
                )
            )
    as_sent = sorted(json.dumps([r["model"], r["usage"]], sort_keys=True) for r in answered)
    assert sorted(json.dumps([p.model, p.usage], sort_keys=True) for p in parsed) == as_sent
    assert {p.response_id for p in parsed} == {c["response_id"] for c in streamed}

    # The key reached the stand-in, and no file of the run: results, cache, project, logs.
    assert all(r["headers"].get("x-api-key") == key for r in claude.api.messages_requests())
    assert files_holding(claude.project.base, key.encode()) == []
    assert key not in proc.stdout + proc.stderr

    # The attempt as ATIF, valid by harbor's own validator (its API and its command line).
    path = claude.path("plan-implement", agent["atif"])
    validator = TrajectoryValidator()
    assert validator.validate(path), validator.get_errors()
    checked = subprocess.run(
        [sys.executable, "-m", "harbor.utils.trajectory_validator", str(path)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr
    root = json.loads(path.read_text())
    assert root["schema_version"] == "ATIF-v1.7"
    assert [s["message"] for s in root["steps"]] == [
        "phase 1, plan: completed",
        "phase 2, implement: completed",
    ]
    assert root["final_metrics"]["total_cost_usd"] == pytest.approx(agent["cost_usd"], rel=1e-9)
    plan_t, implement_t = root["subagent_trajectories"]
    (sub,) = implement_t["subagent_trajectories"]
    assert "haiku" in sub["agent"]["model_name"]
    steps = [s for t in (plan_t, implement_t, sub) for s in t["steps"]]
    measured = [s for s in steps if s.get("metrics", {}).get("cost_usd") is not None]
    assert len(measured) == len(answered)
    assert sum(s["metrics"]["cost_usd"] for s in measured) == pytest.approx(
        agent["cost_usd"], rel=1e-9
    )
    assert implement_t["final_metrics"]["total_cost_usd"] == pytest.approx(
        implement["metered"]["cost_usd"], rel=1e-9
    )
    ran = [c for s in implement_t["steps"] for c in s.get("tool_calls", [])]
    assert [c["function_name"] for c in ran] == ["Agent", "Bash"]
    assert ran[1]["arguments"] == {"command": FIX}
    agent_step = next(s for s in implement_t["steps"] if s.get("tool_calls"))
    (result,) = agent_step["observation"]["results"]
    assert result["subagent_trajectory_ref"] == [{"trajectory_id": sub["trajectory_id"]}]

    # The report counts the metered figures; the CLI's own agree, so no warning.
    claude.render("tiny:plan-implement")
    report = json.loads((claude.project.results / "default" / "report.json").read_text())
    shown = report["modes"]["plan-implement"]
    assert shown["cost_usd"] == round(agent["cost_usd"], 4)
    assert "differ by" not in (claude.project.results / "default" / "report.md").read_text()


def test_a_subagents_tokens_and_cost_are_counted(subagent_run):
    """The implement phase's own figures (the CLI's result and transcript) count its subagent's
    model beside the mode's."""
    claude = subagent_run
    agent = claude.agent("plan-implement")
    plan, phase = agent["phases"]
    sub = claude.api.messages_requests(SUBTASK)
    haiku = sub[0]["model"]
    assert "haiku" in haiku and set(phase["models"]) == {SONNET, haiku}
    session = phase["session_id"]
    everything = summed(claude.usages(IMPLEMENT, session) + claude.usages(SUBTASK))
    assert phase["tokens"]["input"] == everything["input_tokens"]
    assert phase["tokens"]["cache_read"] == everything["cache_read_input_tokens"]
    assert phase["models"][haiku]["input"] == summed(claude.usages(SUBTASK))["input_tokens"]
    assert phase["models"][haiku]["cost_usd"] > 0
    assert phase["cost_usd"] == pytest.approx(
        sonnet_cost(claude.usages(IMPLEMENT, session)) + phase["models"][haiku]["cost_usd"],
        rel=1e-6,
    )
    # The proxy's count (reasoning apart, none here) is the CLI's.
    assert agent["tokens"] == {
        k: plan["tokens"][k] + phase["tokens"][k] for k in phase["tokens"]
    } | {"reasoning": 0}
    assert agent["cost_source"] == "metered"
    transcript = claude.path("plan-implement", phase["transcript"]).read_text()
    assert '"agentId"' in transcript and "from the subagent" in transcript
    trajectory = claude.path("plan-implement", agent["trajectory"]).read_text()
    assert (
        "### Subagent" in trajectory and "**Bash** command: `echo from the subagent`" in trajectory
    )


NESTED = "CODEX-NESTED-CALL"
CLAUDE_PHASE = "${AGENT:-claude --output-format json --model {model} -p} {prompt}"


def group_mode(mode, models, group, phases):
    """modes.toml's text of a mode (model role sonnet) whose `phases` ({key: value} each) run
    at once in one group."""
    roles = ", ".join(f"{role} = {json.dumps(model)}" for role, model in models.items())
    text = f'\n[modes.{mode}]\nmodel = "sonnet"\nmodels = {{ {roles} }}\n'
    for phase in phases:
        text += f"[[modes.{mode}.phases]]\n" + "".join(
            f"{key} = {json.dumps(value)}\n" for key, value in dict(phase, group=group).items()
        )
    return text


def openai_cost(requests):
    """USD of the OpenAI stand-in's answers to `requests` at gpt-5.2's published prices."""
    total = 0.0
    for r in requests:
        cached = r["usage"]["input_tokens_details"]["cached_tokens"]
        tokens = {
            "input": r["usage"]["input_tokens"] - cached,
            "cache_read": cached,
            "output": r["usage"]["output_tokens"],
        }
        total += by_hand_openai(tokens, GPT52)
    return total


@pytest.fixture(scope="module")
def grouped(claude_program, codex_program, tmp_path_factory):
    """One `doit run` of two modes' agents (their attempts alone: nothing here reads a grade),
    each a parallel group, that the Codex tests below read:

    trio: two Codex phases (one home, one config.toml) and a Claude Code phase, each call held
      at its stand-in until the other phases' calls have arrived (so all are in flight at
      once); `released` names the phases whose call was let go so.
    nested: two Claude Code phases at once; nest's Bash tool runs `codex exec` (no -c of its
      phase: the home's config.toml names the proxy without a phase) while other is still
      waiting for its answer.

    The Claude Code phases' prompts have markers of their own: trio's claude the shipped
    implement prompt (IMPLEMENT), nested's raw (RAW) and plan (PLAN)."""
    import openai_standin

    project = Project(tmp_path_factory.mktemp("grouped"))
    with StandIn() as api, openai_standin.StandIn() as openai_api:
        claude = ClaudeProject(project, claude_program, api)
        claude.openai = openai_api
        bin_dir = project.base / "codex-bin"
        bin_dir.mkdir()
        (bin_dir / "codex").symlink_to(codex_program)
        project.env.update(
            OPENAI_BASE_URL=openai_api.url + "/v1",
            OPENAI_API_KEY=openai_api.api_key,
            NGINX_EVAL_AGENT_MAX_RETRIES="0",
            PATH=f"{bin_dir}{os.pathsep}{project.env['PATH']}",
        )
        codex = dict(program="codex", model="codex", command=CODEX.command(False))
        claude.add_mode(
            group_mode(
                "trio",
                {"sonnet": SONNET, "codex": "gpt-5.2-codex"},
                "all",
                [
                    dict(codex, name="codex-raw", prompt="prompt_raw.md.j2"),
                    dict(codex, name="codex-plan", prompt="prompt_plan.md.j2"),
                    dict(name="claude", prompt="prompt_implement.md.j2", command=CLAUDE_PHASE),
                ],
            )
        )
        bash_command = (
            "${AGENT:-claude --allowedTools Bash,Read --output-format json --model {model} -p} "
            "{prompt}"
        )
        claude.add_mode(
            group_mode(
                "nested",
                {"sonnet": SONNET},
                "both",
                [
                    dict(name="nest", prompt="prompt_raw.md.j2", command=bash_command),
                    dict(name="other", prompt="prompt_plan.md.j2", command=CLAUDE_PHASE),
                ],
            )
        )
        arrivals = {
            "codex-raw": lambda: openai_api.responses_requests(RAW),
            "codex-plan": lambda: openai_api.responses_requests(PLAN),
            "claude": lambda: api.messages_requests(IMPLEMENT),
        }
        claude.released = set()

        def others_arrived(name):
            def check():
                if all(arrived() for other, arrived in arrivals.items() if other != name):
                    claude.released.add(name)
                    return True
                return False

            return check

        nested = (
            f"{codex_program} exec --json --skip-git-repo-check -s danger-full-access -m gpt-5 "
            f"'{NESTED} please' </dev/null"
        )
        api.script = {
            IMPLEMENT: [[say("CLAUDE done.")]],
            RAW: [
                [call("Bash", command=nested)],
                [call("Bash", command=FIX)],
                [say("Nested done.")],
            ],
            PLAN: [[say("PLAN: a + b.")]],
        }
        api.faults = [
            Fault(delay=60, marker=IMPLEMENT, until=others_arrived("claude")),
            # Both of nested's phases have started before the nested call; the other waits
            # until it is made.
            Fault(delay=60, marker=RAW, turn=0, until=PLAN),
            Fault(delay=60, marker=PLAN, until=lambda: openai_api.responses_requests(NESTED)),
        ]
        openai_api.script = {
            RAW: [[openai_standin.say("CODEX-RAW done.")]],
            PLAN: [[openai_standin.say("CODEX-PLAN: the plan is a + b.")]],
            NESTED: [[openai_standin.say("Nested and done.")]],
        }
        openai_api.faults = [
            openai_standin.Fault(delay=60, marker=RAW, until=others_arrived("codex-raw")),
            openai_standin.Fault(delay=60, marker=PLAN, until=others_arrived("codex-plan")),
        ]
        claude.arrivals = set(arrivals)
        claude.run("agent:tiny/trio/tiny-add", "agent:tiny/nested/tiny-add")
        yield claude


def test_a_codex_run_from_claude_codes_bash_is_counted_under_its_phase(grouped):
    """nested's nest phase: its Bash tool runs `codex exec`: both programs' calls go through the
    attempt's proxy (Codex by its home's config.toml, which names the proxy), each priced, the
    nested one attributed to the phase under program codex."""
    claude, openai_api = grouped, grouped.openai
    agent = claude.agent("nested")
    assert agent["status"] == "completed", agent["error"]
    answered = [r for m in (RAW, PLAN) for r in claude.api.messages_requests(m) if r["usage"]]
    codex_answers = [r for r in openai_api.responses_requests(NESTED) if r.get("usage")]
    assert len(codex_answers) == 1, openai_api.requests
    calls = summary.read_calls(claude.path("nested", "agent/calls.jsonl.gz"))
    billed = [c for c in calls if c["tokens"]]
    nested_calls = [c for c in billed if c["program"] == "codex"]
    assert [(c["phase"], c["api"], c["model"]) for c in nested_calls] == [
        ("nest", "openai-responses", "gpt-5")
    ]
    (u,) = [r["usage"] for r in codex_answers]
    cached = u["input_tokens_details"]["cached_tokens"]
    codex_tokens = {
        "input": u["input_tokens"] - cached,
        "cache_read": cached,
        "cache_write": 0,
        "output": u["output_tokens"],
        "reasoning": u["output_tokens_details"]["reasoning_tokens"],
    }
    assert nested_calls[0]["tokens"] == codex_tokens
    codex_cost = by_hand_openai(codex_tokens, GPT5)
    assert nested_calls[0]["cost_usd"] == pytest.approx(codex_cost, rel=1e-12)
    # The run's cost is both programs'; the nest phase's models name each program.
    assert agent["cost_usd"] == pytest.approx(by_hand(answered) + codex_cost, rel=1e-9)
    nest = next(p for p in agent["phases"] if p["name"] == "nest")
    programs = {m: v["program"] for m, v in nest["metered"]["models"].items()}
    assert programs["gpt-5"] == "codex" and set(programs.values()) == {"claude", "codex"}
    # Claude Code's own cost leaves Codex out: the difference is the nested call's.
    own = agent["metered"]["self_reported_cost_usd"]
    assert own == pytest.approx(by_hand(answered), rel=0.01)
    print(
        f"\nnested codex: {codex_cost:.8f} USD metered under phase nest, program codex; "
        f"run {agent['cost_usd']:.8f} USD"
    )


def test_codex_and_claude_phases_at_once_are_each_metered_under_their_own_phase(grouped):
    """trio: every call is counted under the phase that made it (each Codex phase's base URL
    names its phase on its command line), each phase's metered cost is its own calls' at the
    published prices (gpt-5.2-codex at gpt-5.2's, the table's entry for it)."""
    claude, openai_api = grouped, grouped.openai
    agent = claude.agent("trio")
    assert agent["status"] == "completed", agent["error"]
    # Each call waited for the other two phases' first calls: all were in flight at once.
    assert claude.released == claude.arrivals
    calls = summary.read_calls(claude.path("trio", "agent/calls.jsonl.gz"))
    billed = [c for c in calls if c["tokens"]]
    assert {c["phase"] for c in billed if c["program"] == "claude"} == {"claude"}
    assert {c["phase"] for c in billed if c["program"] == "codex"} == {"codex-raw", "codex-plan"}
    assert {c["priced_as"] for c in billed if c["program"] == "codex"} == {"openai/gpt-5.2"}
    metered = {p["name"]: p["metered"] for p in agent["phases"]}
    answered = {
        "codex-raw": [r for r in openai_api.responses_requests(RAW) if r.get("usage")],
        "codex-plan": [r for r in openai_api.responses_requests(PLAN) if r.get("usage")],
    }
    for name, requests in answered.items():
        assert metered[name]["billed_calls"] == len(requests) == 1, (name, metered[name])
        assert metered[name]["cost_usd"] == pytest.approx(openai_cost(requests), rel=1e-9)
        assert set(metered[name]["models"]) == {"gpt-5.2-codex"}
    # The two Codex phases' prompts differ: so do their costs, each its own.
    assert metered["codex-raw"]["cost_usd"] != metered["codex-plan"]["cost_usd"]
    claude_answers = [r for r in claude.api.messages_requests(IMPLEMENT) if r["usage"]]
    assert metered["claude"]["cost_usd"] == pytest.approx(by_hand(claude_answers), rel=1e-9)
    assert metered["claude"]["billed_calls"] == len(claude_answers)
    print(
        "\nparallel group: "
        + ", ".join(
            f"{n} {metered[n]['billed_calls']} calls {metered[n]['cost_usd']:.8f} USD"
            for n in ("codex-raw", "codex-plan", "claude")
        )
    )


def test_a_codex_run_from_bash_in_a_parallel_group_is_counted_under_its_phase(grouped):
    """nested: the Codex call is counted under the phase that started it, by the base URL its
    environment gave it (sent in the proxy's header), not under the phase that started last."""
    claude, openai_api = grouped, grouped.openai
    agent = claude.agent("nested")
    assert agent["status"] == "completed", agent["error"]
    assert [r for r in openai_api.responses_requests(NESTED) if r.get("usage")]
    calls = summary.read_calls(claude.path("nested", "agent/calls.jsonl.gz"))
    billed = [c for c in calls if c["tokens"]]
    assert [(c["phase"], c["model"]) for c in billed if c["program"] == "codex"] == [
        ("nest", "gpt-5")
    ]
    metered = {p["name"]: p["metered"] for p in agent["phases"]}
    assert metered["nest"]["models"]["gpt-5"]["program"] == "codex"
    assert "gpt-5" not in metered["other"]["models"]
    plan_answers = [r for r in claude.api.messages_requests(PLAN) if r["usage"]]
    assert metered["other"]["billed_calls"] == len(plan_answers)
