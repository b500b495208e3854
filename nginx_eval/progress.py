"""A `doit run` you can watch: a progress line per finished unit, then a summary and the report.

A *unit* is one task in one mode; it is finished when its ``grade:<bench>/<mode>/<id>`` task is
done (run, or up to date), or failed when any of its stages fails. A SWE-bench unit, graded by
the official harness elsewhere, is finished with its ``patch:`` task: its line says "patch
taken" (or why the agent did not complete) and counts no resolved units. Each unit that finishes
in this command prints one line on stdout (docs/running.md#watching-a-run)::

    [37/104] gold 25 resolved · 0 errors · ETA 3 m · nginx__nginx-f35475c083d4 resolved

    [finished/units of the command] mode, its resolved units and errors so far (RUN_ERRORS, or
    a failed stage), the estimated time left (finished units per second of this command so
    far), the unit and its outcome

Units already done count in the numbers but print no line, and nothing is rewritten in place: a
CI log gets one line per unit, a terminal the same; so does each base build the command makes,
when the first starts and as each is done (docs/running.md#watching-a-run).

At the end of a `doit run` that ran any mode (not after an interrupt), the modes it ran get a
summary table on stdout; the run's report is rendered if what it is made from changed
(report.write_report), then the pages of the run's site that are not up to date
(report/site.write_site). The report has every mode of the run, as `doit run report` renders it;
the summary shows the modes of this command. ``watching(Reporter, ctx, command)`` adds this to
doit's reporter (cli.reporter_for).
"""

import functools
import sys
import time
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from .core import jsonio, procs
from .core.layout import Layout
from .core.outcomes import RESOLVED, RUN_ERRORS, UNRESOLVED, outcome
from .core.tasknames import BASE, GRADE, PATCH, unit_of
from .doitext.invocation import reachable
from .report import site as report_site
from .report import stage as report
from .report.apart import run_apart
from .run.swebench import SWEBENCH

if TYPE_CHECKING:
    from .run.context import StageContext

# What a progress line counts as errors: the run's (RUN_ERRORS), and a unit whose task failed.
ERRORS = RUN_ERRORS + ("failed",)
# A unit doit never saw: all its tasks were up to date before it started (pruning.py); its
# outcome is read from its files when a line needs it.
SETTLED = object()


def report_tasks(ctx: "StageContext") -> tuple[str, str]:
    """The names of the tasks that render the run's report."""
    return f"{ctx.benchmark.name}:report", "report:markdown"


def duration(seconds: float) -> str:
    """``3 s``, ``40 s``, ``3 m``, ``1 h 5 m``: `seconds`, as a progress line shows it."""
    whole = max(0, int(round(seconds)))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{round(whole / 60)} m"
    return f"{whole // 3600} h {round(whole % 3600 / 60)} m"


