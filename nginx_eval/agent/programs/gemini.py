"""Google's Gemini CLI (npm @google/gemini-cli) behind the program seam (base.py).

What it relies on, tests/test_agent_gemini.py pins for the version scripts/setup-debian.sh
installs (against tests/gemini_standin.py):

- Its home: ``GEMINI_CLI_HOME`` stands for the user's home directory, the CLI keeping its state
  in ``$GEMINI_CLI_HOME/.gemini/`` (settings.json, GEMINI.md, chats, installation id). The
  harness writes settings.json there: the API key as the auth method, usage statistics off,
  and ``tools.exclude`` of its web tools (``google_web_search``, ``web_fetch``, which the API or
  the CLI run outside the sandbox's view of the network) unless the mode opens them. An OAuth
  login (``oauth_creds.json`` of the operator's ~/.gemini) is copied in; nothing else of theirs.
- ``--output-format json`` prints one object, ``{session_id, response, stats: {models: {<model>:
  {api, tokens: {input, prompt, candidates, total, cached, thoughts, tool}}}}}``: ``prompt``
  includes ``cached``, ``input`` is prompt less cached, ``thoughts`` is apart from
  ``candidates``. On an error the object (``{session_id, error: {type, message, code}}``) is
  printed on stderr; the exit code is non-zero (41: no usable auth method; 144 an API error).
  A bad key is the API's 400 API_KEY_INVALID, not a 401.
- Endpoint: ``GOOGLE_GEMINI_BASE_URL``; key: ``GEMINI_API_KEY``. It needs
  ``GEMINI_CLI_TRUST_WORKSPACE=true`` to act in an untrusted folder, and
  ``GEMINI_CLI_NO_RELAUNCH=true`` keeps it in one Node.js process.
- ``--resume latest`` continues the latest session of the working directory.
"""

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...core import jsonio
from .base import (
    AUTH,
    ERROR,
    FAILED,
    INFRA_ERROR,
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

WEB_TOOLS = ("google_web_search", "web_fetch")
LOGIN_FILE = "oauth_creds.json"
AUTH_TEXTS = ("API_KEY_INVALID", "API key not valid", "Invalid auth method", "UNAUTHENTICATED")
INFRA_TEXTS = ("overloaded", "UNAVAILABLE", "RESOURCE_EXHAUSTED", "INTERNAL", "quota")


def settings(web_tools: bool, login: bool, retries: int | None = None) -> dict[str, Any]:
    """The settings.json of an attempt's Gemini home; retries: NGINX_EVAL_AGENT_MAX_RETRIES
    (else the CLI's own: 10 attempts, minutes of backoff)."""
    data: dict[str, Any] = {
        "security": {"auth": {"selectedType": "oauth-personal" if login else "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    }
    if retries is not None:
        data["general"]["maxAttempts"] = min(10, retries + 1)
    if not web_tools:
        data["tools"] = {"exclude": list(WEB_TOOLS)}
    return data


def json_objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects in `text` (the CLI pretty-prints its result among other lines)."""
    decoder, i = json.JSONDecoder(), 0
    out: list[dict[str, Any]] = []
    while True:
        i = text.find("{", i)
        if i < 0:
            return out
        try:
            obj, end = decoder.raw_decode(text, i)
        except ValueError:
            i += 1
            continue
        if isinstance(obj, dict):
            out.append(obj)
        i = end


def model_tokens(tokens: Mapping[str, Any]) -> dict[str, int]:
    prompt = int(tokens.get("prompt") or 0)
    cached = int(tokens.get("cached") or 0)
    return {
        "input": prompt - cached,
        "output": int(tokens.get("candidates") or 0) + int(tokens.get("thoughts") or 0),
        "cache_read": cached,
        "cache_creation": 0,
    }


class Gemini(Program):
    name, api, label = "gemini", "gemini", "Gemini CLI"
    package = "@google/gemini-cli"
    version_setting, prefix_variable = "GEMINI_CLI_VERSION", "NGINX_EVAL_GEMINI_PREFIX"
    default_prefix = "/opt/nginx-eval/gemini-cli"
    executables = ("gemini",)
    home_variable, home_subdir = "GEMINI_CLI_HOME", "gemini"
    base_url_variable = "GOOGLE_GEMINI_BASE_URL"
    probe_path = "/v1beta/models"
    default_upstream = "https://generativelanguage.googleapis.com"
    key_variable = "GEMINI_API_KEY"
    credential_variables = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    forwarded_prefixes = ("GEMINI_", "GOOGLE_")
    own_paths = (".gemini",)
    credentials_hint = "GEMINI_API_KEY"
    result_streams = ("stdout", "stderr")

    def version(
        self, path: str | None, environ: Mapping[str, str], cache_dir: str | Path
    ) -> str | None:
        """Its package's version (what ``--version`` prints), read from the package.json above
        the file npm links to: the CLI itself takes seconds to start, and a run's inputs ask for
        its version before anything else."""
        if not path or not self.identifies(path):
            return None
        for folder in Path(os.path.realpath(path)).parents:
            data = jsonio.read_json(folder / "package.json")
            if isinstance(data, dict) and data.get("name") == self.package:
                return str(data.get("version") or "") or None
        return super().version(path, environ, cache_dir)

    def version_matches(self, version: str | None, pinned: str) -> bool:
        return (version or "").strip() == pinned

    def user_config(self, environ: Mapping[str, str]) -> Path:
        home = environ.get("GEMINI_CLI_HOME") or environ.get("HOME") or os.path.expanduser("~")
        return Path(home) / ".gemini"

    def credentials_problem(self, environ: Mapping[str, str]) -> str | None:
        if any(environ.get(v) for v in self.credential_variables):
            return None
        if (self.user_config(environ) / LOGIN_FILE).exists():
            return None
        return "Gemini CLI has no credentials: set GEMINI_API_KEY"

    def key_probe(self, environ: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
        key = environ.get("GEMINI_API_KEY") or environ.get("GOOGLE_API_KEY")
        if not key:
            return None
        return self.upstream(environ).rstrip("/") + "/v1beta/models", {"x-goog-api-key": key}

    def user_state(self, environ: Mapping[str, str]) -> list[str]:
        paths = [str(self.user_config(environ)), os.path.expanduser("~/.gemini")]
        return [p for p in dict.fromkeys(paths) if os.path.lexists(p)]

    def home_environment(self, attempt_home: Path) -> dict[str, str]:
        return {
            self.home_variable: str(self.home(attempt_home)),
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
            # The CLI starts Node.js a second time, itself as a child with a larger heap
            # limit, unless told not to: each call then costs twice the startup (2.9 against
            # 1.5 s of a processor, docs/performance.md), for a heap no attempt here needs.
            "GEMINI_CLI_NO_RELAUNCH": "true",
        }

    def prepare_home(
        self,
        attempt_home: Path,
        files: Iterable[tuple[str, str]],
        user_env: Mapping[str, str],
        web_tools: bool,
    ) -> bytes | None:
        state = self.home(attempt_home) / ".gemini"
        state.mkdir(parents=True, exist_ok=True)
        try:
            login = (
                None
                if self.credentials_in_env(user_env)
                else (self.user_config(user_env) / LOGIN_FILE).read_bytes()
            )
        except OSError:
            login = None
        if login is not None:
            jsonio.write_bytes(state / LOGIN_FILE, login, mode=0o600)
        jsonio.write_json(
            state / "settings.json", settings(web_tools, login is not None, max_retries(user_env))
        )
        return None

    def credentials_in_env(self, environ: Mapping[str, str]) -> bool:
        return any(environ.get(v) for v in self.credential_variables)

    def command(self, continues: bool) -> str:
        again = " --resume latest" if continues else ""
        return (
            f"${{AGENT:-gemini --output-format json --approval-mode yolo{again} -m {{model}} -p}}"
            " {prompt} </dev/null"
        )

    def continues_session(self, command: str) -> bool:
        words = command_words(command)
        return "--resume" in words or "-r" in words

    def parse_result(self, stdout_text: str) -> dict[str, Any] | None:
        """Its result object (on stdout, or its error object on stderr), or None."""
        found = [o for o in json_objects(stdout_text) if "session_id" in o]
        if not found:
            return None
        obj = found[-1]
        error = obj.get("error") if isinstance(obj.get("error"), dict) else None
        message = str((error or {}).get("message") or "")
        code = (error or {}).get("code")
        status = code if isinstance(code, int) and 100 <= code < 600 else None
        nested = json_objects(message)
        if nested and isinstance(nested[0].get("error"), dict):
            status = nested[0]["error"].get("code", status)
        models = ((obj.get("stats") or {}).get("models")) or {}
        turns = sum(int(((m.get("api") or {}).get("totalRequests")) or 0) for m in models.values())
        return {
            "session_id": obj.get("session_id"),
            "is_error": error is not None,
            "api_error_status": status,
            "terminal_reason": "api_error" if error else None,
            "result": message if error else obj.get("response"),
            "num_turns": turns,
            "models": {
                name: dict(model_tokens(m.get("tokens") or {}), cost_usd=None)
                for name, m in models.items()
                if isinstance(m, dict)
            },
        }

    def error_kind(self, result: Result) -> str:
        status = result.get("api_error_status")
        text = str(result.get("result") or "")
        if status in (401, 403) or any(t in text for t in AUTH_TEXTS):
            return AUTH
        if status == 429 or (isinstance(status, int) and status >= 500):
            return INFRA_ERROR
        if any(t in text for t in INFRA_TEXTS):
            return INFRA_ERROR
        return ERROR if status == 404 else FAILED

    def phase_usage(
        self, result: Result | None, entries: Sequence[Entry], before: Models
    ) -> tuple[Usage, Models]:
        """From the result's per-model tokens (the invocation's own); no cost (metered)."""
        if result is not None and result.get("models"):
            return figures_usage(dict(result["models"]), "result"), before
        return empty_usage(), before

    def transcript_sizes(self, attempt_home: Path, workspace: Path) -> dict[str, int]:
        chats = self.home(attempt_home) / ".gemini" / "tmp"
        return transcript_sizes_of(chats.glob("*/chats/*.json"))

    def new_transcript_lines(
        self, before: Mapping[str, int], after: Mapping[str, int]
    ) -> list[str]:
        """A chat file is one JSON document, rewritten as it grows: the whole of each that
        changed, as one line."""
        lines = []
        for path in sorted(p for p, size in after.items() if size != before.get(p)):
            data = jsonio.read_json(Path(path))
            if data is not None:
                lines.append(json.dumps(data))
        return lines

    def session_of(self, entries: Sequence[Entry]) -> str | None:
        return next((str(e["sessionId"]) for e in entries if e.get("sessionId")), None)


GEMINI = Gemini()
