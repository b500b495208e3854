"""The seam between the harness and an agent program (a CLI such as Claude Code, Codex or Gemini
CLI): what differs between programs is a Program's; what must not differ (the sandbox, the
credentials policy, the records, the verdict) is agent/stage.py's, once for all of them.

A Program answers for its CLI: where it is installed and its version (``identifies``,
``version``), its credentials and model endpoint (``credentials_problem``, ``upstream``,
``endpoint_environment``, ``endpoint``), its configuration home made afresh per attempt
(``home_environment``, ``prepare_home``, ``user_state``), the harness's options on its command
line (``command``: model, permissions, output format; ``web_option``: its web tools closed),
its output read into the phase record's common fields (``parse_result``, ``result_fields``,
``classify``, ``phase_usage``) and its transcripts (``transcript_sizes``,
``new_transcript_lines``). The metering proxy (nginx_eval/meter/) needs ``name``, ``api``,
``upstream`` and ``endpoint_environment`` of every registered program (registry.py), and
``endpoint_option`` of the one a phase starts, when its home rather than a variable names its
endpoint.

Common fields: ``tokens`` is {"input", "output", "cache_read", "cache_creation"} with input NOT
counting cached tokens (Anthropic's convention: OpenAI and Gemini count them inside input, so
their programs subtract) and output counting reasoning tokens.
"""

import os
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlsplit

from ...core import jsonio
from ...core.outcomes import COMPLETED, ERROR, FAILED, INFRA_ERROR, TIMEOUT
from ...core.procs import run_query
from ...core.records import ResultFields, Tokens

RESULT_CHARS = 500
TOKENS = ("input", "output", "cache_read", "cache_creation")
# A phase's status is one of agent.json's (core/outcomes.py), or AUTH, which never reaches a
# record: the run stops.
AUTH = "auth"

# A result's or a transcript's figures of one model: {"cost_usd", "input", "output",
# "cache_read", "cache_creation"}; and those figures per model.
Figures = dict[str, Any]
Models = dict[str, Figures]
# A program's result (what parse_result made of its stdout), and transcript entries.
Result = Mapping[str, Any]
Entry = Mapping[str, Any]


class Usage(TypedDict):
    """What a phase cost (phase_usage): fields of agent.json's phase record."""

    cost_usd: float | None
    tokens: Tokens | None
    models: Models
    cost_source: str | None  # "result" | "transcript" | None


def as_tokens(counts: Mapping[str, int]) -> Tokens:
    """Counts of the TOKENS kinds (a mapping of at least them) as a phase record's tokens."""
    return {
        "input": counts["input"],
        "output": counts["output"],
        "cache_read": counts["cache_read"],
        "cache_creation": counts["cache_creation"],
    }


def resolve_program(program: str | None, environ: Mapping[str, str]) -> str | None:
    """The file `program` (a command's first word) runs, symlinks not followed; None when a
    relative path or not on PATH."""
    if not program:
        return None
    if "/" in program:
        return program if os.path.isabs(program) and os.access(program, os.X_OK) else None
    return shutil.which(program, path=environ.get("PATH", os.defpath))


def one_line(text: object, limit: int = 300) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def host_port(url: str) -> str:
    """host:port of a URL (the default port of its scheme when it names none)."""
    parts = urlsplit(url if "://" in url else f"https://{url}")
    port = parts.port or (80 if parts.scheme == "http" else 443)
    host = parts.hostname or ""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# How often a program retries a failed API call itself, where the operator sets it (programs that
# take it from their settings; Claude Code has its own CLAUDE_CODE_MAX_RETRIES).
MAX_RETRIES_VARIABLE = "NGINX_EVAL_AGENT_MAX_RETRIES"


def max_retries(environ: Mapping[str, str]) -> int | None:
    value = environ.get(MAX_RETRIES_VARIABLE, "")
    return int(value) if value.isdigit() else None


def empty_usage() -> Usage:
    return {"cost_usd": None, "tokens": None, "models": {}, "cost_source": None}


def figures_usage(models: Models, source: str | None) -> Usage:
    """Usage of per-model figures: tokens summed, cost None when a model's is unknown."""
    tokens = as_tokens({t: sum(m[t] for m in models.values()) for t in TOKENS})
    costs = [m.get("cost_usd") for m in models.values()]
    cost = None if None in costs else round(sum(c for c in costs if c is not None), 10)
    return {"cost_usd": cost, "tokens": tokens, "models": models, "cost_source": source}


