"""A phase's prompt: the template it is rendered from, the values a template gets, the marks of
what only the run knows, and the one line for a template that is not there.

**Templates.** A phase names its template in modes.toml (``prompt``); the file is in
``templates/``, or in ``templates/swebench/`` for a SWE-bench task (prompt_dir: the nginx prompts
name nginx; run/swebench.adapt_mode refuses a mode whose SWE-bench version is missing when the
modes are loaded). Jinja renders it with StrictUndefined: a misspelt variable is an error.

**Values.** Every template gets ``task``, ``mode``, ``phase``, ``problem_statement``,
``issue_file`` (the workspace's ``.issue.md``), ``instance_id``, ``tests_dir``,
``environment`` (a SWE-bench task's Python environment in the sandbox, or None), ``artifacts``
(every phase's), ``phase_model``, a loop phase's ``loop`` (its settings) and LOOP_VALUES
(template_values).

**Marks.** Prompts are rendered before the run: their text is an agent input
(agent/stage.py: agent_inputs), so what only the run knows is rendered as a mark and put in as
the phase starts: a phase's artifact (``<<artifact:NAME>>``), a loop iteration's values
(``<<loop:NAME>>``), both by fill, and the agent's tests tree (TESTS_DIR_MARK, by
with_tests_dir; suite/stage.py), whose path on the machine the agent runs on is no input: a
cache elsewhere, or a Ray node's, is not another agent run.

**A missing template** (missing_prompt): one UserError naming the mode, the phase and the
closest template there; such a mode cannot run (the preflight and a dry run say so first), and
the commands that do not run it run as ever.
"""

import os
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from ..core.errors import UserError, did_you_mean
from ..run.benchmark import AnyTask
from ..run.modes import AgentMode, Phase
from ..workspace.stage import ISSUE_FILE

# The agent's tests tree in a prompt (`{{ tests_dir }}`), until the phase starts.
TESTS_DIR_MARK = "<nginx-eval:tests_dir>"
ARTIFACT_MARK = "<<artifact:{}>>"
LOOP_MARK = "<<loop:{}>>"
# What a loop iteration's prompt may name besides the loop's settings (loop.py fills them).
LOOP_VALUES = ("iteration", "previous_output", "previous_message", "feedback", "message_file")
# An artifact of a phase that did not run (a later one, or one that failed).
UNMADE_ARTIFACT = re.compile(r"<<artifact:[^<>]*>>")


def prompt_dir(templates_dir: Path, task: object) -> Path:
    """Where the prompt templates of `task` are: templates/ for nginx, templates/swebench/."""
    kind_dir = getattr(task, "templates", "")
    return Path(templates_dir) / kind_dir if kind_dir else Path(templates_dir)


@lru_cache(maxsize=8)
def prompt_environment(templates_dir: str | Path) -> jinja2.Environment:
    # One per directory: each template is compiled once, not once per task (the no-op run
    # renders every prompt to check that agent runs are still current).
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def template_values(mode: AgentMode, phase: Phase) -> dict[str, Any]:
    """What a phase's prompt template gets besides the task's: ``artifacts`` (every phase's,
    as marks), ``phase_model``, and a loop phase's ``loop`` (its settings) with the marks of
    LOOP_VALUES."""
    values: dict[str, Any] = {
        "artifacts": {p.name: ARTIFACT_MARK.format(p.name) for p in mode.phases},
        "phase_model": phase.model or mode.model,
    }
    values.update({name: LOOP_MARK.format(name) for name in LOOP_VALUES})
    values["loop"] = phase.loop
    return values


def render_prompt(
    templates_dir: Path,
    template_name: str,
    task: AnyTask,
    mode: AgentMode,
    phase: Phase,
    environment: Mapping[str, str] | None = None,
) -> str:
    env = prompt_environment(str(prompt_dir(templates_dir, task)))
    return env.get_template(template_name).render(
        task=task,
        mode=mode,
        phase=phase,
        problem_statement=task.problem_statement,
        issue_file=ISSUE_FILE,
        instance_id=task.instance_id,
        tests_dir=TESTS_DIR_MARK if mode.tests else "",
        environment=environment,
        **template_values(mode, phase),
    )


def rendered_prompts(
    templates_dir: Path,
    mode: AgentMode,
    task: AnyTask,
    environment: Mapping[str, str] | None = None,
) -> list[str]:
    """The prompt of each phase of `mode` for `task` ("" for a phase without one); environment:
    a SWE-bench task's, as its sandbox shows it (swe_view.prompt_values)."""
    return [
        render_prompt(templates_dir, p.prompt, task, mode, p, environment) if p.prompt else ""
        for p in mode.phases
    ]


def missing_prompt(templates_dir: Path, mode: AgentMode, task: AnyTask) -> UserError | None:
    """A UserError naming the first phase of `mode` whose prompt template does not exist for
    `task` (templates/, or templates/swebench/ for a SWE-bench task), or None. Such a mode
    cannot run: the preflight (and a dry run) say this line before any work, and the commands
    that do not run it (`doit run nginx:gold`) run as ever."""
    where = prompt_dir(templates_dir, task)
    absent = _absent_templates(str(where), tuple(p.prompt for p in mode.phases if p.prompt))
    for phase in mode.phases:
        if phase.prompt in absent:
            known = sorted(p.name for p in where.glob("prompt*.j2")) if where.is_dir() else []
            return UserError(
                f"no template {phase.prompt!r} in {where}: mode {mode.name} cannot run (the "
                f"commands without it still do){did_you_mean(phase.prompt, known)}",
                file="modes.toml",
                item=f"mode {mode.name} phase {phase.name}",
                field="prompt",
            )
    return None


@lru_cache(maxsize=64)
def _absent_templates(where: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """The template files of `names` that are not in the directory `where`; asked once per
    command for each mode (a no-op rerun asks it of every agent unit, several times)."""
    return tuple(n for n in names if not os.path.isfile(os.path.join(where, n)))


def refuse_missing_prompt(error: UserError) -> None:
    """The action of an agent task whose mode lacks a prompt template: its one line."""
    raise error


def fill(
    prompt: str, artifacts: Mapping[str, str], loop_values: Mapping[str, str] | None = None
) -> str:
    """The prompt with the run's values in place of their marks (an artifact not made: "")."""
    loop_values = loop_values or {}
    for name, text in artifacts.items():
        prompt = prompt.replace(ARTIFACT_MARK.format(name), text)
    prompt = UNMADE_ARTIFACT.sub("", prompt)
    for name in LOOP_VALUES:
        prompt = prompt.replace(LOOP_MARK.format(name), str(loop_values.get(name, "")))
    return prompt


def with_tests_dir(prompt: str, tests_dir: Path | None) -> str:
    """The prompt with the agent's tests tree on this machine in place of its mark (none
    without a tree)."""
    return prompt.replace(TESTS_DIR_MARK, str(tests_dir)) if tests_dir else prompt
