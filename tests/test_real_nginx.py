"""The pipeline on real nginx and nginx-tests: runs only with local mirrors configured.

    NGINX_EVAL_REPO_URL='/srv/mirrors/{owner}+{name}/repo' python -m pytest tests/test_real_nginx.py
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import DODO, SOURCE_ROOT

URL = os.environ.get("NGINX_EVAL_REPO_URL", "")


def mirror_ok(repo):
    owner, name = repo.split("/")
    url = URL.format(owner=owner, name=name)
    return subprocess.run(["git", "ls-remote", "--heads", url], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(
    not URL or not (mirror_ok("nginx/nginx") and mirror_ok("nginx/nginx-tests")),
    reason="needs local mirrors of nginx and nginx-tests: set NGINX_EVAL_REPO_URL "
           "(e.g. '/srv/mirrors/{owner}+{name}/repo')")


def test_gold_resolves_and_none_does_not_on_a_real_task(tmp_path):
    tasks = json.loads((SOURCE_ROOT / "tasks" / "nginx.json").read_text())["tasks"]
    # The task with the fewest configure flags builds fastest.
    task = min(tasks, key=lambda t: len(t["configure_flags"]))
    env = dict(os.environ, NGINX_EVAL_CACHE=str(tmp_path / "cache"),
               NGINX_EVAL_RESULTS=str(tmp_path / "results"))
    subprocess.run([sys.executable, "-m", "doit", "-f", str(DODO), "run", "nginx:gold",
                    "nginx:none", f"instances={task['instance_id']}"], env=env, check=True,
                   capture_output=True, timeout=900)
    grade = lambda mode: json.loads(
        (tmp_path / "results" / "default" / mode / task["instance_id"] / "grade.json").read_text())
    assert grade("gold")["status"] == "resolved"
    assert grade("none")["status"] == "unresolved"
    assert grade("none")["fail_to_pass"]["failed"] == task["fail_to_pass"]
