#!/usr/bin/env python3
"""Benchmark the scoring pipeline on real nginx with the shipped tasks, and print a table.

Measures, in one run on this machine:
  (a) build time of a one-file patch from a warm base build vs a clean configure + make;
  (b) scoring a batch of patches (gold, none and one more candidate per task) with the harness,
      one `doit run nginx:gold nginx:none nginx:file -n 2` on a cold cache, vs the naive loop
      (clean configure, make and prove for every patch, one after another);
  (c) the no-op rerun of the whole benchmark in every mode;
  (d) the harness's peak memory (the doit process itself, not the compilers it starts);
  (e) a cold `doit run nginx:gold -n 2` of the whole benchmark (in a cache of its own).

"Cold" means no builds and an empty ccache; the clones exist (they come from local mirrors here,
from the network elsewhere, and are not what is measured).

The agent modes run with AGENT=true, a stand-in agent that changes nothing (no API calls).
Needs local mirrors: NGINX_EVAL_REPO_URL=/path/{owner}+{name}/repo. Everything it writes goes to
--workdir (default: a new directory under /tmp), never to the project's cache or results.

    python scripts/bench.py [--tasks N] [--workdir DIR] [--jobs 2] [--skip-naive] [--cold-only]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nginx_eval.build import stage as build_stage  # noqa: E402
from nginx_eval.run.benchmark import load_benchmark  # noqa: E402
from nginx_eval.core.gitcmd import changed_files, extract_tree, file_at, gold_diff  # noqa: E402
from nginx_eval.core.layout import Layout  # noqa: E402
from nginx_eval.core.tasknames import repo_task  # noqa: E402
from nginx_eval.prove.stage import run_prove_files  # noqa: E402
from nginx_eval.prove.tree import extract_tests  # noqa: E402

# Runs doit in this process and reports its peak RSS: the harness's own memory.
DOIT_WITH_MAXRSS = """
import resource, sys
from doit.doit_cmd import DoitMain
from doit.cmd_base import DodoTaskLoader
code = DoitMain(DodoTaskLoader()).run(sys.argv[1:])
sys.stderr.write("MAXRSS_KB %d\\n" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
sys.exit(code)
"""


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = Path(args.workdir or tempfile.mkdtemp(prefix="nginx-eval-bench-")).resolve()
        self.work.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ, NGINX_EVAL_ROOT=str(ROOT),
                        NGINX_EVAL_CACHE=str(self.work / "cache"),
                        NGINX_EVAL_RESULTS=str(self.work / "results"), AGENT="true")
        self.maxrss_kb = 0
        bench = load_benchmark(ROOT / "tasks" / "nginx.json")
        self.tasks = list(bench.tasks[: args.tasks] if args.tasks else bench.tasks)
        self.instances = ",".join(t.instance_id for t in self.tasks)
        self.layout = Layout(root=ROOT, cache=self.work / "cache", results_root=self.work / "results",
                             run="bench")
        self.rows = []

    def doit(self, *targets, jobs=None, work=None):
        """Run doit on `targets`; `work`: another directory for the cache and results."""
        env = self.env if work is None else dict(self.env, NGINX_EVAL_CACHE=str(work / "cache"),
                                                 NGINX_EVAL_RESULTS=str(work / "results"))
        argv = [sys.executable, "-c", DOIT_WITH_MAXRSS, "-f", str(ROOT / "dodo.py"), "run"]
        if jobs:
            argv += ["-n", str(jobs), "-P", "thread"]
        argv += [*targets, "run=bench", f"instances={self.instances}"]
        start = time.monotonic()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        seconds = time.monotonic() - start
        if proc.returncode != 0:
            sys.exit(f"doit {' '.join(targets)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        for line in proc.stderr.splitlines():
            if line.startswith("MAXRSS_KB "):
                self.maxrss_kb = max(self.maxrss_kb, int(line.split()[1]))
        executed = sum(1 for line in proc.stdout.splitlines() if line.startswith(".  "))
        return seconds, executed

    # -- candidate patches ----------------------------------------------------------------
    def one_file_patch(self, task, marker):
        """A patch that changes real code (not a comment: ccache would hit) in one .c file the
        gold fix touches: a plausible but wrong candidate."""
        bare = self.layout.bare_repo(task.repo)
        path = next(f for status, f in changed_files(bare, task.base_commit, task.fix_commit)
                    if status == "M" and f.endswith(".c"))
        old = file_at(bare, task.base_commit, path).decode()
        ident = "ngx_eval_" + "".join(c if c.isalnum() else "_" for c in marker)
        added = f'static const char {ident}[] __attribute__((used)) = "{marker}";\n'
        count = old.count("\n")
        return (f"--- a/{path}\n+++ b/{path}\n@@ -{count},1 +{count},2 @@\n"
                f" {old.splitlines()[-1]}\n+{added}").encode()

    def write_candidates(self, marker):
        path = self.work / f"candidates-{marker}.jsonl"
        with open(path, "w") as f:
            for t in self.tasks:
                patch = self.one_file_patch(t, f"{marker}_{t.instance_id}").decode()
                f.write(json.dumps({"instance_id": t.instance_id, "model_patch": patch,
                                    "model_name_or_path": "bench-candidate"}) + "\n")
        return path

    # -- measurements -------------------------------------------------------------------------
    def run(self):
        print(f"workdir {self.work}; {len(self.tasks)} tasks", flush=True)
        repos = [repo_task(r) for r in ("nginx/nginx", "nginx/nginx-tests")]
        cold_gold_work = self.work / "cold-gold"
        self.doit(*repos, work=cold_gold_work)
        cold_gold, _ = self.doit("nginx:gold", jobs=self.args.jobs, work=cold_gold_work)
        self.row("e", f"cold `doit run nginx:gold -n {self.args.jobs}`, {len(self.tasks)} tasks",
                 f"{cold_gold:.1f} s", "≤ 300 s")
        if self.args.cold_only:
            return self.print_table()
        self.doit(*repos)
        candidates = self.write_candidates("batch")
        batch, _ = self.doit("nginx:gold", "nginx:none", "nginx:file", f"predictions={candidates}",
                             jobs=self.args.jobs)
        n_patches = 3 * len(self.tasks)
        self.row("b", f"harness: {n_patches} patches (gold, none, candidate) in one "
                 f"`doit run -n {self.args.jobs}`, cold cache", f"{batch:.1f} s", "")
        one_file = self.one_file_builds()
        if not self.args.skip_naive:
            naive, clean_builds = self.naive_loop(candidates)
            self.row("b", f"naive loop: the same {n_patches} patches", f"{naive:.1f} s", "")
            self.row("b", "speed-up of the harness over the naive loop", f"{naive / batch:.1f}×", "≥ 4×")
            clean = statistics.median(clean_builds)
            self.row("a", "clean configure + make (median of the naive loop's builds)",
                     f"{clean:.1f} s", "≈ 20 s")
        self.row("a", "one-file patch from a warm base build (median of "
                 f"{len(one_file)})", f"{statistics.median(one_file):.2f} s", "≤ 3 s")
        self.doit("nginx", jobs=self.args.jobs)     # every mode, with the stand-in agent
        noop = [self.doit("nginx")[0] for _ in range(3)]
        executed = self.doit("nginx")[1]
        self.row("c", f"no-op rerun of every mode on every task ({executed} tasks executed)",
                 f"{statistics.median(noop):.2f} s", "≤ 1 s")
        self.row("d", "harness peak memory (doit process, max over all runs)",
                 f"{self.maxrss_kb / 1024:.0f} MiB", "")
        self.print_table()

    def one_file_builds(self):
        """Time incremental builds of fresh one-file patches on warm base builds."""
        times = []
        for t in self.tasks[: max(3, min(5, len(self.tasks)))]:
            patch = self.one_file_patch(t, f"one_{int(time.time() * 1000)}")
            start = time.monotonic()
            record = build_stage.ensure_build(self.layout, self.layout.bare_repo(t.repo),
                                              t.base_commit, t.configure_flags, patch)
            elapsed = time.monotonic() - start
            if record["status"] == "built" and record["kind"] == "incremental":
                times.append(elapsed)
        return times

    def naive_loop(self, candidates):
        """Clean tree, configure, make and prove for every patch, with no cache of any kind."""
        rows = {json.loads(l)["instance_id"]: json.loads(l)["model_patch"].encode()
                for l in open(candidates)}
        env = dict(os.environ, CCACHE_DISABLE="1")
        clean_builds, start = [], time.monotonic()
        for t in self.tasks:
            bare = self.layout.bare_repo(t.repo)
            gold = gold_diff(bare, t.base_commit, t.fix_commit)
            extract_tests(self.layout, t.test_repo, t.test_commit)
            for label, patch in (("gold", gold), ("none", b""), ("candidate", rows[t.instance_id])):
                tree = self.work / "naive" / "tree"
                shutil.rmtree(tree.parent, ignore_errors=True)
                build_start = time.monotonic()
                extract_tree(bare, t.base_commit, tree)
                if patch:
                    (tree.parent / "p.patch").write_bytes(patch)
                    subprocess.run(["patch", "-s", "-p1", "-i", str(tree.parent / "p.patch")],
                                   cwd=tree, check=True)
                with open(tree.parent / "build.log", "wb") as log:
                    subprocess.run(["./auto/configure", *t.configure_flags], cwd=tree, env=env,
                                   stdout=log, stderr=log, check=True)
                    subprocess.run(["make", "-j2"], cwd=tree, env=env, stdout=log, stderr=log,
                                   check=True)
                clean_builds.append(time.monotonic() - build_start)
                run_prove_files(self.layout, self.layout.tests_tree(t.test_commit),
                                tree / "objs" / "nginx",
                                t.test_files, t.test_timeout, tree.parent / "tap")
        return time.monotonic() - start, clean_builds

    def row(self, key, what, value, target):
        self.rows.append((key, what, value, target))
        print(f"  ({key}) {what}: {value}", flush=True)

    def print_table(self):
        cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                    if l.startswith("model name")), "?")
        print(f"\nMachine: {os.cpu_count()} cores, {cpu}; tasks: {len(self.tasks)}\n")
        print("| | measure | value | target |\n|---|---|---|---|")
        for key, what, value, target in sorted(self.rows, key=lambda r: r[0]):
            print(f"| {key} | {what} | {value} | {target} |")
        (self.work / "bench.json").write_text(json.dumps(
            {"tasks": len(self.tasks), "rows": self.rows, "maxrss_kb": self.maxrss_kb}, indent=2))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, help="only the first N tasks of tasks/nginx.json")
    ap.add_argument("--workdir", help="where caches and results go (default: a new /tmp dir)")
    ap.add_argument("--jobs", type=int, default=2, help="doit -n (default 2)")
    ap.add_argument("--cold-only", action="store_true", help="only (e), the cold gold run")
    ap.add_argument("--skip-naive", action="store_true", help="skip the naive loop (it is slow)")
    args = ap.parse_args()
    if not os.environ.get("NGINX_EVAL_REPO_URL"):
        sys.exit("set NGINX_EVAL_REPO_URL to local mirrors, e.g. /srv/mirrors/{owner}+{name}/repo")
    Bench(args).run()


if __name__ == "__main__":
    main()
