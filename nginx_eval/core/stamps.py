"""When a stage's work is done: the one freshness protocol of every stage, declared here.

A unit stage (workspace, agent, patch, build, prove, grade, validate) writes one JSON output that
records ``inputs``: the digest of the stage's config (the JSON-able slice that matters: commits,
flags, the command line, the patch's hash) and of the contents of its input files. The task is up
to date when its output was made from exactly the inputs on disk now, and that check is the task's
doit ``uptodate`` (``stage_task``). So doit's database holds nothing the verdicts rely on: lose it,
kill -9 doit before it saves, and nothing that finished runs again. The order between stages is
``task_dep`` on the task that makes an input file, not ``file_dep``, whose check lives in the
database.

Where a rerun costs money or minutes, the action checks once more before it works (``made_from``),
so that neither ``doit run -a`` nor a stale database pays twice: the agent (its agent.json) and the
build (its content-addressed cache). ``doit forget agent:...`` is the way to run a finished agent
again, and ``doit forget`` of any unit makes it out of date at the next run (doitext/backend.py
keeps the request, pipeline.redo_forgotten answers it).

Tasks whose output cannot carry the digest and costs milliseconds to make (results.jsonl,
validation.md) keep doit's own ``file_dep`` check: losing the database redoes them, which is
harmless. The report carries its digest in report.json (report.report_is_fresh).
"""

import json
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from . import inputs, jsonio
from .jsonio import file_digest

# A doit task as a stage's generator yields it (doit's task dict: basename, name, actions, ...).
TaskDict = dict[str, Any]


def inputs_digest(config: Any, files: Iterable[str | Path] = ()) -> str:
    """The digest of a stage's inputs: its config slice plus the contents of its input files
    (a missing file counts as absent). Computed from what is on disk when it is called."""
    contents: dict[str, str | None] = {}
    for f in files:
        try:
            contents[str(f)] = file_digest(f)
        except FileNotFoundError:
            contents[str(f)] = None
    return inputs.digest({"config": config, "files": contents})


def made_from(path: str | Path, inputs: str) -> Any:
    """The stage output at `path` (its JSON record) if it was made from exactly these inputs,
    else None."""
    data = jsonio.read_json(path)
    if isinstance(data, dict) and data.get("inputs") == inputs:
        return data
    return None


# The top-level "inputs" of a JSON file jsonio.write_json wrote (indent 2, keys sorted): a raw
# newline and two spaces start a key of the outer object only (a string holds newlines as \n).
RECORDED_INPUTS = re.compile(rb'\n  "inputs": "([0-9a-f]{64})"')


def recorded_inputs(path: str | Path) -> str | None:
    """The "inputs" a stage output at `path` records, or None; without parsing the whole file
    (prove.json and agent.json run to tens of kilobytes, and a no-op rerun asks thousands)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    found = RECORDED_INPUTS.search(data)
    if found and data.rstrip().endswith(b"}"):  # and the file is whole
        return found.group(1).decode()
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value.get("inputs") if isinstance(value, dict) else None


def is_current(output: str | Path, config: Any, files: Iterable[str | Path]) -> bool:
    """doit uptodate: `output` was made from `config` and the input files as they are now."""
    return recorded_inputs(output) == inputs_digest(config, files)


def stage_task(
    *,
    basename: str,
    name: str,
    doc: str,
    action: Callable[..., Any],
    args: Iterable[Any],
    config: Any,
    files: Iterable[str | Path] = (),
    targets: Sequence[str | Path],
    task_dep: Iterable[str] = (),
    also_current: Iterable[Any] = (),
    **extra: Any,
) -> TaskDict:
    """The doit task of one unit of a stage.

    ``action(*args, config, files)`` does the work and writes ``targets[0]``, a JSON file with
    ``"inputs": inputs_digest(config, files)``. ``task_dep`` names the tasks that make the input
    files (and anything else that must come first). ``also_current`` adds uptodate checks the
    output alone cannot answer (a prove whose grade blamed the environment runs again).
    """
    files = [str(f) for f in files]
    return dict(
        {
            "basename": basename,
            "name": name,
            "doc": doc,
            "actions": [(action, [*args, config, files])],
            "task_dep": list(task_dep),
            "targets": [str(t) for t in targets],
            "uptodate": [(is_current, [str(targets[0]), config, files]), *also_current],
        },
        **extra,
    )
