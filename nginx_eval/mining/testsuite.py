"""What an nginx-tests file needs, and which Debian package provides it: knowledge, no probing.

The doctor (doctor.py: is this machine ready for the selected tasks?) and the task miner
(scripts/mine_tasks.py: which configure flags and Perl modules does a proposed task need?) read
test files through this module and its tables, so they agree::

    requirements_of_test(text)    the Perl modules, daemons and Test::Nginx has() names of a file
    requirements_in_order(text)   the same as lists, in the order the file names them
    certificates_made(text)       the RSA key sizes and CA digests of the certificates it makes
    module_enabled(name, flags)   does has(name) pass for an nginx configured with `flags`?
    flag_for_module(name)         the configure flag that enables has(name), if any
    configure_flags_for(names)    the configure flags that build every has(name) of `names`
    perl_package(module)          the Debian package of a Perl module (and whether it is known)
    daemon_package(daemon)        the Debian package of a has_daemon() program
    libraries_for_flags(flags)    the LIBRARIES (headers, libraries) building nginx needs

Every function is pure: it reads its arguments and the tables, never the machine.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass

# -- Perl modules ----------------------------------------------------------------------------------

# Perl modules shipped with perl itself (Module::CoreList), as far as nginx-tests style code goes,
# and the pragmas.
CORE_MODULES = frozenset(
    """
    Benchmark Carp Config Cwd Data::Dumper Digest::MD5 Digest::SHA Encode Errno Exporter Fcntl
    File::Basename File::Compare File::Copy File::Find File::Glob File::Path File::Spec
    File::Spec::Functions File::Temp File::stat FindBin Getopt::Long Getopt::Std Hash::Util
    I18N::Langinfo IO IO::Compress::Deflate IO::Compress::Gzip IO::Compress::RawDeflate
    IO::Compress::Zip IO::Dir IO::File IO::Handle IO::Pipe IO::Poll IO::Seekable IO::Select
    IO::Socket IO::Socket::INET IO::Socket::IP IO::Socket::UNIX IO::Uncompress::Gunzip
    IO::Uncompress::Inflate IO::Uncompress::RawInflate IO::Uncompress::Unzip IO::Zlib IPC::Cmd
    IPC::Open2 IPC::Open3 JSON::PP List::Util MIME::Base64 MIME::QuotedPrint Math::BigInt
    Math::BigFloat Net::Domain Net::hostent POSIX Scalar::Util Socket Storable Symbol Sys::Hostname
    Term::ANSIColor Test::Builder Test::Harness Test::More Test::Simple Text::Abbrev
    Text::ParseWords Text::Wrap Tie::Hash Time::HiRes Time::Local Time::Piece Time::gmtime
    Time::localtime UNIVERSAL Unicode::Normalize Compress::Zlib Compress::Raw::Zlib Encode::Guess
    strict warnings lib
