"""The task miner's pairing of nginx-tests commits with nginx fixes (scripts/mine_tasks.py,
nginx_eval/mining/): what it reads from a test commit's patch, and which nginx commit it
proposes, on small dated histories of both repositories."""

import json
import os
import subprocess
import textwrap

import fixture_repos
from conftest import script_module

from nginx_eval.core import gitcmd
from nginx_eval.mining import nginx_history, scoring, suite_history, topics


def _mine_tasks():
    return script_module("mine_tasks")


mine = _mine_tasks()  # the command line (main); the work is nginx_eval/mining/'s


def commit_at(repo, files, message, day):
    """Commit `files` ({path: text}) to `repo` on `day` (YYYY-MM-DD); the new commit's id."""
    for path, text in files.items():
        fixture_repos.write(repo / path, textwrap.dedent(text))
    fixture_repos.git(repo, "add", "-A")
    date = f"{day}T12:00:00+0000"
    env = dict(os.environ, **fixture_repos.ENV, GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    subprocess.run(["git", "commit", "-q", "-m", message], cwd=repo, env=env, check=True)
    return fixture_repos.git(repo, "rev-parse", "HEAD")


def patch_of(*lines):
    """A test commit's patch of t/x.t with these lines (each with its diff mark)."""
    return "\n".join(
        ["diff --git a/x.t b/x.t", "--- a/x.t", "+++ b/x.t", "@@ -1,3 +1,4 @@", *lines]
    )


# -- reading a test commit -------------------------------------------------------------------------


def test_a_guard_covers_its_assertions_and_the_comments_before_it():
    patch = suite_history.read_test_patch(
        patch_of(
            " # equal ':authority' and 'host'",
            " ",
            " TODO: {",
            "-local $TODO = 'not yet';",
            "+local $TODO = 'not yet' unless $t->has_version('1.29.1');",
            " ",
            "+like(http_get('/a'), qr/ 400 /,",
            "+\t'ipv6 literal w/ double dot');",
            " }",
            "+is(http_get('/b'), 'ok', 'unguarded check');",
        )
    )
    assert dict(patch.guarded) == {"x.t": {"1.29.1"}}
    # the kept comment says what the guard is about; the assertion spans two lines
    assert "equal ':authority' and 'host'" in patch.guarded_texts
    assert "ipv6 literal w/ double dot" in patch.guarded_texts
    assert "unguarded check" not in patch.guarded_texts
    assert patch.texts == ["ipv6 literal w/ double dot", "unguarded check"]


def test_a_guard_continued_on_an_added_line_counts():
    patch = suite_history.read_test_patch(
        patch_of(
            " local $TODO = 'not yet' unless $t->read_file('nginx.conf') =~ /sendfile on/",
            "+\tor $t->has_version('1.29.5');",
        )
    )
    assert dict(patch.guarded) == {"x.t": {"1.29.5"}}


def test_a_guard_for_another_ssl_library_is_no_signal():
    patch = suite_history.read_test_patch(
        patch_of(
            "+TODO: {",
            "+local $TODO = 'not yet'",
            "+\tif $t->has_module('BoringSSL|AWS-LC') and !$t->has_version('1.29.3');",
            "+is($cert_ht, $exp, 'cert compression on');",
            "+}",
        )
    )
    assert patch.foreign and not patch.guarded
    assert suite_history.test_signal("1" * 40, 0, "Tests: more compression tests.", patch) is None
    # The other way round, the guard holds with OpenSSL too.
    patch = suite_history.read_test_patch(
        patch_of(
            "+local $TODO = 'not yet' unless $t->has_version('1.29.3')",
            "+\tor $t->has_module('BoringSSL');",
        )
    )
    assert dict(patch.guarded) == {"x.t": {"1.29.3"}} and not patch.foreign


def test_names_a_patch_adds_to_nginx_tables():
    patch = textwrap.dedent("""\
        +    { ngx_string("proxy_socket_sndbuf"),
        +      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
        +    { ngx_string("request_port"), NULL,
        +      ngx_http_variable_request_port, 0, 0, 0 },
        +    { ngx_string("Upgrade"),
        +                 ngx_http_upstream_ignore_header_line, 0,
        +    { ngx_string("v2"), 2 },
         { ngx_string("old_directive"),
        +      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
        """)
    assert nginx_history.names_added(patch) == {"proxy_socket_sndbuf", "request_port"}
    config = "    proxy_socket_sndbuf 1k;\n    add_header X $request_port;\n    listen 8080;\n"
    assert suite_history.names_used(
        config, {"proxy_socket_sndbuf": 5, "request_port": 6, "x": 7}
    ) == {"proxy_socket_sndbuf": 5, "request_port": 6}


def test_subjects_of_ports_and_refactorings_lose_points():
    sig = {"date": 0, "kind": "todo"}

    def points(subject):
        return scoring.shape_points(sig, {"date": 0, "subject": subject, "add": 100, "rem": 0})

    plain, _ = points("SNI: using the ClientHello callback.")
    port, why = points("SNI: support for early ClientHello callback with BoringSSL.")
    refactor, why2 = points("Changed interface of ngx_http_validate_host().")
    assert port == plain - 4.0 and "portability" in why
    assert refactor == plain - 3.0 and "refactoring" in why2
    # the area prefix of a test file's name is scored apart from its words
    assert topics.file_topic_words("proxy_connection_headers.t") == {"connection"}


# -- pairing on small histories --------------------------------------------------------------------

UPSTREAM_C = """\
    static ngx_command_t  ngx_http_upstream_commands[] = {
        { ngx_string("proxy_pass"),
          NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
          0 },
    };
    """

GUARDED_TEST = """\
    use Test::Nginx;
    my $t = Test::Nginx->new()->has(qw/http proxy/)->plan(2);
    $t->write_file_expand('nginx.conf', <<'EOF');
    http {
        server {
            location / {
                proxy_pass http://127.0.0.1:8081;
    %(config)s
            }
        }
    }
    EOF
    like(http_get('/'), qr/200/, 'upgrade in 200');
    TODO: {
    local $TODO = 'not yet' unless $t->has_version('1.0.1');

    # strip Upgrade for HTTP/2 client

    is(h2_get('/'), '200 0', 'upgrade stripped in HTTP/2 200');
    %(extra)s
    }
    """


def make_histories(tmp_path):
    """An nginx history whose release 1.0.1 holds a fix (Upgrade stripping), a feature of new
    directives the tests never use, a BoringSSL port after the fix in the same source, and
    (after the release) a directive that one test needs; and the nginx-tests commits that
    test them."""
    nginx, tests = tmp_path / "nginx", tmp_path / "tests"
    for repo in (nginx, tests):
        fixture_repos.git(tmp_path, "init", "-q", "-b", "main", str(repo))
    ids = {
        "base": commit_at(
            nginx, {"src/http/ngx_http_upstream.c": UPSTREAM_C}, "Core: initial", "2024-01-02"
        )
    }
    fixture_repos.git(nginx, "tag", "release-1.0.0")
    ids["fix"] = commit_at(
        nginx,
        {"src/http/ngx_http_upstream.c": UPSTREAM_C + "/* upgrade */\n"},
        "Upstream: Upgrade header processing\n\nStrip it for HTTP/2 clients,"
        " connection-specific headers are forbidden.",
        "2024-02-01",
    )
    ids["feature"] = commit_at(
        nginx,
        {
            "src/http/modules/ngx_http_proxy_module.c": """\
        { ngx_string("proxy_socket_sndbuf"),
          NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
        """
        },
        "Proxy: proxy_socket_sndbuf directive",
        "2024-02-08",
    )
    ids["port"] = commit_at(
        nginx,
        {"src/http/ngx_http_upstream.c": UPSTREAM_C + "/* ssl */\n"},
        "Upstream: Upgrade processing with BoringSSL",
        "2024-02-09",
    )
    fixture_repos.git(nginx, "tag", "release-1.0.1")
    ids["later"] = commit_at(
        nginx,
        {
            "src/http/ngx_http_upstream.c": UPSTREAM_C
            + """\
        { ngx_string("proxy_upgrade_strip"),
          NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
        """
        },
        "Upstream: proxy_upgrade_strip directive",
        "2024-03-01",
    )
    ids["strip_test"] = commit_at(
        tests,
        {"proxy_connection_headers.t": GUARDED_TEST % {"config": "", "extra": ""}},
        "Tests: strip headers from upstream responses",
        "2024-02-12",
    )
    ids["named_test"] = commit_at(
        tests,
        {
            "proxy_sndbuf.t": GUARDED_TEST
            % {"config": "proxy_socket_sndbuf 1k;", "extra": f"# fixed in {ids['feature'][:9]}"}
        },
        "Tests: upstream socket buffers",
        "2024-02-13",
    )
    ids["needs_test"] = commit_at(
        tests,
        {
            "proxy_upgrade_strip.t": GUARDED_TEST
            % {"config": "proxy_upgrade_strip on;", "extra": ""}
        },
        "Tests: Upgrade stripping directive",
        "2024-03-02",
    )
    return nginx / ".git", tests / ".git", ids


def test_pairing_prefers_the_fix_the_test_exercises(tmp_path):
    nginx, tests, ids = make_histories(tmp_path)
    out = tmp_path / "candidates.json"
    assert (
        mine.main(
            [
                "--nginx",
                str(nginx),
                "--tests",
                str(tests),
                "--out",
                str(out),
                "--since",
                "2024-01-01",
            ]
        )
        == 0
    )
    stubs = json.loads(out.read_text())["tasks"]
    by_fix = {s["fix_commit"]: s for s in stubs}
    strip = by_fix[ids["fix"]]
    assert strip["test_commit"] == ids["strip_test"] and strip["base_commit"] == ids["base"]
    assert "#1 for its test" in strip["notes"] and "told:" in strip["notes"]
    # The port after the fix, in the same source, ranks below it.
    port = [s for s in stubs if s["fix_commit"] == ids["port"]]
    assert all("portability" in s["notes"] and "#1 for" not in s["notes"] for s in port)
    # A test that names its fix by hash gets that commit, and only that one.
    named = [s for s in stubs if s["test_commit"] == ids["named_test"]]
    assert [s["fix_commit"] for s in named] == [ids["feature"]]
    assert "hashref" in named[0]["notes"] and "uses:proxy_socket_sndbuf" in named[0]["notes"]


def test_a_fix_older_than_a_directive_the_test_uses_is_no_candidate(tmp_path):
    nginx, tests, ids = make_histories(tmp_path)
    history = nginx_history.NginxHistory(nginx, "2023-06-01")
    assert history.introduced == {
        ids["feature"]: {"proxy_socket_sndbuf"},
        ids["later"]: {"proxy_upgrade_strip"},
    }
    assert "forbidden" in history.by_sha[ids["fix"]]["told"]  # words of its message
    signals = {s["commit"]: s for s in suite_history.test_signals(tests, "2024-01-01")}
    commits = list(history.by_sha.values())

    def top(test):
        found = scoring.top_candidates(signals[ids[test]], commits, history, 4.0, 4)
        return [(c["sha"], why) for _, c, why in found]

    needs = top("needs_test")
    assert needs[0][0] == ids["later"] and any(w.startswith("uses:") for w in needs[0][1])
    assert {sha for sha, _ in needs} <= {ids["later"]}  # all older than the directive
    strip = top("strip_test")
    assert strip[0][0] == ids["fix"]
    feature = [why for sha, why in strip if sha == ids["feature"]]
    assert not feature or "unused:proxy_socket_sndbuf" in feature[0]
    port = [why for sha, why in strip if sha == ids["port"]]
    assert port and f"after:{ids['fix'][:9]}" in port[0]


def test_commit_messages_are_the_bodies_by_commit(tmp_path):
    nginx, _, ids = make_histories(tmp_path)
    messages = gitcmd.commit_messages(nginx, "2000-01-01")
    assert set(messages) == {ids[k] for k in ("base", "fix", "feature", "port", "later")}
    assert "connection-specific headers are forbidden" in messages[ids["fix"]]
    assert messages[ids["base"]].strip() == ""
