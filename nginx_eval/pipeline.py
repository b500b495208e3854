"""Wiring: turns the project's inputs into doit tasks. dodo.py calls ``doit_tasks()``.

Task names (``doit list --all``)::

    repos:<owner>+<name>                 bare clone         (repositories.py)
    tests:<commit12>                     nginx-tests tree   (prove.py)
    workspace|agent|patch|build|prove|grade:<bench>/<mode>/<instance_id>
    results:<bench>/<mode>               results.jsonl + predictions.jsonl (summary.py)
    report, <bench>:report               results/<run>/report.md (report.py)
    <bench>:<mode>                       what users run: `doit run nginx:raw`
    <bench>                              every mode plus the report: `doit run nginx`

Command-line variables: ``run=NAME`` (default "default"), ``instances=ID,ID``, ``limit=N``,
``modes=a,b`` (modes of `doit run nginx`; default: every configured mode), ``baseline=MODE``
(the report's time comparison), ``predictions=PATH``
(adds a mode ``file`` scored from a SWE-bench predictions file), ``bench=NAME``.

A run evaluates one benchmark: the one named on the command line (``doit run nginx:raw``), or
``bench=NAME``, or ``nginx``, or the only file in tasks/.
"""

import sys
from dataclasses import dataclass

from doit import get_var

from . import (agent, build, doctor, grade, patch, prove, report, repositories, summary, validate,
               workspace)
from .benchmark import load_benchmarks
from .errors import UserError
from .layout import Layout
from .modes import extra_modes, get_mode, load_modes
from .runrecord import read_run

STAGES = (repositories, workspace, agent, patch, build, prove, grade, summary, report, validate,
          doctor)


@dataclass
class Context:
    layout: Layout
    benchmark: object
    tasks: list
    modes: dict
    selection: dict = None      # instances= and limit= as given

    @property
    def all_tasks(self):
        return self.tasks

    def mode_list(self):
        return [self.modes[m] for m in sorted(self.modes)]

    def units(self):
        for mode in self.mode_list():
            for task in self.tasks:
                yield self.benchmark, mode, task

    def agent_units(self):
        return ((b, m, t) for b, m, t in self.units() if m.runs_agent)

    def build_order(self):
        """ctx.tasks in the order their builds should start (build.interleave_by_build_group);
        stages that fan out over tasks list their dependencies in this order, which is the
        order doit starts them."""
        if not hasattr(self, "_build_order"):
            self._build_order = build.interleave_by_build_group(self.layout, self.tasks)
        return self._build_order

    def base_build_plan(self):
        """build.base_build_plan of ctx.tasks, computed once per doit invocation."""
        if not hasattr(self, "_base_build_plan"):
            self._base_build_plan = build.base_build_plan(self.layout, self.tasks)
        return self._base_build_plan

    def mode_groups(self):
        for mode in self.mode_list():
            yield self.benchmark, mode, self.tasks

    @staticmethod
    def unit_name(bench, mode, task):
        return f"{bench.name}/{mode.name}/{task.instance_id}"


def named_benchmark(benchmarks, argv, requested=None):
    """The benchmark the command line names (``bench=NAME`` or ``doit run NAME:...``), or None."""
    if requested:
        return pick_benchmark(benchmarks, argv, requested)
    for arg in argv:
        head = arg.split(":", 1)[0]
        if head in benchmarks:
            return benchmarks[head]
    return None


def pick_benchmark(benchmarks, argv, requested=None, run_benchmark=None):
    """The benchmark of this command: the one named, else the run's (run.json), else nginx, else
    the only one."""
    if run_benchmark in benchmarks and not requested and not named_benchmark(benchmarks, argv):
        return benchmarks[run_benchmark]
    if requested:
        if requested not in benchmarks:
            raise UserError(f"no benchmark '{requested}'; known: {', '.join(sorted(benchmarks))}",
                            field="bench")
        return benchmarks[requested]
    for arg in argv:
        head = arg.split(":", 1)[0]
        if head in benchmarks:
            return benchmarks[head]
    if "nginx" in benchmarks:
        return benchmarks["nginx"]
    if len(benchmarks) == 1:
        return next(iter(benchmarks.values()))
    raise UserError("no benchmark file in tasks/" if not benchmarks else
                    f"several benchmarks ({', '.join(sorted(benchmarks))}): name one, e.g. "
                    f"doit run {sorted(benchmarks)[0]}")


