"""The doctor: the setup list, the report on an injected machine, and `doit run doctor`.
(What a test file needs, and the package tables: test_testsuite.py.)"""

import os
import shutil
import textwrap

import claude_cli
import fixture_repos
import pytest
from test_agent_claude import claude  # noqa: F401 (a fixture)
from test_testsuite import FASTCGI, OLD_CERTIFICATES, STREAM_SSL

from nginx_eval.agent import sandbox
from nginx_eval.checks import doctor
from nginx_eval.checks.doctor import diagnose, listed_packages
from nginx_eval.checks.doctor_report import render
from nginx_eval.core.layout import Layout
from nginx_eval.prove.env import OPENSSL_CONF_FILE
from nginx_eval.run.benchmark import Task


def test_setup_lists_every_package_of_the_tables():
    listed = listed_packages()
    assert listed, "scripts/debian-packages.txt is missing or empty"
    # What the current benchmark and any plain build need is installed by the setup script.
    must = {
        "gcc",
        "make",
        "git",
        "perl",
        "tar",
        "libc6-dev",
        "libpcre2-dev",
        "libpcre3-dev",
        "zlib1g-dev",
        "libssl-dev",
        "openssl",
        "libfcgi-perl",
        "libscgi-perl",
        "libio-socket-ssl-perl",
        "libnet-ssleay-perl",
    }
    assert must <= listed


# -- the report, with an injected machine ---------------------------------------------------------


class FakeProbe:
    def __init__(self, tools=(), paths=(), perl=(), network_problem=None, refused=None):
        self.tools, self.paths, self.perl = set(tools), set(paths), set(perl)
        self.network_problem = network_problem
        self.perl_calls = 0
        self.refused = refused or {}  # certificate spec -> OpenSSL's reason

    def certificate_refused(self, spec):
        return ("refused", self.refused[spec]) if spec in self.refused else ("ok", "")

    def private_network_problem(self):
        return self.network_problem

    def sandbox_problem(self):
        return None if "srt" in self.tools else "srt is not installed"

    def which(self, name):
        return name in self.tools

    def exists(self, pattern):
        return pattern in self.paths

    def perl_modules(self, modules):
        self.perl_calls += 1
        return {m for m in modules if m in self.perl}


class FakeSource:
    def __init__(self, files, available=True):
        self.files, self.available = files, available

    def repo_available(self, repo, commit):
        return self.available

    def read(self, repo, commit, path):
        return self.files.get(path)

    def pcre2_capable(self, repo, commit):
        return None


ALL_TOOLS = ("cc", "make", "git", "perl", "prove", "tar", "ccache", "bwrap", "socat", "rg")
BASE_PATHS = (
    "/usr/include/stdio.h",
    "/usr/include/pcre2.h",
    "/usr/include/zlib.h",
    "/usr/include/openssl/ssl.h",
)


def task(iid, files, flags=(), perl_modules=()):
    return Task(
        instance_id=iid,
        repo="nginx/nginx",
        test_repo="nginx/nginx-tests",
        base_commit="a" * 40,
        fix_commit="b" * 40,
        test_commit="c" * 40,
        test_files=tuple(files),
        configure_flags=tuple(flags),
        fail_to_pass=(f"{files[0]}:1",),
        pass_to_pass=(),
        problem_statement="x",
        perl_modules=tuple(perl_modules),
    )


def report(tasks, files, probe, listed=None, available=True):
    return render(diagnose(tasks, FakeSource(files, available), probe, listed), len(tasks))


def test_report_all_good_collapses_ok_lines():
    probe = FakeProbe(
        ALL_TOOLS + ("openssl", "memcached"),
        BASE_PATHS,
        {"FCGI", "IO::Socket::SSL", "Net::SSLeay", "Crypt::Misc"},
    )
    tasks = [
        task("t-fcgi", ["fastcgi_x.t"]),
        task(
            "t-ssl",
            ["stream_x.t"],
            ["--with-stream", "--with-stream_ssl_module", "--with-http_v3_module"],
        ),
    ]
    text, ok = report(tasks, {"fastcgi_x.t": FASTCGI, "stream_x.t": STREAM_SSL}, probe)
    assert ok, text
    assert "MISSING" not in text and "TASK ERROR" not in text
    assert "OK      perl modules: Crypt::Misc, FCGI, IO::Socket::SSL, Net::SSLeay" in text
    assert "OK      isolation: a private network per test file" in text
    assert text.splitlines()[-1] == "doctor: all good"
    assert probe.perl_calls == 1


