"""Stage 9, site: ``results/<run>/site/``, a static view of the run that opens from the file system
(no server, no network, no JavaScript framework: one small script, site.js, filters and sorts
the index). Rendered with Jinja2 from ``templates/site/``, from result files only, like the report
beside it; what the pages show: docs/viewer.md.

    site/index.html                   the summary and the matrix of tasks by modes (site_index.py)
    site/<mode>/<instance_id>.html    one mode on one task (site_task.py)
    site/site.css, site/site.js       shared by every page, copied from templates/site/

Freshness (stamps.py's protocol, the digest in the page): every page records the digest of what
it is made from in its head, ``<meta name="nginx-eval-inputs" content="<sha256>">``, and is up to
date when that equals stamps.inputs_digest of its config and input files on disk now: for the
index, everything it shows (its data as JSON) and the templates; for a task's page, the task, the
mode, the run's modes, the unit's records, logs, TAP streams, prompts and transcripts, the gold
patch and the templates. So a changed grade re-renders the page of its unit, and the index only
when what the index shows of it changed; editing report.md.j2 re-renders no page.

Tasks: ``site:index`` (after ``report:markdown``, whose report.json it reads) and
``site:<mode>/<instance_id>``; ``site`` runs them all, ``report`` runs report:markdown and then
``site``. A `doit run` of modes renders the stale pages at its end, after the report
(progress.py, write_site), and records the settings of that complete site in ``site/.complete``.
Every command that may change results removes that record as it starts (cli.py); a run that
executed no task and rendered no report, and finds the settings unchanged, only checks that
every page exists.
"""

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from .. import __version__
from ..core import jsonio, stamps
from ..core.console import say
from ..core.errors import failing_on_user_error
from ..core.layout import Layout
from ..core.stamps import TaskDict
from ..run.benchmark import AnyTask, Benchmark
from ..run.record import modes_on_disk, run_tasks
from .markdown import _ci_pct, _fmt, compiled_cache
from .site_index import index_context
from .site_task import page_files, task_context, task_facts

if TYPE_CHECKING:
    from ..run.context import StageContext

# A page of a task: (mode name, task).
Unit = tuple[str, AnyTask]
SITE_TASK = "site"
TEMPLATES = "site"  # templates/site/
INDEX_TEMPLATE = "index.html.j2"
TASK_TEMPLATE = "task.html.j2"
ASSETS = ("site.css", "site.js")
# Tasks fixed on or after this date are "recent" (the benchmark card's split), unless the
# command gives cutoff=.
RECENT_FROM = "2025-01-01"
MARKER = re.compile(rb'<meta name="nginx-eval-inputs" content="([0-9a-f]{64})">')
MARKER_BYTES = 2048  # the marker is in the first lines of the head


# -- templates ------------------------------------------------------------------------------------
def site_templates(templates_dir: str | Path) -> Path:
    return Path(templates_dir) / TEMPLATES


def template_files(templates_dir: str | Path) -> list[Path]:
    """Every file of templates/site/: part of every page's inputs."""
    folder = site_templates(templates_dir)
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []


def _duration(seconds: float | str | None) -> str:
    if seconds is None:
        return "—"
    value = float(seconds)
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(int(round(value)), 60)
    return f"{minutes} min {rest} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


