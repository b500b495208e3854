"""The suite sweep (nginx_eval/mining/sweep.py, scripts/sweep_suite.py): the whole test tree run
against two commits of the fixture's upstream with real builds and real prove, every assertion
that turned passing bisected to the commit that turned it."""

import json
import subprocess
import sys
from pathlib import Path

import fixture_repos
import pytest

from nginx_eval.mining.sweep import bisect

ROOT = Path(__file__).resolve().parent.parent
FILES = "calc_add.t,calc_mul.t,version.t,skip.t"


def test_bisect_finds_each_target_first_commit_with_one_probe_per_step():
    commits = list("abcdefghij")
    fixed_at = {"x": "c", "y": "c", "z": "h"}
    probes = []

    def probe(commit, targets):
        probes.append(commit)
        return {t for t in targets if commits.index(commit) >= commits.index(fixed_at[t])}

    assert bisect(commits, ["x", "y", "z"], probe) == fixed_at
    # x and y share every probe; z splits off after the first: 3 + 3 probes at most, not 3 x 4.
    assert len(probes) <= 7
    assert bisect(commits, [], probe) == {}


def run_sweep(tmp_path, old, new, via="", out=None, files=FILES):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"name": "b", "tasks": []}))
    argv = [
        sys.executable,
        str(ROOT / "scripts" / "sweep_suite.py"),
        "--nginx",
        str(tmp_path / "tiny" / ".git"),
        "--tests",
        str(tmp_path / "tiny-tests" / ".git"),
        "--work",
        str(tmp_path / "work"),
        "--old",
        old,
        "--new",
        new,
        "--files",
        files,
        "--jobs",
        "2",
        "--benchmark",
        str(bench),
        "--via",
        via,
    ]
    if out:
        argv += ["--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads((tmp_path / "work" / "leads.json").read_text()), done.stderr


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The fixture's upstream and test tree, unchanged, with one sweep work directory, for the
    tests that sweep them: a later sweep finds the builds and TAP files of the commits an
    earlier one ran, as a user's next sweep does (no test asserts what ran but the one that
    sweeps the same ends twice in a row)."""
    base = tmp_path_factory.mktemp("swept")
    commits = fixture_repos.make_upstream(base / "tiny")
    fixture_repos.make_tests_repo(base / "tiny-tests")
    return base, commits


def test_sweep_bisects_each_flipped_assertion_to_its_fix(swept):
    tmp_path, c = swept
    out = tmp_path / "cands.json"

    leads, log = run_sweep(tmp_path, c["c_mul_bug"], c["c_later"], out=out)
    # mul is off by one at the old end and right at the new one: three assertions in two files
    # turn passing, the TODO-guarded "square" among them; all at c_mul_fix. add was right at both.
    assert leads["flipped"] == 3
    assert [(lead["fix_commit"], lead["assertions"]) for lead in leads["leads"]] == [
        (
            c["c_mul_fix"],
            ["calc_add.t:3 mul still works", "calc_mul.t:1 multiply", "calc_mul.t:3 square"],
        )
    ]
    stubs = json.loads(out.read_text())
    assert stubs["candidates"] is True
    [stub] = stubs["tasks"]
    assert stub["base_commit"] == c["c_mul_bug"] and stub["fix_commit"] == c["c_mul_fix"]
    assert stub["test_files"] == ["calc_add.t", "calc_mul.t"]
    assert stub["test_commit"] == leads["tests_commit"]

    # A second sweep over the same ends runs nothing again: every build and TAP file is kept.
    again, log = run_sweep(tmp_path, c["c_mul_bug"], c["c_later"])
    assert again["leads"] == leads["leads"]
    assert ": 0 files in" in log or "files in 0 s" in log


def test_sweep_misses_nothing_between_far_ends(swept):
    tmp_path, c = swept
    leads, _ = run_sweep(tmp_path, c["c_add_bug"], c["c_later"])
    # add is fixed at c_add_fix; mul was broken and fixed again in between, right at both ends,
    # so it is no flip of these ends.
    assert [(lead["fix_commit"], lead["assertions"]) for lead in leads["leads"]] == [
        (c["c_add_fix"], ["calc_add.t:1 add two numbers"])
    ]
    # With the broken middle as a stop, each stretch is compared on its own: both fixes.
    leads, _ = run_sweep(tmp_path, c["c_add_bug"], c["c_later"], via=c["c_mul_bug"])
    assert leads["via"] == [c["c_mul_bug"]]
    assert sorted(
        (lead["fix_commit"], tuple(lead["assertions"])) for lead in leads["leads"]
    ) == sorted(
        [
            (c["c_add_fix"], ("calc_add.t:1 add two numbers",)),
            (
                c["c_mul_fix"],
                ("calc_add.t:3 mul still works", "calc_mul.t:1 multiply", "calc_mul.t:3 square"),
            ),
        ]
    )


def test_a_fix_to_code_that_arrived_between_the_ends_is_found(tmp_path):
    c = fixture_repos.make_upstream(tmp_path / "tiny")
    tiny = tmp_path / "tiny"
    main_c = tiny / "src" / "core" / "nginx.c"
    text = main_c.read_text()
    # A "sub" command arrives broken, then is fixed; its test skips where there is no "sub".
    main_c.write_text(
        text.replace(
            "else return 2;",
            'else if (strcmp(argv[1], "sub") == 0) printf("%d\\n", a + b);\n    else return 2;',
        )
    )
    added = fixture_repos.commit(tiny, "Added sub")
    main_c.write_text(
        text.replace(
            "else return 2;",
            'else if (strcmp(argv[1], "sub") == 0) printf("%d\\n", a - b);\n    else return 2;',
        )
    )
    fixed = fixture_repos.commit(tiny, "Fixed sub")
    tests = tmp_path / "tiny-tests"
    fixture_repos.make_tests_repo(tests)
    fixture_repos.write(
        tests / "calc_sub.t",
        fixture_repos.TEST_HEAD
        + """
