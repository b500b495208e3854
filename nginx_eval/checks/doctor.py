"""The doctor: is this machine ready to run the selected tasks? ``doit run doctor [instances=...]``
(any selection of the pipeline: run=, bench=, limit=).

It checks the pinned toolchain's root filesystem against its manifest (core/rootfs.py: a
``TOOLCHAIN`` line per package added, removed or changed; with NGINX_EVAL_TOOLCHAIN=host, a
warning), the tools, the agent sandbox, each selected agent mode's programs, credentials and model
endpoint, the tests' network isolation, and what each selected test file needs: the libraries of
its task's configure flags, Perl modules, daemons, the configure flags its ``$t->has`` asks for,
the harness's OpenSSL configuration and the certificates the file makes. With the pin on, what
builds and tests use is looked for in the root filesystem (SystemProbe.inside), the harness's own
tools on the host. What each check asks and how the report reads: docs/running.md#the-doctor.

For a SWE-bench benchmark, none of nginx's needs: each task repository's bare clone, or else
whether its URL answers ``git ls-remote`` (a ``CANNOT CLONE`` line when not), and whether the
official harness can grade here.

Test files are read from the extracted tree (``tests:<commit>``) or the bare clone of the test
repository; with neither, the doctor checks everything else and its verdict is "not checked"
(never "all good"), naming what to run first. Any MISSING, TASK ERROR, CANNOT RUN or TOOLCHAIN
line (and CANNOT CLONE) fails the doit action, so doit exits non-zero.

What a test file needs and which package provides it (the tables, the reading of ``use``,
``require``, ``has`` and ``has_daemon``) is mining/testsuite.py, shared with the task miner; this
module asks the machine (SystemProbe, TestSource) and compares; doctor_report.py renders.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from doit.exceptions import TaskFailed

from ..agent import sandbox, selftest
from ..agent.preflight import key_problem, program_found, reached_problem
from ..agent.programs import registry
from ..agent.programs.base import Program, resolve_program
from ..core import rootfs
from ..core.gitcmd import file_at, remote_problem
from ..core.layout import SOURCE_ROOT, Layout, repo_url
from ..core.procs import run_query
from ..core.stamps import TaskDict
from ..mining.testsuite import (
    DAEMON_FILES,
    DEFAULT_MODULES,
    LIBRARIES,
    certificates_made,
    daemon_package,
    flag_for_module,
    libraries_for_flags,
    module_enabled,
    perl_package,
    requirements_of_test,
)
from ..prove import network as private_network
from ..prove.env import OPENSSL_CONF_FILE
from ..run.benchmark import AnyTask, Task
from ..run.commandline import command_program
from ..run.modes import AgentMode, Mode
from ..run.swebench import SWEBENCH, SweTask
from ..swebench.stage import grading_problem
from .doctor_report import NOT_CHECKED, REPOSITORY, SWEBENCH_GRADING, Finding, render

if TYPE_CHECKING:
    from ..run.context import StageContext

# How a certificate is made (certificate_trial): ("rsa", bits) or ("digest", name).
CertificateSpec = tuple[str, Any]
PACKAGES_FILE = SOURCE_ROOT / "scripts" / "debian-packages.txt"
TOOLCHAIN_PACKAGES_FILE = SOURCE_ROOT / "scripts" / "toolchain-packages.txt"
MAKE_TOOLCHAIN = "scripts/make-toolchain.sh"
# What the harness runs itself, on the host even with the pin on; everything else a build or a
# test runs is looked for in the toolchain's root filesystem.
HOST_TOOLS = frozenset({"git", "tar", "bwrap", "socat", "rg"})
TOOLCHAIN_KINDS = frozenset({"tool", "library", "perl module", "daemon"})

# (tool, package, required)
TOOLS = (
    ("cc", "gcc", True),
    ("make", "make", True),
    ("git", "git", True),
    ("perl", "perl", True),
    ("prove", "perl", True),
    ("tar", "tar", True),
    ("ccache", "ccache", False),
    ("bwrap", "bubblewrap", False),
    ("socat", "socat", False),
    ("rg", "ripgrep", False),
)
TOOL_NOTES = {
    "ccache": "builds are not shared between trees",
    "bwrap": "no agent sandbox",
    "socat": "no agent sandbox",
    "rg": "no agent sandbox",
}
# ccache's compiler link in the toolchain's root filesystem that nginx's Makefile (CC = cc) uses.
CCACHE_CC_LINK = "usr/lib/ccache/cc"
# What the OpenSSL configuration for tests is there to accept: the certificates of test trees
# before 2019 (openssl_tests.cnf).
PIN_CERTIFICATES = (("rsa", 1024), ("digest", "sha1"))

# -- probing the machine ------------------------------------------------------------------------


class SystemProbe:
    """What is installed, asked of this machine, or of the pinned toolchain's root filesystem
    for what builds and tests run (tests inject a fake with the same methods)."""

    def __init__(
        self, layout: Layout | None = None, toolchain: rootfs.Toolchain | None = None
    ) -> None:
        self._perl: dict[str, Any] = {}
        self._certificates: dict[CertificateSpec, tuple[str, str]] = {}
        self.layout = layout
        self.toolchain = toolchain or rootfs.current()

    def inside(self, kind: str, name: str = "") -> bool:
        """Whether `name` of `kind` is looked for in the toolchain's root filesystem."""
        return self.toolchain.pinned and not (kind == "tool" and name in HOST_TOOLS)

    def which(self, name: str) -> bool:
        if self.inside("tool", name):
            return rootfs.which(self.toolchain, name) is not None
        return shutil.which(name) is not None

    def private_network_problem(self) -> str | None:
        return private_network.problem()

    def sandbox_problem(self) -> str | None:
        """Why no agent can run isolated here: srt missing or not starting, else its self-test
        (agent/selftest.py: build, serve, curl, prove inside it) failing; None when it passed."""
        if self.layout is None:
            return sandbox.sandbox_problem()
        problem = sandbox.sandbox_problem(start=False)
        if problem:
            return problem
        box: sandbox.Box = {
            "isolation": "srt",
            "endpoint": sandbox.model_endpoint(os.environ),
            "allow_hosts": [],
            "binds": [],
        }
        result = selftest.run(self.layout, box, dict(os.environ))
        # Not one step: whether srt starts here at all says it best (as the preflight does).
        return (not result["steps"] and sandbox.sandbox_problem()) or result["failed"]

    def exists(self, pattern: str) -> bool:
        if self.inside("library"):
            return rootfs.exists(self.toolchain, pattern)
        return bool(glob.glob(pattern))

    def certificate_refused(self, spec: CertificateSpec) -> tuple[str, str]:
        """("ok" | "refused" | "unknown", detail) for a certificate made as `spec` says (see
        certificate_trial), once per spec."""
        if spec not in self._certificates:
            self._certificates[spec] = certificate_trial(spec, toolchain=self.toolchain)
        return self._certificates[spec]

    def perl_modules(self, modules: Iterable[str]) -> set[str]:
        """The subset of `modules` that perl can load; one perl process for all unknown ones."""
        todo = sorted(m for m in set(modules) if m not in self._perl)
        if todo:
            script = (
                'for my $m (@ARGV) { my $ok = eval "require $m; 1"; '
                'print(($ok ? "ok " : "no "), "$m\\n") }'
            )
            argv = ["perl", "-e", script, *todo]
            try:
                if self.inside("perl module"):
                    out = rootfs.run(self.toolchain, argv, timeout=120).stdout
                else:
                    out = run_query(argv, timeout=120).stdout
            except (OSError, subprocess.TimeoutExpired):
                out = ""
            for line in out.splitlines():
                status, _, mod = line.partition(" ")
                self._perl[mod] = status == "ok"
            for m in todo:
                self._perl.setdefault(m, False)
        return {m for m in modules if self._perl[m]}


