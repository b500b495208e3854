"""The strict stage's regression check on real nginx and nginx-tests: the range task's fix plus
gzip switched off, judged against the sanitizer build of the fix (the task built as
test_real_nginx.py's, nginx_mirrors.range_task, with the gzip filter gzip.t loads). Runs only
with local mirrors configured (tests/nginx_mirrors.py); shares test_real_nginx.py's cache (its
docstring says how). This module makes the sanitizer build of the range task's base, which every
strict test on the task starts from, while test_real_nginx.py makes the plain one;
test_real_nginx.py's strict tests (a sanitizer finding, gold's strictness) use it.
"""

import pytest
from nginx_mirrors import (
    GZIP,
    base_build,
    gold_plus,
    needs_mirrors,
    range_task,
    strict_prediction,
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
