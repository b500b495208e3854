"""What may hold an agent back, for the agent stage (agent/stage.py): a run stopped because the API
refused the credentials, the run's budget, and the wait between the attempts of a run that met
an infra error.

- **Stop.** The first agent whose credentials are refused (401/403) writes
  ``<cache>/running/<run>.agent-stop`` (Layout.agent_stop) with the one line that explains it;
  every agent of the run that would start after it raises that same line as a UserError (so the
  console shows it once, cli.Reporter), and the next ``doit run`` clears it (cli.preflight). The
  harness cannot make the CLI give up sooner: the pinned CLI retries a bare 401 (a bad key) like
  a 5xx, for about three minutes, unless the API answers ``x-should-retry: false`` (the
  stand-in can) or CLAUDE_CODE_MAX_RETRIES is set in the mode's environment.
- **Budget.** ``max_cost=USD``: the cost the run's agent.json files record, every mode and task
  (Layout.agent_records), is compared with it before an agent starts.
- **Backoff.** NGINX_EVAL_AGENT_BACKOFF seconds (default 30) before the second attempt, doubling
  after each; Ctrl-C ends the wait at once.
"""

import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ..core import jsonio, procs
from ..core.errors import UserError

if TYPE_CHECKING:
    from ..core.layout import Layout

BACKOFF_VARIABLE, DEFAULT_BACKOFF = "NGINX_EVAL_AGENT_BACKOFF", 30.0


class CredentialsRefused(UserError):
    """stop_the_run's error: the API refused the credentials of agent `unit`."""

    def __init__(self, message: str, unit: str, reason: str, program: str, fix: str) -> None:
        super().__init__(message)
        self.unit, self.reason, self.program, self.fix = unit, reason, program, fix

    def __reduce__(
        self,
    ) -> tuple[type["CredentialsRefused"], tuple[str, str, str, str, str]]:
        # Pickled across processes (executor=ray) with its fields.
        return type(self), (str(self), self.unit, self.reason, self.program, self.fix)


def clear_stop(layout: "Layout") -> None:
    """A new `doit run` may start agents again (after the credentials were fixed)."""
    layout.agent_stop.unlink(missing_ok=True)


def check_not_stopped(layout: "Layout") -> None:
    if layout.agent_stop.exists():
        raise UserError(layout.agent_stop.read_text(encoding="utf-8").strip())


def stop_the_run(
    layout: "Layout",
    unit: str,
    reason: str,
    program: str = "Claude Code",
    fix: str = "ANTHROPIC_API_KEY (or the CLI's login)",
) -> NoReturn:
    """The credentials were refused: say so in one line (UserError) and let no other agent of
    the run start. unit: "<mode>/<instance>"; program: the agent program's name ("Codex CLI");
    fix: what to set (its credentials_hint)."""
    if not layout.agent_stop.exists():
        jsonio.write_text(
            layout.agent_stop,
            (
                f"the API refused the {program} agent's credentials (agent {unit}, {reason}); no "
                f"other agent starts in this run: fix {fix} and run again\n"
            ),
        )
    raise CredentialsRefused(
        layout.agent_stop.read_text(encoding="utf-8").strip(), unit, reason, program, fix
    )


def run_spent(layout: "Layout") -> float:
    """What the run's agents cost so far, as their records say."""
    return sum((jsonio.read_json(p) or {}).get("cost_usd") or 0 for p in layout.agent_records())


def over_budget(layout: "Layout", max_cost: float | None) -> float | None:
    """The run's recorded agent cost when it reached `max_cost` (None: no budget, or not yet)."""
    if max_cost is None:
        return None
    spent = run_spent(layout)
    return spent if spent >= max_cost else None


def backoff_seconds(attempt: int) -> float:
    """The wait after attempt number `attempt` (1, 2, ...)."""
    return float(os.environ.get(BACKOFF_VARIABLE) or DEFAULT_BACKOFF) * 2 ** (attempt - 1)


def wait_interruptibly(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if procs.interrupted():
            raise procs.Interrupted()
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))


def keep_attempt_logs(logs: Path, attempt: int) -> Path:
    """Move an attempt's logs to <logs>/attempt-<n>/ before the next attempt writes its own."""
    kept = logs / f"attempt-{attempt}"
    kept.mkdir(parents=True, exist_ok=True)
    for path in logs.iterdir():
        if path.is_file():
            shutil.move(str(path), kept / path.name)
    return kept
