"""What a user sees of the first commands: `doit list`, `doit clean`, the doctor before the clones,
and dodo.py running the package next to it."""

import re
import shutil
import subprocess
import sys

from conftest import DODO, SOURCE_ROOT
from test_doctor import ALL_TOOLS, BASE_PATHS, FakeProbe, report, task

from nginx_eval.checks import doctor, doctor_report
from nginx_eval.doitext.invocation import lists_commands_only
from nginx_eval.pipeline import STAGE_DOCS


def listed(proc):
    return {
        line.split()[0]: line.split(None, 1)[1] if len(line.split()) > 1 else ""
        for line in proc.stdout.splitlines()
        if line.strip()
    }


def workspace_dirs(path):
    """Workspaces (directories) and stamps (<id>.json) under `path`."""
    return sorted(p.name for p in path.iterdir()) if path.is_dir() else []


def build_dirs(project):
    return {p.name for p in (project.cache / "builds").iterdir() if not p.name.startswith(".")}


def test_list_shows_the_commands_a_user_runs_first(project):
    proc, _ = project.doit("list")
    entries = listed(proc)
    assert {
        "tiny",
        "tiny:gold",
        "tiny:none",
        "tiny:fake",
        "tiny:validate",
        "report",
        "doctor",
    } <= set(entries), proc.stdout
    # No stage: neither its group (`agent`, `repos`, ...) nor its per-unit tasks.
    assert not [n for n in entries if n.split(":")[0] in STAGE_DOCS or "/" in n], proc.stdout
    assert all(doc and "every pipeline stage" not in doc for doc in entries.values()), proc.stdout
    assert entries["tiny:fake"] == "score mode fake (scripted agent) on tiny"
    assert entries["tiny"] == "every mode on tiny, and the report"
    # Every task is still there, by the names the README and the tests use.
    proc, _ = project.doit("list", "--all")
    every = listed(proc)
    for name in (
        "agent:tiny/fake/tiny-add",
        "workspace:tiny/fake/tiny-mul",
        "repos:acme+tiny",
        "repos:acme+tiny-tests",
        "results:tiny/gold",
        "grade:tiny/none/tiny-add",
        "validate:tiny/tiny-add",
        "validation:tiny",
        "tiny:report",
        "agent",
        "repos",
        "build",
        "tiny:gold",
        "tiny",
        "report",
        "doctor",
    ):
        assert name in every, name
    assert every["repos"] == "bare clones of the pinned repositories"
    assert not any("every pipeline stage" in doc for doc in every.values())
    assert not any(name.startswith("_") for name in every)
    # A stage's group still runs as one command (the doctor tells users to run it).
    _, executed = project.doit("run", "repos")
    assert sorted(executed) == ["repos:acme+tiny", "repos:acme+tiny-tests"]


def test_a_plain_list_makes_only_the_tasks_it_shows(project):
    """A plain `doit list` makes the tasks it prints and not the units' (a listing of the
    shipped benchmark spent most of its time on them; scripts/bench_list.py times it): what it
    prints is what the full list of tasks gives, in either order."""
    for layout in ([], ["--sort", "definition"], ["-q"]):
        plain, _ = project.doit("list", *layout)
        full, _ = project.doit("list", "-p", *layout)  # -p: every task is made
        assert plain.stdout.splitlines() == [
            line for line in full.stdout.splitlines() if not line.startswith("_")
        ], layout
    assert lists_commands_only(["list"]) and lists_commands_only(["list", "-q", "run=x"])
    assert lists_commands_only(["-f", "dodo.py", "list", "--sort", "definition"])
    assert lists_commands_only(["list", "--template={name}"])
    for argv in (
        ["list", "--all"],
        ["list", "-s"],
        ["list", "tiny:gold"],
        ["list", "--deps"],
        ["list", "-p"],
        ["run"],
        ["info", "tiny"],
    ):
        assert not lists_commands_only(argv), argv


def test_a_finished_agent_s_workspace_goes_once_its_patch_is_taken(project):
    """At 78 MiB a workspace, 4 agent modes on the shipped tasks would fill a disk: each goes
    after its patch stage; the patch, grade and a no-op rerun do not need it."""
    env = {"FAKE_AGENT": "fix-and-noise"}
    project.doit("run", "tiny:fake", "run=A", env=env)
    workspaces = project.cache / "workspaces" / "A" / "fake"
    assert workspace_dirs(workspaces) == []
    assert (
        b"return a + b" in (project.task_dir("fake", "tiny-add", "A") / "model.patch").read_bytes()
    )
    assert project.read("fake", "tiny-add", "grade.json", "A")["status"] == "resolved"
    calls = project.agent_calls()
    _, executed = project.doit("run", "tiny:fake", "run=A", env=env)
    assert executed == [] and project.agent_calls() == calls
    # The patch stage run again (its record lost) keeps the diff it took.
    (project.task_dir("fake", "tiny-add", "A") / "patch.json").unlink()
    _, executed = project.doit("run", "tiny:fake", "run=A", env=env)
    assert "patch:tiny/fake/tiny-add" in executed, executed
    assert not [t for t in executed if t.startswith(("workspace:", "agent:"))], executed
    assert workspace_dirs(workspaces) == []
    assert (
        b"return a + b" in (project.task_dir("fake", "tiny-add", "A") / "model.patch").read_bytes()
    )


