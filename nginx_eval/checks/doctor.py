"""The doctor: is this machine ready to run the selected tasks? ``doit run doctor [instances=...]``
(any selection of the pipeline: run=, bench=, limit=).

What it checks, and how a problem is reported:

    tools          cc, make, git, perl, prove, tar (required); ccache, and bwrap, socat, rg for
                   the agent sandbox (warnings only)
    agent sandbox  whether srt starts an isolated command here (agent/sandbox.py): a warning when
                   not, since gold and none need none, but no agent mode can run
    isolation      whether tests get a network namespace of their own (prove/network.py); a
                   warning when not: they share the machine's ports, fixed-port test trees
                   queue for one machine-wide slot
    libraries      headers/libraries of the task's configure flags: libc, PCRE (unless
                   --without-http_rewrite_module), zlib (gzip), OpenSSL (ssl modules), gd, libxslt,
                   GeoIP, libperl, ...; an nginx base commit without PCRE2 support needs old PCRE
    perl modules   from each test file's ``use X`` / ``require X`` lines (core modules and the
                   suite's own lib/ are skipped), its calls of known non-core modules' functions
                   (``Net::SSLeay::renegotiate(...)``), from features its ``$t->has`` asks for
                   (socket_ssl → IO::Socket::SSL, cryptx → Crypt::Misc), and the task's perl_modules;
                   checked with one ``perl -e`` run
    daemons        ``$t->has_daemon('x')``: x on PATH (and uwsgi's python3 plugin)
    configure      every name in ``$t->has(...)`` must be enabled by the task's configure_flags,
                   judged as Test::Nginx judges it from ``nginx -V``: a missing flag makes the file
                   skip, so it is a task error (field configure_flags), with no package to install

Test files are read from the extracted tree (``tests:<commit>``) or the bare clone of the test
repository; with neither, the doctor checks everything else and its verdict is "not checked"
(never "all good"), naming what to run first (``doit run repos:<owner>+<name>`` or
``doit run <bench>:gold``). Without the nginx clone, whether a base predates PCRE2 (and needs
old PCRE) is not checked either.

Output (doctor_report.py): OK lines collapsed per kind; one ``MISSING <what> (needed by <who>) ->
apt-get install <pkg>`` line per missing thing; ``TASK ERROR`` lines; warnings; one ``apt-get
install ...`` line with every missing package; and last the verdict: ``doctor: all good``,
``doctor: N problem(s)``, and ``not checked: ...`` when a clone was missing. A package the doctor
asks for that scripts/debian-packages.txt does not list is a warning, so the setup script stays
the full set. Any MISSING or TASK ERROR fails (the doit action returns False, so doit exits
non-zero).

What a test file needs and which package provides it (the tables, the reading of ``use``,
``require``, ``has`` and ``has_daemon``) is testsuite.py, shared with scripts/mine_tasks.py; this
module asks the machine (SystemProbe, TestSource) and compares; doctor_report.py renders.
"""

import glob
import shutil
import subprocess
import sys

from doit.exceptions import TaskFailed

from ..agent import sandbox
from ..prove import network as private_network
from .doctor_report import NOT_CHECKED, Finding, render
from ..core.gitcmd import file_at
from ..core.layout import SOURCE_ROOT
from ..prove.testsuite import (DAEMON_FILES, DEFAULT_MODULES, LIBRARIES, daemon_package,
                               flag_for_module, libraries_for_flags, module_enabled, perl_package,
                               requirements_of_test)

PACKAGES_FILE = SOURCE_ROOT / "scripts" / "debian-packages.txt"

# (tool, package, required)
TOOLS = (("cc", "gcc", True), ("make", "make", True), ("git", "git", True), ("perl", "perl", True),
         ("prove", "perl", True), ("tar", "tar", True), ("ccache", "ccache", False),
         ("bwrap", "bubblewrap", False), ("socat", "socat", False), ("rg", "ripgrep", False))
TOOL_NOTES = {"ccache": "builds are not shared between trees", "bwrap": "no agent sandbox",
              "socat": "no agent sandbox", "rg": "no agent sandbox"}

# -- probing the machine ------------------------------------------------------------------------