def test_report_warns_when_tests_share_the_network():
    probe = FakeProbe(
        ALL_TOOLS + ("openssl", "memcached"),
        BASE_PATHS,
        {"FCGI"},
        network_problem="unshare(CLONE_NEWNET): Operation not permitted",
    )
    text, ok = report([task("t-fcgi", ["fastcgi_x.t"])], {"fastcgi_x.t": FASTCGI}, probe)
    assert ok, text  # a warning: fixed-port trees still run, one file at a time
    assert (
        "WARN    no private network: tests share the machine's network "
        "(unshare(CLONE_NEWNET): Operation not permitted); test trees with fixed ports run "
        "one file at a time"
    ) in text.splitlines()
    assert "isolation" not in "".join(line for line in text.splitlines() if line.startswith("OK"))


def test_report_names_missing_things_and_packages():
    probe = FakeProbe(
        ("cc", "make", "git", "perl", "prove", "tar", "openssl"),
        ("/usr/include/stdio.h", "/usr/include/pcre.h"),
        {"Net::SSLeay"},
    )
    tasks = [
        task("t-fcgi", ["fastcgi_x.t"], perl_modules=["No::Such::Module"]),
        task(
            "t-ssl",
            ["stream_x.t"],
            ["--with-stream", "--with-stream_ssl_module", "--with-http_v3_module"],
        ),
    ]
    text, ok = report(
        tasks,
        {"fastcgi_x.t": FASTCGI, "stream_x.t": STREAM_SSL},
        probe,
        listed={"gcc", "make", "git", "perl", "libfcgi-perl"},
    )
    assert not ok
    lines = text.splitlines()
    assert (
        "MISSING perl module FCGI (needed by t-fcgi (fastcgi_x.t)) -> apt-get install libfcgi-perl"
    ) in lines
    assert (
        "MISSING perl module No::Such::Module (needed by t-fcgi (perl_modules)) -> "
        "apt-get install libno-such-module-perl; package name guessed"
    ) in lines
    assert (
        "MISSING perl module IO::Socket::SSL (needed by t-ssl (stream_x.t)) -> "
        "apt-get install libio-socket-ssl-perl"
    ) in lines
    assert (
        "MISSING daemon memcached (needed by t-ssl (stream_x.t)) -> apt-get install memcached"
    ) in lines
    assert any(
        line.startswith(
            "MISSING library zlib headers (zlib.h) (needed by t-fcgi, t-ssl) -> "
            "apt-get install zlib1g-dev"
        )
        for line in lines
    )
    assert any(
        line.startswith("MISSING library OpenSSL headers")
        and "t-fcgi" not in line
        and line.endswith("libssl-dev")
        for line in lines
    )
    assert "WARN    tool ccache not found" in text and "WARN    tool bwrap not found" in text
    assert not any("Net::SSLeay" in line for line in lines if line.startswith("MISSING"))
    assert "package libscgi-perl" not in text  # nobody needs it
    assert any(
        line.startswith("WARN    package libssl-dev") and "debian-packages.txt" in line
        for line in lines
    )
    install = [line for line in lines if line.startswith("To install everything missing:")]
    assert len(install) == 1
    packages = install[0].split("apt-get install ", 1)[1].split()
    assert set(packages) == {
        "libfcgi-perl",
        "libno-such-module-perl",
        "zlib1g-dev",
        "libssl-dev",
        "libio-socket-ssl-perl",
        "libcryptx-perl",
        "memcached",
    }
    assert lines[-1] == "doctor: 7 problem(s)"


