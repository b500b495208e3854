"""Unit tests of gitcmd.py, the one module that runs git, on small real repositories: the
environment (git never sees an enclosing repository or an inherited GIT_DIR), object lookups,
clones and workspaces, the scratch index, diffs and the history queries of the task miner."""

import os
import subprocess

import fixture_repos
import pytest

from nginx_eval.core import gitcmd
from nginx_eval.core.gitcmd import GitError


def git(cwd, *args):
    """Plain git, to make the repositories the tests read (no user or system configuration)."""
    env = dict(os.environ, **fixture_repos.ENV, GIT_CONFIG_GLOBAL=os.devnull)
    return (
        subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)
        .stdout.decode()
        .strip()
    )


def make_repo(path, files, message="first"):
    """A repository at `path` with one commit writing `files` ({path: text or bytes}); its id."""
    if not (path / ".git").exists():
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", "--initial-branch", "main")
    return commit(path, files, message)


def commit(path, files, message):
    for name, data in files.items():
        target = path / name
        if data is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data if isinstance(data, bytes) else data.encode())
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", message)
    return git(path, "rev-parse", "HEAD")


# -- the environment -------------------------------------------------------------------------------


def test_git_cannot_see_an_enclosing_repository(tmp_path):
    """The cache and the workspaces may lie inside the project's checkout: a directory there that
    is not a repository of its own must not be taken for the project's repository."""
    outer = tmp_path / "project"
    head = make_repo(outer, {"secret.c": "the project's own source\n"})
    plain = outer / "cache" / "not-a-repo"
    plain.mkdir(parents=True)
    where = ["git", "rev-parse", "--absolute-git-dir"]
    # Without the harness's environment git finds the outer repository...
    found = subprocess.run(where, cwd=plain, capture_output=True, text=True)
    assert found.returncode == 0 and found.stdout.strip() == str(outer / ".git")
    # ...with it, the same query fails: discovery stops at the directory git runs in.
    isolated = subprocess.run(
        where, cwd=plain, capture_output=True, text=True, env=gitcmd.git_environment(plain)
    )
    assert isolated.returncode != 0 and "not a git repository" in isolated.stderr
    # The module's own queries on that directory find nothing of the outer repository.
    assert gitcmd.file_at(plain, head, "secret.c") is None
    with pytest.raises(GitError, match="not a git repository"):
        gitcmd.missing_commits(plain, [head])
    # Nor does a scratch index over it read the outer index or write its objects.
    objects_before = git(outer, "count-objects")
    with pytest.raises(GitError):
        with gitcmd.scratch_index(plain, plain, head):
            pass
    assert git(outer, "count-objects") == objects_before


