"""What the stand-in APIs answer the shipped workflow modes (raw, impl, full, nlcmd), and how
their request logs are read back as calls: shared by tests/test_workflow_modes.py (the fixture
benchmark) and scripts/mode_sequences.py (real nginx tasks).

A script is keyed by a phrase of each stage's shipped prompt (templates/), or of a subagent's
prompt that the planner command's scripted answer writes. The implementation loop's first call
runs a fix command given by the caller and writes its commit message; its second writes the
completion marker. Critique and reducer (and the command's critic and reducer subagents) are
each held at the API until the other has arrived, at most HOLD seconds: run one after the
other, the first is answered before the second is sent, and they do not overlap.
"""

import os
from pathlib import Path

import claude_cli
import openai_standin
from anthropic_standin import Fault, call, say

OPUS, SONNET, CODEX = "claude-opus-4-5", "claude-sonnet-4-5", "gpt-5.2-codex"
# Phrases of the shipped prompts (templates/), one per stage.
RAW = "A user reported the bug below"
UNDERSTAND = "Planning stage 1 of 5, the understander"
PROPOSE = "Planning stage 2 of 5, the bold proposer"
CRITIQUE = "Planning stage 3 of 5, the critic"
REDUCE = "Planning stage 3 of 5, the reducer"
CONSENSUS = "Planning stage 5 of 5, the consensus"
COMMAND = "coordinator of a planning pipeline"
STAGES = (UNDERSTAND, PROPOSE, CRITIQUE, REDUCE, CONSENSUS)
# What the command's consensus subagent asks Codex with (its Bash tool), and the subagents'
# prompts, which the command's scripted answer writes.
NLCMD_CODEX = "CODEX-CONSENSUS-OF-THE-COMMAND"
STAGE_NAMES = ("understander", "proposer", "critic", "reducer", "consensus")
SUBAGENTS = {k: f"SUB-{k.upper()}-MARK" for k in STAGE_NAMES}
HOLD = 30

# GitHub's CLI and git's remote commands, as a planner that reports to GitHub would use them.
REMOTE = "gh issue comment 1 --body done; echo gh=$?; git -C . push origin HEAD; echo push=$?"
FIXTURE_MESSAGE = "Make add() add\n\nThe sum used a minus.\n"


def iteration(n: int) -> str:
    """The phrase of the loop's prompt in its n-th call."""
    return f"this is call {n} of at most"


def printf_quoted(text: str) -> str:
    """`text` as a single-quoted printf format for bash."""
    escaped = text.replace("\\", "\\\\").replace("%", "%%").replace("\n", "\\n")
    return "'" + escaped.replace("'", "'\\''") + "'"


def loop_script(fix: str, message: str = FIXTURE_MESSAGE) -> dict:
    """impl's loop: call 1 runs `fix` (a shell command), writes `message` as its commit message
    and tries GitHub and a push; call 2 writes the marker (and changes nothing else)."""
    write = f"mkdir -p .tmp && printf {printf_quoted(message)} > .tmp/commit-message-1.txt"
    return {
        iteration(1): [
            [say("Fixing it."), call("Bash", command=f"{fix} && {write} && {REMOTE}")],
            [say("FIRST-CALL-OUTPUT: the fix is in.")],
        ],
        iteration(2): [
            [
                call(
                    "Bash",
                    command="printf 'Fix the bug\\nISSUE FIXED\\nThe fix is in.\\n' "
                    "> .tmp/finalize.txt",
                )
            ],
            [say("Finalized.")],
        ],
    }


def raw_script(fix: str) -> dict:
    """raw's one call: runs `fix`."""
    return {RAW: [[say("Fixing it."), call("Bash", command=fix)], [say("Fixed.")]]}


def apply_patch_command(diff: str, delimiter: str = "END-OF-THE-FIX") -> str:
    """A shell command that writes `diff` to .tmp/fix.patch with a heredoc and `git apply`s it."""
    assert delimiter not in diff
    body = diff if diff.endswith("\n") else diff + "\n"
    return (
        f"mkdir -p .tmp && cat > .tmp/fix.patch <<'{delimiter}'\n{body}{delimiter}\n"
        "git apply .tmp/fix.patch"
    )


PLANNER_SCRIPT = {
    UNDERSTAND: [[say("MAP: where the bug is.")]],
    PROPOSE: [[say("PROPOSAL: the fix.")]],
    CRITIQUE: [[say("CRITIQUE: the proposal holds.")]],
    REDUCE: [[say("REDUCTION: the smallest change.")]],
    CONSENSUS: [[say("PLAN-BY-OPUS: apply the fix.")]],
}
CODEX_PLAN = "PLAN-BY-CODEX: apply the fix."