_OPENSSL_REASON = re.compile(r":error:[0-9A-Fa-f]+:[^:]*:[^:]*:([^:]+):")


def certificate_trial(
    spec: CertificateSpec,
    conf: Path = OPENSSL_CONF_FILE,
    timeout: float = 60,
    toolchain: rootfs.Toolchain | None = None,
) -> tuple[str, str]:
    """Does OpenSSL's TLS library, under the OpenSSL configuration `conf`, accept a certificate
    made as `spec` says: ("rsa", bits), self-signed with a key of that size; ("digest", name), a
    2048-bit one signed by a CA with that digest? Made as nginx-tests make them (``openssl req``
    with a config of their own) and loaded as nginx loads one (SSL_CTX_use_certificate, which
    applies the security level), by ``openssl s_client -cert`` aimed at a socket that is not
    there: it gets to connecting only when the certificate was accepted. Returns ("ok", ""),
    ("refused", OpenSSL's reason, e.g. "ee key too small") or ("unknown", why not checked).
    toolchain: the pinned one (rootfs.Toolchain) runs the root filesystem's openssl."""
    pinned = toolchain if toolchain is not None and toolchain.pinned else None
    if not (rootfs.which(pinned, "openssl") if pinned else shutil.which("openssl")):
        return "unknown", "the openssl program is not installed"
    kind, value = spec
    bits = value if kind == "rsa" else 2048
    env = dict(os.environ, OPENSSL_CONF=str(conf))
    if pinned:
        env = rootfs.environment({"OPENSSL_CONF": str(conf)})
    with tempfile.TemporaryDirectory(prefix="nginx-eval-doctor-") as d:

        def inside(argv: list[str]) -> list[str]:
            if pinned:
                return rootfs.command(pinned, argv, cwd=d, writable=[d], readable=[conf])
            return argv

        conf_text = (
            f"[ req ]\ndefault_bits = {bits}\nencrypt_key = no\n"
            "distinguished_name = req_distinguished_name\n[ req_distinguished_name ]\n"
        )
        with open(os.path.join(d, "req.conf"), "w") as f:
            f.write(conf_text)
        req = ["openssl", "req", "-config", "req.conf", "-subj"]
        leaf = "/CN=localhost/"
        # The CA has a name of its own: a certificate whose issuer is its subject counts as
        # self-signed, and OpenSSL does not judge the digest of those.
        steps = (
            [req + [leaf, "-x509", "-new", "-out", "leaf.crt", "-keyout", "leaf.key"]]
            if kind == "rsa"
            else [
                req + ["/CN=root/", "-x509", "-new", "-out", "ca.crt", "-keyout", "ca.key"],
                req + [leaf, "-new", "-out", "leaf.csr", "-keyout", "leaf.key"],
                [
                    "openssl",
                    "x509",
                    "-req",
                    "-in",
                    "leaf.csr",
                    "-CA",
                    "ca.crt",
                    "-CAkey",
                    "ca.key",
                    "-set_serial",
                    "1",
                    "-days",
                    "1",
                    f"-{value}",
                    "-out",
                    "leaf.crt",
                ],
            ]
        )
        try:
            for argv in steps:
                made = run_query(inside(argv), cwd=d, env=env, timeout=timeout)
                if made.returncode != 0:
                    return "unknown", f"`{' '.join(argv[:2])}` failed: {_last_line(made.stderr)}"
            tried = run_query(
                inside(
                    [
                        "openssl",
                        "s_client",
                        "-unix",
                        "no-such-socket",
                        "-cert",
                        "leaf.crt",
                        "-key",
                        "leaf.key",
                    ]
                ),
                cwd=d,
                env=env,
                timeout=timeout,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return "unknown", str(e)
    out = tried.stdout + tried.stderr
    if "error setting certificate" in out:
        reason = _OPENSSL_REASON.search(out)
        return "refused", reason.group(1) if reason else _last_line(out)
    if "connect" in out:
        return "ok", ""
    return "unknown", f"`openssl s_client` said: {_last_line(out)}"


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "(nothing)"


class TestSource:
    """Reads a test file at a commit: the extracted tree, else the bare clone, else None."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._cache: dict[Any, Any] = {}

    def repo_available(self, repo: str, commit: str) -> bool:
        return (
            self.layout.tests_tree(commit).is_dir()
            or (self.layout.bare_repo(repo) / "HEAD").exists()
        )

    def read(self, repo: str, commit: str, path: str) -> str | None:
        key = (commit, path)
        if key not in self._cache:
            self._cache[key] = self._read(repo, commit, path)
        return self._cache[key]

    def _read(self, repo: str, commit: str, path: str) -> str | None:
        tree = self.layout.tests_tree(commit)
        if self.layout.tests_stamp(commit).exists() and tree.is_dir():
            f = tree / path
            return f.read_text(errors="replace") if f.is_file() else None
        data = file_at(self.layout.bare_repo(repo), commit, path)
        return None if data is None else data.decode(errors="replace")

    def pcre2_capable(self, repo: str, commit: str) -> bool | None:
        """Does nginx at `commit` know PCRE2 (1.21.5+)? None when the clone is not there."""
        bare = self.layout.bare_repo(repo)
        if not (bare / "HEAD").exists():
            return None
        conf = file_at(bare, commit, "auto/lib/pcre/conf")
        return None if conf is None else b"pcre2" in conf


# -- diagnosis -----------------------------------------------------------------------------------


class _Needs:
    """kind -> key -> (who set, package, description) collected over the tasks."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, Any], dict[str, Any]] = {}

    def add(
        self, kind: str, key: Any, who: str, package: str = "", what: str | None = None
    ) -> None:
        entry = self.items.setdefault(
            (kind, key), {"who": [], "package": package, "what": what or key}
        )
        if who and who not in entry["who"]:
            entry["who"].append(who)


def diagnose(
    tasks: Iterable[Task],
    source: TestSource,
    probe: SystemProbe,
    listed_packages: set[str] | None = None,
    toolchain_packages: set[str] | None = None,
) -> list[Finding]:
    """The findings for `tasks` (a list of benchmark Task). `source` has read(repo, commit, path)
    and repo_available(repo, commit), pcre2_capable(repo, commit); `probe` has which(name),
    exists(glob), perl_modules(names) -> the loadable ones, private_network_problem() -> why
    tests cannot have a network of their own, or None, certificate_refused(spec) -> (status,
    detail) of certificate_trial. listed_packages: the set from
    scripts/debian-packages.txt (None: do not compare); toolchain_packages: the set from
    scripts/toolchain-packages.txt, which what the probe looks for in the pinned toolchain
    (probe.inside(kind, name)) is compared with instead."""
    findings, needs = [], _Needs()
    unread: dict[str, list[str]] = {}
    pcre_unknown: dict[str, list[str]] = {}
    for task in tasks:
        iid = task.instance_id
        if _task_needs(task, source, needs):
            pcre_unknown.setdefault(task.repo, []).append(iid)
        if not source.repo_available(task.test_repo, task.test_commit):
            unread.setdefault(task.test_repo, []).append(iid)
            continue
        for path in task.test_files:
            findings += _test_file_needs(task, path, source, needs)
    findings += _not_checked(unread, pcre_unknown)
    findings += _tool_findings(probe)
    findings.append(_isolation_finding(probe))
    findings.append(_sandbox_finding(probe))
    findings.append(_openssl_finding(probe))
    findings += _probed_needs(needs, probe)
    inside = getattr(probe, "inside", None)
    for f in findings:
        if inside and f.package and f.kind in TOOLCHAIN_KINDS and inside(f.kind, f.what):
            f.toolchain = True
    if listed_packages is not None:
        findings += _unlisted(
            [f for f in findings if not f.toolchain], listed_packages, PACKAGES_FILE.name
        )
    if toolchain_packages is not None:
        findings += _unlisted(
            [f for f in findings if f.toolchain], toolchain_packages, TOOLCHAIN_PACKAGES_FILE.name
        )
    return findings


def _task_needs(task: Task, source: TestSource, needs: _Needs) -> bool:
    """Add the libraries of the task's configure flags and its perl_modules; True when whether
    the base needs old PCRE could not be checked (no nginx clone)."""
    iid = task.instance_id
    pcre2 = source.pcre2_capable(task.repo, task.base_commit)
    libraries = libraries_for_flags(task.configure_flags, pcre2)
    for lib in libraries:
        needs.add("library", lib, iid, LIBRARIES[lib].package, LIBRARIES[lib].what)
    for mod in task.perl_modules:
        needs.add("perl module", mod, f"{iid} (perl_modules)", perl_package(mod)[0])
    return "pcre" in libraries and not source.repo_available(task.repo, task.base_commit)


def _test_file_needs(task: Task, path: str, source: TestSource, needs: _Needs) -> list[Finding]:
    """Add what the test file at `path` needs; [findings] for a missing file or a has() name the
    task's configure flags do not enable."""
    iid = task.instance_id
    own = dict(task.authored)  # an authored file is read as the task has it
    text = (
        own[path].decode(errors="replace")
        if path in own
        else source.read(task.test_repo, task.test_commit, path)
    )
    if text is None:
        return [
            Finding(
                "error",
                "tests",
                path,
                (iid,),
                note=f"does not exist at test_commit {task.test_commit[:12]} (field test_files)",
            )
        ]
    req = requirements_of_test(text)
    who = f"{iid} ({path})"
    for mod in sorted(req["perl_modules"]):
        needs.add("perl module", mod, who, perl_package(mod)[0])
    for daemon in sorted(req["daemons"]):
        needs.add("daemon", daemon, who, daemon_package(daemon))
    for spec in certificates_made(text):
        needs.add("certificate", spec, who, what=certificate_text(spec))
    findings = []
    for name in sorted(req["nginx_modules"]):
        if module_enabled(name, task.configure_flags):
            needs.add("configure", name, iid)
        else:
            findings.append(_configure_error(iid, path, name))
    return findings


def _configure_error(iid: str, path: str, name: str) -> Finding:
    flag = flag_for_module(name)
    hint = (
        f"add {flag}"
        if flag
        else f"remove {DEFAULT_MODULES[name]}"
        if name in DEFAULT_MODULES
        else "no known configure flag provides it"
    )
    return Finding(
        "error",
        "configure",
        name,
        (iid,),
        note=f"task {iid}: field configure_flags: {path} asks for $t->has('{name}'): "
        f"{hint}; without it the file skips",
    )


def _not_checked(
    unread: Mapping[str, list[str]], pcre_unknown: Mapping[str, list[str]]
) -> list[Finding]:
    findings = []
    for repo, iids in sorted(unread.items()):
        findings.append(
            Finding(
                "warn",
                NOT_CHECKED,
                repo,
                tuple(iids),
                note=f"{repo} is not cloned: test files not checked; "
                "run `doit run repos` (with the same run=/instances=) first",
            )
        )
    for repo, iids in sorted(pcre_unknown.items()):
        findings.append(
            Finding(
                "warn",
                NOT_CHECKED,
                repo,
                tuple(iids),
                note=f"{repo} is not cloned: whether a base predates PCRE2 (and "
                "needs old PCRE, pcre.h) not checked",
            )
        )
    return findings


def _tool_findings(probe: SystemProbe) -> list[Finding]:
    findings = []
    for name, package, required in TOOLS:
        if probe.which(name):
            findings.append(Finding("ok", "tool", name, package=package))
        else:
            findings.append(
                Finding(
                    "missing" if required else "warn",
                    "tool",
                    name,
                    package=package,
                    note=TOOL_NOTES.get(name, ""),
                )
            )
    return findings


def _isolation_finding(probe: SystemProbe) -> Finding:
    problem = probe.private_network_problem()
    if problem is None:
        return Finding("ok", "isolation", "a private network per test file")
    return Finding(
        "warn",
        "isolation",
        "private network",
        note=f"tests share the machine's network ({problem}); test trees with "
        "fixed ports run one file at a time",
    )


def _sandbox_finding(probe: SystemProbe) -> Finding:
    problem = probe.sandbox_problem()
    if problem is None:
        return Finding(
            "ok",
            "agent sandbox",
            "srt runs, and its self-test passed (a phase builds "
            "a C server, starts it, reaches it with curl and prove)",
        )
    return Finding("warn", "agent sandbox", "srt", note=f"no agent mode can run: {problem}")


def certificate_text(spec: CertificateSpec) -> str:
    kind, value = spec
    return f"an RSA key of {value} bits" if kind == "rsa" else f"a certificate signed with {value}"


def _conf_name() -> str:
    try:
        return str(OPENSSL_CONF_FILE.relative_to(SOURCE_ROOT))
    except ValueError:
        return str(OPENSSL_CONF_FILE)


def _openssl_finding(probe: SystemProbe) -> Finding:
    """Whether the OpenSSL configuration for tests is in effect: what it exists to accept is."""
    conf = f"OPENSSL_CONF={_conf_name()}"
    trials = [(spec, probe.certificate_refused(spec)) for spec in PIN_CERTIFICATES]
    refused = [
        f"{certificate_text(spec)} ({detail})"
        for spec, (status, detail) in trials
        if status == "refused"
    ]
    unknown = [detail for _, (status, detail) in trials if status == "unknown"]
    if refused:
        return Finding(
            "warn",
            "openssl",
            conf,
            note=f"OpenSSL for tests: {conf} is not in effect: it refuses "
            f"{' and '.join(refused)}; test trees before 2019 cannot start nginx",
        )
    if unknown:
        return Finding(
            "warn", "openssl", conf, note=f"OpenSSL for tests: {conf} not checked: {unknown[0]}"
        )
    return Finding(
        "ok",
        "openssl",
        f"{conf} in effect ({' and '.join(map(certificate_text, PIN_CERTIFICATES))} accepted)",
    )


def _probed_needs(needs: _Needs, probe: SystemProbe) -> list[Finding]:
    """A finding per collected need, asked of `probe` (all Perl modules in one call)."""
    entries = needs.items
    perl_wanted = [key for (kind, key) in entries if kind == "perl module"]
    have_perl = probe.perl_modules(perl_wanted) if perl_wanted and probe.which("perl") else set()
    findings = []
    for (kind, key), e in sorted(entries.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        findings += _need_findings(kind, key, e, probe, have_perl)
    return findings


def _need_findings(
    kind: str, key: Any, e: Mapping[str, Any], probe: SystemProbe, have_perl: set[str]
) -> list[Finding]:
    who = tuple(e["who"])
    if kind == "configure":
        return [Finding("ok", kind, key, who)]
    if kind == "certificate":
        return [_certificate_finding(key, e["what"], who, probe)]
    if kind == "library":
        ok = any(probe.exists(p) for p in LIBRARIES[key].paths)
    elif kind == "perl module":
        ok = key in have_perl
    else:
        ok = probe.which(key)
    findings = [
        Finding(
            "ok" if ok else "missing",
            kind,
            e["what"],
            who,
            e["package"],
            note="" if kind != "perl module" or perl_package(key)[1] else "package name guessed",
        )
    ]
    if kind == "daemon" and ok and key in DAEMON_FILES:
        patterns, package, what = DAEMON_FILES[key]
        if not any(probe.exists(p) for p in patterns):
            findings.append(Finding("missing", kind, what, who, package))
    return findings


def _certificate_finding(
    spec: CertificateSpec, what: str, who: tuple[str, ...], probe: SystemProbe
) -> Finding:
    """A test file makes certificates nginx refuses under the harness's OpenSSL configuration:
    nginx does not start for it, at the base or the fix, so the task cannot run here."""
    status, detail = probe.certificate_refused(spec)
    if status == "ok":
        return Finding("ok", "certificate", what, who)
    if status == "refused":
        return Finding(
            "error",
            "certificate",
            what,
            who,
            note=f"OpenSSL under OPENSSL_CONF={_conf_name()} refuses {what} ({detail}), "
            "which the test file makes: nginx cannot start for it, at the base "
            "or the fix",
        )
    return Finding(
        "warn",
        "certificate",
        what,
        who,
        note=f"whether OpenSSL accepts {what} not checked: {detail}",
    )


def _unlisted(
    findings: Iterable[Finding], listed_packages: set[str], listed_in: str = PACKAGES_FILE.name
) -> list[Finding]:
    """Warnings for the packages the findings name that the list (scripts/`listed_in`) does
    not."""
    unlisted: dict[str, list[Any]] = {}
    for f in findings:
        if (
            f.package
            and f.package not in listed_packages
            and f.level in ("ok", "missing")
            and not f.note.endswith("guessed")
        ):
            unlisted.setdefault(f.package, []).extend(f.who or (f.what,))
    return [
        Finding(
            "warn",
            "setup",
            package,
            tuple(dict.fromkeys(who)),
            note=f"not in scripts/{listed_in}: add it so "
            + (
                "the toolchain's root filesystem has it"
                if listed_in == TOOLCHAIN_PACKAGES_FILE.name
                else "setup-debian.sh installs it"
            ),
        )
        for package, who in sorted(unlisted.items())
    ]


def toolchain_findings(
    toolchain: rootfs.Toolchain, packages_file: Path = TOOLCHAIN_PACKAGES_FILE
) -> list[Finding]:
    """The toolchain's findings (kind "toolchain"): with the pin off, a warning; with it on,
    whether the root filesystem is there, its packages against its manifest (a line per
    difference) and against the package list, and whether its builds can use ccache."""
    if not toolchain.pinned:
        return [
            Finding(
                "warn",
                "toolchain",
                rootfs.HOST,
                note=f"the pin is off ({rootfs.ENV_VAR}={rootfs.HOST}): builds and proves use "
                "this machine's own compiler, libraries and Perl, and their records say "
                '"host"; verdicts may differ from those of the pinned toolchain',
            )
        ]
    remake = f"run {MAKE_TOOLCHAIN} (part of scripts/setup-debian.sh)"
    if not toolchain.root.is_dir():
        return [
            Finding(
                "error",
                "toolchain",
                "missing",
                note=f"no root filesystem at {toolchain.root} -> {remake}, or "
                f"{rootfs.ENV_VAR}={rootfs.HOST} to use this machine's own tools",
            )
        ]
    recorded = rootfs.recorded_manifest(toolchain)
    if recorded is None:
        return [
            Finding(
                "error",
                "toolchain",
                "manifest",
                note=f"{toolchain.manifest_file} is missing: nothing to check {toolchain.root} "
                f"against -> {remake}",
            )
        ]
    installed = rootfs.installed_packages(toolchain.root)
    findings = [
        Finding(
            "error",
            "toolchain",
            "differs",
            note=f"{toolchain.root} differs from its manifest: {change} -> {remake}",
        )
        for change in rootfs.differences(recorded, installed)
    ]
    names = {line.partition("=")[0] for line in installed}
    findings += [
        Finding(
            "error",
            "toolchain",
            package,
            note=f"{packages_file.name} names {package}, which {toolchain.root} lacks -> {remake}",
        )
        for package in sorted((listed_packages(packages_file) or set()) - names)
    ]
    if not findings:
        findings.append(
            Finding(
                "ok",
                "toolchain",
                f"{rootfs.describe(rootfs.record(toolchain))} at {toolchain.root}, "
                f"{len(installed)} packages as its manifest says",
            )
        )
    if "ccache" in names and not os.path.lexists(toolchain.root / CCACHE_CC_LINK):
        findings.append(
            Finding(
                "warn",
                "toolchain",
                "ccache",
                note=f"{toolchain.root} has no /{CCACHE_CC_LINK}: nginx's Makefile calls cc, so no "
                f"build goes through ccache (every clean build compiles everything) -> {remake}",
            )
        )
    return findings


def listed_packages(path: Path = PACKAGES_FILE) -> set[str] | None:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    return {line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()}


SETUP_SCRIPT = SOURCE_ROOT / "scripts" / "setup-debian.sh"


def pinned_cli_version(setting: str = "CLAUDE_CODE_VERSION") -> str | None:
    """The version of an agent program scripts/setup-debian.sh installs (its variable
    `setting`), or None."""
    try:
        m = re.search(rf"^{setting}=(\S+)", SETUP_SCRIPT.read_text(), re.M)
    except OSError:
        return None
    return m.group(1) if m else None


def agent_findings(layout: Layout, modes: Iterable[AgentMode]) -> list[Finding]:
    """What the selected agent modes need, checked as the preflight checks it (agent/preflight.py,
    the same code): each phase's program, for an agent program (agent/programs/) its version
    against the pin, its credentials and key, and its model endpoint reached the way a phase
    reaches it. The sandbox's own self-test is the "agent sandbox" finding. A program that several
    modes run is checked once and its finding names every one of them: without `claude` on PATH,
    raw, impl, full and nlcmd all cannot run."""
    findings: list[Finding] = []
    # {key: (program, path, known, env, box, [mode names])}, in the order first met.
    programs: dict = {}
    for mode in modes:
        env = dict(os.environ, **dict(mode.env))
        box = sandbox.settings(mode)
        for phase in mode.phases:
            program = command_program(phase.command, env)
            if not program:
                continue
            path = resolve_program(program, env)
            known = registry.of_path(path)
            url = selftest.endpoint_url(env, known) if known else None
            key = (program, path, json.dumps(box, sort_keys=True), url)
            entry = programs.setdefault(key, (program, path, known, env, box, []))
            if mode.name not in entry[5]:
                entry[5].append(mode.name)
    # A program not on PATH is one finding naming every mode it stops, whatever their sandboxes.
    missing: dict[str, list[str]] = {}
    for program, path, known, env, box, names in programs.values():
        who = tuple(names)
        if not path or not program_found(program, env):
            stopped = missing.setdefault(program, [])
            stopped += [n for n in names if n not in stopped]
            continue
        if known is None:
            findings.append(Finding("ok", "agent", f"{program} (not an agent program)", who))
            continue
        findings += program_findings(layout, known, path, env, box, who)
    order = {mode.name: i for i, mode in enumerate(modes)}
    for program, names in missing.items():
        names.sort(key=order.__getitem__)
        note = (
            f"program {program!r} is not on PATH "
            "(scripts/setup-debian.sh installs Claude Code, Codex CLI and Gemini CLI)"
        )
        findings.append(Finding("error", "agent", f"program {program!r}", tuple(names), note=note))
    return findings


def program_findings(
    layout: Layout,
    known: Program,
    path: str,
    env: Mapping[str, str],
    box: sandbox.Box | None,
    who: tuple[str, ...],
) -> list[Finding]:
    """The findings of one agent program at `path`: credentials, key, endpoint, pin."""
    version = known.version(path, env, layout.agent_versions)
    problem = (
        known.credentials_problem(env)
        or reached_problem(layout, box, env, known)
        or key_problem(known, env)
    )
    if problem:
        return [Finding("error", "agent", f"{known.label} at {path}", who, note=problem)]
    found = [
        Finding(
            "ok",
            "agent",
            f"{known.label} {version or '?'}, credentials, "
            f"{selftest.endpoint_url(env, known)} reachable",
            who,
        )
    ]
    pinned = pinned_cli_version(known.version_setting)
    if pinned and not known.version_matches(version, pinned):
        found.append(
            Finding(
                "warn",
                "agent",
                f"{known.label} {version}",
                who,
                note=f"{known.label} at {path} is {version}, not the pinned {pinned} "
                "(scripts/setup-debian.sh): its runs are not those of the pinned CLI",
            )
        )
    return found


# SWE-bench Pro's harness runs in a checkout of its own repository, never here (swebench/pro.py).
PRO_FINDING = Finding(
    "warn",
    SWEBENCH_GRADING,
    "SWE-bench Pro harness",
    note="SWE-bench Pro is graded by swe_bench_pro_eval.py in a checkout of "
    "scaleapi/SWE-bench_Pro-os where Docker or Modal is: run the command the results print "
    "(report.md repeats it) there, and copy its output folder into results/<run>/evaluation/",
)


def swebench_finding(problem: str | None) -> Finding:
    """Whether this machine can grade SWE-bench predictions (the official harness: Docker and
    the swebench package); a warning when not: the agents run here all the same, and the
    results print the command to run where Docker is."""
    if problem is None:
        return Finding(
            "ok",
            SWEBENCH_GRADING,
            "Docker and the swebench package: "
            "`doit run <bench>:grade` runs the official harness here",
        )
    return Finding(
        "warn",
        SWEBENCH_GRADING,
        "official harness",
        note=f"this machine cannot grade SWE-bench predictions: {problem}; run the "
        f"command the results print (report.md repeats it) where Docker is, "
        f"and copy its report into results/<run>/evaluation/",
    )


def repository_findings(
    layout: Layout, tasks: Iterable[SweTask], problem: Callable[[str], str | None] = remote_problem
) -> list[Finding]:
    """Whether the repository of each SWE-bench task can be had: its bare clone in the cache
    (the repositories stage made it), else whether `git ls-remote` lists its URL (layout.repo_url:
    NGINX_EVAL_REPO_URL, else GitHub); an error naming the repository, its URL, git's message
    and the docs of its tasks' dataset (Verified's or Pro's) when neither. problem:
    gitcmd.remote_problem (tests inject another)."""
    by_repo: dict[str, list[str]] = {}
    docs: dict[str, str] = {}
    for t in tasks:
        by_repo.setdefault(t.repo, []).append(t.instance_id)
        docs.setdefault(t.repo, t.docs)
    pending = {r: repo_url(r) for r in by_repo if not (layout.bare_repo(r) / "HEAD").exists()}
    with ThreadPoolExecutor(max_workers=min(8, len(pending) or 1)) as pool:
        problems = dict(zip(pending, pool.map(problem, pending.values()), strict=True))
    findings = []
    for repo, ids in sorted(by_repo.items()):
        if repo not in pending:
            findings.append(Finding("ok", REPOSITORY, f"{repo} (cloned)", tuple(ids)))
        elif problems[repo] is None:
            findings.append(
                Finding("ok", REPOSITORY, f"{repo} (reachable at {pending[repo]})", tuple(ids))
            )
        else:
            findings.append(
                Finding(
                    "error",
                    REPOSITORY,
                    repo,
                    tuple(ids),
                    note=f"{pending[repo]}: {problems[repo]} (set NGINX_EVAL_REPO_URL to a "
                    f"mirror that has it; {docs[repo]})",
                )
            )
    return findings


def check(
    layout: Layout,
    tasks: Sequence[AnyTask],
    probe: SystemProbe | None = None,
    out: IO[str] | None = None,
    bench: str | None = None,
    modes: Iterable[Mode] = (),
    kind: str | None = None,
    grading: Callable[[], str | None] = grading_problem,
    remote: Callable[[str], str | None] = remote_problem,
) -> bool:
    """Diagnose, print the report; True when nothing required is missing. modes: the selected
    modes; their agent modes are checked too (agent_findings). kind: the benchmark's; a
    SWE-bench benchmark's tasks need nothing of nginx's (libraries, Perl modules, test files),
    and the doctor says whether its repositories can be cloned (repository_findings; `remote`:
    gitcmd.remote_problem) and whether its grading runs here (`grading`: grading_problem)."""
    toolchain = rootfs.current()
    findings = toolchain_findings(toolchain)
    findings += diagnose(
        [t for t in tasks if isinstance(t, Task) and t.kind != SWEBENCH],
        TestSource(layout),
        probe or SystemProbe(layout, toolchain),
        listed_packages(),
        listed_packages(TOOLCHAIN_PACKAGES_FILE) if toolchain.pinned else None,
    )
    if kind == SWEBENCH:
        swe = [t for t in tasks if isinstance(t, SweTask)]
        findings += repository_findings(layout, swe, remote)
        pro = any(t.pro for t in swe)
        findings.append(PRO_FINDING if pro else swebench_finding(grading()))
    agents = [m for m in modes if isinstance(m, AgentMode)]
    findings += agent_findings(layout, agents)
    isolated = tuple(m.name for m in agents if sandbox.settings(m))
    # No isolated agent can run without its sandbox: for them the sandbox's warning is an error.
    findings = [
        Finding("error", "agent", "the agent sandbox", isolated, note=f.note)
        if isolated and f.kind == "agent sandbox" and f.level == "warn"
        else f
        for f in findings
    ]
    text, ok = render(findings, len(tasks), bench)
    print(text, file=out or sys.stdout, flush=True)
    return ok


def doctor_action(
    layout: Layout,
    tasks: Sequence[AnyTask],
    bench: str | None = None,
    modes: Iterable[Mode] = (),
    kind: str | None = None,
) -> TaskFailed | None:
    if not check(layout, tasks, bench=bench, modes=modes, kind=kind):
        return TaskFailed("the machine is not ready for the selected tasks (see the report above)")
    return None


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    yield {
        "basename": "doctor",
        "doc": "check tools, libraries, Perl modules and daemons the selected tasks need",
        "actions": [
            (
                doctor_action,
                [
                    ctx.layout,
                    ctx.tasks,
                    ctx.benchmark.name,
                    ctx.group_mode_list(),
                    ctx.benchmark.kind,
                ],
            )
        ],
        "uptodate": [False],
        "verbosity": 2,
    }
