"""The build plan (build/plan.py) of the shipped benchmark, from what git answered for it
(tests/recorded/plan/, made by scripts/record_verdict_fixtures.py against the nginx mirror): the
order builds start in and the base builds' spanning trees, without git. tests/test_buildplan.py
checks the same functions with git on small clones."""

import gzip
import json
from functools import cache
from pathlib import Path
from types import SimpleNamespace

from nginx_eval.build import plan as buildplan
from nginx_eval.build.plan import (
    base_build_plan,
    build_group_key,
    interleave_by_build_group,
    start_order,
)
from nginx_eval.core.layout import Layout
from nginx_eval.core.tasknames import BUILD, base_task_name, task_name

PLAN = Path(__file__).parent / "recorded" / "plan" / "nginx-plan.json.gz"


@cache
def recorded():
    with gzip.open(PLAN, "rt") as f:
        return json.load(f)


@cache
def tasks():
    return tuple(
        SimpleNamespace(
            instance_id=iid, repo=repo, base_commit=base, fix_commit=fix, configure_flags=flags
        )
        for iid, repo, base, fix, flags in recorded()["tasks"]
    )


def paths_between():
    """{(a, b): the paths git said differ between commits a and b}, both ways round."""
    out = {}
    for pairs, answer in recorded()["changed_paths"]:
        for (a, b), paths in zip(pairs, answer, strict=True):
            out[a, b] = out[b, a] = paths
    return out


def layout(tmp_path):
    return Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")


def recorded_git(monkeypatch):
    """build/plan.py's git question answered from the recording."""
    known = paths_between()
    monkeypatch.setattr(buildplan, "changed_paths", lambda bare, pairs: [known[p] for p in pairs])


def made_plans(tmp_path, monkeypatch):
    recorded_git(monkeypatch)
    rec = recorded()
    ids, heavy = rec["build_system_ids"], set(rec["fixes_touching_headers"])
    order = interleave_by_build_group(layout(tmp_path), tasks(), ids, heavy)
    return order, base_build_plan(layout(tmp_path), tasks(), ids, order)


def test_the_recorded_plans_are_what_the_planner_makes_of_gits_answers(tmp_path, monkeypatch):
    order, plan = made_plans(tmp_path, monkeypatch)
    assert [t.instance_id for t in order] == recorded()["order"]
    assert [[name, t.instance_id, parent] for name, t, parent in plan] == recorded()["plan"]
    assert len(order) == len(tasks()) >= 100


def groups():
    """{group key: [tasks]} of the recorded benchmark (same auto/ tree and flags)."""
    out = {}
    for t in tasks():
        out.setdefault(build_group_key(t, recorded()["build_system_ids"]), []).append(t)
    return out


def test_builds_start_one_group_at_a_time_larger_groups_and_header_fixes_first(
    tmp_path, monkeypatch
):
    order, _ = made_plans(tmp_path, monkeypatch)
    ids, heavy = recorded()["build_system_ids"], set(recorded()["fixes_touching_headers"])
    by_group = groups()
    first_round = order[: len(by_group)]
    # The first round starts every group once, the way the docs put it: largest first, and
    # among groups of one size those with more header-changing fixes.
    keys = [build_group_key(t, ids) for t in first_round]
    assert len(set(keys)) == len(by_group)
    weights = [(len(by_group[k]), sum(t.instance_id in heavy for t in by_group[k])) for k in keys]
    assert weights == sorted(weights, reverse=True)
    # Within a group, header-changing fixes first.
    for members in by_group.values():
        started = [t for t in order if t in members]
        flags = [t.instance_id not in heavy for t in started]
        assert flags == sorted(flags)


def header_weighted(paths):
    """The rebuild cost of docs/verdicts.md: a changed header weighs as much as 50 sources."""
    return sum(50 if p.endswith(".h") else 1 for p in paths)


def test_base_builds_of_a_group_follow_a_minimum_spanning_tree(tmp_path, monkeypatch):
    """Each group's first base is built clean; the others start from a base of their own group
    along a tree whose total rebuild cost (a header weighs 50 sources) is the least possible."""
    import numpy as np
    from scipy.sparse.csgraph import minimum_spanning_tree

    _, plan = made_plans(tmp_path, monkeypatch)
    ids = recorded()["build_system_ids"]
    known = paths_between()
    parent_of = {name: parent for name, _, parent in plan}
    task_of = {name: t for name, t, _ in plan}
    commit_of = {name: t.base_commit for name, t in task_of.items()}
    roots = [name for name, parent in parent_of.items() if parent is None]
    bases = {}
    for name, t, _ in plan:
        bases.setdefault(build_group_key(t, ids), []).append(name)
    assert len(roots) == len(bases)
    for names in bases.values():
        assert parent_of[names[0]] is None
        assert all(parent_of[n] in names for n in names[1:])
        cost = lambda a, b: header_weighted(known[commit_of[a], commit_of[b]])
        tree = sum(cost(n, parent_of[n]) for n in names[1:])
        if len(names) > 1:
            # scipy takes a zero weight for no edge: every edge weighs one more than its cost.
            matrix = np.array([[cost(a, b) + 1 if a != b else 0 for b in names] for a in names])
            assert tree + len(names) - 1 == minimum_spanning_tree(matrix).sum()


def test_a_modes_tasks_start_with_those_that_only_wait_and_its_builds_last(tmp_path, monkeypatch):
    order, plan = made_plans(tmp_path, monkeypatch)
    units = [f"nginx/m/{t.instance_id}" for t in order]
    ids = {t.instance_id for t in order}
    started = start_order(["tests:t"], units, plan, ids)
    waiting = [name for name, _, parent in plan if parent]
    assert started[: 1 + 3 * len(units)][:1] == ["tests:t"]
    after_units = started[1 + 3 * len(units) :]
    assert after_units == waiting + [task_name(BUILD, u) for u in units]
    assert {base_task_name(t) for t in tasks()} >= set(waiting)
