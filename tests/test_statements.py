"""statements.py: a problem statement that gives the fix away is flagged, one a user would write
passes; on crafted evidence, on the fixture repositories (`doit run tiny:lint`) and on the shipped
tasks/nginx.json (with local mirrors of nginx and nginx-tests)."""

import json
from types import SimpleNamespace

import nginx_mirrors
from conftest import SOURCE_ROOT

from nginx_eval.checks.statements import (
    Evidence,
    added_lines,
    check_statement,
    code_blocks,
    config_blocks,
    distinctive_words,
    gives_fix_away,
    lint,
    task_evidence,
)
from nginx_eval.core import gitcmd
from nginx_eval.run.benchmark import load_benchmark, parse_task

CONFIG = """Config:

    server {
        listen 8080;
        location / {
            proxy_pass http://127.0.0.1:8081;
            proxy_new_thing on;
        }
    }
"""

EVIDENCE = Evidence(
    fix_lines=(
        "    if (r->headers_out.content_range) {",
        '    { ngx_string("proxy_new_thing"), NGX_HTTP_LOC_CONF, 0 },',
        '        ngx_log_error(NGX_LOG_ALERT, c->log, 0, "SSL_read() failed");',
        "        u->buffer.last = u->buffer.pos + 1234567;",
    ),
    test_lines=(
        "my $t = Test::Nginx->new()->has(qw/http proxy/);",
        "            proxy_pass http://127.0.0.1:8081;",
        "# proxy_pass_request_body off",
        "# the body is sent before the response arrives",
        "like(http_get_range('/t', 'Range: bytes=0-1'), qr/206/, 'range cleared');",
        "is(getHeaderValue($r), 'x', 'camel');",
        "$t->run_daemon(\\&http_daemon);",
        "    Cookie: a",
    ),
    vocabulary=frozenset(
        (
            "proxy_pass",
            "listen",
            "location",
            "server",
            "SSL_read",
            "proxy_pass_request_body",
            "proxy_cache",
            "the",
        )
    ),
)


def check(statement, area="http"):
    return check_statement(statement, area, EVIDENCE)


def test_markdown_code_blocks_and_configuration():
    text = (
        "Title\n\n    a {\n        b;\n\n    }\nprose\n```\nGET / HTTP/1.1\nHost: x\n```\n\ttab;\n"
    )
    assert code_blocks(text) == [["    a {", "        b;", "    }"], ["GET / HTTP/1.1", "Host: x"]]
    assert config_blocks(text) == [["    a {", "        b;", "    }"]]
    assert config_blocks("```nginx\nserver { listen 80; }\n```\n") == [["server { listen 80; }"]]


def test_distinctive_words():
    words = distinctive_words(
        "ngx_http_foo and NGX_OK, headers_out, getHeaderValue, recv(), "
        "OpenSSL, SmarterMail, WebSocket, HTTP/2, 10240, 1234567, 0xdead, "
        "plain words, Content-Range, _x_"
    )
    assert words == {
        "ngx_http_foo",
        "NGX_OK",
        "headers_out",
        "getHeaderValue",
        "recv",
        "1234567",
        "0xdead",
    }


def test_added_lines_of_a_diff_by_file():
    diff = (
        b"diff --git a/x.t b/x.t\n--- a/x.t\n+++ b/x.t\n@@ -1 +1,2 @@\n a\n+++i;\n"
        b"diff --git a/y.t b/y.t\n--- /dev/null\n+++ b/y.t\n@@ -0,0 +1 @@\n+y\n"
    )
    assert added_lines(diff) == ["++i;", "y"]
    assert added_lines(diff, ["y.t"]) == ["y"]


def test_a_user_report_passes():
    statement = (
        "Range requests return two Content-Range headers\n\n"
        + CONFIG.replace("            proxy_new_thing on;\n", "")
        + "\nSend `GET /t` with `Range: bytes=0-1` "
        "and a `Cookie: a` header (the app sees HTTP_COOKIE).\n\nExpected: one header. The log "
        "says SSL_read() failed. With proxy_pass_request_body off it works.\n"
    )
    result = check(statement)
    assert not gives_fix_away(result) and result["warnings"] == [], result


def test_words_and_lines_of_the_fix_and_the_tests_are_flagged():
    statement = (
        "Bug\n\nThe check of r->headers_out.content_range is missing; the buffer is "
        "1234567 bytes. Tests call http_get_range and getHeaderValue.\n\n"
        "    if (r->headers_out.content_range) {\n\n"
        "like(http_get_range('/t', 'Range: bytes=0-1'), qr/206/, 'range cleared');\n\n"
        "Request `GET /`.\n\n" + CONFIG
    )
    result = check(statement)
    assert result["words"] == {
        "headers_out": ["fix"],
        "content_range": ["fix"],
        "1234567": ["fix"],
        "http_get_range": ["tests"],
        "getHeaderValue": ["tests"],
        # A directive only the fix introduces cannot be in a configuration that shows the bug.
        "proxy_new_thing": ["fix"],
    }
    assert result["lines"] == {
        "fix": ["if (r->headers_out.content_range) {"],
        "tests": ["like(http_get_range('/t', 'Range: bytes=0-1'), qr/206/, 'range cleared');"],
    }
    assert gives_fix_away(result)
    # A sentence of a test's comment is compared (its first word "the" is no directive).
    copied = check("Bug: the body is sent before the response arrives.\n\n" + CONFIG + "\nGET /")
    assert copied["lines"] == {"tests": ["the body is sent before the response arrives"]}


