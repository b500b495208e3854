"""A run's state lives on one object (core/runstate.py), not in the modules' globals: the package
is scanned for module-level mutable values, functools caches, `global` statements, mutable
default arguments and constants changed in place, each one left named below with its reason; and
two runs in one process start clean."""

import ast
import dataclasses
import functools
import sys
import threading
from pathlib import Path

import fixture_repos

from nginx_eval import cli
from nginx_eval.build import cache as build_cache
from nginx_eval.cluster import executor
from nginx_eval.core import limits, procs, runstate
from nginx_eval.core.layout import Layout
from nginx_eval.doitext import cleaning, scheduling
from nginx_eval.run.options import Options

PACKAGE = Path(__file__).resolve().parent.parent / "nginx_eval"

# Module-level names that hold something mutable on purpose: {(module, name): why}.
ALLOWED = {
    ("core/runstate.py", "_current"): "the one reference to the run in progress (begin)",
    ("core/jsonio.py", "_digests"): "file digests keyed by the file's stat: a cache of contents, "
    "right for every run",
    ("core/locks.py", "_held"): "the flocks this process holds until it exits: the kernel keeps "
    "them per process, not per run, and a second descriptor of the same file would be refused",
    ("cluster/rayexec.py", "_remote_unit"): "Ray's handle of run_on_node, made once: no state",
    ("report/stats.py", "np"): "numpy, imported on first use: _Numpy keeps nothing",
}
# `global` statements: {(module, name)}; only begin() rebinds the run.
GLOBALS = {("core/runstate.py", "_current")}
# Functions with a functools cache, per process: {(module, function): why it is right for any
# run in the process}.
CACHED = {
    ("agent/programs/base.py", "_cached_version"): "a program's version, keyed by its real path, "
    "mtime and size",
    ("agent/sandbox.py", "_start_problem"): "whether srt starts on this machine, keyed by the "
    "program and PATH",
    ("agent/prompts.py", "prompt_environment"): "a Jinja environment per templates directory "
    "(Jinja reloads a changed template)",
    ("agent/prompts.py", "_absent_templates"): "which of a mode's prompt templates a directory "
    "lacks: a command's modes are read once, and a template made during it is used next time",
    ("build/toolchain.py", "_compiler_identity"): "a toolchain's compiler and its version, keyed "
    "by the toolchain (its directory, or the host's)",
    ("core/rootfs.py", "first_line"): "what a query prints in a toolchain's root filesystem, keyed "
    "by the toolchain and the query",
    ("core/layout.py", "_joined"): "base / parts: a pure function of its arguments",
    ("doitext/invocation.py", "options_with_value"): "doit's option tables, fixed for the process",
    ("doitext/plugins.py", "installed_entry_points"): "the installed packages' entry points, "
    "fixed for the process (doit finds its plugins at the start of a command)",
    ("prove/env.py", "_tool_versions"): "a toolchain's perl and openssl versions, keyed by the "
    "toolchain",
    ("prove/env.py", "_program"): "where this machine's PATH finds prove and perl",
    ("prove/network.py", "_probe"): "whether this machine's kernel gives a network namespace",
    ("report/site.py", "environment"): "a Jinja environment per templates directory",
    ("report/site_task.py", "_gold_from_clone"): "a fix's diff, keyed by its clone and two commits",
    ("report/stats.py", "_mcnemar_cutoffs"): "a pure function of (n, alpha)",
    ("suite/stage.py", "_read"): "a file at a commit, keyed by the commit",
    ("swebench/envs.py", "host_python"): "the version and path of the host's python3, fixed for "
    "the process",
    ("swebench/envs.py", "_package_facts"): "specs.json of a swebench version, keyed by its path "
    "(the package's constants do not change within a version)",
    ("swebench/envs.py", "_extra_specs"): "NGINX_EVAL_SWE_SPECS's file, keyed by its path: a "
    "command reads it once",
}
# Calls whose value cannot change: compiled patterns, frozen sets, paths, per-context variables
# (a ContextVar holds a value per thread and call, never one for the process).
IMMUTABLE_CALLS = {
    "re.compile",
    "frozenset",
    "tuple",
    "Path",
    "os.path.join",
    "time.time_ns",
    "TypeVar",
    "contextvars.ContextVar",
    "ContextVar",
    "field",
    "staticmethod",
    "classmethod",
    "property",
}
# Methods that change a list, dict or set in place.
MUTATORS = {
    "append",
    "extend",
    "insert",
    "remove",
    "pop",
    "popitem",
    "clear",
    "update",
    "setdefault",
    "add",
    "discard",
    "sort",
    "reverse",
    "__setitem__",
    "__delitem__",
    "difference_update",
    "intersection_update",
    "symmetric_difference_update",
}
CACHE_DECORATORS = {"cache", "lru_cache", "functools.cache", "functools.lru_cache"}