def test_an_inherited_git_dir_is_not_used(tmp_path, monkeypatch):
    """doit started from a git hook inherits GIT_DIR (and GIT_INDEX_FILE...) of the project."""
    outer = tmp_path / "project"
    make_repo(outer, {"a": "project\n"})
    other = tmp_path / "other"
    other_head = make_repo(other, {"a": "other\n"})
    monkeypatch.setenv("GIT_DIR", str(outer / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(outer / ".git" / "index"))
    env = gitcmd.git_environment(other)
    assert "GIT_DIR" not in env and "GIT_INDEX_FILE" not in env
    assert env["GIT_CEILING_DIRECTORIES"] == str(tmp_path)
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_TERMINAL_PROMPT"] == "0"
    assert gitcmd.file_at(other / ".git", other_head, "a") == b"other\n"
    ws = tmp_path / "ws"
    ws.mkdir()
    gitcmd.new_repository_at(ws, other, other_head, "main")
    assert (ws / "a").read_text() == "other\n"
    assert git(outer, "--git-dir", str(outer / ".git"), "rev-list", "--all", "--count") == "1"


def test_a_missing_directory_is_an_error_not_the_current_one(tmp_path, monkeypatch):
    """GitPython runs a command whose directory is missing in the current one: never here."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError):
        gitcmd.new_repository_at(tmp_path / "gone", tmp_path, "HEAD", "main")
    assert not (tmp_path / ".git").exists()


def test_git_error_carries_gits_message(tmp_path):
    with pytest.raises(GitError) as e:
        gitcmd.clone_bare(str(tmp_path / "no-such-source"), tmp_path / "clone")
    assert "does not exist" in e.value.stderr
    assert str(e.value).startswith("git clone ") and " --bare " in str(e.value)
    assert not (tmp_path / "clone").exists()


# -- objects ---------------------------------------------------------------------------------------


def test_lookup_objects_answers_every_name_in_one_call(tmp_path):
    repo = tmp_path / "r"
    head = make_repo(repo, {"auto/configure": "#!/bin/sh\n", "odd name.t": "ok\n"})
    found = gitcmd.lookup_objects(
        repo / ".git",
        [
            f"{head}:auto",
            f"{head}:auto/configure",
            f"{head}:odd name.t",
            f"{head}:no such.t",
            f"{head}^{{commit}}",
            f"{'0' * 40}^{{commit}}",
            "no-such-ref",
        ],
    )
    assert {name: kind for name, (kind, _) in found.items()} == {
        f"{head}:auto": "tree",
        f"{head}:auto/configure": "blob",
        f"{head}:odd name.t": "blob",
        f"{head}^{{commit}}": "commit",
    }
    assert found[f"{head}^{{commit}}"][1] == head
    assert found[f"{head}:auto"][1] == git(repo, "rev-parse", f"{head}:auto")
    assert gitcmd.lookup_objects(repo / ".git", []) == {}


def test_missing_commits_and_files(tmp_path):
    repo = tmp_path / "r"
    head = make_repo(repo, {"t/a.t": "ok\n"})
    tree = git(repo, "rev-parse", f"{head}:t")
    unknown = "1" * 40
    assert gitcmd.missing_commits(repo / ".git", [head, unknown, tree]) == [unknown, tree]
    specs = [f"{head}:t/a.t", f"{head}:t", f"{head}:t/b.t", f"{unknown}:t/a.t"]
    assert gitcmd.missing_files(repo / ".git", specs) == specs[1:]


def test_file_at_and_first_parent(tmp_path):
    repo = tmp_path / "r"
    first = make_repo(repo, {"a.c": "one\n", "bin": b"\0\1\2"})
    second = commit(repo, {"a.c": "two\n"}, "second")
    assert gitcmd.file_at(repo / ".git", first, "a.c") == b"one\n"
    assert gitcmd.file_at(repo / ".git", second, "bin") == b"\0\1\2"
    assert gitcmd.file_at(repo / ".git", second, "gone.c") is None
    assert gitcmd.file_at(repo / ".git", first, "") is None  # a tree is no file
    assert gitcmd.file_at(tmp_path / "no-repo", first, "a.c") is None
    assert gitcmd.first_parent(repo / ".git", second) == first
    assert gitcmd.first_parent(repo / ".git", first) is None


# -- clones and workspaces -------------------------------------------------------------------------


def test_clone_fetch_by_id_and_config(tmp_path):
    source = tmp_path / "upstream"
    first = make_repo(source, {"a": "1\n"})
    bare = tmp_path / "cache" / "repos" / "o+n"
    gitcmd.clone_bare(str(source), bare)
    assert (bare / "HEAD").exists() and gitcmd.missing_commits(bare, [first]) == []
    later = commit(source, {"a": "2\n"}, "later")
    assert gitcmd.missing_commits(bare, [later]) == [later]
    gitcmd.fetch(bare, str(source), [later])
    assert gitcmd.missing_commits(bare, [first, later]) == []
    gitcmd.set_config(bare, "uploadpack.allowAnySHA1InWant", "true")
    assert (
        git(tmp_path, "--git-dir", str(bare), "config", "uploadpack.allowAnySHA1InWant") == "true"
    )
    with pytest.raises(GitError):
        gitcmd.fetch(bare, str(source), ["refs/heads/no-such-branch"])


def test_new_repository_holds_the_commit_and_its_ancestors_only(tmp_path):
    source = tmp_path / "upstream"
    first = make_repo(source, {"a": "1\n"})
    base = commit(source, {"a": "2\n"}, "base")
    fix = commit(source, {"a": "3\n"}, "fix")
    git(source, "tag", "v1", fix)
    ws = tmp_path / "ws"
    ws.mkdir()
    gitcmd.new_repository_at(ws, source, base, "main", config={"user.name": "agent"})
    assert (ws / "a").read_text() == "2\n"
    assert git(ws, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert git(ws, "rev-parse", "HEAD") == base
    assert gitcmd.missing_commits(ws / ".git", [first, base, fix]) == [fix]
    assert git(ws, "tag") == "" and not (ws / ".git" / "FETCH_HEAD").exists()
    assert git(ws, "reflog", "--all") == ""
    assert git(ws, "config", "user.name") == "agent"


def test_extract_tree_writes_files_paths_and_fresh_times(tmp_path):
    repo = tmp_path / "r"
    head = make_repo(repo, {"src/a.c": "a\n", "src/b.c": "b\n", "README": "r\n"})
    whole = tmp_path / "whole"
    gitcmd.extract_tree(repo / ".git", head, whole)
    assert sorted(str(p.relative_to(whole)) for p in whole.rglob("*") if p.is_file()) == [
        "README",
        "src/a.c",
        "src/b.c",
    ]
    some = tmp_path / "some"
    gitcmd.extract_tree(repo / ".git", head, some, ["src/b.c"], touch=True)
    assert [p.name for p in some.rglob("*") if p.is_file()] == ["b.c"]
    commit_time = int(git(repo, "log", "-1", "--format=%ct"))
    assert (some / "src" / "b.c").stat().st_mtime >= commit_time
    with pytest.raises(GitError, match="archive"):
        gitcmd.extract_tree(repo / ".git", "1" * 40, tmp_path / "bad")


# -- diffs and the scratch index -------------------------------------------------------------------


def test_gold_diff_is_the_fix_byte_for_byte(tmp_path):
    repo = tmp_path / "r"
    base = make_repo(repo, {"src/a.c": "int a;\n", "auto/options": "x\n", "img": b"\0\1"})
    fix = commit(
        repo,
        {"src/a.c": "int a = 1;\n", "auto/options": None, "auto/opts": "x\n", "img": b"\0\2"},
        "fix",
    )
    patch = gitcmd.gold_diff(repo / ".git", base, fix)
    assert patch.endswith(b"\n") and b"GIT binary patch" in patch
    assert f"index {git(repo, 'rev-parse', f'{base}:src/a.c')}".encode() in patch
    check = tmp_path / "check"
    git(tmp_path, "clone", "-q", str(repo), str(check))
    git(check, "checkout", "-q", base)
    (tmp_path / "p.patch").write_bytes(patch)
    git(check, "apply", "-p1", str(tmp_path / "p.patch"))
    assert (check / "src/a.c").read_text() == "int a = 1;\n" and (
        check / "img"
    ).read_bytes() == b"\0\2"
    # The same change as (status, path), a rename as a deletion and an addition.
    assert sorted(gitcmd.changed_files(repo / ".git", base, fix)) == [
        ("A", "auto/opts"),
        ("D", "auto/options"),
        ("M", "img"),
        ("M", "src/a.c"),
    ]


def test_scratch_index_compares_a_directory_with_a_commit(tmp_path):
    repo = tmp_path / "r"
    base = make_repo(repo, {".gitignore": "*.o\n", "a.c": "a\n", "b.c": "b\n", "c.c": "c\n"})
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    tree = tmp_path / "tree"
    gitcmd.extract_tree(bare, base, tree)
    (tree / "a.c").write_text("a, changed\n")
    (tree / "b.c").unlink()
    (tree / "new.c").write_text("new\n")
    (tree / "a.o").write_bytes(b"\x7fELF")
    objects_before = git(tmp_path, "--git-dir", str(bare), "count-objects", "-v")
    with gitcmd.scratch_index(bare, tree, base) as index:
        assert sorted(index.modified()) == [b"a.c", b"b.c"]
        assert sorted(index.untracked()) == [b"a.o", b"new.c"]
        assert index.untracked(standard_excludes=True) == [b"new.c"]
        assert index.modified("c.c") == [] and index.untracked(":(exclude)new.c") == [b"a.o"]
        index.add_tracked(".")
        index.add_new([b"new.c"])
        patch = index.diff(base)
    assert b"a, changed" in patch and b"deleted file mode" in patch and b"+new" in patch
    assert b"a.o" not in patch
    # Neither the clone nor the directory gained anything: new blobs went to the scratch store.
    assert git(tmp_path, "--git-dir", str(bare), "count-objects", "-v") == objects_before
    assert not (tree / ".git").exists()
    with pytest.raises(GitError):
        with gitcmd.scratch_index(bare, tree, "1" * 40):
            pass


# -- history (the task miner) ----------------------------------------------------------------------


def test_history_queries(tmp_path):
    repo = tmp_path / "r"
    first = make_repo(repo, {"src/a.c": "1\n2\n", "t/a.t": "ok\n"}, "Core: first")
    git(repo, "tag", "release-1.0.0")
    second = commit(repo, {"src/a.c": "1\n3\n", "logo.png": b"\0\1"}, "HTTP/2: second")
    git(repo, "tag", "-a", "-m", "annotated", "release-1.1.0")
    third = commit(repo, {"t/a.t": "ok\nok 2\n"}, "Tests: third")
    git(repo, "checkout", "-q", "-b", "side", first)
    side = commit(repo, {"side.c": "s\n"}, "side")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-edit", "side")
    gd = repo / ".git"

    # Commits of one second: their order in the log is not part of the answer.
    stats = gitcmd.commit_numstats(gd, "2000-01-01")
    by_sha = {c["sha"]: c for c in stats}
    assert len(stats) == 4 and set(by_sha) == {third, side, second, first}  # no merge
    assert by_sha[second]["subject"] == "HTTP/2: second"
    assert sorted(by_sha[second]["numstat"], key=str) == [
        (1, 1, "src/a.c"),
        (None, None, "logo.png"),
    ]
    assert len(by_sha[first]["day"]) == 10 and by_sha[first]["time"] > 0

    patches = gitcmd.commit_patches(gd, "2000-01-01", "*.t")
    assert [(sha, subject) for sha, _, subject, _ in patches] == [
        (third, "Tests: third"),
        (first, "Core: first"),
    ]
    assert "+ok 2" in patches[0][3] and "diff --git a/t/a.t b/t/a.t" in patches[0][3]

    assert gitcmd.tag_commits(gd) == {"release-1.0.0": first, "release-1.1.0": second}
    assert gitcmd.tags_merged_into(gd, "release-1.1.0", "release-*") == [
        "release-1.0.0",
        "release-1.1.0",
    ]
    assert gitcmd.tags_merged_into(gd, "side", "release-*") == ["release-1.0.0"]
    assert sorted(gitcmd.non_merge_commits(gd, ["HEAD", "^release-1.0.0"])) == sorted(
        [third, side, second]
    )
    with pytest.raises(GitError):
        gitcmd.non_merge_commits(gd, ["release-9.9.9"])
