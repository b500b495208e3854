"""Optional sandbox for agents: bubblewrap gives the agent its workspace, its tools and nothing else.

Turned on per mode in modes.toml (``sandbox = true``), or for every agent mode with the environment
variable ``NGINX_EVAL_SANDBOX=1``. Inside, the agent sees:

- the system, read-only: /usr, /etc, /opt, /bin, /sbin, /lib*;
- its tools, read-only: every directory on PATH, and for one under $HOME the whole top-level
  directory it sits in (``~/.pyenv``, ``~/.local``, ...), since version managers keep the real
  programs next to their shims;
- the agent's own program, read-only, followed through its symlinks: the directory it is named in
  and the one its file is in, or for a program inside an npm package the whole ``node_modules``
  around it (``node_modules/.bin/claude`` is a symlink into ``@anthropic-ai/claude-code/bin/``,
  which no PATH entry covers);
- its workspace and its own log directory, read-write, at their real paths;
- Claude Code's state, read-write: ``$CLAUDE_CONFIG_DIR`` when set (created if missing: its
  sessions are what ``--continue`` continues, its transcripts what the harness keeps), else
  ``~/.claude`` and ``~/.claude.json`` where they exist; and the mode's ``sandbox_binds = [...]``;
- a private /tmp, /dev and /proc, in its own PID namespace: when the harness kills the sandbox at
  the time limit, every process in it dies with it;
- the network, unless the mode says ``network = false``.

Whatever the binds above would expose, the harness's own directories are then hidden under empty
file systems: the cache (bare clones with the fix, nginx-tests trees, other workspaces, builds),
the results, the project root and local mirrors named by NGINX_EVAL_REPO_URL. Only the workspace,
the log directory and the agent's state are mounted back on top (a program under a hidden
directory stays hidden: cli's preflight runs it in the sandbox first and says so).
"""

import os
import shutil
import subprocess
import tempfile
from functools import lru_cache

from ..core.errors import UserError

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


def program_dirs(programs):
    """The directories the programs need (see the module docstring), for paths as PATH finds
    them (symlinks not followed)."""
    dirs = []
    for path in programs:
        for p in (os.path.abspath(path), os.path.realpath(path)):
            parts = p.split(os.sep)
            if "node_modules" in parts[:-1]:
                dirs.append(os.sep.join(parts[:parts.index("node_modules") + 1]))
            else:
                dirs.append(os.path.dirname(p))
    return dirs


def agent_state(environ):
    """The read-write paths of Claude Code's state (see the module docstring)."""
    config = environ.get("CLAUDE_CONFIG_DIR")
    if config:
        os.makedirs(config, exist_ok=True)
        return [config]
    return [os.path.expanduser(p) for p in AGENT_STATE]


def wrap(argv, *, workspace, log_dir, hidden, sandbox, environ, programs=()):
    """`argv` run inside bubblewrap with the view described in the module docstring. programs:
    the paths of the programs the command starts (commandline.command_program, found on PATH)."""
    args = ["bwrap", "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--new-session"]
    if not sandbox["network"]:
        args.append("--unshare-net")
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for d in SYSTEM_DIRS:
        args += ["--ro-bind-try", d, d]
    for d in dict.fromkeys(tool_dirs(environ) + program_dirs(programs)):
        args += ["--ro-bind-try", d, d]
    # Hide the harness's directories, then mount back only what is the agent's.
    mirror = local_mirror_root(environ)
    for h in [str(x) for x in hidden] + ([mirror] if mirror else []):
        if h and h != "/" and os.path.isdir(h):
            args += ["--tmpfs", h]
    for p in (workspace, log_dir):
        args += ["--bind", str(p), str(p)]
    for p in agent_state(environ) + [os.path.expanduser(p) for p in sandbox["binds"]]:
        args += ["--bind-try", p, p]
    args += ["--chdir", str(workspace), "--"]
    return args + list(argv)


def start_problem(argv, *, hidden, sandbox, environ, programs=()):
    """Why `argv` does not run in the sandbox (None when it exits 0 and prints something), in an
    empty directory standing in for the workspace: cli's preflight runs the agent's program
    there before any agent starts."""
    with tempfile.TemporaryDirectory(prefix="nginx-eval-preflight-") as scratch:
        wrapped = wrap(argv, workspace=scratch, log_dir=scratch, hidden=hidden, sandbox=sandbox,
                       environ=environ, programs=programs)
        try:
            out = subprocess.run(wrapped, cwd=scratch, env=environ, capture_output=True,
                                 text=True, timeout=60, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            return str(e)
    if out.returncode == 0 and out.stdout.strip():
        return None
    return (out.stderr.strip().splitlines() or [f"exit code {out.returncode}"])[-1]


def hidden_paths(layout):
    return [layout.cache, layout.results_root, layout.root]