def test_configuration_is_compared_with_the_fix_only():
    # The tests' names in the statement's own configuration are what a user writes too.
    statement = "Bug\n\n    location / {\n        set $x http_daemon;\n    }\n\nRequest `GET /`.\n"
    assert not gives_fix_away(check(statement))
    assert check("Bug: http_daemon\n\n" + CONFIG + "\nGET /\n")["words"] == {
        "http_daemon": ["tests"],
        "proxy_new_thing": ["fix"],
    }


def test_warnings_for_http_statements_without_configuration_or_request():
    assert check("It crashes.")["warnings"] == ["no configuration block", "no request"]
    assert check("It crashes.\n\n" + CONFIG)["warnings"] == ["no request"]
    assert check("Send a POST request with a 10 KB body.\n\n" + CONFIG)["warnings"] == []
    assert check("Connect with openssl to port 8443.\n\n" + CONFIG)["warnings"] == []
    assert check("It crashes.", area="stream")["warnings"] == []
    assert check("It crashes.", area="")["warnings"] == []


def _lint_output(proc):
    return [line for line in proc.stdout.splitlines() if line.startswith(("tiny-", "lint:"))]


def test_lint_on_the_fixture_flags_a_planted_leak_and_passes_a_clean_statement(project):
    bench = project.benchmark()
    add, mul = bench["tasks"]
    add["problem_statement"] = (
        "Adding is broken.\n\nThe tests set TEST_NGINX_BINARY; the fix is `return a + b;`.\n"
    )
    mul.update(
        area="http",
        problem_statement=(
            "Multiplying gives a wrong product\n\nConfig:\n\n    server {\n        listen 8080;\n"
            "    }\n\nSend `GET /mul?a=2&b=3`: expected 6, actual 7 (calc_mul is off by one).\n"
        ),
    )
    mul["audit"] = AUDIT
    project.write_benchmark(bench)
    proc, _ = project.doit("run", "tiny:lint", check=False)
    assert proc.returncode != 0
    assert _lint_output(proc) == [
        "tiny-add: words shared with TEST_NGINX_BINARY (tests)",
        "tiny-add: line shared with the fix: return a + b;",
        "tiny-add: no fairness audit (field audit, docs/benchmark.md#the-fairness-audit)",
        "lint: 2 statements, 1 give the fix away, 0 with warnings, 1 without a fairness audit",
    ], proc.stdout
    assert (
        "nginx-eval: error: 1 problem statement(s) share words or lines with the fix or the "
        "tests: tiny-add; 1 task(s) without a fairness audit (field audit): tiny-add"
    ) in proc.stderr
    add["problem_statement"] = "Adding two numbers gives their difference.\n"
    project.write_benchmark(bench)
    proc, _ = project.doit("run", "tiny:lint", check=False)
    assert proc.returncode != 0 and "without a fairness audit (field audit): tiny-add" in (
        proc.stderr
    )
    add["audit"] = AUDIT
    project.write_benchmark(bench)
    proc, _ = project.doit("run", "tiny:lint")
    assert _lint_output(proc) == [
        "lint: 2 statements, 0 give the fix away, 0 with warnings, 0 without a fairness audit"
    ]


AUDIT = {
    "date": "2026-11-25",
    "statement_sufficient": True,
    "tests_fair": True,
    "over_strict": [],
    "changes": [],
}


needs_mirrors = nginx_mirrors.needs_mirrors("nginx/nginx", "nginx/nginx-tests")
MIRRORS = SimpleNamespace(bare_repo=nginx_mirrors.mirror)


@needs_mirrors
def test_shipped_statements_do_not_give_the_fix_away(capsys):
    tasks = load_benchmark(SOURCE_ROOT / "tasks" / "nginx.json").tasks
    failure = lint(MIRRORS, tasks)
    out = capsys.readouterr().out
    assert failure is None, out
    assert out.splitlines()[-1].startswith(f"lint: {len(tasks)} statements, 0 give")


@needs_mirrors
def test_a_leak_planted_in_a_shipped_statement_is_flagged():
    tasks = json.loads((SOURCE_ROOT / "tasks" / "nginx.json").read_text())["tasks"]
    raw = next(t for t in tasks if t["instance_id"] == "nginx__nginx-f35475c083d4")
    task = parse_task(raw, "nginx.json", 0)
    evidence = task_evidence(MIRRORS, task)
    planted = task.problem_statement + (
        "\n\nThe range filter forgets to clear r->headers_out.content_range. proxy_cache_valid "
        'makes no difference, and the log shows no "SSL_do_handshake() failed".\n'
    )
    result = check_statement(planted, task.area, evidence)
    assert result["words"] == {"content_range": ["fix"], "headers_out": ["fix"]}


@needs_mirrors
def test_the_lints_diffs_in_one_git_call_are_each_tasks_gold_diff():
    """gitcmd.gold_diffs (one diff-tree --stdin for a repository's tasks) gives what gold_diff
    gives a task at a time, byte for byte: a fix, a test commit after its parent, an empty diff
    between a commit and itself, a commit named twice."""
    tasks = load_benchmark(SOURCE_ROOT / "tasks" / "nginx.json").tasks[:6]
    nginx, tests = nginx_mirrors.mirror("nginx/nginx"), nginx_mirrors.mirror("nginx/nginx-tests")
    fixes = [(t.base_commit, t.fix_commit) for t in tasks]
    fixes += [(tasks[0].fix_commit, tasks[0].fix_commit), fixes[1]]
    assert gitcmd.gold_diffs(nginx, fixes) == [gitcmd.gold_diff(nginx, *p) for p in fixes]
    assert gitcmd.gold_diffs(nginx, fixes)[-2] == b""
    test_pairs = [(gitcmd.first_parent(tests, t.test_commit), t.test_commit) for t in tasks]
    assert gitcmd.gold_diffs(tests, test_pairs) == [gitcmd.gold_diff(tests, *p) for p in test_pairs]
