"""What the real Claude Code CLI printed and wrote, captured against the Anthropic stand-in, for
the unit tests of the modules that read it (claude_code.py, transcript/files.py,
trajectory.py): they are tested on real output only, never on JSON written by hand.

``Recorder(program, api, base).run(prompt, *flags)`` runs the CLI in a git workspace with its
state in ``base/config`` and returns a ``Capture``: the run (claude_cli.Run: exit code, stdout,
result), the transcript lines it added (sessions and subagents, claude_transcript's reading of
them) and the stand-in's records of its requests. ``killed(prompt, signal)`` stops it as the
harness's time limit would, once its second request is under way.
"""

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import claude_cli
from anthropic_standin import call, say
from claude_cli import SONNET, TOOLS

from nginx_eval.transcript import files as ct


def session_with_subagent(marker, sub_marker, last="All done."):
    """A stand-in script of one session: a long Bash output, a failing command, a subagent (its
    prompt names `sub_marker`, which has a script of its own) and a last answer `last`: each kind
    of step a trajectory or a page shows."""
    return {
        marker: [
            [say("Let me look."), call("Bash", command="seq 1 500")],
            [call("Bash", command="echo no; exit 3")],
            [
                call(
                    "Agent",
                    description="check",
                    prompt=f"Please do {sub_marker}",
                    subagent_type="general-purpose",
                    model="haiku",
                    run_in_background=False,
                )
            ],
            [say(last)],
        ],
        sub_marker: [[call("Bash", command="echo from the subagent")], [say("Sub done.")]],
    }


@dataclass
class Capture:
    run: claude_cli.Run
    lines: list
    requests: list
    workspace: Path
    entries: list = field(init=False)

    def __post_init__(self):
        self.entries = ct.entries_of(self.lines)

    @property
    def result(self):
        return self.run.result or None

    def usages(self, marker=...):
        return [
            q["usage"]
            for q in self.requests
            if q["path"] == "/v1/messages"
            and q["usage"]
            and (marker is ... or q["marker"] == marker)
        ]


class Recorder:
    def __init__(self, program, api, base):
        self.program, self.api, self.base = program, api, Path(base)
        self.config = self.base / "config"
        self.config.mkdir(parents=True, exist_ok=True)
        self.workspaces = 0

    def workspace(self, name=None):
        self.workspaces += 1
        path = self.base / (name or f"ws{self.workspaces}")
        path.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(path)], check=True)
        return path

    def environment(self, env):
        return claude_cli.environment(self.api, self.config, **(env or {}))

    def run(self, prompt, *flags, cwd, env=None):
        before, seen = ct.transcript_sizes(self.config, cwd), len(self.api.requests)
        run = claude_cli.run(self.program, self.environment(env), cwd, prompt, *flags)
        lines = ct.new_transcript_lines(before, ct.transcript_sizes(self.config, cwd))
        return Capture(run, lines, list(self.api.requests[seen:]), cwd)

    def killed(self, prompt, stop, *, cwd):
        before, seen = ct.transcript_sizes(self.config, cwd), len(self.api.requests)
        asked = len(self.api.messages_requests())
        argv = [
            self.program,
            "-p",
            prompt,
            "--output-format",
            "json",
            "--allowedTools",
            TOOLS,
            "--model",
            SONNET,
        ]
        start = time.monotonic()
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=self.environment(None),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        while len(self.api.messages_requests()) < asked + 2 and time.monotonic() < start + 60:
            time.sleep(0.05)
        os.killpg(proc.pid, stop)
        stdout, stderr = proc.communicate(timeout=30)
        run = claude_cli.Run(proc.returncode, time.monotonic() - start, stdout, stderr, {})
        lines = ct.new_transcript_lines(before, ct.transcript_sizes(self.config, cwd))
        return Capture(run, lines, list(self.api.requests[seen:]), cwd)
