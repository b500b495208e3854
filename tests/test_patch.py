"""Unit tests of patch/stage.py on small real git repositories: what an agent's workspace diff
leaves out, which paths a patch touches as `git apply -p1` reads it, and a patch's statistics."""

import json
import os
import subprocess

import pytest

from nginx_eval.build.stage import touches_build_system
from nginx_eval.core.gitcmd import isolated_env
from nginx_eval.core.layout import Layout
from nginx_eval.patch.stage import (
    patch_stats,
    take_patch,
    touched_paths,
    workspace_diff,
    write_patch,
)
from nginx_eval.run.benchmark import Task
from nginx_eval.run.modes import AgentMode
from nginx_eval.workspace.stage import create_workspace, mark_agent_started

REPO = "nginx/nginx"
# An object file as make leaves it: not text, and bigger than any source change.
OBJECT_BYTES = b"\x7fELF\x02\x01\x01\0" + bytes(range(256)) * 16


def git(cwd, *args, check=True):
    # No user or system configuration (diff.noprefix, diff.renames...) may change what git writes.
    env = dict(os.environ, **isolated_env({"GIT_CONFIG_GLOBAL": os.devnull}))
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=check, capture_output=True).stdout


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)


def make_upstream(path, files):
    """A repository with one commit holding `files` (no .gitignore unless given); its sha."""
    path.mkdir()
    git(path, "init", "-q", "--initial-branch", "main")
    for name, data in files.items():
        write(path / name, data)
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    return git(path, "rev-parse", "HEAD").decode().strip()


NGINX_LIKE = {
    "auto/configure": "#!/bin/sh\n. auto/options\n",
    "auto/options": "help=no\n",
    "src/core/nginx.c": "int main(void)\n{\n    return 0;\n}\n",
    "src/core/ngx_string.c": "/* strings */\nint ngx_len;\n",
    "README": "nginx\n",
}


def harness_workspace(tmp_path, files=NGINX_LIKE):
    """A bare clone in the cache and an agent's workspace made from it as the harness makes them:
    (layout, task, workspace path)."""
    base = make_upstream(tmp_path / "upstream", files)
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    bare = layout.bare_repo(REPO)
    bare.parent.mkdir(parents=True)
    git(tmp_path, "clone", "-q", "--bare", str(tmp_path / "upstream"), str(bare))
    task = Task(
        instance_id="nginx-1",
        repo=REPO,
        test_repo="nginx/nginx-tests",
        base_commit=base,
        fix_commit=base,
        test_commit=base,
        test_files=("x.t",),
        configure_flags=(),
        fail_to_pass=("x.t:1",),
        pass_to_pass=(),
        problem_statement="strings are too long",
    )
    create_workspace(layout, "agent", task)
    return layout, task, layout.workspace("agent", task.instance_id)


def build_nginx(ws):
    """What ./auto/configure && make leave behind, binaries included."""
    write(ws / "Makefile", "default: build\n")
    write(ws / "objs" / "Makefile", "build: objs/nginx\n")
    write(ws / "objs" / "ngx_auto_config.h", "#define NGX_LINUX 1\n")
    write(ws / "objs" / "src" / "core" / "nginx.o", OBJECT_BYTES)
    write(ws / "objs" / "src" / "core" / "ngx_string.o", OBJECT_BYTES[::-1])
    write(ws / "objs" / "nginx", OBJECT_BYTES * 2)


BUILT = [
    {"path": ".issue.md", "files": 1, "reason": "harness file"},
    {"path": "Makefile", "files": 1, "reason": "build output"},
    {"path": "objs/", "files": 5, "reason": "build output"},
]


@pytest.mark.parametrize("gitignore", [False, True], ids=["no-gitignore", "gitignore"])
def test_build_outputs_and_harness_files_stay_out_of_the_patch(tmp_path, gitignore):
    """Half of the nginx bases have no .gitignore: the patch must not carry what configure and
    make wrote, nor the plan the agent was asked for; patch.json says what was left out, the
    same with or without a .gitignore."""
    files = dict(NGINX_LIKE, **({".gitignore": "/Makefile\n/objs/\n"} if gitignore else {}))
    layout, task, ws = harness_workspace(tmp_path, files)
    build_nginx(ws)
    write(ws / ".plan.md", "Shorten ngx_len.\n")
    write(ws / "src/core/ngx_string.c", "/* strings */\nint ngx_len = 1;\n")
    write(ws / "src/core/ngx_new.c", "int ngx_new;\n")

    patch, skipped, left_out = workspace_diff(layout.bare_repo(REPO), ws, task.base_commit)

    stats = patch_stats(patch)
    assert stats["files"] == ["src/core/ngx_new.c", "src/core/ngx_string.c"]
    assert not stats["binary"] and skipped == []
    assert b"objs" not in patch and b"Makefile" not in patch and b"plan" not in patch
    assert left_out == [
        BUILT[0],
        {"path": ".plan.md", "files": 1, "reason": "harness file"},
        *BUILT[1:],
    ]
    # The patch applies to the base as it is (what the build stage does).
    (tmp_path / "model.patch").write_bytes(patch)
    check = tmp_path / "check"
    git(tmp_path, "clone", "-q", str(tmp_path / "upstream"), str(check))
    git(check, "apply", "-p1", str(tmp_path / "model.patch"))
    assert (check / "src/core/ngx_new.c").read_text() == "int ngx_new;\n"


