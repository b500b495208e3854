"""The SWE-bench Pro harness as this project meets it: the files its ``swe_bench_pro_eval.py``
reads, the command that grades them, and the results it writes. Pure functions; what they answer
comes from the harness's source (scaleapi/SWE-bench_Pro-os at ca10a60, swe_bench_pro_eval.py:
main, eval_with_docker, create_entryscript), which runs where Docker or Modal is, in a checkout of
that repository (its run_scripts/ and dockerfiles/ are read relative to the working directory):
the project never imports it.

Two files per mode, written by swebench/stage.py beside predictions.jsonl:

- ``patches.json`` (--patch_path): a JSON list of objects with exactly PATCH_FIELDS:
  ``instance_id``, ``patch`` (the diff the harness `git apply`s at the base commit; binary hunks
  it strips itself) and ``prefix`` (names each instance's output files; ours
  ``nginx-eval.<run>.<mode>``).
- ``samples.jsonl`` (--raw_sample_path): the mode's tasks as the harness reads the dataset, JSON
  lines with SAMPLE_FIELDS; the list fields as the dataset's text, which the harness eval()s.

The command (grading_command) gives ``--output_dir results/<run>/evaluation/<prefix>.<digest>``,
``<digest>`` the first 12 hex digits of patches.json's sha256: the folder's name says which
patches it graded, as a Verified run id does (harness.py). The harness writes there
``eval_results.json`` ({instance_id: true | false}: true when every fail_to_pass and pass_to_pass
test passed) and per instance ``<id>/<prefix>_output.json`` (the parsed test results) when its
run got that far. read_results turns them into harness.py's report shape: true resolved; false
with an output unresolved; false without one ``error_ids`` (no image, no scripts, an exception:
the harness could not judge it, and reports it as false).
"""

import json
from pathlib import Path

from ..run.swebench import SweTask
from . import harness

PATCH_FIELDS = ("instance_id", "patch", "prefix")
SAMPLE_FIELDS = (
    "instance_id",
    "repo",
    "base_commit",
    "before_repo_set_cmd",
    "selected_test_files_to_run",
    "fail_to_pass",
    "pass_to_pass",
    "dockerhub_tag",
)
SCRIPT = "swe_bench_pro_eval.py"
HARNESS_REPO = "scaleapi/SWE-bench_Pro-os"
HARNESS_COMMIT = "ca10a60a5fcae51e6948ffe1485d4153d421e6c5"
DOCKERHUB_USER = "jefzda"  # where its README says the per-task images are
RESULTS = "eval_results.json"
PRINTED_WORKERS = 4
WORKERS_NOTE = (
    f"--num_workers={PRINTED_WORKERS} is a choice for the grading machine (the harness's own "
    "default is 50 Modal sandboxes); --use_local_docker grades on that machine's Docker "
    "instead of Modal"
)


def prefix(run: str, mode: str) -> str:
    return f"{harness.RUN_ID_PREFIX}.{run}.{mode}"


def output_name(run: str, mode: str, digest: str) -> str:
    """The --output_dir folder of a mode's patches (its digest: harness.predictions_digest)."""
    return harness.run_id(run, mode, digest)


def sample(task: SweTask) -> dict:
    """A task as the harness's raw sample (SAMPLE_FIELDS; lists as JSON text)."""
    return {
        "instance_id": task.instance_id,
        "repo": task.repo,
        "base_commit": task.base_commit,
        "before_repo_set_cmd": task.before_repo_set_cmd,
        "selected_test_files_to_run": json.dumps(list(task.selected_test_files)),
        "fail_to_pass": json.dumps(list(task.fail_to_pass)),
        "pass_to_pass": json.dumps(list(task.pass_to_pass)),
        "dockerhub_tag": task.dockerhub_tag,
    }


def patch_problems(rows: list) -> list[str]:
    """What the harness would refuse in patches.json's `rows`, one line each."""
    problems, seen = [], set()
    for n, row in enumerate(rows, 1):
        if not isinstance(row, dict) or set(row) != set(PATCH_FIELDS):
            problems.append(f"row {n}: not an object of exactly {', '.join(PATCH_FIELDS)}")
            continue
        if not all(isinstance(row[k], str) for k in PATCH_FIELDS):
            problems.append(f"row {n}: every field must be a string")
        if row["instance_id"] in seen:
            problems.append(f"row {n}: instance_id {row['instance_id']} twice")
        seen.add(row["instance_id"])
    return problems


def grading_command(
    samples: Path,
    patches: Path,
    output_dir: Path,
    workers: int = PRINTED_WORKERS,
    python: str = "python",
) -> list[str]:
    """The words of the command that grades `patches`, run in a checkout of HARNESS_REPO."""
    return [
        python,
        SCRIPT,
        f"--raw_sample_path={Path(samples).resolve()}",
        f"--patch_path={Path(patches).resolve()}",
        f"--output_dir={Path(output_dir).resolve()}",
        "--scripts_dir=run_scripts",
        f"--num_workers={workers}",
        f"--dockerhub_username={DOCKERHUB_USER}",
    ]


def results_of(evaluation_dir: str | Path, run: str, mode: str) -> list[tuple[Path, str]]:
    """[(eval_results.json, its folder's name)] of a mode's gradings in `evaluation_dir`."""
    folder = Path(evaluation_dir)
    if not folder.is_dir():
        return []
    start = prefix(run, mode) + "."
    return [
        (d / RESULTS, d.name)
        for d in sorted(folder.iterdir())
        if d.is_dir() and d.name.startswith(start) and (d / RESULTS).is_file()
    ]


def read_results(path: str | Path) -> dict:
    """An eval_results.json as harness.py's report shape (module docstring); ValueError saying
    what is wrong with it."""
    path = Path(path)
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not a readable JSON file ({e})") from None
    if not isinstance(results, dict) or not all(isinstance(v, bool) for v in results.values()):
        raise ValueError(
            f"not an object of instance ids to true or false: not the eval_results.json of {SCRIPT}"
        )
    run_prefix = path.parent.name.rsplit(".", 1)[0]
    resolved = sorted(i for i, ok in results.items() if ok)
    judged = sorted(
        i
        for i, ok in results.items()
        if not ok and (path.parent / i / f"{run_prefix}_output.json").is_file()
    )
    errors = sorted(i for i, ok in results.items() if not ok and i not in judged)
    return {
        "submitted_ids": sorted(results),
        "completed_ids": resolved + judged,
        "resolved_ids": resolved,
        "unresolved_ids": judged,
        "empty_patch_ids": [],
        "error_ids": errors,
    }


def usable_results(
    evaluation_dir: str | Path, run: str, mode: str
) -> tuple[list[tuple[Path, str]], dict[Path, dict], list[tuple[Path, str]]]:
    """harness.usable_reports for a Pro mode's gradings: (usable, {path: report}, unusable)."""
    return harness.usable_reports(results_of(evaluation_dir, run, mode), read_results)
