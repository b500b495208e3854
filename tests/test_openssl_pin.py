"""A task of 2017 on real nginx and nginx-tests, under the harness's OpenSSL configuration: runs
only with local mirrors configured (tests/nginx_mirrors.py). The task is the shipped one, built
without the http modules its test files never load (UNLOADED). It has a cache of its own (its
base is no other module's)."""

import json
import os

from nginx_mirrors import doit_run, needs_mirrors, project_with, variant

# It starts doit on real nginx (minutes): end to end (conftest.py).
E2E = True

pytestmark = needs_mirrors("nginx/nginx", "nginx/nginx-tests")

IID = "nginx__nginx-fbe9759e4b8d"
# The http modules of the task's build that neither of its test files loads (mail_pop3.t asks
# for http and rewrite, its auth server): an SSL build reads OpenSSL's headers in every source
# file, and these are a third of the build's processor time.
UNLOADED = [
    f"--without-http_{m}_module"
    for m in (
        "gzip ssi userid access auth_basic autoindex geo map split_clients referer proxy fastcgi "
        "uwsgi scgi memcached limit_conn limit_req empty_gif browser upstream_hash "
        "upstream_ip_hash upstream_least_conn upstream_keepalive upstream_zone charset"
    ).split()
] + ["--without-http-cache"]


def test_a_2017_task_with_1024_bit_certificates_runs_under_the_openssl_pin(tmp_path):
    """mail_capability.t of 2017 makes a 1024-bit certificate; at Debian 12's default security
    level nginx refused it at the base and the fix alike (gold graded env_error). Under the
    harness's OpenSSL configuration the task tells the fix from no fix."""
    root = project_with(tmp_path, variant(IID, UNLOADED))
    doit_run(
        tmp_path,
        tmp_path / "cache",
        "nginx:gold",
        "nginx:none",
        f"instances={IID}",
        env=dict(os.environ, NGINX_EVAL_ROOT=str(root)),
    )
    result = lambda mode, name: json.loads(
        (tmp_path / "results" / "default" / mode / IID / name).read_text()
    )
    assert result("gold", "build.json")["configure_flags"][: len(UNLOADED)] == UNLOADED
    assert result("gold", "grade.json")["status"] == "resolved"
    assert result("none", "grade.json")["status"] == "unresolved"
    assert result("none", "grade.json")["fail_to_pass"]["failed"] == [
        "mail_pop3.t:8 auth capabilities"
    ]
    tap = tmp_path / "results" / "default" / "gold" / IID / "tap" / "mail_capability.t.tap"
    assert "All tests successful" in tap.read_text()
    assert result("gold", "prove.json")["environment"]["OPENSSL_CONF"].endswith(
        "nginx_eval/prove/openssl_tests.cnf"
    )
