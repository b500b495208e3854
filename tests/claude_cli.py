"""The real Claude Code CLI in tests: find it (or install it as setup-debian.sh does), run it
against the Anthropic stand-in (anthropic_standin.py), and read what it leaves behind.

Where it is: ``$NGINX_EVAL_CLAUDE`` if set, else ``<prefix>/node_modules/.bin/claude`` with the
prefix setup-debian.sh installs to (``$NGINX_EVAL_CLAUDE_PREFIX``, default
/opt/nginx-eval/claude-code), else ``claude`` on PATH. A test that needs it is skipped only when
it is nowhere and npm cannot fetch the pinned version (``CLAUDE_CODE_VERSION`` in setup-debian.sh).
"""

import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SETUP_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "setup-debian.sh"
PACKAGE = "@anthropic-ai/claude-code"
# The CLI's switches that keep it from calling anywhere but ANTHROPIC_BASE_URL.
QUIET = {
    "DISABLE_TELEMETRY": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}
TOOLS = "Bash,Read,Edit,Write,Glob,Grep"
SONNET = "claude-sonnet-4-5"
# USD per million tokens of claude-sonnet-4-5, as the CLI prices it.
SONNET_PRICES = {
    "input_tokens": 3.0,
    "output_tokens": 15.0,
    "cache_creation_input_tokens": 3.75,
    "cache_read_input_tokens": 0.30,
}
USAGE_KEYS = tuple(SONNET_PRICES)


def setup_setting(name):
    """The value (or ``${NAME:-default}`` default) that setup-debian.sh gives `name`."""
    m = re.search(rf"^{name}=(?:\$\{{{name}:-)?([^}}\s]+)", SETUP_SCRIPT.read_text(), re.M)
    return m.group(1)


def install_prefix():
    return Path(
        os.environ.get("NGINX_EVAL_CLAUDE_PREFIX") or setup_setting("NGINX_EVAL_CLAUDE_PREFIX")
    )


def installed_claude():
    """The CLI's path (see the module docstring), or None."""
    if os.environ.get("NGINX_EVAL_CLAUDE"):
        return shutil.which(os.environ["NGINX_EVAL_CLAUDE"])
    program = install_prefix() / "node_modules" / ".bin" / "claude"
    return str(program) if os.access(program, os.X_OK) else shutil.which("claude")


def find_or_install():
    """(program, None), or (None, why it is not installed and npm cannot fetch it).
    Any other failure to install is raised: it is a broken machine, not a reason to skip."""
    named = os.environ.get("NGINX_EVAL_CLAUDE")
    if named and not shutil.which(named):
        raise RuntimeError(f"NGINX_EVAL_CLAUDE={named} is not a program that can run")
    program = installed_claude()
    if program:
        return program, None
    version = setup_setting("CLAUDE_CODE_VERSION")
    if not shutil.which("npm"):
        return None, "the Claude Code CLI is not installed, and npm is not either"
    probe = subprocess.run(
        ["npm", "view", f"{PACKAGE}@{version}", "version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if probe.returncode != 0 or version not in probe.stdout:
        return None, (
            f"the Claude Code CLI is not installed, and npm cannot fetch "
            f"{PACKAGE}@{version}: {probe.stderr.strip()[-300:]}"
        )
    prefix = install_prefix()
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix / ".install.lock", "w") as lock:  # pytest-xdist workers: one install
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not installed_claude():
            subprocess.run(
                [
                    "npm",
                    "install",
                    "--prefix",
                    str(prefix),
                    "--no-fund",
                    "--no-audit",
                    "--save-exact",
                    f"{PACKAGE}@{version}",
                ],
                check=True,
                capture_output=True,
                timeout=900,
            )
    program = installed_claude()
    if not program:
        raise RuntimeError(
            f"npm installed {PACKAGE}@{version} under {prefix}, "
            "but node_modules/.bin/claude does not run"
        )
    return program, None


def environment(api, config_dir, **extra):
    """The environment of a CLI that talks to the stand-in `api` and keeps its state (sessions,
    commands, transcripts) in `config_dir`, and its temporary files (tool output, a socket per
    process, else in /tmp/claude-<uid>/ and /tmp/cc-socks/) in `config_dir`/tmp."""
    return {
        **os.environ,
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": api.api_key,
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "CLAUDE_CODE_TMPDIR": str(Path(config_dir) / "tmp"),
        **QUIET,
        **extra,
    }


@dataclass
class Run:
    exit_code: int
    seconds: float
    stdout: str
    stderr: str
    result: dict  # the --output-format json object ({} if it printed none)


def run(program, env, cwd, prompt, *flags, model=SONNET, timeout=120):
    """`claude -p PROMPT --output-format json --allowedTools ... --model MODEL FLAGS` in cwd."""
    argv = [
        program,
        *flags,
        "-p",
        prompt,
        "--output-format",
        "json",
        "--allowedTools",
        TOOLS,
        "--model",
        model,
    ]
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        result = {}
    return Run(proc.returncode, time.monotonic() - start, proc.stdout, proc.stderr, result)


def project_dir(config_dir, cwd):
    """Where the CLI keeps a directory's sessions: every character of the path that is not a
    letter or digit becomes '-' (a name past 200 characters is cut and given a hash: glob
    ``projects/*/<session>.jsonl`` for those)."""
    return Path(config_dir) / "projects" / re.sub(r"[^a-zA-Z0-9]", "-", str(cwd))


def transcript_usage(path):
    """Usage per model from a session transcript: one line per content block, so each
    assistant message (by its id) is counted once."""
    per_model, seen = {}, set()
    for line in Path(path).read_text().splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # the last line of a CLI killed by SIGKILL mid-write
        message = entry.get("message") or {}
        if entry.get("type") != "assistant" or message.get("id") in seen:
            continue
        seen.add(message.get("id"))
        total = per_model.setdefault(message.get("model"), {})
        for key in USAGE_KEYS:
            total[key] = total.get(key, 0) + (message.get("usage") or {}).get(key, 0)
    return per_model


def summed(usages):
    """The API's usage dicts added up, key by key."""
    return {k: sum(u[k] for u in usages) for k in USAGE_KEYS}


def sonnet_cost(usages):
    """What the CLI charges for these usages of claude-sonnet-4-5."""
    return sum(u[k] * price for u in usages for k, price in SONNET_PRICES.items()) / 1e6
