"""mypy finds no error in the package, with pyproject.toml's configuration: the modules annotated
whole (disallow_untyped_defs) stay so, and a new function there comes typed."""

import importlib.util
import os
import subprocess
import sys

import pytest
from conftest import SOURCE_ROOT


def test_mypy_finds_no_error_in_the_package():
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed: pip install -e '.[test]' (scripts/setup-debian.sh)")
    # Its cache (.mypy_cache/ at the root, ignored by git) makes a run after the first one take
    # seconds; the first takes about half a minute.
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "nginx_eval"],
        cwd=SOURCE_ROOT,
        env=dict(os.environ, PYTHONPATH=str(SOURCE_ROOT)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success: no issues found" in proc.stdout, proc.stdout
