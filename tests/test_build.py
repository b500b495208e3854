"""The build stage on its own (build/stage.py and the modules it runs): ensure_build with the
fixture's C program, real git, cc and make, no doit.

Timestamps (a header-only patch, a sibling base, a tree dated in the future), the verdict of a
failure (compile_failed only when the base builds; the environment's failures are env_error and
never published) and published trees (read-only, with the binary's digest).
"""

import os
import shutil
import stat
import subprocess
import time
from types import SimpleNamespace

import fixture_repos
import pytest

from nginx_eval.build import (
    cache as buildcache,
)
from nginx_eval.build import (
    mtimes as buildmtimes,
)
from nginx_eval.build import (
    stage as build,
)
from nginx_eval.build import (
    steps as buildsteps,
)
from nginx_eval.build.toolchain import compiler_identity
from nginx_eval.core import jsonio
from nginx_eval.core.layout import Layout

# Every test here starts doit, make, prove, the sandbox or the CLI (conftest.py).
E2E = True

# calc.h with every atoi() call of nginx.c multiplied by 10: a header change that still compiles
# and shows in the binary's output (`add 2 3` prints 50).
SCALED_HEADER = fixture_repos.CALC_H + "#define atoi(s) (atoi(s) * 10)\n"
BROKEN_C = fixture_repos.CALC_C % ("a + b", "a * b") + "int broken(void) { return }\n"


