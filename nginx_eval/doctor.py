"""The doctor: is this machine ready to run the selected tasks? ``doit run doctor [instances=...]``
or ``python -m nginx_eval.doctor [run=NAME] [instances=ID,ID] [bench=NAME]``.

What it checks, and how a problem is reported:

    tools          cc, make, git, perl, prove, tar (required); ccache, bwrap (warnings only)
    libraries      headers/libraries of the task's configure flags: libc, PCRE (unless
                   --without-http_rewrite_module), zlib (gzip), OpenSSL (ssl modules), gd, libxslt,
                   GeoIP, libperl, ...; an nginx base commit without PCRE2 support needs old PCRE
    perl modules   from each test file's ``use X`` / ``require X`` lines (core modules and the
                   suite's own lib/ are skipped), from features its ``$t->has`` asks for
                   (socket_ssl → IO::Socket::SSL, cryptx → Crypt::Misc), and the task's perl_modules;
                   checked with one ``perl -e`` run
    daemons        ``$t->has_daemon('x')``: x on PATH (and uwsgi's python3 plugin)
    configure      every name in ``$t->has(...)`` must be enabled by the task's configure_flags,
                   judged as Test::Nginx judges it from ``nginx -V``: a missing flag makes the file
                   skip, so it is a task error (field configure_flags), with no package to install

Test files are read from the extracted tree (``tests:<commit>``) or the bare clone of the test
repository; with neither, the doctor says to run ``doit run repos`` and checks everything else.

Output: OK lines collapsed per kind; one ``MISSING <what> (needed by <who>) -> apt-get install <pkg>``
line per missing thing; ``TASK ERROR`` lines; warnings; and last one ``apt-get install ...`` line
with every missing package. A package the doctor asks for that scripts/debian-packages.txt does not
list is a warning, so the setup script stays the full set. Any MISSING or TASK ERROR fails (the doit
action returns False; ``python -m`` exits 1).
"""

import glob
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

from doit.exceptions import TaskFailed

from .layout import SOURCE_ROOT

PACKAGES_FILE = SOURCE_ROOT / "scripts" / "debian-packages.txt"

# -- test-file requirements ------------------------------------------------------------------------

# Perl modules shipped with perl itself (Module::CoreList), as far as nginx-tests style code goes.
CORE_MODULES = frozenset("""
    Benchmark Carp Config Cwd Data::Dumper Digest::MD5 Digest::SHA Encode Errno Exporter Fcntl
    File::Basename File::Compare File::Copy File::Find File::Glob File::Path File::Spec
    File::Spec::Functions File::Temp File::stat FindBin Getopt::Long Getopt::Std Hash::Util
    I18N::Langinfo IO IO::Compress::Deflate IO::Compress::Gzip IO::Compress::RawDeflate
    IO::Compress::Zip IO::Dir IO::File IO::Handle IO::Pipe IO::Poll IO::Seekable IO::Select
    IO::Socket IO::Socket::INET IO::Socket::IP IO::Socket::UNIX IO::Uncompress::Gunzip
    IO::Uncompress::Inflate IO::Uncompress::RawInflate IO::Uncompress::Unzip IO::Zlib IPC::Cmd
    IPC::Open2 IPC::Open3 JSON::PP List::Util MIME::Base64 MIME::QuotedPrint Math::BigInt
    Math::BigFloat Net::Domain Net::hostent POSIX Scalar::Util Socket Storable Symbol Sys::Hostname
    Term::ANSIColor Test::Builder Test::Harness Test::More Test::Simple Text::Abbrev Text::ParseWords
    Text::Wrap Tie::Hash Time::HiRes Time::Local Time::Piece Time::gmtime Time::localtime
    UNIVERSAL Unicode::Normalize Compress::Zlib Compress::Raw::Zlib Encode::Guess Fcntl
""".split())
SUITE_NAMESPACE = "Test::Nginx"          # lib/Test/Nginx.pm and lib/Test/Nginx/*.pm of the suite
PLATFORM_PREFIXES = ("Win32", "VMS::", "OS2::")

