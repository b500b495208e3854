"""A SWE-bench task's environment inside the agent's sandbox (agent/swe_view.py,
bwrap_agent_user.sh), on a fixture Python package and a venv made from this Python: the venv
first on PATH, the workspace also at the testbed path where the venv's editable install points,
the agent's edit taking effect there, pytest's writes, srt's protections repeated there, and the
preflight's import check."""

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from types import SimpleNamespace
from unittest.mock import patch

import jinja2
import pytest
from conftest import script_module
from test_sandbox import needs_srt

from nginx_eval.agent import preflight, sandbox, swe_view
from nginx_eval.core.errors import UserError
from nginx_eval.core.layout import Layout

WRONG = "def answer():\n    return 41\n"
TEST = (
    "import fixpkg\n\n\ndef test_answer():\n    assert fixpkg.answer() == 42\n\n\n"
    "def test_writes_its_tmp(tmp_path):\n    (tmp_path / 'f').write_text('x')\n"
    "    assert (tmp_path / 'f').read_text() == 'x'\n"
)


def make_env(tmp_path, package="fixpkg"):
    """A workspace holding the package, a venv whose .pth points at the testbed path (what an
    editable install of a flat project writes), and the view of both."""
    ws = tmp_path / "ws"
    (ws / "fixpkg").mkdir(parents=True)
    (ws / "fixpkg" / "__init__.py").write_text(WRONG)
    (ws / "tests").mkdir()
    (ws / "tests" / "test_answer.py").write_text(TEST)
    venv = tmp_path / "venv"
    # This Python's own site-packages (pytest) are the environment's dependencies.
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    # Mount points that exist on the host, as the real /testbed and /opt/swe-env must.
    testbed, venv_at = tmp_path / "testbed", tmp_path / "venv-at"
    testbed.mkdir()
    venv_at.mkdir()
    site = sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})
    with open(os.path.join(site, "_fixpkg_editable.pth"), "w") as f:
        f.write(f"{testbed}\n")
    view = {
        "root": "/",
        "venv": str(venv),
        "venv_path": str(venv_at),
        "testbed": str(testbed),
        "path": [f"{venv_at}/bin"],
        "env": {"VIRTUAL_ENV": str(venv_at)},
        "digest": "fixpkg-1.0-0123456789ab",
        "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
        "package": package,
        "test_command": "pytest -rA -p no:cacheprovider",
        "testbed_files": None,
    }
    return ws, view


def in_sandbox(tmp_path, ws, view, command):
    """(exit code, stdout, the command's stderr) of `command` run as a phase is, with `view`."""
    box = {"isolation": "srt", "endpoint": "127.0.0.1:1", "allow_hosts": [], "binds": []}
    # srt's sockets go in TMPDIR, whose path must stay short (108 bytes with the socket's name).
    scratch = tempfile.mkdtemp(prefix="swe-")
    try:
        got = sandbox.run_isolated(
            command,
            box=box,
            workspace=ws,
            scratch=scratch,
            hidden=[],
            environ=os.environ,
            support=sandbox.write_support(tmp_path / "support"),
            view=view,
            timeout=120,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return got.exit_code, got.stdout, got.said or got.srt_said[-2000:]


@pytest.mark.e2e
@needs_srt
def test_the_agent_runs_the_tasks_tests_in_its_environment_and_its_edit_takes_effect(tmp_path):
    ws, view = make_env(tmp_path)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)  # srt keeps .git/hooks read-only
    testbed, venv_at = view["testbed"], view["venv_path"]
    run = (
        f"cd {testbed} && python -m pytest -q -p no:cacheprovider tests/test_answer.py "
        f">/dev/null; echo pytest=$?"
    )
    command = "; ".join(
        [
            "echo python=$(command -v python)",
            # From elsewhere, the package comes from the testbed: the editable install's path.
            "cd / && echo file=$(python -c 'import fixpkg; print(fixpkg.__file__)')",
            run,
            # The agent edits its workspace (its working directory): the testbed sees it.
            f"cd {ws} && sed -i 's/41/42/' fixpkg/__init__.py",
            run,
            f"touch {testbed}/fixpkg/made && echo testbed=writable",
            f"(echo x > {testbed}/.bashrc) 2>/dev/null || echo bashrc=read-only",
            f"(touch {testbed}/.git/hooks/post-checkout) 2>/dev/null || echo hooks=read-only",
            f"(touch {venv_at}/x) 2>/dev/null || echo venv=read-only",
        ]
    )
    code, out, err = in_sandbox(tmp_path, ws, view, command)
    assert code == 0, err
    lines = out.split()
    assert f"python={venv_at}/bin/python" in lines
    assert f"file={testbed}/fixpkg/__init__.py" in lines
    # Red at the base, green after the edit; pytest's own tmp_path works in the sandbox.
    assert [x for x in lines if x.startswith("pytest=")] == ["pytest=1", "pytest=0"]
    assert {"testbed=writable", "bashrc=read-only", "hooks=read-only", "venv=read-only"} <= set(
        lines
    )
    assert (ws / "fixpkg" / "__init__.py").read_text() == WRONG.replace("41", "42")
    assert (ws / "fixpkg" / "made").exists()


