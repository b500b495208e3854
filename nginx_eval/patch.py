"""Stage 4, patch: the candidate patch of one (mode, task) as ``model.patch`` + ``patch.json``.

Agent modes: the diff of the workspace's files against the base commit, new files included. It is
computed with the bare clone's objects and a throw-away index, never with the workspace's own .git,
so an agent that commits, branches, rewrites history or deletes .git still yields the diff of what
is on disk. Harness files and ignored files (objs/, Makefile) are left out, and so is any new file
over MAX_NEW_FILE_BYTES (listed in patch.json as skipped).
Built-ins: ``gold`` is ``git diff base fix`` from the bare clone; ``none`` is empty.
Predictions modes: the ``model_patch`` of the task's row in the predictions file.

``patch.json``::

    {"inputs", "source": "workspace"|"gold"|"none"|"predictions", "sha256", "bytes",
     "files": [paths], "lines_added", "lines_removed", "binary": bool,
     "skipped_files": [{"path", "bytes"}], "note": str}
"""

import os
import subprocess
import tempfile

from doit.tools import config_changed

from . import jsonio
from .errors import UserError, failing_on_user_error
from .gitcmd import isolated_env
from .modes import read_predictions
from .repositories import repo_task
from .workspace import HARNESS_FILES

MAX_NEW_FILE_BYTES = 1 << 20


def _git(args, env, cwd=None, check=True):
    return subprocess.run(["git", *args], env=env, cwd=cwd, check=check, capture_output=True)


def workspace_diff(bare, workspace, base):
    """(patch bytes, skipped new files) of `workspace` against `base`, using a scratch index."""
    if not os.path.isdir(workspace):
        os.makedirs(workspace)
    with tempfile.TemporaryDirectory(prefix="nginx-eval-patch-") as tmp:
        env = dict(os.environ, **isolated_env({
            "GIT_DIR": str(bare), "GIT_WORK_TREE": str(workspace),
            "GIT_INDEX_FILE": os.path.join(tmp, "index"),
            # New blobs go to a scratch store, so the bare clone never grows agent junk.
            "GIT_OBJECT_DIRECTORY": os.path.join(tmp, "objects"),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.path.join(str(bare), "objects"),
        }))
        os.makedirs(os.path.join(tmp, "objects"))
        _git(["read-tree", base], env)
        excludes = [f":(exclude,top){name}" for name in HARNESS_FILES]
        others = _git(["ls-files", "-z", "--others", "--exclude-standard", "--", ".", *excludes],
                      env, cwd=workspace).stdout.split(b"\0")
        skipped = []
        for rel in filter(None, others):
            path = os.path.join(workspace, os.fsdecode(rel))
            size = os.lstat(path).st_size
            if size > MAX_NEW_FILE_BYTES:
                skipped.append({"path": os.fsdecode(rel), "bytes": size})
                excludes.append(f":(exclude,top,literal){os.fsdecode(rel)}")
        _git(["add", "-A", "--", ".", *excludes], env, cwd=workspace)
        diff = _git(["diff", "--cached", "--binary", "--full-index", base], env, cwd=workspace)
        return diff.stdout, skipped


def gold_diff(bare, base, fix):
    env = dict(os.environ, **isolated_env({"GIT_DIR": str(bare)}))
    return _git(["diff", "--binary", "--full-index", base, fix], env).stdout


def _header_path(line):
    path = line[4:].split("\t", 1)[0].strip()
    return path[2:] if path[:2] in ("a/", "b/") else path


def patch_stats(patch):
    """Files, added and removed lines of a git diff or a plain unified diff (predictions made
    elsewhere often have no `diff --git` headers)."""
    files, added, removed, binary = [], 0, 0, False
    git_header, old_path = False, None
    for line in patch.decode("utf-8", "replace").splitlines():
        if line.startswith("diff --git "):
            parts = line.split(" b/", 1)
            files.append(parts[1] if len(parts) == 2 else line[11:])
            git_header = True
        elif line.startswith("--- "):
            old_path = _header_path(line)
        elif line.startswith("+++ "):
            if not git_header:
                new_path = _header_path(line)
                files.append(old_path if new_path == "/dev/null" else new_path)
            git_header = False
        elif line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
        elif line.startswith("GIT binary patch") or line.startswith("Binary files "):
            binary = True
    return {"files": files, "lines_added": added, "lines_removed": removed, "binary": binary}