def held_at_once(a: str, b: str) -> list[Fault]:
    """Faults that hold `a` and `b` at the API until the other has arrived (at most HOLD s)."""
    return [Fault(delay=HOLD, marker=a, until=b), Fault(delay=HOLD, marker=b, until=a)]


def full_scripts(fix: str, message: str = FIXTURE_MESSAGE) -> tuple[dict, list[Fault], dict]:
    """full: (the Anthropic script, its faults, the OpenAI script)."""
    script = dict(PLANNER_SCRIPT, **loop_script(fix, message))
    return script, held_at_once(CRITIQUE, REDUCE), {CONSENSUS: [[openai_standin.say(CODEX_PLAN)]]}


def agent_call(kind: str, marker: str) -> dict:
    """An Agent tool call starting subagent `kind` in the foreground with `marker` in its prompt."""
    return call(
        "Agent",
        description=f"{kind} stage",
        prompt=f"{marker} for the report in .issue.md",
        subagent_type=kind,
        run_in_background=False,
    )


def nlcmd_scripts(fix: str, message: str = FIXTURE_MESSAGE) -> tuple[dict, list[Fault], dict]:
    """nlcmd: (the Anthropic script, its faults, the OpenAI script). The command's one call
    starts the five subagents, critic and reducer in one message; the consensus subagent asks
    Codex from its Bash tool and writes .tmp/4-consensus.md."""
    subs = SUBAGENTS
    ask = (
        f"codex exec -s read-only -m {CODEX} -c model_reasoning_effort=xhigh "
        f"'{NLCMD_CODEX}: the reports' </dev/null > .tmp/codex.txt"
    )
    write = "mkdir -p .tmp && printf 'PLAN-OF-SUBAGENTS: apply the fix\\n' > .tmp/4-consensus.md"
    script = {
        COMMAND: [
            [agent_call("understander", subs["understander"])],
            [agent_call("proposer", subs["proposer"])],
            [agent_call("critic", subs["critic"]), agent_call("reducer", subs["reducer"])],
            [agent_call("consensus", subs["consensus"])],
            [say("The plan is in .tmp/4-consensus.md.")],
        ],
        subs["understander"]: [[say("map")]],
        subs["proposer"]: [[say("proposal")]],
        subs["critic"]: [[say("critique")]],
        subs["reducer"]: [[say("reduction")]],
        subs["consensus"]: [
            [call("Bash", command="mkdir -p .tmp && " + ask)],
            [call("Bash", command=write)],
            [say("written")],
        ],
        **loop_script(fix, message),
    }
    faults = held_at_once(subs["critic"], subs["reducer"])
    return script, faults, {NLCMD_CODEX: [[openai_standin.say(CODEX_PLAN)]]}


def cli_environment(
    base: Path, env: dict, claude_program: str, api, codex_program=None, openai_api=None
) -> dict:
    """`env` for a `doit run` whose agents are the real CLIs (first on PATH, as symlinks in
    base/bin) talking to the stand-ins, with no retries of their own or the harness's."""
    bin_dir = base / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(claude_program)
    if codex_program:
        (bin_dir / "codex").symlink_to(codex_program)
    config = base / "claude-config"
    config.mkdir()
    cli_env = claude_cli.environment(api, config, CLAUDE_CODE_MAX_RETRIES="0")
    out = dict(env)
    out.update({k: v for k, v in cli_env.items() if os.environ.get(k) != v})
    out.update(
        PATH=f"{bin_dir}{os.pathsep}{env['PATH']}",
        NGINX_EVAL_AGENT_BACKOFF="0.05",
        NGINX_EVAL_AGENT_MAX_RETRIES="0",
    )
    if openai_api:
        out.update(OPENAI_BASE_URL=openai_api.url + "/v1", OPENAI_API_KEY=openai_api.api_key)
    return out


def calls(api, markers, openai_api=None) -> list[tuple]:
    """[(marker, model, first request time, last answer time, program)] of each marker's
    requests at the Anthropic stand-in (program "claude") and the OpenAI one ("codex"), in the
    order they began (times: time.monotonic() of the stand-ins' process)."""
    out = []
    for program, requests_of in (
        ("claude", api.messages_requests),
        ("codex", openai_api.responses_requests if openai_api else None),
    ):
        if requests_of is None:
            continue
        for marker in markers:
            requests = requests_of(marker)
            if requests:
                out.append(
                    (
                        marker,
                        requests[0]["model"],
                        min(r["time"] for r in requests),
                        max(r["answered"] or r["time"] for r in requests),
                        program,
                    )
                )
    return sorted(out, key=lambda c: c[2])


def overlapped(a: tuple, b: tuple) -> bool:
    """Whether calls `a` and `b` (as calls() gives them) were in flight at the same time."""
    return a[2] < b[3] and b[2] < a[3]
