"""The local mirrors of nginx and nginx-tests that the real-nginx tests run against, and the
small nginx build those that only need a server make.

NGINX_EVAL_REPO_URL names them (e.g. '/srv/mirrors/{owner}+{name}/repo'); `.ci/run` finds
../shared/mirrors itself (scripts/mirrors_url.py). Without them those tests skip, saying why.
"""

import difflib
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import doit_server
import pytest
from conftest import DODO, SOURCE_ROOT

URL = os.environ.get("NGINX_EVAL_REPO_URL", "")


def mirror(repo: str) -> Path | None:
    """The local git directory NGINX_EVAL_REPO_URL names for `repo` ("nginx/nginx"), or None."""
    owner, name = repo.split("/")
    path = URL.format(owner=owner, name=name)
    ok = (
        URL
        and subprocess.run(
            ["git", "--git-dir", path, "rev-parse", "--git-dir"], capture_output=True
        ).returncode
        == 0
    )
    return Path(path) if ok else None


def needs_mirrors(*repos: str) -> pytest.MarkDecorator:
    """Skip unless every one of `repos` has a local mirror."""
    missing = [r for r in repos if mirror(r) is None]
    return pytest.mark.skipif(
        bool(missing),
        reason=f"needs local git mirrors of {' and '.join(repos)}: set NGINX_EVAL_REPO_URL "
        "(e.g. '/srv/mirrors/{owner}+{name}/repo')",
    )


def doit_run(
    tmp_path: Path,
    cache: Path,
    *words: str,
    timeout: float = 900,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """`doit run WORDS` with the cache `cache` and the test's own results (tmp_path/results), in
    `env` (default this process's environment)."""
    env = dict(
        os.environ if env is None else env,
        NGINX_EVAL_CACHE=str(cache),
        NGINX_EVAL_RESULTS=str(tmp_path / "results"),
        **REAL_BUILD_ENV,
    )
    # Forked from the worker's doit server (doit_server.py), as conftest.Project.doit is: the
    # imports of doit, the package and the report's statistics are made once per worker.
    argv = ["-f", str(DODO), "run", *words]
    status, out, err = doit_server.server(SOURCE_ROOT).run(argv, env=env, timeout=timeout)
    proc = subprocess.CompletedProcess([sys.executable, "-m", "doit", *argv], status, out, err)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc


# The harness's builds of real nginx here compile without optimisation (build/toolchain.py's
# NGINX_EVAL_CC_OPT), in half the compiler's time (docs/performance.md); what the harness decides
# of a build does not depend on it.
REAL_BUILD_ENV = {"NGINX_EVAL_CC_OPT": "-O0"}


# An nginx that serves `return 200 "...";` and little else: the tests that start a real server
# build this, with the modules they never load left out and no optimisation, in about half the
# processor time of the default build (docs/development.md).
SMALL_BUILD = (
    "./auto/configure --with-cc-opt=-O0 "
    + " ".join(
        f"--without-http_{m}_module"
        for m in (
            "gzip charset ssi userid access auth_basic mirror autoindex geo map split_clients "
            "referer proxy fastcgi uwsgi scgi grpc memcached limit_conn limit_req empty_gif "
            "browser upstream_hash upstream_ip_hash upstream_least_conn upstream_random "
            "upstream_keepalive upstream_zone"
        ).split()
    )
    + " >/dev/null && make -j2 >/dev/null"
)


# What the real-nginx tests and scripts/record_verdict_fixtures.py patch nginx with.
GZIP = "src/http/modules/ngx_http_gzip_filter_module.c"
# One byte past an 8-byte heap block, read on every response the gzip filter sees.
GZIP_OVER_READ = """
static void
ngx_http_gzip_peek(ngx_http_request_t *r)
{
    u_char           *p;
    volatile u_char   c;

    p = ngx_alloc(8, r->connection->log);
    if (p) {
        c = p[8 + (r->headers_out.status == 0)];
        (void) c;
        ngx_free(p);
    }
}


static ngx_int_t
ngx_http_gzip_header_filter(ngx_http_request_t *r)
{"""


def nginx_file(repo: str | Path, commit: str, path: str) -> str:
    """`path` at `commit` of the nginx repository `repo`."""
    return subprocess.run(
        ["git", "--git-dir", str(repo), "show", f"{commit}:{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def unified(path: str, before: str, after: str) -> str:
    """The unified diff of `path` from `before` to `after` (which must differ)."""
    assert before != after, path
    return "".join(
        difflib.unified_diff(
            before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"
        )
    )