""".split()
)
SUITE_NAMESPACE = "Test::Nginx"  # lib/Test/Nginx.pm and lib/Test/Nginx/*.pm of the suite
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
    "Crypt::AuthEnc::": "libcryptx-perl",
    "Crypt::PK::": "libcryptx-perl",
    "Crypt::Mode::": "libcryptx-perl",
    "Crypt::Stream::": "libcryptx-perl",
    "Crypt::Mac::": "libcryptx-perl",
    "Crypt::Digest": "libcryptx-perl",
    "Crypt::KeyDerivation": "libcryptx-perl",
    "Crypt::PRNG": "libcryptx-perl",
    "Authen::SASL::": "libauthen-sasl-perl",
    "Net::DNS::": "libnet-dns-perl",
    "GD::": "libgd-perl",
}

# -- has() names and daemons -----------------------------------------------------------------------

# Test::Nginx's has() names that are not nginx modules but Perl modules or the platform.
FEATURE_PERL_MODULES = {"cryptx": ("Crypt::Misc",), "socket_ssl": ("IO::Socket::SSL",)}
# shmem: older trees ask for it; it fails only on Windows before nginx 1.9.0.
PLATFORM_FEATURES = frozenset({"unix", "udp", "symlink", "shmem"})

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
DAEMON_FILES = {
    "uwsgi": (
        ("/usr/lib/uwsgi/plugins/python3*_plugin.so",),
        "uwsgi-plugin-python3",
        "uwsgi python3 plugin",
    )
}

# has() names of modules nginx builds unless told not to, with the flag that removes them.
DEFAULT_MODULES = {
    name: f"--without-http_{name}_module"
    for name in (
        "charset gzip ssi mirror userid access auth_basic autoindex geo map referer rewrite proxy "
        "fastcgi uwsgi scgi grpc memcached limit_conn limit_req empty_gif browser upstream_hash "
        "upstream_ip_hash upstream_least_conn upstream_random upstream_keepalive upstream_zone "
        "split_clients tunnel upstream_sticky"
    ).split()
}
DEFAULT_MODULES.update(
    {
        "http": "--without-http",
        "cache": "--without-http-cache",
        "pcre": "--without-pcre",
        "pop3": "--without-mail_pop3_module",
        "imap": "--without-mail_imap_module",
        "smtp": "--without-mail_smtp_module",
    }
)
DEFAULT_MODULES.update(
    {
        f"stream_{name}": f"--without-stream_{name}_module"
        for name in (
            "access geo limit_conn map pass return set split_clients upstream_hash "
            "upstream_least_conn upstream_random upstream_zone"
        ).split()
    }
)
# Modules that need a flag: has() name -> the flag (Test::Nginx looks for it in `nginx -V`).
MODULE_FLAGS = {
    "mail": "--with-mail",
    "stream": "--with-stream",
    "perl": "--with-http_perl_module",
    "ssl": "--with-http_ssl_module",
    "http_ssl": "--with-http_ssl_module",
    "geoip": "--with-http_geoip_module",
    "--with-debug": "--with-debug",
    "debug": "--with-debug",
    "threads": "--with-threads",
    "compat": "--with-compat",
    "file_aio": "--with-file-aio",
    # SPDY, HTTP/2's predecessor (nginx 1.3.15 to 1.9.4): spdy.t and friends ask for "spdy".
    "spdy": "--with-http_spdy_module",
}
MODULE_FLAGS.update(
    {
        name: f"--with-http_{name}_module"
        for name in (
            "v2 v3 flv auth_request realip sub gunzip gzip_static image_filter xslt dav addition "
            "slice secure_link stub_status random_index mp4 degradation"
        ).split()
    }
)
MODULE_FLAGS.update(
    {
        f"http_{name}": f"--with-http_{name}_module"
        for name in (
            "v2 v3 geoip realip sub gunzip image_filter xslt dav addition slice secure_link "
            "stub_status random_index mp4 flv degradation auth_request perl"
        ).split()
    }
)
MODULE_FLAGS.update(
    {
        name: f"--with-{name}_module"
        for name in ("mail_ssl stream_ssl stream_ssl_preread stream_realip stream_geoip").split()
    }
)
# A module of the stream or mail server is built only when that server is: the server's flag.
SERVER_FLAGS = (
    ("stream_", "--with-stream"),
    ("mail_", "--with-mail"),
    ("pop3", "--with-mail"),
    ("imap", "--with-mail"),
    ("smtp", "--with-mail"),
)
SSL_FLAGS = (
    "--with-http_ssl_module",
    "--with-stream_ssl_module",
    "--with-mail_ssl_module",
    "--with-http_v3_module",
)

# -- libraries a build needs -----------------------------------------------------------------------


@dataclass(frozen=True)
class Library:
    what: str  # shown to the user
    paths: tuple[str, ...]  # glob patterns; any one present is enough
    package: str


LIBRARIES = {
    "libc": Library("C library headers (stdio.h)", ("/usr/include/stdio.h",), "libc6-dev"),
    "pcre": Library(
        "PCRE headers (pcre2.h or pcre.h)",
        ("/usr/include/pcre2.h", "/usr/include/pcre.h"),
        "libpcre2-dev",
    ),
    "pcre1": Library(
        "old PCRE headers (pcre.h; this nginx predates PCRE2)",
        ("/usr/include/pcre.h",),
        "libpcre3-dev",
    ),
    "zlib": Library("zlib headers (zlib.h)", ("/usr/include/zlib.h",), "zlib1g-dev"),
    "openssl": Library(
        "OpenSSL headers (openssl/ssl.h)", ("/usr/include/openssl/ssl.h",), "libssl-dev"
    ),
    "gd": Library("GD headers (gd.h)", ("/usr/include/gd.h",), "libgd-dev"),
    "xslt": Library(
        "libxslt headers (libxslt/xslt.h)", ("/usr/include/libxslt/xslt.h",), "libxslt1-dev"
    ),
    # libxml2-dev comes with libxslt1-dev, which the setup list names
    "xml2": Library(
        "libxml2 headers (libxml/parser.h)",
        ("/usr/include/libxml2/libxml/parser.h",),
        "libxslt1-dev",
    ),
    "geoip": Library("GeoIP headers (GeoIP.h)", ("/usr/include/GeoIP.h",), "libgeoip-dev"),
    "perl": Library(
        "libperl for embedding (libperl.so)",
        ("/usr/lib/*/libperl.so", "/usr/lib/libperl.so"),
        "libperl-dev",
    ),
    "perftools": Library(
        "gperftools headers (gperftools/profiler.h)",
        ("/usr/include/gperftools/profiler.h",),
        "libgoogle-perftools-dev",
    ),
    "atomic_ops": Library(
        "libatomic_ops headers (atomic_ops.h)", ("/usr/include/atomic_ops.h",), "libatomic-ops-dev"
    ),
}

# -- reading a test file ---------------------------------------------------------------------------

_USE = re.compile(r"(?<![\w$>:])use\s+([A-Z]\w*(?:::\w+)*)(?=\s*(?:;|qw\b|['\"(\d]|$))", re.M)
_REQUIRE = re.compile(
    r"(?<![\w$>:])require\s+([A-Z]\w*(?:::\w+)*)(?=\s*(?:;|\}|if\b|unless\b|$|['\"]))", re.M
)
# A function call or variable named in full: Net::SSLeay::renegotiate(...), $Net::SSLeay::VERSION.
_QUALIFIED = re.compile(r"([$&]?)\b([A-Z]\w*(?:::\w+)*)::\w+(\s*\()?")
_LOADING = re.compile(r"\b(?:use|no|require)\s+$")
_DAEMON = re.compile(r"has_daemon\s*\(\s*['\"]([^'\"]+)['\"]\s*\)")
_HAS = re.compile(r"->\s*has\s*\(((?:qw\s*\([^)]*\)|[^)])*)\)", re.S)
_QW = re.compile(r"qw\s*(?:/([^/]*)/|\(([^)]*)\)|\{([^}]*)\}|\[([^\]]*)\])", re.S)
_QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")


def strip_perl(text: str) -> str:
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


def is_ignored_module(name: str) -> bool:
    return (
        name in CORE_MODULES
        or name == SUITE_NAMESPACE
        or name.startswith(SUITE_NAMESPACE + "::")
        or name.startswith(PLATFORM_PREFIXES)
    )


def has_names(args: str) -> list[str]:
    """The feature names in the argument list of one ``->has(...)`` call."""
    names: list[str] = []
    for m in _QW.finditer(args):
        names += next(g for g in m.groups() if g is not None).split()
    rest = _QW.sub(" ", args)
    names += [a or b for a, b in _QUOTED.findall(rest)]
    return [n for n in names if n]


def _loaded_modules(code: str) -> list[tuple[int, str]]:
    """[(position, module)] of ``use X`` and ``require X``, and of the known non-core modules
    (PERL_PACKAGES) whose functions or variables the code names in full: such a module is loaded
    by another one (Net::SSLeay by IO::Socket::SSL), but the file needs it all the same."""
    found = [(m.start(), m.group(1)) for rx in (_USE, _REQUIRE) for m in rx.finditer(code)]
    for m in _QUALIFIED.finditer(code):
        sigil, package, call = m.groups()
        loading = _LOADING.search(code, max(0, m.start() - 16), m.start())  # use X::Y ();
        if (sigil or call) and package in PERL_PACKAGES and not loading:
            found.append((m.start(), package))
    return found


def _has_features(code: str) -> list[tuple[int, str]]:
    """[(position, name)] of the names in the file's ``->has(...)`` calls."""
    return [(m.start(), name) for m in _HAS.finditer(code) for name in has_names(m.group(1))]


