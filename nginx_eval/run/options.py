"""Command-line variables: every ``name=value`` word of a doit command line, read and checked once.

pipeline.load_context parses all of them (doitext/invocation.py's command_line_variables), so
that a name the harness does not know is an error instead of being ignored; the rest of the
harness takes its settings from ``ctx.options`` and never asks doit. VARIABLES names each one
and its parser, Options holds the values and defaults; what each means is the table of
docs/running.md#command-line-variables (tests/test_docs.py checks that it names them all).

Checks that need the benchmark or the modes (an instance id that is not in the benchmark, a mode
that does not exist) are methods here too, called by pipeline.load_context once those are loaded.
Every mistake is a UserError naming the variable: one ``nginx-eval: error:`` line.

Environment variables are not doit variables: ``AGENT`` and any name starting with
``NGINX_EVAL_`` or ``ANTHROPIC_`` written after the command is refused with a line saying how to
set it (``AGENT=... doit run ...``).
"""

import re
import shlex
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ..core.errors import UserError, did_you_mean

if TYPE_CHECKING:
    from .benchmark import Benchmark

ENVIRONMENT_ONLY = ("AGENT",)
ENVIRONMENT_PREFIXES = ("NGINX_EVAL_", "ANTHROPIC_")
# Where a unit's heavy work runs (cluster/executor.py).
EXECUTORS = ("local", "ray")
# What else keeps the machine busy while <bench>:validate proves (checks/load.py).
LOADS = ("none", "cpu")


def _error(name: str, value: str, message: str) -> UserError:
    return UserError(f"{name}={value}: {message}")


def _plain_name(name: str, value: str) -> str | None:
    value = value.strip()
    if not value:
        return None
    if not value.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise _error(name, value, "must be a plain name (letters, digits, '-', '_', '.')")
    return value


def _plain_names(name: str, value: str) -> str | None:
    """One plain name, or a comma-separated list of them (cross=B,C)."""
    words = [w.strip() for w in value.split(",")]
    if not value.strip():
        return None
    if not all(words) or not all(_plain_name(name, w) for w in words):
        raise _error(name, value, "must be plain names separated by commas")
    return ",".join(words)


def _text(name: str, value: str) -> str | None:
    return value.strip() or None


def _checked(
    name: str,
    value: str,
    accept: Callable[[str], object],
    why: str,
    convert: Callable[[str], Any] = str,
) -> Any:
    """A value that must pass `accept` (after stripping), converted; None when empty."""
    text = value.strip()
    if not text:
        return None
    if not accept(text):
        raise _error(name, value, why)
    return convert(text)


def _count(name: str, value: str) -> int | None:
    return _checked(
        name,
        value,
        lambda t: re.fullmatch(r"[0-9]+", t) and int(t) >= 1,
        "must be a whole number >= 1",
        int,
    )


def _count_or_zero(name: str, value: str) -> int | None:
    return _checked(
        name, value, lambda t: re.fullmatch(r"[0-9]+", t), "must be a whole number >= 0", int
    )


def _dollars(name: str, value: str) -> float | None:
    # Digits and one point only: "inf", "nan" and "1e3" are no budget a reader can check.
    return _checked(
        name,
        value,
        lambda t: re.fullmatch(r"[0-9]*\.?[0-9]+|[0-9]+\.", t) and float(t) > 0,
        "must be an amount of US dollars above 0 (max_cost=5 or max_cost=2.50)",
        float,
    )


def _level(name: str, value: str) -> int | None:
    return _checked(name, value, lambda t: t in ("0", "1", "2"), "must be 0, 1 or 2", int)


def _switch(name: str, value: str) -> int | None:
    return _checked(name, value, lambda t: t in ("0", "1"), "must be 0 or 1", int)


def _executor(name: str, value: str) -> str | None:
    return _checked(name, value, lambda t: t in EXECUTORS, f"must be one of {', '.join(EXECUTORS)}")


def _load(name: str, value: str) -> str | None:
    return _checked(name, value, lambda t: t in LOADS, f"must be one of {', '.join(LOADS)}")


def _date(name: str, value: str) -> str | None:
    from .benchmark import is_date

    return _checked(name, value, is_date, "must be a date YYYY-MM-DD")


