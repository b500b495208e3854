"""The local mirrors of nginx and nginx-tests that the real-nginx tests run against, the
helpers of the modules that share one cache (conftest.py: real_nginx_cache), and the small nginx
build the sandbox's agent makes.

NGINX_EVAL_REPO_URL names them (e.g. '/srv/mirrors/{owner}+{name}/repo'); `.ci/run` finds
../shared/mirrors itself (scripts/mirrors_url.py). Without them those tests skip, saying why.
"""

import difflib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from unittest import mock

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
    report: bool = False,
) -> subprocess.CompletedProcess:
    """`doit run WORDS` with the cache `cache` and the test's own results (tmp_path/results), in
    `env` (default this process's environment). Without `report`, the run renders no report (as
    conftest.Project.run_args): its statistics and charts are a second and a half of processor
    time in a process of their own, and only a test that reads the report asks for it."""
    if not report and not any(w.startswith("report") for w in words):
        words = (*words, "report=0")
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


def shipped_tasks() -> list[dict]:
    """The tasks of tasks/nginx.json, as the file has them."""
    return json.loads((SOURCE_ROOT / "tasks" / "nginx.json").read_text())["tasks"]


# The range task: range_clearing.t, nginx's default modules; most real-nginx tests patch it.
RANGE_TASK = "nginx__nginx-f35475c083d4"
# The http modules of nginx's default build that no test file the tests here run loads:
# range_clearing.t asks for http, rewrite, proxy and cache; the strict stage's regression files of
# the patches here, gzip.t for the gzip filter (http, proxy, gzip) and range.t and
# range_charset.t for the range filter (charset), as in the shipped task's build. A sanitizer
# build compiles each source file several times slower: these are a sixth of its processor time.
RANGE_UNLOADED = [
    f"--without-http_{m}_module"
    for m in (
        "ssi userid access auth_basic mirror autoindex geo map split_clients referer fastcgi "
        "uwsgi scgi grpc memcached limit_conn limit_req empty_gif browser upstream_hash "
        "upstream_ip_hash upstream_least_conn upstream_random upstream_keepalive upstream_zone"
    ).split()
]


def range_task() -> dict:
    """The range task as the tests here run it: the shipped one (its commits, test files and
    expected failures) built without RANGE_UNLOADED. Its builds are the session's (one plain and
    one sanitizer base build in real_nginx_cache); a pipeline run reads it from
    project_with(tmp_path, range_task())."""
    return variant(RANGE_TASK, RANGE_UNLOADED)


def variant(iid: str, unloaded: list[str]) -> dict:
    """The shipped task `iid` with the configure flags `unloaded` before its own."""
    task = next(t for t in shipped_tasks() if t["instance_id"] == iid)
    return dict(task, configure_flags=unloaded + task["configure_flags"])


def project_with(tmp_path: Path, task: dict) -> Path:
    """NGINX_EVAL_ROOT of the shipped project (links to its files) whose tasks/nginx.json has
    `task` in place of the shipped task of its instance_id."""
    root = tmp_path / "project"
    if not root.exists():
        (root / "tasks").mkdir(parents=True)
        for entry in (SOURCE_ROOT / "tasks").iterdir():
            if entry.name != "nginx.json":
                (root / "tasks" / entry.name).symlink_to(entry)
        for name in ("templates", "modes.toml"):
            (root / name).symlink_to(SOURCE_ROOT / name)
    data = json.loads((SOURCE_ROOT / "tasks" / "nginx.json").read_text())
    data["tasks"] = [task if t["instance_id"] == task["instance_id"] else t for t in data["tasks"]]
    (root / "tasks" / "nginx.json").write_text(json.dumps(data))
    return root


def base_build(cache: Path, task: dict, flags: list[str] | None = None) -> Path:
    """The binary of `task`'s base build (with `flags`, default the task's configure flags) in
    the harness's cache `cache`, made by the harness (build/stage.py: ensure_build) as
    doit_run's pipeline makes it, or found there: a module that needs a real nginx server takes
    the build another module's runs of the task share."""
    from nginx_eval.build.cache import binary_path
    from nginx_eval.build.stage import ensure_build
    from nginx_eval.core.layout import Layout

    env = {"NGINX_EVAL_CACHE": str(cache), **REAL_BUILD_ENV}
    with mock.patch.dict(os.environ, env):
        layout = Layout.from_env()
        record = ensure_build(
            layout,
            mirror(task["repo"]),
            task["base_commit"],
            task["configure_flags"] if flags is None else flags,
            b"",
        )
    assert record["status"] == "built", record
    return binary_path(layout, record["key"])


def gold_diff(task: dict) -> str:
    """The task's fix: the diff from its base to its fix commit."""
    return subprocess.run(
        ["git", "--git-dir", str(mirror(task["repo"])), "diff"]
        + [task["base_commit"], task["fix_commit"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def file_patch(base_commit: str, path: str, edit: Callable[[str], str]) -> str:
    """A unified diff of `path` at `base_commit` changed by edit(text) -> text."""
    before = nginx_file(URL.format(owner="nginx", name="nginx"), base_commit, path)
    return unified(path, before, edit(before))


def main_c_patch(base_commit: str, insertion: str) -> str:
    """A patch of src/core/nginx.c at `base_commit` that runs `insertion` in main() before
    ngx_time_init() (after -V and -v have answered)."""
    path, anchor = "src/core/nginx.c", "    ngx_time_init();\n"
    before = nginx_file(URL.format(owner="nginx", name="nginx"), base_commit, path)
    assert anchor in before
    return unified(path, before, before.replace(anchor, insertion + anchor, 1))


def score_prediction(
    tmp_path: Path, cache: Path, task: dict, patch: str, run: str
) -> tuple[dict, Path]:
    """`patch` scored as the `file` mode's prediction for `task` (project_with's) in run `run`:
    (its grade.json, its unit's results directory)."""
    preds = tmp_path / f"{run}.jsonl"
    preds.write_text(
        json.dumps(
            {"instance_id": task["instance_id"], "model_patch": patch, "model_name_or_path": run}
        )
        + "\n"
    )
    doit_run(
        tmp_path,
        cache,
        "nginx:file",
        f"predictions={preds}",
        f"instances={task['instance_id']}",
        f"run={run}",
        env=dict(os.environ, NGINX_EVAL_ROOT=str(project_with(tmp_path, task))),
    )
    task_dir = tmp_path / "results" / run / "file" / task["instance_id"]
    return json.loads((task_dir / "grade.json").read_text()), task_dir


def strict_prediction(
    tmp_path: Path, cache: Path, task: dict, patch: str, run: str
) -> tuple[dict, dict]:
    """score_prediction's grade.json, and the unit's strict.json."""
    grade, task_dir = score_prediction(tmp_path, cache, task, patch, run)
    return grade, json.loads((task_dir / "strict.json").read_text())


def gold_plus(task: dict, path: str, edit: Callable[[str], str]) -> str:
    """The task's fix, plus `edit` of another file."""
    return gold_diff(task) + file_patch(task["base_commit"], path, edit)


# An nginx that serves `return 200 "...";` and little else: the agent of test_full_mode.py
# builds this, with the modules it never loads left out, no optimisation and no debugging
# information, in about half the processor time of the default build (docs/development.md).
SMALL_BUILD = (
    "./auto/configure --with-cc-opt='-O0 -g0' "
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