def test_agent_that_only_built_gives_an_empty_patch(tmp_path):
    layout, task, ws = harness_workspace(tmp_path)
    build_nginx(ws)
    patch, skipped, left_out = workspace_diff(layout.bare_repo(REPO), ws, task.base_commit)
    assert (patch, skipped, left_out) == (b"", [], BUILT)


def test_left_out_paths_stay_out_even_when_tracked(tmp_path):
    """A base that tracks a root Makefile or a .plan.md: the agent's changes to them (make
    rewriting the Makefile, a plan deleted when done) are not part of its fix either; a tracked
    file elsewhere still is."""
    files = dict(
        NGINX_LIKE,
        **{
            "Makefile": "old\n",
            ".plan.md": "old plan\n",
            "objs/README": "tracked\n",
            "objs/same.h": "unchanged\n",
        },
    )
    layout, task, ws = harness_workspace(tmp_path, files)
    write(ws / "Makefile", "regenerated\n")
    (ws / ".plan.md").unlink()
    write(ws / "objs" / "README", "changed\n")
    write(ws / "objs" / "nginx.o", OBJECT_BYTES)
    write(ws / "README", "nginx, fixed\n")

    patch, skipped, left_out = workspace_diff(layout.bare_repo(REPO), ws, task.base_commit)

    assert patch_stats(patch)["files"] == ["README"]
    assert left_out == [
        {"path": ".issue.md", "files": 1, "reason": "harness file"},
        {"path": ".plan.md", "files": 1, "reason": "harness file"},
        {"path": "Makefile", "files": 1, "reason": "build output"},
        {"path": "objs/", "files": 2, "reason": "build output"},
    ]


def test_patch_json_lists_what_was_left_out(tmp_path):
    layout, task, ws = harness_workspace(tmp_path)
    mark_agent_started(layout, "agent", task)
    build_nginx(ws)
    write(ws / ".plan.md", "plan\n")
    write(ws / "src/core/nginx.c", "int main(void)\n{\n    return 1;\n}\n")
    write(ws / "core.dump", b"\0" * ((1 << 20) + 1))

    write_patch(layout, AgentMode(name="agent"), task, {}, [])

    record = json.loads(layout.patch_json("agent", task.instance_id).read_text())
    assert record["files"] == ["src/core/nginx.c"]
    assert record["skipped_files"] == [{"path": "core.dump", "bytes": (1 << 20) + 1}]
    assert record["left_out"] == [
        BUILT[0],
        {"path": ".plan.md", "files": 1, "reason": "harness file"},
        *BUILT[1:],
    ]
    patch = layout.model_patch("agent", task.instance_id).read_bytes()
    assert patch_stats(patch)["files"] == ["src/core/nginx.c"]


@pytest.mark.parametrize(
    "status,error",
    [
        ("infra_error", "phase solve: API error 500 after 3 attempts"),
        ("not_run", "the run's budget of $5.00 was spent before this agent started"),
    ],
)
def test_an_agent_run_that_did_not_finish_has_an_empty_patch(tmp_path, status, error):
    """An infra error or a run the budget left out: nothing of the workspace is scored (not
    even a half-made change), and patch.json says why; a not_run agent never started, so its
    fresh workspace is no error either. A completed run takes the diff again."""
    layout, task, ws = harness_workspace(tmp_path)
    if status == "infra_error":
        mark_agent_started(layout, "agent", task)
    write(ws / "src/core/nginx.c", "int main(void)\n{\n    return 1;\n}\n")
    agent_json = layout.agent_json("agent", task.instance_id)
    agent_json.parent.mkdir(parents=True, exist_ok=True)
    agent_json.write_text(json.dumps({"status": status, "error": error}))
    mode = AgentMode(name="agent")

    write_patch(layout, mode, task, {}, [])

    record = json.loads(layout.patch_json("agent", task.instance_id).read_text())
    assert layout.model_patch("agent", task.instance_id).read_bytes() == b""
    assert (record["files"], record["bytes"], record["left_out"]) == ([], 0, [])
    assert record["note"] == (
        f"no patch: the agent run ended in {status} ({error}); `doit run` runs it again"
    )
    mark_agent_started(layout, "agent", task)
    agent_json.write_text(json.dumps({"status": "completed", "error": ""}))
    write_patch(layout, mode, task, {}, [])
    record = json.loads(layout.patch_json("agent", task.instance_id).read_text())
    assert record["files"] == ["src/core/nginx.c"] and record["note"] == ""


