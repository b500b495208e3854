"""Agents cannot see the answer: not in the workspace, and with the sandbox on, nowhere at all."""

import os
import textwrap
import time

import pytest
from conftest import Project

from nginx_eval.agent.sandbox import sandbox_problem

needs_srt = pytest.mark.skipif(
    sandbox_problem() is not None, reason=f"no usable agent sandbox: {sandbox_problem()}"
)

# Looks for the fix and the tests every way it can, and prints FOUND lines for what it finds.
SPY = r"""#!/bin/bash
echo "log: $(git log --all --format=%H | tr '\n' ' ')"
git cat-file -e "$SPY_FIX" 2>/dev/null && echo "FOUND fix object"
git rev-list --all 2>/dev/null | grep -q "$SPY_FIX" && echo "FOUND fix in rev-list"
git for-each-ref --format='%(refname)' | sed 's/^/ref: /'
cat .git/logs/HEAD 2>/dev/null | grep -q "$SPY_FIX" && echo "FOUND fix in reflog"
for p in $SPY_PATHS; do
    if [ -e "$p" ]; then echo "FOUND path $p"; fi
done
if [ "$SPY_FIND" = 1 ]; then
    # Test files and bare clones anywhere; the fix's hash in any file near the workspace.
    find / \( -path /proc -o -path /sys \) -prune -o \( -name 'calc_*.t' -o -name 'acme+*' \) \
        -print 2>/dev/null | sed 's/^/FOUND file /'
    grep -rls "$SPY_FIX" /tmp "$PWD/../../../.." 2>/dev/null | sed 's/^/FOUND text /'
fi
echo done
"""


def spy_project(project, sandbox, find=True):
    bin_dir = project.base / "bin"
    bin_dir.mkdir(exist_ok=True)
    spy = bin_dir / "spy-agent"
    spy.write_text(SPY)
    spy.chmod(0o755)
    fix = project.commits["c_add_fix"]
    paths = [
        project.mirrors / "acme+tiny-tests",
        project.mirrors / "acme+tiny",
        project.cache / "repos",
        project.cache / "tests",
        project.cache / "builds",
        project.root / "tasks" / "tiny.json",
    ]
    (project.root / "modes.toml").write_text(
        textwrap.dedent(f"""\
        [modes.spy]
        isolation = "{"srt" if sandbox else "none"}"
        [modes.spy.env]
        SPY_FIX = "{fix}"
        SPY_PATHS = "{" ".join(map(str, paths))}"
        SPY_FIND = "{int(find)}"
        [[modes.spy.phases]]
        name = "look"
        timeout = 120
        command = "spy-agent"
        """)
    )
    project.env["PATH"] = f"{bin_dir}{os.pathsep}{project.env['PATH']}"
    return fix


def spy_output(project, run=True):
    """The spy's output on tiny-add (after a run of it, unless `run` is False)."""
    if run:
        project.doit("run", "tiny:spy", "instances=tiny-add")
    out = (project.task_dir("spy", "tiny-add") / "agent" / "1-look.stdout").read_text()
    assert out.strip().endswith("done"), out
    return out


@needs_srt
def test_a_sandboxed_agent_finds_neither_the_fix_nor_the_tests(project):
    fix = spy_project(project, sandbox=True)
    out = spy_output(project)
    assert "FOUND" not in out, out
    base = project.benchmark()["tasks"][0]["base_commit"]
    log = out.split("log: ", 1)[1].split("\n", 1)[0].split()
    assert log[0] == base and fix not in log
    assert [line for line in out.splitlines() if line.startswith("ref: ")] == [
        "ref: refs/heads/main"
    ]
    agent = project.read("spy", "tiny-add", "agent.json")
    assert agent["status"] == "completed"


@pytest.fixture(scope="module")
def unsandboxed(tmp_path_factory):
    """A project whose spy ran without the sandbox (and without its search of the machine) on
    tiny-add beside gold, workspaces kept: the control and the given-texts test read it."""
    project = Project(tmp_path_factory.mktemp("unsandboxed"))
    spy_project(project, sandbox=False, find=False)
    project.doit("run", "tiny:spy", "tiny:gold", "instances=tiny-add", "keep_workspaces=1")
    return project


@pytest.mark.e2e
def test_without_the_sandbox_the_same_agent_can_read_the_tests(unsandboxed):
    """The control: the spy is able to find things, so its silence above means something.
    The workspace alone still hides the fix (no object, ref or reflog entry)."""
    project = unsandboxed
    out = spy_output(project, run=False)
    assert f"FOUND path {project.mirrors / 'acme+tiny-tests'}" in out
    assert f"FOUND path {project.cache / 'repos'}" in out
    assert "FOUND fix" not in out