class Progress:
    def __init__(self, ctx: "StageContext", out: TextIO) -> None:
        self.ctx, self.out = ctx, out
        # (mode, iid) -> outcome once finished, None before (SETTLED: read when needed)
        self.units: dict[tuple[str, str], Any] = {}
        self.order: list[str] = []  # modes, in the order of the configuration
        self.started = time.monotonic()  # set again as doit starts (start)
        self.bases = 0  # base builds handed to doit (settled ones are not: pruning.py)
        self.bases_done = 0  # of those, built or found up to date
        self.base_started: dict[
            str, float
        ] = {}  # base task name -> time.monotonic() when it started
        self.ran = 0  # units finished by this command (not already done)
        self.executed = False  # whether doit executed any task (it may have written results)
        self.report_was_current = False  # doit found a report task up to date
        self.report_asked = False  # the command names `report` (or report:markdown)
        self.report_ran = False  # a report task ran (rendered, or failed)
        # A unit's last stage here: grade, or for a SWE-bench unit (graded by the official
        # harness elsewhere) the patch.
        self.swebench = getattr(getattr(ctx, "benchmark", None), "kind", None) == SWEBENCH
        self.last = PATCH if self.swebench else GRADE

    def start(self, tasks: Mapping[str, Any], selected: Collection[str]) -> None:
        """The units the command will finish: the grade (or patch) tasks reachable from
        `selected`, those left out of doit's list as settled (pruning.py) too: they are
        finished already."""
        shadow = getattr(self.ctx, "shadow", None) or {}
        for name in reachable(tasks, selected, shadow):
            if name.startswith(f"{self.last}:"):
                unit = unit_of(name)
                if unit:
                    self.units[unit] = SETTLED if name not in tasks else None
        self.bases = sum(
            1 for name in reachable(tasks, selected, shadow) if name.startswith(f"{BASE}:")
        )
        modes = {m for m, _ in self.units}
        self.order = [m for m in self.ctx.modes if m in modes] + sorted(modes - set(self.ctx.modes))
        self.report_asked = any(n.split(":", 1)[0] == "report" for n in selected)
        self.started = time.monotonic()

    def base_starts(self, name: str) -> None:
        """A base build starts: the first one says what the units wait for."""
        if not self.base_started:
            many = "s" if self.bases != 1 else ""
            self.write(
                f"nginx-eval: building up to {self.bases} base{many} first; each unit starts "
                "once its base is built"
            )
        self.base_started[name] = time.monotonic()

    def base_finished(self, name: str, built: bool = True) -> None:
        """A base build is done (built, or found up to date: counted, not printed)."""
        self.bases_done += 1
        if built and name in self.base_started:
            took = duration(time.monotonic() - self.base_started[name])
            self.write(
                f"[base {self.bases_done}/{self.bases}] {name.split(':', 1)[1].rsplit('-', 1)[0]}"
                f" built in {took}"
            )

    def outcome(self, mode: str, iid: str) -> str:
        """The unit's outcome, from its result files (as results.jsonl will say it)."""
        layout = self.ctx.layout
        if self.swebench:
            return self.patch_outcome(mode, iid)
        grade = jsonio.read_json(layout.grade_json(mode, iid))
        if not grade:
            return "failed"
        agent = jsonio.read_json(layout.agent_json(mode, iid)) or {}
        return outcome(
            {
                "resolved": grade.get("resolved"),
                "status": grade.get("status"),
                "agent_status": agent.get("status"),
                "contaminated": agent.get("contaminated"),
            }
        )

    def patch_outcome(self, mode: str, iid: str) -> str:
        """A SWE-bench unit's word: its agent's outcome when it did not complete, else that
        its patch is taken (the official harness grades it)."""
        layout = self.ctx.layout
        if not layout.patch_json(mode, iid).exists():
            return "failed"
        agent = jsonio.read_json(layout.agent_json(mode, iid)) or {}
        said = outcome(
            {
                "resolved": False,
                "agent_status": agent.get("status"),
                "contaminated": agent.get("contaminated"),
            }
        )
        return "patch_taken" if said == UNRESOLVED else said

    def _outcome_or_unknown(self, unit: tuple[str, str]) -> str:
        try:
            return self.outcome(*unit)
        except Exception:  # a damaged file: the report will say; the line must not stop doit
            return "unknown"

    def finished(self, name: str, failed: bool = False, already: bool = False) -> None:
        unit = unit_of(name)
        if unit not in self.units or self.units[unit] is not None:
            return
        if not failed and not name.startswith(f"{self.last}:"):
            return
        self.units[unit] = "failed" if failed else self._outcome_or_unknown(unit)
        if already:
            return
        self.ran += 1
        self.line(unit)

    def line(self, unit: tuple[str, str]) -> None:
        mode, iid = unit
        for other, value in self.units.items():
            if value is SETTLED:  # read once a line needs the counts
                self.units[other] = self._outcome_or_unknown(other)
        done = sum(1 for v in self.units.values() if v is not None)
        total = len(self.units)
        mine = [v for (m, _), v in self.units.items() if m == mode and v is not None]
        resolved = sum(1 for v in mine if v == RESOLVED)
        errors = sum(1 for v in mine if v in ERRORS)
        elapsed = time.monotonic() - self.started
        left = total - done
        eta = "done" if not left else f"ETA {duration(elapsed / self.ran * left)}"
        outcome = self.units[unit].replace("_", " ")
        graded = "" if self.swebench else f" {resolved} resolved ·"
        self.write(
            f"[{done}/{total}] {mode}{graded} {errors} "
            f"error{'s' if errors != 1 else ''} · {eta} · {iid} {outcome}"
        )

    def write(self, text: str) -> None:
        try:
            self.out.write(text + "\n")
            self.out.flush()
        except (OSError, ValueError):
            pass

    def finish(self) -> None:
        """The summary of the modes this command ran, and the report if it is not up to date."""
        ctx = self.ctx
        modes = [m for m in self.order if ctx.layout.results_jsonl(m).exists()]
        if not modes:
            self.say_report_current()
            return
        options = ctx.options
        if options and not options.report:
            self.write(
                f"report: not rendered (report=0); `doit run report run={ctx.layout.run}` "
                "renders it"
            )
            return
        args: list[Any] = [
            ctx.layout,
            ctx.benchmark,
            ctx.tasks,
            ctx.modes,
            options.baseline if options else None,
            ctx.layout.templates_dir,
            options.cutoff if options else None,
            None,
            options.cross if options else None,
        ]
        unchanged = None if self.executed else getattr(ctx, "site_unchanged", None)
        try:
            # A report doit found up to date, with nothing executed since, still is.
            checked = self.report_was_current and not self.executed
            if not checked and not report.report_is_fresh(*args):
                # In a process of its own: the statistics and charts stay out of doit.
                run_apart(functools.partial(report.write_report, quiet=True), *args)
                unchanged = None
        except Exception as e:  # the run's work is done and kept: say it, do not fail it
            sys.stderr.write(f"nginx-eval: warning: the report was not rendered: {e}\n")
            sys.stderr.flush()
            return
        try:
            site_args = (
                ctx.layout,
                ctx.benchmark,
                ctx.tasks,
                list(ctx.modes),
                ctx.layout.templates_dir,
                args[6],
            )
            if not report_site.site_is_complete(*site_args, unchanged=unchanged):
                # In a process of its own: a thousand pages rendered here would stay in doit's
                # heap for the rest of the run, and the run's peak memory with them.
                run_apart(report_site.write_site, *site_args)
        except Exception as e:  # the same: the report is written, the site is a view of it
            sys.stderr.write(f"nginx-eval: warning: the site was not rendered: {e}\n")
            sys.stderr.flush()
        made = jsonio.read_json(ctx.layout.report_json) or {}
        for line in summary_lines(made, modes, ctx.layout):
            self.write(line)

    def say_report_current(self) -> None:
        """One line for `doit run report` when the report was up to date (doit, which is not
        handed a settled task, would print nothing: pruning.py)."""
        if not self.report_asked or self.report_ran:
            return
        made = jsonio.read_json(self.ctx.layout.report_json) or {}
        tasks, modes = len(made.get("tasks") or []), len(made.get("modes") or {})
        self.write(
            f"report: {self.ctx.layout.report_md} is up to date ({tasks} "
            f"task{'s' if tasks != 1 else ''}, {modes} mode{'s' if modes != 1 else ''})"
        )


