"""Codex CLI and Gemini CLI end to end (issue 49): the real pinned programs (tests/agent_clis.py)
in the sandbox, against their stand-in APIs (tests/openai_standin.py, tests/gemini_standin.py),
through `doit run` on the fixture benchmark, each phase naming its program in modes.toml.

Each stand-in answers the shipped raw prompt with a call of the program's own shell tool that
fixes the fixture task's bug, then a text. Checked per program: the task resolves; the tokens
agent.json records are the stand-in's usage (cached tokens apart from input, reasoning inside
output); the web tools are gone from every request; the operator's own configuration,
instructions and environment reach neither the model nor the agent's shell; an overloaded API
is an infra error tried again; a bad key stops the run before any agent, in seconds, with one
line naming the program; the site's page shows the attempt step by step from its ATIF file.
What a fixing phase records, the site's page of it, the operator's configuration kept out and
the overloaded API tried again are checked on one run of both programs (`operated`); the
doctor's lines of both programs on two doctor runs of them together (`doctored`).
"""

import json
import os
import re
import shutil
import time
import urllib.parse
from types import SimpleNamespace

import gemini_standin
import markupsafe
import openai_standin
import pytest
from conftest import SOURCE_ROOT, Project
from harbor.utils.trajectory_validator import TrajectoryValidator
from test_agent_claude import FIX, RAW, needs_srt
from test_meter_apis import GEMINI_PRO, GPT5, by_hand

from nginx_eval.agent.programs import registry
from nginx_eval.core.layout import Layout
from nginx_eval.meter import summary
from nginx_eval.report import site_task as report_site_task

pytestmark = needs_srt
E2E = True  # `operated` starts the programs without naming their fixtures

MODELS = {"codex": "gpt-5-codex", "gemini": "gemini-2.5-pro"}
CALLS = "agent/calls.jsonl.gz"
LEAKS = ("OPERATOR-MEMORY-MARK", "OPERATOR-CONFIG-MARK", "OPERATOR-ENV-MARK")


class Program:
    """A program's side of a test: its stand-in module, how it calls its shell tool, the
    environment pointing it at the stand-in, the tokens a stand-in usage is recorded as."""

    def __init__(self, name, api, path):
        self.name, self.api, self.path = name, api, path
        self.program = registry.named(name)
        self.standin = openai_standin if name == "codex" else gemini_standin

    def shell(self, command):
        if self.name == "codex":
            return openai_standin.call("exec_command", cmd=command)
        return gemini_standin.call("run_shell_command", command=command)

    def env(self):
        url = self.api.url + ("/v1" if self.name == "codex" else "")
        return {self.program.base_url_variable: url, self.program.key_variable: self.api.api_key}

    def requests(self):
        if self.name == "codex":
            return self.api.responses_requests()
        return self.api.stream_requests()

    def tools(self, request):
        body = request["body"]
        if self.name == "codex":
            return [t.get("name") or t.get("type") for t in body.get("tools", [])]
        return [f["name"] for t in body.get("tools", []) for f in t.get("functionDeclarations", [])]

    def tokens(self, usage):
        if self.name == "codex":
            cached = usage["input_tokens_details"]["cached_tokens"]
            return {
                "input": usage["input_tokens"] - cached,
                "output": usage["output_tokens"],
                "cache_read": cached,
                "cache_creation": 0,
                "reasoning": usage["output_tokens_details"]["reasoning_tokens"],
            }
        cached = usage["cachedContentTokenCount"]
        return {
            "input": usage["promptTokenCount"] - cached,
            "output": usage["candidatesTokenCount"] + usage["thoughtsTokenCount"],
            "cache_read": cached,
            "cache_creation": 0,
            "reasoning": usage["thoughtsTokenCount"],
        }

    def cost_by_hand(self, requests):
        """USD of the stand-in's answers at genai-prices' published prices (gpt-5-codex is
        priced as gpt-5; gemini-2.5-pro's prompts here are under its 200k-token tier)."""
        prices = GPT5 if self.name == "codex" else GEMINI_PRO
        return sum(by_hand(self.tokens(r["usage"]), prices) for r in requests)


