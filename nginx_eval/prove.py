"""Stage 6, prove: run the task's test files with ``prove -v`` against the built binary.

The nginx-tests tree of each pinned test commit is extracted once into the cache (``tests:<commit>``),
made read-only and shared. Before each prove it is compared with the test commit in the bare clone
(git, a scratch index); an edited, added or removed file gets the tree extracted again and a note
in prove.json. Each file runs with its own time limit (task.test_timeout) in its own process
group, so a hanging test and the nginx it started are killed. The output of each file is kept in
``tap/<file>.tap`` (stdout, the TAP stream), ``tap/<file>.stderr`` and ``tap/<file>.nginx.log``.

What the test sees is pinned, not inherited: prove runs with ``--norc`` (no ~/.proverc) in an
environment the harness builds (``prove_environment``): PATH, HOME, TMPDIR, USER, LOGNAME and
PERL5LIB pass through, no inherited ``TEST_NGINX_*`` does (``TEST_NGINX_UNSAFE`` alone adds
assertions). ``TEST_NGINX_GLOBALS`` is ``NGINX_EVAL_TEST_GLOBALS`` plus, as root, ``user root;``
unless that already names a user (nginx refuses two; as root its workers would otherwise switch
to ``nobody`` and fail on the test's private temp directory). The environment is recorded in
prove.json and is part of prove's inputs.

``TEST_NGINX_BINARY`` is an output guard (nginx_output_guard.sh) in front of the real binary:
Test::Nginx starts nginx with the test's stdout, which is the TAP stream, so nginx run as a server
writes to ``tap/<file>.nginx.log`` instead. ``TEST_NGINX_MODULES`` names the build's objs/.

When a file did not run to its end (it skipped entirely, printed no plan, died, bailed out, or
its stream was tampered with) or skipped a graded assertion, the same file runs once more against
the task's base build (``reference``, ``tap/reference/``): grade.py decides from that run whether
the patch or the environment is at fault. A prove whose grade was an environment error is not
kept: the next ``doit run`` proves again.

With ``rerun_failed=1`` (options.py; then, and only then, part of prove's config), a file with a
graded assertion that failed or did not run runs once more against the same binary, and both
streams are kept: ``tap/<file>.tap`` (the first run) and ``tap/<file>.rerun.tap`` (with
``.rerun.stderr`` and ``.rerun.nginx.log``). grade.py takes the rerun's verdict and records both.
The reference run, when needed, covers a file if either of its runs needs one.

``prove.json``::

    {"inputs", "binary", "binary_key", "test_commit", "environment": {name: value},
     "files": {"<file>": {"exit_code", "timed_out", "seconds", "tap", "stderr", "nginx_log",
                          "missing": bool}},
     "reference": {"<file>": the same record, paths under tap/reference/}, "reference_key",
     "reruns": {"<file>": the same record, of tap/<file>.rerun.tap},   # rerun_failed=1 only
     "notes": [str],
     "versions": {"perl": `perl -e 'print $^V'` ("v5.36.0"), "openssl": `openssl version`'s
                  first line} | null}

``versions`` names the perl that ran the tests and the openssl program they made their
certificates with, each asked once per process (null: the program did not answer; the whole
field null: no test ran, the build failed). It is not one of prove's inputs: the report
(report_records.py) reads it, so that a report rendered elsewhere names the Perl and OpenSSL
of the run.
"""

import os
import shutil
import subprocess
from functools import lru_cache

from . import jsonio, limits, stamps
from .build import ensure_build
from .buildplan import build_task_name
from .buildcache import binary_path, remove_tree, set_write_bits, verify_build
from .gitcmd import GitError, extract_tree, scratch_index
from .layout import PACKAGE_DIR
from .locks import locked
from .procs import kill_leftovers, run_limited
from .repositories import repo_task
from .tapstream import needs_reference, parse_tap

OUTPUT_GUARD = PACKAGE_DIR / "nginx_output_guard.sh"
# Variables of the harness's own environment a test may see; everything else is set here.
PASSED_THROUGH = ("PATH", "HOME", "TMPDIR", "USER", "LOGNAME")
# Extra `TEST_NGINX_GLOBALS` a user wants (e.g. a `user` directive of their own).
GLOBALS_VAR = "NGINX_EVAL_TEST_GLOBALS"


def tests_tree_changes(bare, commit, tree):
    """The paths in which `tree` differs from `commit` (edited, removed or added files), from
    git with a scratch index: the bare clone's objects are the reference, not a stamp."""
    try:
        with scratch_index(bare, tree, commit) as index:
            return sorted(os.fsdecode(p) for p in set(index.modified() + index.untracked()))
    except GitError:
        return ["<the test commit cannot be read>"]


