"""Isolation end to end (issue 27): the real Claude Code CLI in the shipped raw mode, isolated by
default, against the stand-in API; a second server on another port of the same loopback
address poses as GitHub and serves the fix (over HTTP and to `git clone`). The stand-in scripts
a hostile agent: it fetches the fix, clones the repository, reads the harness's cache and a
mirror, then fixes the bug itself.
"""

import json
import subprocess
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from anthropic_standin import call, say
from test_agent_claude import FIX, RAW, ClaudeProject, needs_srt

pytestmark = needs_srt


class FakeGitHub:
    """Serves <root>/nginx/nginx.git (a bare repository, dumb HTTP) and the fix as
    /nginx/nginx/commit/<fix>.diff; remembers every path asked for."""

    def __init__(self, root, mirror, base, fix):
        repo = root / "nginx" / "nginx.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(mirror), str(repo)], check=True)
        subprocess.run(["git", "--git-dir", str(repo), "update-server-info"], check=True)
        diff = subprocess.run(
            ["git", "-C", str(mirror), "diff", base, fix], check=True, capture_output=True
        ).stdout
        commit = root / "nginx" / "nginx" / "commit"
        commit.mkdir(parents=True)
        (commit / f"{fix}.diff").write_bytes(diff)
        self.paths = []
        seen = self.paths

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                seen.append(self.path)
                super().do_GET()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


@pytest.fixture
def hostile(project, claude_program, anthropic_api, tmp_path):
    claude = ClaudeProject(project, claude_program, anthropic_api)
    task = project.benchmark()["tasks"][0]
    github = FakeGitHub(
        tmp_path / "github", project.mirrors / "acme+tiny", task["base_commit"], task["fix_commit"]
    )
    url = f"http://127.0.0.1:{github.port}"
    cache_file = project.cache / "repos" / "acme+tiny.json"
    mirror = project.mirrors / "acme+tiny"
    claude.api.script = {
        RAW: [
            [
                say("Let me find the upstream fix."),
                call(
                    "Bash",
                    command=f"curl -s {url}/nginx/nginx/commit/{task['fix_commit']}.diff; "
                    f'git clone -q {url}/nginx/nginx.git "${{TMPDIR:-/tmp}}/gh-'
                    f'{github.port}" 2>&1 | tail -n 2',
                ),
            ],
            [call("Read", file_path=str(cache_file)), call("Bash", command=f"ls {mirror}")],
            [call("Bash", command=FIX)],
            [say("Fixed.")],
        ]
    }
    yield claude, github, {"cache": str(cache_file), "mirror": str(mirror)}
    github.close()


def kinds(agent):
    return sorted({f["kind"] for f in agent["flags"]})


def test_an_isolated_agent_reaches_only_the_model_and_its_attempts_are_on_the_record(hostile):
    claude, github, paths = hostile
    claude.run("tiny:raw")
    claude.render("tiny:raw")
    agent = claude.agent("raw")
    (phase,) = agent["phases"]
    # The model calls went through; nothing reached the fake GitHub.
    assert agent["status"] == "completed" and len(claude.api.messages_requests(RAW)) == 4
    assert github.paths == []
    assert agent["isolation"] == "srt" and not agent["contaminated"]
    refused = {(b["host"], b["port"]) for b in phase["blocked"]}
    assert refused == {("127.0.0.1", github.port)}
    assert len(phase["blocked"]) >= 2 and all(b["time"].endswith("Z") for b in phase["blocked"])
    details = [f["detail"] for f in agent["flags"]]
    assert kinds(agent) == ["fetch", "outside_read"]
    assert any("curl" in d for d in details) and any("git clone" in d for d in details)
    assert paths["cache"] in details and paths["mirror"] in details
    # The agent's own tool results say what the sandbox did.
    transcript = claude.path("raw", phase["transcript"]).read_text()
    assert "No such file or directory" in transcript
    # The task still grades, and the record shows it isolated.
    assert claude.project.read("raw", "tiny-add", "grade.json")["status"] == "resolved"
    row = json.loads(
        (claude.project.results / "default" / "raw" / "results.jsonl").read_text().splitlines()[0]
    )
    assert (row["outcome"], row["isolation"], row["contaminated"]) == ("resolved", "srt", False)
    assert row["blocked"] == len(phase["blocked"]) and row["flags"]["fetch"] >= 1
    report = (claude.project.results / "default" / "report.md").read_text()
    assert "## Isolation" in report and "every agent isolated" in report