@lru_cache(maxsize=4)
def environment(templates_dir: str, compiled: Path | None = None) -> jinja2.Environment:
    """The Jinja environment of the site's templates (HTML: everything is escaped); compiled:
    the directory of compiled templates (Layout.compiled_templates)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(site_templates(templates_dir))),
        bytecode_cache=compiled_cache(compiled),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _fmt
    env.filters["pct"] = lambda v: "—" if v is None else f"{100 * v:.1f}%"
    env.filters["usd"] = lambda v: "—" if v is None else f"${v:,.2f}"
    env.filters["ci"] = _ci_pct
    env.filters["duration"] = _duration
    env.filters["words"] = lambda s: str(s or "").replace("_", " ")
    env.filters["short"] = lambda s: (s or "")[:12]
    # "2026-11-25T17:56:59.809Z" -> "17:56:59": a transcript's times, within one run
    env.filters["clock"] = lambda s: str(s)[11:19] if len(str(s)) >= 19 else str(s)
    return env


def render(
    templates_dir: str | Path,
    template: str,
    inputs: str,
    context: Mapping[str, Any],
    compiled: Path | None = None,
) -> str:
    return (
        environment(str(templates_dir), compiled)
        .get_template(template)
        .render(inputs=inputs, version=__version__, **context)
    )


def write_page(path: Path, text: str) -> None:
    """Write a page atomically, with the permission bits of any new file (jsonio.write_bytes),
    but without its fsync, which costs more than rendering the page: a page that a crash leaves
    empty or cut records no digest, and is rendered again."""
    jsonio.write_bytes(path, text.encode("utf-8"), sync=False)


def recorded_inputs(page: str | Path) -> str | None:
    """The digest a page was made from (its marker), or None (no page, or no marker)."""
    try:
        with open(page, "rb") as f:
            m = MARKER.search(f.read(MARKER_BYTES))
    except OSError:
        return None
    return m.group(1).decode() if m else None


# -- the index ------------------------------------------------------------------------------------
def index_inputs(
    layout: Layout,
    tasks: Sequence[AnyTask],
    modes: Sequence[str],
    templates_dir: str | Path,
    cutoff: str,
) -> tuple[dict[str, Any], str]:
    """(context, digest) of the index now."""
    context = index_context(layout, tasks, modes, cutoff)
    config = {"page": "index", "version": __version__, "context": context}
    return context, stamps.inputs_digest(config, template_files(templates_dir))


def index_is_current(
    layout: Layout,
    bench: Benchmark,
    tasks: Iterable[AnyTask],
    configured: Sequence[str],
    templates_dir: str | Path,
    cutoff: str,
) -> bool:
    """doit uptodate: the index and the shared files were made from what is on disk now."""
    if not all(layout.site_asset(a).exists() for a in ASSETS):
        return False
    made = recorded_inputs(layout.site_index)
    if made is None:
        return False
    _, digest = index_inputs(
        layout,
        run_tasks(layout, bench, tasks),
        modes_on_disk(layout, configured),
        templates_dir,
        cutoff,
    )
    return made == digest


def write_index(
    layout: Layout,
    bench: Benchmark,
    tasks: Iterable[AnyTask],
    configured: Sequence[str],
    templates_dir: str | Path,
    cutoff: str,
    quiet: bool = False,
) -> None:
    """site/index.html, site.css and site.js."""
    context, digest = index_inputs(
        layout,
        run_tasks(layout, bench, tasks),
        modes_on_disk(layout, configured),
        templates_dir,
        cutoff,
    )
    for name in ASSETS:
        jsonio.write_bytes(
            layout.site_asset(name), (site_templates(templates_dir) / name).read_bytes()
        )
    write_page(
        layout.site_index,
        render(templates_dir, INDEX_TEMPLATE, digest, context, layout.compiled_templates),
    )
    if not quiet:
        say(f"site: {layout.site_index}")


# -- the task pages -------------------------------------------------------------------------------
def templates_digest(templates_dir: str | Path) -> str:
    """The digest of templates/site/ as it is now: part of every page's inputs."""
    return stamps.inputs_digest({"templates": TEMPLATES}, template_files(templates_dir))


def task_inputs(
    layout: Layout,
    mode: str,
    task: AnyTask,
    modes: Sequence[str],
    templates_dir: str | Path,
    templates: str | None = None,
) -> str:
    """The digest of what the page of (mode, task) is made from, on disk now. `templates`:
    templates_digest(templates_dir), when the caller checks many pages."""
    config = {
        "page": "task",
        "version": __version__,
        "run": layout.run,
        "mode": mode,
        "modes": list(modes),
        "task": task_facts(task),
        # where the gold diff comes from without a gold mode (report_site_task.gold_patch)
        "clone": layout.bare_repo(task.repo).is_dir(),
        "templates": templates or templates_digest(templates_dir),
    }
    return stamps.inputs_digest(config, page_files(layout, mode, task))