@functools.cache
def modules():
    """(path, tree) of each of the package's modules, parsed once for the module's scans (none of
    them changes a tree)."""
    return tuple(
        (path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text()))
        for path in sorted(PACKAGE.rglob("*.py"))
    )


@functools.cache
def walked(node):
    """Every node under `node` (ast.walk's), kept: the scans walk each module several times."""
    return tuple(ast.walk(node))


def dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr}" if head else None
    return None


def mutable(value):
    """Whether an assigned value may be changed in place (or is a call that might make one)."""
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Tuple):
        return any(mutable(v) for v in value.elts)
    if isinstance(value, ast.Call):
        return dotted(value.func) not in IMMUTABLE_CALLS
    return False


def top_level(body):
    """The statements of a module's body, those under module-level if/try/with included."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in ("body", "orelse", "finalbody"):
                yield from top_level(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from top_level(handler.body)


def assigned(node):
    """(names, value) of an assignment statement, else ((), None)."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        targets = [node.target]
    else:
        return (), None
    names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return names, node.value


def is_constant(name):
    return name.lstrip("_").isupper()


def test_no_module_level_mutable_state_but_the_allowed():
    found = set()
    for module, tree in modules():
        for node in top_level(tree.body):
            names, value = assigned(node)
            if value is not None and mutable(value):
                found |= {(module, n) for n in names if not is_constant(n)}
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    names, value = assigned(item)
                    if value is not None and mutable(value):
                        found |= {(module, f"{node.name}.{n}") for n in names if not is_constant(n)}
    assert found == set(ALLOWED), (
        "module-level mutable state outside the run's (core/runstate.py): "
        f"{sorted(found - set(ALLOWED))}; allowed but gone: {sorted(set(ALLOWED) - found)}"
    )


def test_no_global_statement_but_the_run():
    found = {
        (module, name)
        for module, tree in modules()
        for node in walked(tree)
        if isinstance(node, ast.Global)
        for name in node.names
    }
    assert found == GLOBALS


