"""Stage 2, workspace: a fresh git repository at the base commit for one (mode, task).

The agent must not be able to find the answer, so the workspace is not a worktree of the bare clone
(that would share every object, the fix included). It is a new repository into which only the base
commit and its ancestors are fetched: no later commit exists in it as an object, ref or reflog
entry, and nginx-tests is elsewhere. The problem statement is written to ``.issue.md``. For a mode
with ``tests = "base"`` the workspace task also makes the agent's nginx-tests tree as of the base
(suite/stage.py), outside the workspace.

Before each agent attempt the agent stage asks this stage once (``hand_to_agent``) for all it
needs of it: a workspace no agent has touched, its tests tree checked, and the mode's commands:
``install_commands`` writes the mode's custom slash commands (modes.toml's
``commands``, read from templates/commands/) to ``.claude/commands/<name>``, where Claude Code
reads the commands of the project it runs in; the user's own ``~/.claude`` is never touched.
``.issue.md``, ``.plan.md`` and ``.claude/`` are the harness's files: excluded in
``.git/info/exclude`` and never part of the agent's patch (patch/stage.py), nor are a build's
outputs (build_outputs: nginx's ``Makefile`` and ``objs/``; for a SWE-bench task, Python's
caches).
"""

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..core import inputs, jsonio, stamps
from ..core.errors import failing_on_user_error
from ..core.gitcmd import new_repository_at
from ..core.records import WorkspaceStamp
from ..core.stamps import TaskDict
from ..core.tasknames import AGENT, WORKSPACE, repo_task, task_name, unit_name
from ..core.trees import remove_tree
from ..doitext import cleaning
from ..run.swebench import SWEBENCH
from ..suite import stage as suite

if TYPE_CHECKING:
    from ..core.layout import Layout
    from ..run.benchmark import AnyTask, Task
    from ..run.context import StageContext
    from ..run.modes import AgentMode

# suite.as_of, or the context's tests_tree: the tests tree of a task as of its base.
TestsTreeOf = Callable[["Layout", "Task"], "suite.TestsTree | None"]
# agent.agent_finished (through the StageContext): (layout, mode, task, agent task name).
AgentFinished = Callable[["Layout", "AgentMode", "Task", str], bool]

ISSUE_FILE = ".issue.md"
# templates/prompt_plan.md.j2 asks the agent for its plan in this file (by this name).
PLAN_FILE = ".plan.md"
# Claude Code's per-project directory: the mode's slash commands go to its commands/.
CLAUDE_DIR = ".claude/"
COMMANDS_DIR = CLAUDE_DIR + "commands"
# Files the harness puts in a workspace or asks the agent for: never part of the agent's patch.
# A trailing / marks a directory.
# .tmp/: the agents' scratch directory (loop phases write their commit messages and marker there).
# The agent programs' own folders too (agent/programs/: own_paths; tests/test_programs.py checks
# that each is here).
TMP_DIR = ".tmp/"
HARNESS_FILES = (ISSUE_FILE, PLAN_FILE, CLAUDE_DIR, TMP_DIR, ".codex/", ".gemini/")
# What ./auto/configure and make write at the top of the tree. Half of the nginx bases have no
# .gitignore, so nothing else keeps them out of the agent's patch. A trailing / marks a directory.
BUILD_OUTPUTS = ("Makefile", "objs/")
# What running a Python project's code and tests writes, at any depth: never part of a SWE-bench
# task's patch, whatever its .gitignore says (a top-level Makefile there is the project's own).
PYTHON_OUTPUTS = ("__pycache__/", "*.pyc", ".pytest_cache/")
BRANCH = "main"


def build_outputs(kind: str) -> tuple:
    """The build outputs of a benchmark kind's workspaces (top-level for nginx, any depth for a
    Python project's)."""
    return PYTHON_OUTPUTS if kind == SWEBENCH else BUILD_OUTPUTS


def excluded_lines(kind: str) -> str:
    """The workspace's .git/info/exclude: the harness's files and the kind's build outputs."""
    top = HARNESS_FILES + (() if kind == SWEBENCH else BUILD_OUTPUTS)
    anywhere = PYTHON_OUTPUTS if kind == SWEBENCH else ()
    return "".join(f"/{name}\n" for name in top) + "".join(f"{name}\n" for name in anywhere)


