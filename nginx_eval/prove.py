"""Stage 6, prove: run the task's test files with ``prove -v`` against the built binary.

The nginx-tests tree of each pinned test commit is extracted once into the cache (``tests:<commit>``)
and shared read-only. Each file runs with its own time limit (task.test_timeout) in its own process
group, so a hanging test and the nginx it started are killed. The raw output of each file is kept in
``tap/<file>.tap`` (stdout, the TAP stream) and ``tap/<file>.stderr``.

As root, nginx workers would switch to ``nobody`` and fail on the test's private temp directory, so
``user root;`` is added to TEST_NGINX_GLOBALS when running as root.

``prove.json``::

    {"inputs", "binary", "test_commit",
     "files": {"<file>": {"exit_code", "timed_out", "seconds", "tap", "stderr", "missing": bool}}}
"""

import os
import shutil

from doit.tools import config_changed

from . import jsonio
from .build import build_is_published
from .gitcmd import extract_tree
from .locks import locked
from .procs import kill_leftovers, run_limited
from .repositories import repo_task


def extract_tests(layout, repo, commit):
    tree = layout.tests_tree(commit)
    if jsonio.read_json(layout.tests_stamp(commit)) and tree.is_dir():
        return
    # Runs of other names share this tree: under the lock, no process replaces a tree another
    # one is proving in, and temporary trees of killed extractions are discarded.
    with locked(layout.lock(f"tests-{commit}")):
        if jsonio.read_json(layout.tests_stamp(commit)) and tree.is_dir():
            return
        for stale in tree.parent.glob(f".{commit}.tmp*"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = tree.with_name(f".{commit}.tmp{os.getpid()}")
        extract_tree(layout.bare_repo(repo), commit, tmp)
        shutil.rmtree(tree, ignore_errors=True)
        os.replace(tmp, tree)
        jsonio.write_json(layout.tests_stamp(commit), {"repo": repo, "commit": commit})


def prove_env(tests_tree, binary):
    env = dict(os.environ)
    env["TEST_NGINX_BINARY"] = str(binary)
    env["PERL5LIB"] = os.pathsep.join(filter(None, [str(tests_tree / "lib"), env.get("PERL5LIB")]))
    if os.geteuid() == 0:
        env["TEST_NGINX_GLOBALS"] = " ".join(filter(None, ["user root;",
                                                           env.get("TEST_NGINX_GLOBALS")]))
    for var in ("TEST_NGINX_LEAVE", "TEST_NGINX_CATLOG"):
        env.pop(var, None)
    return env


def run_prove_files(tests_tree, binary, test_files, timeout, tap_dir, token_file=None):
    """Run each file; return {file: record}. Output files go to tap_dir; token_file: see
    procs.kill_leftovers."""
    tap_dir.mkdir(parents=True, exist_ok=True)
    env = prove_env(tests_tree, binary)
    files = {}
    for name in test_files:
        stem = name.replace("/", "__")
        tap_path, err_path = tap_dir / f"{stem}.tap", tap_dir / f"{stem}.stderr"
        record = {"tap": str(tap_path.name), "stderr": str(err_path.name)}
        if not (tests_tree / name).is_file():
            tap_path.write_text("")
            err_path.write_text(f"[nginx-eval] {name} does not exist at this test commit\n")
            files[name] = dict(record, exit_code=None, timed_out=False, seconds=0.0, missing=True)
            continue
        with open(tap_path, "wb") as so, open(err_path, "wb") as se:
            outcome = run_limited(["prove", "-v", name], cwd=str(tests_tree), env=env,
                                  timeout=timeout, stdout=so, stderr=se, token_file=token_file,
                                  children_first=True)
        if outcome.timed_out:
            with open(err_path, "ab") as se:
                se.write(f"\n[nginx-eval] killed after {timeout} s\n".encode())
        files[name] = dict(record, exit_code=outcome.exit_code, timed_out=outcome.timed_out,
                           seconds=outcome.seconds, missing=False)
    return files


def prove_task(layout, mode_name, task, config, file_dep):
    inputs = jsonio.inputs_digest(config, file_dep)
    out = layout.prove_json(mode_name, task.instance_id)
    if jsonio.fresh_output(out, inputs):
        return
    build = jsonio.read_json(layout.build_json(mode_name, task.instance_id))
    token_file = layout.running_token(mode_name, task.instance_id, "prove")
    kill_leftovers(token_file)          # a test a killed doit left running
    tap_dir = layout.tap_dir(mode_name, task.instance_id)
    shutil.rmtree(tap_dir, ignore_errors=True)
    record = {"inputs": inputs, "test_commit": task.test_commit, "binary": None, "files": {}}
    if build["status"] == "built":
        if not build_is_published(layout, build):
            raise RuntimeError(f"build {build['key']} is gone from the cache; rerun the build")
        record["binary"] = build["binary"]
        record["files"] = run_prove_files(layout.tests_tree(task.test_commit), build["binary"],
                                          task.test_files, task.test_timeout, tap_dir,
                                          token_file=token_file)
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
            "uptodate": [config_changed(commit)],
        }
    for bench, mode, task in ctx.units():
        name = ctx.unit_name(bench, mode, task)
        iid = task.instance_id
        config = {"test_commit": task.test_commit, "test_files": list(task.test_files),
                  "timeout": task.test_timeout}
        file_dep = [str(ctx.layout.build_json(mode.name, iid))]
        yield {
            "basename": "prove",
            "name": name,
            "doc": f"prove {' '.join(task.test_files)} for the {mode.name} patch of {iid}",
            "actions": [(prove_task, [ctx.layout, mode.name, task, config, file_dep])],
            "file_dep": file_dep,
            "task_dep": [tests_task_name(task.test_commit)],
            "targets": [str(ctx.layout.prove_json(mode.name, iid))],
            "uptodate": [config_changed(config)],
        }
