"""The pinned toolchain: a Debian 12 root filesystem in which every configure, make, sanitizer
build and prove runs under bubblewrap, so that a verdict does not depend on the host's compiler,
headers, libraries or Perl (docs/toolchain.md).

``NGINX_EVAL_TOOLCHAIN`` names its directory (default DEFAULT_DIR), which
scripts/make-toolchain.sh makes: ``root/`` (the root filesystem), ``manifest.txt`` (every
installed package as name=version, sorted), ``manifest.sha256`` and ``packages.txt``. The
toolchain's digest, the sha256 of its manifest, is part of every build key, prove record and
run.json. ``NGINX_EVAL_TOOLCHAIN=host`` switches the pin off: the host's own tools, recorded as
"host" everywhere a digest would be.

A command runs as the root filesystem's account ACCOUNT (uid and gid 1000: an ordinary user, as
nginx-tests expect), with the root filesystem read-only at /, /proc, /dev, a private /tmp, no
network or a loopback of its own, and the given directories bound at their own paths, as the
first process of a PID namespace of its own (bwrap's ``--as-pid-1``). Outside, the account is
the harness's user (root, usually), so without that namespace a command could signal every
process of that user (the harness, other units' builds and proves); inside it, it reaches its
own only, and whatever it leaves running is killed by the kernel when it ends. bwrap's own init
instead of the command would leave an orphan for the machine's init to reap, which on some
machines takes seconds that procs.run_limited waits out (docs/performance.md). The harness finds
the command's processes by their token and process group, as on the host. The root
filesystem's manifest is read from its dpkg database and compared with the recorded one before
anything runs in it.
"""

import glob
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .errors import UserError
from .procs import run_query
from .records import ToolchainRecord

ENV_VAR = "NGINX_EVAL_TOOLCHAIN"
DEFAULT_DIR = "/opt/nginx-eval/toolchain"
HOST = "host"
SUITE = "debian-12"  # bookworm, as scripts/make-toolchain.sh makes it
ACCOUNT = "nginx-eval"
ACCOUNT_ID = 1000
# The PATH of a command inside, and of make's: ccache's compiler links first.
PATH = "/usr/local/bin:/usr/bin:/bin"
CCACHE_PATH = "/usr/lib/ccache"
MAKE_HINT = "run scripts/make-toolchain.sh (part of scripts/setup-debian.sh)"


@dataclass(frozen=True)
class Toolchain:
    """The pinned toolchain in `directory`, or the host's own (directory None)."""

    directory: Path | None

    @property
    def pinned(self) -> bool:
        return self.directory is not None

    @property
    def root(self) -> Path:
        assert self.directory is not None, "the host toolchain has no root filesystem"
        return self.directory / "root"

    @property
    def manifest_file(self) -> Path:
        assert self.directory is not None
        return self.directory / "manifest.txt"


def current(environ: Mapping[str, str] | None = None) -> Toolchain:
    """The toolchain NGINX_EVAL_TOOLCHAIN names (see the module's docstring)."""
    value = (os.environ if environ is None else environ).get(ENV_VAR, "") or DEFAULT_DIR
    if value == HOST:
        return Toolchain(None)
    if not os.path.isabs(value):
        raise UserError(f"{ENV_VAR} must be an absolute path or {HOST!r}, not {value!r}")
    return Toolchain(Path(value))


# -- the manifest and the digest -------------------------------------------------------------------


def installed_packages(root: str | Path) -> list[str]:
    """name=version of every package installed in the root filesystem, sorted as the setup
    script sorts them (C locale): read from its dpkg database, as `dpkg-query -W` lists them."""
    try:
        text = (Path(root) / "var" / "lib" / "dpkg" / "status").read_text(errors="replace")
    except OSError:
        return []
    found = []
    for stanza in text.split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line[:1] not in (" ", "\t") and ":" in line:
                name, _, value = line.partition(":")
                fields[name] = value.strip()
        if fields.get("Status", "").endswith(" installed") and "Package" in fields:
            found.append(f"{fields['Package']}={fields.get('Version', '')}")
    return sorted(set(found), key=lambda s: s.encode())


def manifest_digest(lines: Iterable[str]) -> str:
    """The sha256 of a manifest file with these lines (what `sha256sum manifest.txt` says)."""
    return hashlib.sha256("".join(f"{line}\n" for line in lines).encode()).hexdigest()


def recorded_manifest(toolchain: Toolchain) -> list[str] | None:
    """The manifest the setup recorded, or None when there is none."""
    try:
        return toolchain.manifest_file.read_text().splitlines()
    except OSError:
        return None