def prediction_for(predictions_path, instance_id):
    """The model_patch for `instance_id` in a SWE-bench predictions file (.jsonl or .json list)."""
    row = read_predictions(predictions_path).get(instance_id)
    if row is None:
        return None, ""
    return row[0].encode("utf-8"), row[1]


def write_patch(layout, mode, task, config, file_dep):
    inputs = jsonio.inputs_digest(config, file_dep)
    out = layout.patch_json(mode.name, task.instance_id)
    if jsonio.fresh_output(out, inputs) and layout.model_patch(mode.name, task.instance_id).exists():
        return
    bare = layout.bare_repo(task.repo)
    skipped, note = [], ""
    if mode.kind == "gold":
        patch = gold_diff(bare, task.base_commit, task.fix_commit)
    elif mode.kind == "none":
        patch = b""
    elif mode.kind == "predictions":
        patch, _ = prediction_for(mode.predictions, task.instance_id)
        if patch is None:
            patch, note = b"", "no prediction for this instance"
    elif not (jsonio.read_json(layout.workspace_stamp(mode.name, task.instance_id)) or {}).get(
            "agent_started"):
        # The agent's workspace is gone (`doit clean`) and a fresh one stands in its place: its
        # diff would be empty, not the agent's work. The patch taken from the agent's workspace
        # is kept; without one, only running the agent again can say.
        old_patch = layout.model_patch(mode.name, task.instance_id)
        if not old_patch.exists():
            raise UserError(f"the workspace of agent run {mode.name}/{task.instance_id} is gone; "
                            f"`doit forget agent:<benchmark>/{mode.name}/{task.instance_id}` "
                            f"runs the agent again", task=task.instance_id, field="workspace")
        patch = old_patch.read_bytes()
        old = jsonio.read_json(out) or {}
        skipped, note = old.get("skipped_files", []), old.get("note", "")
    else:
        patch, skipped = workspace_diff(bare, layout.workspace(mode.name, task.instance_id),
                                        task.base_commit)
        if skipped:
            note = (f"left out {len(skipped)} new file(s) over {MAX_NEW_FILE_BYTES} bytes: "
                    + ", ".join(s["path"] for s in skipped[:5]))
    jsonio.write_bytes(layout.model_patch(mode.name, task.instance_id), patch)
    record = {"inputs": inputs, "source": "workspace" if mode.runs_agent else mode.kind,
              "sha256": jsonio.digest(patch), "bytes": len(patch), "skipped_files": skipped,
              "note": note}
    record.update(patch_stats(patch))
    jsonio.write_json(out, record)


def gen_tasks(ctx):
    for bench, mode, task in ctx.units():
        name = ctx.unit_name(bench, mode, task)
        iid = task.instance_id
        # The test repository's clone too: its checks come before the first build.
        file_dep, task_dep = [], [repo_task(task.repo), repo_task(task.test_repo)]
        slice_ = {"kind": mode.kind, "base": task.base_commit}
        if mode.runs_agent:
            file_dep.append(str(ctx.layout.agent_json(mode.name, iid)))
            task_dep.append(f"agent:{name}")
        elif mode.kind == "gold":
            slice_["fix"] = task.fix_commit
        elif mode.kind == "predictions":
            file_dep.append(mode.predictions)
        yield {
            "basename": "patch",
            "name": name,
            "doc": f"the {mode.name} patch for {iid}",
            "actions": [(failing_on_user_error, [write_patch, ctx.layout, mode, task, slice_,
                                                 file_dep])],
            "file_dep": file_dep,
            "task_dep": task_dep,
            "targets": [str(ctx.layout.model_patch(mode.name, iid)),
                        str(ctx.layout.patch_json(mode.name, iid))],
            "uptodate": [config_changed(slice_)],
        }
