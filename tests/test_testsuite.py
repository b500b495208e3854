"""What an nginx-tests file needs (testsuite.py): its requirements, the has() names and
configure flags, the package tables, and the task miner reading files the same way."""

import textwrap

import fixture_repos

from nginx_eval.mining import nginx_history, scoring, stubs, suite_history, testsuite, topics
from nginx_eval.mining.testsuite import (
    certificates_made,
    configure_flags_for,
    daemon_package,
    flag_for_module,
    libraries_for_flags,
    module_enabled,
    perl_package,
    requirements_in_order,
    requirements_of_test,
)

# Snippets written in the style of nginx-tests files (not copied from it).
HEAD = textwrap.dedent("""\
    #!/usr/bin/perl

    # Tests for a made-up feature.

    ###############################################################################

    use warnings;
    use strict;

    use Test::More;
    use Socket qw/ CRLF /;
    use IO::Select;

    BEGIN { use FindBin; chdir($FindBin::Bin); }

    use lib 'lib';
    use Test::Nginx;
    """)

FASTCGI = HEAD + textwrap.dedent("""\

    ###############################################################################

    select STDERR; $| = 1;
    select STDOUT; $| = 1;

    eval { require FCGI; };
    plan(skip_all => 'FCGI not installed') if $@;

    my $t = Test::Nginx->new()->has(qw/http fastcgi rewrite/)->plan(4)
    \t->write_file_expand('nginx.conf', <<'EOF');

    %%TEST_GLOBALS%%

    events {
        use epoll;
    }

    http {
        server {
            location / { fastcgi_pass 127.0.0.1:8081; }
        }
    }

    EOF
    """)

STREAM_SSL = HEAD + textwrap.dedent("""\
    use Test::Nginx::Stream qw/ stream /;

    eval { require IO::Socket::SSL; die if $IO::Socket::SSL::VERSION < 2.0; };
    plan(skip_all => 'IO::Socket::SSL too old') if $@;
    eval "use Net::SSLeay 1.80; 1" or plan(skip_all => 'Net::SSLeay');

    my $t = Test::Nginx->new()
    \t->has(qw/stream stream_ssl
    \t\tstream_return sni socket_ssl_alpn unix/)
    \t->has_daemon('openssl')->has_daemon("memcached");
    $t->has('http', "http_v3", 'cryptx');

    # require Commented::Out;
    # $t->has(qw/xslt/);

    =pod

    use Pod::Only::Module;

    =cut

    require Win32API::File if $^O eq 'MSWin32';
    my $note = 'we use the module for nothing';
    $t->plan(5);

    __END__

    use After::End;
    """)


def test_requirements_of_fastcgi_style_file():
    req = requirements_of_test(FASTCGI)
    assert req == {
        "perl_modules": {"FCGI"},
        "daemons": set(),
        "nginx_modules": {"http", "fastcgi", "rewrite"},
    }


def test_requirements_of_ssl_style_file():
    req = requirements_of_test(STREAM_SSL)
    # Core modules, the suite's lib/, pragmas, nginx's `use epoll`, comments, POD, __END__ and
    # platform-only requires are not requirements; has() features that are Perl modules are.
    assert req["perl_modules"] == {"IO::Socket::SSL", "Net::SSLeay", "Crypt::Misc"}
    assert req["daemons"] == {"openssl", "memcached"}
    assert req["nginx_modules"] == {
        "stream",
        "stream_ssl",
        "stream_return",
        "sni",
        "http",
        "http_v3",
    }


def test_requirements_of_various_forms():
    text = textwrap.dedent("""\
        use Cache::Memcached::Fast;
        use Protocol::WebSocket::Frame ();
        use Data::Dumper;
        use Test::Nginx::HTTP2;
        use Test::Nginx::IMAP;
        use IO::Compress::Gzip qw/ gzip $GzipError /;
        eval { require GD; GD::Image->new(1, 1) };
        eval 'require SCGI' or plan(skip_all => 'no SCGI');
        my $t = Test::Nginx->new()->has( 'mail', 'imap' )->has(qw(http_v2 --with-debug));
        $t->has(qw/proxy cache shmem/)->has('udp');     # shmem, udp: the platform's
        $t->has_daemon( 'uwsgi' );
        ok(1, 'use Not::A::Module in a test name');
        """)
    req = requirements_of_test(text)
    assert req["perl_modules"] == {
        "Cache::Memcached::Fast",
        "Protocol::WebSocket::Frame",
        "GD",
        "SCGI",
    }
    assert req["daemons"] == {"uwsgi"}
    assert req["nginx_modules"] == {"mail", "imap", "http_v2", "--with-debug", "proxy", "cache"}


def test_requirements_of_plain_file_are_empty():
    assert requirements_of_test(HEAD + "plan(tests => 1);\nok(1);\n") == {
        "perl_modules": set(),
        "daemons": set(),
        "nginx_modules": set(),
    }


