"""The internet a repository's tests reach, made to stand in offline: for a local verdict
(verdict.py) and inside the agent's sandbox (sandbox_view.py), so that both see what the
official image sees online (docs/benchmark.md, "The internet the tests reach").

Per repository (STANDINS), the tests' command runs in a private network namespace whose only
link is the loopback, up, with a default route into it: a connection to an address that is not
local (psf/requests' TARPIT, 10.255.255.1) is dropped and times out as on the internet, where
no route at all would refuse it at once. ``outer_prefix`` makes it on the host (``unshare``,
``ip``), ports below 1024 open to any user there. Inside, a private ``/etc/hosts`` maps the
hosts the tests name to 127.0.0.1, ``/etc/resolv.conf`` names the loopback (any other name
fails at once, as an unknown one does online), and standin_server.py, started before the tests
and ended after them, serves each of those hosts on ports 80 and 443: httpbin.org by httpbin
(HTTPBIN pinned, the server httpbin.org runs), the others by a plain page. Its TLS certificate
comes from a certificate authority made per run (trustme), trusted the way the repository
reads a CA: psf/requests before 2.9 reads only its bundled ``requests/cacert.pem``, so a copy
with the CA appended is bound over it, read-only, the checkout untouched.

The servers run in a venv of their own (httpbin), made like an environment over the same root
filesystem as the tests (envs.py), cached under ``layout.swe_env_dir``; env.json:
core/records.ServiceEnvJson.
"""

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import jsonio
from ..core.layout import Layout
from ..core.records import ServiceEnvJson, StandinsView, read_record, versioned, write_record
from . import envs

if TYPE_CHECKING:
    from ..run.swebench import SweTask

HTTPBIN = ("httpbin==0.10.4",)
# Inside: the services' venv and the run's files (configuration, certificates, the server).
SERVICES_AT = "/opt/swe-services"
STANDINS_AT = "/opt/swe-standins"
SERVER = Path(__file__).with_name("standin_server.py")
HTTP_PORT, HTTPS_PORT = 80, 443
# The namespace's network, set up by the host's root (or the namespace's, unprivileged): the
# loopback up, every address not local routed into it, where nothing answers: dropped.
NET_SETUP = """ip() { PATH=/usr/sbin:/sbin:$PATH command ip "$@"; }
ip link set lo up
ip route add default dev lo
echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start
exec "$@"
"""
NET_SCRIPT = "net.sh"  # NET_SETUP's file among the run's (sh -e runs it)
TOOLS_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"  # where unshare and ip are, for any caller's PATH
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
HOSTS_HEAD = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"


@dataclass(frozen=True)
class Standins:
    """What a repository's tests reach online, and how its code trusts a certificate."""

    httpbin: tuple[str, ...]  # names httpbin answers for
    others: tuple[str, ...] = ()  # names a plain page answers for
    ca_files: tuple[str, ...] = ()  # the checkout's own CA bundles (relative paths)
    no_proxy: tuple[str, ...] = ()  # hosts reached without a proxy in the sandbox

    @property
    def names(self) -> tuple[str, ...]:
        return self.httpbin + self.others


# psf/requests (docs/benchmark.md has the tests and what each checks): httpbin.org over http and
# https, a redirect to www.google.co.uk, connections to 10.255.255.1 that must time out.
STANDINS = {
    "psf/requests": Standins(
        httpbin=("httpbin.org",),
        others=("www.google.co.uk",),
        ca_files=("requests/cacert.pem",),
        # Reached directly in the sandbox, as in the official image: through a proxy a
        # connection that must time out or be refused, or a name that must not resolve, would
        # be a proxy's answer (the loopback proxy serves /etc/hosts' names for the rest).
        # (requests 2.4 to 2.25 match an address only to a CIDR, later ones to either form).
        no_proxy=(
            "10.255.255.1",
            "10.255.255.1/32",
            "httpbin.org",
            "www.google.co.uk",
            "google.com",
            "localhost",
        ),
    ),
}


def standins_of(repo: str) -> Standins | None:
    return STANDINS.get(repo)


