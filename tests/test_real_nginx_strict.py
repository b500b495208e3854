"""The strict stage on real nginx and nginx-tests: patches of the range task judged against
sanitizer builds of its fix (and the fix against its base's). Runs only with local mirrors
configured (tests/nginx_mirrors.py); shares test_real_nginx.py's cache (its docstring says how):
the plain builds the pipeline makes first are that module's, the sanitizer builds and their runs
are made once here.
"""

import json

import pytest
from nginx_mirrors import (
    GZIP,
    GZIP_OVER_READ,
    base_build,
    doit_run,
    file_patch,
    gold_diff,
    needs_mirrors,
    range_task,
    score_prediction,
)

from nginx_eval.strict.sanitizer import sanitizer_flags

# Every test here starts doit on real nginx (minutes): end to end (conftest.py).
E2E = True

pytestmark = needs_mirrors("nginx/nginx", "nginx/nginx-tests")


@pytest.fixture(scope="module", autouse=True)
def sanitizer_base(real_nginx_cache):
    """The range task's base as the strict stage builds it (sanitizer.py), made first: the plain
    base build, which each pipeline run here needs before its strict stage, is made meanwhile by
    test_real_nginx.py's tests in another worker, so that each module makes one of the two (run
    alone, this one makes both)."""
    task = range_task()
    return base_build(real_nginx_cache, task, sanitizer_flags(task["configure_flags"]))


def gold_plus(task, path, edit):
    """The task's fix, plus `edit` of another file."""
    return gold_diff(task) + file_patch(task["base_commit"], path, edit)


def strict_prediction(tmp_path, cache, task, patch, run):
    grade, task_dir = score_prediction(tmp_path, cache, task, patch, run)
    return grade, json.loads((task_dir / "strict.json").read_text())


def test_the_fix_plus_gzip_switched_off_is_resolved_but_not_strict(tmp_path, real_nginx_cache):
    """range_clearing.t never asks for gzip; the regression files of a patch that touches the
    gzip filter (gzip*.t) do."""
    task = range_task()
    # The header filter passes every response on untouched: gzip is off.
    patch = gold_plus(
        task,
        GZIP,
        lambda text: text.replace("    if (!conf->enable\n", "    if (1 || !conf->enable\n", 1),
    )
    grade, strict = strict_prediction(tmp_path, real_nginx_cache, task, patch, "nogzip")
    assert grade["resolved"] and grade["strict"] is False
    assert "gzip.t" in strict["files"] and strict["reference"] == "gold"
    assert grade["regressions"] and all(i.startswith("gzip") for i in grade["regressions"])
    assert grade["strict_reason"].startswith(f"{len(grade['regressions'])} regression(s): gzip")


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
    )
    grade = json.loads(
        (
            tmp_path / "results" / "gold-strict" / "gold" / task["instance_id"] / "grade.json"
        ).read_text()
    )
    assert (grade["resolved"], grade["strict"], grade["strict_reason"]) == (True, True, "")