def configured(name, project, path, api, alone=True):
    """The fixture project with a mode `<program>` whose one phase names the program, the real
    CLI (`path`) first on PATH, its stand-in `api` as its API (no other API's variables set).
    alone=False adds the mode to a project configured for another program, keeping its mode
    and variables."""
    program = Program(name, api, path)
    bin_dir = project.base / f"{name}-bin"
    bin_dir.mkdir()
    (bin_dir / name).symlink_to(path)
    if alone:
        for variable in (
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "GEMINI_API_KEY",
        ):
            project.env.pop(variable, None)
        shutil.copy(SOURCE_ROOT / "modes.toml", project.root / "modes.toml")
    project.env.update(program.env())
    project.env.update(
        PATH=f"{bin_dir}{os.pathsep}{project.env['PATH']}",
        NGINX_EVAL_AGENT_BACKOFF="0.05",
        NGINX_EVAL_AGENT_MAX_RETRIES="0",
    )
    command = program.program.command(False).replace('"', '\\"')
    with open(project.root / "modes.toml", "a") as f:
        f.write(
            f'\n[modes.{name}]\nmodel = "{MODELS[name]}"\n[[modes.{name}.phases]]\n'
            f'name = "solve"\nprogram = "{name}"\nprompt = "prompt_raw.md.j2"\n'
            f'command = "{command}"\n'
        )
    api.script = {
        RAW: [
            [program.standin.say("Fixing it."), program.shell(FIX)],
            [program.standin.say("Fixed.")],
        ]
    }
    program.project = project
    return program


@pytest.fixture(params=["codex", "gemini"])
def agent(request, project):
    """configured(): the program of the test's parameter, in a project of the test's own."""
    name = request.param
    path = request.getfixturevalue(f"{name}_program")
    api = request.getfixturevalue("openai_api" if name == "codex" else "gemini_api")
    return configured(name, project, path, api)


ENV = "env | sort"


@pytest.fixture(scope="module")
def operated_both(request, tmp_path_factory):
    """One run of both programs' modes in one project (configured(), the second with
    alone=False) that the tests of a fixing phase, of the operator's configuration and of an
    overloaded API read ({name: Program}): an operator's own configuration of each program
    around it (operator_configuration); each API overloaded (503) for the first attempt's first
    call, which ends that attempt in infra_error (agent_retries=2); the second attempt's phase
    showing its shell's environment, then fixing the bug, then saying so."""
    project = Project(tmp_path_factory.mktemp("operated"))
    with openai_standin.StandIn() as openai_api, gemini_standin.StandIn() as gemini_api:
        programs = {}
        for name, api in (("codex", openai_api), ("gemini", gemini_api)):
            path = request.getfixturevalue(f"{name}_program")
            agent = configured(name, project, path, api, alone=not programs)
            operator_configuration(agent)
            say = agent.standin.say
            api.script = {
                RAW: [
                    [say("Looking."), agent.shell(ENV)],
                    [say("Fixing it."), agent.shell(FIX)],
                    [say("Fixed.")],
                ]
            }
            # Overloaded once: the first attempt ends in infra_error, the second fixes the bug.
            api.faults = [agent.standin.Fault(status=503, times=1)]
            programs[name] = agent
        start = time.monotonic()
        project.doit(
            "run", *(f"tiny:{n}" for n in programs), "instances=tiny-add", "agent_retries=2"
        )
        for agent in programs.values():
            agent.seconds = time.monotonic() - start
        yield programs


@pytest.fixture(scope="module", params=["codex", "gemini"])
def operated(request, operated_both):
    """operated_both's program of the test's parameter."""
    return operated_both[request.param]


def run(agent, *args, check=True, env=None):
    return agent.project.doit(
        "run", f"tiny:{agent.name}", "instances=tiny-add", *args, check=check, env=env
    )


def attempt_requests(agent):
    """The model requests of `operated`'s second attempt: all but the first attempt's one,
    which met the overload (and nothing else did)."""
    requests = agent.requests()
    assert [r["status"] for r in requests[:2]] == [503, 200], requests
    return requests[1:]


