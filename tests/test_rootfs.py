"""The pinned toolchain (core/rootfs.py) with a real Debian 12 root filesystem made by mmdebstrap:
its manifest and digest, a command run inside it, a build and a prove inside it (the compiler,
headers and dpkg database are the root filesystem's, a header only the host has is not seen,
the tests run as its ordinary account), the build key following the digest, the doctor's check
of the root filesystem against its manifest, and the fixture pipeline with the pin on.

The root filesystem is NGINX_EVAL_TOOLCHAIN's as the session found it, else the default
/opt/nginx-eval/toolchain that scripts/setup-debian.sh makes (CI runs it first); when it is
missing the session makes it there with scripts/make-toolchain.sh (about 3 minutes from Debian's
archive), and only when that cannot be done are these tests skipped, with a warning.
"""

import json
import os
import shutil
import subprocess
import time
import warnings
from pathlib import Path

import fixture_repos
import pytest
from conftest import SESSION_TOOLCHAIN, SOURCE_ROOT
from test_build import Repo

from nginx_eval.build import toolchain as buildtoolchain
from nginx_eval.build.cache import BuildSpec, binary_path
from nginx_eval.checks import doctor
from nginx_eval.checks.doctor_report import render
from nginx_eval.core import rootfs
from nginx_eval.prove.stage import run_prove_files
from nginx_eval.prove.tap import parse_tap

E2E = True

MAKE_TOOLCHAIN = SOURCE_ROOT / "scripts" / "make-toolchain.sh"


@pytest.fixture(scope="session")
def toolchain():
    """The pinned toolchain the tests use, made when missing (see the module's docstring)."""
    named = SESSION_TOOLCHAIN if SESSION_TOOLCHAIN not in (None, "", rootfs.HOST) else None
    tc = rootfs.Toolchain(Path(named or rootfs.DEFAULT_DIR))
    if rootfs.problem(tc):
        made = subprocess.run(
            ["sh", str(MAKE_TOOLCHAIN)],
            env=dict(os.environ, NGINX_EVAL_TOOLCHAIN=str(tc.directory)),
            capture_output=True,
            text=True,
            timeout=3600,
        )
        problem = rootfs.problem(tc)
        if problem:
            why = f"{problem}; make-toolchain.sh said: {(made.stdout + made.stderr)[-400:]}"
            warnings.warn(f"SKIPPING the pinned toolchain's tests: {why}", stacklevel=2)
            pytest.skip(why)
    return tc


@pytest.fixture
def pinned(toolchain, monkeypatch):
    """The pin on in this process, as NGINX_EVAL_TOOLCHAIN sets it for a doit run."""
    monkeypatch.setenv(rootfs.ENV_VAR, str(toolchain.directory))
    return toolchain


def copy_with_status(toolchain, directory, change):
    """A second toolchain in `directory`: the root filesystem hard-linked from `toolchain`'s but
    for its dpkg database, whose text change(text) returns (a fresh file: the original is not
    touched), with manifest.txt written as the setup writes it unless change says otherwise."""
    root = directory / "root"
    directory.mkdir(parents=True)
    subprocess.run(["cp", "-al", str(toolchain.root), str(root)], check=True)
    status = root / "var" / "lib" / "dpkg" / "status"
    text = status.read_text()
    status.unlink()
    status.write_text(change(text))
    made = rootfs.Toolchain(directory)
    lines = rootfs.installed_packages(root)
    (directory / "manifest.txt").write_text("".join(f"{line}\n" for line in lines))
    return made


def bumped(package):
    """A change of a dpkg database: `package`'s version gets "+test" appended."""

    def change(text):
        stanzas = text.split("\n\n")
        for i, stanza in enumerate(stanzas):
            if stanza.startswith(f"Package: {package}\n"):
                lines = stanza.splitlines()
                lines = [f"{line}+test" if line.startswith("Version: ") else line for line in lines]
                stanzas[i] = "\n".join(lines)
        return "\n\n".join(stanzas)

    return change


# -- the root filesystem, its manifest and digest --------------------------------------------------