def test_clean_prints_a_summary_and_finished_agents_get_no_new_workspace(project):
    env = {"FAKE_AGENT": "fix-and-noise"}
    project.doit(
        "run", "tiny:gold", "tiny:none", "tiny:fake", "run=A", "keep_workspaces=1", env=env
    )
    workspaces = project.cache / "workspaces" / "A" / "fake"
    assert workspace_dirs(workspaces) == ["tiny-add", "tiny-add.json", "tiny-mul", "tiny-mul.json"]
    builds = build_dirs(project)
    assert builds
    calls = project.agent_calls()
    patch = (project.task_dir("fake", "tiny-add", "A") / "model.patch").read_bytes()
    assert patch

    proc, _ = project.doit("clean", "--clean-all", "-n", "run=A", env=env)
    assert re.fullmatch(
        rf"nginx-eval: would remove 2 workspaces, {len(builds)} builds, "
        r"[\d.]+ MiB \(dry run: nothing removed\)\n",
        proc.stdout,
    ), proc.stdout
    assert workspace_dirs(workspaces) == ["tiny-add", "tiny-add.json", "tiny-mul", "tiny-mul.json"]
    assert build_dirs(project) == builds

    proc, _ = project.doit("clean", "--clean-all", "run=A", env=env)
    # One line, not one per clean action of every task.
    assert re.fullmatch(
        rf"nginx-eval: removed 2 workspaces, {len(builds)} builds, freed "
        r"[\d.]+ MiB\n",
        proc.stdout,
    ), proc.stdout
    assert workspace_dirs(workspaces) == [] and not build_dirs(project)

    # The finished agents do not run again and get no new workspace; their patches stay.
    (project.task_dir("fake", "tiny-add", "A") / "patch.json").unlink()
    _, executed = project.doit("run", "tiny:gold", "tiny:none", "tiny:fake", "run=A", env=env)
    assert "patch:tiny/fake/tiny-add" in executed
    assert not [t for t in executed if t.startswith(("workspace:", "agent:"))], executed
    assert workspace_dirs(workspaces) == []
    assert project.agent_calls() == calls
    assert (project.task_dir("fake", "tiny-add", "A") / "model.patch").read_bytes() == patch
    assert project.read("fake", "tiny-add", "grade.json", "A")["status"] == "resolved"
    _, executed = project.doit("run", "tiny:gold", "tiny:none", "tiny:fake", "run=A", env=env)
    assert executed == []

    # verbosity=2: a line per removed item (doit's own lines too).
    proc, _ = project.doit("clean", "--clean-all", "verbosity=2", "run=A", env=env)
    assert "nginx-eval: removed build " in proc.stdout
    assert "executing 'Python: function remove_task_build'" in proc.stdout
    assert re.search(
        r"^nginx-eval: removed 0 workspaces, [1-9]\d* builds, freed [\d.]+ MiB$", proc.stdout, re.M
    ), proc.stdout

    # A forgotten agent gets a fresh workspace again, and runs.
    project.doit("forget", "agent:tiny/fake/tiny-add", "run=A", env=env)
    _, executed = project.doit("run", "tiny:fake", "run=A", "keep_workspaces=1", env=env)
    assert "workspace:tiny/fake/tiny-add" in executed and "agent:tiny/fake/tiny-add" in executed
    assert "workspace:tiny/fake/tiny-mul" not in executed
    assert (workspaces / "tiny-add" / ".git").is_dir()
    assert len(project.agent_calls()) == len(calls) + 1