def assert_the_site_shows_the_attempt_from_its_atif_file(agent, record):
    """The site's page of the run's unit shows its phase turn by turn from the attempt's ATIF
    file as the harness wrote it (the proxy's record of the calls): the prompt, the shell call
    that fixed the bug with its output, the last answer; and links the file (report/site_task).
    Checked on the run the test below reads (`operated`): a run of its own would make the same
    one."""
    project = agent.project
    atif_file = project.task_dir(agent.name, "tiny-add") / record["atif"]
    trajectory = json.loads(atif_file.read_text())
    (solve,) = trajectory["subagent_trajectories"]
    agent_steps = [s for s in solve["steps"] if s["source"] == "agent"]
    run_dir = project.render(f"tiny:{agent.name}", "instances=tiny-add", site=True)
    layout = Layout(
        root=project.root, cache=project.cache, results_root=run_dir.parent, run=run_dir.name
    )
    page = layout.site_page(agent.name, "tiny-add")
    view = report_site_task.agent_view(layout, agent.name, "tiny-add", record, page)
    (phase,) = view["phases"]
    assert phase["steps_from"] == "atif" and phase["program"] == agent.name
    assert RAW in phase["prompt"]["text"]
    # A turn per answer the model gave, each with what the trajectory says it did.
    assert len(phase["turns"]) == len(agent_steps) == len(attempt_requests(agent))
    shell = {"codex": "exec_command", "gemini": "run_shell_command"}[agent.name]
    listed, fixed = [c for t in phase["turns"] for c in t["calls"]]
    assert (listed["name"], listed["input"]["text"], listed["shell"]) == (shell, ENV, True)
    assert (fixed["name"], fixed["input"]["text"], fixed["shell"]) == (shell, FIX, True)
    assert fixed["summary"] == " ".join(FIX.split())[:160]
    assert fixed["result"] and fixed["result"]["text"]
    assert [b["text"] for b in phase["turns"][-1]["texts"] if not b["reasoning"]] == ["Fixed."]
    assert [t["model"] for t in phase["turns"]] == [s.get("model_name") for s in agent_steps]
    # The page says it and links the ATIF file, which is there, and the first attempt's, moved
    # with its logs.
    kept = atif_file.parent / "attempt-1" / atif_file.name
    assert kept.is_file()
    assert view["atifs"] == [
        (1, report_site_task.link(kept, page)),
        (2, report_site_task.link(atif_file, page)),
    ]
    html = page.read_text()
    assert f'href="{view["atifs"][1][1]}"' in html and "ATIF trajectory" in html
    assert markupsafe.escape(FIX) in html and "Fixed." in html
    assert "No transcript" not in html
    for (_, href), path in zip(view["atifs"], (kept, atif_file), strict=True):
        target = urllib.parse.urljoin(page.as_uri(), href)
        assert urllib.parse.urlparse(target).path == str(path)
    print(
        f"\n{agent.name}: page turns {[len(t['calls']) for t in phase['turns']]} calls per turn, "
        f"ATIF {atif_file.stat().st_size} bytes"
    )