@pytest.mark.e2e
@needs_srt
def test_the_preflight_says_in_one_line_when_the_package_does_not_import(tmp_path):
    ws, view = make_env(tmp_path, package="nosuchpkg")
    box = {"isolation": "srt", "endpoint": "127.0.0.1:1", "allow_hosts": [], "binds": []}
    support = sandbox.write_support(tmp_path / "support")
    argv = ["bash", "-c", swe_view.import_condition(view) + " && echo imported"]
    problem = sandbox.start_problem(
        argv, hidden=[], box=box, environ=os.environ, support=support, view=view, workspace=ws
    )
    assert problem == "ModuleNotFoundError: No module named 'nosuchpkg'"
    view["package"] = "fixpkg"
    argv = ["bash", "-c", swe_view.import_condition(view) + " && echo imported"]
    assert (
        sandbox.start_problem(
            argv, hidden=[], box=box, environ=os.environ, support=support, view=view, workspace=ws
        )
        is None
    )


@pytest.mark.e2e
@needs_srt
def test_no_agent_starts_when_an_environment_shown_does_not_import(tmp_path):
    """The preflight's check (preflight.environments_checked) on a checkout of the task's base
    from its bare clone: one line naming the task and the environment."""
    ws, view = make_env(tmp_path, package="nosuchpkg")
    layout = Layout(root=tmp_path / "p", cache=tmp_path / "c", results_root=tmp_path / "r")
    bare = layout.bare_repo("acme/fixpkg")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(["git", "-C", str(ws), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(ws), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "b"],
        check=True,
    )
    subprocess.run(["git", "clone", "-q", "--bare", str(ws), str(bare)], check=True)
    base = subprocess.run(
        ["git", "-C", str(ws), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    task = SimpleNamespace(instance_id="acme__fixpkg-1", repo="acme/fixpkg", base_commit=base)
    mode = SimpleNamespace(isolation="srt")
    ctx = SimpleNamespace(layout=layout, swe_env=lambda t: view)
    box = {"isolation": "srt", "endpoint": "127.0.0.1:1", "allow_hosts": [], "binds": []}
    with patch.object(sandbox, "settings", lambda m: box):
        with pytest.raises(UserError) as e:
            preflight.environments_checked(ctx, [(mode, task)])
        assert str(e.value) == (
            "task acme__fixpkg-1: the SWE-bench environment fixpkg-1.0-0123456789ab in the "
            'sandbox: `python -c "import nosuchpkg"` failed: ModuleNotFoundError: No module '
            "named 'nosuchpkg'; no agent started"
        )
        view["package"] = "fixpkg"
        preflight.environments_checked(ctx, [(mode, task)])


def test_a_root_filesystem_that_is_not_merged_usr_is_refused_in_one_line(tmp_path):
    root = tmp_path / "root"
    for d in ("usr/bin", "bin", "lib"):
        (root / d).mkdir(parents=True)
    view = dict(make_view_paths(tmp_path), root=str(root))
    problem = swe_view.view_problem(view)
    assert problem == (
        f"its root filesystem {root} is not merged-/usr (bin is a directory): its /usr alone "
        f"cannot be shown over the host's"
    )
    for d in ("bin", "lib"):
        (root / d).rmdir()
        (root / d).symlink_to(f"usr/{d}")
    assert swe_view.view_problem(view) is None


def make_view_paths(tmp_path):
    (tmp_path / "venv").mkdir(exist_ok=True)
    return {
        "venv": str(tmp_path / "venv"),
        "venv_path": str(tmp_path / "venv-at"),
        "testbed": str(tmp_path / "testbed"),
    }


def fixed_view(**env):
    """A view of fixed paths (root /r, venv /v) with the variables `env`, for view_lines."""
    return {
        "root": "/r",
        "venv": "/v",
        "venv_path": "/opt/swe-env",
        "testbed": "/testbed",
        "path": ["/opt/swe-env/bin"],
        "env": env,
        "digest": "d",
        "python": "3.9",
        "package": "p",
        "test_command": "pytest -rA",
        "testbed_files": None,
    }


def test_the_view_and_the_hosts_node_bound_outside_usr(tmp_path):
    view = fixed_view(VIRTUAL_ENV="/opt/swe-env")
    assert swe_view.view_lines(view, "/ws") == [
        "usr /r",
        "ro /v /opt/swe-env",
        "workspace /ws /testbed",
        "first /opt/swe-env/bin",
        "setenv VIRTUAL_ENV /opt/swe-env",
    ]
    # A node outside /usr stays visible over another /usr: nothing to bind.
    (tmp_path / "node").write_text("")
    (tmp_path / "node").chmod(0o755)
    swe_view.write_runtimes(tmp_path / "support", {"PATH": str(tmp_path)})
    assert (tmp_path / "support" / "runtimes").read_text() == ""
    assert (tmp_path / "support" / "runtime" / "node").is_file()  # the mount point
    node = swe_view.host_runtimes(os.environ).get("node")
    if node:
        swe_view.write_runtimes(tmp_path / "support", os.environ)
        assert (tmp_path / "support" / "runtimes").read_text() == f"{node} node\n"


@pytest.mark.parametrize("environment", [None, {"python": "3.9", "testbed": "/testbed"}])
def test_the_swebench_prompts_say_how_to_test_or_that_nothing_is_installed(environment):
    templates = os.path.join(os.path.dirname(__file__), "..", "templates", "swebench")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates), undefined=jinja2.StrictUndefined
    )
    if environment:
        environment = dict(environment, test_command="pytest -rA")
    text = env.get_template("prompt_raw.md.j2").render(
        task={"repo": "psf/requests"},
        problem_statement="x",
        issue_file=".issue.md",
        environment=environment,
    )
    if environment:
        assert "    pytest -rA <test files or test ids>" in text
        assert "Python\n3.9" in text and "/testbed" in text
    else:
        assert "No environment for this project's tests is installed here" in text


