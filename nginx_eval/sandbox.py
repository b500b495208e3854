"""Optional sandbox for agents: bubblewrap gives the agent its workspace, its tools and nothing else.

Turned on per mode in modes.toml (``sandbox = true``), or for every agent mode with the environment
variable ``NGINX_EVAL_SANDBOX=1``. Inside, the agent sees:

- the system, read-only: /usr, /etc, /opt, /bin, /sbin, /lib*;
- its tools, read-only: every directory on PATH, and for one under $HOME the whole top-level
  directory it sits in (``~/.pyenv``, ``~/.local``, ...), since version managers keep the real
  programs next to their shims;
- its workspace and its own log directory, read-write, at their real paths;
- ``~/.claude`` and ``~/.claude.json`` (Claude Code's login and settings) and the mode's
  ``sandbox_binds = [...]``, read-write, where they exist;
- a private /tmp, /dev and /proc, in its own PID namespace: when the harness kills the sandbox at
  the time limit, every process in it dies with it;
- the network, unless the mode says ``network = false``.

Whatever the binds above would expose, the harness's own directories are then hidden under empty
file systems: the cache (bare clones with the fix, nginx-tests trees, other workspaces, builds),
the results, the project root and local mirrors named by NGINX_EVAL_REPO_URL. Only the workspace
and the log directory are mounted back on top.
"""

import os
import shutil
import subprocess
from functools import lru_cache

from .errors import UserError

ENV_FORCE = "NGINX_EVAL_SANDBOX"
SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
AGENT_STATE = ("~/.claude", "~/.claude.json")


def settings(mode, environ=None):
    """The sandbox a mode's agent runs in, or None: what an agent run's inputs record."""
    env = os.environ if environ is None else environ
    if not (mode.sandbox or env.get(ENV_FORCE, "") not in ("", "0")):
        return None
    return {"network": mode.network, "binds": list(mode.sandbox_binds)}


@lru_cache(maxsize=1)
def bwrap_problem():
    """Why bubblewrap cannot run here, or None."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return "bubblewrap is not installed (Debian package bubblewrap)"
    try:
        probe = subprocess.run([bwrap, "--ro-bind", "/", "/", "--unshare-pid", "true"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap does not run: {e}"
    if probe.returncode != 0:
        return f"bwrap does not run here: {probe.stderr.strip() or probe.returncode}"
    return None


def check_available(mode, modes_file=None):
    problem = bwrap_problem()
    if problem:
        raise UserError(f"the sandbox is on but {problem}", file=modes_file,
                        item=f"mode {mode.name}", field="sandbox")


def local_mirror_root(environ):
    """The fixed directory part of a local NGINX_EVAL_REPO_URL template, e.g. /srv/mirrors."""
    template = environ.get("NGINX_EVAL_REPO_URL", "")
    if "://" in template or not template.startswith("/"):
        return None
    head = template.split("{", 1)[0]
    path = head if head.endswith("/") else os.path.dirname(head)
    return path.rstrip("/") or None


def tool_dirs(environ):
    home = os.path.realpath(os.path.expanduser("~"))
    dirs = []
    for entry in environ.get("PATH", "").split(os.pathsep):
        if not entry or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        if real.startswith(home + os.sep):
            top = real[len(home) + 1:].split(os.sep, 1)[0]
            real = os.path.join(home, top)
        dirs.append(real)
    return dirs


def wrap(argv, *, workspace, log_dir, hidden, sandbox, environ):
    """`argv` run inside bubblewrap with the view described in the module docstring."""
    args = ["bwrap", "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--new-session"]
    if not sandbox["network"]:
        args.append("--unshare-net")
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for d in SYSTEM_DIRS:
        args += ["--ro-bind-try", d, d]
    for d in dict.fromkeys(tool_dirs(environ)):
        args += ["--ro-bind-try", d, d]
    # Hide the harness's directories, then mount back only what is the agent's.
    mirror = local_mirror_root(environ)
    for h in [str(x) for x in hidden] + ([mirror] if mirror else []):
        if h and h != "/" and os.path.isdir(h):
            args += ["--tmpfs", h]
    for p in (workspace, log_dir):
        args += ["--bind", str(p), str(p)]
    for p in [os.path.expanduser(p) for p in AGENT_STATE + tuple(sandbox["binds"])]:
        args += ["--bind-try", p, p]
    args += ["--chdir", str(workspace), "--"]
    return args + list(argv)


def hidden_paths(layout):
    return [layout.cache, layout.results_root, layout.root]