def test_a_phase_of_the_program_edits_the_fixture_and_resolves(operated):
    agent, seconds = operated, operated.seconds
    record = agent.project.read(agent.name, "tiny-add", "agent.json")
    assert record["status"] == "completed", record["error"]
    assert agent.project.read(agent.name, "tiny-add", "grade.json")["status"] == "resolved"
    requests = attempt_requests(agent)
    assert len(requests) >= 2 and all(r["status"] == 200 for r in requests)
    # Its web tools are gone from every request; its shell tool is there.
    web = {"codex": {"web_search"}, "gemini": {"google_web_search", "web_fetch"}}[agent.name]
    shell = {"codex": "exec_command", "gemini": "run_shell_command"}[agent.name]
    for r in requests:
        assert shell in agent.tools(r) and not web & set(agent.tools(r)), agent.tools(r)
    assert record["web_tools"] is False and record["isolation"] == "srt"
    # The tokens recorded are the stand-in's usage, added up: metered, every call through the
    # attempt's proxy (the home's config.toml names it, not the stand-in), priced by hand.
    expected = {k: sum(agent.tokens(r["usage"])[k] for r in requests) for k in record["tokens"]}
    assert record["tokens"] == expected and record["cost_source"] == "metered"
    cost = agent.cost_by_hand(requests)
    assert record["cost_usd"] == pytest.approx(cost, rel=1e-9)
    assert record["metered"]["billed_calls"] == len(requests)
    calls = summary.read_calls(agent.project.task_dir(agent.name, "tiny-add") / CALLS)
    billed = [c for c in calls if c["tokens"]]
    assert {(c["program"], c["phase"]) for c in billed} == {(agent.name, "solve")}
    (phase,) = record["phases"]
    # The CLI's own count, kept as it said it (it says no cost).
    own = {k: v for k, v in expected.items() if k != "reasoning"}
    assert {k: phase["tokens"][k] for k in own} == own and phase["cost_usd"] is None
    assert phase["metered"]["cost_usd"] == pytest.approx(cost, rel=1e-9)
    assert record["self_reported"]["cost_usd"] is None
    # The attempt as ATIF, read from the proxy's record of the calls, valid by harbor's own
    # validator: a step per answer, the shell call and its result, the metered cost per step.
    path = agent.project.task_dir(agent.name, "tiny-add") / record["atif"]
    validator = TrajectoryValidator()
    assert validator.validate(path), validator.get_errors()
    (solve,) = json.loads(path.read_text())["subagent_trajectories"]
    steps = [s for s in solve["steps"] if s["source"] == "agent"]
    assert len(steps) == len(requests)
    listed, ran = [c for s in steps for c in s.get("tool_calls", [])]
    assert listed["function_name"] == shell and ENV in listed["arguments"].values()
    assert ran["function_name"] == shell and FIX in ran["arguments"].values()
    fixing = next(s for s in steps if ran in s.get("tool_calls", []))
    (result,) = fixing["observation"]["results"]
    assert result["source_call_id"] == ran["tool_call_id"] and result["content"]
    assert sum(s["metrics"]["cost_usd"] for s in steps) == pytest.approx(cost, rel=1e-9)
    assert steps[-1]["message"] == "Fixed."
    pinned = agent.program.version_setting
    from claude_cli import setup_setting

    assert setup_setting(pinned) in record["agent_version"]
    # The program's version is an agent input: another version, another run.
    print(
        f"\n{agent.name}: {seconds:.1f} s; metered {record['cost_usd']:.8f} USD, by hand "
        f"{cost:.8f} USD; first request tools: {agent.tools(requests[0])}; "
        f"paths: {sorted({(r['method'], r['path']) for r in agent.api.requests})}"
    )
    # The site shows this attempt step by step from its ATIF file.
    assert_the_site_shows_the_attempt_from_its_atif_file(agent, record)


def operator_configuration(agent):
    """An operator whose own configuration of the program (in HOME, and where the program's
    variables point) holds instructions, settings and environment the run must not see. Each
    mark reaches the requests when the CLI is pointed at that configuration (measured with
    0.169.0 and 0.61.0)."""
    home = agent.project.base / "operator-home"
    if agent.name == "codex":
        for folder in (home / ".codex", agent.project.base / "codex-home"):
            folder.mkdir(parents=True)
            (folder / "AGENTS.md").write_text("Always say OPERATOR-MEMORY-MARK.\n")
            (folder / "config.toml").write_text(
                'developer_instructions = "Say OPERATOR-CONFIG-MARK."\n'
                '[shell_environment_policy]\nset = { OPERATOR_SETTING = "OPERATOR-ENV-MARK" }\n'
            )
        agent.project.env["CODEX_HOME"] = str(agent.project.base / "codex-home")
    else:
        for folder in (home / ".gemini", agent.project.base / "gemini-home" / ".gemini"):
            folder.mkdir(parents=True)
            (folder / "GEMINI.md").write_text("Always say OPERATOR-MEMORY-MARK.\n")
            # Read, it would ask for a login this machine does not have: the run would fail.
            (folder / "settings.json").write_text(
                json.dumps({"security": {"auth": {"selectedType": "oauth-personal"}}})
            )
            (folder / ".env").write_text("OPERATOR_SETTING=OPERATOR-ENV-MARK\n")
        agent.project.env["GEMINI_CLI_HOME"] = str(agent.project.base / "gemini-home")
    agent.project.env["HOME"] = str(home)