def test_the_manifest_is_the_root_filesystems_packages_and_the_digest_its_sha256(toolchain):
    recorded = rootfs.recorded_manifest(toolchain)
    assert recorded == rootfs.installed_packages(toolchain.root)
    digest = (toolchain.directory / "manifest.sha256").read_text().strip()
    assert rootfs.record(toolchain) == {"name": "debian-12", "digest": digest}
    assert rootfs.manifest_digest(recorded) == digest
    # Every package of the list is in it, and the setup does nothing a second time.
    names = {line.partition("=")[0] for line in recorded}
    assert doctor.listed_packages(doctor.TOOLCHAIN_PACKAGES_FILE) <= names
    start = time.monotonic()
    again = subprocess.run(
        ["sh", str(MAKE_TOOLCHAIN)],
        env=dict(os.environ, NGINX_EVAL_TOOLCHAIN=str(toolchain.directory)),
        capture_output=True,
        text=True,
        check=True,
    )
    assert "root filesystem present" in again.stdout and time.monotonic() - start < 10
    assert rootfs.recorded_manifest(toolchain) == recorded


def test_a_command_inside_sees_the_root_filesystem_and_only_what_is_bound(toolchain, tmp_path):
    writable, hidden = tmp_path / "out", tmp_path / "hidden"
    writable.mkdir()
    hidden.mkdir()
    script = (
        'id -un; cat /etc/debian_version; echo x > "$1/file" && echo wrote; '
        'touch /usr/x 2>/dev/null || echo read-only; test -e "$2" || echo hidden; '
        "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '; "
        # The first process of a PID namespace of its own, which reaches no process of the host
        # (the account is the harness's user outside).
        'echo "pid $$"; kill -0 "$3" 2>/dev/null || echo out-of-reach'
    )
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        out = subprocess.run(
            rootfs.command(
                toolchain,
                ["sh", "-c", script, "sh", str(writable), str(hidden), str(bystander.pid)],
                cwd=writable,
                writable=[writable],
            ),
            env=rootfs.environment(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    finally:
        bystander.kill()
        bystander.wait()
    version = (toolchain.root / "etc" / "debian_version").read_text().strip()
    assert out == [
        "nginx-eval", version, "wrote", "read-only", "hidden", "lo", "pid", "1", "out-of-reach"
    ]  # fmt: skip
    assert (writable / "file").read_text() == "x\n"
    assert rootfs.which(toolchain, "cc") == "/usr/bin/x86_64-linux-gnu-gcc-12"
    assert rootfs.which(toolchain, "no-such-program") is None


# -- builds and proves inside ----------------------------------------------------------------------

# A configure that records what the build sees, in objs/seen.txt.
PROBE_CONFIGURE = r"""
{
  cat /etc/debian_version
  sha256sum /var/lib/dpkg/status | cut -d' ' -f1
  cc -dumpfullversion
  id -un
} > objs/seen.txt
"""


def host_only_header(toolchain):
    """A header of the host's /usr/include that the root filesystem lacks, or None."""
    for path in sorted(Path("/usr/include").glob("*.h")):
        if not (toolchain.root / "usr" / "include" / path.name).exists():
            return path.name
    return None


def test_a_build_uses_the_root_filesystems_compiler_headers_and_packages(pinned, tmp_path):
    repo = Repo(tmp_path)
    configure = fixture_repos.CONFIGURE.replace(
        'echo "configured with: $*"', PROBE_CONFIGURE + 'echo "configured with: $*"'
    )
    patch = repo.patch(repo.commits["c_later"], {"auto/configure": configure})
    record = repo.build("c_later", patch)
    assert record["status"] == "built" and record["kind"] == "clean"
    assert record["compiler"]["toolchain"] == rootfs.record(pinned)["digest"]
    seen = (repo.layout.build_dir(record["key"]) / "tree" / "objs" / "seen.txt").read_text()
    status = (pinned.root / "var" / "lib" / "dpkg" / "status").read_bytes()
    gcc = subprocess.run(
        rootfs.command(pinned, ["cc", "-dumpfullversion"], cwd="/tmp"),
        env=rootfs.environment(),
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert seen.split() == [
        (pinned.root / "etc" / "debian_version").read_text().strip(),
        __import__("hashlib").sha256(status).hexdigest(),
        gcc,
        "nginx-eval",
    ]
    assert "[nginx-eval] toolchain: debian-12 root filesystem" in repo.log(record)
    # A header the host has and the root filesystem lacks is not found inside.
    header = host_only_header(pinned)
    if header is None:
        pytest.skip("this host's /usr/include has no header the root filesystem lacks")
    uses = repo.patch(
        repo.commits["c_later"],
        {"src/core/calc.c": f"#include <{header}>\n" + fixture_repos.CALC_C % ("a + b", "a * b")},
    )
    failed = repo.build("c_later", uses)
    assert failed["status"] == "compile_failed", repo.log(failed)
    assert f"{header}: No such file or directory" in repo.log(failed)
    # ...which the host's own toolchain finds: the same patch builds with the pin off.
    os.environ[rootfs.ENV_VAR] = rootfs.HOST
    assert repo.build("c_later", uses)["status"] == "built"


def store_files(store):
    return {p.relative_to(store) for p in store.rglob("*") if p.is_file()}


def test_a_patched_build_reads_the_shared_caches_and_writes_none(pinned, tmp_path):
    repo = Repo(tmp_path)
    ccache, kept = repo.layout.ccache_dir, repo.layout.feature_tests
    base = repo.build("c_later")
    assert base["status"] == "built"
    objects = store_files(ccache)
    assert objects, "the base build stored no object: the toolchain's cc does not go through ccache"
    # A patch whose configure plants a file in each store, and changes a source file.
    configure = fixture_repos.CONFIGURE.replace(
        'echo "configured with: $*"',
        f"for store in '{ccache}' '{kept}'; do "
        '(: > "$store/planted") 2>/dev/null && echo "planted in $store"; done\n'
        'echo "configured with: $*"',
    )
    patch = repo.patch(
        repo.commits["c_later"],
        {
            "auto/configure": configure,
            "src/core/calc.c": fixture_repos.CALC_C % ("a + b + 0", "a * b"),
        },
    )
    before = store_files(kept)
    record = repo.build("c_later", patch)
    assert record["status"] == "built", repo.log(record)
    assert "planted in" not in repo.log(record)
    assert store_files(ccache) == objects and store_files(kept) == before
    # The base builds still store what they compile.
    other = repo.build("c_header")
    assert other["status"] == "built" and store_files(ccache) > objects


def prove_file(repo, record, test_file, tap_dir, **env):
    """The prove record of one test file run against build `record`, with `env` added."""
    return run_prove_files(
        repo.layout,
        test_file.parent,
        binary_path(repo.layout, record["key"]),
        [test_file.name],
        60,
        tap_dir,
        extra_env=env,
    )


def test_a_prove_runs_inside_as_the_ordinary_account(pinned, tmp_path):
    repo = Repo(tmp_path)
    record = repo.build("c_later")
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "inside.t").write_text(
        fixture_repos.TEST_HEAD
        + """
plan(tests => 7);
is(run('add', 2, 3), '5', 'the build runs');
is(scalar getpwuid($<), 'nginx-eval', 'an ordinary account');
ok(!-e $ENV{HOST_ONLY}, 'the host is not seen');
is(`cat /etc/debian_version`, $ENV{ROOT_VERSION}, 'the root filesystem');
is($^V, $ENV{ROOT_PERL}, "the root filesystem's perl");
is(getppid(), 1, "prove is the first process of the file's PID namespace");
ok(!kill(0, $ENV{BYSTANDER}), "the host's processes are out of reach");
"""
    )
    perl = rootfs.first_line(pinned, ("perl", "-e", "print $^V"))
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        runs = prove_file(
            repo,
            record,
            tests / "inside.t",
            tmp_path / "tap",
            HOST_ONLY=str(SOURCE_ROOT / "pyproject.toml"),
            ROOT_VERSION=(pinned.root / "etc" / "debian_version").read_text(),
            ROOT_PERL=perl,
            BYSTANDER=str(bystander.pid),
        )
    finally:
        bystander.kill()
        bystander.wait()
    tap = (tmp_path / "tap" / "inside.t.tap").read_text()
    assert runs["inside.t"]["exit_code"] == 0, (
        tap + (tmp_path / "tap" / "inside.t.stderr").read_text()
    )
    assert tap.count("\nok ") == 7 and runs["inside.t"]["network"] == "private"


# A process the test file starts as Test::Nginx starts nginx (stdin from /dev/null, stdout and
# stderr to nginx's log, as the output guard does), looking for a way to the TAP the grade reads:
# the TAP file by its path (inside, a file on bwrap's own /tmp at most), prove's stdout (the
# namespace's first process) and the test file's stdout (its pipe to prove) and memory through
# /proc. What any process may read of another's (its status) stays readable.
REACHING_FOR_THE_TAP = r"""
plan(tests => 1);
system('sh', '-c', q{exec </dev/null >>"$NGINX_EVAL_NGINX_LOG" 2>&1
if [ "$(stat -c %d:%i "$TAP_FILE" 2>/dev/null)" = "$TAP_ID" ]; then
    echo "reached $TAP_FILE"
else
    echo "refused $TAP_FILE"
fi
for t in /proc/1/fd/1 "/proc/$1/fd/1" "/proc/$1/mem"; do
    if ( : >>"$t" ) 2>/dev/null; then echo "reached $t"; else echo "refused $t"; fi
done
grep -q "^TracerPid:" "/proc/$1/status" && echo "status read"
}, 'sh', $$);
ok(1, 'the process ran');
"""


def test_a_process_of_the_test_reaches_neither_the_tap_nor_prove(pinned, tmp_path):
    repo = Repo(tmp_path)
    record = repo.build("c_later")
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "reach.t").write_text(fixture_repos.TEST_HEAD + REACHING_FOR_THE_TAP)
    tap_dir = tmp_path / "tap"
    tap_file = tap_dir / "reach.t.tap"
    tap_dir.mkdir()
    tap_file.touch()  # prove's output truncates it, the same file
    tap_id = f"{tap_file.stat().st_dev}:{tap_file.stat().st_ino}"
    runs = prove_file(
        repo, record, tests / "reach.t", tap_dir, TAP_FILE=str(tap_file), TAP_ID=tap_id
    )
    assert runs["reach.t"]["exit_code"] == 0, tap_file.read_text()
    assert f"{tap_file.stat().st_dev}:{tap_file.stat().st_ino}" == tap_id
    lines = (tap_dir / "reach.t.nginx.log").read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["refused"] * 4 + ["status"], lines
    assert parse_tap("reach.t", tap_file.read_text()).results == {"reach.t:1 the process ran": True}


# -- the build key and the doctor ------------------------------------------------------------------


def test_the_build_key_changes_with_the_toolchains_digest(toolchain, tmp_path, monkeypatch):
    other = copy_with_status(toolchain, tmp_path / "other", bumped("make"))
    keys, digests = [], []
    for value in (str(toolchain.directory), str(other.directory), rootfs.HOST):
        monkeypatch.setenv(rootfs.ENV_VAR, value)
        keys.append(BuildSpec.of("a" * 40, ["--with-stream"], b"patch").key)
        digests.append(buildtoolchain.compiler_identity()["toolchain"])
    assert len(set(keys)) == 3
    assert digests == [rootfs.record(toolchain)["digest"], rootfs.record(other)["digest"], "host"]
    assert digests[0] != digests[1]


def test_the_doctor_says_what_differs_from_the_manifest(toolchain, tmp_path):
    ok = doctor.toolchain_findings(toolchain)
    assert [f.level for f in ok] == ["ok"] and "packages as its manifest says" in ok[0].what

    def changed(text):
        # make gets another version and zlib1g-dev leaves the database (the list names it).
        text = bumped("make")(text)
        return "\n\n".join(
            s for s in text.split("\n\n") if not s.startswith("Package: zlib1g-dev\n")
        )

    other = copy_with_status(toolchain, tmp_path / "other", changed)
    shutil.copy(toolchain.manifest_file, other.manifest_file)  # the manifest of before
    make = next(line for line in rootfs.recorded_manifest(toolchain) if line.startswith("make="))
    zlib = next(
        line for line in rootfs.recorded_manifest(toolchain) if line.startswith("zlib1g-dev=")
    )
    text, good = render(doctor.toolchain_findings(other))
    version = make.partition("=")[2]
    assert not good
    assert (
        f"TOOLCHAIN {other.root} differs from its manifest: make: {version} -> {version}+test"
        in text
    )
    assert f"differs from its manifest: removed {zlib} ->" in text
    assert "toolchain-packages.txt names zlib1g-dev, which" in text
    assert "run scripts/make-toolchain.sh" in text and text.endswith("doctor: 3 problem(s)")
    assert rootfs.problem(other).startswith(f"the root filesystem at {other.root} differs")

    # A root filesystem whose ccache has no cc link (Debian's trigger's gap): a warning.
    (other.root / doctor.CCACHE_CC_LINK).unlink()
    text, _ = render(doctor.toolchain_findings(other))
    assert f"has no /{doctor.CCACHE_CC_LINK}: nginx's Makefile calls cc" in text
    assert f"has no /{doctor.CCACHE_CC_LINK}" not in render(doctor.toolchain_findings(toolchain))[0]

    missing = rootfs.Toolchain(tmp_path / "none")
    text, good = render(doctor.toolchain_findings(missing))
    assert not good and f"TOOLCHAIN no root filesystem at {missing.root}" in text
    assert "NGINX_EVAL_TOOLCHAIN=host" in text


# -- the fixture pipeline with the pin on ----------------------------------------------------------


def test_the_pipeline_with_the_pin_on_records_the_toolchain(project, toolchain):
    env = {rootfs.ENV_VAR: str(toolchain.directory)}
    project.doit("run", "tiny:gold", "run=pin", env=env)
    project.render("tiny:gold", "run=pin")  # the report's toolchain is the records'
    record = rootfs.record(toolchain)
    for task in project.benchmark()["tasks"]:
        iid = task["instance_id"]
        assert project.read("gold", iid, "grade.json", run="pin")["status"] == "resolved"
        build = project.read("gold", iid, "build.json", run="pin")
        prove = project.read("gold", iid, "prove.json", run="pin")
        assert build["compiler"]["toolchain"] == record["digest"]
        assert prove["toolchain"] == record
        assert prove["environment"]["USER"] == "nginx-eval"
        assert "user root" not in prove["environment"]["TEST_NGINX_GLOBALS"]
    run = json.loads((project.results / "pin" / "run.json").read_text())
    assert run["toolchain"] == record and run["toolchains"] == [record]
    report = (project.results / "pin" / "report.md").read_text()
    assert f"| toolchain | debian-12 root filesystem {record['digest'][:12]} " in report
    # The pin off for one more command of the run: recorded beside it, and the builds are others.
    project.doit("run", "tiny:gold", "run=pin", env={rootfs.ENV_VAR: rootfs.HOST})
    run = json.loads((project.results / "pin" / "run.json").read_text())
    assert run["toolchains"] == [record, {"name": "host", "digest": None}]
    iid = project.benchmark()["tasks"][0]["instance_id"]
    assert project.read("gold", iid, "build.json", run="pin")["compiler"]["toolchain"] == "host"


def test_a_run_stops_before_any_build_when_the_toolchain_is_missing(project, tmp_path):
    proc, executed = project.doit(
        "run", "tiny:gold", env={rootfs.ENV_VAR: str(tmp_path / "none")}, check=False
    )
    assert proc.returncode != 0 and not [t for t in executed if t.startswith(("build", "base"))]
    assert (
        f"nginx-eval: error: the pinned toolchain: no root filesystem at {tmp_path}/none/root"
        in proc.stderr
    )
    proc, _ = project.doit(
        "run", "doctor", env={rootfs.ENV_VAR: str(tmp_path / "none")}, check=False
    )
    assert "TOOLCHAIN no root filesystem at" in proc.stdout and proc.returncode != 0
