"""The pipeline on real nginx and nginx-tests, on the range task built without the http modules
that none of the test files run here loads (nginx_mirrors.range_task: the shipped task's commits,
test files and expected failures): gold and none; patches that print TAP, keep nginx from
starting or kill prove; and the strict stage's sanitizer finding and gold's strictness
(test_real_nginx_strict.py, which makes the sanitizer build of its base, has the regression
check). Runs only with local mirrors configured:

NGINX_EVAL_REPO_URL='/srv/mirrors/{owner}+{name}/repo' python -m pytest tests/test_real_nginx.py

Its tests, test_real_nginx_strict.py's and test_real_nginx_agents.py's share one cache for the
session (conftest.py: real_nginx_cache), as a user's runs do: the clones, the range task's base
build and its test runs are made once; each test has a run and results of its own.
"""

import json
import os
import shutil
import subprocess

from nginx_mirrors import (
    GZIP,
    GZIP_OVER_READ,
    RANGE_UNLOADED,
    doit_run,
    gold_plus,
    main_c_patch,
    needs_mirrors,
    project_with,
    range_task,
    score_prediction,
    strict_prediction,
)

# Every test here starts doit on real nginx (minutes): end to end (conftest.py).
E2E = True

pytestmark = needs_mirrors("nginx/nginx", "nginx/nginx-tests")


def test_gold_resolves_and_none_does_not_on_a_real_task(tmp_path, real_nginx_cache):
    # The range task (without the modules its files never load), whose base build the other
    # tests here share.
    task = range_task()
    doit_run(
        tmp_path,
        real_nginx_cache,
        "nginx:gold",
        "nginx:none",
        f"instances={task['instance_id']}",
        "run=gold-none",
        env=dict(os.environ, NGINX_EVAL_ROOT=str(project_with(tmp_path, task))),
    )
    grade = lambda mode: json.loads(
        (tmp_path / "results" / "gold-none" / mode / task["instance_id"] / "grade.json").read_text()
    )
    assert grade("gold")["status"] == "resolved"
    assert grade("none")["status"] == "unresolved"
    assert grade("none")["fail_to_pass"]["failed"] == task["fail_to_pass"]
    unit = tmp_path / "results" / "gold-none" / "gold" / task["instance_id"]
    build = json.loads((unit / "build.json").read_text())
    assert build["configure_flags"][: len(RANGE_UNLOADED)] == RANGE_UNLOADED


def test_tap_printed_by_a_patched_nginx_and_an_nginx_that_does_not_start(
    tmp_path, real_nginx_cache
):
    task = range_task()
    # Started as a server, the patched nginx prints a pass for every fail_to_pass assertion.
    lines = "".join(
        f"ok {i.split(':')[1].split(' ', 1)[0]} - {i.split(' ', 1)[1]}\\n"
        for i in task["fail_to_pass"]
    )
    spoof = main_c_patch(
        task["base_commit"],
        f'    if (!ngx_test_config) {{\n        ngx_write_stdout("{lines}");\n    }}\n\n',
    )
    grade, task_dir = score_prediction(tmp_path, real_nginx_cache, task, spoof, "spoof")
    assert grade["status"] == "unresolved"
    assert grade["fail_to_pass"]["failed"] == task["fail_to_pass"]
    log = (task_dir / "tap" / "range_clearing.t.nginx.log").read_text()
    assert "ok 1 - content range cleared - range request" in log
    # range_clearing.t says `$t->run()->plan(3)`: an nginx that does not start kills the file
    # before its plan, and the base build, which starts, puts the blame on the patch.
    nostart = main_c_patch(
        task["base_commit"], "    if (!ngx_test_config) {\n        return 1;\n    }\n\n"
    )
    grade, _ = score_prediction(tmp_path, real_nginx_cache, task, nostart, "nostart")
    assert grade["status"] == "unresolved" and grade["env_errors"] == []
    assert grade["file_failures"][0]["kind"] == "not_started"
    assert "nginx did not start" in grade["file_failures"][0]["reason"]


# Kills the prove that runs its test file (its nearest ancestor named prove), once nginx starts
# serving: only that one, not the prove of another test or another run on the machine.
# At start, SIGKILL to every process nginx may signal: in the test file's PID namespace that is
# the file's own processes, not prove (the namespace's init), not the harness, not a process of
# the host. Where BYSTANDER (a process of the host) can be signalled, there is no such namespace:
# it kills nothing, and the test fails instead of taking the machine with it.
KILL_EVERY_PROCESS = """    if (!ngx_test_config && kill(BYSTANDER, 0) == -1) {
        kill(-1, SIGKILL);
    }

"""


def test_an_nginx_that_kills_every_process_it_may_is_the_patchs_fault(tmp_path, real_nginx_cache):
    task = range_task()
    # A process of the host, named as another unit's prove would be, lives on.
    (tmp_path / "prove").symlink_to(shutil.which("sleep"))
    other = subprocess.Popen([str(tmp_path / "prove"), "1800"])
    try:
        grade, _ = score_prediction(
            tmp_path,
            real_nginx_cache,
            task,
            main_c_patch(
                task["base_commit"], KILL_EVERY_PROCESS.replace("BYSTANDER", str(other.pid))
            ),
            "killer",
        )
        assert other.poll() is None, f"the other prove ended ({other.returncode})"
    finally:
        other.kill()
        other.wait()
    assert grade["status"] == "unresolved" and grade["env_errors"] == []
    (failure,) = grade["file_failures"]
    assert (failure["file"], failure["kind"]) == ("range_clearing.t", "died")
    assert failure["reason"] == (
        "test file died: killed by signal 9 before its plan; the base build runs it"
    )


def test_the_fix_plus_an_over_read_on_the_gzip_path_is_resolved_but_not_strict(
    tmp_path, real_nginx_cache
):
    task = range_task()
    patch = gold_plus(
        task,
        GZIP,
        lambda text: text.replace(
            "\nstatic ngx_int_t\nngx_http_gzip_header_filter(ngx_http_request_t *r)\n{",
            GZIP_OVER_READ,
            1,
        ).replace(
            "    if (!conf->enable\n", "    ngx_http_gzip_peek(r);\n\n    if (!conf->enable\n", 1
        ),
    )
    grade, strict = strict_prediction(tmp_path, real_nginx_cache, task, patch, "overread")
    assert grade["resolved"] and grade["strict"] is False and grade["regressions"] == []
    kinds = {(f["tool"], f["kind"], f["frame"].split(" ")[0]) for f in grade["sanitizer_findings"]}
    # The compiler inlines the static helper: its caller may be the first frame.
    assert kinds & {
        ("AddressSanitizer", "heap-buffer-overflow", "ngx_http_gzip_peek"),
        ("AddressSanitizer", "heap-buffer-overflow", "ngx_http_gzip_header_filter"),
    }


def test_gold_of_the_range_task_is_strict(tmp_path, real_nginx_cache):
    task = range_task()
    doit_run(
        tmp_path,
        real_nginx_cache,
        "nginx:gold",
        f"instances={task['instance_id']}",
        # Gold is judged strictly only when asked (docs/verdicts.md).
        "strict_gold=1",
        "run=gold-strict",
        timeout=1800,
        env=dict(os.environ, NGINX_EVAL_ROOT=str(project_with(tmp_path, task))),
    )
    grade = json.loads(
        (
            tmp_path / "results" / "gold-strict" / "gold" / task["instance_id"] / "grade.json"
        ).read_text()
    )
    assert (grade["resolved"], grade["strict"], grade["strict_reason"]) == (True, True, "")