# How a 2017 mail test and a 2016 CA test made their certificates, in nginx-tests' style.
OLD_CERTIFICATES = HEAD + textwrap.dedent("""\
    $t->write_file('openssl.conf', <<EOF);
    [ req ]
    default_bits = 1024
    encrypt_key = no
    distinguished_name = req_distinguished_name
    [ req_distinguished_name ]
    EOF

    $t->write_file('ca.conf', <<EOF);
    [ ca ]
    default_ca = myca

    [ myca ]
    new_certs_dir = $d
    default_md = sha1
    EOF

    system("openssl genrsa -out $d/rsa.key 1024 >>$d/openssl.out 2>&1") == 0 or die;
    system("openssl req -x509 -new -newkey rsa:4096 -config $d/openssl.conf") == 0 or die;
    # default_bits = 512 in a comment is not made
    """)


def test_certificates_made_by_old_and_new_files():
    assert certificates_made(OLD_CERTIFICATES) == [("rsa", 1024), ("rsa", 4096), ("digest", "sha1")]
    new = OLD_CERTIFICATES.replace("1024", "2048").replace("rsa:4096", "rsa:2048")
    assert certificates_made(new.replace("sha1", "default")) == [("rsa", 2048)]
    assert certificates_made(FASTCGI) == []
    # "cram-md5" in a mail test's config is no signing digest.
    assert certificates_made(HEAD + "pop3_auth plain apop cram-md5;\n") == []


def test_perl_and_daemon_packages():
    assert perl_package("FCGI") == ("libfcgi-perl", True)
    assert perl_package("SCGI") == ("libscgi-perl", True)
    assert perl_package("Cache::Memcached")[0] == "libcache-memcached-perl"
    assert perl_package("Cache::Memcached::Fast")[0] == "libcache-memcached-fast-perl"
    assert perl_package("IO::Socket::SSL")[0] == "libio-socket-ssl-perl"
    assert perl_package("Net::SSLeay")[0] == "libnet-ssleay-perl"
    assert perl_package("GD")[0] == "libgd-perl"
    assert perl_package("Protocol::WebSocket::Handshake::Server")[0] == "libprotocol-websocket-perl"
    assert perl_package("Crypt::PK::X25519")[0] == "libcryptx-perl"
    assert perl_package("IO::Compress::Gzip") == ("perl", True)
    assert perl_package("No::Such::Module") == ("libno-such-module-perl", False)
    assert daemon_package("openssl") == "openssl"
    assert daemon_package("memcached") == "memcached"
    assert daemon_package("ffprobe") == "ffmpeg"
    assert daemon_package("softhsm2-util") == "softhsm2"


def test_module_enabled_by_flags():
    assert module_enabled("proxy", []) and module_enabled("stream_map", [])
    assert not module_enabled("proxy", ["--without-http_proxy_module"])
    assert not module_enabled("http_v2", [])
    assert module_enabled("http_v2", ["--with-http_v2_module"])
    assert module_enabled("stream", ["--with-stream=dynamic"])
    assert not module_enabled("stream_ssl", ["--with-stream", "--with-stream_ssl_preread_module"])
    assert not module_enabled("mail", ["--with-mail_ssl_module"])
    assert module_enabled("sni", ["--with-stream_ssl_module"]) and not module_enabled("sni", [])
    assert module_enabled("openssl:1.1.1", ["--with-http_ssl_module"])
    assert module_enabled("--with-debug", ["--with-debug"])
    # Names Test::Nginx does not know are looked for in `nginx -V`, as it does.
    assert module_enabled("http_ssl", ["--with-http_ssl_module"])
    assert module_enabled("some_new", ["--with-http_some_new_module"])
    assert not module_enabled("some_new", [])
    assert flag_for_module("http_v2") == "--with-http_v2_module"
    assert flag_for_module("stream_ssl_preread") == "--with-stream_ssl_preread_module"
    assert flag_for_module("image_filter") == "--with-http_image_filter_module"
    assert flag_for_module("mail") == "--with-mail"
    assert flag_for_module("spdy") == "--with-http_spdy_module"
    assert flag_for_module("sni") == "--with-http_ssl_module"
    assert flag_for_module("proxy") is None


def test_libraries_for_flags():
    assert libraries_for_flags([]) == ["libc", "pcre", "zlib"]
    assert libraries_for_flags([], pcre2_capable=False) == ["libc", "pcre1", "zlib"]
    assert libraries_for_flags(["--without-http_rewrite_module", "--without-http_gzip_module"]) == [
        "libc"
    ]
    assert "openssl" in libraries_for_flags(["--with-stream", "--with-stream_ssl_module"])
    assert "openssl" not in libraries_for_flags(
        ["--with-http_ssl_module", "--with-openssl=../openssl"]
    )
    assert "openssl" not in libraries_for_flags(["--with-http_v2_module"])
    assert libraries_for_flags(["--with-http_xslt_module=dynamic"])[-2:] == ["xslt", "xml2"]
    assert "gd" in libraries_for_flags(["--with-http_image_filter_module"])
    assert "geoip" in libraries_for_flags(["--with-stream_geoip_module"])
    assert "perl" in libraries_for_flags(["--with-http_perl_module"])