def transcript_sizes_of(paths: Iterable[Path]) -> dict[str, int]:
    sizes = {}
    for p in paths:
        try:
            sizes[str(p)] = p.stat().st_size
        except OSError:
            continue
    return sizes


def grown_lines(before: Mapping[str, int], after: Mapping[str, int]) -> list[str]:
    """The lines the files of `after` gained since `before` (path order)."""
    lines: list[str] = []
    for path in sorted(p for p, size in after.items() if size > before.get(p, 0)):
        with open(path, "rb") as f:
            f.seek(before.get(path, 0))
            lines += f.read().decode("utf-8", errors="replace").splitlines()
    return [line for line in lines if line.strip()]


def session_problem(
    continues: bool, previous_session: str | None, session: str | None
) -> str | None:
    """Why a phase that should continue `previous_session` did not (None when it did, or when
    there is nothing to compare)."""
    if not continues or not previous_session or not session or session == previous_session:
        return None
    return (
        f"--continue started session {session} instead of continuing "
        f"{previous_session}: the earlier phases' conversation was lost"
    )


# -- cost and tokens -------------------------------------------------------------------------


def summed_tokens(phases: Iterable[Mapping[str, Any]]) -> Tokens | None:
    """Tokens over phase records (None when none recorded any)."""
    tokens = [p["tokens"] for p in phases if p.get("tokens")]
    return as_tokens({t: sum(x.get(t, 0) for x in tokens) for t in TOKENS}) if tokens else None


def summed_cost(phases: Iterable[Mapping[str, Any]]) -> float | None:
    """Cost over phase records (None when none recorded one)."""
    costs = [p["cost_usd"] for p in phases if p.get("cost_usd") is not None]
    return round(sum(costs), 10) if costs else None


def command_words(command: str) -> list[str]:
    """A command line's words as a shell splits them; on unbalanced quotes, at spaces."""
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def result_fields(result: Result | None) -> ResultFields:
    """The phase record's fields that a result states (each None when it does not)."""
    result = result or {}
    text = result.get("result")
    return {
        "session_id": result.get("session_id"),
        "is_error": result.get("is_error"),
        "api_error_status": result.get("api_error_status"),
        "terminal_reason": result.get("terminal_reason"),
        "permission_denials": list(result.get("permission_denials") or []),
        "result": text[:RESULT_CHARS] if isinstance(text, str) else None,
        "num_turns": result.get("num_turns"),
    }


