"""Where CI finds the mirrors of nginx and nginx-tests (scripts/mirrors_url.py, .ci/run): beside
the checkout, beside the repository a worktree or a temporary clone comes from, or where
NGINX_EVAL_MIRRORS says; without them the tests that need real nginx skip (issue 51)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(SOURCE_ROOT / "scripts"))
import mirrors_url  # noqa: E402

GIT = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(*args, cwd):
    subprocess.run(
        ["git", *args], cwd=cwd, env=dict(os.environ, **GIT), check=True, capture_output=True
    )


@pytest.fixture
def site(tmp_path):
    """tmp_path/shared/mirrors beside tmp_path/main, a checkout with one commit."""
    (tmp_path / "shared" / "mirrors" / "nginx+nginx" / "repo").mkdir(parents=True)
    main = tmp_path / "main"
    main.mkdir()
    git("init", "-q", "-b", "main", cwd=main)
    git("commit", "-q", "--allow-empty", "-m", "one", cwd=main)
    return tmp_path


def url(folder):
    return f"{folder.resolve()}/{{owner}}+{{name}}/repo"


def test_beside_the_checkout_and_from_a_folder_inside_it(site):
    (site / "main" / "sub").mkdir()
    for checkout in (site / "main", site / "main" / "sub"):
        assert mirrors_url.mirrors_url(checkout, {}) == url(site / "shared" / "mirrors")


def test_beside_the_main_checkout_of_a_worktree(site):
    git("worktree", "add", "-q", str(site / "wt" / "branch"), cwd=site / "main")
    assert not (site / "wt" / "shared").exists()
    assert mirrors_url.mirrors_url(site / "wt" / "branch", {}) == url(site / "shared" / "mirrors")


def test_beside_the_origin_of_a_temporary_clone(site, tmp_path_factory):
    clone = tmp_path_factory.mktemp("ci") / "checkout"
    git("clone", "-q", str(site / "main"), str(clone), cwd=site)
    assert mirrors_url.mirrors_url(clone, {}) == url(site / "shared" / "mirrors")


def test_nginx_eval_mirrors_comes_first_and_must_be_a_folder(site, tmp_path_factory, capsys):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    environ = {"NGINX_EVAL_MIRRORS": str(elsewhere)}
    assert mirrors_url.mirrors_url(site / "main", environ) == url(elsewhere)
    missing = {"NGINX_EVAL_MIRRORS": str(elsewhere / "nothing")}
    with pytest.raises(mirrors_url.NoMirrors, match="is not a folder"):
        mirrors_url.mirrors_url(site / "main", missing)


def test_the_shared_data_beside_the_origin_of_a_temporary_clone(site, tmp_path_factory, capsys):
    """The real SWE-bench rows (SHARED_DATA_DIR for tests/test_swebench_rows.py) are found as the
    mirrors are: a temporary clone has none beside it, its origin has."""
    (site / "shared" / "data").mkdir()
    clone = tmp_path_factory.mktemp("ci") / "checkout"
    git("clone", "-q", str(site / "main"), str(clone), cwd=site)
    assert mirrors_url.data_folder(clone) == (site / "shared" / "data").resolve()
    assert mirrors_url.main(["--data", str(clone)]) == 0
    assert capsys.readouterr().out == f"{(site / 'shared' / 'data').resolve()}\n"
    assert mirrors_url.data_folder(tmp_path_factory.mktemp("alone")) is None


def test_none_without_mirrors(tmp_path):
    (tmp_path / "alone").mkdir()
    assert mirrors_url.mirrors_url(tmp_path / "alone", {}) is None


def ci_mirrors_block():
    """The lines of .ci/run that set NGINX_EVAL_REPO_URL, as a script of their own."""
    lines = (SOURCE_ROOT / ".ci" / "run").read_text().splitlines()
    start = lines.index('if [ -z "${NGINX_EVAL_REPO_URL:-}" ]; then')
    end = next(
        i for i, line in enumerate(lines) if line.startswith('echo "CI: NGINX_EVAL_REPO_URL')
    )
    return "\n".join(lines[start : end + 1])


@pytest.mark.parametrize(
    "given, expected",
    [
        ({"NGINX_EVAL_MIRRORS": "{mirrors}"}, "{mirrors}/{{owner}}+{{name}}/repo"),
        (
            {"NGINX_EVAL_MIRRORS": "{mirrors}", "NGINX_EVAL_REPO_URL": "/m/{{owner}}"},
            "/m/{{owner}}",
        ),
    ],
)
def test_ci_run_exports_the_mirrors_and_keeps_a_url_it_is_given(tmp_path, given, expected):
    block = ci_mirrors_block()
    assert "export NGINX_EVAL_REPO_URL" in block and "unset NGINX_EVAL_MIRRORS" in block
    script = (
        f"set -euo pipefail\ncd {SOURCE_ROOT}\n{block}\n"
        'printf "%s|%s" "$NGINX_EVAL_REPO_URL" "${NGINX_EVAL_MIRRORS:-unset}"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("NGINX_EVAL_")}
    env.update({k: v.format(mirrors=tmp_path) for k, v in given.items()})
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == expected.format(mirrors=tmp_path) + "|unset"