def _extract(layout, repo, commit):
    tree = layout.tests_tree(commit)
    for stale in tree.parent.glob(f".{commit}.tmp*"):
        remove_tree(stale)
    tmp = tree.with_name(f".{commit}.tmp{os.getpid()}")
    extract_tree(layout.bare_repo(repo), commit, tmp)
    set_write_bits(tmp, False)
    remove_tree(tree)
    os.replace(tmp, tree)
    jsonio.write_json(layout.tests_stamp(commit), {"repo": repo, "commit": commit})


def tests_tree_present(layout, commit):
    """doit uptodate of tests:<commit>: the tree and its stamp are there (a tree is never
    changed in place; verified_tests_tree checks its contents before each prove)."""
    return bool(jsonio.read_json(layout.tests_stamp(commit))) and layout.tests_tree(commit).is_dir()


def extract_tests(layout, repo, commit):
    if tests_tree_present(layout, commit):
        return
    # Runs of other names share this tree: under the lock, no process replaces a tree another
    # one is proving in, and temporary trees of killed extractions are discarded.
    with locked(layout.lock(f"tests-{commit}")):
        if tests_tree_present(layout, commit):
            return
        _extract(layout, repo, commit)


def verified_tests_tree(layout, repo, commit):
    """The test tree of `commit`, extracted again if anything changed it; [notes]."""
    extract_tests(layout, repo, commit)
    tree = layout.tests_tree(commit)
    changes = tests_tree_changes(layout.bare_repo(repo), commit, tree)
    if not changes:
        return tree, []
    with locked(layout.lock(f"tests-{commit}")):
        changes = tests_tree_changes(layout.bare_repo(repo), commit, tree)
        if changes:
            _extract(layout, repo, commit)
    if not changes:
        return tree, []
    return tree, [f"the nginx-tests tree of {commit[:12]} had been changed "
                  f"({', '.join(changes[:5])}{', ...' if len(changes) > 5 else ''}); "
                  f"extracted again"]


def output_guard(layout, binary):
    """The output guard's directory for `binary` (see the module docstring): `nginx`, the guard,
    and `src`, a link to the build's objs/src (Test::Nginx looks for the perl module's library
    beside TEST_NGINX_BINARY)."""
    guard_dir = layout.output_guard(binary)
    script = OUTPUT_GUARD.read_text().replace("@REAL_NGINX@", _sh_quote(str(binary)))
    guard = guard_dir / "nginx"
    if guard.is_file() and guard.read_text() == script:
        return guard
    # One writer at a time: the proves of one binary (threads of one doit too) all get here
    # at once, and a second writer's remove_tree would pull the guard from under the first's test.
    with locked(layout.lock(f"guard-{guard_dir.name}")):
        if guard.is_file() and guard.read_text() == script:
            return guard
        tmp = guard_dir.with_name(f".{guard_dir.name}.{os.getpid()}")
        remove_tree(tmp)
        tmp.mkdir(parents=True)
        (tmp / "nginx").write_text(script)
        (tmp / "nginx").chmod(0o755)
        os.symlink(os.path.join(os.path.dirname(binary), "src"), tmp / "src")
        remove_tree(guard_dir)
        os.replace(tmp, guard_dir)
    return guard


def _sh_quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def test_globals(environ=None):
    """TEST_NGINX_GLOBALS: the user's extra globals, and `user root;` as root unless they name
    a user already."""
    env = os.environ if environ is None else environ
    extra = env.get(GLOBALS_VAR, "").strip()
    names_user = any(part.split()[:1] == ["user"] for part in extra.split(";"))
    if os.geteuid() == 0 and not names_user:
        extra = " ".join(filter(None, ["user root;", extra]))
    return extra


@lru_cache(maxsize=1)
def tool_versions():
    """{"perl", "openssl"}: the versions prove.json records (see there), once per process."""
    return {"perl": _first_line(["perl", "-e", "print $^V"]),
            "openssl": _first_line(["openssl", "version"])}


def _first_line(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0] if out.returncode == 0 and lines else None


@lru_cache(maxsize=1)
def _program(name):
    found = shutil.which(name)
    return os.path.realpath(found) if found else None


def pinned_environment(tests_tree, environ=None):
    """The part of a prove's environment that is the same for every binary: recorded in
    prove.json and part of prove's inputs (PATH through the programs it resolves to)."""
    env = os.environ if environ is None else environ
    pinned = {name: env[name] for name in PASSED_THROUGH if name in env and name != "PATH"}
    pinned.update({"LC_ALL": "C", "LANG": "C", "TEST_NGINX_GLOBALS": test_globals(env),
                   "PERL5LIB": os.pathsep.join(filter(None, [str(tests_tree / "lib"),
                                                             env.get("PERL5LIB")]))})
    return pinned