def requirements_in_order(text: str) -> dict[str, list[str]]:
    """{"perl_modules", "daemons", "nginx_modules"}: lists, each name once, in the order the file
    names them. nginx_modules are Test::Nginx has() names (http_v2, stream_ssl, sni,
    openssl:1.0.2, ...); has() features that are Perl modules go to perl_modules, platform ones
    (unix, udp) are dropped."""
    code = strip_perl(text)
    modules = [(pos, m) for pos, m in _loaded_modules(code) if not is_ignored_module(m)]
    nginx = []
    for pos, name in _has_features(code):
        feature = "socket_ssl" if name.startswith("socket_ssl") else name
        if feature in FEATURE_PERL_MODULES:
            modules += [(pos, m) for m in FEATURE_PERL_MODULES[feature]]
        elif name not in PLATFORM_FEATURES:
            nginx.append(name)
    return {
        "perl_modules": list(dict.fromkeys(m for _, m in sorted(modules, key=lambda x: x[0]))),
        "daemons": list(dict.fromkeys(_DAEMON.findall(code))),
        "nginx_modules": list(dict.fromkeys(nginx)),
    }


def requirements_of_test(text: str) -> dict[str, set[str]]:
    """{"perl_modules", "daemons", "nginx_modules"} (sets) a test file needs to run, not skip
    (see requirements_in_order)."""
    return {kind: set(names) for kind, names in requirements_in_order(text).items()}