def summary_lines(made: Mapping[str, Any], modes: Iterable[str], layout: Layout) -> list[str]:
    """The table printed at the end of a run: the modes of the command, from report.json."""
    total = len(made.get("tasks") or [])
    rows: list[tuple[str, str, str, str, str]] = []
    for m in modes:
        entry = (made.get("modes") or {}).get(m)
        if not entry:
            continue
        counts = entry.get("outcome_counts") or {}
        resolved = entry.get("resolved_instances", 0)
        # The rate's denominator: infra errors and tasks left by the budget are not in it.
        scored = entry.get("scored_instances", total)
        ci = entry.get("resolved_interval")
        # Of no scored task there is no rate: "—", never "0 of 0 0.0%".
        rate = (
            "—"
            if not scored or entry.get("resolved_rate") is None
            else f"{100 * entry['resolved_rate']:.1f}%"
        )
        interval = f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else "—"
        others = [f"{n} {o.replace('_', ' ')}" for o, n in counts.items() if n and o != RESOLVED]
        missing = len(entry.get("incomplete_ids") or [])
        if missing:
            others.append(f"{missing} no result")
        rows.append(
            (m, f"{resolved} of {scored}" if scored else "—", rate, interval, ", ".join(others))
        )
    if not rows:
        return []
    widths = [
        max(len(r[i]) for r in rows + [("mode", "resolved", "rate", "95% CI", "")])
        for i in range(4)
    ]
    head = ("mode", "resolved", "rate", "95% CI", "other outcomes")
    lines = [f"nginx-eval: run {layout.run}, {total} task{'s' if total != 1 else ''}:"]
    for r in [head] + rows:
        lines.append(
            "  "
            + "  ".join(
                [
                    r[0].ljust(widths[0]),
                    r[1].rjust(widths[1]),
                    r[2].rjust(widths[2]),
                    r[3].ljust(widths[3]),
                    r[4],
                ]
            ).rstrip()
        )
    lines.append(f"report: {layout.report_md}")
    return lines


def watching(base: Any, ctx: "StageContext", command: str) -> Any:
    """doit's reporter class `base`, with progress lines and the final summary for `doit run`."""
    if command != "run":
        return base

    class Watching(base):
        def initialize(self, tasks: Mapping[str, Any], selected_tasks: Collection[str]) -> None:
            super().initialize(tasks, selected_tasks)
            self.progress = Progress(ctx, self.outstream)
            self.progress.start(tasks, selected_tasks)

        def execute_task(self, task: Any) -> None:
            super().execute_task(task)
            if task.name.startswith(f"{BASE}:") and task.actions:
                self.progress.base_starts(task.name)
            if task.actions:  # doit "executes" a group task too: it does nothing
                self.progress.executed = True
                if task.name in report_tasks(ctx):
                    self.progress.report_ran = True

        def add_success(self, task: Any) -> None:
            super().add_success(task)
            if task.name.startswith(f"{BASE}:") and task.actions:
                self.progress.base_finished(task.name)
            self.progress.finished(task.name)

        def skip_uptodate(self, task: Any) -> None:
            super().skip_uptodate(task)
            if task.name.startswith(f"{BASE}:"):
                self.progress.base_finished(task.name, built=False)
            if task.name in report_tasks(ctx):
                self.progress.report_was_current = True
            self.progress.finished(task.name, already=True)

        def add_failure(self, task: Any, fail_info: Any) -> None:
            super().add_failure(task, fail_info)
            if not procs.interrupted():
                self.progress.finished(task.name, failed=True)

        def complete_run(self) -> None:
            super().complete_run()
            if not procs.interrupted() and hasattr(self, "progress"):
                self.progress.finish()

    return Watching
