"""End to end: a mode with `tests = "base"` gives its agent nginx-tests as of the base commit
(suite/stage.py), named in its prompts, recorded in agent.json; in the sandbox, as a phase runs, a
test file of that tree runs green against the fixture program built there, and the tree cannot be
written. Real doit, git, cc, make, prove and srt on the fixture repositories."""

import json
import os
import subprocess
import tempfile

import fixture_repos
from test_sandbox import needs_srt

from nginx_eval.agent import sandbox
from nginx_eval.core.layout import Layout
from nginx_eval.run.benchmark import load_benchmark
from nginx_eval.suite import stage as suite
from nginx_eval.workspace.stage import create_workspace

LATER = "2099-01-01T00:00:00+0000"  # after every base commit of acme/tiny (made now)


def with_later_test(project):
    """tiny-add graded also by calc_neg.t, a test that landed after its base (as nginx-tests
    adds a fix's test); a copy of the fake mode with `tests = "base"`."""
    later = fixture_repos.add_later_test(project.mirrors / "acme+tiny-tests", LATER)
    bench = project.benchmark()
    add = bench["tasks"][0]
    add.update(
        test_commit=later,
        test_files=["calc_add.t", "calc_neg.t"],
        fail_to_pass=["calc_add.t:1 add two numbers", "calc_neg.t:1 add negatives"],
    )
    project.write_benchmark(bench)
    modes = project.root / "modes.toml"
    text = modes.read_text()
    modes.write_text(
        text
        + "\n"
        + text.replace("[modes.fake]", "[modes.fake_t]")
        .replace("modes.fake.phases", "modes.fake_t.phases")
        .replace('model = "fake-1"', 'model = "fake-1"\ntests = "base"')
    )
    return later


def test_a_mode_with_tests_gets_the_tree_as_of_the_base_and_one_without_does_not(project):
    with_later_test(project)
    project.doit("run", "tiny:fake", "tiny:fake_t", "instances=tiny-add")
    tree = project.cache / "agent-tests" / project.commits["t_head"]
    given = project.read("fake_t", "tiny-add", "agent.json")
    assert given["tests_tree"] == {
        "repo": "acme/tiny-tests",
        "commit": project.commits["t_head"],
        "date": "2020-01-01T00:00:00+00:00",
        "notes": [],
    }
    prompt = (project.task_dir("fake_t", "tiny-add") / "agent" / "1-solve.prompt.md").read_text()
    assert f"nginx-tests) as of this checkout is in {tree} (read-only)" in prompt
    plain = project.read("fake", "tiny-add", "agent.json")
    assert plain["tests_tree"] is None
    assert (
        "nginx-tests"
        not in (project.task_dir("fake", "tiny-add") / "agent" / "1-solve.prompt.md").read_text()
    )
    # The test that came after the base is not in the tree; the tree is not in the patch.
    assert (tree / "calc_add.t").exists() and not (tree / "calc_neg.t").exists()
    assert not (tree / ".git").exists()
    for mode in ("fake", "fake_t"):
        assert project.read(mode, "tiny-add", "grade.json")["status"] == "resolved"
        patch = (project.task_dir(mode, "tiny-add") / "model.patch").read_text()
        assert [line for line in patch.splitlines() if line.startswith("+++ ")] == [
            "+++ b/src/core/calc.c"
        ]
    # Nothing to do the second time; the key is an agent input, so taking it away runs again.
    _, executed = project.doit("run", "tiny:fake", "tiny:fake_t", "instances=tiny-add")
    assert executed == []
    modes = project.root / "modes.toml"
    modes.write_text(modes.read_text().replace('tests = "base"\n', ""))
    _, executed = project.doit("run", "tiny:fake", "tiny:fake_t", "instances=tiny-add")
    assert [e for e in executed if e.startswith("agent:")] == ["agent:tiny/fake_t/tiny-add"]


@needs_srt
def test_in_the_sandbox_a_test_file_of_the_tree_runs_green_and_the_tree_is_read_only(
    project, tmp_path
):
    with_later_test(project)
    project.doit("run", "repos")
    layout = Layout.from_env(environ=project.env)
    (task,) = load_benchmark(project.root / "tasks" / "tiny.json").select(["tiny-add"])
    tree = suite.ensure_tree(layout, suite.as_of(layout, task))
    create_workspace(layout, "m", task)
    ws = layout.workspace("m", task.instance_id)
    (ws / "src" / "core" / "calc.c").write_text(fixture_repos.CALC_C % ("a + b", "a * b"))
    other = layout.agent_tests_tree("0" * 40)  # another task's tree stays hidden
    other.mkdir(parents=True)
    # As AgentRun.launch_isolated runs a phase: its settings, its environment, srt.
    box = sandbox.settings(load_mode_with_tests())
    logs, tmp = tmp_path / "logs", tempfile.mkdtemp(prefix="nginx-eval-test-")
    logs.mkdir()
    env = dict(project.env, CLAUDE_CONFIG_DIR=str(tmp_path / "cfg"))
    settings = tmp_path / "srt.json"
    support = sandbox.write_support(layout.sandbox_support)
    settings.write_text(
        json.dumps(
            sandbox.srt_settings(
                box,
                workspace=ws,
                writable=[logs, tmp],
                hidden=sandbox.hidden_paths(layout),
                environ=env,
                readable=[tree],
                support=support,
            )
        )
    )
    command = (
        f"./auto/configure >/dev/null && make >/dev/null && "
        f"TEST_NGINX_BINARY=$PWD/objs/nginx prove -v -I {tree}/lib {tree}/calc_add.t; "
        f"echo prove=$?; touch {tree}/mine.t; echo pwned >> {tree}/calc_add.t; "
        f"ls {layout.cache}; ls {tree.parent}"
    )
    out = subprocess.run(
        sandbox.wrap(
            command,
            settings_file=settings,
            stderr_file=logs / "stderr",
            environ=env,
            support=support,
            endpoint=box["endpoint"],
        ),
        cwd=ws,
        env=sandbox.phase_environment(env, tmp, support),
        capture_output=True,
        text=True,
        timeout=300,
    )
    stderr = (logs / "stderr").read_text()
    assert "ok 1 - add two numbers" in out.stdout and "prove=0" in out.stdout, out.stdout + stderr
    # Both writes refused: the agent is an ordinary user inside, and the tree has no write bits
    # (Permission denied) where the mount is not read-only first.
    assert stderr.count("Read-only file system") + stderr.count("Permission denied") == 2, stderr
    # Of the cache, only the way to the workspace, to this tree and to the sandbox's support
    # files: no clone, no other tree.
    assert out.stdout.split("prove=0\n", 1)[1].split() == [
        "agent-tests",
        "sandbox-support",
        "workspaces",
        tree.name,
    ]
    assert not (tree / "mine.t").exists() and "pwned" not in (tree / "calc_add.t").read_text()
    assert suite.verified_tree(layout, suite.as_of(layout, task))[1] == []
    os.rmdir(tmp)


def load_mode_with_tests():
    from nginx_eval.run.modes import parse_modes

    return parse_modes({"modes": {"m": {"tests": "base", "phases": [{"command": "x"}]}}}, "m.toml")[
        "m"
    ]