def _versions(lines: Iterable[str]) -> dict[str, str]:
    return dict(line.partition("=")[::2] for line in lines if line)


def differences(recorded: Sequence[str], actual: Sequence[str]) -> list[str]:
    """What differs between two manifests, a line per package: "added x=1", "removed x=1",
    "x: 1 -> 2"."""
    old, new = _versions(recorded), _versions(actual)
    out = []
    for name in sorted(old.keys() | new.keys()):
        if name not in new:
            out.append(f"removed {name}={old[name]}")
        elif name not in old:
            out.append(f"added {name}={new[name]}")
        elif old[name] != new[name]:
            out.append(f"{name}: {old[name]} -> {new[name]}")
    return out


def problem(toolchain: Toolchain) -> str | None:
    """Why nothing can run in the pinned toolchain, or None (always None for the host's)."""
    if not toolchain.pinned:
        return None
    if not shutil.which("bwrap"):
        return "bwrap is not on PATH (Debian: apt-get install bubblewrap)"
    if not toolchain.root.is_dir():
        return f"no root filesystem at {toolchain.root}: {MAKE_HINT}, or {ENV_VAR}={HOST}"
    recorded = recorded_manifest(toolchain)
    if recorded is None:
        return f"{toolchain.manifest_file} is missing: {MAKE_HINT}"
    changed = differences(recorded, installed_packages(toolchain.root))
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        return (
            f"the root filesystem at {toolchain.root} differs from its manifest "
            f"({'; '.join(changed[:3])}{more}): {MAKE_HINT}"
        )
    return None


def record(toolchain: Toolchain) -> ToolchainRecord:
    """What prove.json and run.json record of the toolchain (the digest of the recorded
    manifest: problem() says whether the root filesystem still matches it)."""
    if not toolchain.pinned:
        return {"name": HOST, "digest": None}
    recorded = recorded_manifest(toolchain)
    return {"name": SUITE, "digest": manifest_digest(recorded) if recorded is not None else None}


def key_part(toolchain: Toolchain) -> str:
    """The toolchain's part of a build key: its digest, or "host"."""
    return record(toolchain)["digest"] or HOST


def describe(rec: ToolchainRecord | None) -> str:
    """One line for a report: "debian-12 root filesystem 158a4c4d3877" or "host (pin off)"."""
    if not rec:
        return "not recorded"
    if rec["name"] == HOST:
        return "host (pin off)"
    return f"{rec['name']} root filesystem {(rec['digest'] or 'without a manifest')[:12]}"


# -- running a command inside ----------------------------------------------------------------------


def environment(extra: Mapping[str, str] | None = None, path: str = PATH) -> dict[str, str]:
    """The environment of a command inside: the account's, PATH, the C locale, plus `extra`."""
    return {
        "PATH": path,
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "USER": ACCOUNT,
        "LOGNAME": ACCOUNT,
        "LANG": "C",
        **(extra or {}),
    }


def command(
    toolchain: Toolchain,
    argv: Sequence[str],
    *,
    cwd: str | Path,
    writable: Iterable[str | Path] = (),
    readable: Iterable[str | Path] = (),
    network: bool = False,
) -> list[str]:
    """bwrap's argv that runs `argv` in the root filesystem (see the module's docstring), in
    `cwd`, with `writable` and `readable` bound at their own paths (read-write, read-only; a
    path that does not exist is left out) and, with `network`, the host's network instead of a
    loopback of its own. The command's environment is the one bwrap is started with."""
    return command_in(
        toolchain.root, argv, cwd=cwd, writable=writable, readable=readable, network=network
    )