def task_page_is_current(
    layout: Layout, mode: str, task: AnyTask, modes: Sequence[str], templates_dir: str | Path
) -> bool:
    made = recorded_inputs(layout.site_page(mode, task.instance_id))
    return made is not None and made == task_inputs(layout, mode, task, modes, templates_dir)


def write_task_page(
    layout: Layout,
    mode: str,
    task: AnyTask,
    modes: Sequence[str],
    templates_dir: str | Path,
    digest: str | None = None,
) -> None:
    """The page of (mode, task). `digest`: its inputs', when the caller has just computed it."""
    # The digest first: a file that changes while the page renders leaves the page stale.
    digest = digest or task_inputs(layout, mode, task, modes, templates_dir)
    context = task_context(layout, mode, task, modes)
    write_page(
        layout.site_page(mode, task.instance_id),
        render(templates_dir, TASK_TEMPLATE, digest, context, layout.compiled_templates),
    )


def units(layout: Layout, tasks: Sequence[AnyTask], modes: Iterable[str]) -> list[Unit]:
    """(mode, task) of every page: each mode with results, each task of the run it has a
    results folder for."""
    return [(m, t) for m in modes for t in tasks if layout.task_dir(m, t.instance_id).is_dir()]


# -- the whole site (the end of a run) ------------------------------------------------------------
def site_settings(run: Iterable[AnyTask], modes: Iterable[str], templates: str, cutoff: str) -> str:
    """What the whole site is rendered for, besides the result files: the package, the run's
    tasks and modes, the templates (their digest), the cutoff."""
    return jsonio.digest(
        {
            "version": __version__,
            "tasks": [t.instance_id for t in run],
            "modes": list(modes),
            "templates": templates,
            "cutoff": cutoff,
        }
    )


def take_completion(layout: Layout) -> str | None:
    """The settings of the last complete rendering of the whole site (site_complete), or None;
    the record is removed. Called as a command that may change results starts (cli.py): a run
    that stops before its end leaves none, and the next one checks every page."""
    path = layout.site_complete
    try:
        settings = path.read_text().strip()
    except OSError:
        return None
    path.unlink(missing_ok=True)
    return settings or None


def write_site(
    layout: Layout,
    bench: Benchmark,
    tasks: Iterable[AnyTask],
    configured: Sequence[str],
    templates_dir: str | Path,
    cutoff: str | None = None,
    unchanged: str | None = None,
) -> list[str]:
    """Render every page that is not up to date; returns their names ("index", "<mode>/<id>").

    `unchanged`: take_completion's settings, when nothing wrote a result file since (the run
    executed no task and rendered no report). If they are the settings now and every page
    exists, no page can be stale and none is read; a no-op rerun of six modes on 196 tasks
    spent half its time checking 1,177 pages otherwise."""
    if site_is_complete(layout, bench, tasks, configured, templates_dir, cutoff, unchanged):
        return []
    run, modes, templates, cutoff = _site_inputs(
        layout, bench, tasks, configured, templates_dir, cutoff
    )
    rendered = _render_stale(
        layout,
        bench,
        tasks,
        configured,
        templates_dir,
        cutoff,
        run,
        modes,
        templates,
        units(layout, run, modes),
    )
    jsonio.write_text(layout.site_complete, site_settings(run, modes, templates, cutoff) + "\n")
    return rendered


