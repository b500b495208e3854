"""End to end with the real Claude Code CLI (tests/claude_cli.py) against the Anthropic stand-in
(tests/anthropic_standin.py): every way an agent run can end that the harness must tell apart
(issue 14). The shipped modes raw, impl, full and nlcmd on the fixture benchmark, an
npm-installed CLI and a lost --continue are checked on one run in tests/test_agent_home.py.

The stand-in answers each phase by a marker, a phrase of that phase's shipped prompt (or of the
shipped /fix-issue command), with tool calls that fix both fixture tasks' bug.
"""

import json
import os
import shutil
import time

import claude_cli
import pytest
from anthropic_standin import Fault, StandIn, call, say
from claude_cli import SONNET, sonnet_cost, summed
from conftest import SOURCE_ROOT, Project

from nginx_eval.agent.sandbox import sandbox_problem
from nginx_eval.meter.summary import read_calls

needs_srt = pytest.mark.skipif(
    sandbox_problem() is not None, reason=f"no usable agent sandbox: {sandbox_problem()}"
)

# A phrase of each shipped prompt (templates/), and of templates/commands/fix-issue.md.
RAW = "A user reported the bug below"
PLAN = "write a short plan of the fix"
IMPLEMENT = "Implement the fix for the bug described in"
VERIFY = "Check your fix for the bug in"
COMMAND = "Fix the bug that a user of nginx reported"
SUBTASK = "SUBTASK-HAIKU-7"
FIX = "sed -i -e 's/a - b/a + b/' -e 's/a \\* b + (a > 1)/a * b/' src/core/calc.c"
VERSION = claude_cli.setup_setting("CLAUDE_CODE_VERSION") + " (Claude Code)"


def fixing(marker_text="Fixed."):
    return [[say("Fixing it."), call("Bash", command=FIX)], [say(marker_text)]]


SCRIPT = {
    RAW: fixing(),
    PLAN: [[call("Write", file_path=".plan.md", content="Make add() add.\n")], [say("Planned.")]],
    IMPLEMENT: fixing("Implemented."),
    VERIFY: [[call("Bash", command="grep -c 'a + b' src/core/calc.c")], [say("Verified.")]],
    COMMAND: fixing("Fixed via /fix-issue."),
}


class ClaudeProject:
    """The fixture project (conftest.Project) with the shipped modes.toml and templates, the
    real CLI as `claude` first on PATH (a symlink, as npm's node_modules/.bin/claude is), and
    the stand-in as its API."""

    def __init__(self, project, program, api):
        self.project, self.api = project, api
        shutil.copy(SOURCE_ROOT / "modes.toml", project.root / "modes.toml")
        bin_dir = project.base / "claude-bin"
        bin_dir.mkdir()
        (bin_dir / "claude").symlink_to(program)
        # The operator's CLAUDE_CONFIG_DIR, not the agent's: each agent run gets a home of its
        # own (agent/home.py), and the transcripts are read from there.
        self.config = project.base / "claude-config"
        self.config.mkdir()
        cli_env = claude_cli.environment(api, self.config, CLAUDE_CODE_MAX_RETRIES="0")
        project.env.update({k: v for k, v in cli_env.items() if os.environ.get(k) != v})
        project.env["PATH"] = f"{bin_dir}{os.pathsep}{project.env['PATH']}"
        project.env["NGINX_EVAL_AGENT_BACKOFF"] = "0.05"
        api.script = dict(SCRIPT)

    def run(self, *targets, check=True, env=None):
        proc, executed = self.project.doit(
            "run", *targets, "instances=tiny-add", check=check, env=env
        )
        return proc, executed

    def render(self, *targets):
        """What `run(*targets)` renders after its modes, rendered in this process
        (conftest.Project.render)."""
        return self.project.render(*targets, "instances=tiny-add")

    def agent(self, mode):
        return self.project.read(mode, "tiny-add", "agent.json")

    def path(self, mode, relative):
        return self.project.task_dir(mode, "tiny-add") / relative

    def usages(self, marker, session=None):
        """The usage the stand-in answered to the requests of `marker` (of one session)."""
        return [
            q["usage"]
            for q in self.api.messages_requests(marker)
            if q["usage"] and session in (None, q["headers"].get("x-claude-code-session-id"))
        ]

    def add_mode(self, text):
        with open(self.project.root / "modes.toml", "a") as f:
            f.write("\n" + text)


@pytest.fixture
def claude(project, claude_program, anthropic_api):
    return ClaudeProject(project, claude_program, anthropic_api)