def test_report_configure_flags_that_make_a_file_skip():
    probe = FakeProbe(
        ALL_TOOLS + ("openssl", "memcached"),
        BASE_PATHS,
        {"FCGI", "IO::Socket::SSL", "Net::SSLeay", "Crypt::Misc"},
    )
    tasks = [
        task("t-ssl", ["stream_x.t"], ["--with-stream"]),
        task("t-fcgi", ["fastcgi_x.t"], ["--without-http_rewrite_module"]),
    ]
    text, ok = report(tasks, {"fastcgi_x.t": FASTCGI, "stream_x.t": STREAM_SSL}, probe)
    assert not ok
    errors = [line for line in text.splitlines() if line.startswith("TASK ERROR")]
    assert (
        "TASK ERROR task t-ssl: field configure_flags: stream_x.t asks for "
        "$t->has('stream_ssl'): add --with-stream_ssl_module; without it the file skips" in errors
    )
    assert any("'http_v3'" in e and "--with-http_v3_module" in e for e in errors)
    assert any("'sni'" in e for e in errors)
    assert any(
        e.startswith("TASK ERROR task t-fcgi: field configure_flags: fastcgi_x.t")
        and "remove --without-http_rewrite_module" in e
        for e in errors
    )
    assert "apt-get install" not in text  # flags are no package


def test_report_pin_in_effect_and_certificates_accepted():
    probe = FakeProbe(ALL_TOOLS + ("openssl",), BASE_PATHS)
    text, ok = report(
        [task("t-mail", ["mail_x.t"], ["--with-mail"])], {"mail_x.t": OLD_CERTIFICATES}, probe
    )
    assert ok, text
    lines = text.splitlines()
    assert (
        "OK      OpenSSL for tests: OPENSSL_CONF=nginx_eval/prove/openssl_tests.cnf in effect "
        "(an RSA key of 1024 bits and a certificate signed with sha1 accepted)"
    ) in lines
    assert (
        "OK      certificates the test files make, accepted by OpenSSL: a certificate "
        "signed with sha1, an RSA key of 1024 bits, an RSA key of 4096 bits"
    ) in lines


def test_report_predicts_a_task_whose_certificates_openssl_refuses():
    # As on Debian 12 without the pin: level 2 refuses what a 2017 test tree makes.
    probe = FakeProbe(
        ALL_TOOLS + ("openssl",),
        BASE_PATHS,
        {"FCGI"},
        refused={("rsa", 1024): "ee key too small", ("digest", "sha1"): "ca md too weak"},
    )
    tasks = [task("t-mail", ["mail_x.t"], ["--with-mail"]), task("t-fcgi", ["fastcgi_x.t"])]
    text, ok = report(tasks, {"mail_x.t": OLD_CERTIFICATES, "fastcgi_x.t": FASTCGI}, probe)
    assert not ok
    lines = text.splitlines()
    assert (
        "WARN    OpenSSL for tests: OPENSSL_CONF=nginx_eval/prove/openssl_tests.cnf is not in "
        "effect: it refuses an RSA key of 1024 bits (ee key too small) and a certificate "
        "signed with sha1 (ca md too weak); test trees before 2019 cannot start nginx"
    ) in lines
    cannot = [line for line in lines if line.startswith("CANNOT RUN")]
    assert cannot == [
        "CANNOT RUN t-mail (mail_x.t): OpenSSL under "
        "OPENSSL_CONF=nginx_eval/prove/openssl_tests.cnf "
        "refuses a certificate signed with sha1 (ca md too weak), which the test file makes: "
        "nginx cannot start for it, at the base or the fix",
        "CANNOT RUN t-mail (mail_x.t): OpenSSL under "
        "OPENSSL_CONF=nginx_eval/prove/openssl_tests.cnf "
        "refuses an RSA key of 1024 bits (ee key too small), which the test file makes: nginx "
        "cannot start for it, at the base or the fix",
    ]
    assert (
        "OK      certificates the test files make, accepted by OpenSSL: an RSA key of 4096 "
        "bits" in lines
    )
    assert "apt-get install" not in text  # no package makes OpenSSL accept them
    assert lines[-1] == "doctor: 2 problem(s)"