GROUP_SUBTASKS = ("validate", "report")     # subtasks of a benchmark's group that are not modes


def check_requested_modes(bench, modes, argv):
    """`doit run nginx:bogus` names a mode that does not exist: say which ones do."""
    for arg in argv:
        head, _, tail = arg.partition(":")
        if head == bench and tail and tail not in modes and tail not in GROUP_SUBTASKS:
            get_mode(modes, tail)


def _int_var(name):
    value = get_var(name)
    if value in (None, ""):
        return None
    try:
        n = int(value)
    except ValueError:
        raise UserError(f"{name}={value!r} is not a whole number", field=name)
    if n < 0:
        raise UserError(f"{name} must not be negative", field=name)
    return n


def load_context(root=None, argv=None):
    run = get_var("run", "default") or "default"
    if not run.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise UserError(f"run={run!r} must be a plain name", field="run")
    layout = Layout.from_env(root=root, run=run)
    benchmarks = load_benchmarks(layout.tasks_dir)
    bench = pick_benchmark(benchmarks, sys.argv[1:] if argv is None else argv, get_var("bench"),
                           (read_run(layout) or {}).get("benchmark"))
    instances = [i for i in (get_var("instances") or "").split(",") if i]
    tasks = bench.select(instances or None, _int_var("limit"))
    modes = load_modes(layout.modes_file)
    modes.update(extra_modes(get_var("predictions")))
    check_requested_modes(bench.name, modes, sys.argv[1:] if argv is None else argv)
    wanted = [m for m in (get_var("modes") or "").split(",") if m]
    for m in wanted:
        get_mode(modes, m)
    if wanted:
        modes = {k: v for k, v in modes.items() if k in wanted}
    return Context(layout=layout, benchmark=bench, tasks=tasks, modes=modes,
                   selection={"instances": instances or None, "limit": _int_var("limit")})


def group_tasks(ctx, extra_group_deps=()):
    """`<bench>:<mode>` for each mode, and `<bench>` for all of them plus the report."""
    bench = ctx.benchmark.name
    subtasks = []
    for mode in ctx.mode_list():
        subtasks.append(f"{bench}:{mode.name}")
        yield {
            "basename": bench,
            "name": mode.name,
            "doc": f"score mode {mode.name} ({mode.description or mode.kind}) on {bench}",
            "actions": None,
            "task_dep": [f"results:{bench}/{mode.name}"],
        }
    # Yielded last, it replaces the group doit built from the subtasks, so `doit run nginx` runs
    # exactly these (and not, say, nginx:validate).
    yield {"basename": bench, "name": None, "doc": f"every mode on {bench}, and the report",
           "task_dep": subtasks + list(extra_group_deps)}


def doit_tasks(root=None):
    """The dict of ``task_*`` generators and DOIT_CONFIG for dodo.py's globals()."""
    ctx = load_context(root)

    def task_stages():
        for stage in STAGES:
            yield from stage.gen_tasks(ctx)
        yield from group_tasks(ctx, extra_group_deps=(f"{ctx.benchmark.name}:report",))

    task_stages.__doc__ = "every pipeline stage"
    config = {
        "dep_file": str(ctx.layout.doit_db),
        "backend": "nginx_eval",
        "default_tasks": [ctx.benchmark.name],
        "verbosity": 1,
    }
    ctx.layout.doit_db.parent.mkdir(parents=True, exist_ok=True)
    return {"task_stages": task_stages, "DOIT_CONFIG": config, "NGINX_EVAL_CONTEXT": ctx}
