import ast
import atexit
import compileall
import contextlib
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterable
from pathlib import Path

import pytest

# pytest keeps a test module's rewritten assertions as bytecode only where Python may write it:
# with PYTHONDONTWRITEBYTECODE (set on these machines) every pytest process, each worker
# included, rewrote every test module again (2 to 3 s of a processor each).
sys.dont_write_bytecode = False
sys.path.insert(0, str(Path(__file__).parent))
import doit_server  # noqa: E402
import fixture_repos  # noqa: E402

from nginx_eval.core import runstate  # noqa: E402
from nginx_eval.core.outcomes import AGENT_STATUSES, GRADE_STATUSES  # noqa: E402

SOURCE_ROOT = Path(__file__).resolve().parent.parent
DODO = SOURCE_ROOT / "dodo.py"


def script_module(name):
    """scripts/<name>.py as a module, loaded anew (a script, not a package module)."""
    spec = importlib.util.spec_from_file_location(name, SOURCE_ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Project:
    """A fixture project: repositories, tasks/tiny.json, modes.toml, and a doit runner."""

    def __init__(self, base, reports=False):
        fx = fixture_repos.make_fixture(base)
        self.__dict__.update(fx)
        self.results = self.root / "results"
        self.cache = base / "cache"
        self.reports = reports

    def run_args(self, args):
        """`args` of a `doit run` with the costs the test does not look at switched off."""
        if not args or args[0] != "run":
            return tuple(args)
        words = [str(a) for a in args]
        if not any(w.startswith("strict") for w in words):
            # The strict verdict costs a sanitizer build and more test runs per patch: the
            # tests of other features leave it off; tests/test_strict.py turns it on.
            args = (*args, "strict=0")
        if not self.reports and not any(w.startswith("report") for w in words):
            # The report's statistics and charts cost two seconds of a processor per run:
            # only the tests that read a report or the site (marked `reports`) render them.
            args = (*args, "report=0")
        return tuple(args)

    def doit(self, *args, check=True, env=None, timeout=600):
        """Run `doit` for real; returns (CompletedProcess, names of the tasks it executed).

        Forked from this worker's doit server (doit_server.py): the same program as
        `python -m doit`, without starting Python and importing doit and the package each time."""
        args = self.run_args(args)
        if "report=0" not in args:
            self.seed_compiled_templates()
        argv = [sys.executable, "-m", "doit", "-f", str(DODO), *args]
        _refuse_outside_e2e(argv)
        returncode, stdout, stderr = doit_server.server(SOURCE_ROOT).run(
            argv[3:], env=dict(self.env, **(env or {})), timeout=timeout
        )
        proc = subprocess.CompletedProcess(argv, returncode, stdout, stderr)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"doit {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        executed = [line[3:].strip() for line in proc.stdout.splitlines() if line.startswith(".  ")]
        self.keep_compiled_templates()
        return proc, executed

    def render(self, *words, site=False):
        """What `doit run report <words>` renders, rendered in this process: report.md,
        report.json and the charts (report/stage.write_report; with `compare=`, the comparison),
        and with `site` the site (report/site.write_site), for the Context doit would load.

        For the tests of what a report says: a rendering in its own process pays the statistics'
        and charts' imports each time (1.3 of its 1.5 s of a processor), here once per worker.
        How doit renders (after a run, `doit run report`, up to date or not) is tested through
        doit (test_report.py, test_site.py)."""
        from nginx_eval import pipeline
        from nginx_eval.report import site as report_site
        from nginx_eval.report import stage as report_stage
        from nginx_eval.run.options import Options

        self.seed_compiled_templates()
        argv = ["run", "report", *map(str, words)]
        variables = dict(w.split("=", 1) for w in argv if "=" in w)
        with patched_environ(self.env):
            ctx = pipeline.load_context(argv=argv, options=Options.parse(variables, argv))
            o = ctx.options
            report_stage.write_report(
                ctx.layout,
                ctx.benchmark,
                ctx.tasks,
                ctx.modes,
                o.baseline,
                ctx.layout.templates_dir,
                o.cutoff,
                o.compare,
                o.cross,
                quiet=True,
            )
            if site:
                report_site.write_site(
                    ctx.layout,
                    ctx.benchmark,
                    ctx.tasks,
                    list(ctx.modes),
                    ctx.layout.templates_dir,
                    o.cutoff,
                )
        self.keep_compiled_templates()
        return ctx.layout.run_dir

    def seed_compiled_templates(self):
        """Before a rendering: the compiled templates of the projects before it (only then: a
        project that renders nothing has no cache/templates)."""
        if any(compiled_templates().iterdir()):
            shutil.copytree(compiled_templates(), self.cache / "templates", dirs_exist_ok=True)

    def keep_compiled_templates(self):
        """What this project's renderings compiled, for the projects after it."""
        kept = compiled_templates()
        for compiled in (self.cache / "templates").glob("*"):
            if not (kept / compiled.name).exists():
                shutil.copyfile(compiled, kept / f".{compiled.name}.tmp")
                os.replace(kept / f".{compiled.name}.tmp", kept / compiled.name)

    def gold_patch(self, iid):
        """The fix of fixture task `iid` as a diff (fixture_repos.gold_diff)."""
        task = next(t for t in self.tasks if t["instance_id"] == iid)
        return fixture_repos.gold_diff(self.mirrors, task)

    def task_dir(self, mode, iid, run="default"):
        return self.results / run / mode / iid

    def read(self, mode, iid, name, run="default"):
        record = json.loads((self.task_dir(mode, iid, run) / name).read_text())
        # Every record the tests read speaks the shared vocabulary.
        vocabulary = {"agent.json": AGENT_STATUSES, "grade.json": GRADE_STATUSES}.get(name)
        assert vocabulary is None or record["status"] in vocabulary, record["status"]
        return record

    def benchmark(self):
        return json.loads((self.root / "tasks" / "tiny.json").read_text())

    def write_benchmark(self, data):
        (self.root / "tasks" / "tiny.json").write_text(json.dumps(data, indent=2))

    def agent_calls(self):
        log = self.base / "agent-calls.log"
        return log.read_text().split() if log.exists() else []


_COMPILED_TEMPLATES = {}


def compiled_templates():
    """This process's copy of Jinja's compiled report and site templates
    (Layout.compiled_templates), which every project starts with, as a user's cache holds them
    after a first report: compiling is 0.28 s of a first rendering's processor time.
    tests/test_markdown.py compiles them from nothing."""
    if "path" not in _COMPILED_TEMPLATES:
        path = Path(tempfile.mkdtemp(prefix="compiled-templates-"))
        atexit.register(shutil.rmtree, path, True)
        _COMPILED_TEMPLATES["path"] = path
    return _COMPILED_TEMPLATES["path"]


@contextlib.contextmanager
def patched_environ(values):
    """os.environ updated with `values` for the block, as it was after it."""
    saved = dict(os.environ)
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def renders_reports(request):
    """Whether the test (or the module of a module-scoped fixture) is marked `reports`."""
    return request.node.get_closest_marker("reports") is not None


@pytest.fixture
def project(request, tmp_path):
    return Project(tmp_path, reports=renders_reports(request))


# NGINX_EVAL_TOOLCHAIN as the session found it: the pinned toolchain's tests (test_rootfs.py) use
# the directory it names, if any.
SESSION_TOOLCHAIN = os.environ.get("NGINX_EVAL_TOOLCHAIN")


def pytest_configure(config):
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    if not hasattr(config, "workerinput"):  # once per session, in the controller
        # Every doit the tests start, and every report it renders, imports the package afresh:
        # without its bytecode each process compiles the package again (a third of a doit's
        # start), as PYTHONDONTWRITEBYTECODE keeps any of them from writing it.
        compileall.compile_dir(SOURCE_ROOT / "nginx_eval", quiet=1)
    # The tests run with the host's compiler and Perl unless NGINX_EVAL_TOOLCHAIN names a root
    # filesystem: what most of them check does not depend on which toolchain builds and proves
    # (test_rootfs.py runs the pipeline in the pinned one).
    os.environ.setdefault("NGINX_EVAL_TOOLCHAIN", "host")
    # pytest-xdist hands out modules (--dist loadfile) in collection order, which
    # pytest_collection_modifyitems below sets, not sorted by how many tests each has.
    config.option.loadscopereorder = False


# -- the inner loop: `pytest -m "not e2e"` runs no doit, make, prove, sandbox or CLI --------------

# Programs whose start makes a test end to end (seconds each, not milliseconds); raylet is the
# node of a Ray cluster.
E2E_PROGRAMS = ("doit", "make", "prove", "srt", "bwrap", "claude", "codex", "gemini", "raylet")
# Fixtures that start them: a test using one is marked e2e at collection.
E2E_FIXTURES = {
    "project",
    "claude",
    "claude_program",
    "anthropic_api",
    "openai_api",
    "gemini_api",
    "codex_program",
    "gemini_program",
    "prove_v",
    "hostile",
    "shared_cluster",
}
# How far into a command line a wrapper may put the program (the prove stage's network wrapper:
# python -I -S namespaces.py prove ...).
E2E_WORDS = 6


def e2e_program(argv):
    """The E2E_PROGRAMS name `argv` starts (``python -m doit`` and wrappers included), or None."""
    if isinstance(argv, (str, bytes)):
        argv = [argv]
    argv = [str(a) for a in list(argv)[:E2E_WORDS]]
    if argv[:1] and os.path.basename(argv[0]) in ("bash", "sh") and argv[1:2] == ["-c"]:
        argv = argv[2].split()[:1] if len(argv) > 2 else []  # the command the shell starts
    for word in argv:
        if os.path.basename(word) in E2E_PROGRAMS:
            return os.path.basename(word)
    if argv[:1] and os.path.basename(argv[0]).startswith("python") and argv[1:3] == ["-m", "doit"]:
        return "doit"
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if E2E_FIXTURES & set(getattr(item, "fixturenames", ())) or getattr(
            item.module, "E2E", False
        ):
            item.add_marker(pytest.mark.e2e)
    # The longest modules first, then the other modules with end-to-end tests, each whole and in
    # its order: pytest-xdist's loadfile hands out modules in this order, so the quick modules
    # fill the workers at the end instead of a module of minutes starting last.
    end_to_end = {item.module.__name__ for item in items if item.get_closest_marker("e2e")}
    items.sort(
        key=lambda item: (
            LONGEST.index(item.module.__name__)
            if item.module.__name__ in LONGEST
            else len(LONGEST),
            item.module.__name__ not in end_to_end,
        )
    )


# The modules of the longest wall time (a sum over their tests, measured with the whole suite on
# four workers: docs/development.md), longest first.
LONGEST = (
    # These two make the range task's base builds of the session's shared cache, the sanitizer
    # one and the plain one, on two workers at once (test_real_nginx_strict.py's docstring).
    "test_real_nginx_strict",
    "test_real_nginx",
    "test_rayexec",
    "test_workflow_modes",
    "test_agent_claude",
    "test_faults",
    "test_full_mode",
    "test_swebench",
    "test_pipeline",
    "test_limits",
    "test_agent_programs",
    "test_meter_claude",
    "test_agent_home",
    "test_strict",
    "test_openssl_pin",
    "test_swebench_pro",
)


_GUARD = {"on": False}  # during the setup and call of a test not marked e2e


def _end_to_end(what):
    return AssertionError(
        f"this test {what}, so it is end to end: give it one of "
        f"conftest.E2E_FIXTURES, or E2E = True in its module, so that "
        f'`pytest -m "not e2e"` stays the quick loop'
    )


def _refuse_outside_e2e(argv):
    program = e2e_program(argv) if _GUARD["on"] else None
    if program:
        raise _end_to_end(f"starts {program}")


# The guard's static half. The guard above sees only what a test starts where it runs; a test
# that skips here (no mirrors of nginx, no sandbox) passes the quick loop, and fails it where it
# runs. So a command line written out in a test, or in a function of tests/ it calls by name,
# that starts one of E2E_PROGRAMS makes it end to end too, whether it runs or skips.
STARTING_CALLS = {"run", "Popen", "call", "check_call", "check_output"}
TESTS_DIR = Path(__file__).resolve().parent
_WRITTEN = {}


def _command_words(node, assigned):
    """The words of a command line written as a list or tuple (a word that is not a string
    constant is '', sys.executable is 'python'), or None."""
    if isinstance(node, ast.Name) and node.id in assigned:
        node = assigned[node.id]
    if not isinstance(node, (ast.List, ast.Tuple)):
        return None
    return [
        e.value
        if isinstance(e, ast.Constant) and isinstance(e.value, str)
        else "python"
        if ast.unparse(e) == "sys.executable"
        else ""
        for e in node.elts
    ]


def written_e2e_start(function, _seen=None):
    """(program, "file:line") of a command line written out in `function`, or in a function of
    tests/ it calls by name, that starts an E2E_PROGRAMS program; None if none does. A start
    inside `with pytest.raises(...)` is one the test expects refused, and does not count."""
    seen = set() if _seen is None else _seen
    if function in _WRITTEN or function in seen:
        return _WRITTEN.get(function)
    seen.add(function)
    try:
        lines, first = inspect.getsourcelines(function)
        path = Path(inspect.getsourcefile(function)).resolve()
    except (OSError, TypeError):
        return None
    found = None
    tree = ast.parse(textwrap.dedent("".join(lines)))
    refused = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.With)
        and any("raises" in ast.unparse(item.context_expr) for item in node.items)
        for inner in ast.walk(node)
    }
    assigned = {
        target.id: node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(tree):
        if found or not isinstance(node, ast.Call) or id(node) in refused:
            continue
        called = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if isinstance(node.func, ast.Name):
            called = node.func.id
            callee = function.__globals__.get(called)
            if inspect.isfunction(callee) and _in_tests(callee):
                found = written_e2e_start(callee, seen)
        if called in STARTING_CALLS:
            argument = node.args[0] if node.args else None
            argument = next((k.value for k in node.keywords if k.arg == "args"), argument)
            words = _command_words(argument, assigned)
            program = e2e_program(words) if words else None
            if program:
                found = (program, f"{path.name}:{first + node.lineno - 1}")
    _WRITTEN[function] = found
    return found


def _in_tests(function):
    try:
        return Path(inspect.getsourcefile(function)).resolve().parent == TESTS_DIR
    except TypeError:
        return False


def _refuse_written_start(item):
    """Fails a test outside the e2e marker whose code writes out a start of doit, make, prove, the
    sandbox, the CLI or a Ray node (written_e2e_start), before its skip marks are looked at."""
    function = getattr(item, "function", None)
    if function is None or item.get_closest_marker("e2e"):
        return
    written = written_e2e_start(function)
    if written:
        raise _end_to_end(f"starts {written[0]} ({written[1]})")


class _Guarded(subprocess.Popen):
    def __init__(self, args, *rest, **kwargs):
        _refuse_outside_e2e(args)
        super().__init__(args, *rest, **kwargs)


# Installed once for the whole session and switched per test: a test that monkeypatches
# subprocess.Popen restores this class, whatever phase its teardown runs in.
subprocess.Popen = _Guarded  # type: ignore[misc]


@contextlib.contextmanager
def _guard(item):
    """Outside e2e tests (their setup included: module fixtures build projects), starting an
    E2E_PROGRAMS program fails the test: the marker cannot silently go stale."""
    _GUARD["on"] = not item.get_closest_marker("e2e")
    try:
        yield
    finally:
        _GUARD["on"] = False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    _refuse_written_start(item)  # before the skip marks: a test that skips here fails too
    with _guard(item):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    with _guard(item):
        yield


@pytest.fixture(autouse=True)
def _a_run_of_its_own():
    """Each test in a run state of its own (core/runstate.py), as each doit invocation: nothing
    a test configures (limits, the executor, an interrupt) reaches the next one."""
    runstate.begin()


def prove_verbose(directory, name, body, env=None):
    """What real `prove -v` prints for a Test::More file `name` with `body` (after the `use`
    lines), run in `directory`: grading tests read this, never hand-written TAP."""
    path = Path(directory) / name
    path.write_text("use strict;\nuse warnings;\nuse Test::More;\n" + body)
    proc = subprocess.run(
        ["prove", "--norc", "-v", name],
        cwd=directory,
        capture_output=True,
        text=True,
        env=dict(os.environ, **(env or {})),
        timeout=60,
    )
    return proc.stdout, proc.returncode


@pytest.fixture
def prove_v(tmp_path):
    """prove_v(name, body) -> (stdout of real `prove -v`, exit code); see prove_verbose."""
    return lambda name, body, env=None: prove_verbose(tmp_path, name, body, env)


def section(md, title):
    """The text of a markdown section `title` (any heading level) of a report."""
    m = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", md, re.S | re.M)
    assert m, f"no section {title!r} in the report"
    return m.group(1)


def table_row(text, first_cell):
    """The cells after the first of the markdown table row whose first cell is `first_cell`."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == first_cell:
            return cells[1:]
    raise AssertionError(f"no row {first_cell!r} in:\n{text}")


@pytest.fixture
def anthropic_api():
    """A running stand-in for the Anthropic API (tests/anthropic_standin.py); set its `script`
    and `faults`, point the CLI at it with claude_cli.environment(api, config_dir)."""
    from anthropic_standin import StandIn

    with StandIn() as api:
        yield api


@pytest.fixture(scope="session")
def claude_program():
    """The real Claude Code CLI (tests/claude_cli.py); skipped, loudly, only when it is not
    installed and npm cannot fetch it."""
    import warnings

    import claude_cli

    program, problem = claude_cli.find_or_install()
    if problem:
        warnings.warn(f"SKIPPING the tests that run Claude Code: {problem}", stacklevel=1)
        pytest.skip(problem)
    return program


@pytest.fixture
def openai_api():
    """A running stand-in for the OpenAI Responses API (tests/openai_standin.py)."""
    from openai_standin import StandIn

    with StandIn() as api:
        yield api


@pytest.fixture
def gemini_api():
    """A running stand-in for the Gemini API (tests/gemini_standin.py)."""
    from gemini_standin import StandIn

    with StandIn() as api:
        yield api


def _agent_program(name):
    import warnings

    import agent_clis

    from nginx_eval.agent.programs import registry

    program, problem = agent_clis.find_or_install(registry.named(name))
    if problem:
        warnings.warn(f"SKIPPING the tests that run {name}: {problem}", stacklevel=2)
        pytest.skip(problem)
    return program


@pytest.fixture(scope="session")
def codex_program():
    """The real Codex CLI (tests/agent_clis.py)."""
    return _agent_program("codex")


@pytest.fixture(scope="session")
def gemini_program():
    """The real Gemini CLI (tests/agent_clis.py)."""
    return _agent_program("gemini")


def without_timings(row: dict, dropped: Iterable[str]) -> dict:
    """A results.jsonl row without the fields named in `dropped` and without the wall times of
    its phase_figures (each call's "seconds"), which differ between two runs of the same work."""
    out = {k: v for k, v in row.items() if k not in dropped}
    if out.get("phase_figures"):
        out["phase_figures"] = [
            {k: v for k, v in call.items() if k != "seconds"} for call in out["phase_figures"]
        ]
    return out


@pytest.fixture(scope="session")
def real_nginx_cache(tmp_path_factory):
    """NGINX_EVAL_CACHE of the tests on real nginx (tests/nginx_mirrors.py), one for the whole
    session: every worker's modules share its clones, builds, configure tests and sanitizer runs,
    as a user's runs share a cache, kept apart by the harness's own locks (a build another worker
    is making is waited for, not made twice). Each doit run in it has a run name of its own: the
    harness refuses a second process on a run that is running."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session's directory, above each worker's own
    path = base / "real-nginx-cache"
    path.mkdir(exist_ok=True)
    return path
