"""The build plan (build/plan.py): the order builds start in, build groups, the base builds'
spanning tree and the order of a mode's tasks, on small bare clones made here."""

import subprocess
from types import SimpleNamespace

import fixture_repos
import pytest

from nginx_eval.build import plan as buildplan
from nginx_eval.build.plan import (
    base_build_plan,
    changed_paths,
    fixes_touching_headers,
    interleave_by_build_group,
    start_order,
)
from nginx_eval.core import jsonio
from nginx_eval.core.layout import Layout
from nginx_eval.core.tasknames import BUILD, base_task_name, task_name


def clone_with_commits(tmp_path, changes):
    """A Layout whose bare clone of o/n has one commit per (auto/configure text, path written)
    in `changes`, and the commit ids."""
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    src = tmp_path / "src"
    (src / "auto").mkdir(parents=True)
    env = dict(fixture_repos.ENV, HOME=str(tmp_path))
    git = lambda *a: subprocess.run(
        ["git", *a], cwd=src, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    git("init", "-q")
    commits = []
    for auto, path in changes:
        (src / "auto" / "configure").write_text(auto)
        (src / path).write_text(str(len(commits)))
        git("add", "-A")
        git("commit", "-q", "-m", str(len(commits)))
        commits.append(git("rev-parse", "HEAD"))
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(src), str(layout.bare_repo("o/n"))],
        check=True,
        env=env,
    )
    return layout, commits


def plan_task(iid, base, fix=None, flags=()):
    return SimpleNamespace(
        instance_id=iid, repo="o/n", base_commit=base, fix_commit=fix or base, configure_flags=flags
    )


def test_builds_start_one_build_group_at_a_time(tmp_path):
    """Tasks of one group (same auto/ tree and flags) are spread out, not run back to back."""
    layout, commits = clone_with_commits(
        tmp_path, [("v1", "main.c"), ("v1", "main.c"), ("v2", "main.c"), ("v1", "main.c")]
    )
    tasks = [
        plan_task("a", commits[0]),
        plan_task("b", commits[1]),
        plan_task("c", commits[3]),
        plan_task("d", commits[2]),
        plan_task("e", commits[0], flags=("--with-x",)),
    ]
    order = [t.instance_id for t in interleave_by_build_group(layout, tasks)]
    # groups: {a, b, c} (auto v1, no flags), {d} (auto v2), {e} (other flags)
    assert order == ["a", "d", "e", "b", "c"]


def test_builds_whose_fixes_touch_headers_start_first(tmp_path):
    """Among build groups of one size, the group whose fix changes a header (a long rebuild)
    starts first; fixes_touching_headers reads that from the clone."""
    layout, commits = clone_with_commits(
        tmp_path, [("v1", "a.c"), ("v1", "a.c"), ("v2", "a.c"), ("v2", "a.h")]
    )
    source_fix = plan_task("source-fix", commits[0], commits[1])  # group auto v1
    header_fix = plan_task("header-fix", commits[2], commits[3])  # group auto v2
    assert fixes_touching_headers(layout, [source_fix, header_fix]) == {"header-fix"}
    order = interleave_by_build_group(layout, [source_fix, header_fix])
    assert [t.instance_id for t in order] == ["header-fix", "source-fix"]


def test_base_builds_of_a_group_start_from_their_closest_sibling(tmp_path):
    """The bases of one build group wait for the base they are closest to (a changed header
    costs far more than a changed source), not all for the group's first."""
    layout, c = clone_with_commits(
        tmp_path, [("v1", "main.c"), ("v1", "x.h"), ("v1", "y.c"), ("v1", "z.c"), ("v2", "main.c")]
    )
    # c[0] -> c[1]: a header; c[1] -> c[2] -> c[3]: one source each; c[4]: another auto/.
    tasks = [
        plan_task("root", c[0]),
        plan_task("far", c[3]),
        plan_task("near-root", c[1]),
        plan_task("middle", c[2]),
        plan_task("other-group", c[4]),
    ]
    assert changed_paths(layout.bare_repo("o/n"), [(c[0], c[2]), (c[3], c[3])]) == [
        ["x.h", "y.c"],
        [],
    ]
    plan = {task.instance_id: parent for _, task, parent in base_build_plan(layout, tasks)}
    name = {t.instance_id: base_task_name(t) for t in tasks}
    assert plan == {
        "root": None,
        "other-group": None,
        "near-root": name["root"],
        "middle": name["near-root"],
        "far": name["middle"],
    }


def test_without_a_clone_every_base_is_its_own_group(tmp_path):
    """The first run has no clone yet: groups are unknown, and no base waits for another."""
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    tasks = [plan_task("a", "1" * 40), plan_task("b", "2" * 40), plan_task("c", "1" * 40)]
    assert changed_paths(layout.bare_repo("o/n"), [("1" * 40, "2" * 40)]) is None
    plan = base_build_plan(layout, tasks)
    assert [(name, parent) for name, _, parent in plan] == [
        (base_task_name(tasks[0]), None),
        (base_task_name(tasks[1]), None),
    ]


def test_a_modes_tasks_start_with_those_that_only_wait_and_its_builds_last():
    """Test trees, then grades, proves and patches in build order, then the base builds that
    wait for a sibling (of the selected tasks only), then the builds."""
    root, child, other = (
        plan_task("root", "1" * 40),
        plan_task("child", "2" * 40),
        plan_task("other", "3" * 40),
    )
    plan = [
        (base_task_name(root), root, None),
        (base_task_name(child), child, base_task_name(root)),
        (base_task_name(other), other, base_task_name(root)),
    ]
    units = ["b/m/child", "b/m/root"]
    assert start_order(["tests:t1"], units, plan, {"child", "root"}) == [
        "tests:t1",
        "grade:b/m/child",
        "grade:b/m/root",
        "prove:b/m/child",
        "prove:b/m/root",
        "patch:b/m/child",
        "patch:b/m/root",
        base_task_name(child),
        task_name(BUILD, "b/m/child"),
        task_name(BUILD, "b/m/root"),
    ]
    assert task_name(BUILD, "b/m/root") == "build:b/m/root"


def test_the_plans_are_kept_once_the_clone_holds_every_commit(tmp_path, monkeypatch):
    layout, commits = clone_with_commits(
        tmp_path, [("v1", "main.c"), ("v1", "main.c"), ("v2", "main.h")]
    )
    tasks = [plan_task("a", commits[0], commits[2]), plan_task("b", commits[1])]
    fresh = (interleave_by_build_group(layout, tasks), base_build_plan(layout, tasks))
    # The clone's stamp does not list the commits yet (its repos: task has not run): not kept.
    assert buildplan.build_plans(layout, tasks) == fresh
    assert not (layout.cache / "plans").exists()
    jsonio.write_json(layout.repo_stamp("o/n"), {"repo": "o/n", "commits": commits})
    assert buildplan.build_plans(layout, tasks) == fresh
    # Kept: the next command asks git nothing, and gets the same plans.
    monkeypatch.setattr(
        buildplan,
        "tasks_build_system_ids",
        lambda *a: (_ for _ in ()).throw(AssertionError("asked git")),
    )
    assert buildplan.build_plans(layout, tasks) == fresh
    # Other tasks are other plans.
    other = [plan_task("a", commits[0])]
    with pytest.raises(AssertionError, match="asked git"):
        buildplan.build_plans(layout, other)