@pytest.mark.e2e
def test_nothing_the_agent_is_given_contains_the_fix(unsandboxed):
    project = unsandboxed
    gold = (project.task_dir("gold", "tiny-add") / "model.patch").read_text()
    added = [
        line[1:].strip()
        for line in gold.splitlines()
        if line.startswith("+") and not line.startswith("+++") and line[1:].strip()
    ]
    assert added
    ws = project.cache / "workspaces" / "default" / "spy" / "tiny-add"
    given = [(ws / ".issue.md").read_text()]
    given += [
        p.read_text() for p in (project.task_dir("spy", "tiny-add") / "agent").glob("*.prompt.md")
    ]
    for text in given:
        for line in added:
            assert line not in text


@needs_srt
def test_a_hanging_sandboxed_agent_is_killed_with_everything_it_started(project):
    marker = f"{time.time_ns() % 10**9}"
    spy_project(project, sandbox=True)
    modes = project.root / "modes.toml"
    modes.write_text(
        modes.read_text()
        .replace('command = "spy-agent"', f'command = "setsid sleep 7{marker} & sleep 8{marker}"')
        .replace("timeout = 120", "timeout = 2")
    )
    start = time.monotonic()
    project.doit("run", "tiny:spy", "instances=tiny-add")
    assert time.monotonic() - start < 30
    assert project.read("spy", "tiny-add", "agent.json")["status"] == "timeout"
    time.sleep(0.5)
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if marker.encode() in cmdline:
            alive.append((pid, cmdline))
    assert not alive


@needs_srt
def test_sandbox_settings_are_part_of_the_agent_run(project):
    """Turning isolation off or letting another host in is another experiment: the agent runs
    again."""
    spy_project(project, sandbox=True, find=False)
    project.doit("run", "tiny:spy", "instances=tiny-add")
    _, executed = project.doit("run", "tiny:spy", "instances=tiny-add")
    assert not any(e.startswith("agent:") for e in executed)
    modes = project.root / "modes.toml"
    modes.write_text(
        modes.read_text().replace(
            'isolation = "srt"', 'isolation = "srt"\nallow_hosts = ["example.org"]'
        )
    )
    _, executed = project.doit("run", "tiny:spy", "instances=tiny-add")
    assert "agent:tiny/spy/tiny-add" in executed
    modes.write_text(modes.read_text().replace('isolation = "srt"', 'isolation = "none"'))
    _, executed = project.doit("run", "tiny:spy", "instances=tiny-add")
    assert "agent:tiny/spy/tiny-add" in executed
    assert project.read("spy", "tiny-add", "agent.json")["isolation"] == "none"


def test_the_model_endpoint_is_the_one_isolated_agents_reach():
    from nginx_eval.agent.sandbox import model_endpoint

    assert model_endpoint({}) == "api.anthropic.com:443"
    assert model_endpoint({"ANTHROPIC_BASE_URL": "http://127.0.0.1:8765"}) == "127.0.0.1:8765"
    assert (
        model_endpoint({"ANTHROPIC_BASE_URL": "https://gw.example.org/v1"}) == "gw.example.org:443"
    )
    assert model_endpoint({"ANTHROPIC_BASE_URL": "http://[::1]:9"}) == "[::1]:9"


def test_a_tool_under_a_hidden_directory_stays_hidden(tmp_path):
    from nginx_eval.agent.sandbox import srt_settings

    hidden_bin = tmp_path / "project" / "bin"
    hidden_bin.mkdir(parents=True)
    box = {"endpoint": "api.anthropic.com:443", "allow_hosts": ["example.org"], "binds": []}
    settings = srt_settings(
        box,
        workspace=tmp_path / "ws",
        writable=[],
        environ={"PATH": f"{hidden_bin}:/usr/bin", "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")},
        hidden=[tmp_path / "project"],
    )
    fs = settings["filesystem"]
    assert fs["denyRead"] == ["/", str(tmp_path / "project")]
    assert str(hidden_bin) not in fs["allowRead"] and "/usr/bin" in fs["allowRead"]
    assert settings["network"]["allowedDomains"] == ["api.anthropic.com:443", "example.org"]
    assert fs["allowWrite"] == [str(tmp_path / "ws"), str(tmp_path / "cfg")]


