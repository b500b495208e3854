"""OpenAI's Codex CLI (npm @openai/codex) behind the program seam (base.py).

What it relies on, tests/test_agent_codex.py pins for the version scripts/setup-debian.sh
installs (against tests/openai_standin.py):

- Its home is ``CODEX_HOME`` (config.toml, auth.json, sessions, state databases). The harness
  writes config.toml: a provider of its own (``wire_api = "responses"``, ``base_url`` the
  operator's OPENAI_BASE_URL or api.openai.com, the key from OPENAI_API_KEY), analytics and
  update checks off, and ``web_search = "disabled"`` unless the mode opens the web tools: else
  every request offers the hosted ``web_search`` tool, which the API runs outside any sandbox.
  Its base_url is the home's alone: a phase's own is given by endpoint_option, and each call
  sends OPENAI_BASE_URL in a header for the proxy (env_http_headers, proxy.PHASE_HEADER).
  A login (``auth.json`` of the operator's CODEX_HOME or ~/.codex) is copied in; nothing else
  of theirs (config.toml, AGENTS.md, prompts, skills) is.
- ``codex exec --json`` prints one event per line: ``thread.started`` (thread_id),
  ``item.completed`` (agent_message, command_execution, error), ``turn.completed`` with
  ``usage {input_tokens, cached_input_tokens (a subset of input), cache_write_input_tokens,
  output_tokens, reasoning_output_tokens (a subset of output)}``, ``error`` (each retry:
  "Reconnecting... n/5 (...)") and ``turn.failed {error.message}``; exit 1 on failure. An API
  error's status is in the message ("unexpected status 401 Unauthorized",
  "last status: 429 Too Many Requests"); a 5xx reads "We're currently experiencing high
  demand". It retries 401, 429 and 5xx five times itself.
- Sessions: ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``; ``event_msg`` lines of type
  ``token_count`` carry the session's cumulative ``total_token_usage``, ``turn_context`` the
  model; ``codex exec resume --last`` continues the latest session.
"""

import json
import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...core import jsonio
from ...meter.proxy import PHASE_HEADER
from .base import (
    AUTH,
    COMPLETED,
    ERROR,
    FAILED,
    INFRA_ERROR,
    TOKENS,
    Entry,
    Models,
    Program,
    Result,
    Usage,
    command_words,
    empty_usage,
    figures_usage,
    max_retries,
    transcript_sizes_of,
)

PROVIDER = "nginx-eval"
AUTH_FILE = "auth.json"
STATUS = re.compile(r"(?:unexpected status|last status:)\s*(\d{3})")
# How 0.169.0 words a 5xx it retried no more: "We're currently experiencing high demand" (500),
# "Selected model is at capacity" (503).
OVERLOADED = ("high demand", "at capacity", "overloaded", "temporarily unavailable")


def config_toml(base_url: str, web_tools: bool, retries: int | None = None) -> str:
    """The config.toml of an attempt's CODEX_HOME; retries: its provider's, when the operator
    set NGINX_EVAL_AGENT_MAX_RETRIES (else the CLI's own, 5)."""
    lines = [
        f'model_provider = "{PROVIDER}"',
        'web_search = "live"' if web_tools else 'web_search = "disabled"',
        "check_for_update_on_startup = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[feedback]",
        "enabled = false",
        "",
        f'[model_providers."{PROVIDER}"]',
        f'name = "{PROVIDER}"',
        f"base_url = {json.dumps(base_url)}",
        'env_key = "OPENAI_API_KEY"',
        'wire_api = "responses"',
        # The phase's base URL, as the other programs get it (a Codex started by another
        # program in a phase running beside others has no -c of its phase: meter/proxy.py).
        f'env_http_headers = {{ "{PHASE_HEADER}" = "OPENAI_BASE_URL" }}',
    ]
    if retries is not None:
        lines += [f"request_max_retries = {retries}", f"stream_max_retries = {retries}"]
    return "\n".join(lines) + "\n"