def _points(name: str, value: str) -> tuple[float, ...]:
    """Percentage points, comma-separated: each a number above 0 and below 100."""
    out = []
    for item in _names(name, value):
        try:
            number = float(item)
        except ValueError:
            number = None
        if number is None or not 0 < number < 100:
            raise _error(
                name,
                value,
                "must be percentage points above 0 and below 100, comma-separated (detect=5,10)",
            )
        out.append(number)
    return tuple(out)


def _names(name: str, value: str) -> tuple[str, ...]:
    """id,id,... with spaces around the commas and empty entries ignored; each once."""
    items = [v.strip() for v in value.split(",")]
    return tuple(dict.fromkeys(v for v in items if v))


@dataclass(frozen=True)
class Variable:
    parse: Callable[[str, str], Any]  # (name, text) -> value, or None for the default;
    # raises UserError
    help: str


VARIABLES = {
    "run": Variable(_plain_name, "results/<run>/ holds the run (default: default)"),
    "bench": Variable(
        _text,
        "the benchmark, tasks/<bench>.json (default: the one the task names, "
        "the run's, nginx, or the only one)",
    ),
    "instances": Variable(_names, "comma-separated instance ids: only these tasks"),
    "limit": Variable(_count, "only the first N tasks (after instances=), N >= 1"),
    "modes": Variable(_names, "comma-separated modes that `doit run <bench>` runs (default: all)"),
    "baseline": Variable(
        _text, "the mode the report compares agent time against (default: the first agent mode)"
    ),
    "predictions": Variable(_text, "a SWE-bench predictions file, scored as mode `file`"),
    "repeats": Variable(
        _count, "<bench>:validate runs base and fix N times each, N >= 1 (default: 5)"
    ),
    "load": Variable(
        _load,
        "<bench>:validate: cpu keeps one CPU-bound process per core running while it proves "
        "(default: none)",
    ),
    "verbosity": Variable(
        _level, "doit clean: 2 prints a line per removed item (default: one summary line)"
    ),
    "cutoff": Variable(
        _date, "the report splits tasks by fix date, before and on or after this YYYY-MM-DD"
    ),
    "compare": Variable(
        _plain_name, "doit run report: compare each mode with the same mode in this other run"
    ),
    "cross": Variable(
        _plain_names,
        "the report sets this run beside that run (or runs B,C) of other "
        "benchmarks (nginx, SWE-bench Verified, SWE-bench Pro): one section over them",
    ),
    "detect": Variable(
        _points, "doit run power: differences to plan for, in percentage points (default: 5,10)"
    ),
    "max_cost": Variable(
        _dollars,
        "the run's agent budget in US dollars: once spent, no new agent starts (default: none)",
    ),
    "agent_retries": Variable(
        _count_or_zero,
        "times an agent run that failed for the API or "
        "the network is tried again, N >= 0 (default: 2)",
    ),
    "agents": Variable(_count, "agent phases running at once, N >= 1 (default: 8)"),
    "builds": Variable(
        _count, "builds (configure, make) running at once, N >= 1 (default: the cores, at least 2)"
    ),
    "proves": Variable(_count, "prove file runs at once, N >= 1 (default: four times the cores)"),
    "executor": Variable(
        _executor,
        "where agent runs, builds and proves run: local (default) or "
        "ray (the cluster of RAY_ADDRESS, or a local one)",
    ),
    "rerun_failed": Variable(
        _switch,
        "1: run a test file with a failing graded assertion once "
        "more, and grade the rerun (default: 0)",
    ),
    "swe_local": Variable(
        _switch,
        "1: SWE-bench: build each task's Python environment here and give each unit a local "
        "verdict beside the official one (the swebench-local extra; default: 0)",
    ),
    "strict": Variable(
        _switch,
        "0: no strict verdict (regression files and sanitizer build of "
        "a resolved patch; default: 1)",
    ),
    "strict_gold": Variable(
        _switch,
        "1: judge the gold patches' strictness too (default: 0, the benchmark card states it)",
    ),
    "strict_files": Variable(
        _count, "regression files per patch of the strict verdict, N >= 1 (default: 6)"
    ),
    "report": Variable(
        _switch,
        "0: the run leaves report.md and the site as they are; `doit run report` renders them "
        "(default: 1)",
    ),
    "keep_workspaces": Variable(
        _switch,
        "1: an agent's workspace stays after its patch is taken (default: 0, it is removed)",
    ),
    "dry_run": Variable(
        _switch,
        "1: doit run prints what it would do and what its agents would "
        "cost, and starts and writes nothing (default: 0)",
    ),
}