def test_dodo_runs_the_package_next_to_it(project, tmp_path):
    """A second clone: its dodo.py runs its own nginx_eval, not the installed one."""
    clone = tmp_path / "clone"
    clone.mkdir()
    shutil.copy(DODO, clone / "dodo.py")
    shutil.copytree(
        SOURCE_ROOT / "nginx_eval",
        clone / "nginx_eval",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copytree(SOURCE_ROOT / "templates", clone / "templates")
    marker = clone / "nginx_eval" / "__init__.py"
    marker.write_text(
        marker.read_text() + "import sys as _s\n"
        "print('nginx-eval package at ' + __file__, file=_s.stderr)\n"
    )
    # Run from elsewhere (not from the clone, whose directory would be first on sys.path anyway),
    # with the original installed: doit imports its backend from the installed package first.
    proc = subprocess.run(
        [sys.executable, "-m", "doit", "-f", str(clone / "dodo.py"), "list"],
        cwd=tmp_path,
        env=project.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"nginx-eval package at {clone / 'nginx_eval' / '__init__.py'}" in proc.stderr
    assert "tiny:gold" in proc.stdout
    installed = subprocess.run(
        [sys.executable, "-c", "import nginx_eval; print(nginx_eval.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert str(clone) not in installed.stdout  # the copy is not what is installed


def test_doctor_verdict_is_never_all_good_when_something_was_not_checked(project):
    probe = FakeProbe(ALL_TOOLS, BASE_PATHS)
    text, ok = report([task("t-1", ["a.t"])], {}, probe, available=False)
    assert ok  # nothing is missing, as far as it could see
    assert "all good" not in text
    assert text.splitlines()[-1].startswith(
        "doctor: not checked: nginx/nginx, nginx/nginx-tests not cloned"
    )
    assert "`doit run repos:nginx+nginx repos:nginx+nginx-tests`" in text.splitlines()[-1]
    text, _ = doctor_report.render(
        doctor.diagnose([task("t-1", ["a.t"])], _Unread(), probe), 1, "nginx"
    )
    assert text.splitlines()[-1] == (
        "doctor: not checked: nginx/nginx, nginx/nginx-tests not cloned (see WARN above); run "
        "`doit run repos:nginx+nginx repos:nginx+nginx-tests` or `doit run nginx:gold` (with the "
        "same run=/instances=), then the doctor again"
    )

    # On the fixture, before the clones exist.
    proc, executed = project.doit("run", "doctor")
    assert executed == ["doctor"]
    last = proc.stdout.strip().splitlines()[-1]
    assert "all good" not in proc.stdout
    assert last.startswith("doctor: not checked: acme/tiny, acme/tiny-tests not cloned"), last
    assert "`doit run repos:acme+tiny repos:acme+tiny-tests` or `doit run tiny:gold`" in last
    # The first command it offers clones and does nothing else, and it is enough.
    _, executed = project.doit("run", "repos:acme+tiny", "repos:acme+tiny-tests")
    assert sorted(executed) == ["repos:acme+tiny", "repos:acme+tiny-tests"]
    proc, _ = project.doit("run", "doctor")
    assert proc.stdout.strip().splitlines()[-1] == "doctor: all good"


class _Unread:
    def repo_available(self, repo, commit):
        return False

    def read(self, repo, commit, path):
        return None

    def pcre2_capable(self, repo, commit):
        return None


def files_under(*roots):
    """{path: (size, mtime)} of every file under `roots`, and every directory."""
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*")) if root.exists() else ():
            stat = path.stat()
            found[str(path)] = (stat.st_size, stat.st_mtime_ns) if path.is_file() else "dir"
    return found


def preview_table(lines):
    """{stage: [done, to run(, to check)]} of a dry run's table."""
    return {
        line.split()[0]: line.split()[1:]
        for line in lines[2:]
        if line.startswith("  ") and not line.startswith("  (") and ":" not in line
    }


def test_a_dry_run_says_what_would_run_and_what_its_agents_cost_and_does_nothing(project):
    """`doit run ... dry_run=1`: stage by stage, the units done and to run, the agent runs it
    would start with their expected cost from earlier runs of the mode (or "unknown"); no agent,
    clone, build or prove starts, and nothing is written: no run.json, no doit database row
    (issue 37)."""

    def dry(*words):
        proc, executed = project.doit("run", *words, "dry_run=1")
        assert executed == [] and proc.stderr == "", proc.stderr
        return proc.stdout.splitlines()

    out = dry("tiny:fake", "limit=1")
    assert out[0] == (
        "nginx-eval: dry run of `doit run tiny:fake limit=1 strict=0 report=0` in run "
        "default: benchmark tiny, 1 task, modes fake; nothing is started or written"
    )
    table = preview_table(out)
    assert table["agent"] == ["0", "1"] and table["repos"] == ["0", "2"]
    assert table["build"] == ["0", "1"] and table["prove"] == ["0", "1"]
    assert "agent runs to start: 1" in out
    assert (
        "  fake: 1 agent run: expected cost unknown (no earlier run of this mode recorded a "
        "cost), time unknown"
    ) in out
    assert project.agent_calls() == [] and files_under(project.results, project.cache) == {}

    project.doit("run", "tiny:fake")
    project.doit("forget", "agent:tiny/fake/tiny-add")
    before = files_under(project.results, project.cache)
    out = dry("tiny:fake")
    assert out[0].endswith("benchmark tiny, 2 tasks, modes fake; nothing is started or written")
    table = preview_table(out)
    assert table["agent"] == ["1", "1"] and table["repos"] == ["2", "0"]
    assert "agent runs to start: 1" in out
    assert any(
        line.startswith(
            "  fake: 1 agent run: expected cost $0.25 ($0.25 each, the mean "
            "of 2 earlier runs), time "
        )
        for line in out
    ), out
    assert files_under(project.results, project.cache) == before
    assert sorted(project.agent_calls()) == ["tiny-add", "tiny-mul"]
    # Another mode: its units all to run, no agent.
    out = dry("tiny:gold", "instances=tiny-mul")
    table = preview_table(out)
    assert "agent runs to start: 0" in out and table["grade"] == ["0", "1"], out
    assert files_under(project.results, project.cache) == before
    proc, _ = project.doit("clean", "dry_run=1", check=False)
    assert proc.returncode == 2 and proc.stderr.startswith(
        "nginx-eval: error: dry_run=1 is a variable of `doit run`, not of `doit clean`"
    )
