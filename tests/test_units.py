"""Fast tests of the pure parts: task-file validation, mode parsing, patch statistics, build order."""

import copy
import json

import fixture_repos
import pytest

from nginx_eval.benchmark import load_benchmark
from nginx_eval.errors import UserError
from nginx_eval.modes import fill_command, get_mode, parse_modes
from nginx_eval.patch import patch_stats

GOOD = {
    "instance_id": "x-1", "repo": "nginx/nginx", "test_repo": "nginx/nginx-tests",
    "base_commit": "a" * 40, "fix_commit": "b" * 40, "test_commit": "c" * 40,
    "test_files": ["h2.t"], "configure_flags": ["--with-http_v2_module"],
    "fail_to_pass": ["h2.t:3 body"], "pass_to_pass": ["h2.t:1 first", "h2.t:2"],
    "problem_statement": "requests hang",
}


def write(tmp_path, tasks, name="bench"):
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps({"tasks": tasks}) if not isinstance(tasks, str) else tasks)
    return p


def error_of(tmp_path, tasks):
    with pytest.raises(UserError) as e:
        load_benchmark(write(tmp_path, tasks))
    return str(e.value)


def test_good_file_loads(tmp_path):
    bench = load_benchmark(write(tmp_path, [GOOD]))
    assert bench.name == "bench" and bench.tasks[0].test_files == ("h2.t",)
    assert len(bench.digest) == 64


@pytest.mark.parametrize("field,value,expect", [
    ("base_commit", "HEAD", "full 40-hex"),
    ("fix_commit", "abc1234", "full 40-hex"),
    ("test_commit", "main", "full 40-hex"),
    ("test_files", [], "must not be empty"),
    ("test_files", ["../x.t"], "relative path"),
    ("fail_to_pass", [], "must not be empty"),
    ("fail_to_pass", ["other.t:1"], "names no file"),
    ("pass_to_pass", ["h2.t:3 body"], "also listed"),
    ("pass_to_pass", ["h2.t:1 first", "h2.t:1 first"], "duplicate"),
    ("configure_flags", "--with-x", "must be a list"),
    ("repo", "nginx", "owner/name"),
    ("problem_statement", " ", "must not be empty"),
])
def test_bad_fields_name_file_task_and_field(tmp_path, field, value, expect):
    task = dict(GOOD, **{field: value})
    message = error_of(tmp_path, [task])
    assert "bench.json" in message and "task x-1" in message and f"field {field}" in message
    assert expect in message


def test_missing_field_duplicate_id_and_malformed_json(tmp_path):
    task = dict(GOOD)
    del task["test_files"]
    assert "field test_files: is missing" in error_of(tmp_path, [task])
    assert "duplicate instance_id" in error_of(tmp_path, [GOOD, copy.deepcopy(GOOD)])
    assert "malformed JSON at line 1" in error_of(tmp_path, '{"tasks": [')
    assert "unknown field(s) colour" in error_of(tmp_path, [dict(GOOD, colour="red")])


def test_modes_parse_and_errors(tmp_path):
    modes = parse_modes({"modes": {"a": {"model": "m", "phases": [
        {"name": "p", "command": "agent {prompt} --model {model} ${X:-y}", "timeout": 5}]}}}, "m.toml")
    assert set(modes) == {"a", "gold", "none"}
    assert modes["a"].phases[0].timeout == 5.0
    assert fill_command(modes["a"].phases[0].command, {"prompt": "it's", "model": "m"}) == \
        "agent 'it'\"'\"'s' --model m ${X:-y}"
    with pytest.raises(UserError, match="unknown placeholder {promt}"):
        parse_modes({"modes": {"a": {"phases": [{"command": "x {promt}"}]}}}, "m.toml")
    with pytest.raises(UserError, match="built in"):
        parse_modes({"modes": {"gold": {"phases": [{"command": "x"}]}}}, "m.toml")
    with pytest.raises(UserError, match="known modes: a, gold, none"):
        get_mode(modes, "raw")


def test_patch_stats():
    patch = (b"diff --git a/src/x.c b/src/x.c\n--- a/src/x.c\n+++ b/src/x.c\n@@ -1 +1,2 @@\n"
             b"-old\n+new\n+more\n")
    assert patch_stats(patch) == {"files": ["src/x.c"], "lines_added": 2, "lines_removed": 1,
                                  "binary": False}


