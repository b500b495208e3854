"""Agent isolation: every agent phase runs inside Anthropic's sandbox runtime (``srt``).

``srt`` (npm ``@anthropic-ai/sandbox-runtime``, pinned in scripts/setup-debian.sh) puts the
command in bubblewrap with no network of its own; its only way out is a pair of filtering
proxies on the host, which admit the hosts of ``allowedDomains`` and refuse the rest. We give it
(srt_settings; the whole table: docs/sandbox.md):

- network: the model endpoints of the programs of the mode's phases (Program.endpoint: Claude
  Code's ANTHROPIC_BASE_URL, else api.anthropic.com:443) plus the mode's ``allow_hosts``; each
  refusal is a line of srt's debug log (blocked_connections);
- reads: the system, the directories on PATH and of the programs the phase starts, the agent's
  own paths below, and with a mode's ``tests = "base"`` its nginx-tests tree (read-only). The
  harness's directories and the user's own Claude Code state (agent/home.user_state) are hidden
  even under a readable directory, but for that tests tree;
- writes: the workspace, the phase's log directory, a private temporary directory, the agent's
  home (agent/home.py) and the mode's ``sandbox_binds``.

``isolation = "none"`` opts out (runs marked unisolated); no fallback where srt cannot start.

Inside, the sandbox's loopback is the agent's: the proxy variables name loopback.py's proxy,
which sends a loopback request to a server the agent started in the sandbox and everything else
to srt's proxy. ``NO_PROXY`` stays unset so that the choice is always the proxy's. The agent is
an ordinary user inside (bwrap_agent_user.sh, write_agent_user): srt's user namespace maps uid 0
alone, where nginx started as root cannot switch its workers to ``nobody``. With the pinned
toolchain the sandbox shows its root filesystem's /usr (bwrap_agent_user.sh, docs/toolchain.md).
"""

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, Self, TypedDict, cast

from ..core import inputs, jsonio, rootfs, runstate
from ..core.errors import UserError
from ..core.procs import run_query
from ..core.records import Blocked, SweEnvView, ToolchainRecord
from . import swe_view
from .programs import registry
from .programs.claude import CLAUDE

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..run.modes import AgentMode