def test_qualified_calls_of_known_modules_are_requirements():
    # Loaded by IO::Socket::SSL, called by the file: the file needs Net::SSLeay all the same.
    text = textwrap.dedent("""\
        eval { require IO::Socket::SSL; };
        ok(Net::SSLeay::renegotiate($ssl), 'renegotiation');
        """)
    assert requirements_of_test(text)["perl_modules"] == {"IO::Socket::SSL", "Net::SSLeay"}
    for line in (
        "local $TODO = 'old Net::SSLeay' if $Net::SSLeay::VERSION < 1.88;",
        "eval { defined &Net::SSLeay::CTX_set_ciphersuites or die; };",
    ):
        assert requirements_of_test(line)["perl_modules"] == {"Net::SSLeay"}, line
    # Named in a string, a method call on a class, a core or unknown module: not a requirement.
    for line in (
        "plan(skip_all => 'Net::SSLeay too old');",
        "my $m = Cache::Memcached::Fast->new({});",
        "my $t = POSIX::strftime('%Y', gmtime());",
        "Some::Module::call($x);",
    ):
        assert requirements_of_test(line)["perl_modules"] == set(), line


def test_requirements_in_order_of_the_file():
    req = requirements_in_order(STREAM_SSL)
    assert req["perl_modules"] == ["IO::Socket::SSL", "Net::SSLeay", "Crypt::Misc"]
    assert req["daemons"] == ["openssl", "memcached"]
    assert req["nginx_modules"] == [
        "stream",
        "stream_ssl",
        "stream_return",
        "sni",
        "http",
        "http_v3",
    ]
    assert requirements_of_test(STREAM_SSL) == {k: set(v) for k, v in req.items()}


def test_default_modules_of_recent_nginx():
    # Test::Nginx counts these as built unless configure was told --without-...
    for name, flag in (
        ("tunnel", "--without-http_tunnel_module"),
        ("upstream_sticky", "--without-http_upstream_sticky_module"),
        ("stream_pass", "--without-stream_pass_module"),
    ):
        assert module_enabled(name, []) and not module_enabled(name, [flag]), name
        assert flag_for_module(name) is None
    assert flag_for_module("debug") == "--with-debug" == flag_for_module("--with-debug")
    assert flag_for_module("degradation") == "--with-http_degradation_module"


def test_configure_flags_for_has_names():
    assert configure_flags_for(["http", "proxy", "rewrite"]) == []
    assert configure_flags_for(["stream", "stream_ssl", "stream_return"]) == [
        "--with-stream",
        "--with-stream_ssl_module",
    ]
    # A module of the stream or mail server is built only with its server.
    assert configure_flags_for(["stream_ssl_preread"]) == [
        "--with-stream",
        "--with-stream_ssl_preread_module",
    ]
    assert configure_flags_for(["stream_pass"]) == ["--with-stream"]
    assert configure_flags_for(["mail_ssl", "imap"]) == ["--with-mail", "--with-mail_ssl_module"]
    assert configure_flags_for(["http_v2", "sni", "openssl:1.1.1", "--with-debug"]) == [
        "--with-http_v2_module",
        "--with-http_ssl_module",
        "--with-debug",
    ]
    assert configure_flags_for(["tunnel", "upstream_sticky", "made_up"]) == []


def test_miner_reads_test_files_as_the_doctor_does(tmp_path):
    mine = stubs  # the miner's stub writer (scripts/mine_tasks.py, nginx_eval/mining/)
    # No tables of its own: the knowledge is testsuite's.
    for module in (topics, suite_history, nginx_history, scoring, stubs):
        for name in ("MODULE_FLAGS", "CORE_PERL", "REQUIRE_RE", "HAS_RE"):
            assert not hasattr(module, name), (module.__name__, name)
    assert mine.requirements_in_order is testsuite.requirements_in_order
    tests_repo = tmp_path / "tests"
    fixture_repos.git(tmp_path, "init", "-q", str(tests_repo))
    fixture_repos.write(tests_repo / "fastcgi_x.t", FASTCGI)
    fixture_repos.write(tests_repo / "stream_x.t", STREAM_SSL)
    commit = fixture_repos.commit(tests_repo, "two tests")
    flags, perl = mine.needs_of(
        tests_repo / ".git", commit, ["stream_x.t", "fastcgi_x.t", "not_there.t"]
    )
    assert flags == [
        "--with-stream",
        "--with-stream_ssl_module",
        "--with-http_ssl_module",
        "--with-http_v3_module",
    ]
    assert perl == ["IO::Socket::SSL", "Net::SSLeay", "Crypt::Misc", "FCGI"]