class Repo:
    """The fixture upstream with two more commits, its bare clone, a cache in tmp_path."""

    def __init__(self, tmp_path, template=None):
        """Made in tmp_path, or copied there from `template` (a Repo made before, untouched)."""
        self.upstream = tmp_path / "upstream"
        self.layout = Layout(
            root=tmp_path / "root", cache=tmp_path / "cache", results_root=tmp_path / "results"
        )
        self.bare = self.layout.bare_repo("acme/tiny")
        if template is not None:
            shutil.copytree(template.upstream, self.upstream, symlinks=True)
            shutil.copytree(template.bare, self.bare, symlinks=True)
            self.commits = dict(template.commits)
            return
        self.commits = fixture_repos.make_upstream(self.upstream)
        # c_later (HEAD) -> c_header (calc.h scales the arguments) -> c_broken (does not compile)
        fixture_repos.write(self.upstream / "src" / "core" / "calc.h", SCALED_HEADER)
        self.commits["c_header"] = fixture_repos.commit(self.upstream, "Scaled arguments")
        fixture_repos.write(self.upstream / "src" / "core" / "calc.c", BROKEN_C)
        self.commits["c_broken"] = fixture_repos.commit(self.upstream, "Broken")
        fixture_repos.git(self.upstream, "checkout", "-q", self.commits["c_later"])
        subprocess.run(
            ["git", "clone", "-q", "--bare", str(self.upstream), str(self.bare)],
            check=True,
            capture_output=True,
        )

    def patch(self, base, files):
        """The diff that turns `base` into `base` with `files` ({path: text}) written."""
        fixture_repos.git(self.upstream, "checkout", "-q", "-f", base)
        for path, text in files.items():
            fixture_repos.write(
                self.upstream / path, text, 0o755 if path.startswith("auto/") else 0o644
            )
        diff = subprocess.run(
            ["git", "diff", "--binary", "--full-index"],
            cwd=self.upstream,
            capture_output=True,
            check=True,
        ).stdout
        fixture_repos.git(self.upstream, "checkout", "-q", "-f", base)
        return diff

    def build(self, commit_name, patch=b""):
        return build.ensure_build(self.layout, self.bare, self.commits[commit_name], [], patch)

    def tree(self, record):
        return self.layout.build_dir(record["key"]) / "tree"

    def run(self, record, *args):
        return subprocess.run(
            [str(buildcache.binary_path(self.layout, record["key"])), *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    def log(self, record):
        return (self.layout.build_dir(record["key"]) / "build.log").read_text()

    def published(self, record):
        return (self.layout.build_dir(record["key"]) / "build.json").exists()


@pytest.fixture(scope="module")
def repo_template(tmp_path_factory):
    """The repositories made once for the module; each test gets a copy (Repo's git commands
    cost more than copying the two small trees)."""
    return Repo(tmp_path_factory.mktemp("repo-template"))


@pytest.fixture
def repo(tmp_path, repo_template):
    return Repo(tmp_path, template=repo_template)


def calc_c(add, mul="a * b"):
    return fixture_repos.CALC_C % (add, mul)


def mtime(path):
    return os.stat(path).st_mtime_ns


# -- timestamps -----------------------------------------------------------------------------------


def test_header_only_patch_recompiles_its_dependents(repo):
    base = repo.build("c_later")
    assert base["status"] == "built" and repo.run(base, "add", "2", "3") == "5"
    rec = repo.build(
        "c_later", repo.patch(repo.commits["c_later"], {"src/core/calc.h": SCALED_HEADER})
    )
    assert rec["status"] == "built" and rec["kind"] == "incremental"
    for obj in ("objs/src/core/nginx.o", "objs/src/core/calc.o", "objs/nginx"):
        assert mtime(repo.tree(rec) / obj) > mtime(repo.tree(base) / obj), obj
        assert mtime(repo.tree(rec) / obj) > mtime(repo.tree(rec) / "src/core/calc.h"), obj
    assert repo.run(rec, "add", "2", "3") == "50"


def test_build_system_patch_gets_a_clean_build(repo):
    repo.build("c_later")
    configure = (repo.upstream / "auto" / "configure").read_text()
    rec = repo.build(
        "c_later",
        repo.patch(
            repo.commits["c_later"],
            {"auto/configure": configure.replace("set -e\n", "set -e\n# patched\n")},
        ),
    )
    assert rec["status"] == "built" and rec["kind"] == "clean"
    assert "auto/configure" in repo.log(rec)


def test_sibling_base_build_has_its_own_commits_header(repo):
    first = repo.build("c_later")
    second = repo.build("c_header")
    assert first["kind"] == "clean" and second["kind"] == "sibling"
    assert "configure skipped" in repo.log(second)
    assert repo.run(first, "add", "2", "3") == "5"
    assert repo.run(second, "add", "2", "3") == "50"


def future_tree(repo, record, seconds=3600):
    """Date every file and directory of a published tree `seconds` ahead, as a clock stepped
    back since it was built (or a cache from another host) would leave it."""
    later = time.time() + seconds
    for dirpath, dirnames, filenames in os.walk(repo.tree(record)):
        for name in dirnames + filenames:
            os.utime(os.path.join(dirpath, name), (later, later), follow_symlinks=False)
    # The quick check of the binary (its stat) no longer holds; its digest does.
    assert buildcache.verify_build(repo.layout, record) is None


def test_objects_dated_in_the_future_do_not_hide_the_patch(repo):
    base = repo.build("c_later")
    future_tree(repo, base)
    rec = repo.build(
        "c_later", repo.patch(repo.commits["c_later"], {"src/core/calc.c": calc_c("a + b + 1000")})
    )
    assert rec["status"] == "built"
    assert repo.run(rec, "add", "2", "3") == "1005"
    # Files from the future are brought back to now, so make's shortcut still works.
    assert rec["kind"] == "incremental"


def test_a_make_that_did_not_rebuild_falls_back_to_a_clean_build(repo, monkeypatch):
    repo.build("c_later")
    # The first make (the incremental one) says "up to date" whatever the stamps: the proof
    # after it must notice, and a clean build decide.
    makes, real = [], buildsteps._make
    monkeypatch.setattr(
        buildsteps, "_make", lambda *a: 0 if not makes.append(a) and len(makes) == 1 else real(*a)
    )
    rec = repo.build(
        "c_later", repo.patch(repo.commits["c_later"], {"src/core/calc.c": calc_c("a + b + 1000")})
    )
    assert rec["status"] == "built" and rec["kind"] == "clean" and len(makes) == 2
    assert (
        "make did not rebuild everything: objs/src/core/calc.o is not newer than the "
        "changed src/core/calc.c; building clean" in repo.log(rec)
    )
    assert repo.run(rec, "add", "2", "3") == "1005"


def test_unproven_uses_the_compilers_dependency_files(tmp_path):
    tree = tmp_path
    files = ["src/core/a.c", "src/core/a.h", "src/os/win32/w.h", "objs/src/core/a.o", "objs/nginx"]
    for f in files:
        fixture_repos.write(tree / f, "")
    fixture_repos.write(
        tree / "objs/src/core/a.d",
        "objs/src/core/a.o: src/core/a.c /usr/include/stdio.h \\\n ./src/core/../core/a.h\n",
    )
    old, new = time.time() - 100, time.time()
    for f in files:
        os.utime(tree / f, (old, old))
    os.utime(tree / "src/core/a.h", (new, new))
    assert (
        buildmtimes.unproven(tree, ["src/core/a.h"])
        == "objs/src/core/a.o is not newer than the changed src/core/a.h"
    )
    os.utime(tree / "objs/src/core/a.o", (new + 1, new + 1))
    assert (
        buildmtimes.unproven(tree, ["src/core/a.h"])
        == "objs/nginx is not newer than the changed src/core/a.h"
    )
    os.utime(tree / "objs/nginx", (new + 1, new + 1))
    assert buildmtimes.unproven(tree, ["src/core/a.h", "README"]) is None
    # No compile reads a header of another platform: nothing to prove.
    os.utime(tree / "src/os/win32/w.h", (new + 5, new + 5))
    assert buildmtimes.unproven(tree, ["src/os/win32/w.h"]) is None


def test_stamps_put_changed_files_between_the_others_and_what_make_writes(tmp_path, monkeypatch):
    # Without waiting for the clock: the stamps lie in the past.
    monkeypatch.setattr(buildmtimes.time, "sleep", lambda s: pytest.fail("stamp_changed slept"))
    tree = tmp_path / "tree"
    files = ["src/a.c", "src/a.h", "objs/a.o", "objs/nginx", "src/b.c"]
    for f in files:
        fixture_repos.write(tree / f, "")
    now = time.time_ns()
    # As a base published a moment ago leaves them, one object even dated after now; the
    # objects newer than their sources (what make must still see as up to date).
    dated = {
        "src/a.c": now - 10**9,
        "src/a.h": now - 10**9,
        "src/b.c": now - 10**9,
        "objs/a.o": now - 10**8,
        "objs/nginx": now + 3600 * 10**9,
    }
    for f, ns in dated.items():
        os.utime(tree / f, ns=(ns, ns))
    buildmtimes.stamp_changed(tree, ["src/a.c", "src/b.c"])
    after = {f: os.stat(tree / f).st_mtime_ns for f in files}
    written = time.time_ns()
    for f in ("src/a.c", "src/b.c"):
        assert after["objs/nginx"] + buildmtimes.GAP_NS <= after[f]
        assert after[f] + buildmtimes.GAP_NS <= written
    # The unchanged files kept their order: the object is still newer than its header.
    assert after["src/a.h"] < after["objs/a.o"] < after["objs/nginx"]


# -- failures: the patch's verdict or the environment's fault -------------------------------------


def tool_dir(tmp_path, tools):
    """A directory of links to `tools` only, to stand for a PATH."""
    path = tmp_path / "bin"
    path.mkdir()
    for tool in tools:
        (path / tool).symlink_to(
            subprocess.run(
                ["sh", "-c", f"command -v {tool}"], capture_output=True, text=True
            ).stdout.strip()
        )
    return path


def test_missing_make_is_an_env_error_that_is_tried_again(repo, tmp_path, monkeypatch):
    path = os.environ["PATH"]
    compiler_identity()  # cached for the process, as in doit
    monkeypatch.setenv("PATH", str(tool_dir(tmp_path, ["cc", "git", "tar", "cp", "sh"])))
    patch = repo.patch(repo.commits["c_later"], {"src/core/calc.c": calc_c("a + b + 1")})
    failed = [repo.build("c_later"), repo.build("c_later", patch)]
    for rec in failed:
        assert rec["status"] == "env_error" and rec["reason"] == "make is not on PATH"
        assert not repo.layout.build_dir(rec["key"]).exists()
        assert (
            jsonio.read_json(repo.layout.failed_build_json(rec["key"]))["reason"]
            == "make is not on PATH"
        )
    task = SimpleNamespace(
        repo="acme/tiny", instance_id="t", base_commit=repo.commits["c_later"], configure_flags=[]
    )
    assert not build.base_build_published(repo.layout, task)
    # The doit task's record says env_error, with the reason and a log, and is not up to date.
    jsonio.write_bytes(repo.layout.model_patch("m", "t"), patch)
    config, file_dep = {}, [str(repo.layout.model_patch("m", "t"))]
    build.build_task(repo.layout, "m", task, "build:b/m/t", config, file_dep)
    result = jsonio.read_json(repo.layout.build_json("m", "t"))
    assert result["status"] == "env_error" and result["reason"] == "make is not on PATH"
    assert "make is not on PATH" in repo.layout.build_log("m", "t").read_text()
    assert not buildcache.result_build_ok(repo.layout, "m", "t")
    # Once make is back, the same build succeeds, in ensure_build and in the doit task.
    monkeypatch.setenv("PATH", path)
    build.build_task(repo.layout, "m", task, "build:b/m/t", config, file_dep)
    result = jsonio.read_json(repo.layout.build_json("m", "t"))
    assert result["status"] == "built" and buildcache.result_build_ok(repo.layout, "m", "t")
    rec = repo.build("c_later", patch)
    assert rec["status"] == "built" and repo.run(rec, "add", "2", "3") == "6"
    assert build.base_build_published(repo.layout, task)
    # A successful build leaves no failure record behind, and an old env_error record stays
    # stale although its build is published now.
    assert not repo.layout.failed_build_json(rec["key"]).exists()
    assert not any(buildcache.build_is_published(repo.layout, r) for r in failed)


def test_base_that_does_not_build_makes_every_candidate_an_env_error(repo, monkeypatch):
    clean_builds = []
    real = buildsteps.build_clean
    monkeypatch.setattr(buildsteps, "build_clean", lambda *a: clean_builds.append(a[3]) or real(*a))
    broken = repo.commits["c_broken"]
    rec = repo.build("c_broken", repo.patch(broken, {"README": "changed\n"}))
    assert rec["status"] == "env_error" and "the base build" in rec["reason"]
    assert "the base commit does not build (make exited with 2" in rec["reason"]
    base_key = buildcache.BuildSpec(broken, ()).key
    for key in (rec["key"], base_key):
        assert not repo.layout.build_dir(key).exists()
    # The candidate's log, for its results, holds the base's.
    assert "int broken(void) { return }" in repo.layout.failed_build_log(rec["key"]).read_text()
    assert clean_builds == [broken]
    # Another candidate in the same process: the base is not tried again.
    rec = repo.build("c_broken", repo.patch(broken, {"README": "other\n"}))
    assert rec["status"] == "env_error" and clean_builds == [broken]
    # A build-system patch builds clean; failing where the base does not build, it is not
    # the patch's fault either.
    configure = (repo.upstream / "auto" / "configure").read_text()
    rec = repo.build(
        "c_broken",
        repo.patch(
            broken, {"auto/configure": configure.replace("set -e\n", "set -e\n# patched\n")}
        ),
    )
    assert rec["status"] == "env_error" and rec["kind"] == "clean"
    assert rec["reason"].startswith("the base commit does not build here")
    assert not repo.published(rec)


def test_compile_error_where_the_base_builds_is_a_cached_verdict(repo, monkeypatch):
    patch = repo.patch(repo.commits["c_later"], {"src/core/calc.c": BROKEN_C})
    rec = repo.build("c_later", patch)
    assert rec["status"] == "compile_failed" and rec["kind"] == "incremental"
    assert repo.published(rec) and "error" in repo.log(rec)
    monkeypatch.setattr(build, "_build_tree", None)  # a second build would fail here
    assert repo.build("c_later", patch) == rec


def test_compiler_killed_is_an_env_error_but_a_patch_cannot_forge_it(repo, tmp_path, monkeypatch):
    repo.build("c_later")
    killed = "cc: fatal error: Killed signal terminated program cc1"
    forged = repo.patch(
        repo.commits["c_later"],
        {"src/core/calc.c": f'#error "{killed}"\n#include "{killed}"\n' + calc_c("a + b")},
    )
    rec = repo.build("c_later", forged)
    assert rec["status"] == "compile_failed" and killed in repo.log(rec)
    # A cc that the kernel killed while compiling calc.c (as gcc reports it).
    fake = tmp_path / "fake" / "cc"
    fixture_repos.write(
        fake,
        f"""#!/bin/sh
case "$*" in *calc.c*) echo "{killed}" >&2; echo "compilation terminated." >&2; exit 1;; esac
exec /usr/bin/cc "$@"
""",
        0o755,
    )
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    rec = repo.build(
        "c_later", repo.patch(repo.commits["c_later"], {"src/core/calc.c": calc_c("a + b + 7")})
    )
    assert rec["status"] == "env_error" and not repo.published(rec)
    assert rec["reason"] == f"the compiler was killed (out of memory?): {killed}"


def test_failure_on_a_full_disk_is_an_env_error(repo, monkeypatch):
    repo.build("c_later")
    monkeypatch.setattr(buildsteps, "_free_bytes", lambda path: 1 << 20)
    rec = repo.build("c_later", repo.patch(repo.commits["c_later"], {"src/core/calc.c": BROKEN_C}))
    assert rec["status"] == "env_error" and rec["reason"].startswith("only 1 MiB free in ")
    assert not repo.published(rec)


# -- published builds ----------------------------------------------------------------------------


def test_published_tree_is_read_only_with_the_binarys_digest(repo):
    rec = repo.build("c_later")
    binary = buildcache.binary_path(repo.layout, rec["key"])
    assert rec["binary_sha256"] == jsonio.file_digest(binary)
    for dirpath, _dirnames, filenames in os.walk(repo.tree(rec)):
        for name in [dirpath] + [os.path.join(dirpath, f) for f in filenames]:
            assert not os.lstat(name).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), name
    buildcache.remove_build(repo.layout, rec["key"])
    assert not repo.layout.build_dir(rec["key"]).exists()


def tamper(repo, record):
    binary = buildcache.binary_path(repo.layout, record["key"])
    binary.chmod(0o755)  # root could write to it anyway
    with open(binary, "ab") as f:
        f.write(b"\0")


def test_tampered_binary_is_detected_and_its_base_rebuilt_clean(repo):
    base = repo.build("c_later")
    assert buildcache.verify_build(repo.layout, base) is None
    tamper(repo, base)
    assert "changed after it was published" in buildcache.verify_build(repo.layout, base)
    task = SimpleNamespace(base_commit=repo.commits["c_later"], configure_flags=[])
    assert not build.base_build_published(repo.layout, task)
    assert not buildcache.build_is_published(repo.layout, base)
    # The next build that starts from it builds it again first, clean.
    rec = repo.build(
        "c_later", repo.patch(repo.commits["c_later"], {"src/core/calc.c": calc_c("a + b + 1")})
    )
    assert rec["status"] == "built" and rec["kind"] == "incremental"
    assert repo.run(rec, "add", "2", "3") == "6"
    rebuilt = repo.build("c_later")
    assert rebuilt["kind"] == "clean" and buildcache.verify_build(repo.layout, rebuilt) is None
    assert f"published build {base['key']} is not intact" in repo.log(rebuilt)
    assert repo.run(rebuilt, "add", "2", "3") == "5"


def test_a_result_of_a_build_made_again_is_checked_by_stat_and_tampering_still_shows(
    repo, monkeypatch
):
    """A result's copy of a build record keeps the binary's stat of its day; once the cache entry
    was removed and built again (same key, same binary, new stat), the cache's own record
    answers by stat, without hashing the binary. A binary changed since still shows."""
    first = repo.build("c_later")
    buildcache.remove_build(repo.layout, first["key"])
    again = repo.build("c_later")
    assert again["key"] == first["key"] and again["binary_stat"] != first["binary_stat"]
    assert again["binary_sha256"] == first["binary_sha256"]
    with monkeypatch.context() as m:
        m.setattr(jsonio, "file_digest", lambda path: pytest.fail(f"hashed {path}"))
        assert buildcache.build_is_published(repo.layout, first)
    tamper(repo, again)
    assert not buildcache.build_is_published(repo.layout, first)


def test_tampered_sibling_is_rebuilt_clean_before_a_base_starts_from_it(repo):
    first = repo.build("c_later")
    tamper(repo, first)
    second = repo.build("c_header")
    assert second["kind"] == "sibling" and repo.run(second, "add", "2", "3") == "50"
    assert f"build {first['key']} is not intact" in repo.log(second)
    assert "rebuilding it clean" in repo.log(second)
    rebuilt = repo.build("c_later")
    assert rebuilt["kind"] == "clean" and buildcache.verify_build(repo.layout, rebuilt) is None
