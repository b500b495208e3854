"""What the agent's sandbox shows of a SWE-bench task's built environment (envs.py), as the
agent stage takes it (core/records.SweEnvView; agent/swe_view.py carries it out).

The prompt's test command is the spec's test command without the test files the official eval
script appends (envs.test_directives): those are the test patch's files, some of them new, and
naming them would point the agent at the hidden FAIL_TO_PASS tests.
"""

import os
from typing import TYPE_CHECKING

from ..agent import swe_view
from ..core.layout import Layout
from ..core.records import SweEnvView
from . import envs

if TYPE_CHECKING:
    from ..run.swebench import SweTask


def agent_test_command(task: "SweTask", layout: Layout) -> str:
    """envs.test_command without the test patch's files: how to run tests, naming none."""
    command = envs.test_command(task, layout)
    directives = " ".join(envs.test_directives(task, layout))
    if directives and command.endswith(" " + directives):
        command = command[: -len(directives) - 1]
    return command


def view_of(task: "SweTask", layout: Layout) -> SweEnvView | None:
    """The view of `task`'s environment, or None when none is built (a SWE-bench Pro task, a
    specification this machine cannot build, or not built yet: as before, the prompt says so)."""
    version = envs.swebench_version()
    # No environment was built in this cache without the package's specifications read into it
    # first: asked otherwise, every doit of a SWE-bench run would import the package (seconds).
    read = version is not None and layout.swe_specs_json(version).is_file()
    if not read and not os.environ.get(envs.SPECS_VAR):
        return None
    view = envs.sandbox_view(task, layout)
    if view is None:
        return None
    return {
        "root": str(view.rootfs),
        "venv": str(view.venv),
        "venv_path": view.venv_at,
        "testbed": view.testbed,
        "path": list(view.path),
        "env": dict(view.environment),
        "digest": view.key,
        "python": view.python,
        "package": swe_view.package_of(task.repo),
        "test_command": agent_test_command(task, layout),
        "testbed_files": str(view.testbed_files) if view.testbed_files else None,
    }


def pending_prompt_values(task: "SweTask", layout: Layout) -> dict[str, str] | None:
    """What the prompt says of `task`'s environment while a run that builds it (swe_local=1)
    has not built it yet: what the built one will show (swe_view.prompt_values), which its
    specification decides; None when it cannot be built here or its build failed (env.json or
    instance.json say why), and the prompt says there is none."""
    env = envs.environment_of(task, layout)
    if env.problem is not None:
        return None
    rec = envs.env_record(task, layout)
    irec = envs.instance_record(task, layout)
    if any(r is not None and r["status"] != envs.BUILT for r in (rec, irec)):
        return None
    return {
        "python": env.python,
        "testbed": envs.TESTBED,
        "test_command": agent_test_command(task, layout),
    }


def view_or_reason(task: "SweTask", layout: Layout) -> SweEnvView | str:
    """view_of, asked when the agent starts, or why there is no view to show."""
    view = view_of(task, layout)
    if view is not None:
        return view
    for rec in (envs.instance_record(task, layout), envs.env_record(task, layout)):
        if rec is not None and rec["status"] != envs.BUILT:
            return str(rec["reason"])
    return f"{envs.env_task_name(task)} did not build it"


def env_task_name(task: "SweTask") -> str:
    """The doit task that builds `task`'s environment and the install its agent is shown."""
    return envs.env_task_name(task)