PERL_PACKAGES = {
    "FCGI": "libfcgi-perl",
    "SCGI": "libscgi-perl",
    "Cache::Memcached": "libcache-memcached-perl",
    "Cache::Memcached::Fast": "libcache-memcached-fast-perl",
    "IO::Socket::SSL": "libio-socket-ssl-perl",
    "Net::SSLeay": "libnet-ssleay-perl",
    "GD": "libgd-perl",
    "Protocol::WebSocket": "libprotocol-websocket-perl",
    "Authen::SASL": "libauthen-sasl-perl",
    "Net::DNS": "libnet-dns-perl",
    "Crypt::Misc": "libcryptx-perl",
}
# Module families installed by one package.
PERL_PREFIX_PACKAGES = {
    "Protocol::WebSocket::": "libprotocol-websocket-perl",
    "Crypt::AuthEnc::": "libcryptx-perl", "Crypt::PK::": "libcryptx-perl",
    "Crypt::Mode::": "libcryptx-perl", "Crypt::Stream::": "libcryptx-perl",
    "Crypt::Mac::": "libcryptx-perl", "Crypt::Digest": "libcryptx-perl",
    "Crypt::KeyDerivation": "libcryptx-perl", "Crypt::PRNG": "libcryptx-perl",
    "Authen::SASL::": "libauthen-sasl-perl", "Net::DNS::": "libnet-dns-perl",
    "GD::": "libgd-perl",
}

# Test::Nginx's has() names that are not nginx modules but Perl modules or the platform.
FEATURE_PERL_MODULES = {"cryptx": ("Crypt::Misc",), "socket_ssl": ("IO::Socket::SSL",)}
PLATFORM_FEATURES = frozenset({"unix", "udp", "symlink"})

DAEMON_PACKAGES = {
    "openssl": "openssl",
    "memcached": "memcached",
    "uwsgi": "uwsgi",
    "ffmpeg": "ffmpeg",
    "ffprobe": "ffmpeg",
    "softhsm2-util": "softhsm2",
    "pkcs11-tool": "opensc",
    "spawn-fcgi": "spawn-fcgi",
}
# Files a daemon needs besides its binary: uwsgi tests run a python app (--plugin python3).
DAEMON_FILES = {"uwsgi": (("/usr/lib/uwsgi/plugins/python3*_plugin.so",), "uwsgi-plugin-python3",
                          "uwsgi python3 plugin")}

# has() names of modules nginx builds unless told not to, with the flag that removes them.
DEFAULT_MODULES = {name: f"--without-http_{name}_module" for name in (
    "charset gzip ssi mirror userid access auth_basic autoindex geo map referer rewrite proxy "
    "fastcgi uwsgi scgi grpc memcached limit_conn limit_req empty_gif browser upstream_hash "
    "upstream_ip_hash upstream_least_conn upstream_random upstream_keepalive upstream_zone "
    "split_clients").split()}
DEFAULT_MODULES.update({
    "http": "--without-http", "cache": "--without-http-cache", "pcre": "--without-pcre",
    "pop3": "--without-mail_pop3_module", "imap": "--without-mail_imap_module",
    "smtp": "--without-mail_smtp_module",
})
DEFAULT_MODULES.update({f"stream_{name}": f"--without-stream_{name}_module" for name in (
    "access geo limit_conn map pass return set split_clients upstream_hash upstream_least_conn "
    "upstream_random upstream_zone").split()})
# Modules that need a flag: has() name -> the flag (Test::Nginx looks for it in `nginx -V`).
MODULE_FLAGS = {
    "mail": "--with-mail", "stream": "--with-stream", "perl": "--with-http_perl_module",
    "ssl": "--with-http_ssl_module", "http_ssl": "--with-http_ssl_module",
    "geoip": "--with-http_geoip_module", "--with-debug": "--with-debug",
    "threads": "--with-threads", "compat": "--with-compat", "file_aio": "--with-file-aio",
}
MODULE_FLAGS.update({name: f"--with-http_{name}_module" for name in (
    "v2 v3 flv auth_request realip sub gunzip gzip_static image_filter xslt dav addition slice "
    "secure_link stub_status random_index mp4 degradation").split()})
MODULE_FLAGS.update({f"http_{name}": f"--with-http_{name}_module" for name in (
    "v2 v3 geoip realip sub gunzip image_filter xslt dav addition slice secure_link stub_status "
    "random_index mp4 flv degradation auth_request perl").split()})
MODULE_FLAGS.update({name: f"--with-{name}_module" for name in (
    "mail_ssl stream_ssl stream_ssl_preread stream_realip stream_geoip").split()})
SSL_FLAGS = ("--with-http_ssl_module", "--with-stream_ssl_module", "--with-mail_ssl_module",
             "--with-http_v3_module")