SRT_PACKAGE = "@anthropic-ai/sandbox-runtime"
SRT_PREFIX_VAR, SRT_PROGRAM_VAR = "NGINX_EVAL_SRT_PREFIX", "NGINX_EVAL_SRT"
DEFAULT_SRT_PREFIX = "/opt/nginx-eval/sandbox-runtime"
DEFAULT_ENDPOINT = "api.anthropic.com:443"
AGENT_STATE = ("~/.claude", "~/.claude.json")
SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What srt needs on Linux, with the Debian package that has it.
SRT_NEEDS = {"bwrap": "bubblewrap", "socat": "socat", "rg": "ripgrep"}
# The CLI's own calls elsewhere (telemetry, error reports, updates) would each be a refused
# connection on the record: switched off in the sandbox, as the CLI documents.
QUIET_ENV = {
    "DISABLE_TELEMETRY": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
# Files srt mounts over (or creates as mount points in) the working directory to keep them
# read-only; a phase killed with SIGKILL can leave them behind, empty.
SRT_MOUNT_POINTS = (
    ".bashrc",
    ".bash_profile",
    ".zshrc",
    ".zprofile",
    ".profile",
    ".gitconfig",
    ".gitmodules",
    ".ripgreprc",
    ".mcp.json",
    ".vscode",
    ".idea",
)
# The inner command: the agent's stderr to its own file (srt's debug log keeps the other); the
# loopback proxy started ($3: its file, $4: the model endpoint) and every proxy variable that
# names srt's HTTP proxy pointed at it instead, no proxy exemption but the stand-ins' direct
# hosts (swe_view.DIRECT_VAR); a mark on the agent's
# processes (proctree.INSIDE_VAR); then the command ($2).
INNER = r"""exec 2>>"$1"
unset NO_PROXY no_proxy
if [ -n "${NGINX_EVAL_SANDBOX_DIRECT:-}" ]; then
    export NO_PROXY=$NGINX_EVAL_SANDBOX_DIRECT
fi
if [ -n "${HTTP_PROXY:-}" ]; then
    python=/usr/bin/python3; [ -x "$python" ] || python=python3
    exec 3< <(exec "$python" -I "$3" "$HTTP_PROXY" "$4")
    read -r port <&3; exec 3<&-
    case $port in
        ''|*[!0-9]*) echo "nginx-eval: the sandbox's loopback proxy did not start" >&2; exit 125;;
    esac
    srt_proxy=${HTTP_PROXY#*://}; srt_proxy=${srt_proxy##*@}; srt_proxy=${srt_proxy%%/*}
    for name in HTTP_PROXY HTTPS_PROXY http_proxy https_proxy ALL_PROXY all_proxy \
                GRPC_PROXY grpc_proxy DOCKER_HTTP_PROXY DOCKER_HTTPS_PROXY; do
        value=${!name:-}
        case $value in
            http://*"$srt_proxy"|http://*"$srt_proxy"/)
                export "$name=${value/"$srt_proxy"/127.0.0.1:$port}";;
        esac
    done
fi
export NGINX_EVAL_INSIDE=1
exec bash -c "$2"
"""
LOOPBACK_PROXY = Path(__file__).with_name("loopback.py")
BWRAP_WRAPPER = Path(__file__).with_name("bwrap_agent_user.sh")
SUPPORT_VAR = "NGINX_EVAL_SANDBOX_SUPPORT"
BLOCKED_LINE = re.compile(r"(?:Connection|HTTP request) blocked to (\S+):(\d+)\s*$")


# Box's optional fields at the value that leaves them out of an agent run's inputs (core/inputs.py).
BOX_DEFAULTS: dict[str, Any] = {"other_endpoints": []}


class Box(TypedDict):
    """The isolation of a mode's agent (settings): part of an agent run's inputs."""

    isolation: str  # "srt"
    endpoint: str  # the model API's host:port
    allow_hosts: list[str]
    # only in a mode whose phases run more than one program: the others' endpoints
    other_endpoints: NotRequired[list[str]]
    binds: list[str]


def settings(mode: "AgentMode", environ: Mapping[str, str] | None = None) -> Box | None:
    """The isolation of a mode's agent, or None (isolation = "none"): what an agent run's inputs
    record."""
    if mode.isolation == "none":
        return None
    env = dict(os.environ if environ is None else environ, **dict(mode.env))
    names = list(dict.fromkeys(p.program for p in mode.every_phase)) or [CLAUDE.name]
    endpoints = list(
        dict.fromkeys(registry.PROGRAMS[n].endpoint(env) for n in names if n in registry.PROGRAMS)
    ) or [model_endpoint(env)]
    fields = {
        "isolation": "srt",
        "endpoint": endpoints[0],
        "allow_hosts": list(mode.allow_hosts),
        "binds": list(mode.sandbox_binds),
        "other_endpoints": endpoints[1:],
    }
    return cast(Box, inputs.canonical(fields, BOX_DEFAULTS))


def through_proxy(box: Box, endpoint: str) -> Box:
    """`box` with `endpoint` (host:port of the attempt's metering proxy) its one model endpoint:
    every program's base URL names the proxy, so no program's upstream is let through."""
    proxied: Box = {
        "isolation": box["isolation"],
        "endpoint": endpoint,
        "allow_hosts": box["allow_hosts"],
        "binds": box["binds"],
    }
    return proxied


def model_endpoint(environ: Mapping[str, str]) -> str:
    """host:port of Claude Code's model API."""
    return CLAUDE.endpoint(environ)


def srt_program(environ: Mapping[str, str] | None = None) -> str | None:
    """The srt to run: $NGINX_EVAL_SRT, else the one setup-debian.sh installs, else srt on PATH."""
    env = os.environ if environ is None else environ
    if env.get(SRT_PROGRAM_VAR):
        return shutil.which(env[SRT_PROGRAM_VAR])
    prefix = env.get(SRT_PREFIX_VAR) or DEFAULT_SRT_PREFIX
    program = os.path.join(prefix, "node_modules", ".bin", "srt")
    return program if os.access(program, os.X_OK) else shutil.which("srt")


def install_hint() -> str:
    return (
        "run `sh scripts/setup-debian.sh` (it installs them), or give the mode "
        'isolation = "none" to run it unisolated'
    )


def missing_tools(environ: Mapping[str, str] | None = None) -> list[str]:
    """What srt needs that is not here: ["srt (npm @anthropic-ai/sandbox-runtime)", ...]."""
    env = os.environ if environ is None else environ
    missing = [] if srt_program(env) else [f"srt (npm {SRT_PACKAGE})"]
    path = env.get("PATH", os.defpath)
    missing += [
        f"{tool} (Debian package {package})"
        for tool, package in SRT_NEEDS.items()
        if not shutil.which(tool, path=path)
    ]
    return missing


@lru_cache(maxsize=4)
def _start_problem(program: str, path: str) -> str | None:
    with tempfile.TemporaryDirectory(prefix="nginx-eval-srt-") as scratch:
        config = os.path.join(scratch, "srt.json")
        with open(config, "w") as f:
            json.dump(
                {
                    "network": {"allowedDomains": [], "deniedDomains": []},
                    "filesystem": {"denyRead": [], "allowWrite": [scratch], "denyWrite": []},
                },
                f,
            )
        try:
            out = run_query(
                [program, "-s", config, "--", "echo", "isolated"],
                cwd=scratch,
                env=dict(os.environ, PATH=path),
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"srt does not run: {e}"
    if out.returncode == 0 and out.stdout.strip() == "isolated":
        return None
    said = (out.stderr.strip().splitlines() or [f"exit code {out.returncode}"])[-1]
    return f"srt cannot start a sandbox here: {said}"


def sandbox_problem(environ: Mapping[str, str] | None = None, start: bool = True) -> str | None:
    """Why no agent can run isolated on this machine (one line), or None. start=False: what is
    missing only, without starting srt to see it start (the self-test will)."""
    env = os.environ if environ is None else environ
    missing = missing_tools(env)
    program = srt_program(env)
    if missing or program is None:  # no srt is one of missing_tools
        return f"the agent sandbox needs {', '.join(missing)}: {install_hint()}"
    started = (program, env.get("PATH", os.defpath))
    if not start or started in runstate.current().srt_started:
        return None
    return _start_problem(*started)


def note_started(environ: Mapping[str, str]) -> None:
    """A sandbox started with `environ`'s srt: later checks of this run need not start one."""
    program = srt_program(environ)
    if program:
        runstate.current().srt_started.add((program, environ.get("PATH", os.defpath)))


def check_available(
    mode: "AgentMode",
    modes_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    start: bool = True,
) -> None:
    problem = sandbox_problem(environ, start)
    if problem:
        raise UserError(problem, file=modes_file, item=f"mode {mode.name}", field="isolation")


def local_mirror_root(environ: Mapping[str, str]) -> str | None:
    """The fixed directory part of a local NGINX_EVAL_REPO_URL template, e.g. /srv/mirrors."""
    template = environ.get("NGINX_EVAL_REPO_URL", "")
    if "://" in template or not template.startswith("/"):
        return None
    head = template.split("{", 1)[0]
    path = head if head.endswith("/") else os.path.dirname(head)
    return path.rstrip("/") or None


def agent_state(environ: Mapping[str, str]) -> list[str]:
    """The read-write paths of Claude Code's state (see the module docstring)."""
    config = environ.get("CLAUDE_CONFIG_DIR")
    if config:
        os.makedirs(config, exist_ok=True)
        return [config]
    return [p for p in (os.path.expanduser(p) for p in AGENT_STATE) if os.path.exists(p)]


def _under(path: str | Path, root: str | Path) -> bool:
    path, root = os.path.realpath(path), os.path.realpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def tool_dirs(environ: Mapping[str, str]) -> list[str]:
    """The directories on PATH, and for one under $HOME the whole top-level directory it sits
    in (~/.pyenv, ~/.local, ...): version managers keep the real programs next to their shims."""
    home = os.path.realpath(os.path.expanduser("~"))
    dirs = []
    for entry in environ.get("PATH", "").split(os.pathsep):
        if not entry or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        if real.startswith(home + os.sep):
            real = os.path.join(home, real[len(home) + 1 :].split(os.sep, 1)[0])
        dirs.append(real)
    return dirs


def program_dirs(programs: Iterable[str]) -> list[str]:
    """The directories a program needs, followed through its symlinks: the one it is named in
    and the one its file is in, or for a program inside an npm package the whole
    ``node_modules`` around it (``node_modules/.bin/claude`` links into the package)."""
    dirs = []
    for path in programs:
        for p in (os.path.abspath(path), os.path.realpath(path)):
            parts = p.split(os.sep)
            if "node_modules" in parts[:-1]:
                dirs.append(os.sep.join(parts[: parts.index("node_modules") + 1]))
            else:
                dirs.append(os.path.dirname(p))
    return dirs


def srt_settings(
    box: Box,
    *,
    workspace: str | Path,
    writable: Iterable[str | Path],
    hidden: Iterable[str | Path | None],
    environ: Mapping[str, str],
    programs: Iterable[str] = (),
    support: str | Path | None = None,
    private: Iterable[str | Path] = (),
    readable: Iterable[str | Path] = (),
) -> dict[str, Any]:
    """srt's settings file for one phase. writable: the log and temporary directories;
    programs: the programs the phase's command starts (found on PATH); support:
    write_support's directory (readable inside, for the loopback proxy); private: the user's
    own Claude Code state (home.user_state), hidden but for a program the phase runs from it;
    readable: read-only paths the agent is given even inside a hidden directory (its tests
    tree, suite/stage.py)."""
    mirror = local_mirror_root(environ)
    # Nothing of the machine is readable but the system, the tools and the agent's own paths
    # (a cache or a checkout elsewhere, other runs' files in /tmp stay out of sight); the
    # harness's directories stay hidden even where a tool directory lies above them.
    denied = ["/"] + [
        str(h)
        for h in list(hidden) + ([mirror] if mirror else [])
        if h and str(h) != "/" and os.path.isdir(h)
    ]
    private = [str(p) for p in private if os.path.lexists(p)]
    binds = [os.path.expanduser(b) for b in box["binds"]]
    allowed = (
        [str(workspace)]
        + [str(w) for w in writable]
        + agent_state(environ)
        + [b for b in binds if os.path.exists(b)]
    )
    tools = [d for d in SYSTEM_DIRS if os.path.exists(d)] + tool_dirs(environ)
    # A tool under a hidden directory stays hidden (srt would let the narrower allow win); a
    # program the phase runs from the user's state (a CLI installed in ~/.claude/local) does not.
    reads = [d for d in tools if not any(_under(d, h) for h in denied[1:] + private)] + [
        d for d in program_dirs(programs) if not any(_under(d, h) for h in denied[1:])
    ]
    # What the agent is given wins over a hidden directory above it, that narrower allow on
    # purpose (the harness's support files, the tests tree); not in allowWrite, read-only inside.
    reads += ([str(support)] if support else []) + [str(p) for p in readable]
    return {
        "network": {
            "allowedDomains": [box["endpoint"]]
            + list(box.get("other_endpoints", []))
            + list(box["allow_hosts"]),
            "deniedDomains": [],
        },
        "filesystem": {
            "denyRead": list(dict.fromkeys(denied + private)),
            "allowRead": list(dict.fromkeys(reads)),
            "allowWrite": list(dict.fromkeys(allowed)),
            "denyWrite": [],
        },
        "bwrapPath": str(BWRAP_WRAPPER),
    }


def wrap(
    command: str,
    *,
    settings_file: str | Path,
    stderr_file: str | Path,
    environ: Mapping[str, str],
    support: str,
    endpoint: str = DEFAULT_ENDPOINT,
) -> list[str]:
    """argv that runs `command` (bash -c) in srt with `settings_file`; the command's stderr goes
    to `stderr_file`, srt's own (its debug log) to the caller's stderr. support: write_support's
    directory; endpoint: the model's host:port, which the loopback proxy always sends on to
    srt's. UserError when srt is not installed (check_available says so before any agent)."""
    program = srt_program(environ)
    if program is None:
        raise UserError(f"the agent sandbox needs srt (npm {SRT_PACKAGE}): {install_hint()}")
    return [
        program,
        "-d",
        "-s",
        str(settings_file),
        "--",
        "bash",
        "-c",
        INNER,
        "nginx-eval-agent",
        str(stderr_file),
        command,
        os.path.join(support, LOOPBACK_PROXY.name),
        endpoint,
    ]


AGENT_USER = "nginx-eval"
FIRST_AGENT_ID = 1000


def _ids(table: str) -> set[int]:
    ids = set()
    for line in table.splitlines():
        parts = line.split(":")
        if len(parts) > 2 and parts[2].isdigit():
            ids.add(int(parts[2]))
    return ids


def _write_if_changed(path: str, data: bytes) -> None:
    try:
        if open(path, "rb").read() == data:
            return
    except OSError:
        pass
    jsonio.write_bytes(path, data, mode=0o644)


def write_support(directory: str | Path) -> str:
    """What a phase's sandbox needs of the harness, in `directory` (returned): the loopback
    proxy (loopback.py), when the harness runs as root the agent's account (write_agent_user),
    and ``toolchain``, the root filesystem of the pinned toolchain whose /usr the sandbox shows
    (bwrap_agent_user.sh; removed with the pin off or the toolchain unusable: sandbox_toolchain).
    Phases running side by side may write it at once: each file is replaced whole, and only
    when it changed."""
    os.makedirs(directory, exist_ok=True)
    _write_if_changed(os.path.join(directory, LOOPBACK_PROXY.name), LOOPBACK_PROXY.read_bytes())
    if os.geteuid() == 0:
        write_agent_user(directory)
    swe_view.write_runtimes(directory, os.environ)
    toolchain = rootfs.current()
    chosen = os.path.join(directory, "toolchain")
    if sandbox_toolchain(toolchain)["name"] == rootfs.HOST:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(chosen)
    else:
        _write_if_changed(chosen, f"{toolchain.root}\n".encode())
    return str(directory)


def sandbox_toolchain(toolchain: rootfs.Toolchain) -> ToolchainRecord:
    """The toolchain an agent's sandbox shows (agent.json's "toolchain"): the pinned one when it
    can be used, else the host's."""
    if toolchain.pinned and rootfs.problem(toolchain) is None:
        return rootfs.record(toolchain)
    return {"name": rootfs.HOST, "digest": None}


def write_agent_user(directory: str | Path) -> None:
    """The agent's account inside the sandbox, in `directory` (bwrap_agent_user.sh reads it):
    ``id`` ("UID GID", the first id from 1000 that the host uses neither as a uid nor as a
    gid), and ``passwd`` and ``group``: the host's tables plus that account, named AGENT_USER,
    its home $HOME. Only for a harness run as root: an unprivileged caller's uid is its own
    inside srt's namespace, an ordinary user already."""
    tables = {}
    for name in ("passwd", "group"):
        try:
            tables[name] = open(f"/etc/{name}", encoding="utf-8", errors="replace").read()
        except OSError:
            tables[name] = ""
    taken = _ids(tables["passwd"]) | _ids(tables["group"])
    number = next(n for n in range(FIRST_AGENT_ID, 60000) if n not in taken)
    home = os.environ.get("HOME") or "/"
    lines = {
        "passwd": f"{AGENT_USER}:x:{number}:{number}:nginx-eval agent:{home}:/bin/bash",
        "group": f"{AGENT_USER}:x:{number}:",
    }
    for name, table in tables.items():
        text = table if table.endswith("\n") or not table else table + "\n"
        _write_if_changed(os.path.join(directory, name), (text + lines[name] + "\n").encode())
    _write_if_changed(os.path.join(directory, "id"), f"{number} {number}\n".encode())


def phase_environment(
    environ: Mapping[str, str],
    tmp_dir: str | Path,
    support: str | None = None,
    view: str | None = None,
) -> dict[str, str]:
    """The environment of an isolated phase, and of srt itself: a private temporary directory
    (srt puts the sockets of its proxy bridges there too, so it must be one the agent may
    write: outside it nothing of /tmp is visible), the CLI quiet; support: write_support's
    directory, for bwrap_agent_user.sh (which takes the variable out of the sandbox's view);
    view: a SWE-bench environment's view file (swe_view.write_view), for it too."""
    quiet = {k: v for k, v in QUIET_ENV.items() if k not in environ}
    extra = {SUPPORT_VAR: str(support)} if support else {}
    if view:
        extra[swe_view.VIEW_VAR] = view
    return dict(environ, TMPDIR=str(tmp_dir), CLAUDE_CODE_TMPDIR=str(tmp_dir), **quiet, **extra)


def hidden_paths(layout: "Layout") -> list[Path]:
    return [layout.cache, layout.results_root, layout.root]


class TimestampedLog:
    """A pipe whose lines are written to `path`, each after the UTC time it arrived: srt's debug
    log, so that every refused connection has its time. Use as a context manager; `.fd` is the
    write end to hand to the command."""

    def __init__(self, path: str | Path) -> None:
        self.path = path

    def __enter__(self) -> Self:
        read_end, self.fd = os.pipe()
        self.thread = threading.Thread(target=self._copy, args=(read_end,), daemon=True)
        self.thread.start()
        return self

    def _copy(self, read_end: int) -> None:
        with os.fdopen(read_end, "rb") as source, open(self.path, "ab") as out:
            for line in source:
                stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                out.write(stamp.encode() + b" " + line)
                out.flush()

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)
        # Processes the sandbox left behind may hold the write end: do not wait for them.
        self.thread.join(timeout=5)


def blocked_connections(log_text: str) -> list[Blocked]:
    """[{"host", "port", "time"}] of every connection srt's proxies refused, from its debug log
    (TimestampedLog's lines)."""
    blocked: list[Blocked] = []
    for line in log_text.splitlines():
        stamp, _, rest = line.partition(" ")
        m = BLOCKED_LINE.search(rest)
        if m and "[SandboxDebug]" in rest:
            blocked.append({"host": m.group(1).strip("[]"), "port": int(m.group(2)), "time": stamp})
    return blocked


def remove_mount_points(workspace: str | Path, before: Iterable[str]) -> None:
    """Remove the empty files and directories srt left in the workspace (SRT_MOUNT_POINTS) that
    were not there before the phase: they are the sandbox's, not the agent's patch."""
    for name in SRT_MOUNT_POINTS:
        path = os.path.join(workspace, name)
        if name in before or not os.path.lexists(path) or os.path.islink(path):
            continue
        try:
            if os.path.isdir(path) and not os.listdir(path):
                os.rmdir(path)
            elif os.path.isfile(path) and os.path.getsize(path) == 0:
                os.unlink(path)
        except OSError:
            pass


def present_mount_points(workspace: str | Path) -> set[str]:
    return {n for n in SRT_MOUNT_POINTS if os.path.lexists(os.path.join(workspace, n))}


def isolated_command(
    command: str,
    *,
    endpoint: str,
    settings: dict[str, Any],
    settings_file: str | Path,
    stderr_file: str | Path,
    environ: Mapping[str, str],
    tmp: str | Path,
    support: str,
    view_file: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) that run `command` isolated as a phase: srt's `settings`
    (srt_settings) written to `settings_file`, `tmp` its TMPDIR, `view_file` a SWE-bench
    environment's view (swe_view.write_view); the command's stderr to `stderr_file`."""
    jsonio.write_json(settings_file, settings)
    env = phase_environment(environ, tmp, support, view_file)
    argv = wrap(
        command,
        settings_file=settings_file,
        stderr_file=stderr_file,
        environ=env,
        support=support,
        endpoint=endpoint,
    )
    return argv, env


@dataclass(frozen=True)
class Isolated:
    """What a command run isolated gave: exit_code (None: it did not run to its end), its
    standard output, what it wrote on its stderr (its stderr file), and srt's own stderr or why
    the command did not run."""

    exit_code: int | None
    stdout: str
    said: str
    srt_said: str


def run_isolated(
    command: str,
    *,
    box: Box,
    workspace: str | Path,
    scratch: str | Path,
    hidden: Iterable[str | Path | None],
    environ: Mapping[str, str],
    support: str,
    programs: Iterable[str] = (),
    view: SweEnvView | None = None,
    timeout: float = 60.0,
) -> Isolated:
    """`command` (bash) in a sandbox of `box` as a phase would run it, in `workspace`; its
    settings, stderr file, view file and TMPDIR in `scratch`, which it may write (srt puts its
    sockets in TMPDIR: a short path). support: write_support's directory; view: a SWE-bench
    environment the sandbox shows (swe_view.py). The preflight, the self-test and the tests run
    their commands so."""
    scratch = Path(scratch)
    settings_file, stderr_file = scratch / "srt.json", scratch / "stderr"
    view_file = swe_view.write_view(scratch / "view", view, workspace) if view else None
    settings = srt_settings(
        box,
        workspace=workspace,
        writable=[] if Path(workspace) == scratch else [scratch],
        hidden=hidden,
        environ=environ,
        programs=programs,
        support=support,
    )
    argv, env = isolated_command(
        command,
        endpoint=box["endpoint"],
        settings=settings,
        settings_file=settings_file,
        stderr_file=stderr_file,
        environ=environ,
        tmp=scratch,
        support=support,
        view_file=view_file,
    )

    def said() -> str:
        return stderr_file.read_text(errors="replace") if stderr_file.exists() else ""

    try:
        out = run_query(argv, cwd=workspace, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Isolated(None, "", said(), f"no answer in {timeout:g} s")
    except OSError as e:
        return Isolated(None, "", said(), str(e))
    return Isolated(out.returncode, out.stdout, said(), out.stderr)


def start_problem(
    argv: Iterable[str],
    *,
    hidden: Iterable[str | Path | None],
    box: Box,
    environ: Mapping[str, str],
    support: str,
    programs: Iterable[str] = (),
    view: SweEnvView | None = None,
    workspace: str | Path | None = None,
) -> str | None:
    """Why `argv` does not run isolated as a phase would (None when it exits 0 and prints
    something), in an empty directory standing in for the workspace (or `workspace`): cli's
    preflight runs the agent's program there before any agent starts. support: write_support's
    directory; view: a SWE-bench environment the sandbox shows (swe_view.py)."""
    with tempfile.TemporaryDirectory(prefix="nginx-eval-preflight-") as scratch:
        got = run_isolated(
            " ".join(shlex.quote(a) for a in argv),
            box=box,
            workspace=workspace or scratch,
            scratch=scratch,
            hidden=hidden,
            environ=environ,
            support=support,
            programs=programs,
            view=view,
        )
    if got.exit_code is None:
        return got.srt_said
    if got.exit_code == 0 and got.stdout.strip():
        return None
    return (got.said.strip().splitlines() or [f"exit code {got.exit_code}"])[-1]