def environment_inputs(tests_tree):
    return dict(pinned_environment(tests_tree), prove=_program("prove"), perl=_program("perl"))


def prove_environment(tests_tree, guard, binary):
    env = pinned_environment(tests_tree)
    if "PATH" in os.environ:
        env["PATH"] = os.environ["PATH"]
    env.update({"TEST_NGINX_BINARY": str(guard),
                "TEST_NGINX_MODULES": os.path.dirname(str(binary))})
    return env


def run_prove_files(layout, tests_tree, binary, test_files, timeout, tap_dir, token_file=None,
                    suffix=""):
    """Run each file against `binary`; return {file: record}. Output files go to tap_dir, named
    after the file plus `suffix` (".rerun"); token_file: see procs.kill_leftovers."""
    tap_dir.mkdir(parents=True, exist_ok=True)
    env = prove_environment(tests_tree, output_guard(layout, binary), binary)
    files = {}
    for name in test_files:
        stem = name.replace("/", "__") + suffix
        tap_path, err_path = tap_dir / f"{stem}.tap", tap_dir / f"{stem}.stderr"
        log_path = tap_dir / f"{stem}.nginx.log"
        record = {"tap": tap_path.name, "stderr": err_path.name, "nginx_log": log_path.name}
        if not (tests_tree / name).is_file():
            tap_path.write_text("")
            err_path.write_text(f"[nginx-eval] {name} does not exist at this test commit\n")
            files[name] = dict(record, exit_code=None, timed_out=False, seconds=0.0, missing=True)
            continue
        log_path.write_bytes(b"")
        with open(tap_path, "wb") as so, open(err_path, "wb") as se, limits.slot("prove"):
            outcome = run_limited(["prove", "--norc", "-v", name], cwd=str(tests_tree),
                                  env=dict(env, NGINX_EVAL_NGINX_LOG=str(log_path)),
                                  timeout=timeout, stdout=so, stderr=se, token_file=token_file,
                                  children_first=True)
        if outcome.timed_out:
            with open(err_path, "ab") as se:
                se.write(f"\n[nginx-eval] killed after {timeout} s\n".encode())
        files[name] = dict(record, exit_code=outcome.exit_code, timed_out=outcome.timed_out,
                           seconds=outcome.seconds, missing=False)
    return files


def graded_in(task, name):
    """The graded assertion ids (fail_to_pass, pass_to_pass) of the test file `name`."""
    return [i for i in list(task.fail_to_pass) + list(task.pass_to_pass)
            if i.startswith(f"{name}:")]


def _parsed(tap_dir, name, record):
    return parse_tap(name, (tap_dir / record["tap"]).read_text(errors="replace"))


def files_needing_reference(task, tap_dir, files):
    """The files whose problems only a run of the base build can attribute (tapstream)."""
    return [name for name, record in files.items()
            if needs_reference(_parsed(tap_dir, name, record), record, graded_in(task, name))]


def files_to_rerun(task, tap_dir, files):
    """The files of the test commit with a graded assertion that did not pass (failed, did not
    run, or its stream cannot be trusted): rerun_failed=1 runs each once more."""
    out = []
    for name, record in files.items():
        if record["missing"]:
            continue        # nothing to run again: an environment error either way
        fr = _parsed(tap_dir, name, record)
        if fr.tampered or not all(fr.results.get(i) is True for i in graded_in(task, name)):
            out.append(name)
    return out


def reference_runs(layout, task, build, names, tests_tree, tap_dir, token_file):
    """({file: record} of the base build's runs of `names`, the base build's key); ({}, None)
    when the base does not build here (then the environment is at fault); (None, key) when the
    candidate is the base build itself."""
    base = ensure_build(layout, layout.bare_repo(task.repo), task.base_commit,
                        task.configure_flags, b"")
    if base["status"] != "built":
        return {}, None
    if base["key"] == build["key"]:
        return None, base["key"]        # the candidate is the base: its own runs are the reference
    files = run_prove_files(layout, tests_tree, binary_path(layout, base["key"]), names,
                            task.test_timeout, tap_dir / "reference", token_file=token_file)
    return ({name: dict(rec, **{k: f"reference/{rec[k]}" for k in ("tap", "stderr", "nginx_log")})
             for name, rec in files.items()}, base["key"])


def grade_was_env_error(layout, mode_name, iid):
    return (jsonio.read_json(layout.grade_json(mode_name, iid)) or {}).get("status") == "env_error"


def verdict_kept(layout, mode_name, iid):
    """doit's uptodate: a prove whose grade blamed the environment is done again."""
    return not grade_was_env_error(layout, mode_name, iid)