# How a test file makes its certificates, as far as OpenSSL's security level judges them: the RSA
# key sizes (``default_bits = N`` in the openssl.conf it writes, ``genrsa ... N``, ``-newkey
# rsa:N``) and the digest its CA signs with (``default_md = sha1``, ``-md sha1``). nginx-tests made
# 1024-bit keys until 2019-07-09 (571b1a5) and signed with SHA-1 in 2014-2019 tests; OpenSSL 3
# refuses both at its default level on Debian (prove/env.py pins a level that accepts them).
_RSA_BITS = re.compile(r"default_bits\s*=\s*(\d+)|\brsa:(\d+)|\bgenrsa\b[^\n;]*?\s(\d{3,5})\b")
_CA_DIGEST = re.compile(r"default_md\s*=\s*(\w+)|\s-md\s+(\w+)")


def certificates_made(text: str) -> list[tuple[str, int | str]]:
    """[("rsa", bits) | ("digest", name)]: the RSA key sizes a test file makes certificates with
    and the digests its CA signs them with (not "default": the openssl program's own), sorted;
    [] when it makes none."""
    code = strip_perl(text)
    bits = {int(next(g for g in m.groups() if g)) for m in _RSA_BITS.finditer(code)}
    digests = {next(g for g in m.groups() if g).lower() for m in _CA_DIGEST.finditer(code)}
    return [("rsa", b) for b in sorted(bits)] + [
        ("digest", d) for d in sorted(digests - {"default"})
    ]


# -- mappings --------------------------------------------------------------------------------------


def perl_package(module: str) -> tuple[str, bool]:
    """(Debian package, known) for a Perl module; unknown ones get the Debian naming convention."""
    if module in PERL_PACKAGES:
        return PERL_PACKAGES[module], True
    for prefix, package in PERL_PREFIX_PACKAGES.items():
        if module.startswith(prefix):
            return package, True
    if module in CORE_MODULES:
        return "perl", True
    return "lib" + module.lower().replace("::", "-") + "-perl", False


def daemon_package(daemon: str) -> str:
    return DAEMON_PACKAGES.get(daemon, daemon)


def _normal_flags(flags: Iterable[str]) -> list[str]:
    return [f[: -len("=dynamic")] if f.endswith("=dynamic") else f for f in flags]


def _needs_ssl(name: str) -> bool:
    return name == "sni" or re.match(r"(openssl|OpenSSL):", name) is not None


def module_enabled(name: str, flags: Iterable[str]) -> bool:
    """Does Test::Nginx's has(name) pass for an nginx configured with `flags`? (Its check reads
    `nginx -V`: configure arguments, "built with OpenSSL ...", "TLS SNI support enabled".)"""
    flags = _normal_flags(flags)
    ssl = any(f in SSL_FLAGS for f in flags) and not any(
        f.startswith("--without-openssl") for f in flags
    )
    if _needs_ssl(name):
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


def flag_for_module(name: str) -> str | None:
    """The configure flag that enables has(name), or None if it is enabled by default / unknown."""
    if _needs_ssl(name):
        return "--with-http_ssl_module"
    return MODULE_FLAGS.get(name)


def server_flag(name: str) -> str | None:
    """The flag of the server (stream, mail) a has() name's module belongs to, or None."""
    return next((flag for prefix, flag in SERVER_FLAGS if name.startswith(prefix)), None)


def configure_flags_for(names: Iterable[str]) -> list[str]:
    """The configure flags that build every module has(name) asks for, each once, in the order of
    `names`, a server's flag before its modules' (stream_ssl: --with-stream
    --with-stream_ssl_module; stream_return: --with-stream). Default modules need none."""
    flags = []
    for name in names:
        for flag in (server_flag(name), flag_for_module(name)):
            if flag and flag not in flags:
                flags.append(flag)
    return flags


def libraries_for_flags(flags: Iterable[str], pcre2_capable: bool | None = None) -> list[str]:
    """Names in LIBRARIES that building nginx with `flags` needs. pcre2_capable: does the base
    commit know PCRE2 (None: unknown, either library will do)."""
    flags = _normal_flags(flags)
    has = lambda *names: any(f in flags for f in names)
    starts = lambda prefix: any(f.startswith(prefix) for f in flags)
    need = ["libc"]
    if not has("--without-http", "--without-http_rewrite_module", "--without-pcre") and not starts(
        "--with-pcre="
    ):
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