@dataclass(frozen=True)
class Library:
    what: str           # shown to the user
    paths: tuple        # glob patterns; any one present is enough
    package: str


LIBRARIES = {
    "libc": Library("C library headers (stdio.h)", ("/usr/include/stdio.h",), "libc6-dev"),
    "pcre": Library("PCRE headers (pcre2.h or pcre.h)", ("/usr/include/pcre2.h",
                                                        "/usr/include/pcre.h"), "libpcre2-dev"),
    "pcre1": Library("old PCRE headers (pcre.h; this nginx predates PCRE2)",
                     ("/usr/include/pcre.h",), "libpcre3-dev"),
    "zlib": Library("zlib headers (zlib.h)", ("/usr/include/zlib.h",), "zlib1g-dev"),
    "openssl": Library("OpenSSL headers (openssl/ssl.h)", ("/usr/include/openssl/ssl.h",),
                       "libssl-dev"),
    "gd": Library("GD headers (gd.h)", ("/usr/include/gd.h",), "libgd-dev"),
    "xslt": Library("libxslt headers (libxslt/xslt.h)", ("/usr/include/libxslt/xslt.h",),
                    "libxslt1-dev"),
    # libxml2-dev comes with libxslt1-dev, which the setup list names
    "xml2": Library("libxml2 headers (libxml/parser.h)",
                    ("/usr/include/libxml2/libxml/parser.h",), "libxslt1-dev"),
    "geoip": Library("GeoIP headers (GeoIP.h)", ("/usr/include/GeoIP.h",), "libgeoip-dev"),
    "perl": Library("libperl for embedding (libperl.so)",
                    ("/usr/lib/*/libperl.so", "/usr/lib/libperl.so"), "libperl-dev"),
    "perftools": Library("gperftools headers (gperftools/profiler.h)",
                         ("/usr/include/gperftools/profiler.h",), "libgoogle-perftools-dev"),
    "atomic_ops": Library("libatomic_ops headers (atomic_ops.h)", ("/usr/include/atomic_ops.h",),
                          "libatomic-ops-dev"),
}

# (tool, package, required)
TOOLS = (("cc", "gcc", True), ("make", "make", True), ("git", "git", True), ("perl", "perl", True),
         ("prove", "perl", True), ("tar", "tar", True), ("ccache", "ccache", False),
         ("bwrap", "bubblewrap", False))
TOOL_NOTES = {"ccache": "builds are not shared between trees", "bwrap": "no agent sandbox"}

_USE = re.compile(r"(?<![\w$>:])use\s+([A-Z]\w*(?:::\w+)*)(?=\s*(?:;|qw\b|['\"(\d]|$))", re.M)
_REQUIRE = re.compile(r"(?<![\w$>:])require\s+([A-Z]\w*(?:::\w+)*)(?=\s*(?:;|\}|if\b|unless\b|$|['\"]))",
                      re.M)
_DAEMON = re.compile(r"has_daemon\s*\(\s*['\"]([^'\"]+)['\"]\s*\)")
_HAS = re.compile(r"->\s*has\s*\(((?:qw\s*\([^)]*\)|[^)])*)\)", re.S)
_QW = re.compile(r"qw\s*(?:/([^/]*)/|\(([^)]*)\)|\{([^}]*)\}|\[([^\]]*)\])", re.S)
_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")


def strip_perl(text):
    """The code of a Perl file: no POD, no __END__/__DATA__ section, no whole-line comments."""
    out, pod = [], False
    for line in text.splitlines():
        if re.match(r"__(END|DATA)__\s*$", line):
            break
        if re.match(r"=[a-zA-Z]", line):
            pod = not line.startswith("=cut")
            continue
        if pod or line.lstrip().startswith("#"):
            continue
        out.append(line)
    return "\n".join(out)


def is_ignored_module(name):
    return (name in CORE_MODULES or name == SUITE_NAMESPACE
            or name.startswith(SUITE_NAMESPACE + "::") or name.startswith(PLATFORM_PREFIXES))


def has_names(args):
    """The feature names in the argument list of one ``->has(...)`` call."""
    names = []
    for m in _QW.finditer(args):
        names += next(g for g in m.groups() if g is not None).split()
    rest = _QW.sub(" ", args)
    names += [a or b for a, b in _QUOTED.findall(rest)]
    return [n for n in names if n]