system("$bin sub 1 1 >/dev/null") == 0 or plan(skip_all => 'no sub');
plan(tests => 2);
is(run('sub', 5, 3), '2', 'subtract');
is(run('add', 5, 3), '8', 'add still works');
""",
        0o755,
    )
    fixture_repos.commit(tests, "Tests: sub")

    leads, log = run_sweep(tmp_path, c["c_later"], fixed, files="calc_sub.t,calc_add.t")
    # No flip between the ends (the file skips at c_later), but it first runs at `added`, where
    # "subtract" fails: bisected from there to the fix.
    assert leads["flipped"] == 1
    assert [(lead["fix_commit"], lead["assertions"]) for lead in leads["leads"]] == [
        (fixed, ["calc_sub.t:1 subtract"])
    ]
    assert f"1 files first run at {added[:12]}: 1 assertions" in log


def test_an_assertion_behind_a_todo_skip_counts_as_failing(tmp_path):
    # nginx-tests do not run an assertion on versions known to crash on it ("not ok 4 # TODO &
    # SKIP leaves coredump"): that line has no name, and the assertion of the same number that
    # passes later is the flip.
    c = fixture_repos.make_upstream(tmp_path / "tiny")
    tests = tmp_path / "tiny-tests"
    fixture_repos.make_tests_repo(tests)
    fixture_repos.write(
        tests / "guarded.t",
        fixture_repos.TEST_HEAD
        + """
plan(tests => 2);
TODO: {
todo_skip 'crashes', 1 unless run('mul', 2, 3) eq '6';
is(run('mul', 3, 3), '9', 'square');
}
is(run('add', 1, 1), '2', 'add');
""",
        0o755,
    )
    fixture_repos.commit(tests, "Tests: guarded")
    leads, _ = run_sweep(tmp_path, c["c_mul_bug"], c["c_later"], files="guarded.t")
    assert (
        "TODO & SKIP crashes"
        in (
            next((tmp_path / "work" / "tap").glob(f"*/{c['c_mul_bug'][:12]}/guarded.t.tap"))
        ).read_text()
    )
    assert [(lead["fix_commit"], lead["assertions"]) for lead in leads["leads"]] == [
        (c["c_mul_fix"], ["guarded.t:1 square"])
    ]