def test_configure_leaves_out_debug_info_and_keeps_the_tasks_cc_opt():
    from nginx_eval.build import configure_argv
    assert configure_argv([]) == ["./auto/configure", "--with-cc-opt=-g0 -MD"]
    assert configure_argv(["--with-stream", "--with-cc-opt=-DX=1"]) == \
        ["./auto/configure", "--with-stream", "--with-cc-opt=-DX=1 -g0 -MD"]


def test_configure_test_programs_are_compiled_once(tmp_path):
    """feature_test_cc.sh, the `cc` configure runs: a test program that built is copied back
    the next time the same command and source come (a different source, a failed test, or any
    other call reaches the compiler), with the compiler's messages."""
    import os
    import shutil
    import subprocess
    from nginx_eval.build import configure_env
    from nginx_eval.layout import Layout
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    calls = tmp_path / "compiler-calls"
    real = tmp_path / "real-cc"
    real.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {shutil.which("cc")} "$@"\n')
    real.chmod(0o755)
    env = configure_env(layout, dict(os.environ))
    env["NGINX_EVAL_REAL_CC"] = str(real)
    objs = tmp_path / "tree" / "objs"
    objs.mkdir(parents=True)

    def feature_test(source):
        """configure's way: write objs/autotest.c, build objs/autotest, run it, remove both."""
        (objs / "autotest.c").write_text(source)
        cc = subprocess.run(["cc", "-o", "objs/autotest", "objs/autotest.c"], env=env,
                            cwd=objs.parent, capture_output=True, text=True)
        run = subprocess.run(["objs/autotest"], cwd=objs.parent, capture_output=True, text=True) \
            if cc.returncode == 0 else None
        for f in objs.glob("autotest*"):
            f.unlink()
        return cc.returncode, cc.stderr, run and run.stdout

    def compiled():
        return len(calls.read_text().splitlines()) if calls.exists() else 0

    warns = ('#include <stdio.h>\n'
             'int main(void) { int unused; printf("%d", (int) sizeof(long)); }\n')
    # configure finds the wrapper first on its PATH, with the real compiler behind it.
    assert shutil.which("cc", path=env["PATH"]) == str(layout.feature_tests / "bin" / "cc")
    first = feature_test(warns.replace("int unused;", "int unused = 0;"))
    assert first[0] == 0 and first[2] == "8" and compiled() == 1
    again = feature_test(warns.replace("int unused;", "int unused = 0;"))
    assert again == first and compiled() == 1                    # copied back, and it runs
    (objs / "autotest.c").write_text(warns)
    with_warning = subprocess.run(["cc", "-Wall", "-o", "objs/autotest", "objs/autotest.c"],
                                  env=env, cwd=objs.parent, capture_output=True, text=True)
    assert with_warning.returncode == 0 and "unused" in with_warning.stderr and compiled() == 2
    (objs / "autotest").unlink()
    replay = subprocess.run(["cc", "-Wall", "-o", "objs/autotest", "objs/autotest.c"],
                            env=env, cwd=objs.parent, capture_output=True, text=True)
    assert replay.returncode == 0 and replay.stderr == with_warning.stderr and compiled() == 2
    assert (objs / "autotest").stat().st_mode & 0o111
    broken = "int main(void) { return missing_function(); }\n"
    assert feature_test(broken)[0] != 0 and compiled() == 3
    assert feature_test(broken)[0] != 0 and compiled() == 4      # failures are not kept
    assert subprocess.run(["cc", "--version"], env=env, capture_output=True).returncode == 0
    assert compiled() == 5                                       # other calls pass through
    # Another compiler or another state of the system's packages: compiled again.
    env["NGINX_EVAL_CC_ID"] = "another"
    feature_test(warns.replace("int unused;", "int unused = 0;"))
    assert compiled() == 6


def clone_with_commits(tmp_path, changes):
    """A Layout whose bare clone of o/n has one commit per (auto/configure text, path written)
    in `changes`, and the commit ids."""
    import subprocess
    from nginx_eval.layout import Layout
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    src = tmp_path / "src"
    (src / "auto").mkdir(parents=True)
    env = dict(fixture_repos.ENV, HOME=str(tmp_path))
    git = lambda *a: subprocess.run(["git", *a], cwd=src, env=env, check=True,
                                    capture_output=True, text=True).stdout.strip()
    git("init", "-q")
    commits = []
    for auto, path in changes:
        (src / "auto" / "configure").write_text(auto)
        (src / path).write_text(str(len(commits)))
        git("add", "-A")
        git("commit", "-q", "-m", str(len(commits)))
        commits.append(git("rev-parse", "HEAD"))
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(layout.bare_repo("o/n"))],
                   check=True, env=env)
    return layout, commits