def sandbox_check():
    """scripts/swebench_sandbox_check.py as a module (a script, not a package module)."""
    return script_module("swebench_sandbox_check")


def test_the_sandbox_check_judges_a_pass_to_pass_test_the_test_patch_adds_with_it():
    """A PASS_TO_PASS test absent at the base (the test patch adds it, or a parameter of it)
    counts where it exists: with the test patch, before the gold; one the base run reports
    failing stays red, and a base run that reported nothing is no pass of anything."""
    judged = sandbox_check().judged
    old, new, fix = "t.py::test_old", "t.py::test_new[1]", "t.py::test_fix"
    status = {
        "base": {old: "PASSED"},
        "tests": {old: "PASSED", new: "PASSED", fix: "FAILED"},
        "gold": {old: "PASSED", new: "PASSED", fix: "PASSED"},
    }
    got = judged(status, [old, new], [fix])
    assert got["p2p_green_at_base"] and got["p2p_added_by_test_patch"] == [new]
    assert got["f2p_red_before_gold"] and got["f2p_green_after_gold"]
    red = judged({**status, "tests": {**status["tests"], new: "FAILED"}}, [old, new], [fix])
    assert not red["p2p_green_at_base"] and red["p2p_not_passed_at_base"] == [new]
    red = judged({**status, "base": {old: "FAILED"}}, [old, new], [fix])
    assert red["p2p_not_passed_at_base"] == [old]
    nothing = judged({**status, "base": {}}, [old, new], [fix])
    assert nothing["p2p_added_by_test_patch"] == [] and not nothing["p2p_green_at_base"]


