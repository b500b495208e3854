"""Where everything lives. The only module that builds cache and result paths.

Three roots: the project (``NGINX_EVAL_ROOT``, default the directory of dodo.py: the benchmark
files in tasks/, modes.toml, templates/), the results (``NGINX_EVAL_RESULTS``, default
``<root>/results``: a directory per run, a directory per mode and task in it) and the cache
(``NGINX_EVAL_CACHE``, default ``<root>/.cache``: clones, test trees, workspaces, builds, locks,
compiled templates, doit's database). Each path is a method or property of Layout; the map of
the whole tree, with the module that writes each file, is ARCHITECTURE.md's "Files on disk".
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
    """base / parts, made once: a run's units ask for the same few paths thousands of times, and
    building them anew is a cost of every doit command (docs/performance.md)."""
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
    def swebench_local_validation(self) -> Path:
        """Which SWE-bench tasks' local verdicts were validated here
        (scripts/validate_swebench_local.py; swebench/verdict.py: validation)."""
        return self.tasks_dir / "swebench-local-validation.jsonl"

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
    def process_figures(self) -> Path:
        """What the report read of each attempt's trajectory in this run (report/process.py),
        kept by the file's size and time so that a rendering reads only what changed."""
        return self.cache / "report" / f"process-{self.run}.json"

    @property
    def compiled_templates(self) -> Path:
        """Jinja's compiled report and site templates, each checked against its source."""
        return self.cache / "templates"

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

    # -- SWE-bench environments and local verdicts (swebench/envs.py, swebench/verdict.py) -------
    def swe_specs_json(self, swebench_version: str) -> Path:
        """What the swebench package of that version says of environments, read from it once."""
        return self.cache / "swe-envs" / f"specs-{swebench_version}.json"

    def swe_env_dir(self, key: str) -> Path:
        """A SWE-bench environment: ``venv/``, ``env.json``, ``build.log`` (swebench/envs.py)."""
        return self.cache / "swe-envs" / key

    def swe_env_scratch(self, key: str) -> Path:
        """An environment's build directory (its checkout), removed when the build ends."""
        return self.cache / "swe-envs" / f"{key}.build"

    def swe_instance_dir(self, key: str) -> Path:
        """A task's install at its base commit: ``venv/``, ``instance.json``, ``build.log``
        (swebench/envs.py)."""
        return self.cache / "swe-envs" / "instances" / key

    def swe_instance_scratch(self, key: str) -> Path:
        """An instance's build directory (its checkout), removed when the build ends."""
        return self.cache / "swe-envs" / "instances" / f"{key}.build"

    @property
    def swe_pip_cache(self) -> Path:
        """pip's cache, shared by the environments' builds."""
        return self.cache / "swe-envs" / "pip-cache"

    def swe_verdict_scratch(self, mode: str, iid: str) -> Path:
        """A local verdict's checkout and copy of the environment, removed when it is made."""
        return self.cache / "swe-verdicts" / self.run / mode / iid

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

    def agent_calls(self, mode: str, iid: str) -> Path:
        """The metering proxy's record of the attempt's model calls (meter/proxy.py), a line
        per call; an earlier attempt's moves to agent/attempt-<n>/ with its other logs."""
        return _joined(self.results_root, self.run, mode, iid, "agent", "calls.jsonl.gz")

    def agent_call_bodies(self, mode: str, iid: str) -> Path:
        """Each call's request and response, credentials taken out (meter/proxy.py)."""
        return _joined(self.results_root, self.run, mode, iid, "agent", "calls.bodies.jsonl.gz")

    def agent_atif(self, mode: str, iid: str) -> Path:
        """The attempt as an ATIF trajectory (transcript/atif.py)."""
        return _joined(self.results_root, self.run, mode, iid, "agent", "trajectory.atif.json")

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

    def local_verdict_json(self, mode: str, iid: str) -> Path:
        return _joined(self.results_root, self.run, mode, iid, "local-verdict.json")

    def local_verdict_log(self, mode: str, iid: str) -> Path:
        return _joined(self.results_root, self.run, mode, iid, "local-verdict.log")

    def results_jsonl(self, mode: str) -> Path:
        return self.mode_dir(mode) / "results.jsonl"

    def predictions_jsonl(self, mode: str) -> Path:
        return self.mode_dir(mode) / "predictions.jsonl"

    def pro_patches_json(self, mode: str) -> Path:
        """A SWE-bench Pro mode's patches in its harness's --patch_path format (swebench/pro.py)."""
        return self.mode_dir(mode) / "patches.json"

    def pro_samples_jsonl(self, mode: str) -> Path:
        """A SWE-bench Pro mode's tasks as its harness's --raw_sample_path (swebench/pro.py)."""
        return self.mode_dir(mode) / "samples.jsonl"

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