def workspace_inputs(task: "AnyTask") -> str:
    return inputs.digest({"base": task.base_commit, "statement": task.problem_statement})


def create_workspace(layout: "Layout", mode: str, task: "AnyTask") -> None:
    """(Re)create the workspace of (mode, task) from scratch and write its stamp (mode: its
    name)."""
    ws = layout.workspace(mode, task.instance_id)
    remove_tree(ws)
    # A diff a node sent for an earlier agent run of this workspace (executor=ray) is no more.
    layout.remote_diff(mode, task.instance_id).unlink(missing_ok=True)
    ws.mkdir(parents=True)
    new_repository_at(
        ws,
        layout.bare_repo(task.repo),
        task.base_commit,
        BRANCH,
        config={"user.name": "agent", "user.email": "agent@localhost"},
    )
    with open(ws / ".git" / "info" / "exclude", "a") as f:
        # The agent's own `git status` then shows only its work, as on a base with a .gitignore.
        f.write(excluded_lines(task.kind))
    (ws / ISSUE_FILE).write_text(task.problem_statement.rstrip() + "\n", encoding="utf-8")
    stamp: WorkspaceStamp = {
        "inputs": workspace_inputs(task),
        "path": str(ws),
        "base_commit": task.base_commit,
        "agent_started": False,
    }
    jsonio.write_json(layout.workspace_stamp(mode, task.instance_id), stamp)


def install_commands(layout: "Layout", mode: "AgentMode", task: "AnyTask") -> list[Path]:
    """Write the custom slash commands of `mode` (its command_files, the text read when the
    modes were loaded, which is what the agent's inputs digest covers) into the
    workspace of (mode, task); hand_to_agent calls it after ensure_fresh_workspace, before the
    first phase. Returns the paths written ([] for a mode without commands)."""
    if not mode.command_files:
        return []
    folder = layout.workspace(mode.name, task.instance_id) / COMMANDS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in mode.command_files:
        (folder / name).write_text(text, encoding="utf-8")
        written.append(folder / name)
    return written


def mark_agent_started(layout: "Layout", mode: str, task: "AnyTask") -> None:
    # With executor=ray the workspace was made on a node: here the stamp holds this field alone.
    path = layout.workspace_stamp(mode, task.instance_id)
    jsonio.write_json(path, {**(jsonio.read_json(path) or {}), "agent_started": True})


def ensure_fresh_workspace(layout: "Layout", mode: str, task: "AnyTask") -> None:
    """Before an agent run: a workspace no earlier agent has touched."""
    stamp = stamps.made_from(layout.workspace_stamp(mode, task.instance_id), workspace_inputs(task))
    if (
        not stamp
        or stamp.get("agent_started")
        or not layout.workspace(mode, task.instance_id).is_dir()
    ):
        create_workspace(layout, mode, task)


class Handed(NamedTuple):
    """What an agent attempt gets of this stage (hand_to_agent): its workspace, and for a mode
    with `tests` its tests tree's path on this machine and the notes of its check."""

    workspace: Path
    tests_dir: Path | None
    notes: list[str]


def hand_to_agent(
    layout: "Layout", mode: "AgentMode", task: "AnyTask", tests_tree: "suite.TestsTree | None"
) -> Handed:
    """Before an agent attempt, all it needs of this stage at once: a workspace no earlier agent
    has touched (ensure_fresh_workspace), the tests tree of a mode with `tests` checked
    (suite.verified_tree), the mode's slash commands in the workspace (install_commands), and
    the workspace marked as the agent's (mark_agent_started: the next attempt makes it anew)."""
    ensure_fresh_workspace(layout, mode.name, task)
    tests_dir, notes = suite.verified_tree(layout, tests_tree) if tests_tree else (None, [])
    install_commands(layout, mode, task)
    mark_agent_started(layout, mode.name, task)
    return Handed(layout.workspace(mode.name, task.instance_id), tests_dir, notes)


def workspace_current(layout: "Layout", mode: str, task: "Task") -> bool:
    """An up-to-date workspace exists (its stamp matches the task, its directory is there)."""
    return bool(
        stamps.made_from(layout.workspace_stamp(mode, task.instance_id), workspace_inputs(task))
        and layout.workspace(mode, task.instance_id).is_dir()
    )


