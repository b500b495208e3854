"""suite/stage.py: the agent's nginx-tests tree as of the base commit (the last commit not after its
committer date), extracted without .git, read-only, checked before use; and which tasks' graded
assertions already stand in it (the benchmark card's count)."""

import os

import fixture_repos
import pytest

from nginx_eval.core import gitcmd
from nginx_eval.core.errors import UserError
from nginx_eval.core.layout import Layout
from nginx_eval.run.benchmark import Task
from nginx_eval.suite import stage as suite

LATER = "2099-01-01T00:00:00+0000"  # after every base commit of acme/tiny (made now)


def cloned(tmp_path, later=True):
    """The fixture repositories (acme/tiny-tests with a test added after the bases, `later`),
    cloned bare into a layout's cache as the repositories stage clones them."""
    mirrors = tmp_path / "mirrors"
    commits = fixture_repos.make_upstream(mirrors / "acme+tiny")
    commits.update(fixture_repos.make_tests_repo(mirrors / "acme+tiny-tests"))
    if later:
        commits["t_later"] = fixture_repos.add_later_test(mirrors / "acme+tiny-tests", LATER)
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    for repo in ("acme/tiny", "acme/tiny-tests"):
        gitcmd.clone_bare(str(mirrors / repo.replace("/", "+")), layout.bare_repo(repo))
    return layout, commits


def tiny_task(
    commits,
    test_commit=None,
    files=("calc_add.t",),
    f2p=("calc_add.t:1 add two numbers",),
    iid="tiny-add",
):
    return Task(
        instance_id=iid,
        repo="acme/tiny",
        test_repo="acme/tiny-tests",
        base_commit=commits["c_add_bug"],
        fix_commit=commits["c_add_fix"],
        test_commit=test_commit or commits["t_head"],
        test_files=tuple(files),
        configure_flags=(),
        fail_to_pass=tuple(f2p),
        pass_to_pass=(),
        problem_statement="add subtracts",
    )


def test_the_last_commit_not_after_the_moment_wins_and_a_tie_is_not_after():
    # Descendants first, as git log --topo-order lists them; committer times may go backwards.
    history = [("d", 40, "D"), ("c", 20, "C"), ("b", 30, "B"), ("a", 10, "A")]
    assert suite.last_commit_by(history, 35)[0] == "b"  # not c, listed before it
    assert suite.last_commit_by(history, 30)[0] == "b"  # the same second counts
    assert suite.last_commit_by(history, 29)[0] == "c"
    assert suite.last_commit_by(history, 9) is None
    assert suite.last_commit_by([("y", 5, "Y"), ("x", 5, "X")], 5)[0] == "y"


def test_the_tree_as_of_the_base_holds_nothing_newer_and_no_git(tmp_path):
    layout, commits = cloned(tmp_path)
    # The task's own test landed after its base: its test commit is the later one.
    task = tiny_task(commits, commits["t_later"], ["calc_neg.t"], ["calc_neg.t:1 add negatives"])
    tree = suite.as_of(layout, task)
    assert tree["commit"] == commits["t_head"] and tree["repo"] == "acme/tiny-tests"
    assert tree["date"] == "2020-01-01T00:00:00+00:00"
    path = suite.ensure_tree(layout, tree)
    assert path == layout.agent_tests_tree(commits["t_head"])
    assert path != layout.tests_tree(task.tests_tree_id)  # never the grading tree
    names = sorted(str(p.relative_to(path)) for p in path.rglob("*"))
    assert "calc_add.t" in names and "lib/README" in names
    assert "calc_neg.t" not in names and not any(n.split("/")[0] == ".git" for n in names)
    assert not any("add negatives" in p.read_text() for p in path.rglob("*.t"))
    # Read-only on disk: no write bit anywhere.
    assert not any(os.stat(p).st_mode & 0o222 for p in [path, *path.rglob("*")])
    assert suite.tree_present(layout, tree)
    # Every task of a benchmark at once; a base nothing of the suite precedes is an error.
    assert suite.trees_as_of(layout, [task, tiny_task(commits, iid="other")]) == {
        "tiny-add": tree,
        "other": tree,
    }
    assert suite.trees_as_of(
        Layout(root=tmp_path, cache=tmp_path / "none", results_root=tmp_path), [task]
    ) == {"tiny-add": None}


def test_a_suite_younger_than_the_base_is_an_error(tmp_path):
    layout, commits = cloned(tmp_path, later=False)
    tests = tmp_path / "young-tests"
    tests.mkdir()
    fixture_repos.git(tests, "init", "-q", "-b", "main")
    fixture_repos.write(tests / "x.t", "1;\n")
    fixture_repos.commit(tests, "Tests", date=LATER)
    gitcmd.clone_bare(str(tests), layout.bare_repo("acme/young"))
    task = Task(**dict(vars(tiny_task(commits)), test_repo="acme/young"))
    with pytest.raises(
        UserError,
        match="task tiny-add, field base_commit: acme/young has no commit made on or before",
    ):
        suite.as_of(layout, task)