def build_task(iid, base, fix=None, flags=()):
    from types import SimpleNamespace
    return SimpleNamespace(instance_id=iid, repo="o/n", base_commit=base, fix_commit=fix or base,
                           configure_flags=flags)


def test_builds_start_one_build_group_at_a_time(tmp_path):
    """Tasks of one group (same auto/ tree and flags) are spread out, not run back to back."""
    from nginx_eval.build import interleave_by_build_group
    layout, commits = clone_with_commits(tmp_path, [("v1", "main.c"), ("v1", "main.c"),
                                                    ("v2", "main.c"), ("v1", "main.c")])
    tasks = [build_task("a", commits[0]), build_task("b", commits[1]),
             build_task("c", commits[3]), build_task("d", commits[2]),
             build_task("e", commits[0], flags=("--with-x",))]
    order = [t.instance_id for t in interleave_by_build_group(layout, tasks)]
    # groups: {a, b, c} (auto v1, no flags), {d} (auto v2), {e} (other flags)
    assert order == ["a", "d", "e", "b", "c"]


def test_builds_whose_fixes_touch_headers_start_first(tmp_path):
    """Among build groups of one size, the group whose fix changes a header (a long rebuild)
    starts first; fixes_touching_headers reads that from the clone."""
    from nginx_eval.build import fixes_touching_headers, interleave_by_build_group
    layout, commits = clone_with_commits(tmp_path, [("v1", "a.c"), ("v1", "a.c"),
                                                    ("v2", "a.c"), ("v2", "a.h")])
    source_fix = build_task("source-fix", commits[0], commits[1])     # group auto v1
    header_fix = build_task("header-fix", commits[2], commits[3])     # group auto v2
    assert fixes_touching_headers(layout, [source_fix, header_fix]) == {"header-fix"}
    order = interleave_by_build_group(layout, [source_fix, header_fix])
    assert [t.instance_id for t in order] == ["header-fix", "source-fix"]


def test_base_builds_of_a_group_start_from_their_closest_sibling(tmp_path):
    """The bases of one build group wait for the base they are closest to (a changed header
    costs far more than a changed source), not all for the group's first."""
    from nginx_eval.build import base_build_plan, base_task_name, changed_paths
    layout, c = clone_with_commits(tmp_path, [("v1", "main.c"), ("v1", "x.h"), ("v1", "y.c"),
                                              ("v1", "z.c"), ("v2", "main.c")])
    # c[0] -> c[1]: a header; c[1] -> c[2] -> c[3]: one source each; c[4]: another auto/.
    tasks = [build_task("root", c[0]), build_task("far", c[3]), build_task("near-root", c[1]),
             build_task("middle", c[2]), build_task("other-group", c[4])]
    assert changed_paths(layout.bare_repo("o/n"), [(c[0], c[2]), (c[3], c[3])]) == \
        [["x.h", "y.c"], []]
    plan = {task.instance_id: parent for _, task, parent in base_build_plan(layout, tasks)}
    name = {t.instance_id: base_task_name(t) for t in tasks}
    assert plan == {"root": None, "other-group": None, "near-root": name["root"],
                    "middle": name["near-root"], "far": name["middle"]}


def test_patch_stats_read_plain_unified_diffs_too():
    """Predictions made elsewhere often lack `diff --git` headers; their files still count (and a
    plain diff touching auto/ still means a clean build)."""
    plain = (b"--- a/src/core/x.c\t2024-01-01\n+++ b/src/core/x.c\n@@ -1 +1,2 @@\n a\n+b\n"
             b"--- a/auto/options\n+++ /dev/null\n@@ -1 +0,0 @@\n-z\n")
    stats = patch_stats(plain)
    assert stats["files"] == ["src/core/x.c", "auto/options"]
    assert (stats["lines_added"], stats["lines_removed"]) == (1, 1)
    git = (b"diff --git a/q.c b/q.c\nindex 1..2 100644\n--- a/q.c\n+++ b/q.c\n@@ -1 +1 @@\n-a\n+b\n")
    assert patch_stats(git)["files"] == ["q.c"]