def services_venv(layout: Layout, root: envs.PythonRoot) -> Path | str:
    """The venv the servers run in over `root` (built when missing), or why there is none."""
    problem = envs.ensure_rootfs(root)
    if problem:
        return problem
    key = "standins-" + jsonio.digest({"pins": HTTPBIN, "rootfs": root.digest()})[:12]
    directory = layout.swe_env_dir(key)
    rec = read_record(directory / "env.json")
    if rec:
        return directory / "venv" if rec.get("status") == envs.BUILT else str(rec.get("reason"))
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "venv").mkdir(exist_ok=True)
    empty = directory / "testbed"
    empty.mkdir(exist_ok=True)
    log = directory / "build.log"
    outcome = envs.run_script(
        layout,
        root,
        f"{root.executable} -m venv {SERVICES_AT}\n"
        f"{SERVICES_AT}/bin/python -m pip install {' '.join(HTTPBIN)}",
        log,
        mounts=[("--bind", directory / "venv", SERVICES_AT), ("--bind", empty, envs.TESTBED)],
        timeout=envs.BUILD_TIMEOUT,
    )
    ok = not outcome.timed_out and outcome.exit_code == 0
    reason = None if ok else f"httpbin's venv was not built ({log}): {envs.last_lines(log)}"
    write_record(
        directory / "env.json",
        versioned(ServiceEnvJson(status="built" if ok else "not_built", reason=reason)),
    )
    return directory / "venv" if ok else str(reason)


def outer_prefix(net_script: str | Path) -> list[str]:
    """The host's argv prefix that runs a command in a private network namespace set up by
    `net_script` (NET_SETUP): as root, a network namespace alone; otherwise with a user
    namespace that owns it (bwrap_agent_user.sh does the same for the agent's sandbox)."""
    unshare = shutil.which("unshare", path=TOOLS_PATH) or "unshare"
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return [unshare, *user, "--net", "--", "sh", "-e", str(net_script)]


def make_certificates(directory: Path, names: tuple[str, ...]) -> bytes:
    """A new certificate authority (returned, PEM) and a server certificate for `names` signed
    by it, written as server.pem (with its chain) and server.key in `directory`."""
    import trustme

    ca = trustme.CA(organization_name="nginx-eval stand-ins")
    leaf = ca.issue_cert(*names)
    leaf.private_key_pem.write_to_path(str(directory / "server.key"))
    leaf.private_key_and_cert_chain_pem.write_to_path(str(directory / "server.pem"))
    pem = ca.cert_pem.bytes()
    (directory / "ca.pem").write_bytes(pem)
    return pem


@dataclass
class Offline:
    """A run's stand-ins: what the tests' bubblewrap binds and runs, made by `offline`."""

    directory: Path  # the run's files, at STANDINS_AT inside
    venv: Path  # the services' venv, at SERVICES_AT inside
    bundles: dict[str, Path]  # checkout path -> the CA bundle bound over it

    @property
    def outer(self) -> list[str]:
        return outer_prefix(self.directory / NET_SCRIPT)

    @property
    def launcher(self) -> list[str]:
        """The argv prefix inside that starts the servers before the command."""
        return [
            f"{SERVICES_AT}/bin/python",
            f"{STANDINS_AT}/{SERVER.name}",
            f"{STANDINS_AT}/standins.json",
            "--",
        ]

    def mounts(self, testbed: str) -> list[tuple[str, str | Path, str]]:
        """bwrap's mounts of the run, the checkout at `testbed` inside."""
        made: list[tuple[str, str | Path, str]] = [
            ("--ro-bind", self.venv, SERVICES_AT),
            ("--ro-bind", self.directory, STANDINS_AT),
            ("--ro-bind", self.directory / "hosts", "/etc/hosts"),
            ("--ro-bind", self.directory / "resolv.conf", "/etc/resolv.conf"),
        ]
        made += [("--ro-bind", p, f"{testbed}/{rel}") for rel, p in self.bundles.items()]
        return made


