"""The sandbox self-test: before any agent starts, what a phase that verifies its work does, done
inside the sandbox exactly as a phase runs (sandbox.srt_settings, wrap, phase_environment):

    account   the phase runs as an ordinary user (nginx started by it switches to no account)
    build     cc builds a small C server (selftest/server.c)
    server    it starts, makes its private temporary directory and listens on 127.0.0.1
    curl      curl reaches it on 127.0.0.1 and on localhost (through the loopback proxy)
    prove     prove runs a .t file (selftest/reach.t) whose Perl client reaches it

The result, kept in run.json as ``sandbox_self_test``::

    {"ok": bool, "seconds": float, "checked": UTC time,
     "steps": [{"step": name, "ok": bool, "detail": str}],   # in order, up to the first failure
     "failed": "the sandbox self-test could not <what>: <the step's last line>" | null}

cli's preflight runs it once per ``doit run`` that is about to start an isolated agent, and no
agent starts when it fails; ``doit run doctor`` reports it. The preflight's checks of the same
sandbox (each phase program starts, the model endpoint answers) run in its sandbox start after
it (run_with_checks); a check that fails there is made again on its own, which says why.
"""

import datetime
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.procs import run_query
from ..core.records import SelfTest, SelfTestStep
from . import sandbox
from .programs.claude import CLAUDE

if TYPE_CHECKING:
    from ..core.layout import Layout
    from .programs.base import Program

FILES = Path(__file__).with_name("selftest")
STEPS = {
    "account": "run as an ordinary user",
    "build": "build a C program with cc",
    "server": "start a server on 127.0.0.1",
    "curl": "reach it with curl",
    "prove": "run a .t file with prove",
}
TIMEOUT = 120
# Each step prints "ok <step>" or "not ok <step>: <its last line of output>"; the first failure
# ends the script.
SCRIPT = r"""
set -u
say() {
    if [ "$1" = 0 ]; then echo "ok $2"; else echo "not ok $2: $(tail -n 1 out.txt)"; exit 1; fi
}
[ "$(id -u)" != 0 ] > out.txt 2>&1 || echo "uid $(id -u) ($(id -un 2>/dev/null))" > out.txt
say $? account
cc -Wall -Werror -o server server.c > out.txt 2>&1; say $? build
./server > port.txt 2> out.txt & server=$!
for _ in $(seq 100); do
    [ -s port.txt ] && break; kill -0 $server 2>/dev/null || break; sleep 0.05
done
port=$(cat port.txt 2>/dev/null)
[ -n "$port" ] && [ -d client_body_temp ] \
    || { [ -s out.txt ] || echo "no port printed" > out.txt; false; }
say $? server
{ curl -sS --max-time 10 "http://127.0.0.1:$port/" \
    && curl -sS --max-time 10 "http://localhost:$port/"; } > out.txt 2>&1 \
    && [ "$(grep -c 'nginx-eval self-test' out.txt)" = 2 ]
say $? curl
SELFTEST_PORT=$port prove reach.t > out.txt 2>&1; say $? prove
kill $server
"""


def run_inside(
    layout: "Layout",
    box: sandbox.Box,
    environ: Mapping[str, str],
    script: str,
    files: Path | None = None,
    timeout: float = TIMEOUT,
    programs: Iterable[str] = (),
) -> tuple[str, str]:
    """`script` (bash) in a sandbox of `box` (sandbox.settings), made as `environ` would make a
    phase's, in a scratch workspace holding a copy of `files`: (stdout, what it or srt said
    last on stderr)."""
    with tempfile.TemporaryDirectory(prefix="nginx-eval-selftest-") as scratch:
        workspace, tmp = Path(scratch) / "workspace", Path(scratch) / "tmp"
        if files:
            shutil.copytree(files, workspace)
        workspace.mkdir(exist_ok=True)
        tmp.mkdir()
        got = sandbox.run_isolated(
            script,
            box=box,
            workspace=workspace,
            scratch=tmp,
            hidden=sandbox.hidden_paths(layout),
            environ=environ,
            support=sandbox.write_support(layout.sandbox_support),
            programs=programs,
            timeout=timeout,
        )
    srt_said = got.srt_said or f"exit code {got.exit_code}"
    return got.stdout, got.said.strip() or srt_said


def run(layout: "Layout", box: sandbox.Box, environ: Mapping[str, str]) -> SelfTest:
    """The self-test in a sandbox of `box` (sandbox.settings) as `environ` would run a phase."""
    return run_with_checks(layout, box, environ, {})[0]