def tests_tree_ready(
    layout: "Layout", mode: "AgentMode", task: "Task", tests_tree: TestsTreeOf
) -> bool:
    """A mode without `tests`, or its tree for the task is there (suite/stage.py). tests_tree:
    suite.as_of, or the context's tests_tree (the same, asked once per command)."""
    if not mode.tests:
        return True
    tree = tests_tree(layout, task)
    return tree is not None and suite.tree_present(layout, tree)


def workspace_up_to_date(
    layout: "Layout",
    mode: "AgentMode",
    task: "Task",
    agent_finished: AgentFinished,
    agent_task_name: str,
    tests_tree: TestsTreeOf = suite.as_of,
) -> bool:
    """doit's uptodate of a workspace task: a current workspace (and tests tree, for a mode with
    `tests`), or none needed because the agent run is finished for its current inputs
    (`agent_finished`, agent.agent_finished: this stage comes before the agent's and does not
    import it)."""
    return (
        workspace_current(layout, mode.name, task)
        and tests_tree_ready(layout, mode, task, tests_tree)
    ) or agent_finished(layout, mode, task, agent_task_name)


def prepare_workspace(
    layout: "Layout",
    mode: "AgentMode",
    task: "Task",
    agent_finished: AgentFinished,
    agent_task_name: str,
    tests_tree: TestsTreeOf = suite.as_of,
) -> None:
    """The doit action: create the workspace (and the tests tree of a mode with `tests`) unless
    an up-to-date one exists or its agent run is finished (also when doit's database is lost)."""
    if workspace_up_to_date(layout, mode, task, agent_finished, agent_task_name, tests_tree):
        return
    if not workspace_current(layout, mode.name, task):
        create_workspace(layout, mode.name, task)
    if mode.tests:
        suite.ensure_tree(layout, suite.needed(tests_tree(layout, task), task))


def release_workspace(layout: "Layout", mode: str, task: "AnyTask") -> None:
    """After the patch stage took the agent's diff: the workspace and its stamp go. Its stamp
    goes too, so that patch.agent_patch keeps that diff instead of taking one of nothing."""
    remove_tree(layout.workspace(mode, task.instance_id))
    layout.workspace_stamp(mode, task.instance_id).unlink(missing_ok=True)


def remove_workspace(layout: "Layout", mode: str, task: "Task", dryrun: bool = False) -> None:
    """`doit clean`: the workspace and its stamp (the agent's results stay). dryrun (`doit clean
    -n`): only count it."""
    ws = layout.workspace(mode, task.instance_id)
    cleaning.say(cleaning.record("workspace", ws), dryrun)
    if dryrun:
        return
    remove_tree(ws)
    layout.workspace_stamp(mode, task.instance_id).unlink(missing_ok=True)
    # An agent home outlives its attempt only when doit was killed; it holds a copy of a login.
    remove_tree(layout.agent_home(mode, task.instance_id))


def gen_tasks(ctx: "StageContext") -> Iterator[TaskDict]:
    for bench, mode, task in ctx.agent_units():
        name = unit_name(bench, mode, task)
        agent_name = task_name(AGENT, name)
        yield {
            "basename": WORKSPACE,
            "name": name,
            "doc": f"fresh repository at {task.base_commit[:12]} for {task.instance_id}",
            "actions": [
                (
                    failing_on_user_error,
                    [
                        prepare_workspace,
                        ctx.layout,
                        mode,
                        task,
                        ctx.agent_finished,
                        agent_name,
                        ctx.tests_tree,
                    ],
                )
            ],
            # No target: a missing stamp would make doit run the task, and a finished agent
            # run needs no workspace (after `doit clean`, 62 MiB each); uptodate decides.
            # Both clones: their checks (commits, test files) come before any agent starts.
            "task_dep": list(dict.fromkeys([repo_task(task.repo), repo_task(task.test_repo)])),
            "uptodate": [
                (
                    workspace_up_to_date,
                    [ctx.layout, mode, task, ctx.agent_finished, agent_name, ctx.tests_tree],
                )
            ],
            "clean": [(remove_workspace, [ctx.layout, mode.name, task])],
        }