def test_a_changed_tree_is_extracted_again(tmp_path):
    layout, commits = cloned(tmp_path)
    tree = suite.as_of(layout, tiny_task(commits))
    path, notes = suite.verified_tree(layout, tree)
    assert notes == []
    original = (path / "calc_add.t").read_text()
    os.chmod(path, 0o755)
    os.chmod(path / "calc_add.t", 0o644)
    (path / "calc_add.t").write_text("print 'ok 1'\n")
    (path / "new.t").write_text("1;\n")
    path, notes = suite.verified_tree(layout, tree)
    assert notes == [
        f"the agent's tests tree {commits['t_head'][:12]} had been changed "
        "(calc_add.t, new.t); extracted again"
    ]
    assert (path / "calc_add.t").read_text() == original and not (path / "new.t").exists()
    assert suite.verified_tree(layout, tree)[1] == []


GRADED = """TODO: {
local $TODO = 'not yet' unless $t->has_version('1.2.3');
is(get('/'), 'b', 'fixed thing');
}
is(get('/x'), 'x', "other thing");
"""


@pytest.mark.parametrize(
    "before,ident,stands",
    [
        # The test was there under a TODO guard without a version: the same line stands.
        (
            "TODO: {\nlocal $TODO = 'not yet';\n  is(get('/'), 'b', 'fixed thing');\n}\n",
            "a.t:1 fixed thing",
            True,
        ),
        # The same description checking something else is not the graded assertion.
        ("is(get('/'), 'a', 'fixed thing');\n", "a.t:1 fixed thing", False),
        ("is(get('/x'), 'x', \"other thing\");\n", "a.t:2 other thing", True),
        (None, "a.t:1 fixed thing", False),
        ("is(get('/'), 'b', 'fixed thing');\n", "a.t:1", False),
        # The library's own: the file is the graded one but for TODO guards, and the library has it.
        (
            "is(get('/'), 'b', 'fixed thing');\nis(get('/x'), 'x', \"other thing\");\n",
            "a.t:3 no alerts",
            True,
        ),
        ("is(get('/'), 'b', 'fixed thing');\n", "a.t:3 no alerts", False),
    ],
)
def test_an_assertion_stands_when_what_grades_it_is_already_there(before, ident, stands):
    library = "Test::More::is(join(\"\\n\", @alerts), '', 'no alerts');\n"
    assert suite.assertion_stands(ident, before, GRADED, library) is stands


def test_tasks_whose_assertions_stand_as_of_the_base(tmp_path):
    layout, commits = cloned(tmp_path)
    standing = suite.already_standing(
        layout,
        [
            # Its test is older than its base: the agent can read what grades it.
            tiny_task(commits),
            # Its test came after the base: not in the tree.
            tiny_task(
                commits,
                commits["t_later"],
                ["calc_neg.t"],
                ["calc_neg.t:1 add negatives"],
                iid="later",
            ),
        ],
    )
    assert standing == {"tiny-add": True, "later": False}


def test_the_tree_is_an_agent_input_and_a_mode_without_tests_keeps_its_digest(tmp_path):
    from nginx_eval.agent import prompts
    from nginx_eval.agent import stage as agent
    from nginx_eval.core import jsonio
    from nginx_eval.core.layout import SOURCE_ROOT
    from nginx_eval.run.modes import parse_modes
    from nginx_eval.workspace.stage import workspace_inputs

    layout, commits = cloned(tmp_path)
    task = tiny_task(commits)
    phases = [{"name": "solve", "prompt": "prompt_raw.md.j2", "command": "agent {prompt}"}]
    modes = parse_modes(
        {"modes": {"plain": {"phases": phases}, "given": {"phases": phases, "tests": "base"}}},
        "m.toml",
    )
    templates = SOURCE_ROOT / "templates"
    (plain,) = prompts.rendered_prompts(templates, modes["plain"], task)
    (given,) = prompts.rendered_prompts(templates, modes["given"], task)
    assert prompts.TESTS_DIR_MARK not in plain and "nginx-tests" not in plain
    assert f"as of this checkout is in {prompts.TESTS_DIR_MARK} (read-only)" in given
    # Without the key: the digest of the inputs as they were before the key existed.
    assert agent.agent_inputs(layout, modes["plain"], task, [plain]) == jsonio.digest(
        dict(
            agent.mode_inputs(layout, modes["plain"]),
            prompts=[plain],
            workspace=workspace_inputs(task),
        )
    )
    # With it: the tree's commit is one of the inputs (found from the clones when not given).
    tree = suite.as_of(layout, task)
    digest = agent.agent_inputs(layout, modes["given"], task, [given])
    assert digest == agent.agent_inputs(layout, modes["given"], task, [given], tests_tree=tree)
    assert digest != agent.agent_inputs(
        layout, modes["given"], task, [given], tests_tree=dict(tree, commit=commits["t_later"])
    )
    with pytest.raises(UserError, match="must be one of 'base'"):
        parse_modes({"modes": {"m": {"phases": phases, "tests": "head"}}}, "m.toml")