@pytest.mark.parametrize(
    "status,keep,kept",
    [
        ("completed", False, False),  # the default: the workspace goes with its stamp
        ("completed", True, True),  # keep_workspaces=1
        ("infra_error", False, True),  # the run will be tried again: nothing is taken from it
    ],
)
def test_take_patch_removes_a_finished_agent_s_workspace(tmp_path, status, keep, kept):
    layout, task, ws = harness_workspace(tmp_path)
    mark_agent_started(layout, "agent", task)
    write(ws / "src/core/nginx.c", "int main(void)\n{\n    return 1;\n}\n")
    agent_json = layout.agent_json("agent", task.instance_id)
    agent_json.parent.mkdir(parents=True, exist_ok=True)
    agent_json.write_text(json.dumps({"status": status, "error": ""}))
    mode = AgentMode(name="agent")

    take_patch(layout, mode, task, keep, {}, [])

    stamp = layout.workspace_stamp("agent", task.instance_id)
    assert (ws.is_dir(), stamp.exists()) == (kept, kept)
    patch = layout.model_patch("agent", task.instance_id).read_bytes()
    assert (b"return 1;" in patch) == (status == "completed")
    if not kept:
        # Taken again without its workspace: the diff it took stays (not a diff of nothing).
        take_patch(layout, mode, task, keep, {}, [])
        assert layout.model_patch("agent", task.instance_id).read_bytes() == patch
        assert not ws.exists()


# -- touched_paths ------------------------------------------------------------------------------


def diff_of(tmp_path, change, *diff_args):
    """`git diff <diff_args>` of the change `change(work tree)` makes to an nginx-like commit."""
    repo = tmp_path / "diffrepo"
    make_upstream(repo, NGINX_LIKE)
    change(repo)
    git(repo, "add", "-A")
    return git(repo, "diff", "--cached", *diff_args)


def applies_to(tmp_path, patch, *paths):
    """What `git apply -p1` (the build stage) reads from `patch`: --numstat's paths, after it has
    checked that the patch applies to the nginx-like commit."""
    tree = tmp_path / "applytree"
    make_upstream(tree, NGINX_LIKE)
    (tmp_path / "p.patch").write_bytes(patch)
    git(tree, "apply", "-p1", "--check", str(tmp_path / "p.patch"))
    numstat = git(tree, "apply", "-p1", "--numstat", "-z", str(tmp_path / "p.patch"))
    return numstat


def test_touched_paths_see_a_rename_out_of_auto(tmp_path):
    def rename(repo):
        os.rename(repo / "auto/options", repo / "src/options")
        with open(repo / "src/core/nginx.c", "a") as f:
            f.write("/* more */\n")

    patch = diff_of(tmp_path, rename, "-M", "--binary", "--full-index")
    assert b"rename from auto/options" in patch
    assert touched_paths(patch) == ["src/core/nginx.c", "auto/options", "src/options"]
    assert touches_build_system(touched_paths(patch))
    # What the build stage looked at before: the new name only, so an incremental build.
    assert not touches_build_system(patch_stats(patch)["files"])
    assert b"src/options" in applies_to(tmp_path, patch)


def test_touched_paths_see_a_copy_out_of_auto(tmp_path):
    def copy(repo):
        write(repo / "src/configure.sh", (repo / "auto/configure").read_bytes())

    patch = diff_of(tmp_path, copy, "-C", "-C")
    assert b"copy from auto/configure" in patch
    assert touched_paths(patch) == ["auto/configure", "src/configure.sh"]
    assert touches_build_system(touched_paths(patch))
    assert not touches_build_system(patch_stats(patch)["files"])
    applies_to(tmp_path, patch)