@pytest.mark.skipif(not shutil.which("openssl"), reason="needs the openssl program")
def test_certificate_trial_under_the_pin_and_under_level_2(tmp_path):
    """The real probe: the shipped configuration accepts what old test trees make; a level-2
    configuration (Debian's default) refuses it with the reasons nginx gives."""
    level2 = tmp_path / "level2.cnf"
    level2.write_text(OPENSSL_CONF_FILE.read_text().replace("@SECLEVEL=0", "@SECLEVEL=2"))
    for spec in (("rsa", 1024), ("digest", "sha1")):
        assert doctor.certificate_trial(spec) == ("ok", ""), spec
    assert doctor.certificate_trial(("rsa", 1024), conf=level2) == ("refused", "ee key too small")
    assert doctor.certificate_trial(("digest", "sha1"), conf=level2) == (
        "refused",
        "ca md too weak",
    )
    assert doctor.certificate_trial(("rsa", 2048), conf=level2) == ("ok", "")


def test_report_missing_test_file_and_unread_repository():
    probe = FakeProbe(ALL_TOOLS, BASE_PATHS)
    text, ok = report([task("t-gone", ["gone.t"])], {}, probe)
    assert not ok and "TASK ERROR t-gone: gone.t does not exist at test_commit cccccccccccc" in text
    text, ok = report([task("t-1", ["a.t"]), task("t-2", ["b.t"])], {}, probe, available=False)
    assert ok
    assert (
        "WARN    nginx/nginx-tests is not cloned: test files not checked; run `doit run "
        "repos` (with the same run=/instances=) first (tasks t-1, t-2)"
    ) in text


