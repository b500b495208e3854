"""The shipped `full` mode verifies with the real program, inside the default sandbox (issue 36):
a stand-in agent (AGENT=...) that plans, fixes, then builds, writes the smallest configuration,
starts the server, asks it with curl and stops it, gets the server's answer; its attempt to reach
a server on the host's loopback is refused and recorded. On the fixture always; on real nginx
with local mirrors.
"""

import json
import os
import shutil
import subprocess

import pytest
from anthropic_standin import call, say
from conftest import SOURCE_ROOT
from local_http import serve
from nginx_mirrors import SMALL_BUILD, doit_run, mirror, needs_mirrors
from test_agent_claude import VERIFY, claude  # noqa: F401 (a fixture)
from test_sandbox import needs_srt

# Every test here starts doit (the fixture with `project`, real nginx without it): end to end.
E2E = True

pytestmark = needs_srt

# Answers each shipped prompt by a phrase of it (templates/prompt_*.md.j2); the verify phase
# does what its prompt asks, with the server's binary the build made.
STAND_IN = r"""#!/bin/bash
case "$1" in
*"write a short plan"*) echo "make add() add" > .plan.md ;;
*"Implement the fix"*) rm -f .plan.md; FIX ;;
*"Check your fix"*)
    BUILD
    prefix="$TMPDIR/verify"; mkdir -p "$prefix/logs"
    {
        printf 'events {}\nhttp { server { listen 127.0.0.1:18080;\n'
        printf '    location / { return 200 "nginx here\\n"; } } }\n'
    } > "$prefix/nginx.conf"
    objs/nginx -p "$prefix" -c nginx.conf && echo "started"
    for _ in $(seq 100); do
        (exec 3<>/dev/tcp/127.0.0.1/18080) 2>/dev/null && break; sleep 0.05
    done
    echo "answer: $(curl -s http://127.0.0.1:18080/)"
    echo "host: $(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$STAND_IN_HOST_PORT/fix.diff)"
    objs/nginx -p "$prefix" -c nginx.conf -s stop && echo "stopped"
    CLEAN ;;
esac
"""


@pytest.fixture
def host_server():
    server = serve(lambda request: b"")
    yield server
    server.shutdown()


def stand_in(directory, fix, build, clean):
    script = directory / "stand-in-agent"
    script.write_text(STAND_IN.replace("FIX", fix).replace("BUILD", build).replace("CLEAN", clean))
    script.chmod(0o755)
    return str(script)


def verify_phase(agent_json, stdout):
    agent = json.loads(agent_json.read_text())
    assert agent["isolation"] == "srt" and agent["status"] == "completed", agent["error"]
    assert [p["name"] for p in agent["phases"]] == ["plan", "implement", "verify"]
    return agent["phases"][2], stdout.read_text()


def test_full_starts_the_program_it_built_and_reaches_it_but_not_the_host(project, host_server):
    shutil.copy(SOURCE_ROOT / "modes.toml", project.root / "modes.toml")
    agent = stand_in(
        project.base,
        "sed -i 's/a - b/a + b/' src/core/calc.c",
        "./auto/configure >/dev/null && make >/dev/null",
        "rm -rf objs Makefile",
    )
    port = host_server.server_address[1]
    project.doit(
        "run",
        "tiny:plan-verify",
        "instances=tiny-add",
        env={"AGENT": agent, "STAND_IN_HOST_PORT": str(port)},
    )
    task_dir = project.task_dir("plan-verify", "tiny-add")
    verify, out = verify_phase(task_dir / "agent.json", task_dir / "agent" / "3-verify.stdout")
    # The fixture's server answers with its add(2, 3): the agent sees its own fix at work.
    assert "started" in out and "answer: tiny: 2 + 3 = 5" in out and "stopped" in out, out
    assert "host: 403" in out and host_server.paths == []
    assert [(b["host"], b["port"]) for b in verify["blocked"]] == [("127.0.0.1", port)]
    assert project.read("plan-verify", "tiny-add", "grade.json")["status"] == "resolved"