# The NGINX_EVAL_ variables a user sets (docs/running.md#environment-variables; tests/test_docs.py
# checks that its table names each) ...
ENVIRONMENT = (
    "NGINX_EVAL_REPO_URL",
    "NGINX_EVAL_CACHE",
    "NGINX_EVAL_RESULTS",
    "NGINX_EVAL_ROOT",
    "NGINX_EVAL_SRT",
    "NGINX_EVAL_SRT_PREFIX",
    "NGINX_EVAL_AGENT_BACKOFF",
    "NGINX_EVAL_AGENT_MAX_RETRIES",
    "NGINX_EVAL_TOOLCHAIN",
    "NGINX_EVAL_CC_OPT",
    "NGINX_EVAL_DEBIAN_MIRROR",
    "NGINX_EVAL_DEBIAN_SECURITY_MIRROR",
    "NGINX_EVAL_PRIVATE_NETWORK",
    "NGINX_EVAL_CLAUDE_PREFIX",
    "NGINX_EVAL_CLAUDE",
    "NGINX_EVAL_CODEX_PREFIX",
    "NGINX_EVAL_CODEX",
    "NGINX_EVAL_GEMINI_PREFIX",
    "NGINX_EVAL_GEMINI",
    "NGINX_EVAL_MODELS",
    "NGINX_EVAL_MIRRORS",
    "NGINX_EVAL_FORWARD",
    "NGINX_EVAL_NODE_CACHE",
    "NGINX_EVAL_NODE_REPO_URL",
    "NGINX_EVAL_PYTHON_ROOTFS",
    "NGINX_EVAL_SWE_PYTHON",
    "NGINX_EVAL_SWE_SPECS",
)
# ... and those the harness sets for the programs it starts, or its tests and scripts for theirs
# (a doit started under them, e.g. by a test, must not be refused).
INTERNAL_ENVIRONMENT = (
    "NGINX_EVAL_REAL_CC",
    "NGINX_EVAL_FEATURE_TESTS",
    "NGINX_EVAL_FEATURE_TESTS_READONLY",
    "NGINX_EVAL_CC_ID",
    "NGINX_EVAL_SANDBOX_SUPPORT",
    "NGINX_EVAL_SANDBOX_VIEW",
    "NGINX_EVAL_SANDBOX_DIRECT",
    "NGINX_EVAL_SWE_UNSET",
    "NGINX_EVAL_INSTANCE",
    "NGINX_EVAL_INSIDE",
    "NGINX_EVAL_NGINX_LOG",
    "NGINX_EVAL_PROC_TOKEN",
    "NGINX_EVAL_TEST_GLOBALS",
    "NGINX_EVAL_TEST_PAUSE_AT",
    "NGINX_EVAL_TEST_PAUSE_MARKER",
    "NGINX_EVAL_SCREENSHOTS",
    "NGINX_EVAL_TOOLCHAIN_BOOKWORM",
)


def check_environment(environ: Mapping[str, str]) -> None:
    """Every NGINX_EVAL_ variable of `environ` is one the harness reads or sets; else one
    UserError naming the closest known one. A misspelt variable would be ignored without a
    word: `NGINX_EVAL_CAHCE=/big/disk` would build everything again in the default cache."""
    known = set(ENVIRONMENT) | set(INTERNAL_ENVIRONMENT)
    for name in sorted(environ):
        if name.startswith("NGINX_EVAL_") and name not in known:
            hint = did_you_mean(name, ENVIRONMENT, show=lambda c: c) or (
                f" (known: {', '.join(ENVIRONMENT)})"
            )
            raise UserError(
                f"unknown environment variable {name}, which nothing would read{hint}: "
                f"correct its name or unset it (`unset {name}`)"
            )


def is_environment_only(name: str) -> bool:
    return name in ENVIRONMENT_ONLY or name.startswith(ENVIRONMENT_PREFIXES)


