#!/usr/bin/env python3
"""Record what the pipeline's stages write for the verdict's cases, as fixtures of the quick tests
(tests/recorded/, read by tests/test_recorded_verdicts.py; its README says what each unit shows).

    python scripts/record_verdict_fixtures.py [--only tiny|nginx|plan] [--work DIR]

Nothing is written by hand: each case is a real ``doit run`` of this checkout on a benchmark file
written here, and what a unit's stages wrote (build.json, prove.json, grade.json, strict.json,
model.patch, tap/, strict/) is copied as it is, with the reference side's kept strict runs from
the cache (``strict-reference/``). Two projects:

- ``tiny``: the fixture repositories of the hermetic tests (tests/fixture_repos.py), with two more
  test files committed to their test repository here (PARTIAL_SKIP, TAMPER), the host's compiler
  and Perl. Seconds.
- ``nginx``: real nginx and nginx-tests from the mirrors (NGINX_EVAL_REPO_URL), two tasks of the
  shipped benchmark and copies of the first with other test files or patches. Minutes.

``plan`` records the build plan of the shipped benchmark (tasks/nginx.json): what git answers
for it (each base's auto/ tree, the fixes that change a header, the paths changed between bases
of a group) and the plans build/plan.py made from them.

Patches that misbehave on purpose are made here: an nginx that writes TAP into its parent's stdout
(the test's TAP pipe, past the output guard), one that does not start, one that kills every
process it may (in prove's PID namespace: its test file), one that reads past a heap block, one
that breaks `-V`.
"""

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(SOURCE))
sys.path.insert(0, str(SOURCE / "tests"))
import fixture_repos  # noqa: E402
from nginx_mirrors import GZIP, GZIP_OVER_READ, nginx_file, unified  # noqa: E402

from nginx_eval.core import jsonio  # noqa: E402

OUT = SOURCE / "tests" / "recorded"
# What a unit's stages write that the verdict is read from (agent.json: none of these modes has
# an agent; patch.json: the patch stage's, which the grade does not read).
UNIT_FILES = ("build.json", "prove.json", "strict.json", "grade.json", "model.patch")
UNIT_DIRS = ("tap", "strict")

# -- the fixture project ----------------------------------------------------------------------

# Test files added to the fixture's test repository for these recordings.
PARTIAL_SKIP = (
    fixture_repos.TEST_HEAD
    + """
plan(tests => 4);
is(run('add', 2, 3), '5', 'add two numbers');
SKIP: { skip 'Foo::Bar not installed', 1; ok(1, 'foo bar'); }
SKIP: {
skip 'mul is broken', 1 unless run('mul', 1, 1) eq '1';
is(run('mul', 2, 3), '6', 'mul after the check');
}
ok(1, 'last');
"""
)

# Die, or bail out, when tiny's mul is killed by a signal.
CRASH = (
    fixture_repos.TEST_HEAD
    + """
plan(tests => 3);
is(run('add', 2, 3), '5', 'add two numbers');
my $out = run('mul', 2, 3);
%s if $? & 127;
is($out, '6', 'mul');
ok(1, 'last');
"""
)

# The server part of tiny's main(): what the patches below change.
SERVING = '        printf("tiny: serving\\n");\n        return 0;\n'


def tamper_c(lines, later=False):
    """C that writes `lines` into the test's own stdout (its TAP pipe to prove), past the output
    guard, which only redirects the server's stdout and stderr; `later`: from a child, a second
    after the server started, when the test has printed its own lines."""
    write = f'fputs("{lines}", tap);'
    if later:
        write = f"if (fork() == 0) {{ sleep(1); {write} fclose(tap); _exit(0); }}"
    return (
        "        {\n"
        "            char fd1[64];\n"
        "            FILE *tap;\n"
        '            snprintf(fd1, sizeof(fd1), "/proc/%d/fd/1", (int) getppid());\n'
        '            if ((tap = fopen(fd1, "a")) != NULL) {\n'
        f"                {write}\n"
        "                fclose(tap);\n"
        "            }\n"
        "        }\n"
    )


