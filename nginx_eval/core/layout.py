"""Where everything lives. The only module that builds cache and result paths.

Project root (``NGINX_EVAL_ROOT``, default: the directory of dodo.py):
    tasks/<benchmark>.json      benchmark files; each one becomes a doit group
    modes.toml                  agent modes
    templates/                  prompt and report templates
    results/<run>/              run output (``NGINX_EVAL_RESULTS`` moves it); report.md,
                                report.json, report-chart.png, report-distributions.png,
                                compare-<other run>.md|.json (report/stage.py)
    results/<run>/site/         the run's static site (report/site.py): index.html, site.css,
                                site.js, <mode>/<instance_id>.html

Cache (``NGINX_EVAL_CACHE``, default ``<root>/.cache``):
    repos/<owner>+<name>.git    bare clones
    tests/<test_commit>/        nginx-tests trees, one per pinned commit, shared by all runs
                                (prove/tree.py); tests/<test_commit>+<digest>/ the same with an
                                authored task's files (run/benchmark.Task.tests_tree_id)
    agent-tests/<commit>/       nginx-tests as of a base commit, the tree an agent of a mode with
                                `tests = "base"` may read (suite/stage.py); never a grading tree
    workspaces/<run>/<mode>/<instance_id>/   the agent's worktree
    agent-homes/<run>/<mode>/<instance_id>/  the agent's Claude Code configuration directory
                                (CLAUDE_CONFIG_DIR), made afresh for each attempt and removed
                                when it ends (agent/home.py)
    builds/<key>/               content-addressed builds (see build/stage.py)
    builds/.tmp/<key>.<pid>/    a build in progress (or a killed one's leftovers)
    builds/.failed/<key>.json|.log   an env_error build's record and log, never a verdict
    guards/<hash>/nginx         the output guard in front of a build's binary (prove/env.py)
    ccache/                     ccache's store, shared by all builds
    plans/<key>.json            the build order and base build plan of a set of tasks
                                (build/plan.py)
    feature-tests/              executables of configure's test programs (feature_test_cc.sh),
                                feature-tests/bin/cc the compiler configure runs
    locks/                      advisory locks for shared cache entries, and run-<run>.lock,
                                held by the doit process running <run> (cli.py);
                                slots-<run>/<kind>-<i>.lock, the per-kind limits (limits.py)
    running/<run>/<mode>/<instance_id>.<stage>   token of a command still running (procs.py)
    running/<run>/.builds/<key>  the same for the step (configure, make...) of a build in progress
    running/<run>/.other/<token> the same for a command without a file of its own (during a run)
    running/<run>.agent-stop    why no agent of <run> may start (an auth error), until the next
                                `doit run` (agent/stage.py)
    strict-runs/<key>/<test tree>/   reference runs of the strict stage: a build's runs of
                                regression files, shared by every mode (strict/stage.py)
    agent-versions/<hash>.json  `<program> --version` per program file, mtime and size
                                (agent/stage.py)
    doit/<run>.db               doit's database for that run (a disposable cache)

Per task results, ``results/<run>/<mode>/<instance_id>/``:
    agent.json, agent/          agent status and logs        (agent/stage.py)
    model.patch, patch.json     the candidate patch          (patch/stage.py)
    build.json, build.log       the build verdict            (build/stage.py)
    prove.json, tap/<file>.tap  raw TAP per test file        (prove/stage.py)
    tap/<file>.rerun.tap        second runs, rerun_failed=1  (prove/stage.py)
    strict.json, strict/        the strict stage's record and test output (strict/stage.py)
    grade.json                  the verdict                  (grade/stage.py)
Per mode: ``results/<run>/<mode>/results.jsonl`` and ``predictions.jsonl`` (results/stage.py).
Per run of a SWE-bench benchmark: ``results/<run>/evaluation/``, the official harness's reports
(``<model>.<run_id>.json``) and, when ``<bench>:grade`` ran here, its ``logs/`` (swebench/).
Per run: ``results/<run>/run.json``, the benchmark and tasks the run is of (run/record.py).
"""

import functools
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
SOURCE_ROOT = PACKAGE_DIR.parent
DEFAULT_REPO_URL = "https://github.com/{owner}/{name}.git"


@functools.cache
def _joined(base: Path, *parts: str) -> Path:
    """base / parts, made once: a run's units ask for the same few paths thousands of times
    (building them anew took a third of a second of every doit command on 173 tasks)."""
    return base.joinpath(*parts)