class SystemProbe:
    """What is installed, asked of this machine (tests inject a fake with the same methods)."""

    def __init__(self):
        self._perl = {}

    def which(self, name):
        return shutil.which(name) is not None

    def private_network_problem(self):
        return private_network.problem()

    def sandbox_problem(self):
        return sandbox.sandbox_problem()

    def exists(self, pattern):
        return bool(glob.glob(pattern))

    def perl_modules(self, modules):
        """The subset of `modules` that perl can load; one perl process for all unknown ones."""
        todo = sorted(m for m in set(modules) if m not in self._perl)
        if todo:
            script = ('for my $m (@ARGV) { my $ok = eval "require $m; 1"; '
                      'print(($ok ? "ok " : "no "), "$m\\n") }')
            try:
                out = subprocess.run(["perl", "-e", script, *todo], capture_output=True,
                                     text=True, timeout=120, stdin=subprocess.DEVNULL).stdout
            except (OSError, subprocess.TimeoutExpired):
                out = ""
            for line in out.splitlines():
                status, _, mod = line.partition(" ")
                self._perl[mod] = status == "ok"
            for m in todo:
                self._perl.setdefault(m, False)
        return {m for m in modules if self._perl[m]}


class TestSource:
    """Reads a test file at a commit: the extracted tree, else the bare clone, else None."""

    def __init__(self, layout):
        self.layout = layout
        self._cache = {}

    def repo_available(self, repo, commit):
        return self.layout.tests_tree(commit).is_dir() or (self.layout.bare_repo(repo) / "HEAD").exists()

    def read(self, repo, commit, path):
        key = (commit, path)
        if key not in self._cache:
            self._cache[key] = self._read(repo, commit, path)
        return self._cache[key]

    def _read(self, repo, commit, path):
        tree = self.layout.tests_tree(commit)
        if self.layout.tests_stamp(commit).exists() and tree.is_dir():
            f = tree / path
            return f.read_text(errors="replace") if f.is_file() else None
        data = file_at(self.layout.bare_repo(repo), commit, path)
        return None if data is None else data.decode(errors="replace")

    def pcre2_capable(self, repo, commit):
        """Does nginx at `commit` know PCRE2 (1.21.5+)? None when the clone is not there."""
        bare = self.layout.bare_repo(repo)
        if not (bare / "HEAD").exists():
            return None
        conf = file_at(bare, commit, "auto/lib/pcre/conf")
        return None if conf is None else b"pcre2" in conf


# -- diagnosis -----------------------------------------------------------------------------------

class _Needs:
    """kind -> key -> (who set, package, description) collected over the tasks."""

    def __init__(self):
        self.items = {}

    def add(self, kind, key, who, package="", what=None):
        entry = self.items.setdefault((kind, key), {"who": [], "package": package,
                                                    "what": what or key})
        if who and who not in entry["who"]:
            entry["who"].append(who)


def diagnose(tasks, source, probe, listed_packages=None):
    """The findings for `tasks` (a list of benchmark Task). `source` has read(repo, commit, path)
    and repo_available(repo, commit), pcre2_capable(repo, commit); `probe` has which(name),
    exists(glob), perl_modules(names) -> the loadable ones, private_network_problem() -> why
    tests cannot have a network of their own, or None. listed_packages: the set from
    scripts/debian-packages.txt (None: do not compare)."""
    findings, needs = [], _Needs()
    unread, pcre_unknown = {}, {}
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
    findings += _probed_needs(needs, probe)
    if listed_packages is not None:
        findings += _unlisted(findings, listed_packages)
    return findings


def _task_needs(task, source, needs):
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


def _test_file_needs(task, path, source, needs):
    """Add what the test file at `path` needs; [findings] for a missing file or a has() name the
    task's configure flags do not enable."""
    iid = task.instance_id
    text = source.read(task.test_repo, task.test_commit, path)
    if text is None:
        return [Finding("error", "tests", path, (iid,),
                        note=f"does not exist at test_commit {task.test_commit[:12]}"
                             " (field test_files)")]
    req = requirements_of_test(text)
    who = f"{iid} ({path})"
    for mod in sorted(req["perl_modules"]):
        needs.add("perl module", mod, who, perl_package(mod)[0])
    for daemon in sorted(req["daemons"]):
        needs.add("daemon", daemon, who, daemon_package(daemon))
    findings = []
    for name in sorted(req["nginx_modules"]):
        if module_enabled(name, task.configure_flags):
            needs.add("configure", name, iid)
        else:
            findings.append(_configure_error(iid, path, name))
    return findings


def _configure_error(iid, path, name):
    flag = flag_for_module(name)
    hint = (f"add {flag}" if flag else f"remove {DEFAULT_MODULES[name]}"
            if name in DEFAULT_MODULES else "no known configure flag provides it")
    return Finding("error", "configure", name, (iid,),
                   note=f"task {iid}: field configure_flags: {path} asks for $t->has('{name}'): "
                        f"{hint}; without it the file skips")


