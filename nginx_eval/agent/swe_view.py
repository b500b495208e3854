"""A SWE-bench task's Python environment in the agent's sandbox (docs/sandbox.md, "A SWE-bench
task's environment").

An environment is built outside the sandbox (swebench/, over a pinned Debian root filesystem,
the repository installed in development mode from /testbed); pipeline.Context.swe_env gives its
view (core/records.SweEnvView). A phase's sandbox then shows the root filesystem's /usr over the
host's (as the nginx toolchain's), the venv read-only at its fixed path and first on PATH, and
the workspace also at /testbed, so that the editable install imports the agent's edits:
write_view writes the phase's instructions, bwrap_agent_user.sh carries them out.

Agent programs live outside /usr; a program that needs the host's node (Codex, Gemini CLI) gets
the host's node binary bound at ``<support>/runtime/node``, last on PATH, wherever the sandbox
shows another /usr (this view, or the pinned toolchain): write_runtimes.
"""

import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ..core.records import StandinsView, SweEnvRecord, SweEnvView

VIEW_VAR = "NGINX_EVAL_SANDBOX_VIEW"
# Hosts a phase reaches without the loopback proxy (sandbox.INNER makes them NO_PROXY): the
# stand-ins' addresses that must time out as on the internet, not be refused by a proxy.
DIRECT_VAR = "NGINX_EVAL_SANDBOX_DIRECT"
RUNTIME_DIR = "runtime"
RUNTIMES = ("node",)
# A repository whose package is not named as the repository is.
PACKAGES = {
    "scikit-learn/scikit-learn": "sklearn",
    "pylint-dev/pylint": "pylint",
    "sphinx-doc/sphinx": "sphinx",
    "pydata/xarray": "xarray",
    "psf/requests": "requests",
    "pallets/flask": "flask",
    "pytest-dev/pytest": "pytest",
}


def package_of(repo: str) -> str:
    """What `import` checks for a repository ("owner/name"): its package's name."""
    return PACKAGES.get(repo, repo.split("/")[-1].replace("-", "_").lower())


def record(view: SweEnvView | None) -> SweEnvRecord | None:
    """agent.json's "swe_env" for a sandbox that showed `view`."""
    return {"digest": view["digest"], "python": view["python"]} if view else None


def prompt_values(view: SweEnvView | None) -> dict[str, str] | None:
    """What a SWE-bench prompt template says of the environment (``environment``), or None."""
    if view is None:
        return None
    return {
        "python": view["python"],
        "testbed": view["testbed"],
        "test_command": view["test_command"],
    }


def host_runtimes(environ: Mapping[str, str]) -> dict[str, str]:
    """{name: host path} of the runtimes on PATH that live under /usr (hidden by the view)."""
    found = {}
    for name in RUNTIMES:
        path = shutil.which(name, path=environ.get("PATH", os.defpath))
        real = os.path.realpath(path) if path else ""
        if real.startswith("/usr/"):
            found[name] = real
    return found


def write_runtimes(support: str | Path, environ: Mapping[str, str]) -> None:
    """In the support directory: ``runtimes`` ("HOST NAME" a line, host_runtimes) for
    bwrap_agent_user.sh, and the empty files under RUNTIME_DIR they are bound over (bwrap cannot
    make a mount point in a read-only directory). Phases may write it at once: each file is
    replaced whole."""
    directory = os.path.join(support, RUNTIME_DIR)
    os.makedirs(directory, exist_ok=True)
    for name in RUNTIMES:
        point = os.path.join(directory, name)
        if not os.path.exists(point):
            open(point, "wb").close()
    text = "".join(f"{path} {name}\n" for name, path in host_runtimes(environ).items())
    listed = os.path.join(support, "runtimes")
    if not os.path.exists(listed) or Path(listed).read_text() != text:
        partial = f"{listed}.{os.getpid()}"
        Path(partial).write_text(text)
        os.replace(partial, listed)


