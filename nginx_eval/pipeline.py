"""Wiring: turns the project's inputs into doit tasks. dodo.py calls ``doit_tasks()``.

Task names (``doit list --all``; plain ``doit list`` shows what users run first: arrange_listing)::

    repos:<owner>+<name>                 bare clone         (repositories/stage.py)
    tests:<commit12>                     nginx-tests tree   (prove/tree.py)
    base:<owner>+<name>/<commit12>-<flags>   a base build   (build/plan.py)
    workspace|agent|patch|build|prove|strict|grade:<bench>/<mode>/<instance_id>
    validate:<bench>/<instance_id>, validation:<bench>   task validation (checks/validate.py)
    results:<bench>/<mode>               results.jsonl + predictions.jsonl (results/stage.py; a
                                         SWE-bench benchmark's: swebench/stage.py)
    <bench>:grade                        SWE-bench: the official harness, where Docker is
    report:markdown, <bench>:report      results/<run>/report.md (report/stage.py)
    site:index, site:<mode>/<instance_id>   results/<run>/site/ (report/site.py)
    report                               report:markdown, then the site
    power                                tasks and repeats a difference needs (report/power.py)
    <bench>:<mode>                       what users run: `doit run nginx:raw`
    <bench>                              every mode plus the report: `doit run nginx`
    <bench>:validate, <bench>:lint, doctor   checks/: validate.py, statements.py, doctor.py
    default                              what a bare `doit` runs: <bench>:gold, <bench>:none,
                                         then the report; never an agent

A run evaluates one benchmark (run/record.py); a candidates file gets only its validation
(check_candidates), a SWE-bench benchmark no build, prove, strict, grade or validation
(STAGES_OF_KIND).
"""

import gc
import os
import sys
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doit.loader import generate_tasks
from doit.task import Task

from .agent import prompts, sandbox, swe_view
from .agent import stage as agent
from .build import plan as buildplan
from .build import stage as build
from .build.plan import BasePlan
from .checks import doctor, statements, validate
from .core.errors import UserError, did_you_mean
from .core.layout import Layout
from .core.records import LeftOut, Selection, SkippedFile, StandinsView, SweEnvView
from .core.stamps import TaskDict
from .core.tasknames import (
    BASE,
    REPOS,
    TESTS,
    VALIDATE,
    VALIDATION,
    WORKSPACE,
    results_task_name,
    task_name,
    tests_task_names,
    unit_name,
)
from .doitext.backend import answer_forgotten, forgotten_tasks
from .doitext.invocation import (
    command_line_variables,
    command_targets,
    doit_command,
    lists_commands_only,
)
from .doitext.pruning import drop_settled, full_name
from .doitext.slim import slim
from .grade import stage as grade
from .patch import stage as patch
from .prove import stage as prove
from .report import site as report_site
from .report import stage as report
from .repositories import stage as repositories
from .results import stage as results
from .run import swebench_pro
from .run.benchmark import AnyTask, Benchmark, load_benchmarks
from .run.benchmark import Task as BenchmarkTask
from .run.modes import (
    AgentMode,
    Mode,
    PredictionsMode,
    extra_modes,
    load_modes,
    unknown_prediction_ids,
)
from .run.options import Options
from .run.record import check_options, read_run
from .run.swebench import NGINX, SWEBENCH, SweTask, adapt_mode
from .strict import stage as strict
from .suite import stage as suite
from .suite.stage import TestsTree
from .swebench import sandbox_view as swe_sandbox_view
from .swebench import services as swe_services_module
from .swebench import stage as swebench
from .workspace import stage as workspace

STAGES = (
    repositories,
    workspace,
    agent,
    patch,
    build,
    prove,
    strict,
    grade,
    results,
    report,
    report_site,
    validate,
    statements,
    doctor,
)
# The generators of the commands that a plain `doit list` shows, beside the modes' group tasks
# and `default`: report and power, <bench>:validate, <bench>:lint, doctor (in STAGES' order).
LISTED = (report.gen_tasks, validate.command_tasks, statements.gen_tasks, doctor.gen_tasks)
# A SWE-bench benchmark: the same agent stage; no build, prove, strict, grade or validation here
# (the official harness grades its predictions: swebench/).
STAGES_OF_KIND: dict[str, tuple] = {
    SWEBENCH: (repositories, workspace, agent, patch, swebench, report, report_site, doctor)
}