def _not_checked(unread, pcre_unknown):
    findings = []
    for repo, iids in sorted(unread.items()):
        findings.append(Finding("warn", NOT_CHECKED, repo, tuple(iids),
                                note=f"{repo} is not cloned: test files not checked; "
                                     "run `doit run repos` (with the same run=/instances=) first"))
    for repo, iids in sorted(pcre_unknown.items()):
        findings.append(Finding("warn", NOT_CHECKED, repo, tuple(iids),
                                note=f"{repo} is not cloned: whether a base predates PCRE2 (and "
                                     "needs old PCRE, pcre.h) not checked"))
    return findings


def _tool_findings(probe):
    findings = []
    for name, package, required in TOOLS:
        if probe.which(name):
            findings.append(Finding("ok", "tool", name, package=package))
        else:
            findings.append(Finding("missing" if required else "warn", "tool", name,
                                    package=package, note=TOOL_NOTES.get(name, "")))
    return findings


def _isolation_finding(probe):
    problem = probe.private_network_problem()
    if problem is None:
        return Finding("ok", "isolation", "a private network per test file")
    return Finding("warn", "isolation", "private network",
                   note=f"tests share the machine's network ({problem}); test trees with "
                        "fixed ports run one file at a time")


def _sandbox_finding(probe):
    problem = probe.sandbox_problem()
    if problem is None:
        return Finding("ok", "agent sandbox", "srt starts an isolated command")
    return Finding("warn", "agent sandbox", "srt", note=f"no agent mode can run: {problem}")


def _probed_needs(needs, probe):
    """A finding per collected need, asked of `probe` (all Perl modules in one call)."""
    entries = needs.items
    perl_wanted = [key for (kind, key) in entries if kind == "perl module"]
    have_perl = probe.perl_modules(perl_wanted) if perl_wanted and probe.which("perl") else set()
    findings = []
    for (kind, key), e in sorted(entries.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        findings += _need_findings(kind, key, e, probe, have_perl)
    return findings


def _need_findings(kind, key, e, probe, have_perl):
    who = tuple(e["who"])
    if kind == "configure":
        return [Finding("ok", kind, key, who)]
    if kind == "library":
        ok = any(probe.exists(p) for p in LIBRARIES[key].paths)
    elif kind == "perl module":
        ok = key in have_perl
    else:
        ok = probe.which(key)
    findings = [Finding("ok" if ok else "missing", kind, e["what"], who, e["package"],
                        note="" if kind != "perl module" or perl_package(key)[1]
                        else "package name guessed")]
    if kind == "daemon" and ok and key in DAEMON_FILES:
        patterns, package, what = DAEMON_FILES[key]
        if not any(probe.exists(p) for p in patterns):
            findings.append(Finding("missing", kind, what, who, package))
    return findings


def _unlisted(findings, listed_packages):
    """Warnings for the packages the findings name that scripts/debian-packages.txt does not."""
    unlisted = {}
    for f in findings:
        if (f.package and f.package not in listed_packages and f.level in ("ok", "missing")
                and not f.note.endswith("guessed")):
            unlisted.setdefault(f.package, []).extend(f.who or (f.what,))
    return [Finding("warn", "setup", package, tuple(dict.fromkeys(who)),
                    note="not in scripts/debian-packages.txt: add it so setup-debian.sh "
                         "installs it")
            for package, who in sorted(unlisted.items())]


def listed_packages(path=PACKAGES_FILE):
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    return {line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()}


def check(layout, tasks, probe=None, out=None, bench=None):
    """Diagnose, print the report; True when nothing required is missing."""
    findings = diagnose(tasks, TestSource(layout), probe or SystemProbe(), listed_packages())
    text, ok = render(findings, len(tasks), bench)
    print(text, file=out or sys.stdout, flush=True)
    return ok


def doctor_action(layout, tasks, bench=None):
    if not check(layout, tasks, bench=bench):
        return TaskFailed("the machine is not ready for the selected tasks (see the report above)")


def gen_tasks(ctx):
    yield {
        "basename": "doctor",
        "doc": "check tools, libraries, Perl modules and daemons the selected tasks need",
        "actions": [(doctor_action, [ctx.layout, ctx.tasks, ctx.benchmark.name])],
        "uptodate": [False],
        "verbosity": 2,
    }