def view_lines(
    view: SweEnvView, workspace: str | Path, standins: StandinsView | None = None
) -> list[str]:
    """bwrap_agent_user.sh's instructions for a phase in `workspace` (its header says each),
    with the attempt's stand-ins for the internet (swebench/services.py) when it has them."""
    lines = [f"usr {view['root']}", f"ro {view['venv']} {view['venv_path']}"]
    lines.append(f"workspace {os.path.abspath(workspace)} {view['testbed']}")
    lines += [f"first {d}" for d in reversed(view["path"])]
    lines += [f"setenv {name} {value}" for name, value in sorted(view["env"].items())]
    if standins:
        lines.append(f"net {standins['net']}")
        lines += [f"ro {host} {inside}" for host, inside in standins["mounts"]]
        lines += [f"over {host} {rel}" for host, rel in standins["over"]]
        lines.append("launch " + " ".join(standins["launcher"]))
        if standins["direct"]:
            lines.append(f"setenv {DIRECT_VAR} {','.join(standins['direct'])}")
    return lines


def write_view(
    path: str | Path, view: SweEnvView, workspace: str | Path, standins: StandinsView | None = None
) -> str:
    """The phase's view file (returned), for phase_environment's VIEW_VAR."""
    Path(path).write_text("\n".join(view_lines(view, workspace, standins)) + "\n")
    return str(path)


def mount_points(view: SweEnvView) -> list[str]:
    """The paths the view mounts at that must exist on the host: under srt the sandbox's root
    is the host's, read-only, where bwrap can make no mount point."""
    return [view["testbed"], view["venv_path"]]


def view_problem(view: SweEnvView) -> str | None:
    """Why the sandbox cannot show `view` (one line), or None. A missing mount point is made
    (an empty directory) when the harness may."""
    root = Path(view["root"])
    if not (root / "usr" / "bin").is_dir():
        return f"its root filesystem {root} has no usr/bin"
    # Over a host whose /bin and /lib are links into /usr, only a root filesystem laid out the
    # same way has its shell, libraries and dynamic linker where programs look for them.
    for top in ("bin", "lib"):
        if not (root / top).is_symlink():
            return (
                f"its root filesystem {root} is not merged-/usr ({top} is a directory): its /usr "
                f"alone cannot be shown over the host's"
            )
    if not os.path.isdir(view["venv"]):
        return f"its venv {view['venv']} is missing"
    for point in mount_points(view):
        if not os.path.isdir(point):
            try:
                os.makedirs(point, exist_ok=True)
            except OSError as e:
                return (
                    f"the sandbox needs the empty directory {point} on this machine as a mount "
                    f"point ({e.strerror}): create it as root"
                )
    return None


def import_condition(view: SweEnvView) -> str:
    """The bash command that imports the task's package inside, run from /testbed."""
    return (
        f"cd {shlex.quote(view['testbed'])} && python -c {shlex.quote('import ' + view['package'])}"
    )


def put_testbed_files(view: SweEnvView | None, workspace: str | Path) -> None:
    """The files the environment's install wrote into its checkout, into `workspace` (pytest
    does not import without its generated _version.py); the repository's .gitignore keeps them
    out of the patch, as git status shows them in the official image."""
    if view and view["testbed_files"] and os.path.isdir(view["testbed_files"]):
        shutil.copytree(view["testbed_files"], workspace, dirs_exist_ok=True, symlinks=True)


def checkout(bare: str | Path, commit: str, into: str | Path) -> bool:
    """`commit` of the bare clone `bare` written into `into` (git archive); False when it
    cannot be (the clone is not there yet)."""
    if not os.path.isdir(bare):
        return False
    with tempfile.TemporaryFile() as tar:
        made = subprocess.run(
            ["git", "--git-dir", str(bare), "archive", "--format=tar", commit],
            stdout=tar,
            stderr=subprocess.DEVNULL,
        )
        if made.returncode != 0:
            return False
        tar.seek(0)
        return subprocess.run(["tar", "-x", "-C", str(into)], stdin=tar).returncode == 0