def assert_phase_paid_what_the_api_billed(phase, usages):
    """A phase's cost and tokens are those of its own requests (not the session's so far)."""
    billed = summed(usages)
    assert phase["cost_usd"] == pytest.approx(sonnet_cost(usages), rel=1e-6)
    assert phase["tokens"] == {
        "input": billed["input_tokens"],
        "output": billed["output_tokens"],
        "cache_read": billed["cache_read_input_tokens"],
        "cache_creation": billed["cache_creation_input_tokens"],
    }
    assert list(phase["models"]) == [SONNET] and phase["cost_source"] == "result"
    assert phase["models"][SONNET]["cost_usd"] == pytest.approx(phase["cost_usd"], rel=1e-9)


def quick_mode(
    name, timeout=120, *, plan=False, continue_from_elsewhere=False, prompt="prompt_raw.md.j2"
):
    """A one-phase mode like the shipped raw (or plan then implement), with a shorter limit;
    `prompt` its one phase's."""
    claude = (
        "claude --allowedTools Bash,Read,Edit,Write,Glob,Grep --output-format json --model {model}"
    )
    text = f'[modes.{name}]\nmodel = "{SONNET}"\n'
    if plan:
        text += (
            f'[[modes.{name}.phases]]\nname = "plan"\nprompt = "prompt_plan.md.j2"\n'
            f"command = '{claude} -p {{prompt}}'\n"
        )
        # The implement phase's CLI keeps its state elsewhere than the agent's home: its
        # --continue finds no session.
        elsewhere = (
            'CLAUDE_CONFIG_DIR="$CLAUDE_CONFIG_DIR/elsewhere" ' if continue_from_elsewhere else ""
        )
        return text + (
            f'[[modes.{name}.phases]]\nname = "implement"\n'
            f'prompt = "prompt_implement.md.j2"\n'
            f"command = '{elsewhere}{claude} --continue -p {{prompt}}'\n"
        )
    return text + (
        f'[[modes.{name}.phases]]\nname = "solve"\nprompt = "{prompt}"\n'
        f"timeout = {timeout}\ncommand = '{claude} -p {{prompt}}'\n"
    )


def results_row(project, mode):
    (row,) = [
        json.loads(line)
        for line in (project.results / "default" / mode / "results.jsonl").read_text().splitlines()
    ]
    return row


@pytest.fixture(scope="module")
def retried(claude_program, tmp_path_factory):
    """The raw mode run twice on one project: first against an API that answers 529 to every
    request (agent_retries=1; the report rendered), then, not finished, again with a 500 that
    clears on the retry, beside a mode `quick` killed at its time limit (quick_mode: the shipped
    implement prompt, so its requests have a marker of their own). What the first run left that
    the second replaces is kept as it was: `persisted` (doit's output, agent.json, report.json,
    the requests made, whether the first attempt's logs were there)."""
    project = Project(tmp_path_factory.mktemp("retried"), reports=True)
    with StandIn() as api:
        claude = ClaudeProject(project, claude_program, api)
        claude.api.faults = [Fault(status=529)]
        proc, _ = claude.run("tiny:raw", "agent_retries=1", check=False)
        claude.persisted = {
            "proc": proc,
            "agent": claude.agent("raw"),
            "report": json.loads((project.results / "default" / "report.json").read_text()),
            "requests": len(claude.api.messages_requests()),
            "first_logs": claude.path("raw", "agent/attempt-1/1-solve.stdout").exists(),
            "row": results_row(project, "raw"),
        }
        # Not finished: the next run tries again (its report is not read: report=0). The limit
        # leaves quick's CLI time for its first turn (the fix) on a loaded machine.
        claude.add_mode(quick_mode("quick", timeout=10, prompt="prompt_implement.md.j2"))
        claude.api.script[IMPLEMENT] = fixing()
        claude.api.faults = [
            Fault(status=500, times=1, marker=RAW),
            Fault(delay=600, marker=IMPLEMENT, turn=1),
        ]
        claude.run("tiny:raw", "tiny:quick", "report=0")
        # What quick's requests were answered by the end of its run (the held one never is
        # while the stand-in runs: its answer would be billed after the kill).
        claude.quick_usages = claude.usages(IMPLEMENT)
        yield claude