def offline(
    layout: Layout, repo: str, root: envs.PythonRoot, directory: Path, checkout: Path
) -> Offline | str | None:
    """The stand-ins of `repo`'s tests for one run, their files written in `directory` (the CA
    bundles from `checkout`, the tests' checkout, as it is then); None when the repository's
    tests reach nothing, or why they cannot be made (one line)."""
    standins = standins_of(repo)
    if standins is None:
        return None
    missing = [tool for tool in ("unshare", "ip") if not shutil.which(tool, path=TOOLS_PATH)]
    if missing:
        return f"no {' or '.join(missing)} on this machine (util-linux, iproute2)"
    venv = services_venv(layout, root)
    if isinstance(venv, str):
        return venv
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    ca = make_certificates(directory, standins.names)
    (directory / "hosts").write_text(
        HOSTS_HEAD + "".join(f"127.0.0.1\t{name}\n" for name in standins.names)
    )
    (directory / "resolv.conf").write_text("nameserver 127.0.0.1\n")
    (directory / NET_SCRIPT).write_text(NET_SETUP)
    shutil.copyfile(SERVER, directory / SERVER.name)
    config = {
        "httpbin": list(standins.httpbin),
        "cert": f"{STANDINS_AT}/server.pem",
        "key": f"{STANDINS_AT}/server.key",
        "http_port": HTTP_PORT,
        "https_port": HTTPS_PORT,
        "log": "/tmp/standin-servers.log",
    }
    (directory / "standins.json").write_text(json.dumps(config, indent=1) + "\n")
    bundles = {}
    for i, rel in enumerate(standins.ca_files):
        original = checkout / rel
        if original.is_file():
            bundle = directory / f"bundle-{i}.pem"
            bundle.write_bytes(original.read_bytes().rstrip(b"\n") + b"\n" + ca)
            bundles[rel] = bundle
    for path in directory.iterdir():
        path.chmod(0o644)  # read by the sandbox's user too
    return Offline(directory, venv, bundles)


def sandbox_view(offline: Offline, testbed: str, direct: tuple[str, ...]) -> StandinsView:
    """What the agent's sandbox does with a run's stand-ins (agent/swe_view.py). srt points
    REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and SSL_CERT_FILE at the system's bundle: there, a copy
    with the run's CA appended is shown over it."""
    mounts = [[str(host), inside] for flag, host, inside in offline.mounts(testbed)]
    if os.path.isfile(SYSTEM_BUNDLE):
        bundle = offline.directory / "system-bundle.pem"
        ca = (offline.directory / "ca.pem").read_bytes()
        bundle.write_bytes(Path(SYSTEM_BUNDLE).read_bytes().rstrip(b"\n") + b"\n" + ca)
        bundle.chmod(0o644)
        mounts.append([str(bundle), SYSTEM_BUNDLE])
    return {
        "net": str(offline.directory / NET_SCRIPT),
        "mounts": [m for m in mounts if not m[1].startswith(testbed + "/")],
        "over": [[str(p), rel] for rel, p in offline.bundles.items()],
        "launcher": offline.launcher,
        "direct": list(direct),
    }


@contextlib.contextmanager
def sandbox_standins(
    layout: Layout, task: "SweTask", directory: Path, workspace: Path, log: Path
) -> Iterator[StandinsView | None]:
    """The stand-ins of an attempt at `task` whose agent works in `workspace`: made in
    `directory` for the attempt, removed after it; None when its tests reach nothing, or when
    they cannot be made (said in `log`: the agent then runs without them)."""
    standins = standins_of(task.repo)
    environment = envs.environment_of(task, layout) if standins else None
    if standins is None or environment is None or environment.python_root is None:
        yield None
        return
    made = offline(layout, task.repo, environment.python_root, directory, workspace)
    if isinstance(made, str) or made is None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as f:
            f.write(f"no stand-ins for the internet: {made}\n")
        yield None
        return
    try:
        for point in (SERVICES_AT, STANDINS_AT):
            # srt's root is the host's, read-only inside: the mount points must be there.
            try:
                os.makedirs(point, exist_ok=True)
            except OSError as e:
                with open(log, "a") as f:
                    f.write(f"no stand-ins: cannot make {point} ({e.strerror}): make it as root\n")
                yield None
                return
        yield sandbox_view(made, envs.TESTBED, standins.no_proxy)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