def prove_built(layout, task, build, record, tap_dir, token_file, rerun_failed):
    """Fill `record` (prove.json) with the runs of the built binary, its reruns and the base
    build's reference runs."""
    problem = verify_build(layout, build)
    if problem:
        raise RuntimeError(f"{problem}; `doit run` again rebuilds it")
    tree, notes = verified_tests_tree(layout, task.test_repo, task.test_commit)
    binary = binary_path(layout, build["key"])
    files = run_prove_files(layout, tree, binary, task.test_files, task.test_timeout,
                            tap_dir, token_file=token_file)
    record.update(binary=str(binary), binary_key=build["key"], files=files, notes=notes,
                  environment=prove_environment(tree, output_guard(layout, binary), binary),
                  versions=tool_versions())
    reruns = {}
    if rerun_failed:
        reruns = run_prove_files(layout, tree, binary, files_to_rerun(task, tap_dir, files),
                                 task.test_timeout, tap_dir, token_file=token_file,
                                 suffix=".rerun")
        record["reruns"] = reruns
    # The grade decides from the rerun (where there is one): the reference must cover both runs.
    needing = (set(files_needing_reference(task, tap_dir, files))
               | set(files_needing_reference(task, tap_dir, reruns)))
    needed = [name for name in files if name in needing]
    if needed:
        refs, key = reference_runs(layout, task, build, needed, tree, tap_dir, token_file)
        decided = dict(files, **reruns)
        record["reference"] = ({n: decided[n] for n in needed} if refs is None else refs)
        record["reference_key"] = key


def prove_task(layout, mode_name, task, config, files):
    inputs = stamps.inputs_digest(config, files)
    out = layout.prove_json(mode_name, task.instance_id)
    build = jsonio.read_json(layout.build_json(mode_name, task.instance_id))
    token_file = layout.running_token(mode_name, task.instance_id, "prove")
    kill_leftovers(token_file)          # a test a killed doit left running
    tap_dir = layout.tap_dir(mode_name, task.instance_id)
    shutil.rmtree(tap_dir, ignore_errors=True)
    record = {"inputs": inputs, "test_commit": task.test_commit, "binary": None,
              "binary_key": None, "environment": {}, "files": {}, "reference": {},
              "reference_key": None, "notes": [], "versions": None}
    rerun_failed = bool(config.get("rerun_failed"))
    if rerun_failed:
        record["reruns"] = {}
    if build["status"] == "built":
        prove_built(layout, task, build, record, tap_dir, token_file, rerun_failed)
    jsonio.write_json(out, record)


def tests_task_name(commit):
    return f"tests:{commit[:12]}"


def tests_task_names(tasks):
    """The names of the test-tree tasks of `tasks`, each once, in their order."""
    return list(dict.fromkeys(tests_task_name(t.test_commit) for t in tasks))


def gen_tasks(ctx):
    commits = {}
    for t in ctx.all_tasks:
        commits.setdefault(t.test_commit, t.test_repo)
    for commit, repo in sorted(commits.items()):
        yield {
            "basename": "tests",
            "name": tests_task_name(commit).split(":", 1)[1],
            "doc": f"{repo} tree at {commit}",
            "actions": [(extract_tests, [ctx.layout, repo, commit])],
            "targets": [str(ctx.layout.tests_stamp(commit))],
            "task_dep": [repo_task(repo)],
            "uptodate": [(tests_tree_present, [ctx.layout, commit])],
        }
    for bench, mode, task in ctx.units():
        name = ctx.unit_name(bench, mode, task)
        iid = task.instance_id
        config = {"test_commit": task.test_commit, "test_files": list(task.test_files),
                  "timeout": task.test_timeout, "base": task.base_commit,
                  "environment": environment_inputs(ctx.layout.tests_tree(task.test_commit)),
                  "guard": jsonio.file_digest(OUTPUT_GUARD)}
        if ctx.options.rerun_failed:
            # Only when on: with it off, prove's inputs digest is what it always was.
            config["rerun_failed"] = 1
        yield stamps.stage_task(
            basename="prove", name=name,
            doc=f"prove {' '.join(task.test_files)} for the {mode.name} patch of {iid}",
            action=prove_task, args=[ctx.layout, mode.name, task], config=config,
            files=[ctx.layout.build_json(mode.name, iid)],
            task_dep=[tests_task_name(task.test_commit), build_task_name(name)],
            targets=[ctx.layout.prove_json(mode.name, iid)],
            # An environment error is no verdict to keep: prove again on the next run.
            also_current=[(verdict_kept, [ctx.layout, mode.name, iid])])