# SIGKILL to every process the server may signal: in the test file's PID namespace (prove's),
# the test file's processes; prove is the namespace's init and lives on. BYSTANDER, a process of
# the host (this script), reachable only without that namespace: then nothing is killed.
KILL_ALL_C = r"""        if (kill(BYSTANDER, 0) == -1) {
            kill(-1, SIGKILL);
        }
""".replace("BYSTANDER", str(os.getpid()))

OVER_READ_C = """
#include <stdlib.h>

int calc_peek(int n)
{
    char *p = calloc(4, 1);
    char c = p[n];              /* calc_peek(4): one past the end, read, never used */
    free(p);
    return c * 0;
}
"""

# A patch that compiles only without the sanitizers.
NO_SANITIZERS = "#ifdef __SANITIZE_ADDRESS__\n#error not with the sanitizers\n#endif\n"

VERSION_C = """#include <stdio.h>
#include "ngx_auto_config.h"

void print_version(void)
{
    printf("tiny version: 1.0\\nconfigure options: %s\\n", NGX_CONFIGURE);
}
"""


def git(cwd, *args):
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=dict(os.environ, **fixture_repos.ENV),
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def tiny_patch(mirrors, base, edits, start=None):
    """The diff from `base` of the tree at `start` (default base) with edits[path](text)
    applied, as a predictions file carries it."""
    repo = mirrors / "acme+tiny"
    work = Path(tempfile.mkdtemp(prefix="tiny-patch-"))
    shutil.rmtree(work)
    git(repo, "worktree", "add", "-q", "--detach", str(work), start or base)
    for path, edit in edits.items():
        target = work / path
        target.write_text(edit(target.read_text() if target.exists() else ""))
    git(work, "add", "-A")
    diff = git(work, "diff", "--cached", "--binary", "--full-index", base)
    git(repo, "worktree", "remove", "--force", str(work))
    return diff


def serving(replacement):
    """An edit of tiny's nginx.c whose server part runs `replacement` instead."""

    def edit(text):
        assert SERVING in text
        return text.replace(SERVING, replacement, 1)

    return edit


def fix_add(text):
    return text.replace("a - b", "a + b")


def over_read_in_mul(text):
    text = text.replace('#include "calc.h"\n', '#include "calc.h"\n' + OVER_READ_C)
    return text.replace(
        "int calc_mul(int a, int b)\n{\n    return ",
        "int calc_mul(int a, int b)\n{\n    return calc_peek(4) + ",
    )


def version_elsewhere(text):
    """-V's printing moved into version.c, with another label: version.t fails."""
    text = text.replace(
        'printf("tiny version: 1.0\\nconfigure arguments: %s\\n", NGX_CONFIGURE);',
        "print_version();",
    )
    return text.replace('#include "calc.h"', '#include "calc.h"\nvoid print_version(void);')


def tiny_task(iid, base, fix, tests, files, f2p, p2p, timeout=20):
    return dict(fixture_repos.task(iid, base, fix, tests, files, f2p, p2p), test_timeout=timeout)