def test_the_operators_own_configuration_reaches_neither_the_model_nor_the_shell(operated):
    agent = operated
    record = agent.project.read(agent.name, "tiny-add", "agent.json")
    assert record["status"] == "completed", record["error"]
    text = json.dumps([r["body"] for r in agent.api.requests])
    assert [m for m in LEAKS if m in text] == []
    # The agent's shell ran (its output is in the later requests) with the harness's home.
    assert "NGINX_EVAL_INSTANCE=tiny-add" in text
    assert f"{agent.program.home_variable}=" in text and "agent-homes" in text
    assert agent.project.read(agent.name, "tiny-add", "grade.json")["status"] == "resolved"


def test_an_overloaded_api_is_an_infra_error_tried_again(operated):
    agent = operated
    record = agent.project.read(agent.name, "tiny-add", "agent.json")
    assert [a["status"] for a in record["attempts"]] == ["infra_error", "completed"], record
    assert agent.project.read(agent.name, "tiny-add", "grade.json")["status"] == "resolved"


def test_a_bad_key_stops_the_run_before_any_agent_with_one_line(agent):
    # The worker's doit server started (conftest.Project.doit), as a `doit run` finds its
    # Python ready: what is timed is the run.
    agent.project.doit("list")
    start = time.monotonic()
    proc, executed = run(agent, check=False, env={agent.program.key_variable: "wrong-key"})
    seconds = time.monotonic() - start
    assert proc.returncode != 0 and not any(e.startswith("agent:") for e in executed)
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"nginx-eval: error: {agent.program.label}: the API refused the ")
    assert agent.program.key_variable in line
    assert agent.requests() == []
    # A refusal the CLI retried as it retries an overloaded API would take minutes (186 s for
    # Claude Code); 30 s leaves room for a loaded machine (12 s seen under a load of 40).
    assert seconds < 30, seconds
    print(f"\n{agent.name}: bad key stopped the run in {seconds:.1f} s: {line}")


@pytest.fixture(scope="module")
def doctored(request, tmp_path_factory):
    """Both programs' modes in one project (configured(), the second with alone=False), each
    against its stand-in, and `doit run doctor` on both at once: with their keys ({name:
    program} and the run's stdout), then with both keys wrong (the stdout and exit status).
    One doctor run checks the machine (tools, OpenSSL, the sandbox's self-test) for every
    mode it is given: two runs serve both programs."""
    project = Project(tmp_path_factory.mktemp("doctor"))
    with openai_standin.StandIn() as openai_api, gemini_standin.StandIn() as gemini_api:
        programs = {}
        for name, api in (("codex", openai_api), ("gemini", gemini_api)):
            path = request.getfixturevalue(f"{name}_program")
            programs[name] = configured(name, project, path, api, alone=not programs)
        modes = f"modes={','.join(programs)}"
        good, _ = project.doit("run", "doctor", modes)
        wrong = {p.program.key_variable: "wrong-key" for p in programs.values()}
        bad, _ = project.doit("run", "doctor", modes, check=False, env=wrong)
        yield SimpleNamespace(programs=programs, good=good.stdout, bad=bad)


@pytest.mark.parametrize("name", ["codex", "gemini"])
def test_the_doctor_checks_the_programs_version_credentials_key_and_endpoint(doctored, name):
    from claude_cli import setup_setting

    agent = doctored.programs[name]
    version = setup_setting(agent.program.version_setting)
    # Both programs' findings are OK: the doctor gives them on one line, each in its words.
    (line,) = [x for x in doctored.good.splitlines() if agent.program.label in x]
    assert line.startswith("OK      agent modes: ")
    url = agent.program.probe_url(agent.project.env)
    said = rf"{re.escape(agent.program.label)} (\S+ )?{re.escape(version)}, credentials, "
    assert re.search(said + rf"{re.escape(url)} reachable(,|$)", line), line
    assert doctored.bad.returncode != 0
    assert f"CANNOT RUN mode {name}: {agent.program.label}: the API refused" in doctored.bad.stdout