def events(stdout_text: str) -> list[dict[str, Any]]:
    out = []
    for line in stdout_text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            out.append(event)
    return out


def usage_tokens(usage: Mapping[str, Any]) -> dict[str, int]:
    """The common tokens of a Codex usage (cached tokens taken out of input)."""
    total = int(usage.get("input_tokens") or 0)
    cached = int(usage.get("cached_input_tokens") or 0)
    written = int(usage.get("cache_write_input_tokens") or 0)
    return {
        "input": total - cached - written,
        "output": int(usage.get("output_tokens") or 0),
        "cache_read": cached,
        "cache_creation": written,
    }


class Codex(Program):
    name, api, label = "codex", "openai-responses", "Codex CLI"
    package = "@openai/codex"
    version_setting, prefix_variable = "CODEX_VERSION", "NGINX_EVAL_CODEX_PREFIX"
    default_prefix = "/opt/nginx-eval/codex"
    executables = ("codex",)
    home_variable, home_subdir = "CODEX_HOME", "codex"
    base_url_variable, default_upstream = "OPENAI_BASE_URL", "https://api.openai.com/v1"
    probe_path = "/models"
    key_variable, credential_variables = "OPENAI_API_KEY", ("OPENAI_API_KEY",)
    forwarded_prefixes = ("OPENAI_", "CODEX_")
    own_paths = (".codex",)
    credentials_hint = "OPENAI_API_KEY"

    def version_matches(self, version: str | None, pinned: str) -> bool:
        return (version or "").split()[-1:] == [pinned]

    def user_config(self, environ: Mapping[str, str]) -> Path:
        home = environ.get("HOME") or os.path.expanduser("~")
        return Path(environ.get("CODEX_HOME") or os.path.join(home, ".codex"))

    def credentials_problem(self, environ: Mapping[str, str]) -> str | None:
        if environ.get("OPENAI_API_KEY") or (self.user_config(environ) / AUTH_FILE).exists():
            return None
        return "Codex CLI has no credentials: set OPENAI_API_KEY (or log in with `codex login`)"

    def key_probe(self, environ: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
        key = environ.get("OPENAI_API_KEY")
        if not key:
            return None
        return self.upstream(environ).rstrip("/") + "/models", {"Authorization": f"Bearer {key}"}

    def user_state(self, environ: Mapping[str, str]) -> list[str]:
        paths = [str(self.user_config(environ)), os.path.expanduser("~/.codex")]
        return [p for p in dict.fromkeys(paths) if os.path.lexists(p)]

    def prepare_home(
        self,
        attempt_home: Path,
        files: Iterable[tuple[str, str]],
        user_env: Mapping[str, str],
        web_tools: bool,
    ) -> bytes | None:
        home = self.home(attempt_home)
        home.mkdir(parents=True, exist_ok=True)
        config = config_toml(self.upstream(user_env), web_tools, max_retries(user_env))
        jsonio.write_text(home / "config.toml", config)
        try:
            login = (self.user_config(user_env) / AUTH_FILE).read_bytes()
        except OSError:
            return None
        jsonio.write_bytes(home / AUTH_FILE, login, mode=0o600)
        return None  # a copy: Codex refreshes its login in place, the operator's is theirs

    def endpoint_option(self, base_url: str) -> str:
        """``-c`` overriding its provider's config.toml base_url for this one process: the
        provider's endpoint is read from the home alone (OPENAI_BASE_URL moves only the built-in
        provider, which 0.169.0 does not reach over plain HTTP), and phases that run at once
        share the home, each with its own base URL (the metering proxy's phase prefix)."""
        return "-c " + shlex.quote(f"model_providers.{PROVIDER}.base_url={json.dumps(base_url)}")

    def command(self, continues: bool) -> str:
        again = " resume --last" if continues else ""
        return (
            f"${{AGENT:-codex exec{again} --json --skip-git-repo-check "
            "-s danger-full-access -m {model}} {prompt} </dev/null"
        )

    def continues_session(self, command: str) -> bool:
        words = command_words(command)
        return "resume" in words

    def parse_result(self, stdout_text: str) -> dict[str, Any] | None:
        """The run's figures from its --json events, or None when it printed none."""
        found = events(stdout_text)
        if not any(e["type"] == "thread.started" for e in found):
            return None
        turns = [e for e in found if e["type"] == "turn.completed"]
        failed = [e for e in found if e["type"] == "turn.failed"]
        messages = [
            e["item"].get("text")
            for e in found
            if e["type"] == "item.completed"
            and (e.get("item") or {}).get("type") == "agent_message"
        ]
        errors = [str(e.get("message") or "") for e in found if e["type"] == "error"]
        error = str((failed[-1].get("error") or {}).get("message") or "") if failed else ""
        error = error or (errors[-1] if errors and not turns else "")
        status = STATUS.search(error)
        usage: dict[str, int] = {}
        for turn in turns:
            for k, v in (turn.get("usage") or {}).items():
                usage[k] = usage.get(k, 0) + int(v or 0)
        return {
            "session_id": next(e.get("thread_id") for e in found if e["type"] == "thread.started"),
            "is_error": bool(error),
            "api_error_status": int(status.group(1)) if status else None,
            "terminal_reason": "api_error" if error else None,
            "result": error or (messages[-1] if messages else None),
            "num_turns": len(turns),
            "usage": usage or None,
        }

    def error_kind(self, result: Result) -> str:
        status = result.get("api_error_status")
        text = str(result.get("result") or "").lower()
        if status in (401, 403):
            return AUTH
        if status == 429 or (isinstance(status, int) and status >= 500):
            return INFRA_ERROR
        if status is None and any(t in text for t in OVERLOADED):
            return INFRA_ERROR
        if status is None and ("stream disconnected" in text or "connection" in text):
            return INFRA_ERROR
        return ERROR if status == 404 else FAILED

    def classify(self, result: Result | None, exit_code: int | None) -> tuple[str, str]:
        status, reason = super().classify(result, exit_code)
        if status == COMPLETED and result is not None and not result.get("num_turns"):
            return ERROR, "no turn completed"
        return status, reason

    def phase_usage(
        self, result: Result | None, entries: Sequence[Entry], before: Models
    ) -> tuple[Usage, Models]:
        """From the session's last token_count (cumulative, less the session's previous
        phases), else the turns' usage in its output; no cost (Codex prints none: metered)."""
        counts = [
            e["payload"]["info"]
            for e in entries
            if (e.get("payload") or {}).get("type") == "token_count"
            and isinstance(e["payload"].get("info"), dict)
        ]
        model = next(
            (
                str(e["payload"]["model"])
                for e in reversed(entries)
                if e.get("type") == "turn_context" and (e.get("payload") or {}).get("model")
            ),
            "unknown",
        )
        if counts and counts[-1].get("total_token_usage"):
            now = {model: dict(usage_tokens(counts[-1]["total_token_usage"]), cost_usd=None)}
            old = before.get(model, {})
            diff = {t: now[model][t] - old.get(t, 0) for t in TOKENS}
            return figures_usage({model: dict(diff, cost_usd=None)}, "transcript"), now
        if result is not None and result.get("usage"):
            figures = dict(usage_tokens(result["usage"]), cost_usd=None)
            return figures_usage({model: figures}, "result"), before
        return empty_usage(), before

    def transcript_sizes(self, attempt_home: Path, workspace: Path) -> dict[str, int]:
        return transcript_sizes_of((self.home(attempt_home) / "sessions").glob("*/*/*/*.jsonl"))

    def session_of(self, entries: Sequence[Entry]) -> str | None:
        return next(
            (
                str(e["payload"]["id"])
                for e in entries
                if e.get("type") == "session_meta" and (e.get("payload") or {}).get("id")
            ),
            None,
        )


CODEX = Codex()