def test_an_api_error_that_persists_is_an_infra_error_retried_and_not_scored(retried):
    claude, persisted = retried, retried.persisted
    proc = persisted["proc"]
    # Nothing was measured: the command says so and fails, after writing what it has.
    assert proc.returncode != 0
    assert proc.stderr.splitlines()[-1] == (
        "nginx-eval: error: all 1 agent run(s) of this command ended in infra_error (see the "
        "agent lines above): nothing was measured"
    )
    agent = persisted["agent"]
    assert agent["status"] == "infra_error"
    assert agent["error"].startswith("phase solve: exit code 1: API Error: 529 stand-in fault")
    assert [a["status"] for a in agent["attempts"]] == ["infra_error"] * 2
    assert [a["logs"] for a in agent["attempts"]] == ["agent/attempt-1", "agent"]
    assert persisted["first_logs"]
    (phase,) = agent["phases"]
    assert (phase["api_error_status"], phase["terminal_reason"], phase["cost_usd"]) == (
        529,
        "api_error",
        0,
    )
    # CLAUDE_CODE_MAX_RETRIES=0: one request per attempt, two attempts.
    assert persisted["requests"] == 2
    assert proc.stderr.count("ended in infra_error; attempt") == 1
    assert persisted["row"]["status"] == "infra_error"
    raw = persisted["report"]["modes"]["raw"]
    assert (raw["infra_error_ids"], raw["scored_instances"]) == (["tiny-add"], 0)
    # Not finished: the next run tried again, and the API answered (on its retry).
    assert claude.agent("raw")["status"] == "completed"
    assert claude.project.read("raw", "tiny-add", "grade.json")["status"] == "resolved"


def test_an_api_error_that_clears_on_the_retry_completes(retried):
    """The second run of `retried`: its first attempt met a 500, its retry completed."""
    claude = retried
    agent = claude.agent("raw")
    assert agent["status"] == "completed"
    assert [(a["status"], a["logs"]) for a in agent["attempts"]] == [
        ("infra_error", "agent/attempt-1"),
        ("completed", "agent"),
    ]
    assert agent["attempts"][0]["error"].startswith("phase solve: exit code 1: API Error: 500")
    assert agent["cost_usd"] == pytest.approx(sonnet_cost(claude.usages(RAW)), rel=1e-6)
    # Each attempt's proxy recorded its own calls, the failed one's kept with its logs.
    first = read_calls(claude.path("raw", "agent/attempt-1/calls.jsonl.gz"))
    assert [(c["attempt"], c["status"]) for c in first if c["method"] == "POST"] == [(1, 500)]
    assert {c["attempt"] for c in read_calls(claude.path("raw", "agent/calls.jsonl.gz"))} == {2}
    assert [a["calls"] for a in agent["attempts"]][0] == len(first)
    assert claude.project.read("raw", "tiny-add", "grade.json")["status"] == "resolved"
    # A completed run is never repeated.
    requests = len(claude.api.requests)
    _, executed = claude.run("tiny:raw", "report=0")
    assert executed == [] and len(claude.api.requests) == requests


def test_refused_credentials_stop_the_run_with_one_line(claude):
    claude.api.faults = [Fault(status=401, should_retry=False)]
    # --continue: doit would go on with the other task; the run's stop keeps its agent back
    # (-n 1: one agent at a time, so the other one has not started when the first is refused).
    proc, _ = claude.project.doit("run", "-n", "1", "--continue", "tiny:raw", check=False)
    assert proc.returncode != 0
    assert proc.stderr.splitlines() == [
        "nginx-eval: error: the API refused the Claude Code agent's credentials (agent "
        "raw/tiny-add, phase solve: exit code 1: Failed to authenticate. API Error: 401 stand-in "
        "fault 401); no other agent starts in this run: fix ANTHROPIC_API_KEY (or the CLI's "
        "login) and run again"
    ]
    assert len(claude.api.messages_requests()) == 1  # tiny-mul's agent never started
    assert not any(
        claude.project.task_dir("raw", i).joinpath("agent.json").exists()
        for i in ("tiny-add", "tiny-mul")
    )
    # Credentials fixed, the next run starts them both (their attempts: no grade is read).
    claude.api.faults = []
    claude.project.doit("run", "agent:tiny/raw/tiny-add", "agent:tiny/raw/tiny-mul")
    assert {
        i: claude.project.read("raw", i, "agent.json")["status"] for i in ("tiny-add", "tiny-mul")
    } == {"tiny-add": "completed", "tiny-mul": "completed"}