def test_touched_paths_strip_the_first_component_of_plain_diffs(tmp_path):
    """Predictions made elsewhere: `diff -ruN x y`, applied with `git apply -p1`."""
    for side in ("x", "y"):
        for name, data in NGINX_LIKE.items():
            write(tmp_path / side / name, data)
    write(tmp_path / "y/auto/configure", "#!/bin/sh\n. auto/options\n. auto/cc\n")
    write(tmp_path / "y/src/core/ngx_string.c", "/* strings */\nint ngx_len = 2;\n")
    plain = subprocess.run(["diff", "-ruN", "x", "y"], cwd=tmp_path, capture_output=True).stdout
    assert plain.startswith(b"diff -ruN x/auto/configure y/auto/configure\n--- x/auto/configure\t")

    assert touched_paths(plain) == ["auto/configure", "src/core/ngx_string.c"]
    assert touches_build_system(touched_paths(plain))
    assert applies_to(tmp_path, plain).split(b"\0")[:-1] == [
        b"1\t0\tauto/configure",
        b"1\t1\tsrc/core/ngx_string.c",
    ]

    only_source = plain[plain.index(b"diff -ruN x/src") :]
    assert touched_paths(only_source) == ["src/core/ngx_string.c"]
    assert not touches_build_system(touched_paths(only_source))


def test_touched_paths_unquote_git_names_and_skip_dev_null(tmp_path):
    odd = 'auto/na\u00efve "cc".sh'

    def add_and_delete(repo):
        write(repo / odd, "cc=gcc\n")
        write(repo / "src/with space.c", "int x;\n")
        (repo / "README").unlink()

    patch = diff_of(tmp_path, add_and_delete, "--binary")
    assert b'"b/auto/na\\303\\257ve \\"cc\\".sh"' in patch
    assert b"--- /dev/null" in patch and b"+++ /dev/null" in patch
    assert touched_paths(patch) == ["README", odd, "src/with space.c"]
    assert b'na\xc3\xafve "cc".sh' in applies_to(tmp_path, patch)


def test_touched_paths_take_no_hunk_line_for_a_header():
    """A removed `-- x` line reads `--- x`, an added `++ y` one `+++ y`: body, not names."""
    patch = (
        b"diff --git a/src/x.lua b/src/x.lua\n--- a/src/x.lua\n+++ b/src/x.lua\n"
        b"@@ -1,2 +1,2 @@\n--- q/auto/configure\n+++ q/auto/options\n context\n"
    )
    assert touched_paths(patch) == ["src/x.lua"]
    # Malformed names from elsewhere give what can be read, never an exception.
    assert "x" in touched_paths(b'diff --git "a/x\\1y b/x\n--- "a/x\\1\n+++ b/x\n')
    assert touched_paths(b'diff --git "a/\\1" "b/\\1"\n') == ["\x01"]


# -- patch_stats --------------------------------------------------------------------------------


def test_patch_stats():
    patch = (
        b"diff --git a/src/x.c b/src/x.c\n--- a/src/x.c\n+++ b/src/x.c\n@@ -1 +1,2 @@\n"
        b"-old\n+new\n+more\n"
    )
    assert patch_stats(patch) == {
        "files": ["src/x.c"],
        "lines_added": 2,
        "lines_removed": 1,
        "binary": False,
    }


def test_patch_stats_read_plain_unified_diffs_too():
    """Predictions made elsewhere often lack `diff --git` headers; their files still count (and a
    plain diff touching auto/ still means a clean build)."""
    plain = (
        b"--- a/src/core/x.c\t2024-01-01\n+++ b/src/core/x.c\n@@ -1 +1,2 @@\n a\n+b\n"
        b"--- a/auto/options\n+++ /dev/null\n@@ -1 +0,0 @@\n-z\n"
    )
    stats = patch_stats(plain)
    assert stats["files"] == ["src/core/x.c", "auto/options"]
    assert (stats["lines_added"], stats["lines_removed"]) == (1, 1)
    git = b"diff --git a/q.c b/q.c\nindex 1..2 100644\n--- a/q.c\n+++ b/q.c\n@@ -1 +1 @@\n-a\n+b\n"
    assert patch_stats(git)["files"] == ["q.c"]


def test_a_left_out_name_is_a_path_not_a_prefix(tmp_path):
    """Makefile.am and objsx/ are the agent's work; Makefile and objs/ are left out (counted in
    one listing, file by file as git's literal pathspecs match them)."""
    layout, task, ws = harness_workspace(tmp_path)
    write(ws / "Makefile", "generated\n")
    write(ws / "Makefile.am", "new rules\n")
    write(ws / "objs" / "a.o", OBJECT_BYTES)
    write(ws / "objs" / "sub" / "b.o", OBJECT_BYTES)
    write(ws / "objsx" / "notes.txt", "kept\n")

    patch, skipped, left_out = workspace_diff(layout.bare_repo(REPO), ws, task.base_commit)

    assert patch_stats(patch)["files"] == ["Makefile.am", "objsx/notes.txt"]
    assert [e for e in left_out if e["reason"] == "build output"] == [
        {"path": "Makefile", "files": 1, "reason": "build output"},
        {"path": "objs/", "files": 2, "reason": "build output"},
    ]
