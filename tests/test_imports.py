"""The import directions of pyproject.toml's import-linter contracts hold, and a forbidden import
breaks the build with the name of the rule it breaks."""

import os
import shutil
import subprocess
import sys

import pytest
from conftest import SOURCE_ROOT


def lint_imports(root):
    """`lint-imports` on the package and pyproject.toml under `root`: (exit code, output)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlinter.cli import lint_imports_command as c; c()",
            "--no-cache",
            str(root / "pyproject.toml"),
        ],
        cwd=root,
        env=dict(os.environ, PYTHONPATH=str(root)),
        capture_output=True,
        text=True,
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_the_import_contracts_hold():
    code, out = lint_imports(SOURCE_ROOT)
    assert code == 0, out
    assert "0 broken" in out


@pytest.mark.parametrize(
    "module, line, contract",
    [
        (
            "core/layout.py",
            "from ..report import stats",
            "core imports nothing of the project, not even for a type",
        ),
        (
            # A type named for annotations only is a dependency too.
            "core/tasknames.py",
            "if TYPE_CHECKING:\n    from ..run.modes import Mode",
            "core imports nothing of the project, not even for a type",
        ),
        ("build/plan.py", "from ..grade import stage", "A stage imports only the stages before it"),
        (
            "report/data.py",
            "from ..build import cache",
            "The report never imports build, prove or agent",
        ),
        (
            "grade/stage.py",
            "from ..checks import statements",
            "Only the front (cli, pipeline, progress) imports report and checks",
        ),
    ],
)
def test_a_forbidden_import_breaks_the_rule_it_names(tmp_path, module, line, contract):
    shutil.copytree(
        SOURCE_ROOT / "nginx_eval",
        tmp_path / "nginx_eval",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(SOURCE_ROOT / "pyproject.toml", tmp_path)
    with open(tmp_path / "nginx_eval" / module, "a") as f:
        f.write(f"\nfrom typing import TYPE_CHECKING  # noqa\n{line}  # noqa\n")
    code, out = lint_imports(tmp_path)
    assert code != 0
    assert f"{contract} BROKEN" in out, out