def test_the_users_own_claude_state_is_hidden_but_a_cli_installed_there_runs(tmp_path):
    """The agent writes its own home (CLAUDE_CONFIG_DIR); the user's ~/.claude and
    ~/.claude.json stay out of sight even under a readable directory, but a CLI the phase runs
    from ~/.claude/local stays readable."""
    from nginx_eval.agent.sandbox import srt_settings

    home = tmp_path / "home"
    bin_dir = home / ".claude" / "local" / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "claude").write_text("#!/bin/sh\n")
    (home / ".claude" / "bin").mkdir()
    (home / ".claude.json").write_text("{}")
    box = {"endpoint": "api.anthropic.com:443", "allow_hosts": [], "binds": []}
    settings = srt_settings(
        box,
        workspace=tmp_path / "ws",
        writable=[],
        hidden=[],
        environ={
            "PATH": f"{home}:{home / '.claude' / 'bin'}:/usr/bin",
            "CLAUDE_CONFIG_DIR": str(tmp_path / "agent-home"),
        },
        programs=[bin_dir / "claude"],
        private=[home / ".claude", home / ".claude.json", home / "absent"],
    )
    fs = settings["filesystem"]
    assert fs["denyRead"] == ["/", str(home / ".claude"), str(home / ".claude.json")]
    assert fs["allowWrite"] == [str(tmp_path / "ws"), str(tmp_path / "agent-home")]
    assert str(home) in fs["allowRead"] and str(home / ".claude" / "bin") not in fs["allowRead"]
    assert str(home / ".claude" / "local" / "node_modules") in fs["allowRead"]


def test_the_agents_tests_tree_is_readable_inside_the_hidden_cache_and_not_writable(tmp_path):
    from nginx_eval.agent.sandbox import srt_settings

    cache = tmp_path / "cache"
    tree = cache / "agent-tests" / ("a" * 40)
    tree.mkdir(parents=True)
    box = {"endpoint": "api.anthropic.com:443", "allow_hosts": [], "binds": []}
    fs = srt_settings(
        box,
        workspace=cache / "workspaces" / "ws",
        writable=[],
        hidden=[cache],
        environ={"PATH": "/usr/bin", "CLAUDE_CONFIG_DIR": str(tmp_path / "cfg")},
        readable=[tree],
    )["filesystem"]
    # srt lets the narrower allowRead win over the hidden cache (test_suite_e2e.py runs it).
    assert fs["denyRead"] == ["/", str(cache)] and fs["allowRead"][-1] == str(tree)
    assert not any(str(tree).startswith(w) for w in fs["allowWrite"])


@pytest.mark.e2e
@needs_srt
def test_each_refused_connection_is_read_from_srts_log_with_its_time(tmp_path):
    import json
    import subprocess

    from nginx_eval.agent import sandbox

    box = {"endpoint": "127.0.0.1:1", "allow_hosts": [], "binds": []}
    (tmp_path / "ws").mkdir()
    settings = tmp_path / "srt.json"
    support = sandbox.write_support(tmp_path / "support")
    settings.write_text(
        json.dumps(
            sandbox.srt_settings(
                box,
                workspace=tmp_path / "ws",
                writable=[tmp_path],
                hidden=[],
                environ=dict(os.environ, CLAUDE_CONFIG_DIR=str(tmp_path / "cfg")),
                support=support,
            )
        )
    )
    argv = sandbox.wrap(
        "curl -s -o /dev/null http://127.0.0.1:9/x; "
        "curl -s -o /dev/null https://github.com/; echo done",
        settings_file=settings,
        stderr_file=tmp_path / "stderr",
        environ=os.environ,
        support=support,
        endpoint=box["endpoint"],
    )
    with sandbox.TimestampedLog(tmp_path / "srt.log") as log:
        out = subprocess.run(
            argv,
            cwd=tmp_path / "ws",
            stdout=subprocess.PIPE,
            stderr=log.fd,
            text=True,
            timeout=60,
            env=sandbox.phase_environment(os.environ, tmp_path, support),
        )
    assert out.stdout.strip() == "done"
    blocked = sandbox.blocked_connections((tmp_path / "srt.log").read_text())
    assert [(b["host"], b["port"]) for b in blocked] == [("127.0.0.1", 9), ("github.com", 443)]
    assert all(len(b["time"]) == 20 and b["time"].endswith("Z") for b in blocked)


@needs_srt
def test_an_srt_that_cannot_start_a_sandbox_stops_the_run_with_its_own_words(project):
    """srt's start is not probed apart from the self-test; when the self-test shows no step,
    what srt says on its own start is the one line."""
    spy_project(project, sandbox=True)
    stub = project.base / "bin" / "srt"
    stub.write_text("#!/bin/sh\necho 'srt: no user namespaces here' >&2\nexit 1\n")
    stub.chmod(0o755)
    project.env["NGINX_EVAL_SRT"] = str(stub)
    proc, executed = project.doit("run", "tiny:spy", "instances=tiny-add", check=False)
    assert proc.returncode != 0 and not [t for t in executed if t.startswith("agent:")]
    (line,) = proc.stderr.splitlines()
    assert line == (
        f"nginx-eval: error: {project.root / 'modes.toml'}, mode spy, field isolation: "
        "srt cannot start a sandbox here: srt: no user namespaces here"
    )