def run_with_checks(
    layout: "Layout",
    box: sandbox.Box,
    environ: Mapping[str, str],
    checks: Mapping[str, str],
    programs: Iterable[str] = (),
) -> tuple[SelfTest, set[str]]:
    """run, and in the same sandbox start once the self-test passed, `checks`: {name: a bash
    condition} (probe_condition, endpoint_condition). The preflight's checks of a box ride on
    its self-test so that they cost no sandbox start of their own; they run in order up to the
    first that fails. programs: the programs the checks start (readable inside, as in a
    phase). Returns (the self-test, the names of the checks that passed)."""
    start = time.monotonic()
    names = list(checks)
    script = SCRIPT + "".join(
        f"if {checks[name]}; then echo 'passed {i}'; else exit 0; fi\n"
        for i, name in enumerate(names)
    )
    stdout, said = run_inside(layout, box, environ, script, FILES, programs=programs)
    steps = read_steps(stdout)
    passed = {names[int(line[7:])] for line in stdout.splitlines() if PASSED.fullmatch(line)}
    result: SelfTest = {
        "ok": len(steps) == len(STEPS) and all(s["ok"] for s in steps),
        "seconds": round(time.monotonic() - start, 3),
        "checked": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "steps": steps,
        "failed": failure(steps, said),
    }
    return result, passed


PASSED = re.compile(r"passed \d+")


def probe_condition(argv: Sequence[str]) -> str:
    """A bash condition true when `argv` exits 0 having printed something (start_problem's
    test in sandbox.py)."""
    command = " ".join(shlex.quote(a) for a in argv)
    return f'{{ out=$({command} 2>/dev/null </dev/null) && [ -n "$out" ]; }}'


def endpoint_condition(environ: Mapping[str, str], program: "Program" = CLAUDE) -> str:
    """A bash condition true when the model endpoint answers (endpoint_problem's test)."""
    script = ENDPOINT_SCRIPT.replace('"$1"', shlex.quote(endpoint_url(environ, program)))
    return f'{{ code=$({script} 2>/dev/null); [ -n "$code" ] && [ "$code" != 000 ]; }}'


# curl with --proxytunnel asks the proxies for a tunnel to the endpoint as Claude Code does
# (its failure there reads "Couldn't connect through your proxy (ERR_PROXY_TUNNEL)"); any HTTP
# answer of the endpoint itself, an error status included, means it is reachable.
ENDPOINT_SCRIPT = 'curl -sS -p -o /dev/null -w "%{http_code}" --max-time 30 "$1"'
ENDPOINT_TIMEOUT = 45


def endpoint_url(environ: Mapping[str, str], program: "Program" = CLAUDE) -> str:
    return program.probe_url(environ)


def endpoint_problem(
    layout: "Layout",
    box: sandbox.Box | None,
    environ: Mapping[str, str],
    program: "Program" = CLAUDE,
) -> str | None:
    """Why the model endpoint cannot be reached the way a phase reaches it (from its sandbox,
    or for box None from this machine), one line, or None: checked before any agent starts, so
    that a URL or a network that cannot reach it fails in seconds, not after the CLI's own
    retries, which take minutes per attempt."""
    url = endpoint_url(environ, program)
    script = ENDPOINT_SCRIPT.replace('"$1"', shlex.quote(url))
    if box:
        stdout, said = run_inside(layout, box, environ, script, timeout=ENDPOINT_TIMEOUT)
    else:  # an unisolated agent's path is the host's own
        try:
            out = run_query(["bash", "-c", script], env=environ, timeout=ENDPOINT_TIMEOUT)
            stdout, said = out.stdout, out.stderr.strip()
        except subprocess.TimeoutExpired:
            stdout, said = "", f"no answer in {ENDPOINT_TIMEOUT} s"
    if stdout.strip() not in ("", "000"):
        return None
    reason = (said.splitlines() or ["no answer"])[-1].removeprefix("curl: ")
    variable = program.base_url_variable
    source = variable if environ.get(variable) else "the default endpoint"
    where = "from the agent's sandbox" if box else "from this machine"
    return (
        f"{program.label}: the model endpoint {url} ({source}) cannot be reached {where}: {reason}"
    )


def read_steps(stdout: str) -> list[SelfTestStep]:
    steps: list[SelfTestStep] = []
    for line in stdout.splitlines():
        ok = line.startswith("ok ")
        if not ok and not line.startswith("not ok "):
            continue
        name, _, detail = line.removeprefix("not ok " if not ok else "ok ").partition(": ")
        if name in STEPS:
            steps.append({"step": name, "ok": ok, "detail": detail.strip()})
    return steps


def failure(steps: list[SelfTestStep], fallback: str) -> str | None:
    """The one line that says what failed, or None."""
    for s in steps:
        if not s["ok"]:
            return f"the sandbox self-test could not {STEPS[s['step']]}: {s['detail']}"
    if len(steps) == len(STEPS):
        return None
    after = steps[-1]["step"] if steps else None
    missing = list(STEPS)[list(STEPS).index(after) + 1 if after else 0]
    last = (fallback.splitlines() or ["no output"])[-1]
    return f"the sandbox self-test could not {STEPS[missing]}: {last}"
