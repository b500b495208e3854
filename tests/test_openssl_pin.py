"""A task of 2017 on real nginx and nginx-tests, under the harness's OpenSSL configuration: runs
only with local mirrors configured (tests/nginx_mirrors.py). Apart from test_real_nginx.py, whose
tests share one cache, so that the two run on different workers."""

import json

from nginx_mirrors import doit_run, needs_mirrors

# It starts doit on real nginx (minutes): end to end (conftest.py).
E2E = True

pytestmark = needs_mirrors("nginx/nginx", "nginx/nginx-tests")


def test_a_2017_task_with_1024_bit_certificates_runs_under_the_openssl_pin(tmp_path):
    """mail_capability.t of 2017 makes a 1024-bit certificate; at Debian 12's default security
    level nginx refused it at the base and the fix alike (gold graded env_error). Under the
    harness's OpenSSL configuration the task tells the fix from no fix."""
    iid = "nginx__nginx-fbe9759e4b8d"
    doit_run(
        tmp_path,
        tmp_path / "cache",
        "nginx:gold",
        "nginx:none",
        f"instances={iid}",
    )
    result = lambda mode, name: json.loads(
        (tmp_path / "results" / "default" / mode / iid / name).read_text()
    )
    assert result("gold", "grade.json")["status"] == "resolved"
    assert result("none", "grade.json")["status"] == "unresolved"
    assert result("none", "grade.json")["fail_to_pass"]["failed"] == [
        "mail_pop3.t:8 auth capabilities"
    ]
    tap = tmp_path / "results" / "default" / "gold" / iid / "tap" / "mail_capability.t.tap"
    assert "All tests successful" in tap.read_text()
    assert result("gold", "prove.json")["environment"]["OPENSSL_CONF"].endswith(
        "nginx_eval/prove/openssl_tests.cnf"
    )
