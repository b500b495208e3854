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