@needs_mirrors("nginx/nginx", "nginx/nginx-tests")
def test_full_on_real_nginx_gets_nginxs_answer_inside_the_sandbox(tmp_path, host_server):
    tasks = json.loads((SOURCE_ROOT / "tasks" / "nginx.json").read_text())["tasks"]
    task = min(
        (t for t in tasks if not t["configure_flags"]),
        key=lambda t: t["fix_date"],
        default=tasks[0],
    )
    gold = subprocess.run(
        [
            "git",
            "-C",
            str(mirror("nginx/nginx")),
            "diff",
            task["base_commit"],
            task["fix_commit"],
        ],
        capture_output=True,
        check=True,
    ).stdout
    (tmp_path / "gold.diff").write_bytes(gold)
    agent = stand_in(
        tmp_path,
        f"git apply {tmp_path / 'gold.diff'}",
        SMALL_BUILD,
        "rm -rf objs Makefile",
    )
    port = host_server.server_address[1]
    # The stand-in applies the gold diff from its own directory, which the sandbox lets a
    # phase read (the directory of the program it starts).
    doit_run(
        tmp_path,
        tmp_path / "cache",
        # The agent's attempt alone: what is asked of it happens there, not in grading.
        f"agent:nginx/plan-verify/{task['instance_id']}",
        env=dict(os.environ, AGENT=agent, STAND_IN_HOST_PORT=str(port)),
        timeout=1800,
    )
    task_dir = tmp_path / "results" / "default" / "plan-verify" / task["instance_id"]
    verify, out = verify_phase(task_dir / "agent.json", task_dir / "agent" / "3-verify.stdout")
    assert "started" in out and "answer: nginx here" in out and "stopped" in out, out
    assert "host: 403" in out and host_server.paths == []
    assert [(b["host"], b["port"]) for b in verify["blocked"]] == [("127.0.0.1", port)]


def test_full_with_the_real_cli_builds_starts_reaches_and_proves_inside_the_sandbox(claude):
    """The real CLI against the stand-in API: the verify phase's tool calls build the fixture,
    start it with the smallest configuration, ask it with curl, run a file of the tests tree
    as of the base with prove, stop it and clean up; every tool result shows success."""
    trees = f"{claude.project.cache}/agent-tests/*"
    prefix = "$TMPDIR/verify"
    claude.api.script[VERIFY] = [
        [
            say("Building."),
            call("Bash", command="./auto/configure >/dev/null && make >/dev/null && echo BUILT-OK"),
        ],
        [
            call(
                "Bash",
                command=f"mkdir -p {prefix} && echo 'listen 127.0.0.1:18080;' > "
                f"{prefix}/nginx.conf && objs/nginx -p {prefix} -c nginx.conf && "
                "sleep 0.3 && curl -s http://127.0.0.1:18080/",
            )
        ],
        [
            call(
                "Bash",
                command=f"t=$(echo {trees}); TEST_NGINX_BINARY=$PWD/objs/nginx "
                "prove -v -I $t/lib $t/calc_add.t",
            )
        ],
        [
            call(
                "Bash",
                command=f"objs/nginx -p {prefix} -s stop && rm -rf objs Makefile && echo CLEAN-OK",
            )
        ],
        [say("Verified: it builds, answers 5 and the test file passes.")],
    ]
    claude.run("tiny:plan-verify")
    agent = claude.agent("plan-verify")
    assert agent["status"] == "completed" and agent["isolation"] == "srt", agent["error"]
    verify = agent["phases"][2]
    assert verify["name"] == "verify" and verify["blocked"] == []
    results = [
        block
        for line in claude.path("plan-verify", verify["transcript"]).read_text().splitlines()
        for block in tool_results(json.loads(line))
    ]
    assert len(results) == 4 and not any(r["is_error"] for r in results), results
    built, answered, proved, cleaned = (r["text"] for r in results)
    assert "BUILT-OK" in built and "tiny: 2 + 3 = 5" in answered
    assert "ok 1 - add two numbers" in proved and "Result: PASS" in proved
    assert "CLEAN-OK" in cleaned
    assert claude.project.read("plan-verify", "tiny-add", "grade.json")["status"] == "resolved"
    print(
        f"\nreal-CLI full: verify phase {verify['wall_seconds']:.1f} s, "
        f"agent {agent['wall_seconds']:.1f} s over {len(agent['phases'])} phases"
    )


def tool_results(entry):
    """{"text", "is_error"} of each tool result in a transcript line."""
    content = (entry.get("message") or {}).get("content")
    if entry.get("type") != "user" or not isinstance(content, list):
        return []
    out = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            text = block.get("content")
            if isinstance(text, list):
                text = "".join(b.get("text", "") for b in text if isinstance(b, dict))
            out.append({"text": text or "", "is_error": bool(block.get("is_error"))})
    return out