def test_system_probe_asks_perl_once(tmp_path, monkeypatch):
    """One perl run answers every module not asked before; a module asked again costs none.
    Counted by a `perl` first on PATH that notes each run and hands over to the real one."""
    runs_file = tmp_path / "perl-runs"
    wrapper = tmp_path / "bin" / "perl"
    wrapper.parent.mkdir()
    real_perl = shutil.which("perl")
    wrapper.write_text(f'#!/bin/sh\necho run >> "{runs_file}"\nexec "{real_perl}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")

    def runs():
        return len(runs_file.read_text().splitlines()) if runs_file.exists() else 0

    probe = doctor.SystemProbe()
    assert probe.perl_modules(["POSIX", "No::Such::Module"]) == {"POSIX"}
    assert runs() == 1
    assert probe.perl_modules(["POSIX"]) == {"POSIX"}
    assert probe.perl_modules(["No::Such::Module", "POSIX"]) == {"POSIX"}
    assert runs() == 1
    assert probe.perl_modules(["POSIX", "File::Spec"]) == {"POSIX", "File::Spec"}
    assert runs() == 2  # File::Spec alone was asked
    assert probe.which("sh") and not probe.which("no-such-tool-here")


@pytest.mark.e2e
@pytest.mark.skipif(
    sandbox.sandbox_problem(start=False) is not None, reason="srt, bwrap, socat or rg is missing"
)
def test_the_sandbox_finding_of_an_srt_that_cannot_start_says_so_in_srts_words(
    tmp_path, monkeypatch
):
    """The self-test shows whether srt starts; when it shows no step, srt's own words say why."""
    stub = tmp_path / "srt"
    stub.write_text("#!/bin/sh\necho 'srt: no user namespaces here' >&2\nexit 1\n")
    stub.chmod(0o755)
    monkeypatch.setenv("NGINX_EVAL_SRT", str(stub))
    layout = Layout.from_env(root=tmp_path, environ={"NGINX_EVAL_CACHE": str(tmp_path / "c")})
    problem = doctor.SystemProbe(layout).sandbox_problem()
    assert problem == "srt cannot start a sandbox here: srt: no user namespaces here"


# -- end to end on the fixture project -------------------------------------------------------------


def test_doit_doctor_passes_on_fixture(project):
    proc, executed = project.doit("run", "doctor")
    assert executed == ["doctor"]
    assert "is not cloned" in proc.stdout  # repos were not fetched yet
    # ...so the verdict is "not checked", never "all good" (test_commands.py has the details).
    assert "doctor: not checked:" in proc.stdout and "all good" not in proc.stdout
    project.doit("run", "repos")
    proc, _ = project.doit("run", "doctor")
    assert "is not cloned" not in proc.stdout and "doctor: all good" in proc.stdout
    assert "doctor: checking 2 task(s)" in proc.stdout


def test_doit_doctor_fails_on_missing_perl_module(project):
    tests_repo = project.mirrors / "acme+tiny-tests"
    fixture_repos.write(
        tests_repo / "needs_module.t",
        fixture_repos.TEST_HEAD
        + textwrap.dedent("""\
        eval { require No::Such::Module; };
        plan(skip_all => 'No::Such::Module not installed') if $@;
        plan(tests => 1);
        ok(1, 'loaded');
        """),
        0o755,
    )
    new_commit = fixture_repos.commit(tests_repo, "A test that needs a module")
    bench = project.benchmark()
    t = bench["tasks"][0]
    t["test_commit"] = new_commit
    t["test_files"].append("needs_module.t")
    bench["tasks"][1]["perl_modules"] = ["Other::Missing::Module"]
    project.write_benchmark(bench)
    project.doit("run", "repos")
    proc, _ = project.doit("run", "doctor", check=False)
    assert proc.returncode != 0
    assert (
        "MISSING perl module No::Such::Module (needed by tiny-add (needs_module.t)) -> "
        "apt-get install libno-such-module-perl"
    ) in proc.stdout
    assert (
        "MISSING perl module Other::Missing::Module (needed by tiny-mul (perl_modules))"
        in proc.stdout
    )
    install = [
        line for line in proc.stdout.splitlines() if line.startswith("To install everything")
    ]
    assert "libno-such-module-perl libother-missing-module-perl" in install[0]
    out, _ = project.doit("run", "doctor", "instances=tiny-mul", check=False)
    assert out.returncode != 0 and "No::Such::Module" not in out.stdout
    assert "Other::Missing::Module" in out.stdout


# -- agent modes: the CLI, its pin, credentials, the endpoint, the sandbox -------------------------


def test_doctor_checks_what_a_selected_claude_code_mode_needs(claude):
    proc, _ = claude.project.doit("run", "doctor", "modes=raw")
    lines = proc.stdout.splitlines()
    assert (
        "OK      agent sandbox: srt runs, and its self-test passed (a phase builds a C "
        "server, starts it, reaches it with curl and prove)"
    ) in lines
    version = claude_cli.setup_setting("CLAUDE_CODE_VERSION")
    assert (
        f"OK      agent modes: Claude Code {version} (Claude Code), credentials, "
        f"{claude.api.url} reachable"
    ) in lines
    assert not any(line.startswith("WARN    Claude Code") for line in lines)
    # Without credentials it cannot run: a problem, and the doctor fails.
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
        claude.project.env.pop(name, None)
    proc, _ = claude.project.doit("run", "doctor", "modes=raw", check=False)
    assert proc.returncode != 0
    assert (
        "CANNOT RUN mode raw: Claude Code has no credentials: set ANTHROPIC_API_KEY" in proc.stdout
    )


def test_doctor_warns_of_a_cli_that_is_not_the_pinned_one(claude, tmp_path):
    other = tmp_path / "other-bin"
    other.mkdir()
    (other / "claude").write_text('#!/bin/sh\necho "2.0.1 (Claude Code)"\n')
    (other / "claude").chmod(0o755)
    proc, _ = claude.project.doit(
        "run", "doctor", "modes=raw", env={"PATH": f"{other}:{claude.project.env['PATH']}"}
    )
    pinned = claude_cli.setup_setting("CLAUDE_CODE_VERSION")
    assert (
        f"WARN    Claude Code at {other / 'claude'} is 2.0.1 (Claude Code), not the pinned "
        f"{pinned} (scripts/setup-debian.sh): its runs are not those of the pinned CLI"
    ) in proc.stdout.splitlines()


def test_doctor_without_agent_modes_checks_no_cli(project):
    proc, _ = project.doit("run", "doctor", "modes=gold,none")
    assert "agent modes" not in proc.stdout and "CANNOT RUN mode" not in proc.stdout