def requirements_of_test(text):
    """{"perl_modules", "daemons", "nginx_modules"} (sets) a test file needs to run, not skip.

    nginx_modules are Test::Nginx has() names (http_v2, stream_ssl, sni, openssl:1.0.2, ...);
    has() features that are Perl modules go to perl_modules, platform ones (unix, udp) are dropped.
    """
    code = strip_perl(text)
    modules = {m for m in _USE.findall(code) + _REQUIRE.findall(code) if not is_ignored_module(m)}
    daemons = set(_DAEMON.findall(code))
    nginx = set()
    for m in _HAS.finditer(code):
        for name in has_names(m.group(1)):
            if name in PLATFORM_FEATURES:
                continue
            feature = "socket_ssl" if name.startswith("socket_ssl") else name
            if feature in FEATURE_PERL_MODULES:
                modules.update(FEATURE_PERL_MODULES[feature])
            else:
                nginx.add(name)
    return {"perl_modules": modules, "daemons": daemons, "nginx_modules": nginx}


# -- mappings -------------------------------------------------------------------------------------

def perl_package(module):
    """(Debian package, known) for a Perl module; unknown ones get the Debian naming convention."""
    if module in PERL_PACKAGES:
        return PERL_PACKAGES[module], True
    for prefix, package in PERL_PREFIX_PACKAGES.items():
        if module.startswith(prefix):
            return package, True
    if module in CORE_MODULES:
        return "perl", True
    return "lib" + module.lower().replace("::", "-") + "-perl", False


def daemon_package(daemon):
    return DAEMON_PACKAGES.get(daemon, daemon)


def _normal_flags(flags):
    return [f[:-len("=dynamic")] if f.endswith("=dynamic") else f for f in flags]


def module_enabled(name, flags):
    """Does Test::Nginx's has(name) pass for an nginx configured with `flags`? (Its check reads
    `nginx -V`: configure arguments, "built with OpenSSL ...", "TLS SNI support enabled".)"""
    flags = _normal_flags(flags)
    ssl = any(f in SSL_FLAGS for f in flags) and not any(f.startswith("--without-openssl") for f in flags)
    if name == "sni" or re.match(r"(openssl|OpenSSL):", name):
        return ssl
    if name in DEFAULT_MODULES:
        return DEFAULT_MODULES[name] not in flags
    if name in MODULE_FLAGS:
        return MODULE_FLAGS[name] in flags
    version = "configure arguments: " + " ".join(flags) + ("\nbuilt with OpenSSL" if ssl else "")
    try:
        return re.search(name, version) is not None
    except re.error:
        return name in version


def flag_for_module(name):
    """The configure flag that enables has(name), or None if it is enabled by default / unknown."""
    if name == "sni" or re.match(r"(openssl|OpenSSL):", name):
        return "--with-http_ssl_module"
    return MODULE_FLAGS.get(name)


def libraries_for_flags(flags, pcre2_capable=None):
    """Names in LIBRARIES that building nginx with `flags` needs. pcre2_capable: does the base
    commit know PCRE2 (None: unknown, either library will do)."""
    flags = _normal_flags(flags)
    has = lambda *names: any(f in flags for f in names)
    starts = lambda prefix: any(f.startswith(prefix) for f in flags)
    need = ["libc"]
    if not has("--without-http", "--without-http_rewrite_module", "--without-pcre") \
            and not starts("--with-pcre="):
        need.append("pcre1" if pcre2_capable is False else "pcre")
    gzip = not has("--without-http", "--without-http_gzip_module")
    if (gzip or has("--with-http_gunzip_module")) and not starts("--with-zlib="):
        need.append("zlib")
    if has(*SSL_FLAGS) and not starts("--with-openssl="):
        need.append("openssl")
    if has("--with-http_image_filter_module"):
        need.append("gd")
    if has("--with-http_xslt_module"):
        need += ["xslt", "xml2"]
    if has("--with-http_geoip_module", "--with-stream_geoip_module"):
        need.append("geoip")
    if has("--with-http_perl_module"):
        need.append("perl")
    if has("--with-google_perftools_module"):
        need.append("perftools")
    if has("--with-libatomic"):
        need.append("atomic_ops")
    return need


# -- probing the machine ------------------------------------------------------------------------