def site_is_complete(
    layout: Layout,
    bench: Benchmark,
    tasks: Iterable[AnyTask],
    configured: Sequence[str],
    templates_dir: str | Path,
    cutoff: str | None = None,
    unchanged: str | None = None,
) -> bool:
    """write_site's shortcut alone: whether `unchanged` are the settings now and every page
    exists (the record of the complete site is then written again)."""
    if not unchanged:
        return False
    run, modes, templates, cutoff = _site_inputs(
        layout, bench, tasks, configured, templates_dir, cutoff
    )
    settings = site_settings(run, modes, templates, cutoff)
    if unchanged != settings or not _all_exist(layout, units(layout, run, modes)):
        return False
    jsonio.write_text(layout.site_complete, settings + "\n")
    return True


def _site_inputs(
    layout: Layout,
    bench: Benchmark,
    tasks: Iterable[AnyTask],
    configured: Sequence[str],
    templates_dir: str | Path,
    cutoff: str | None,
) -> tuple[list[AnyTask], list[str], str, str]:
    """(the run's tasks, the modes with results, the templates' digest, the cutoff): what the
    pages are made from, for write_site and site_is_complete alike."""
    run = run_tasks(layout, bench, tasks)
    modes = modes_on_disk(layout, configured)
    return run, modes, templates_digest(templates_dir), cutoff or RECENT_FROM


def _all_exist(layout: Layout, pages: Iterable[Unit]) -> bool:
    return (
        layout.site_index.exists()
        and all(layout.site_asset(a).exists() for a in ASSETS)
        and all(layout.site_page(m, t.instance_id).exists() for m, t in pages)
    )


def _render_stale(
    layout: Layout,
    bench: Benchmark,
    tasks: Iterable[AnyTask],
    configured: Sequence[str],
    templates_dir: str | Path,
    cutoff: str,
    run: Sequence[AnyTask],
    modes: Sequence[str],
    templates: str,
    pages: Iterable[Unit],
) -> list[str]:
    stale: list[tuple[Layout, str, AnyTask, Sequence[str], str | Path, str]] = []
    for mode, task in pages:
        digest = task_inputs(layout, mode, task, modes, templates_dir, templates)
        if recorded_inputs(layout.site_page(mode, task.instance_id)) != digest:
            stale.append((layout, mode, task, modes, templates_dir, digest))
    for job in stale:
        write_task_page(*job)
    rendered = [f"{job[1]}/{job[2].instance_id}" for job in stale]
    if not index_is_current(layout, bench, tasks, configured, templates_dir, cutoff):
        write_index(layout, bench, tasks, configured, templates_dir, cutoff, quiet=True)
        rendered.append("index")
    return rendered


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    """``site`` (every page), ``site:index`` and ``site:<mode>/<instance_id>``."""
    layout, templates = ctx.layout, ctx.layout.templates_dir
    cutoff = (ctx.options.cutoff if ctx.options else None) or RECENT_FROM
    configured = list(ctx.modes)
    yield {
        "basename": SITE_TASK,
        "name": None,
        "doc": f"the run's static site {layout.site_index} (runs nothing else)",
    }
    index_args = [layout, ctx.benchmark, ctx.tasks, configured, templates, cutoff]
    yield {
        "basename": SITE_TASK,
        "name": "index",
        "doc": "the site's index (after the report)",
        "actions": [(failing_on_user_error, [write_index, *index_args])],
        "uptodate": [(index_is_current, index_args)],
        "task_dep": ["report:markdown"],
        "targets": [str(layout.site_index)],
        "verbosity": 2,
    }
    # The pages of the results on disk now: the site shows a run, and runs nothing of it.
    modes = modes_on_disk(layout, configured)
    for mode, task in units(layout, run_tasks(layout, ctx.benchmark, ctx.tasks), modes):
        args = [layout, mode, task, modes, templates]
        yield {
            "basename": SITE_TASK,
            "name": f"{mode}/{task.instance_id}",
            "doc": f"the site's page of {mode} on {task.instance_id}",
            "actions": [(failing_on_user_error, [write_task_page, *args])],
            "uptodate": [(task_page_is_current, args)],
            "targets": [str(layout.site_page(mode, task.instance_id))],
        }