class Program:
    """One agent program (see the module docstring); subclasses fill in the class attributes
    and override what their CLI does its own way."""

    name: str = ""  # "claude" | "codex" | "gemini": modes.toml's `program`
    api: str = ""  # "anthropic" | "openai-responses" | "gemini"
    # A path of its API below upstream() that answers a GET without a key (with 401 at most);
    # "": the upstream itself (meter/proxy.py routes what it does not know to Anthropic's).
    probe_path: str = ""
    label: str = ""  # how a line names it: "Claude Code"
    package: str = ""  # its npm package
    # setup-debian.sh's variables: the pinned version, and the prefix it installs into.
    version_setting: str = ""
    prefix_variable: str = ""
    default_prefix: str = ""
    executables: tuple[str, ...] = ()  # the file names of its program
    home_variable: str = ""  # the variable that moves its configuration home
    home_subdir: str = ""  # its home inside the attempt's (Layout.agent_home); "" for that one
    base_url_variable: str = ""  # the operator's endpoint override
    default_upstream: str = ""
    key_variable: str = ""  # the API key the CLI reads
    credential_variables: tuple[str, ...] = ()  # any of these set gives it credentials
    forwarded_prefixes: tuple[str, ...] = ()  # its variables a Ray node needs
    # Workspace paths (relative) that are the program's, never the agent's patch.
    own_paths: tuple[str, ...] = ()
    # Where it records tool calls the harness's transcript scan understands (attempts.py).
    scans_transcript: bool = False
    # The fix the stop line asks for when the API refused its credentials.
    credentials_hint: str = ""
    # The logs its result is read from (parse_result gets them joined).
    result_streams: tuple[str, ...] = ("stdout",)

    # -- the program and its version ----------------------------------------------------------

    def identifies(self, path: str | None) -> bool:
        """Whether `path` is this program: it, or the file its symlinks lead to, has one of its
        names."""
        return bool(
            path
            and (
                os.path.basename(path) in self.executables
                or os.path.basename(os.path.realpath(path)) in self.executables
            )
        )

    def installed(self, environ: Mapping[str, str]) -> str | None:
        """Where setup-debian.sh put it (``$<prefix_variable>``, else the default prefix)."""
        prefix = environ.get(self.prefix_variable) or self.default_prefix
        path = os.path.join(prefix, "node_modules", ".bin", self.executables[0])
        return path if os.access(path, os.X_OK) else None

    def version(
        self, path: str | None, environ: Mapping[str, str], cache_dir: str | Path
    ) -> str | None:
        """``<path> --version`` of this program, or None; cached in `cache_dir` per resolved file,
        mtime and size, so that a run with nothing to do starts no CLI."""
        if not path or not self.identifies(path):
            return None
        real = os.path.realpath(path)
        try:
            st = os.stat(real)
        except OSError:
            return None
        return _cached_version(
            real, st.st_mtime_ns, st.st_size, str(cache_dir), environ.get("PATH", "")
        )

    def version_matches(self, version: str | None, pinned: str) -> bool:
        return (version or "").split()[:1] == [pinned] or (version or "").endswith(f" {pinned}")

    # -- credentials and endpoint -------------------------------------------------------------

    def credentials_problem(self, environ: Mapping[str, str]) -> str | None:
        """Why the CLI has no credentials (one line naming the program), or None."""
        if any(environ.get(v) for v in self.credential_variables):
            return None
        return f"{self.label} has no credentials: set {self.key_variable}"

    def key_probe(self, environ: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
        """(URL, headers) of a request that costs nothing and that the API answers 401/403 (or
        400 API_KEY_INVALID) for a bad key: the preflight's check of the credentials. None: not
        checked before the run (no key variable set, or the program's own way)."""
        return None

    def upstream(self, environ: Mapping[str, str]) -> str:
        """The operator's real endpoint for this program's API, from their environment."""
        return environ.get(self.base_url_variable) or self.default_upstream

    def endpoint_environment(self, base_url: str) -> dict[str, str]:
        """The variables that point the CLI at `base_url`."""
        return {self.base_url_variable: base_url}

    def endpoint_option(self, base_url: str) -> str | None:
        """An option of its command line (shell text) that points the CLI at `base_url` where
        the variables of endpoint_environment do not (a program whose home names its endpoint:
        Codex's config.toml); None when they do."""
        return None

    def endpoint(self, environ: Mapping[str, str]) -> str:
        """host:port the sandbox lets the CLI reach."""
        return host_port(self.upstream(environ))

    def probe_url(self, environ: Mapping[str, str]) -> str:
        """What the preflight asks of the endpoint (any HTTP answer means reachable): a path of
        its API (probe_path), so that the metering proxy in front of it routes the probe to it."""
        upstream = self.upstream(environ)
        return upstream.rstrip("/") + self.probe_path if self.probe_path else upstream

    # -- its configuration home ---------------------------------------------------------------

    def home(self, attempt_home: Path) -> Path:
        return attempt_home / self.home_subdir if self.home_subdir else attempt_home

    def home_environment(self, attempt_home: Path) -> dict[str, str]:
        return {self.home_variable: str(self.home(attempt_home))}

    def user_state(self, environ: Mapping[str, str]) -> list[str]:
        """The paths of the operator's own state of this program that exist (hidden from a
        sandboxed agent)."""
        return []

    def prepare_home(
        self,
        attempt_home: Path,
        files: Iterable[tuple[str, str]],
        user_env: Mapping[str, str],
        web_tools: bool,
    ) -> bytes | None:
        """Make the program's home in `attempt_home` (made afresh by the caller): its settings
        (web tools closed unless `web_tools`), the operator's credentials and nothing else of
        theirs. Returns a login copied in (sync_credentials' baseline), or None."""
        return None

    def sync_credentials(
        self, attempt_home: Path, user_env: Mapping[str, str], baseline: bytes | None
    ) -> bytes | None:
        return baseline

    # -- its command line ---------------------------------------------------------------------

    def command(self, continues: bool) -> str:
        """The phase command of a mode that names only the program: print mode, the mode's
        {model}, every tool allowed without asking, machine-readable output, {prompt} last."""
        raise NotImplementedError

    def web_option(self) -> str | None:
        """An option that closes its web tools on the command line (None: closed in its home's
        settings by prepare_home)."""
        return None

    def continues_session(self, command: str) -> bool:
        return False

    def slash_command(self, prompt: str | None) -> str | None:
        return None

    def undefined_command(self, name: str, workspace: str | Path, attempt_home: Path) -> str | None:
        return None

    # -- its output ---------------------------------------------------------------------------

    def parse_result(self, stdout_text: str) -> dict[str, Any] | None:
        raise NotImplementedError

    def result_fields(self, result: Result | None) -> ResultFields:
        """The phase record's fields that the result states (each None when it does not)."""
        return result_fields(result)

    def error_kind(self, result: Result) -> str:
        """AUTH, INFRA_ERROR, ERROR or FAILED of a result that is an error, from its
        api_error_status: 401/403 stop the run, 429/5xx are the infrastructure's."""
        status = result.get("api_error_status")
        if status in (401, 403):
            return AUTH
        if status == 429 or (isinstance(status, int) and status >= 500):
            return INFRA_ERROR
        if status == 404:
            return ERROR
        return FAILED

    def classify(self, result: Result | None, exit_code: int | None) -> tuple[str, str]:
        """(status, reason) of a phase that ended by itself."""
        if result is None:
            return generic_status(exit_code)
        text = one_line(result.get("result"))
        if result.get("is_error"):
            return self.error_kind(result), f"exit code {exit_code}: {text}"
        if exit_code != 0:
            return FAILED, f"exit code {exit_code}"
        if result.get("num_turns") == 0:
            return ERROR, f"no API turn made: {text}"
        return COMPLETED, ""

    def phase_status(
        self,
        timed_out: bool,
        timeout: float,
        exit_code: int | None,
        result: Result | None,
        entries: Sequence[Entry],
        slash: str | None,
        session_problem: str | None,
    ) -> tuple[str, str]:
        if timed_out:
            return TIMEOUT, f"timed out after {timeout:g} s"
        status, reason = self.classify(result, exit_code)
        if status != COMPLETED:
            return status, reason
        if session_problem:
            return ERROR, session_problem
        return COMPLETED, ""

    def phase_usage(
        self, result: Result | None, entries: Sequence[Entry], before: Models
    ) -> tuple[Usage, Models]:
        """What a phase cost and the session's cumulative models after it (see claude.py)."""
        raise NotImplementedError

    # -- its transcripts ----------------------------------------------------------------------

    def transcript_sizes(self, attempt_home: Path, workspace: Path) -> dict[str, int]:
        return {}

    def new_transcript_lines(
        self, before: Mapping[str, int], after: Mapping[str, int]
    ) -> list[str]:
        return grown_lines(before, after)

    def session_of(self, entries: Sequence[Entry]) -> str | None:
        return None


def generic_status(exit_code: int | None) -> tuple[str, str]:
    """(status, reason) of a program that printed nothing the harness reads (another agent)."""
    if exit_code == 0:
        return COMPLETED, ""
    if exit_code == 127:
        return ERROR, "command not found (exit 127)"
    return FAILED, f"exit code {exit_code}"


@lru_cache(maxsize=16)
def _cached_version(
    real: str, mtime_ns: int, size: int, cache_dir: str, search_path: str
) -> str | None:
    cache = Path(cache_dir) / f"{jsonio.digest([real, mtime_ns, size])}.json"
    known = jsonio.read_json(cache)
    if isinstance(known, dict) and known.get("version"):
        return known["version"]
    try:
        out = run_query([real, "--version"], timeout=60, env=dict(os.environ, PATH=search_path))
    except (OSError, subprocess.TimeoutExpired):
        return None
    version = (out.stdout.strip().splitlines() or [""])[0].strip()
    if out.returncode != 0 or not version:
        return None
    jsonio.write_json(
        cache, {"program": real, "mtime_ns": mtime_ns, "size": size, "version": version}
    )
    return version
