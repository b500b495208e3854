"""The real agent programs other than Claude Code in tests (Codex CLI, Gemini CLI): find each
(or install it as setup-debian.sh does), by its Program (nginx_eval/agent/programs/).

Where one is: ``$NGINX_EVAL_<NAME>`` (e.g. NGINX_EVAL_CODEX) if set, else
``<prefix>/node_modules/.bin/<program>`` with the prefix setup-debian.sh installs to (its
``prefix_variable``, else the default), else on PATH. A test that needs it is skipped only when
it is nowhere and npm cannot fetch the pinned version (its ``version_setting`` in setup-debian.sh).
"""

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

from claude_cli import setup_setting


def named_variable(program):
    return f"NGINX_EVAL_{program.name.upper()}"


def prefix(program):
    return Path(os.environ.get(program.prefix_variable) or setup_setting(program.prefix_variable))


def installed(program):
    if os.environ.get(named_variable(program)):
        return shutil.which(os.environ[named_variable(program)])
    found = program.installed({program.prefix_variable: str(prefix(program))})
    return found or shutil.which(program.executables[0])


def find_or_install(program):
    """(path, None), or (None, why it is not installed and npm cannot fetch it)."""
    found = installed(program)
    if found:
        return found, None
    version = setup_setting(program.version_setting)
    if not shutil.which("npm"):
        return None, f"{program.label} is not installed, and npm is not either"
    probe = subprocess.run(
        ["npm", "view", f"{program.package}@{version}", "version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.returncode != 0 or version not in probe.stdout:
        return None, f"{program.label} is not installed, and npm cannot fetch it"
    where = prefix(program)
    where.mkdir(parents=True, exist_ok=True)
    with open(where / ".install.lock", "w") as lock:  # pytest-xdist workers: one install
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed(program):
            subprocess.run(
                ["npm", "install", "--prefix", str(where), "--no-fund", "--no-audit"]
                + ["--save-exact", f"{program.package}@{version}"],
                check=True,
                capture_output=True,
                timeout=900,
            )
    found = installed(program)
    if not found:
        raise RuntimeError(f"npm installed {program.package}@{version}, but it does not run")
    return found, None