def command_in(
    root: Path,
    argv: Sequence[str],
    *,
    cwd: str | Path,
    writable: Iterable[str | Path] = (),
    readable: Iterable[str | Path] = (),
    network: bool = False,
    mounts: Iterable[tuple[str, str | Path, str]] = (),
    uid: int = ACCOUNT_ID,
) -> list[str]:
    """command() over any root filesystem `root` ("/" for the host's own), with `mounts` besides:
    (flag, host path, path inside) triples ("--bind" or "--ro-bind") that show a host directory
    at another path (a SWE-bench environment at its fixed path: swebench/envs.py), and the
    command's user id `uid` (0: root of its user namespace, which may write where the host's
    root may)."""
    binds: dict[str, tuple[str, str]] = {}
    for flag, paths in (("--ro-bind", readable), ("--bind", writable)):
        for path in paths:
            path = os.path.abspath(path)
            if os.path.exists(path):
                binds[path] = (flag, path)  # writable wins
    for flag, source, inside in mounts:
        binds[inside] = (flag, os.path.abspath(source))
    # The new root is bwrap's own tmpfs, with the root filesystem's entries on it (read-only),
    # so that a bound directory gets its mount point there; read-only at the end.
    args = [shutil.which("bwrap") or "bwrap", *_root_entries(root, binds)]
    args += [
        "--proc", "/proc",
        "--dev", "/dev",
        "--tmpfs", "/tmp",
        "--unshare-user", "--uid", str(uid), "--gid", str(uid),
        "--unshare-ipc", "--unshare-uts",
        # The command as the first process of a PID namespace of its own (see the docstring).
        "--unshare-pid", "--as-pid-1",
        "--die-with-parent",
    ]  # fmt: skip
    if not network:
        args.append("--unshare-net")
    # Parents before what lies below them: a later bind covers an earlier one.
    for path in sorted(binds, key=lambda p: (p.count("/"), p)):
        flag, source = binds[path]
        args += [flag, source, path]
    args += ["--remount-ro", "/"]
    return [*args, "--chdir", os.path.abspath(cwd), "--", *argv]


# Top-level entries of the root filesystem not bound from it: bwrap makes its own.
OWN_MOUNTS = frozenset({"/proc", "/dev", "/tmp", "/sys"})


def _root_entries(root: Path, targets: Iterable[str], directory: str = "") -> list[str]:
    """bwrap's arguments that put the root filesystem's entries below `directory` (relative to
    the root, "" for /) in place: a directory bound read-only, a symbolic link (bin -> usr/bin)
    made again. A directory above one of `targets` (paths bound from the host) is not bound
    whole but made and filled entry by entry, so that the target's mount point can be made."""
    args: list[str] = []
    targets = list(targets)
    for entry in sorted(os.scandir(f"{root}{directory}" or "/"), key=lambda e: e.name):
        inside = f"{directory}/{entry.name}"
        if inside in OWN_MOUNTS or inside in targets:
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry.path), inside]
        elif entry.is_dir():
            if any(t.startswith(inside + "/") for t in targets):
                args += ["--dir", inside, *_root_entries(root, targets, inside)]
            else:
                args += ["--ro-bind", entry.path, inside]
        elif entry.is_file():
            args += ["--ro-bind", entry.path, inside]
    return args


def run(
    toolchain: Toolchain,
    argv: Sequence[str],
    timeout: float = 60,
    readable: Iterable[str | Path] = (),
) -> subprocess.CompletedProcess[str]:
    """Run a short query (`cc --version`, `perl -e ...`) inside, in /tmp: its output as text."""
    return run_query(
        command(toolchain, argv, cwd="/tmp", readable=readable), env=environment(), timeout=timeout
    )


@lru_cache(maxsize=8)
def first_line(toolchain: Toolchain, argv: tuple[str, ...]) -> str | None:
    """The first line a query prints inside (None when it fails), once per process."""
    try:
        out = run(toolchain, argv)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0] if out.returncode == 0 and lines else None


def resolve(toolchain: Toolchain, path: str) -> str | None:
    """An absolute path inside the root filesystem with its symbolic links followed there (not
    on the host: /usr/bin/cc -> /etc/alternatives/cc -> /usr/bin/gcc), or None when it does
    not exist."""
    root = str(toolchain.root)
    parts, done, hops = path.strip("/").split("/"), "", 0
    while parts:
        part = parts.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            done = os.path.dirname(done)
            continue
        here = f"{done}/{part}"
        if os.path.islink(root + here):
            hops += 1
            if hops > 40:
                return None
            target = os.readlink(root + here)
            parts = target.strip("/").split("/") + parts
            done = "" if target.startswith("/") else done
            continue
        if not os.path.lexists(root + here):
            return None
        done = here
    return done or "/"


def which(toolchain: Toolchain, program: str) -> str | None:
    """The real path inside the root filesystem of a program on its PATH, or None."""
    for directory in PATH.split(os.pathsep):
        found = resolve(toolchain, f"{directory}/{program}")
        if found and os.access(str(toolchain.root) + found, os.X_OK):
            if os.path.isfile(str(toolchain.root) + found):
                return found
    return None


def exists(toolchain: Toolchain, pattern: str) -> bool:
    """Whether an absolute path (a glob pattern) exists inside the root filesystem."""
    return bool(glob.glob(str(toolchain.root) + pattern))