def test_a_bad_key_stops_the_run_before_any_agent_in_seconds_with_one_line(claude):
    # The worker's doit server started (conftest.Project.doit): what is timed is the run.
    claude.project.doit("list")
    start = time.monotonic()
    proc, executed = claude.run("tiny:raw", check=False, env={"ANTHROPIC_API_KEY": "wrong-key"})
    seconds = time.monotonic() - start
    assert proc.returncode != 0 and not any(e.startswith("agent:") for e in executed)
    (line,) = proc.stderr.splitlines()
    assert line.startswith("nginx-eval: error: Claude Code: the API refused the credentials ")
    assert "ANTHROPIC_API_KEY" in line and line.endswith("; no agent started")
    assert claude.api.messages_requests() == []
    # A refusal the CLI retried as it retries an overloaded API would take minutes (186 s for
    # Claude Code); 30 s leaves room for a loaded machine (12 s seen under a load of 40).
    assert seconds < 30, seconds
    print(f"\nclaude: bad key stopped the run in {seconds:.1f} s: {line}")


def test_a_phase_killed_at_its_time_limit_keeps_its_cost_from_the_transcript(retried):
    """`retried`'s second run: quick's second answer is held past its 10 s limit."""
    claude = retried
    agent = claude.agent("quick")
    (phase,) = agent["phases"]
    assert agent["status"] == "timeout" and phase["timed_out"] and phase["exit_code"] is None
    assert agent["error"] == "phase solve: timed out after 10 s"
    # The first answer was billed; the second never came.
    (first,) = claude.quick_usages
    assert phase["cost_source"] == "transcript" and phase["result"] is None
    assert_phase_paid_what_the_api_billed(dict(phase, cost_source="result"), [first])
    assert phase["session_id"] and claude.path("quick", phase["transcript"]).exists()
    assert agent["cost_usd"] == pytest.approx(sonnet_cost([first]), rel=1e-6)
    # The fix was made before the limit: the patch resolves the task all the same.
    assert claude.project.read("quick", "tiny-add", "grade.json")["status"] == "resolved"


def test_nlcmd_without_its_command_file_is_an_error_and_costs_nothing(claude):
    # The shipped nlcmd without its `commands`: nothing defines /fix-issue.
    claude.add_mode(
        f'[modes.nocmd]\nmodel = "{SONNET}"\n[[modes.nocmd.phases]]\nname = "solve"\n'
        f'prompt = "prompt_nlcmd.md.j2"\ncommand = "claude --allowedTools '
        f"Bash,Read,Edit,Write,Glob,Grep --output-format json --model {{model}} "
        f'-p {{prompt}}"\n'
    )
    proc, _ = claude.run("tiny:nocmd")
    agent = claude.agent("nocmd")
    assert agent["status"] == "error" and agent["phases"][0]["exit_code"] is None
    assert agent["error"].startswith(
        "phase solve: /fix-issue is not defined (no fix-issue.md in "
        "the workspace's .claude/commands/ or in "
    )
    # Not a single model request, not paid: the requests are the preflight's, the key's
    # (agent/preflight.py: key_problem) and the endpoint's, to know it is reachable
    # (agent/selftest.py: endpoint_problem).
    assert [(q["method"], q["path"]) for q in claude.api.requests] == [
        ("GET", "/v1/models"),
        ("GET", "/"),
    ]
    assert "nginx-eval: agent nocmd/tiny-add failed: /fix-issue is not defined" in proc.stderr
    assert results_row(claude.project, "nocmd")["agent_status"] == "error"


def npm_like_install(claude_program, prefix):
    """The CLI as npm installs it, under `prefix` (outside every directory the sandbox binds):
    node_modules/.bin/claude, a symlink into the package's bin/ (the binary hard-linked)."""
    package_bin = prefix / "node_modules" / "@anthropic-ai" / "claude-code" / "bin"
    package_bin.mkdir(parents=True)
    try:
        os.link(os.path.realpath(claude_program), package_bin / "claude.exe")
    except OSError as e:
        pytest.skip(f"cannot hard-link the CLI next to the test: {e}")
    bin_dir = prefix / "node_modules" / ".bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to("../@anthropic-ai/claude-code/bin/claude.exe")
    return bin_dir


@needs_srt
def test_the_preflight_runs_the_cli_in_the_sandbox_it_will_use(claude, claude_program):
    # Under the project root, which the sandbox hides: it runs outside, not inside.
    hidden_bin = claude.project.root / "bin"
    hidden_bin.mkdir()
    (hidden_bin / "claude").symlink_to(claude_program)
    claude.project.env["PATH"] = f"{hidden_bin}{os.pathsep}{claude.project.env['PATH']}"
    proc, executed = claude.run("tiny:raw", check=False)
    assert proc.returncode == 2 and executed == [] and claude.api.messages_requests() == []
    (line,) = proc.stderr.splitlines()
    assert line.startswith(
        f"nginx-eval: error: {claude.project.root / 'modes.toml'}, mode raw "
        f"phase solve, field command: program 'claude' does not start in "
        f"the sandbox: "
    )
