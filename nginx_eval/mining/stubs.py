"""Writing the candidates file: a task stub per proposal, in the benchmark schema.

``task_stub`` turns a proposal (nginx_eval/mining/scoring.py) into a task whose base is the
fix's first parent, with the test files most related to the fix (``pick_files``) and what they
need (``needs_of``: configure flags and Perl modules, read by nginx_eval/mining/testsuite.py as the
doctor reads them); fail_to_pass, pass_to_pass and the problem statement are left to a human.
``write_candidates`` writes them under ``"candidates": true`` (see nginx_eval/run/benchmark.py),
``print_candidates`` a line per stub."""

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nginx_eval.core import gitcmd
from nginx_eval.mining.oldbuilds import with_legacy_options
from nginx_eval.mining.testsuite import configure_flags_for, requirements_in_order
from nginx_eval.mining.topics import subject_area, words
from nginx_eval.prove.areas import AREA_PATHS, test_area


def pick_files(files: Iterable[str], c: Mapping[str, Any]) -> list[str]:
    """The test files of a signal most related to fix commit `c` (at most two)."""
    fix_words = words(c["subject"]) | words(" ".join(p.rsplit("/", 1)[-1] for p in c["files"]))
    sarea = subject_area(c["subject"])
    paths = " ".join(c["files"])

    def rel(f: str) -> int:
        area = test_area(f)
        r = len(words(f[:-2]) & fix_words)
        r += 2 if area == sarea else 0
        r += 1 if any(frag and frag in paths for frag in AREA_PATHS.get(area, [])) else 0
        return r

    ranked = sorted(files, key=lambda f: (-rel(f), f))
    top = rel(ranked[0])
    return [f for f in ranked if rel(f) == top][:2]


def needs_of(git_dir: str | Path, commit: str, files: Iterable[str]) -> tuple[list[str], list[str]]:
    """(configure flags, Perl modules) the test files need at `commit`, as the doctor reads them
    (nginx_eval/mining/testsuite.py): the flags that build every module their has() calls name, the
    non-core modules they load or call."""
    names: list[str] = []
    perl: list[str] = []
    for f in files:
        data = gitcmd.file_at(git_dir, commit, f)
        if data is None:
            continue
        req = requirements_in_order(data.decode(errors="replace"))
        names += req["nginx_modules"]
        perl += req["perl_modules"]
    return configure_flags_for(dict.fromkeys(names)), list(dict.fromkeys(perl))


def task_stub(
    p: Mapping[str, Any], nginx_dir: str | Path, tests_dir: str | Path
) -> dict[str, Any] | None:
    """The benchmark task a proposal suggests (fail_to_pass, pass_to_pass and the problem
    statement left to a human), or None when its fix has no parent to be the base or the
    base cannot be built here with what its tests need (nginx_eval/mining/oldbuilds.py). A test
    tree from before parallel tests (fixed ports) is fine: each prove has a network of its own
    (nginx_eval/prove/network.py)."""
    c, sig = p["_commit"], p["_sig"]
    notes = (
        f"score {p['_score']:.1f} ({sig['kind']}"
        f"{' ' + ','.join(sorted(sig['versions'])) if sig['versions'] else ''}"
        f", #{p['_rank']} for its test); "
        f"{' '.join(p['_why'])}; fix: {c['subject']}; test: {sig['subject']}"
    )
    return stub_for(c, sig["commit"], pick_files(sig["files"], c), nginx_dir, tests_dir, notes)


def stub_for(
    c: Mapping[str, Any],
    test_commit: str,
    files: list[str],
    nginx_dir: str | Path,
    tests_dir: str | Path,
    notes: str,
) -> dict[str, Any] | None:
    """The task stub of fix commit `c` ({sha, day, subject, files, add, rem}) tested by `files`
    of nginx-tests `test_commit`, or None (see task_stub)."""
    base = gitcmd.first_parent(nginx_dir, c["sha"])
    if base is None:
        return None
    needed, perl = needs_of(tests_dir, test_commit, files)
    flags = with_legacy_options(nginx_dir, base, needed)
    if flags is None:
        return None  # no compiler option makes it build here
    areas = sorted({test_area(f) for f in files})
    return {
        "instance_id": f"nginx__nginx-{c['sha'][:12]}",
        "repo": "nginx/nginx",
        "test_repo": "nginx/nginx-tests",
        "base_commit": base,
        "fix_commit": c["sha"],
        "fix_date": c["day"],
        "test_commit": test_commit,
        "test_files": files,
        "configure_flags": flags,
        "fail_to_pass": [],
        "pass_to_pass": [],
        "problem_statement": "TODO",
        "perl_modules": perl,
        "area": subject_area(c["subject"]) or (areas[0] if areas else "http"),
        "gold_size": {"files": len(c["files"]), "lines_added": c["add"], "lines_removed": c["rem"]},
        "notes": notes,
    }


def write_candidates(path: str | Path, stubs: Sequence[Mapping[str, Any]]) -> None:
    """Write `stubs` to `path` as a candidates file (``"candidates": true``)."""
    # Mining takes a while; a missing directory must not throw its result away.
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(
            {
                "name": "nginx-candidates",
                "candidates": True,
                "description": "Task stubs proposed by scripts/mine_tasks.py; unvalidated.",
                "tasks": stubs,
            },
            fh,
            indent=1,
        )
        fh.write("\n")


def print_candidates(
    stubs: Sequence[Mapping[str, Any]], rows: Sequence[tuple[float, str, str]]
) -> None:
    """A line per stub: its score, fix, test commit, signal kind, test files and fix subject."""
    print(f"{'#':>3} {'score':>5} {'fix':12} {'test':8} {'kind':6} {'files':28} subject")
    for i, (s, (score_, kind, subject)) in enumerate(zip(stubs, rows, strict=True), 1):
        print(
            f"{i:>3} {score_:5.1f} {s['fix_commit'][:12]} {s['test_commit'][:8]} "
            f"{kind:6} {','.join(s['test_files'])[:28]:28} {subject[:60]}"
        )