@dataclass
class Context:
    layout: Layout
    benchmark: Benchmark
    tasks: list[AnyTask]  # the command's tasks of the benchmark (instances=, limit=)
    modes: dict[str, Mode]
    options: Options  # the command line's variables (options.py)
    selection: Selection | None = None  # instances= and limit= as given
    group: tuple[str, ...] | None = None  # the modes `doit run <bench>` scores; None: every mode
    benchmark_names: tuple[str, ...] = ()  # every benchmark in tasks/
    # `doit run`: {task name: task_dep} of the tasks left out of doit's list as settled, and of
    # those whose task_dep lost them (doitext/pruning.py).
    shadow: dict[str, list[str]] | None = None
    # The settings of the site's last complete rendering, taken as a command that may change
    # results starts (cli.py, report/site.py's take_completion); progress.py reads them.
    site_unchanged: str | None = None
    # What the command works out once (unit_agent_inputs, tests_tree, _build_plans).
    _agent_inputs: dict[tuple[str, str], tuple[list[str], str | None]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _mode_inputs: dict[str, Any] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _tests_trees: dict[str, TestsTree] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _swe_envs: dict[str, SweEnvView | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _swe_pending: dict[str, tuple[str, dict[str, str]] | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _plans: tuple[list[BenchmarkTask], BasePlan] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def agent_finished(
        self, layout: Layout, mode: AgentMode, task: AnyTask, agent_task_name: str
    ) -> bool:
        """The workspace stage asks whether an agent run is finished (its workspace is then not
        needed); the agent stage answers, and the earlier stage does not import the later one."""
        if prompts.missing_prompt(layout.templates_dir, mode, task):
            return False  # it cannot run: the preflight says why
        return agent.agent_finished(
            layout, mode, task, agent_task_name, self.unit_agent_inputs(mode, task)[1]
        )

    def unit_agent_inputs(self, mode: AgentMode, task: AnyTask) -> tuple[list[str], str | None]:
        """(the rendered prompts, agent.agent_inputs) of an agent unit, made once per command:
        the workspace's and the agent's tasks both ask, and the mode's part is the same for
        every task of the mode."""
        memo, of_mode = self._agent_inputs, self._mode_inputs
        key = (mode.name, task.instance_id)
        if key not in memo:
            if mode.name not in of_mode:
                of_mode[mode.name] = agent.mode_inputs(self.layout, mode)
            environment = None
            if sandbox.settings(mode):
                pending = self.swe_env_pending(task)
                environment = pending[1] if pending else swe_view.prompt_values(self.swe_env(task))
            texts = prompts.rendered_prompts(self.layout.templates_dir, mode, task, environment)
            tree = self.tests_tree(self.layout, task) if mode.tests else None
            memo[key] = (
                texts,
                agent.agent_inputs(self.layout, mode, task, texts, of_mode[mode.name], tree),
            )
        return memo[key]

    def swe_env(self, task: AnyTask) -> SweEnvView | None:
        """The built environment of a SWE-bench task as the agent's sandbox shows it
        (swebench/sandbox_view.py), or None (an nginx task, none built); asked once per
        command, when the tasks are made: the prompt says what the sandbox then shows."""
        if not isinstance(task, SweTask):
            return None
        memo = self._swe_envs
        if task.instance_id not in memo:
            memo[task.instance_id] = swe_sandbox_view.view_of(task, self.layout)
        return memo[task.instance_id]

    def swe_env_pending(self, task: AnyTask) -> tuple[str, dict[str, str]] | None:
        """(the doit task that builds it, what the prompt says of it) for a SWE-bench task whose
        environment this run builds (swe_local=1) and has not built yet: an isolated agent of
        the task waits for that task and is then shown the environment its prompt already
        describes (swe_env_at_run). None otherwise: the environment is built (swe_env), cannot
        be built here, or the run builds none."""
        if not isinstance(task, SweTask) or self.swe_env(task) is not None:
            return None
        memo = self._swe_pending
        if task.instance_id not in memo:
            values = None
            if swebench.local_enabled(self):
                values = swe_sandbox_view.pending_prompt_values(task, self.layout)
            memo[task.instance_id] = (
                (swe_sandbox_view.env_task_name(task), values) if values else None
            )
        return memo[task.instance_id]

    @staticmethod
    def swe_env_at_run(task: SweTask, layout: Layout) -> SweEnvView | str:
        """What the agent stage asks when an agent whose environment was pending starts."""
        return swe_sandbox_view.view_or_reason(task, layout)

    # The stand-ins for the internet a SWE-bench task's tests reach (psf/requests' httpbin.org,
    # a host that must time out), made for an attempt and run inside its sandbox, as for a local
    # verdict (swebench/services.py); the agent stage gets the rule here.
    @staticmethod
    def swe_services(
        layout: Layout, task: SweTask, directory: Path, workspace: Path, log: Path
    ) -> AbstractContextManager[StandinsView | None]:
        return swe_services_module.sandbox_standins(layout, task, directory, workspace, log)

    def tests_tree(self, layout: Layout, task: AnyTask) -> TestsTree | None:
        """suite.as_of of a task, found for every task of the command at once (two git calls
        per repository); None while the clones are missing, asked again then."""
        memo = self._tests_trees
        if task.instance_id not in memo:
            # Without this task's clones no task of theirs has a tree: asking git for all of
            # them on every unit made loading 196 tasks x 7 modes quadratic (7 s before a clone).
            if not all(
                (layout.bare_repo(r) / "HEAD").exists() for r in (task.repo, task.test_repo)
            ):
                return None
            found = suite.trees_as_of(layout, self.nginx_tasks())
            memo.update((iid, tree) for iid, tree in found.items() if tree)
        return memo.get(task.instance_id)

    # With executor=ray an agent runs on a node, which sends back its workspace's diff as the
    # patch stage takes it; the agent stage gets the rule here, for the same reason.
    @staticmethod
    def workspace_diff(
        bare: str | Path, workspace: str | Path, base: str, kind: str = NGINX
    ) -> tuple[bytes, list[SkippedFile], list[LeftOut]]:
        return patch.workspace_diff(bare, workspace, base, kind)

    def nginx_tasks(self) -> list[BenchmarkTask]:
        """The command's tasks, of an nginx benchmark: the stages after the patch, and a mode's
        nginx-tests tree, have no SWE-bench task (STAGES_OF_KIND, run/swebench.adapt_mode)."""
        return [t for t in self.tasks if isinstance(t, BenchmarkTask)]

    def mode_list(self) -> list[Mode]:
        return [self.modes[m] for m in sorted(self.modes)]

    def group_mode_list(self) -> list[Mode]:
        """The modes `doit run <bench>` (and <bench>:report) runs."""
        return [m for m in self.mode_list() if self.in_group(m.name)]

    def in_group(self, name: str) -> bool:
        return self.group is None or name in self.group

    def mode_tasks(self, mode: Mode) -> list[AnyTask]:
        """The selected tasks the mode scores (a predictions mode: those with a row)."""
        return [t for t in self.tasks if mode.covers(t.instance_id)]

    def units(self) -> Iterator[tuple[Benchmark, Mode, AnyTask]]:
        for mode in self.mode_list():
            for task in self.mode_tasks(mode):
                yield self.benchmark, mode, task

    def nginx_units(self) -> Iterator[tuple[Benchmark, Mode, BenchmarkTask]]:
        """units() of an nginx benchmark, for the stages after the patch (nginx_tasks)."""
        for bench, mode, task in self.units():
            if isinstance(task, BenchmarkTask):
                yield bench, mode, task

    def agent_units(self) -> Iterator[tuple[Benchmark, AgentMode, AnyTask]]:
        return ((b, m, t) for b, m, t in self.units() if isinstance(m, AgentMode))

    def build_order(self) -> list[BenchmarkTask]:
        """ctx.tasks in the order their builds should start (buildplan.interleave_by_build_group);
        stages that fan out over tasks list their dependencies in this order, which is the
        order doit starts them."""
        return self._build_plans()[0]

    def base_build_plan(self) -> BasePlan:
        """buildplan.base_build_plan of ctx.tasks."""
        return self._build_plans()[1]

    def _build_plans(self) -> tuple[list[BenchmarkTask], BasePlan]:
        """Both, made once per doit invocation (or read from the cache: buildplan.build_plans)."""
        if self._plans is None:
            self._plans = buildplan.build_plans(
                self.layout, self.nginx_tasks(), keep=not self.options.dry_run
            )
        return self._plans

    def mode_groups(self) -> Iterator[tuple[Benchmark, Mode, list[AnyTask]]]:
        for mode in self.mode_list():
            yield self.benchmark, mode, self.mode_tasks(mode)

    def start_order(self, bench: Benchmark, mode: Mode, ids: Collection[str]) -> list[str]:
        """The results task's dependencies, in the order doit should start them (the policy is
        build/plan.py's start_order)."""
        units = [unit_name(bench, mode, t) for t in self.build_order() if t.instance_id in ids]
        return buildplan.start_order(
            tests_task_names(self.build_order()), units, self.base_build_plan(), ids
        )


def named_benchmark(
    benchmarks: Mapping[str, Benchmark], argv: Sequence[str], requested: str | None = None
) -> Benchmark | None:
    """The benchmark the command line names (``bench=NAME`` or ``doit run NAME:...``), or None."""
    if requested:
        return pick_benchmark(benchmarks, argv, requested)
    for arg in argv:
        head = arg.split(":", 1)[0]
        if head in benchmarks:
            return benchmarks[head]
    return None


def pick_benchmark(
    benchmarks: Mapping[str, Benchmark],
    argv: Sequence[str],
    requested: str | None = None,
    run_benchmark: str | None = None,
) -> Benchmark:
    """The benchmark of this command: the one named, else the run's (run.json), else nginx, else
    the only one."""
    if (
        run_benchmark is not None
        and run_benchmark in benchmarks
        and not requested
        and not named_benchmark(benchmarks, argv)
    ):
        return benchmarks[run_benchmark]
    if requested:
        if requested not in benchmarks:
            raise UserError(
                f"bench={requested}: no benchmark '{requested}' in tasks/"
                f"{did_you_mean(requested, benchmarks)} "
                f"(known: {', '.join(sorted(benchmarks))})"
            )
        return benchmarks[requested]
    for arg in argv:
        head = arg.split(":", 1)[0]
        if head in benchmarks:
            return benchmarks[head]
    if "nginx" in benchmarks:
        return benchmarks["nginx"]
    if len(benchmarks) == 1:
        return next(iter(benchmarks.values()))
    raise UserError(
        "no benchmark file in tasks/"
        if not benchmarks
        else f"several benchmarks ({', '.join(sorted(benchmarks))}): name one, e.g. "
        f"doit run {sorted(benchmarks)[0]}"
    )


GROUP_SUBTASKS = ("validate", "lint", "report", "grade")  # subtasks of a group, not modes


def check_requested_modes(
    bench: str,
    modes: Collection[str],
    argv: Sequence[str],
    kind: str | None = None,
    pro: bool = False,
) -> None:
    """`doit run nginx:bogus` names a mode that does not exist: say which ones do. A SWE-bench
    benchmark's `:grade` where this machine cannot run the official harness: say why (SWE-bench
    Pro's `pro`: never here, swebench/pro.py)."""
    for arg in argv:
        head, _, tail = arg.partition(":")
        if head == bench and tail == swebench.GRADE_SUBTASK and pro:
            raise UserError(
                f"no task '{arg}': SWE-bench Pro is graded by swe_bench_pro_eval.py in a "
                f"checkout of scaleapi/SWE-bench_Pro-os; run the command the results print "
                f"(and report.md repeats) there"
            )
        if head == bench and tail == swebench.GRADE_SUBTASK and kind == SWEBENCH:
            problem = swebench.grading_problem()
            if problem:
                raise UserError(
                    f"no task '{arg}': this machine cannot run the official SWE-bench "
                    f"harness ({problem}); run the command the results print (and "
                    f"report.md repeats) where Docker is, or see `doit run doctor`"
                )
        if head == bench and tail and tail not in modes and tail not in GROUP_SUBTASKS:
            known = f"known modes: {', '.join(sorted(modes))}"
            close = did_you_mean(
                tail, list(modes) + list(GROUP_SUBTASKS), show=lambda c: f"'{bench}:{c}'"
            )
            raise UserError(
                f"no task '{arg}'{close} (unknown mode '{tail}'; {known})"
                if close
                else f"no task '{arg}': unknown mode '{tail}'; {known}"
            )


def load_context(
    root: str | Path | None = None,
    argv: Sequence[str] | None = None,
    options: Options | None = None,
) -> Context:
    """The Context of this command; `options` defaults to doit's command-line variables."""
    argv = sys.argv[1:] if argv is None else argv
    options = Options.parse(command_line_variables(argv), argv) if options is None else options
    layout = Layout.from_env(root=root, run=options.run)
    benchmarks = load_benchmarks(layout.tasks_dir)
    record: Mapping[str, Any] = read_run(layout) or {}
    bench = pick_benchmark(benchmarks, argv, options.bench, record.get("benchmark"))
    options.check_instances(bench)
    instances = list(options.instances)
    tasks = bench.select(instances or None, options.limit)
    modes = load_modes(layout.modes_file, layout.templates_dir)
    modes.update(extra_modes(options.predictions))
    if bench.kind == SWEBENCH:
        modes = {
            n: adapt_mode(m, layout.templates_dir, layout.modes_file) for n, m in modes.items()
        }
    check_requested_modes(
        bench.name, modes, argv, bench.kind, pro=swebench_pro.is_pro(bench.dataset)
    )
    options.check_modes(modes)
    check_options(layout, options, record, modes)
    wanted = list(options.modes)
    if wanted:
        modes = {k: v for k, v in modes.items() if k in wanted or k == "file"}
    selection: Selection = {"instances": instances or None, "limit": options.limit}
    if options.predictions:
        tasks = predictions_tasks(bench, tasks, modes["file"], options)
        selection["predictions"] = options.predictions
    group = predictions_group(bench, modes, wanted)
    return Context(
        layout=layout,
        benchmark=bench,
        tasks=tasks,
        modes=modes,
        group=group,
        selection=selection,
        options=options,
        benchmark_names=tuple(sorted(benchmarks)),
    )


def predictions_tasks(
    bench: Benchmark, tasks: list[AnyTask], mode: Mode, options: Options
) -> list[AnyTask]:
    """With ``predictions=FILE`` the command's tasks are the selected tasks the file has a row
    for, as in SWE-bench: no clone, test tree or base build is prepared for the others, and the
    run's denominator is these. A file with a row for none of them is an error naming it
    (scoring nothing and exiting 0 looked like a result)."""
    ids = (mode.instances if isinstance(mode, PredictionsMode) else None) or ()
    shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
    rows = f"its {len(ids)} row{'s' if len(ids) != 1 else ''}: {shown}" if ids else "no rows"
    if not any(mode.covers(t.instance_id) for t in bench.tasks):
        raise UserError(
            f"no row for a task of benchmark {bench.name} ({rows}): nothing to score",
            file=options.predictions,
        )
    chosen = [t for t in tasks if mode.covers(t.instance_id)]
    if not chosen:
        raise UserError(
            f"no row for a task that instances=/limit= select ({rows}): nothing to score",
            file=options.predictions,
        )
    return chosen


def predictions_group(
    bench: Benchmark, modes: Mapping[str, Mode], wanted: Sequence[str]
) -> tuple[str, ...] | None:
    """With ``predictions=FILE`` (mode ``file``): the modes `doit run <bench>` scores, the file
    and those named in modes=, and one warning line for the file's ids that are not tasks of
    the benchmark. None (every mode) without it."""
    if "file" not in modes:
        return None
    warning = unknown_prediction_ids(
        modes["file"], bench.name, [t.instance_id for t in bench.tasks]
    )
    if warning:
        sys.stderr.write(f"nginx-eval: warning: {warning}\n")
        sys.stderr.flush()
    return ("file",) + tuple(m for m in wanted if m != "file")


def group_tasks(ctx: Context, extra_group_deps: Sequence[str] = ()) -> Iterator[TaskDict]:
    """`<bench>:<mode>` for each mode, and `<bench>` for those of the group plus the report."""
    bench = ctx.benchmark.name
    subtasks = []
    for mode in ctx.mode_list():
        if ctx.in_group(mode.name):
            subtasks.append(task_name(bench, mode.name))
        yield {
            "basename": bench,
            "name": mode.name,
            "doc": f"score mode {mode.name} ({mode.description or mode.kind}) on {bench}",
            "actions": None,
            "task_dep": [results_task_name(bench, mode.name)],
        }
    # Yielded last, it replaces the group doit built from the subtasks, so `doit run nginx` runs
    # exactly these (and not, say, nginx:validate).
    yield {
        "basename": bench,
        "name": None,
        "doc": f"every mode on {bench}, and the report",
        "task_dep": subtasks + list(extra_group_deps),
    }


# What `doit list --all` says of each stage's group task (`doit run repos` runs the group).
STAGE_DOCS = {
    "repos": "bare clones of the pinned repositories",
    "tests": "nginx-tests trees, one per pinned test commit",
    "workspace": "fresh repositories at the base commit, one per agent mode and task",
    "agent": "agent runs, one per agent mode and task",
    "patch": "the patch of each mode and task",
    "base": "base builds, shared by every mode and run",
    "build": "objs/nginx for the patch of each mode and task",
    "prove": "the task's test files against each build",
    "grade": "the verdict of each mode on each task",
    "results": "results.jsonl and predictions.jsonl of each mode",
    "validate": "task validation: base and fix builds, tests run repeatedly",
    "validation": "validation.json and validation.md of the run",
    "site": "the run's static site, a page per mode and task (runs nothing else)",
}
# Groups that stay in `doit list`: what users run, though made of subtasks.
LISTED_GROUPS = ("report",)
# Private (doit list -p): the parent of the stage groups, which keeps them out of `doit list`.
STAGES_GROUP = "_stages"
# Subtasks of `<bench>` that stay out of `doit list`: `<bench>:report` is `<bench>` again.
UNLISTED_BENCH_SUBTASKS = ("report",)


def handed_over(dicts: Iterable[TaskDict]) -> Iterator[TaskDict]:
    """The task dicts `dicts` (a list, or any iterable) one by one, first to last; a list forgets
    each as it is handed over, so that a dict does not outlive the Task doit makes of it (all the
    dicts and all the Tasks at once would be the doit process's peak memory in a large run)."""
    if not isinstance(dicts, list):
        yield from dicts
        return
    dicts.reverse()
    while dicts:
        yield dicts.pop()


def arrange_listing(tasks: Iterable[Task], bench: str) -> Iterator[Task]:
    """doit's Tasks for `doit list`, which shows only tasks that are no subtask, and a group
    task (one per basename) with its generator's docstring: the commands a user runs first
    (`<bench>:<mode>`, `<bench>:validate` made top-level tasks, `<bench>`, `report`, `doctor`),
    and not the stage groups (`agent`, `build`, ...), which become subtasks of the private
    STAGES_GROUP; `doit list --all` shows every task. Names, dependencies and actions stay."""
    groups = []
    for t in tasks:
        tail = t.name.partition(":")[2]
        if t.subtask_of == bench and tail not in UNLISTED_BENCH_SUBTASKS:
            t.subtask_of = None
        elif t.has_subtask and t.subtask_of is None and t.name not in (bench,) + LISTED_GROUPS:
            t.subtask_of = STAGES_GROUP
            t.doc = STAGE_DOCS.get(t.name, t.doc)
            groups.append(t.name)
        yield t
    yield Task(
        STAGES_GROUP,
        None,
        task_dep=groups,
        has_subtask=True,
        doc="every stage group (listed by `doit list --all`)",
    )


# What a bare `doit` (or `doit run` without a task) runs: nothing that costs money.
DEFAULT_TASK = "default"
DEFAULT_MODES = ("gold", "none", "file")  # file: only with predictions=


def default_selection(ctx: Context) -> list[str]:
    """The modes' tasks the default task runs: gold and none (and a predictions= file), never
    an agent mode."""
    return [
        f"{ctx.benchmark.name}:{m}"
        for m in DEFAULT_MODES
        if m in ctx.modes and not isinstance(ctx.modes[m], AgentMode)
    ]


def default_task(ctx: Context) -> TaskDict:
    """`default`: the default modes of the benchmark, then the report (report/stage.py's
    `report:markdown` task, after them; the site follows at the end of the run, progress.py)."""
    rendering = next(
        t
        for t in report.gen_tasks(ctx)
        if t["basename"] == "report" and t.get("name") == "markdown"
    )
    rendering = {k: v for k, v in rendering.items() if k != "name"}
    return dict(
        rendering,
        basename=DEFAULT_TASK,
        task_dep=default_selection(ctx),
        actions=list(rendering["actions"]),
        uptodate=list(rendering.get("uptodate", ())),
        doc=f"what a bare `doit` runs: {', '.join(default_selection(ctx))}, then the "
        "report (never an agent)",
    )


def expand_default(ctx: Context, targets: Sequence[str]) -> list[str]:
    """The command's targets, with doit's default (no target, or `default`) spelled out."""
    out = []
    for t in targets or [DEFAULT_TASK]:
        out += default_selection(ctx) + ["report"] if t == DEFAULT_TASK else [t]
    return out


# What `doit run` may run on a candidates file (benchmark.py): its validation, what validation
# needs, and the doctor (what the candidates' tests need of this machine).
CANDIDATE_STAGES = (VALIDATE, VALIDATION, REPOS, TESTS, BASE, "doctor")


def check_candidates(ctx: Context, targets: Iterable[str]) -> None:
    """A candidates benchmark is validated and nothing else: any other target is one line."""
    for target in targets:
        if (
            target != f"{ctx.benchmark.name}:validate"
            and target.split(":", 1)[0] not in CANDIDATE_STAGES
        ):
            ctx.benchmark.refuse_candidates(target)


def check_requested_tasks(ctx: Context, tasks: Iterable[Task], selectors: Iterable[str]) -> None:
    """Every name the command line gives doit is a task, a group, a target or a pattern (`*`):
    otherwise one line naming the closest task, instead of doit's error or traceback."""
    names = {t.name for t in tasks}
    targets = {target for t in tasks for target in t.targets}
    candidates = set(names)
    for b in ctx.benchmark_names:
        candidates |= {b} | {task_name(b, m) for m in list(ctx.modes) + list(GROUP_SUBTASKS)}
    for sel in selectors:
        if "*" in sel or sel in names or sel in targets:
            continue
        if os.path.abspath(sel) in targets:
            close = f"; did you mean '{os.path.abspath(sel)}'?"
        else:
            close = did_you_mean(sel, candidates)
        raise UserError(f"no task '{sel}'{close} (`doit list` shows the tasks)")


# Stages whose units `doit forget` cannot redo, and what does instead. Every other task with an
# action is redone by the next `doit run` that reaches it (redo_forgotten).
NOT_FORGOTTEN = {
    WORKSPACE: "a workspace is made for its agent run and removed once the patch is taken; "
    "`doit forget agent:...` runs the agent again in a new one",
    TESTS: "an nginx-tests tree is shared by every run and checked before each prove (a "
    "damaged one is made again)",
    BASE: "a base build is shared by every mode and run; `doit clean base:...` removes it "
    "(unless another run's results use it) and the next run builds it again",
}


def redo_forgotten(dicts: Iterable[TaskDict], layout: Layout) -> Iterator[TaskDict]:
    """`dicts`, with each task that `doit forget` asked for (and no run has redone yet) out of
    date, and an action after its own that answers the request. Freshness is each stage's
    stamp (stamps.py), which forgetting doit's row does not touch; this is what makes
    `doit forget prove:...` redo the prove. The markers are read once: no forget can happen
    while the run holds its lock."""
    asked = forgotten_tasks(layout)
    for d in dicts:
        name = full_name(d) if asked and "basename" in d else None
        if name in asked and d.get("actions") and d["basename"] not in NOT_FORGOTTEN:
            d = dict(
                d,
                uptodate=[*(d.get("uptodate") or ()), False],
                actions=[*d["actions"], (answer_forgotten, [layout, name])],
            )
        yield d


FORGET_ALL = ("-a", "--all")
FORGET_DEPENDENCIES = ("-s", "--follow-sub")


def check_forget(tasks: list[Task], argv: list[str]) -> None:
    """`doit forget` that would say "forgetting" and redo nothing is refused with one line:
    --all (every task, agents included), a stage whose units cannot be redone
    (NOT_FORGOTTEN), and a task that does no work of its own, without -s."""
    if any(a in FORGET_ALL for a in argv):
        raise UserError(
            "doit forget --all would run every agent again (they cost money): "
            "name what to redo, e.g. `doit forget prove` (every prove of the run's "
            "modes) or `doit forget grade:nginx/raw/ID`"
        )
    by_name = {t.name: t for t in tasks}
    follow = any(a in FORGET_DEPENDENCIES for a in argv)
    for name in command_targets(argv):
        task = by_name.get(name)
        if task is None:
            continue  # doit's own error (check_requested_tasks said it first)
        stage = name.split(":", 1)[0]
        if stage in NOT_FORGOTTEN:
            raise UserError(f"cannot forget {name}: {NOT_FORGOTTEN[stage]}")
        subtasks = [by_name[s] for s in task.task_dep if s in by_name] if task.has_subtask else []
        if not follow and not task.actions and not any(t.actions for t in subtasks):
            raise UserError(
                f"{name} does no work of its own, so forgetting it redoes nothing: "
                f"forget its units (`doit forget prove:.../ID`), a stage (`doit "
                f"forget prove`), or add -s to forget everything it depends on "
                f"(agents included: they run again)"
            )


def stage_dicts(ctx: Context) -> Iterator[TaskDict]:
    """The task dict of every task of the pipeline, stage by stage (those of its benchmark's
    kind: STAGES_OF_KIND)."""
    for stage in STAGES_OF_KIND.get(ctx.benchmark.kind, STAGES):
        yield from stage.gen_tasks(ctx)
    yield from group_tasks(ctx, extra_group_deps=(f"{ctx.benchmark.name}:report",))
    yield default_task(ctx)


def doit_tasks(root: str | Path | None = None) -> dict[str, Any]:
    """The dict of ``task_*`` generators and DOIT_CONFIG for dodo.py's globals()."""
    ctx = load_context(root)

    def listed_dicts() -> Iterator[TaskDict]:
        """What a plain `doit list` prints, and nothing else: the unit stages' thousands of
        tasks (a listing of the shipped benchmark spent most of its second making them) are
        never made. The same dicts as stage_dicts yields for those names."""
        bench = ctx.benchmark.name
        # A SWE-bench benchmark has no validation or lint to list.
        listed = (
            LISTED
            if ctx.benchmark.kind not in STAGES_OF_KIND
            else (report.gen_tasks, doctor.gen_tasks)
        )
        for generator in listed:
            yield from (
                d for d in generator(ctx) if d.get("name") is None or d["basename"] == bench
            )
        yield from group_tasks(ctx, extra_group_deps=(f"{bench}:report",))
        yield default_task(ctx)

    made: list[Task] = []  # doit's Tasks, made once: cli.load_dodo checks the names given

    def task_stages() -> Iterator[Task]:
        """every task of the pipeline (nginx_eval/pipeline.py)"""
        if not made:
            argv = sys.argv[1:]
            dicts: Iterable[TaskDict] = (
                listed_dicts() if lists_commands_only(argv) else stage_dicts(ctx)
            )
            if doit_command(argv) == "run":
                dicts, ctx.shadow = drop_settled(
                    redo_forgotten(dicts, ctx.layout), argv, [DEFAULT_TASK]
                )
            made.extend(
                slim(
                    arrange_listing(
                        generate_tasks("task_stages", handed_over(dicts)), ctx.benchmark.name
                    )
                )
            )
            # The Tasks live as long as the process: out of the collector's sight, they no longer
            # put off its full collections, which let the cyclic garbage of a long run pile up.
            gc.freeze()
        yield from made

    config = {
        "dep_file": str(ctx.layout.doit_db),
        "backend": "nginx_eval",
        "default_tasks": [DEFAULT_TASK],
        "verbosity": 1,
    }
    if not ctx.options.dry_run:
        ctx.layout.doit_db.parent.mkdir(parents=True, exist_ok=True)
    return {"task_stages": task_stages, "DOIT_CONFIG": config, "NGINX_EVAL_CONTEXT": ctx}