def doit(env, *args):
    argv = [sys.executable, "-m", "doit", "-f", str(SOURCE / "dodo.py"), *args]
    print("+", " ".join(args), flush=True)
    proc = subprocess.run(argv, env=env, cwd=SOURCE, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"doit {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def predictions(path, patches):
    path.write_text(
        "".join(
            json.dumps({"instance_id": iid, "model_name_or_path": "recorded", "model_patch": p})
            + "\n"
            for iid, p in patches.items()
        )
    )
    return path


def record_tiny(work, out):
    fx = fixture_repos.make_fixture(work)
    mirrors, c = fx["mirrors"], fx["commits"]
    tests_repo = mirrors / "acme+tiny-tests"
    fixture_repos.write(tests_repo / "partial_skip.t", PARTIAL_SKIP, 0o755)
    fixture_repos.write(tests_repo / "crash.t", CRASH % 'die "tiny crashed\\n"', 0o755)
    fixture_repos.write(tests_repo / "crash_bail.t", CRASH % "BAIL_OUT('tiny crashed')", 0o755)
    t = fixture_repos.commit(tests_repo, "Tests: partial skips", date=fixture_repos.TESTS_DATE)
    add, add_fix, mul, mul_fix = c["c_add_bug"], c["c_add_fix"], c["c_mul_bug"], c["c_mul_fix"]
    add_files = ["calc_add.t"]
    add_f2p = ["calc_add.t:1 add two numbers"]
    add_p2p = ["calc_add.t:2 add zeros", "calc_add.t:3 mul still works"]
    server_f2p = ["server.t:1 add after start"]
    server_p2p = ["server.t:2 mul after start"]
    tasks = [
        tiny_task("tiny-add", add, add_fix, t, add_files, add_f2p, add_p2p),
        tiny_task(
            "tiny-mul",
            mul,
            mul_fix,
            t,
            ["calc_mul.t", "version.t"],
            ["calc_mul.t:1 multiply", "calc_mul.t:3 square"],
            ["calc_mul.t:2 multiply by zero", "version.t:1 version output"],
        ),
        # hang.t sleeps after its first assertion: killed at the time limit.
        tiny_task(
            "tiny-hang",
            add,
            add_fix,
            t,
            ["calc_add.t", "hang.t"],
            add_f2p,
            ["hang.t:1 before the hang", "hang.t:2 after the hang"],
            timeout=3,
        ),
        # skip.t skips entirely, under every build: a file the base cannot run either.
        tiny_task("tiny-skip", add, add_fix, t, ["calc_add.t", "skip.t"], add_f2p, add_p2p),
        tiny_task(
            "tiny-partial",
            add,
            add_fix,
            t,
            ["partial_skip.t"],
            ["partial_skip.t:1 add two numbers"],
            ["partial_skip.t:3 mul after the check", "partial_skip.t:4 last"],
        ),
        # The same file with its always-skipped assertion graded.
        tiny_task(
            "tiny-partial-graded",
            add,
            add_fix,
            t,
            ["partial_skip.t"],
            ["partial_skip.t:1 add two numbers"],
            ["partial_skip.t:2 foo bar", "partial_skip.t:4 last"],
        ),
    ]
    server = lambda iid, file: tiny_task(
        iid,
        add,
        add_fix,
        t,
        [file],
        [i.replace("server.t", file) for i in server_f2p],
        [i.replace("server.t", file) for i in server_p2p],
    )
    crash = lambda iid, file: tiny_task(
        iid,
        add,
        add_fix,
        t,
        [file],
        [f"{file}:1 add two numbers"],
        [f"{file}:2 mul", f"{file}:3 last"],
    )
    tasks += [
        crash("tiny-crash-die", "crash.t"),
        crash("tiny-crash-bail", "crash_bail.t"),
        server("tiny-server-tamper", "server.t"),
        server("tiny-server-tamper-ahead", "server.t"),
        server("tiny-server-tamper-after", "server.t"),
        server("tiny-server-nostart", "server.t"),
        server("tiny-server-killer", "server.t"),
        server("tiny-server-die", "server_die.t"),
        server("tiny-server-spoof", "server.t"),
        tiny_task("tiny-add-broken", add, add_fix, t, add_files, add_f2p, add_p2p),
        tiny_task("tiny-add-nosan", add, add_fix, t, add_files, add_f2p, add_p2p),
        tiny_task("tiny-add-nosan-regression", add, add_fix, t, add_files, add_f2p, add_p2p),
        tiny_task("tiny-add-overread", add, add_fix, t, add_files, add_f2p, add_p2p),
        tiny_task("tiny-add-regression", add, add_fix, t, add_files, add_f2p, add_p2p),
        tiny_task(
            "tiny-flaky",
            add,
            add_fix,
            t,
            ["calc_add.t", "flaky.t"],
            add_f2p,
            ["flaky.t:1 add two numbers", "flaky.t:2 coin"],
        ),
    ]
    bench = {"name": "tiny", "tasks": tasks}
    (fx["root"] / "tasks" / "tiny.json").write_text(json.dumps(bench, indent=2))
    spoof = "1..2\\nok 1 - add after start\\nok 2 - mul after start\\n"
    crashing = lambda s: (
        fix_add(s)
        .replace("return a * b;", "abort();")
        .replace('#include "calc.h"\n', '#include <stdlib.h>\n#include "calc.h"\n')
    )
    nginx_c = "src/core/nginx.c"
    calc_c = "src/core/calc.c"
    patches = {
        "tiny-server-tamper": {nginx_c: serving(tamper_c(spoof) + SERVING)},
        "tiny-server-tamper-ahead": {
            nginx_c: serving(tamper_c("ok 2 - mul after start\\n") + SERVING)
        },
        "tiny-server-tamper-after": {
            nginx_c: serving(tamper_c("ok 3 - extra\\n", later=True) + SERVING)
        },
        "tiny-crash-die": {calc_c: crashing},
        "tiny-crash-bail": {calc_c: crashing},
        "tiny-server-nostart": {nginx_c: serving("        return 1;\n")},
        "tiny-server-killer": {nginx_c: serving(KILL_ALL_C + SERVING)},
        "tiny-server-die": {nginx_c: serving("        return 1;\n")},
        # Prints on its own stdout as a server: the output guard sends it to the nginx log.
        "tiny-server-spoof": {nginx_c: serving(f'        printf("{spoof}");\n' + SERVING)},
        "tiny-add-nosan": {calc_c: lambda s: fix_add(s) + NO_SANITIZERS},
        "tiny-add-nosan-regression": {
            calc_c: lambda s: fix_add(s) + NO_SANITIZERS,
            nginx_c: version_elsewhere,
            "src/core/version.c": lambda _: VERSION_C,
        },
        "tiny-add-broken": {calc_c: lambda s: fix_add(s) + "int broken(void) { return }\n"},
        "tiny-add-overread": {calc_c: lambda s: over_read_in_mul(fix_add(s))},
        "tiny-add-regression": {
            calc_c: fix_add,
            nginx_c: version_elsewhere,
            "src/core/version.c": lambda _: VERSION_C,
        },
        # The fix, and mul broken: partial_skip.t skips its third assertion with this patch only.
        "tiny-partial": {
            calc_c: lambda s: fix_add(s).replace("return a * b;", "return a * b + 1;")
        },
    }
    diffs = {}
    for iid, edits in patches.items():
        if iid.startswith("tiny-server") and iid != "tiny-server-spoof":
            edits = {calc_c: fix_add, **edits}
        diffs[iid] = tiny_patch(mirrors, add, edits)
    env = dict(fx["env"], NGINX_EVAL_RESULTS=str(work / "results"))
    plain = [t["instance_id"] for t in tasks if t["instance_id"] in PLAIN_TINY]
    doit(env, "run", "tiny:gold", "tiny:none", f"instances={','.join(plain)}", "report=0")
    preds = predictions(work / "predictions.jsonl", diffs)
    doit(env, "run", "tiny:file", f"predictions={preds}", "strict_files=2", "report=0")
    # Gold judged strict against the base (only when asked: strict_gold=1).
    strict_gold = ("run=strict-gold", "strict_gold=1", "strict_files=2", "report=0")
    doit(env, "run", "tiny:gold", "instances=tiny-add,tiny-mul", *strict_gold)
    # flaky.t passes on every other run of a binary: its first (above) passed, so here the first
    # run fails and its rerun passes.
    doit(env, "run", "tiny:gold", "instances=tiny-flaky", "run=rerun", "rerun_failed=1", "report=0")
    copy_results(work / "results", work / "cache", out, bench)


# Units of tiny:gold and tiny:none (the others are scored from predictions).
PLAIN_TINY = ("tiny-add", "tiny-mul", "tiny-hang", "tiny-skip", "tiny-partial-graded", "tiny-flaky")

# -- real nginx -------------------------------------------------------------------------------

RANGE = "nginx__nginx-f35475c083d4"  # range_clearing.t, default modules, 2022
TODO_TASK = "nginx__nginx-c8c7beb96f61"  # http_host.t: TODOs that fail at the base and the fix


def main_c_patch(repo, base, insertion):
    """src/core/nginx.c at `base` running `insertion` in main() before ngx_time_init() (after -V
    and -v have answered), only when nginx starts as a server."""
    before = nginx_file(repo, base, "src/core/nginx.c")
    anchor = "    ngx_time_init();\n"
    block = "    if (!ngx_test_config) {\n" + insertion + "    }\n\n"
    return unified("src/core/nginx.c", before, before.replace(anchor, block + anchor, 1))


def record_nginx(work, out, url):
    repo = url.format(owner="nginx", name="nginx")
    shipped = {
        t["instance_id"]: t for t in jsonio.read_json(SOURCE / "tasks" / "nginx.json")["tasks"]
    }
    keep = ("instance_id", "repo", "test_repo", "base_commit", "fix_commit", "fix_date")
    keep += ("test_commit", "test_files", "configure_flags", "fail_to_pass", "pass_to_pass")
    keep += ("problem_statement", "perl_modules", "area")
    rng = {k: v for k, v in shipped[RANGE].items() if k in keep}
    todo = {k: v for k, v in shipped[TODO_TASK].items() if k in keep}
    partial_skip = "proxy_next_upstream_tries.t"  # skip 'long tests', 4 unless TEST_NGINX_UNSAFE
    whole_skip = "stream_proxy_protocol2_tlv.t"  # needs the stream module, not built here
    tasks = [
        rng,
        todo,
        dict(
            rng,
            instance_id="range-skips",
            test_files=[*rng["test_files"], partial_skip, whole_skip],
            pass_to_pass=[*rng["pass_to_pass"], f"{partial_skip}:5 timeout"],
        ),
        # http_host.t:27 is a TODO at this base, failing with the fix too: graded here.
        dict(
            todo,
            instance_id="host-todo",
            pass_to_pass=[*todo["pass_to_pass"], "http_host.t:27 ipv4 w/port long (host header)"],
        ),
        *(dict(rng, instance_id=f"range-{what}") for what in ("tamper", "nostart", "killer")),
        dict(rng, instance_id="range-overread"),
    ]
    bench = {"name": "rec", "tasks": tasks}
    root = work / "project"
    (root / "tasks").mkdir(parents=True, exist_ok=True)
    (root / "tasks" / "rec.json").write_text(json.dumps(bench, indent=2))
    base = rng["base_commit"]
    gold = subprocess.run(
        ["git", "--git-dir", repo, "diff", base, rng["fix_commit"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    spoofed = "".join(
        f"ok {i.split(':')[1].split(' ', 1)[0]} - {i.split(' ', 1)[1]}\\n"
        for i in rng["fail_to_pass"]
    )
    gzip_text = nginx_file(repo, base, GZIP)
    over_read = gzip_text.replace(
        "\nstatic ngx_int_t\nngx_http_gzip_header_filter(ngx_http_request_t *r)\n{",
        GZIP_OVER_READ,
        1,
    ).replace("    if (!conf->enable\n", "    ngx_http_gzip_peek(r);\n\n    if (!conf->enable\n", 1)
    diffs = {
        "range-tamper": main_c_patch(repo, base, tamper_c(spoofed)),
        "range-nostart": main_c_patch(repo, base, "        return 1;\n"),
        "range-killer": main_c_patch(repo, base, KILL_ALL_C),
        "range-overread": gold + unified(GZIP, gzip_text, over_read),
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NGINX_EVAL_", "TEST_NGINX"))}
    env.update(
        NGINX_EVAL_ROOT=str(root),
        NGINX_EVAL_CACHE=str(work / "cache"),
        NGINX_EVAL_RESULTS=str(work / "results"),
        NGINX_EVAL_REPO_URL=url,
        NGINX_EVAL_TOOLCHAIN=os.environ.get("NGINX_EVAL_TOOLCHAIN", "host"),
    )
    plain = f"instances={RANGE},{TODO_TASK}"
    doit(env, "run", "-n", "2", "rec:gold", "rec:none", plain, "report=0")
    doit(env, "run", "-n", "2", "rec:gold", "instances=range-skips,host-todo", "report=0")
    preds = predictions(work / "predictions.jsonl", diffs)
    doit(env, "run", "-n", "2", "rec:file", f"predictions={preds}", "strict_files=2", "report=0")
    copy_results(work / "results", work / "cache", out, bench)


# -- copying what the stages wrote ------------------------------------------------------------


def copy_results(results, cache, out, bench):
    """Each unit's records and test output under out/<run>/<mode>/<iid>/, the benchmark file as
    out/<name>.json, and, for a unit the strict stage judged, the reference's kept runs of its
    files (strict-reference/<file>/run<n>/)."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / f"{bench['name']}.json").write_text(json.dumps(bench, indent=2) + "\n")
    for grade in sorted(results.glob("*/*/*/grade.json")):
        unit = grade.parent
        dest = out / unit.relative_to(results)
        dest.mkdir(parents=True)
        for name in UNIT_FILES:
            if (unit / name).exists():
                shutil.copyfile(unit / name, dest / name)
        for name in UNIT_DIRS:
            if (unit / name).is_dir():
                shutil.copytree(unit / name, dest / name)
        strict = jsonio.read_json(unit / "strict.json") or {}
        if strict.get("files") is None:
            continue
        ref_key = (strict.get("sanitizer") or {}).get("reference_key") or strict["reference_key"]
        for kept in sorted(cache.glob(f"strict-runs/{ref_key}/*/*/*/run*")):
            shutil.copytree(kept, dest / "strict-reference" / kept.parent.name / kept.name)


# -- the build plan of the shipped benchmark --------------------------------------------------


def record_plan(out, url):
    """git's answers for the shipped benchmark's build plan, and the plans made from them."""
    from nginx_eval.build import plan as buildplan
    from nginx_eval.core.layout import Layout
    from nginx_eval.run.benchmark import load_benchmark

    bench = load_benchmark(SOURCE / "tasks" / "nginx.json")
    tasks = list(bench.tasks)
    work = Path(tempfile.mkdtemp(prefix="plan-"))
    layout = Layout(root=work, cache=work / "cache", results_root=work / "results")
    bare = layout.bare_repo("nginx/nginx")
    bare.parent.mkdir(parents=True)
    # The clone the harness makes holds these commits; the mirror holds them and more.
    os.symlink(url.format(owner="nginx", name="nginx"), bare)
    calls = []
    real = buildplan.changed_paths

    def recording(repo, pairs):
        answer = real(repo, pairs)
        calls.append([[list(p) for p in pairs], answer])
        return answer

    ids = buildplan.tasks_build_system_ids(layout, tasks)
    heavy = buildplan.fixes_touching_headers(layout, tasks)
    buildplan.changed_paths = recording
    try:
        order = buildplan.interleave_by_build_group(layout, tasks, ids, heavy)
        plan = buildplan.base_build_plan(layout, tasks, ids, order)
    finally:
        buildplan.changed_paths = real
    shutil.rmtree(work)
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "benchmark": "tasks/nginx.json",
        "benchmark_digest": bench.digest,
        # What the plan reads of a task: [instance id, repo, base, fix, configure flags].
        "tasks": [
            [t.instance_id, t.repo, t.base_commit, t.fix_commit, list(t.configure_flags)]
            for t in tasks
        ],
        "build_system_ids": ids,
        "fixes_touching_headers": sorted(heavy),
        "changed_paths": calls,
        "order": [t.instance_id for t in order],
        "plan": [[name, t.instance_id, parent] for name, t, parent in plan],
    }
    with gzip.open(out / "nginx-plan.json.gz", "wt") as f:
        json.dump(record, f, sort_keys=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("tiny", "nginx", "plan"), action="append")
    parser.add_argument("--work", help="where the projects run (default: a temporary directory)")
    args = parser.parse_args()
    only = args.only or ["tiny", "nginx", "plan"]
    work = Path(args.work or tempfile.mkdtemp(prefix="record-verdicts-"))
    url = os.environ.get("NGINX_EVAL_REPO_URL", "")
    if ("nginx" in only or "plan" in only) and "{owner}" not in url:
        sys.exit("nginx-eval: error: NGINX_EVAL_REPO_URL must name the mirrors ({owner}+{name})")
    if "tiny" in only:
        record_tiny(work / "tiny", OUT / "tiny")
    if "nginx" in only:
        record_nginx(work / "nginx", OUT / "nginx", url)
    if "plan" in only:
        record_plan(OUT / "plan", url)
    print(f"recorded under {OUT} (projects in {work})")


if __name__ == "__main__":
    main()