def test_every_cache_of_a_function_is_named_with_its_reason():
    found = set()
    for module, tree in modules():
        for node in walked(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    call = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if dotted(call) in CACHE_DECORATORS:
                        found.add((module, node.name))
    assert found == set(CACHED)


def test_no_function_keeps_state_in_a_default_argument():
    found = [
        (module, node.name if not isinstance(node, ast.Lambda) else "lambda", node.lineno)
        for module, tree in modules()
        for node in walked(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
        if mutable(default)
    ]
    assert found == []


def constants():
    """{name} of the module-level constants whose value is a list, dict, set or object."""
    return {
        name
        for _, tree in modules()
        for node in top_level(tree.body)
        for name in assigned(node)[0]
        if is_constant(name) and mutable(assigned(node)[1])
    }


def in_functions(tree):
    """Every node inside a function of `tree` (what runs after the module is imported)."""
    for function in walked(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from walked(function)


def changed_in_place(tree, names):
    """The constants of `names` that a function in `tree` changes in place: a mutating method,
    an item assigned or deleted, an augmented assignment. (A module may build a constant in
    steps as it is imported.)"""

    def named(node):
        return (isinstance(node, ast.Name) and node.id in names) or (
            isinstance(node, ast.Attribute) and node.attr in names
        )

    for node in in_functions(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in MUTATORS and named(node.func.value):
                yield dotted(node.func.value)
        targets = (
            node.targets
            if isinstance(node, (ast.Assign, ast.Delete))
            else [node.target]
            if isinstance(node, (ast.AugAssign, ast.AnnAssign))
            else []
        )
        for target in targets:
            if isinstance(target, ast.Subscript) and named(target.value):
                yield dotted(target.value)
            if isinstance(node, ast.AugAssign) and named(target):
                yield dotted(target)


def test_constants_stay_as_they_are():
    names = constants()
    assert {"KINDS", "VARIABLES", "DEFAULTS"} <= names  # the scan sees them
    changed = {(module, n) for module, tree in modules() for n in changed_in_place(tree, names)}
    assert changed == set()


def test_the_scan_finds_what_it_forbids():
    source = (
        "import threading\n"
        "_seen = {}\n"
        "_local = threading.local()\n"
        "if True:\n"
        "    _later: list[int] = []\n"
        "KEPT = {}\n"
        "KEPT.update(a=0)\n"
        "def f():\n"
        "    global _seen\n"
        "    KEPT['a'] = 1\n"
        "    KEPT.update(b=2)\n"
    )
    tree = ast.parse(source)
    found = [n for node in top_level(tree.body) for n in assigned(node)[0]]
    mutable_names = [
        n
        for node in top_level(tree.body)
        if assigned(node)[1] is not None and mutable(assigned(node)[1])
        for n in assigned(node)[0]
    ]
    assert found == mutable_names == ["_seen", "_local", "_later", "KEPT"]
    # An item assigned and a mutating method in f; building it as the module is imported is not.
    assert list(changed_in_place(tree, {"KEPT"})) == ["KEPT", "KEPT"]
    assert any(isinstance(n, ast.Global) for n in ast.walk(tree))


# -- two runs in one process ----------------------------------------------------------------------


def layout_in(tmp_path):
    return Layout(
        root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results", run="state"
    )


def dirty(tmp_path):
    """A run that remembers something in every part that keeps state in the run's."""
    layout = layout_in(tmp_path)
    limits.configure(layout, Options(builds=1))
    executor.configure(layout, Options())
    scheduling.finish_chains_first({"build": 1})
    (tmp_path / "workspace").mkdir()
    cleaning.record("workspace", tmp_path / "workspace")
    fields = {"key": "k" * 64, "base_commit": "b" * 40}
    build_cache.record_env_error(layout, fields, "no compiler", b"log\n")
    with procs.task_running():
        assert runstate.current().busy_threads == {threading.get_ident()}
    runstate.current().finished_tasks += 1
    return layout


def test_a_second_run_starts_clean(tmp_path, capsys):
    first = runstate.begin()
    layout = dirty(tmp_path)
    assert limits.counts()["build"] == 1
    assert first.dispatch_limits == {"build": 1}
    assert cleaning.summary().startswith("nginx-eval: removed 1 workspace, 0 builds")
    assert build_cache.failed_here(layout, "k" * 64)["reason"] == "no compiler"
    assert "environment error: no compiler" in capsys.readouterr().err
    assert first != runstate.RunState()

    second = runstate.begin()
    assert second is runstate.current() and second is not first
    assert second == runstate.RunState()  # every field as a run that never began has it
    assert limits.counts() == {} and not executor.is_remote() and not procs.interrupted()
    assert cleaning.summary() == "nginx-eval: removed 0 workspaces, 0 builds, freed 0 MiB"
    assert build_cache.failed_here(layout, "k" * 64) is None
    # The first run's state is its own: what the second does leaves it alone.
    scheduling.finish_chains_first({"prove": 3})
    assert first.dispatch_limits == {"build": 1} and second.dispatch_limits == {"prove": 3}


def test_every_field_of_the_run_starts_empty():
    run = runstate.RunState()
    for f in dataclasses.fields(run):
        value = getattr(run, f.name)
        assert not value or f.name in ("executor", "interrupt", "cleaned"), f.name
    assert run.executor == "local"
    assert run.interrupt == runstate.Interrupt() and run.cleaned == runstate.CleanTally()


def test_each_doit_invocation_begins_its_own_run(tmp_path, monkeypatch):
    fx = fixture_repos.make_fixture(tmp_path / "fx")
    for name, value in fx["env"].items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["doit", "list"])
    earlier = runstate.current()
    dirty(tmp_path)
    namespace = cli.load_dodo(fx["root"])
    assert namespace["NGINX_EVAL_CONTEXT"].benchmark.name == "tiny"
    assert runstate.current() is not earlier
    assert runstate.current() == runstate.RunState()
    assert earlier.finished_tasks == 1 and earlier.slot_counts["build"] == 1