def _example(name: str, value: str, argv: Sequence[str] | None) -> str:
    """The command line with `name=value` moved before it, to show how to set it."""
    rest = [a for a in (argv or []) if a != f"{name}={value}"]
    words = " ".join(shlex.quote(a) for a in rest) if rest else "run ..."
    return f"{name}={shlex.quote(value)} doit {words}"


@dataclass(frozen=True)
class Options:
    """The command line's variables, parsed (docs/running.md#command-line-variables)."""

    run: str = "default"
    bench: str | None = None
    instances: tuple[str, ...] = ()
    limit: int | None = None
    modes: tuple[str, ...] = ()
    baseline: str | None = None
    predictions: str | None = None
    repeats: int = 5
    load: str = "none"
    verbosity: int | None = None
    cutoff: str | None = None
    compare: str | None = None
    cross: str | None = None
    detect: tuple[float, ...] = ()
    max_cost: float | None = None
    agent_retries: int = 2
    agents: int | None = None  # None: limits.default_counts
    builds: int | None = None
    proves: int | None = None
    rerun_failed: int = 0
    swe_local: int = 0
    strict: int = 1
    strict_gold: int = 0
    strict_files: int | None = None  # None: strict/stage.DEFAULT_FILES
    report: int = 1
    keep_workspaces: int = 0
    dry_run: int = 0
    executor: str = "local"
    # (name, value) as on the command line
    given: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, variables: Mapping[str, object], argv: Sequence[str] | None = None) -> "Options":
        """Options from {name: value} (doit's command-line variables); UserError on an unknown
        name, an environment variable, or a bad value. `argv` only shapes the hint for an
        environment variable."""
        values: dict[str, Any] = {}
        for name, value in variables.items():
            value = "" if value is None else str(value)
            if is_environment_only(name):
                raise UserError(
                    f"{name} is an environment variable, not a doit variable: set it "
                    f"before the command, as in {_example(name, value, argv)}"
                )
            if name not in VARIABLES:
                hint = did_you_mean(name, VARIABLES, show=lambda c: f"{c}=")
                if not hint and re.fullmatch(r"[A-Z_][A-Z0-9_]*", name):
                    hint = (
                        f"; an environment variable goes before the command, as in "
                        f"{_example(name, value, argv)}"
                    )
                raise UserError(
                    f"unknown variable {name}={value}{hint} (known: {', '.join(sorted(VARIABLES))})"
                )
            parsed = VARIABLES[name].parse(name, value)
            if parsed is not None and parsed != ():
                values[name] = parsed
        return cls(
            **values, given=tuple((n, "" if v is None else str(v)) for n, v in variables.items())
        )

    def raw(self, name: str) -> str:
        """The value of `name` as given on the command line ("" when not given)."""
        return dict(self.given).get(name, "")

    def _all_known(
        self,
        variable: str,
        wanted: Iterable[str],
        known: Collection[str],
        unknown: Callable[[str], str],
        tail: str = "",
    ) -> None:
        """Every name in `wanted` (from `variable`) is one of `known`; else the one-line error
        `unknown(name)`, the closest known name and `tail`."""
        for name in wanted:
            if name not in known:
                raise _error(
                    variable,
                    self.raw(variable),
                    f"{unknown(name)}{did_you_mean(name, known)}{tail}",
                )

    def check_instances(self, bench: "Benchmark") -> None:
        """Every id of instances= is a task of `bench`."""
        self._all_known(
            "instances",
            self.instances,
            [t.instance_id for t in bench.tasks],
            lambda iid: f"no task '{iid}' in benchmark {bench.name}",
        )

    def check_modes(self, modes: Collection[str]) -> None:
        """Every mode of modes= exists."""
        self._all_known(
            "modes",
            self.modes,
            modes,
            lambda name: f"unknown mode '{name}'",
            f" (known modes: {', '.join(sorted(modes))})",
        )

    def check_baseline(self, run_modes: Collection[str]) -> None:
        """baseline= names a mode of the run (configured, recorded in run.json or on disk)."""
        self._all_known(
            "baseline",
            [self.baseline] if self.baseline else [],
            run_modes,
            lambda name: f"no mode '{name}' in run '{self.run}'",
            f" (known modes: {', '.join(sorted(run_modes))})",
        )


assert set(VARIABLES) == {f.name for f in fields(Options)} - {"given"}