@dataclass(frozen=True)
class Layout:
    root: Path
    cache: Path
    results_root: Path
    run: str = "default"

    @classmethod
    def from_env(
        cls,
        root: str | Path | None = None,
        run: str = "default",
        environ: Mapping[str, str] | None = None,
    ) -> "Layout":
        env = os.environ if environ is None else environ
        root = Path(env.get("NGINX_EVAL_ROOT") or root or SOURCE_ROOT).resolve()
        cache = Path(env.get("NGINX_EVAL_CACHE") or root / ".cache").resolve()
        results = Path(env.get("NGINX_EVAL_RESULTS") or root / "results").resolve()
        return cls(root=root, cache=cache, results_root=results, run=run)

    # -- project inputs --------------------------------------------------------------------------
    @property
    def tasks_dir(self) -> Path:
        return self.root / "tasks"

    @property
    def modes_file(self) -> Path:
        return self.root / "modes.toml"

    @property
    def templates_dir(self) -> Path:
        own = self.root / "templates"
        return own if own.is_dir() else SOURCE_ROOT / "templates"

    # -- cache -------------------------------------------------------------------------------
    def bare_repo(self, repo: str) -> Path:
        return self.cache / "repos" / (repo.replace("/", "+") + ".git")

    def repo_stamp(self, repo: str) -> Path:
        return self.cache / "repos" / (repo.replace("/", "+") + ".json")

    def tests_tree(self, tree_id: str) -> Path:
        """A test tree: a test commit's, or an authored task's (benchmark.Task.tests_tree_id)."""
        return self.cache / "tests" / tree_id

    def tests_stamp(self, tree_id: str) -> Path:
        return self.cache / "tests" / f"{tree_id}.json"

    def agent_tests_tree(self, commit: str) -> Path:
        """The read-only nginx-tests tree of `commit` an agent is given (suite/stage.py), apart from
        the grading trees: what an agent could do to it never reaches a verdict."""
        return self.cache / "agent-tests" / commit

    def agent_tests_stamp(self, commit: str) -> Path:
        return self.cache / "agent-tests" / f"{commit}.json"

    def output_guard(self, binary: str | Path) -> Path:
        """prove/env.py's output guard for a binary: a directory per binary path."""
        return self.cache / "guards" / hashlib.sha256(str(binary).encode()).hexdigest()[:16]

    def workspace(self, mode: str, instance_id: str) -> Path:
        return self.cache / "workspaces" / self.run / mode / instance_id

    def workspace_stamp(self, mode: str, instance_id: str) -> Path:
        return self.cache / "workspaces" / self.run / mode / f"{instance_id}.json"

    def agent_home(self, mode: str, instance_id: str) -> Path:
        """The CLAUDE_CONFIG_DIR of the agent run of (mode, task): agent/home.py."""
        return self.cache / "agent-homes" / self.run / mode / instance_id

    def remote_diff(self, mode: str, instance_id: str) -> Path:
        """executor=ray: the agent's workspace diff, made on the node that ran it
        (patch/stage.py)."""
        return self.cache / "workspaces" / self.run / mode / f"{instance_id}.remote.json"

    @property
    def builds(self) -> Path:
        return self.cache / "builds"

    def build_dir(self, key: str) -> Path:
        return self.builds / key

    def build_tmp(self, key: str) -> Path:
        return self.builds / ".tmp" / f"{key}.{os.getpid()}"

    def failed_build_json(self, key: str) -> Path:
        return self.builds / ".failed" / f"{key}.json"

    def failed_build_log(self, key: str) -> Path:
        return self.builds / ".failed" / f"{key}.log"

    def build_plans(self, key: str) -> Path:
        """The build order and base build plan of a set of tasks (build/plan.py)."""
        return self.cache / "plans" / f"{key}.json"

    @property
    def ccache_dir(self) -> Path:
        return self.cache / "ccache"

    @property
    def feature_tests(self) -> Path:
        return self.cache / "feature-tests"

    def lock(self, name: str) -> Path:
        return self.cache / "locks" / f"{name}.lock"

    @property
    def doit_db(self) -> Path:
        return self.cache / "doit" / f"{self.run}.db"

    @property
    def running_dir(self) -> Path:
        return self.cache / "running" / self.run

    def running_token(self, mode: str, instance_id: str, stage: str) -> Path:
        return self.running_dir / mode / f"{instance_id}.{stage}"

    def running_build_token(self, key: str) -> Path:
        return self.running_dir / ".builds" / key

    @property
    def agent_stop(self) -> Path:
        return self.cache / "running" / f"{self.run}.agent-stop"

    @property
    def sandbox_support(self) -> Path:
        """What an agent's sandbox reads of the harness: the loopback proxy, the agent's account
        (agent/sandbox.py: write_support)."""
        return self.cache / "sandbox-support"

    @property
    def agent_versions(self) -> Path:
        return self.cache / "agent-versions"

    # -- results -----------------------------------------------------------------------------
    @property
    def run_dir(self) -> Path:
        return self.results_root / self.run

    def mode_dir(self, mode: str) -> Path:
        return self.run_dir / mode

    def task_dir(self, mode: str, instance_id: str) -> Path:
        return _joined(self.results_root, self.run, mode, instance_id)

    def agent_json(self, mode: str, iid: str) -> Path:
        return _joined(self.results_root, self.run, mode, iid, "agent.json")

    def agent_logs(self, mode: str, iid: str) -> Path:
        return _joined(self.results_root, self.run, mode, iid, "agent")

    def agent_records(self) -> list[Path]:
        """Every agent.json of the run, whatever its mode and task."""
        return sorted(self.run_dir.glob("*/*/agent.json"))

    def model_patch(self, mode: str, iid: str) -> Path:
        return _joined(self.results_root, self.run, mode, iid, "model.patch")

    def patch_json(self, mode: str, iid: str) -> Path:
        return _joined(self.results_root, self.run, mode, iid, "patch.json")

    def build_json(self, mode: str, iid: str) -> Path:
        return _joined(self.results_root, self.run, mode, iid, "build.json")

    def build_log(self, mode: str, iid: str) -> Path:
        return _joined(self.results_root, self.run, mode, iid, "build.log")

    def prove_json(self, mode: str, iid: str) -> Path:
        return _joined(self.results_root, self.run, mode, iid, "prove.json")

    def tap_dir(self, mode: str, iid: str) -> Path:
        return _joined(self.results_root, self.run, mode, iid, "tap")

    def strict_json(self, mode: str, iid: str) -> Path:
        return self.task_dir(mode, iid) / "strict.json"

    def strict_dir(self, mode: str, iid: str) -> Path:
        return self.task_dir(mode, iid) / "strict"

    def strict_runs(self, build_key: str, tree_id: str) -> Path:
        return self.cache / "strict-runs" / build_key / tree_id

    def grade_json(self, mode: str, iid: str) -> Path:
        return _joined(self.results_root, self.run, mode, iid, "grade.json")

    def results_jsonl(self, mode: str) -> Path:
        return self.mode_dir(mode) / "results.jsonl"

    def predictions_jsonl(self, mode: str) -> Path:
        return self.mode_dir(mode) / "predictions.jsonl"

    @property
    def evaluation_dir(self) -> Path:
        """The official SWE-bench harness's run reports of the run's modes (swebench/harness.py):
        the --report_dir of the command it is given; reports made elsewhere are copied here."""
        return self.run_dir / "evaluation"

    @property
    def run_json(self) -> Path:
        return self.run_dir / "run.json"

    @property
    def ray_units_log(self) -> Path:
        """executor=ray: where each unit ran (rayexec.py)."""
        return self.run_dir / "ray-units.jsonl"

    @property
    def report_md(self) -> Path:
        return self.run_dir / "report.md"

    @property
    def report_json(self) -> Path:
        return self.run_dir / "report.json"

    @property
    def report_chart(self) -> Path:
        return self.run_dir / "report-chart.png"

    @property
    def report_distributions(self) -> Path:
        return self.run_dir / "report-distributions.png"

    @property
    def site_dir(self) -> Path:
        """The run's static site (report/site.py)."""
        return self.run_dir / "site"

    @property
    def site_index(self) -> Path:
        return self.site_dir / "index.html"

    @property
    def site_complete(self) -> Path:
        """What the last complete rendering of the whole site was made for (report/site.py)."""
        return self.site_dir / ".complete"

    def site_asset(self, name: str) -> Path:
        """A file every page of the site shares (site.css, site.js)."""
        return self.site_dir / name

    def site_page(self, mode: str, iid: str) -> Path:
        return self.site_dir / mode / f"{iid}.html"

    def compare_md(self, other: str) -> Path:
        return self.run_dir / f"compare-{other}.md"

    def compare_json(self, other: str) -> Path:
        return self.run_dir / f"compare-{other}.json"

    @property
    def validation_json(self) -> Path:
        return self.run_dir / "validation.json"

    @property
    def validation_md(self) -> Path:
        return self.run_dir / "validation.md"

    def validation_dir(self, instance_id: str) -> Path:
        return self.run_dir / "validate" / instance_id


def repo_url(repo: str, environ: Mapping[str, str] | None = None) -> str:
    """The clone URL of `owner/name`, from NGINX_EVAL_REPO_URL (a template with {owner} and
    {name})."""
    env = os.environ if environ is None else environ
    owner, name = repo.split("/", 1)
    return (env.get("NGINX_EVAL_REPO_URL") or DEFAULT_REPO_URL).format(owner=owner, name=name)