def test_the_package_checked_is_the_repositorys():
    assert swe_view.package_of("psf/requests") == "requests"
    assert swe_view.package_of("scikit-learn/scikit-learn") == "sklearn"
    assert swe_view.package_of("astropy/astropy") == "astropy"


def test_a_tasks_stand_ins_are_made_for_the_attempt_and_every_phase_view_runs_them(tmp_path):
    """psf/requests' stand-ins for the internet (swebench/services.py, through the context):
    made in the attempt's logs for its workspace, written into each phase's view while the
    attempt runs, gone after it; the environment and allowed hosts untouched."""
    from contextlib import contextmanager

    from nginx_eval.agent.stage import AgentRun

    started = []
    standins = {
        "net": "/s/net.sh",
        "mounts": [["/s/hosts", "/etc/hosts"]],
        "over": [],
        "launcher": ["/opt/swe-services/bin/python", "server.py", "--"],
        "direct": [],
    }

    @contextmanager
    def services(layout, task, directory, workspace, log):
        started.append((task.repo, directory, workspace, log))
        yield standins

    task = SimpleNamespace(repo="psf/requests")
    run = SimpleNamespace(
        services=services, layout=None, task=task, logs=tmp_path, ws=tmp_path / "ws",
        env={"PATH": "/bin"}, standins=None,
    )  # fmt: skip
    with AgentRun.running_services(run):
        assert run.standins == standins
        ws, view = make_env(tmp_path)
        lines = swe_view.view_lines(view, ws, run.standins)
        assert "net /s/net.sh" in lines and "ro /s/hosts /etc/hosts" in lines
    assert started == [
        ("psf/requests", tmp_path / "standins", tmp_path / "ws", tmp_path / "services.log")
    ]
    assert run.standins is None and run.env == {"PATH": "/bin"}


@pytest.mark.e2e
@needs_srt
def test_the_stand_ins_run_in_the_agents_sandbox_as_in_a_verdict(tmp_path):
    """bwrap_agent_user.sh with an attempt's stand-ins (swebench/services.py): the sandbox's own
    network with the dropping route, the private /etc/hosts, the servers started before the
    command, https trusted through the bundle shown over the workspace's (the host's file kept),
    NO_PROXY for the addresses reached directly."""
    from test_swe_standins import CLIENT, CONNECT, needs_netns, services_venv

    from nginx_eval.swebench import services

    if needs_netns.args[0]:
        pytest.skip(needs_netns.kwargs["reason"])
    ws, view = make_env(tmp_path)
    (ws / "requests").mkdir()
    (ws / "requests" / "cacert.pem").write_bytes(b"")
    (ws / "client.py").write_text(CLIENT)
    (ws / "connect.py").write_text(CONNECT)
    venv = services_venv(tmp_path)
    with patch.object(services, "services_venv", return_value=venv):
        made = services.offline(None, "psf/requests", None, tmp_path / "run", ws)
    for point in (services.SERVICES_AT, services.STANDINS_AT):
        os.makedirs(point, exist_ok=True)
    standins = services.sandbox_view(made, view["testbed"], ("10.255.255.1",))
    real = swe_view.write_view
    with patch.object(swe_view, "write_view", lambda p, v, w: real(p, v, w, standins)):
        code, out, said = in_sandbox(
            tmp_path,
            ws,
            view,
            f"cd {view['testbed']} && python3 client.py requests/cacert.pem"
            " && python3 connect.py && echo NO_PROXY=$NO_PROXY",
        )
    assert code == 0, said
    assert out.splitlines()[-3:] == [
        "doesnotexist.google.com does not resolve",
        "timed out 0.5",
        "NO_PROXY=10.255.255.1",
    ], out + said
    assert out.startswith("https://httpbin.org/get httpbin httpbin.org/get\n"), out + said
    assert (ws / "requests" / "cacert.pem").read_bytes() == b""
