"""`doit clean` of one run: its workspaces and the builds only it uses go; other runs keep all."""

import json


def build_keys(project, run):
    return {
        json.loads(p.read_text())["key"] for p in (project.results / run).glob("*/*/build.json")
    }


def snapshot(root):
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_clean_of_one_run_keeps_every_other_run(project):
    env_a = {"FAKE_AGENT": "fix-and-noise"}  # a patch of its own: a build only run A uses
    project.doit(
        "run", "tiny:gold", "tiny:none", "tiny:fake", "run=A", "keep_workspaces=1", env=env_a
    )
    project.doit("run", "tiny:gold", "tiny:none", "run=B")
    keys_a, keys_b = build_keys(project, "A"), build_keys(project, "B")
    only_a = keys_a - keys_b
    assert only_a and keys_b
    workspaces_a = project.cache / "workspaces" / "A"
    assert any(workspaces_a.rglob(".git"))
    results_b = snapshot(project.results / "B")
    calls = len(project.agent_calls())

    proc, _ = project.doit("clean", "--clean-all", "run=A", env=env_a)

    assert not any(workspaces_a.rglob(".git"))
    for key in only_a:
        assert not (project.cache / "builds" / key).exists()
    for key in keys_b:
        assert (project.cache / "builds" / key / "build.json").exists()
    assert snapshot(project.results / "B") == results_b
    assert (project.results / "A" / "fake" / "tiny-add" / "agent.json").exists()
    _, executed = project.doit("run", "tiny:gold", "tiny:none", "run=B")
    assert executed == []
    # Run A again: its builds come back, its agents do not run again, and their patches stay
    # the ones taken from the agent's workspace, even when the patch stage has to run again.
    patch = (project.results / "A" / "fake" / "tiny-add" / "model.patch").read_bytes()
    assert patch
    (project.results / "A" / "fake" / "tiny-add" / "patch.json").unlink()
    project.doit("run", "tiny:gold", "tiny:none", "tiny:fake", "run=A", env=env_a)
    assert len(project.agent_calls()) == calls
    assert (project.results / "A" / "fake" / "tiny-add" / "model.patch").read_bytes() == patch
    for key in only_a:
        assert (project.cache / "builds" / key / "build.json").exists()