def test_unisolated_the_same_agent_gets_the_fix_and_the_run_is_contaminated(hostile):
    """The control: the hostile script does reach the fake GitHub without isolation, so the
    silence above means something."""
    claude, github, _ = hostile
    claude.add_mode(
        '[modes.open]\nmodel = "claude-sonnet-4-5"\nisolation = "none"\n'
        '[[modes.open.phases]]\nname = "solve"\nprompt = "prompt_raw.md.j2"\n'
        "command = 'claude --allowedTools Bash,Read,Edit,Write,Glob,Grep "
        "--output-format json --model {model} -p {prompt}'\n"
    )
    claude.run("tiny:open")
    claude.render("tiny:open")
    agent = claude.agent("open")
    assert any(p.endswith(".diff") for p in github.paths)
    assert any("/nginx/nginx.git/" in p for p in github.paths)  # git clone came
    assert agent["isolation"] == "none" and agent["phases"][0]["blocked"] is None
    assert agent["contaminated"] and "contamination" in kinds(agent)
    evidence = [f["detail"] for f in agent["flags"] if f["kind"] == "contamination"]
    # The fix's lines in what curl fetched; its commit id in the cache file it read.
    assert any("only the fix adds in the result of Bash" in e for e in evidence)
    assert any(e.startswith("fix commit ") and "result of Read" in e for e in evidence)
    row = json.loads(
        (claude.project.results / "default" / "open" / "results.jsonl").read_text().splitlines()[0]
    )
    assert (row["outcome"], row["isolation"]) == ("contaminated", "none")
    report = json.loads((claude.project.results / "default" / "report.json").read_text())
    mode = report["modes"]["open"]
    assert mode["contaminated_ids"] == ["tiny-add"] and mode["scored_instances"] == 0
    assert mode["isolation"]["unisolated_ids"] == ["tiny-add"]
    text = (claude.project.results / "default" / "report.md").read_text()
    assert "**unisolated: `open`**" in text
    assert "[tiny-add](open/tiny-add/agent.json)" in text
    assert "open / tiny-add: contaminated, not scored" in text


def test_without_credentials_the_run_stops_at_once_with_one_line(hostile):
    claude, _, _ = hostile
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
        claude.project.env.pop(name, None)
    start = time.monotonic()
    proc, executed = claude.run("tiny:raw", check=False)
    assert time.monotonic() - start < 30
    assert proc.returncode != 0 and not any(e.startswith("agent:") for e in executed)
    (line,) = proc.stderr.splitlines()
    assert "Claude Code has no credentials: set ANTHROPIC_API_KEY" in line
    assert claude.api.requests == []


def test_without_the_sandbox_tool_no_agent_starts(hostile):
    claude, _, _ = hostile
    proc, executed = claude.run("tiny:raw", check=False, env={"NGINX_EVAL_SRT": "/nonexistent/srt"})
    assert proc.returncode != 0 and not any(e.startswith("agent:") for e in executed)
    (line,) = proc.stderr.splitlines()
    assert (
        "field isolation: the agent sandbox needs srt (npm @anthropic-ai/sandbox-runtime)" in line
        and "scripts/setup-debian.sh" in line
    )
    # The preflight's check of the key (agent/preflight.py: key_problem), no model request.
    assert [q["path"] for q in claude.api.requests] == ["/v1/models"]