class SystemProbe:
    """What is installed, asked of this machine (tests inject a fake with the same methods)."""

    def __init__(self):
        self._perl = {}

    def which(self, name):
        return shutil.which(name) is not None

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
        bare = self.layout.bare_repo(repo)
        out = subprocess.run(["git", f"--git-dir={bare}", "show", f"{commit}:{path}"],
                             capture_output=True)
        return out.stdout.decode(errors="replace") if out.returncode == 0 else None

    def pcre2_capable(self, repo, commit):
        """Does nginx at `commit` know PCRE2 (1.21.5+)? None when the clone is not there."""
        bare = self.layout.bare_repo(repo)
        if not (bare / "HEAD").exists():
            return None
        out = subprocess.run(["git", f"--git-dir={bare}", "show", f"{commit}:auto/lib/pcre/conf"],
                             capture_output=True)
        if out.returncode != 0:
            return None
        return b"pcre2" in out.stdout


# -- diagnosis -----------------------------------------------------------------------------------

@dataclass
class Finding:
    level: str          # "ok", "warn", "missing", "error"
    kind: str           # "tool", "library", "perl module", "daemon", "configure", "tests"
    what: str
    who: tuple = ()     # task ids / "task (file)"
    package: str = ""
    note: str = ""


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
    exists(glob), perl_modules(names) -> the loadable ones. listed_packages: the set from
    scripts/debian-packages.txt (None: do not compare)."""
    findings, needs = [], _Needs()
    unread = {}
    for task in tasks:
        iid = task.instance_id
        pcre2 = source.pcre2_capable(task.repo, task.base_commit)
        for lib in libraries_for_flags(task.configure_flags, pcre2):
            needs.add("library", lib, iid, LIBRARIES[lib].package, LIBRARIES[lib].what)
        for mod in task.perl_modules:
            needs.add("perl module", mod, f"{iid} (perl_modules)", perl_package(mod)[0])
        if not source.repo_available(task.test_repo, task.test_commit):
            unread.setdefault(task.test_repo, []).append(iid)
            continue
        for path in task.test_files:
            text = source.read(task.test_repo, task.test_commit, path)
            if text is None:
                findings.append(Finding("error", "tests", path, (iid,),
                                        note=f"does not exist at test_commit {task.test_commit[:12]}"
                                             " (field test_files)"))
                continue
            req = requirements_of_test(text)
            who = f"{iid} ({path})"
            for mod in sorted(req["perl_modules"]):
                needs.add("perl module", mod, who, perl_package(mod)[0])
            for daemon in sorted(req["daemons"]):
                needs.add("daemon", daemon, who, daemon_package(daemon))
            for name in sorted(req["nginx_modules"]):
                if module_enabled(name, task.configure_flags):
                    needs.add("configure", name, iid)
                    continue
                flag = flag_for_module(name)
                hint = (f"add {flag}" if flag else f"remove {DEFAULT_MODULES[name]}"
                        if name in DEFAULT_MODULES else "no known configure flag provides it")
                findings.append(Finding(
                    "error", "configure", name, (iid,),
                    note=f"task {iid}: field configure_flags: {path} asks for $t->has('{name}'): "
                         f"{hint}; without it the file skips"))
    for repo, iids in sorted(unread.items()):
        findings.append(Finding("warn", "tests", repo, tuple(iids),
                                note=f"{repo} is not cloned: test files not checked; "
                                     "run `doit run repos` (with the same run=/instances=) first"))
    for name, package, required in TOOLS:
        if probe.which(name):
            findings.append(Finding("ok", "tool", name, package=package))
        else:
            findings.append(Finding("missing" if required else "warn", "tool", name,
                                    package=package, note=TOOL_NOTES.get(name, "")))
    entries = needs.items
    perl_wanted = [key for (kind, key) in entries if kind == "perl module"]
    have_perl = probe.perl_modules(perl_wanted) if perl_wanted and probe.which("perl") else set()
    for (kind, key), e in sorted(entries.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        who = tuple(e["who"])
        if kind == "configure":
            findings.append(Finding("ok", kind, key, who))
            continue
        if kind == "library":
            ok = any(probe.exists(p) for p in LIBRARIES[key].paths)
        elif kind == "perl module":
            ok = key in have_perl
        else:
            ok = probe.which(key)
        findings.append(Finding("ok" if ok else "missing", kind, e["what"], who, e["package"],
                                note="" if kind != "perl module" or perl_package(key)[1]
                                else "package name guessed"))
        if kind == "daemon" and ok and key in DAEMON_FILES:
            patterns, package, what = DAEMON_FILES[key]
            if not any(probe.exists(p) for p in patterns):
                findings.append(Finding("missing", kind, what, who, package))
    if listed_packages is not None:
        unlisted = {}
        for f in findings:
            if (f.package and f.package not in listed_packages and f.level in ("ok", "missing")
                    and not f.note.endswith("guessed")):
                unlisted.setdefault(f.package, []).extend(f.who or (f.what,))
        for package, who in sorted(unlisted.items()):
            findings.append(Finding("warn", "setup", package, tuple(dict.fromkeys(who)),
                                    note="not in scripts/debian-packages.txt: add it so "
                                         "setup-debian.sh installs it"))
    return findings


def listed_packages(path=PACKAGES_FILE):
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    return {line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()}


def _who(who, limit=4):
    who = list(who)
    text = ", ".join(who[:limit])
    return text + (f" and {len(who) - limit} more" if len(who) > limit else "")


def render(findings, ntasks=None):
    """(report text, ok): OK lines collapsed per kind, one line per problem, the install line."""
    lines = []
    if ntasks is not None:
        lines.append(f"doctor: checking {ntasks} task(s)")
    ok_by_kind = {}
    for f in findings:
        if f.level == "ok":
            ok_by_kind.setdefault(f.kind, []).append(f.what)
    for kind in ("tool", "library", "perl module", "daemon", "configure"):
        if kind in ok_by_kind:
            names = list(dict.fromkeys(ok_by_kind[kind]))
            label = {"configure": "has() modules enabled by configure_flags",
                     "library": "libraries"}.get(kind, kind + "s")
            lines.append(f"OK      {label}: {', '.join(names)}")
    packages = []
    for f in findings:
        needed = f" (needed by {_who(f.who)})" if f.who else ""
        if f.level == "missing":
            note = f"; {f.note}" if f.note else ""
            lines.append(f"MISSING {f.kind} {f.what}{needed} -> apt-get install {f.package}{note}")
            packages.append(f.package)
        elif f.level == "error":
            lines.append(f"TASK ERROR {f.note}" if f.kind == "configure" else
                         f"TASK ERROR {_who(f.who)}: {f.what} {f.note}")
        elif f.level == "warn":
            if f.kind == "tool":
                lines.append(f"WARN    tool {f.what} not found ({f.note}) -> apt-get install "
                             f"{f.package}")
            elif f.kind == "setup":
                lines.append(f"WARN    package {f.what} (needed by {_who(f.who)}) is {f.note}")
            else:
                lines.append(f"WARN    {f.note} (tasks {_who(f.who)})")
    problems = [f for f in findings if f.level in ("missing", "error")]
    packages = list(dict.fromkeys(packages))
    if packages:
        lines.append("To install everything missing: apt-get install " + " ".join(packages))
    lines.append(f"doctor: {len(problems)} problem(s)" if problems else "doctor: all good")
    return "\n".join(lines), not problems


def check(layout, tasks, probe=None, out=None):
    """Diagnose, print the report; True when nothing required is missing."""
    findings = diagnose(tasks, TestSource(layout), probe or SystemProbe(), listed_packages())
    text, ok = render(findings, len(tasks))
    print(text, file=out or sys.stdout, flush=True)
    return ok


def doctor_action(layout, tasks):
    if not check(layout, tasks):
        return TaskFailed("the machine is not ready for the selected tasks (see the report above)")


def gen_tasks(ctx):
    yield {
        "basename": "doctor",
        "doc": "check tools, libraries, Perl modules and daemons the selected tasks need",
        "actions": [(doctor_action, [ctx.layout, ctx.tasks])],
        "uptodate": [False],
        "verbosity": 2,
    }


def main(argv=None):
    """``python -m nginx_eval.doctor [run=NAME] [instances=ID,..] [bench=NAME] [limit=N]``."""
    from doit import doit_cmd

    from .cli import fail
    from .errors import UserError
    from .pipeline import load_context
    args = sys.argv[1:] if argv is None else argv
    doit_cmd.reset_vars()
    for arg in args:
        name, eq, value = arg.partition("=")
        if not eq:
            fail(f"unexpected argument {arg!r}: use NAME=VALUE (run=, instances=, bench=, limit=)")
        doit_cmd.set_var(name, value)
    try:
        ctx = load_context(argv=[])
    except UserError as e:
        fail(e)
    return 0 if check(ctx.layout, ctx.tasks) else 1


if __name__ == "__main__":
    sys.exit(main())
