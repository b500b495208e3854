#!/usr/bin/env python3
"""Benchmark the scoring pipeline on real nginx with the shipped tasks (all of them unless
--tasks N), and print a table with the floor of each scoring run.

Measures, in one work directory:
  (e) a cold `doit run nginx:gold` (no builds, an empty ccache, no kept configure tests; the
      clones exist: they come from local mirrors and are not what is measured);
  (f) a warm one: the base builds kept, the gold builds, their results and the ccache removed,
      as an agent mode sees it (its patches are new to the cache);
  (a) a one-file patch from a warm base build (median of 5), through build.ensure_build;
  (c) the no-op rerun of every mode on every task (after `doit run nginx` with AGENT=true, a
      stand-in agent that changes nothing: no API calls);
  (d) the doit process's peak memory (not the compilers and tests it starts), over every run;
  (g) after (e) and after (f), when the run judged gold's strictness (strict_gold=1: not the
      README's command, whose gold is not judged; --strict-only): the strict stages' cost per
      gold patch (strict.json's seconds.total; median and 90th percentile) beside its floor
      (strict.json's floor: the patch's sanitizer build, made once, plus one run of each of its
      test files), a line per patch, and how many gold patches are strict, not strict, or not
      judged (with the reasons);
  with --batch also (b): gold, none and a one-file candidate per task in one cold run, in a cache
  of its own, against the naive loop (clean configure, make and prove for each patch, one after
  another; --skip-naive leaves it out).

Every doit run is the README's command: no -n (the limits per kind of work decide), unless
--jobs N. For (e) and (f) it prints where the wall time went, from the records and the clock:

- the floor: the graded test files' wall time divided by the proves that can run at once, plus
  the CPU time of the builds the run made divided by the cores (each build once: the content-
  addressed cache makes none twice), and the measured time as a multiple of it;
- the share of the wall time in which builds ran, proves ran, and neither (the harness alone:
  loading, scheduling, git, digests, the report), from each build's and test file's end (its
  record's or TAP file's time) and duration;
- the processors' idle share, from /proc/stat every second, overall and while proves ran
  without a build (if the cores idle there, more proves could run at once), and the test files'
  CPU time per wall second.

Needs local mirrors: NGINX_EVAL_REPO_URL=/path/{owner}+{name}/repo. Everything it writes goes to
--workdir (default: a new directory under /tmp), never to the project's cache or results.

    python scripts/bench.py [--tasks N] [--workdir DIR] [--jobs N] [--set NAME=VALUE ...]
                            [--cold-only] [--batch [--skip-naive]] [--strict-only]

--noop-only measures (c) and (d) alone, in a --workdir where an earlier run made the builds.
--strict-only measures (g) alone in a --workdir where a run with strict=0 made the normal builds
(--warm-only: the warm run alone, where a strict run made the bases' sanitizer builds):
`nginx:gold` with strict_gold=1 cold (the sanitizer builds and the reference runs are new), then
warm (the sanitizer builds of the bases and their runs kept, as an agent mode finds them). The
floor of such a run also counts one run of each strict test file, divided by the proves.
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nginx_eval.build import stage as build_stage  # noqa: E402
from nginx_eval.build.cache import EMPTY_PATCH_SHA  # noqa: E402
from nginx_eval.core import jsonio, limits  # noqa: E402
from nginx_eval.core.gitcmd import changed_files, extract_tree, file_at, gold_diff  # noqa: E402
from nginx_eval.core.layout import Layout  # noqa: E402
from nginx_eval.core.tasknames import repo_task  # noqa: E402
from nginx_eval.core.trees import remove_tree  # noqa: E402
from nginx_eval.prove.stage import run_prove_files  # noqa: E402
from nginx_eval.prove.tree import extract_tests  # noqa: E402
from nginx_eval.run.benchmark import load_benchmark  # noqa: E402

# Runs doit in this process and reports its peak RSS: the harness's own memory.
DOIT_WITH_MAXRSS = """
import resource, sys
from doit.doit_cmd import DoitMain
from doit.cmd_base import DodoTaskLoader
code = DoitMain(DodoTaskLoader()).run(sys.argv[1:])
sys.stderr.write("MAXRSS_KB %d\\n" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
sys.exit(code)
"""
RUN = "bench"


# -- the processors' idle share ------------------------------------------------------------------


def cpu_times():
    """(idle, total) jiffies of all processors since boot (/proc/stat's first line)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return idle, sum(fields[:8])  # guest time is in user


class CpuSampler:
    """/proc/stat every second while a run goes on: [(wall clock, idle share of the second)]."""

    def __init__(self):
        self.samples, self.stop = [], threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        last = cpu_times()
        while not self.stop.wait(1.0):
            now = cpu_times()
            total = now[1] - last[1]
            if total > 0:
                self.samples.append((time.time(), (now[0] - last[0]) / total))
            last = now

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def idle_share(self, during=None):
        """The mean idle share of the samples, or of those whose second falls in `during`
        (sorted, disjoint intervals); None without samples."""
        picked = [
            share
            for t, share in self.samples
            if during is None or any(s <= t - 0.5 <= e for s, e in during)
        ]
        return statistics.mean(picked) if picked else None


# -- intervals -----------------------------------------------------------------------------------


def union(intervals):
    """The sorted, disjoint union of (start, end) intervals."""
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def length(intervals):
    return sum(e - s for s, e in intervals)


def minus(intervals, other):
    """The parts of the disjoint `intervals` outside the disjoint `other`."""
    out = []
    for s, e in intervals:
        for os_, oe in other:
            if oe <= s or os_ >= e:
                continue
            if os_ > s:
                out.append((s, os_))
            s = max(s, oe)
        if s < e:
            out.append((s, e))
    return out


def clip(intervals, start, end):
    return [(max(s, start), min(e, end)) for s, e in intervals if e > start and s < end]


# -- what a scoring run's records say --------------------------------------------------------------


class Records:
    """The builds a run made (the cache's records that appeared during it) and the test files
    it ran (the mode's prove.json files written during it)."""

    def __init__(self, layout, mode, tasks, start, end, keys_before):
        self.start, self.end = start, end
        self.builds = []
        for path in layout.builds.glob("*/build.json"):
            if path.parent.name not in keys_before:
                record = jsonio.read_json(path) or {}
                self.builds.append(dict(record, ended=path.stat().st_mtime))
        self.files = []
        for t in tasks:
            prove_json = layout.prove_json(mode, t.instance_id)
            if not prove_json.exists() or prove_json.stat().st_mtime < start:
                continue
            record = jsonio.read_json(prove_json) or {}
            tap = layout.tap_dir(mode, t.instance_id)
            for part in ("files", "reference", "reruns"):
                for name, f in (record.get(part) or {}).items():
                    if f.get("missing"):
                        continue
                    path = tap / f["tap"]
                    ended = path.stat().st_mtime if path.exists() else prove_json.stat().st_mtime
                    self.files.append(dict(f, part=part, name=name, ended=ended))
        # The strict stages that ran: their floor's test files, run once.
        self.strict_tests = 0.0
        for t in tasks:
            strict_json = layout.strict_json(mode, t.instance_id)
            if strict_json.exists() and strict_json.stat().st_mtime >= start:
                floor = (jsonio.read_json(strict_json) or {}).get("floor") or {}
                self.strict_tests += floor.get("tests") or 0.0

    def build_seconds(self):
        return sum(b.get("seconds") or 0 for b in self.builds)

    def build_cpu(self):
        return sum(b.get("cpu_seconds") or 0 for b in self.builds)

    def kinds(self):
        out = {}
        for b in self.builds:
            n, s = out.get(b.get("kind"), (0, 0.0))
            out[b.get("kind")] = (n + 1, s + (b.get("seconds") or 0))
        return out

    def test_seconds(self, parts=("files",)):
        return sum(f["seconds"] for f in self.files if f["part"] in parts)

    def test_cpu(self):
        return sum(f.get("cpu_seconds") or 0 for f in self.files)

    def longest_file(self):
        return max(((f["seconds"], f["name"]) for f in self.files), default=(0.0, "-"))

    def intervals(self):
        """(build intervals, prove intervals), each a disjoint union clipped to the run."""
        builds = [(b["ended"] - (b.get("seconds") or 0), b["ended"]) for b in self.builds]
        proves = [(f["ended"] - f["seconds"], f["ended"]) for f in self.files]
        return (
            union(clip(builds, self.start, self.end)),
            union(clip(proves, self.start, self.end)),
        )


def where_it_went(records, wall, proves, cores, sampler):
    """{figure: value} of a scoring run: the floor, the shares of its wall time, idle shares."""
    graded, build_cpu = records.test_seconds(), records.build_cpu()
    tests = graded + records.strict_tests
    floor = tests / proves + build_cpu / cores
    builds, tests_running = records.intervals()
    anything = union(builds + tests_running)
    proves_alone = minus(tests_running, builds)
    test_wall = records.test_seconds(("files", "reference", "reruns"))
    return {
        "seconds": round(wall, 1),
        "floor": round(floor, 1),
        "ratio": round(wall / floor, 2),
        "tests": round(tests, 1),
        "proves": proves,
        "build_cpu": round(build_cpu, 1),
        "cores": cores,
        "build_seconds": round(records.build_seconds(), 1),
        "builds": {k or "none": [n, round(s, 1)] for k, (n, s) in records.kinds().items()},
        "reference_and_reruns": round(test_wall - graded, 1),
        "strict_tests": round(records.strict_tests, 1),
        "longest_file": list(records.longest_file()),
        "share_builds": round(length(builds) / wall, 3),
        "share_proves": round(length(tests_running) / wall, 3),
        "share_harness_alone": round(1 - length(anything) / wall, 3),
        "test_cpu_per_wall": round(records.test_cpu() / test_wall, 3) if test_wall else None,
        "idle": _rounded(sampler.idle_share()),
        "idle_proves_alone": _rounded(sampler.idle_share(proves_alone)),
        "seconds_proves_alone": round(length(proves_alone), 1),
    }


def _rounded(value):
    return None if value is None else round(value, 3)


def describe(name, f):
    """The lines that say where a scoring run's time went."""
    kinds = ", ".join(f"{n} {kind} {s:.0f} s" for kind, (n, s) in sorted(f["builds"].items()))
    idle = lambda v: "?" if v is None else f"{100 * v:.0f}%"
    return [
        f"{name}: {f['seconds']:.1f} s, floor {f['floor']:.1f} s ({f['ratio']:.2f}x): tests "
        f"{f['tests']:.1f} s / {f['proves']} proves + builds {f['build_cpu']:.1f} CPU s / "
        f"{f['cores']} cores"
        + (
            f" (the tests include {f['strict_tests']:.1f} s of strict test files, run once)"
            if f.get("strict_tests")
            else ""
        ),
        f"  builds made: {kinds or 'none'} (wall {f['build_seconds']:.0f} s); reference runs "
        f"and reruns {f['reference_and_reruns']:.1f} s; longest file {f['longest_file'][1]} "
        f"{f['longest_file'][0]:.1f} s",
        f"  wall time with builds running {100 * f['share_builds']:.0f}%, proves running "
        f"{100 * f['share_proves']:.0f}%, the harness alone {100 * f['share_harness_alone']:.0f}%",
        f"  processors idle {idle(f['idle'])} overall, {idle(f['idle_proves_alone'])} while "
        f"proves ran without a build ({f['seconds_proves_alone']:.0f} s); a test file used "
        f"{f['test_cpu_per_wall']} CPU s per wall second",
        f"  the run's processes used {idle(f.get('share_ours'))} of the processors, "
        f"{f.get('cpu', 0):.0f} CPU s (the rest of what was not idle: other programs on the "
        f"machine)",
    ]


def strict_costs(layout, mode, tasks):
    """[(instance id, seconds, floor)] of the strict stage per patch of `mode` it judged:
    strict.json's ``seconds.total`` (the sanitizer builds and the test runs, its waits for slots
    left out) and its ``floor`` (the patch's sanitizer build's own time plus one run of each of
    its test files; None in a record without one)."""
    costs = []
    for t in tasks:
        record = jsonio.read_json(layout.strict_json(mode, t.instance_id)) or {}
        total = (record.get("seconds") or {}).get("total")
        floor = record.get("floor")
        if isinstance(total, (int, float)):
            costs.append((t.instance_id, total, floor["build"] + floor["tests"] if floor else None))
    return costs


def strict_verdicts(layout, mode, tasks):
    """{"strict": n, "not strict": n, "not judged": n} over the grade.json of `mode`, and
    {reason: n} of those not strict or not judged."""
    counts, reasons = {"strict": 0, "not strict": 0, "not judged": 0}, {}
    for t in tasks:
        grade = jsonio.read_json(layout.grade_json(mode, t.instance_id)) or {}
        verdict = grade.get("strict")
        key = {True: "strict", False: "not strict"}.get(verdict, "not judged")
        counts[key] += 1
        if verdict is not True:
            reason = grade.get("strict_reason") or "no grade.json"
            reasons[reason] = reasons.get(reason, 0) + 1
    return counts, reasons


def percentile(values, q):
    """The q-th percentile (0-100) of `values`, as numpy's default (linear) computes it."""
    import numpy

    return float(numpy.percentile(values, q))


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = Path(args.workdir or tempfile.mkdtemp(prefix="nginx-eval-bench-")).resolve()
        self.work.mkdir(parents=True, exist_ok=True)
        self.env = dict(
            os.environ,
            NGINX_EVAL_ROOT=str(ROOT),
            NGINX_EVAL_CACHE=str(self.work / "cache"),
            NGINX_EVAL_RESULTS=str(self.work / "results"),
            AGENT="true",
        )
        # As a user's shell runs doit: Python keeps its compiled modules (the test suite turns
        # that off, and a no-op would pay for compiling the package each time).
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.maxrss_kb = 0
        bench = load_benchmark(ROOT / "tasks" / "nginx.json")
        self.tasks = list(bench.tasks[: args.tasks] if args.tasks else bench.tasks)
        self.whole = len(self.tasks) == len(bench.tasks)
        self.instances = ",".join(t.instance_id for t in self.tasks)
        self.layout = Layout(
            root=ROOT, cache=self.work / "cache", results_root=self.work / "results", run=args.run
        )
        self.variables = list(args.set or [])
        given = dict(v.split("=", 1) for v in self.variables)
        self.proves = int(given.get("proves") or limits.default_counts()["proves"])
        self.cores = os.cpu_count() or 2
        self.rows, self.figures = [], {}

    def doit(self, *targets, jobs=None, work=None, sampler=None):
        """Run doit on `targets` (jobs: its -n); `work`: another directory for the cache and
        results. (seconds, tasks executed)."""
        env = (
            self.env
            if work is None
            else dict(
                self.env,
                NGINX_EVAL_CACHE=str(work / "cache"),
                NGINX_EVAL_RESULTS=str(work / "results"),
            )
        )
        argv = [sys.executable, "-c", DOIT_WITH_MAXRSS, "-f", str(ROOT / "dodo.py"), "run"]
        jobs = jobs or self.args.jobs
        if jobs:
            argv += ["-n", str(jobs), "-P", "thread"]
        argv += [*targets, f"run={self.layout.run}", f"instances={self.instances}", *self.variables]
        start, used = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        seconds = time.monotonic() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # doit and everything it waited for: compilers, tests, git.
        self.last_cpu = (after.ru_utime - used.ru_utime) + (after.ru_stime - used.ru_stime)
        if proc.returncode != 0:
            sys.exit(
                f"doit {' '.join(targets)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        for line in proc.stderr.splitlines():
            if line.startswith("MAXRSS_KB "):
                self.maxrss_kb = max(self.maxrss_kb, int(line.split()[1]))
        executed = sum(1 for line in proc.stdout.splitlines() if line.startswith(".  "))
        return seconds, executed

    def scoring_run(self, key, label, target, layout):
        """Time `doit run <target>` with the processors sampled, and say where the time went."""
        keys_before = set(os.listdir(layout.builds)) if layout.builds.is_dir() else set()
        start = time.time()
        with CpuSampler() as sampler:
            seconds, _ = self.doit(target, work=layout.cache.parent)
        records = Records(layout, target.split(":")[1], self.tasks, start, time.time(), keys_before)
        figures = where_it_went(records, seconds, self.proves, self.cores, sampler)
        figures["share_ours"] = round(self.last_cpu / (seconds * self.cores), 3)
        figures["cpu"] = round(self.last_cpu, 1)
        self.figures[key] = figures
        for line in describe(label, figures):
            print(line, flush=True)
        self.row(
            key,
            label,
            f"{seconds:.1f} s",
            f"{figures['floor']:.1f} s",
            f"≤ {ROWS_TARGETS[key]}× floor",
        )
        return figures

    # -- candidate patches ----------------------------------------------------------------
    def one_file_patch(self, task, marker):
        """A patch that changes real code (not a comment: ccache would hit) in one .c file the
        gold fix touches: a plausible but wrong candidate."""
        bare = self.layout.bare_repo(task.repo)
        path = next(
            f
            for status, f in changed_files(bare, task.base_commit, task.fix_commit)
            if status == "M" and f.endswith(".c")
        )
        old = file_at(bare, task.base_commit, path).decode()
        ident = "ngx_eval_" + "".join(c if c.isalnum() else "_" for c in marker)
        added = f'static const char {ident}[] __attribute__((used)) = "{marker}";\n'
        count = old.count("\n")
        return (
            f"--- a/{path}\n+++ b/{path}\n@@ -{count},1 +{count},2 @@\n"
            f" {old.splitlines()[-1]}\n+{added}"
        ).encode()

    def write_candidates(self, marker):
        path = self.work / f"candidates-{marker}.jsonl"
        with open(path, "w") as f:
            for t in self.tasks:
                patch = self.one_file_patch(t, f"{marker}_{t.instance_id}").decode()
                f.write(
                    json.dumps(
                        {
                            "instance_id": t.instance_id,
                            "model_patch": patch,
                            "model_name_or_path": "bench-candidate",
                        }
                    )
                    + "\n"
                )
        return path

    # -- measurements -------------------------------------------------------------------------
    def run(self):
        print(
            f"workdir {self.work}; {len(self.tasks)} tasks; {self.cores} cores; proves at "
            f"once {self.proves}; load {os.getloadavg()}",
            flush=True,
        )
        self.loads = [os.getloadavg()]
        self.doit(*[repo_task(r) for r in ("nginx/nginx", "nginx/nginx-tests")])
        n = len(self.tasks)
        if self.args.strict_only:
            return self.strict_only()
        if self.args.noop_only:
            return self.noop_only()
        self.scoring_run("e", f"cold `doit run nginx:gold`, {n} tasks", "nginx:gold", self.layout)
        self.strict_row("g cold", "cold")
        if self.args.cold_only:
            return self.finish()
        self.forget_gold_builds()
        self.scoring_run(
            "f", f"warm `doit run nginx:gold` (bases built), {n} tasks", "nginx:gold", self.layout
        )
        self.strict_row("g warm", "warm")
        one_file, cpu = self.one_file_builds()
        self.row(
            "a",
            f"one-file patch from a warm base build (median of {len(one_file)}; floor: "
            "the CPU time of its build steps)",
            f"{statistics.median(one_file):.2f} s",
            f"{statistics.median(cpu):.2f} s",
            "≤ 0.5 s",
        )
        if self.args.batch:
            self.batch()
        self.noop_row()
        self.finish()

    def noop_row(self):
        """(c): every mode with the stand-in agent, then the median of three no-op reruns."""
        self.doit("nginx")
        noop = [self.doit("nginx")[0] for _ in range(3)]
        executed = self.doit("nginx")[1]
        self.row(
            "c",
            f"no-op rerun of every mode on every task ({executed} tasks executed; "
            "floor: Python and doit starting, `doit --version`)",
            f"{statistics.median(noop):.2f} s",
            f"{self.doit_start():.2f} s",
            "≤ 1 s",
        )

    def noop_only(self):
        """(c) and (d) alone, in a workdir where a scoring run made the builds."""
        self.noop_row()
        self.finish()

    def strict_row(self, key, label):
        """(g): the strict stages' cost per gold patch of the run that just ended, and its
        verdicts."""
        rows = strict_costs(self.layout, "gold", self.tasks)
        counts, reasons = strict_verdicts(self.layout, "gold", self.tasks)
        if not rows:
            print(
                f"  ({key}) strict stages: no strict.json records a cost (gold not judged: "
                "strict_gold=0?)",
                flush=True,
            )
            return
        costs = [total for _, total, _ in rows]
        floors = [floor for _, _, floor in rows if floor is not None]
        for iid, total, floor in rows:
            ratio = f" ({total / floor:.2f}x)" if floor else ""
            print(f"      {iid}: {total:.1f} s, floor {floor or 0:.1f} s{ratio}", flush=True)
        ratios = [total / floor for _, total, floor in rows if floor]
        self.figures[key] = {
            "median": statistics.median(costs),
            "p90": percentile(costs, 90),
            "floor_median": statistics.median(floors) if floors else None,
            "ratio_median": statistics.median(ratios) if ratios else None,
            "patches": {iid: [total, floor] for iid, total, floor in rows},
        }
        self.row(
            key,
            f"strict stages per gold patch, {label} (median of {len(costs)}; "
            f"90th percentile {percentile(costs, 90):.1f} s; median of the patches' "
            f"multiples of their floor "
            + (f"{statistics.median(ratios):.2f}x" if ratios else "-")
            + f"; gold strict {counts['strict']}, not strict {counts['not strict']}, not "
            f"judged {counts['not judged']})",
            f"{statistics.median(costs):.1f} s",
            f"{statistics.median(floors):.1f} s" if floors else "",
            "warm: median ≤ 1.3× floor and ≤ 12 s" if key.endswith("warm") else "",
        )
        for reason, n in sorted(reasons.items(), key=lambda r: -r[1]):
            print(f"      {n} × {reason}", flush=True)

    def strict_only(self):
        """(g) alone, over the normal builds a strict=0 run left in the workdir."""
        self.variables = [
            v for v in self.variables if not v.startswith(("strict=", "strict_gold="))
        ]
        self.variables += ["strict=1", "strict_gold=1"]
        remove_tree(self.layout.mode_dir("gold"), ignore_errors=True)
        n = len(self.tasks)
        if not self.args.warm_only:
            self.scoring_run(
                "e",
                f"`doit run nginx:gold strict_gold=1`, normal builds kept, sanitizer builds "
                f"cold, {n} tasks",
                "nginx:gold",
                self.layout,
            )
            self.strict_row("g cold", "cold (sanitizer builds and reference runs new)")
        self.forget_gold_builds()
        self.scoring_run(
            "f",
            f"warm `doit run nginx:gold strict_gold=1` (bases built), {n} tasks",
            "nginx:gold",
            self.layout,
        )
        self.strict_row("g warm", "warm (as an agent mode: bases built)")
        self.finish()

    def finish(self):
        self.row(
            "d",
            "harness peak memory (doit process, max over all runs)",
            f"{self.maxrss_kb / 1024:.0f} MiB",
            "",
            "< 100 MiB",
        )
        self.loads.append(os.getloadavg())
        self.print_table()

    def modes(self):
        from nginx_eval.run.modes import load_modes

        return load_modes(self.layout.modes_file, self.layout.templates_dir).values()

    def forget_gold_builds(self):
        """The cache as an agent mode finds it: base builds and their strict runs kept; the gold
        builds, their strict runs, the gold results and the ccache gone (an agent's patch is
        new to the cache)."""
        for path in self.layout.builds.glob("*/build.json"):
            if (jsonio.read_json(path) or {}).get("patch_sha256") != EMPTY_PATCH_SHA:
                remove_tree(path.parent)
                remove_tree(self.layout.cache / "strict-runs" / path.parent.name)
        remove_tree(self.layout.mode_dir("gold"), ignore_errors=True)
        remove_tree(self.layout.ccache_dir, ignore_errors=True)

    def batch(self):
        """(b): gold, none and a candidate per task in one cold run, and the naive loop."""
        work = self.work / "batch"
        self.doit(*[repo_task(r) for r in ("nginx/nginx", "nginx/nginx-tests")], work=work)
        candidates = self.write_candidates("batch")
        batch, _ = self.doit(
            "nginx:gold", "nginx:none", "nginx:file", f"predictions={candidates}", work=work
        )
        n_patches = 3 * len(self.tasks)
        self.row(
            "b",
            f"harness: {n_patches} patches (gold, none, candidate) in one `doit run`, cold cache",
            f"{batch:.1f} s",
            "",
            "",
        )
        if self.args.skip_naive:
            return
        naive, clean_builds = self.naive_loop(candidates)
        self.row("b", f"naive loop: the same {n_patches} patches", f"{naive:.1f} s", "", "")
        self.row(
            "b", "speed-up of the harness over the naive loop", f"{naive / batch:.1f}×", "", "≥ 4×"
        )
        self.row(
            "a",
            "clean configure + make (median of the naive loop's builds)",
            f"{statistics.median(clean_builds):.1f} s",
            "",
            "≈ 20 s",
        )

    def doit_start(self):
        """The median time Python and doit take to start and stop (no dodo.py read)."""
        times = []
        for _ in range(5):
            start = time.monotonic()
            subprocess.run(
                [sys.executable, "-m", "doit", "--version"],
                env=self.env,
                capture_output=True,
                check=True,
            )
            times.append(time.monotonic() - start)
        return statistics.median(times)

    def one_file_builds(self):
        """Time incremental builds of fresh one-file patches on warm base builds: ([seconds],
        [the CPU seconds of their build steps])."""
        times, cpu = [], []
        for t in self.tasks[: max(3, min(5, len(self.tasks)))]:
            patch = self.one_file_patch(t, f"one_{int(time.time() * 1000)}")
            start = time.monotonic()
            record = build_stage.ensure_build(
                self.layout, self.layout.bare_repo(t.repo), t.base_commit, t.configure_flags, patch
            )
            elapsed = time.monotonic() - start
            if record["status"] == "built" and record["kind"] == "incremental":
                times.append(elapsed)
                cpu.append(record.get("cpu_seconds") or 0.0)
        return times, cpu

    def naive_loop(self, candidates):
        """Clean tree, configure, make and prove for every patch, with no cache of any kind."""
        rows = {
            json.loads(line)["instance_id"]: json.loads(line)["model_patch"].encode()
            for line in open(candidates)
        }
        env = dict(os.environ, CCACHE_DISABLE="1")
        clean_builds, start = [], time.monotonic()
        for t in self.tasks:
            bare = self.layout.bare_repo(t.repo)
            gold = gold_diff(bare, t.base_commit, t.fix_commit)
            extract_tests(self.layout, t.test_repo, t.test_commit)
            for patch in (gold, b"", rows[t.instance_id]):
                tree = self.work / "naive" / "tree"
                shutil.rmtree(tree.parent, ignore_errors=True)
                build_start = time.monotonic()
                extract_tree(bare, t.base_commit, tree)
                if patch:
                    (tree.parent / "p.patch").write_bytes(patch)
                    subprocess.run(
                        ["patch", "-s", "-p1", "-i", str(tree.parent / "p.patch")],
                        cwd=tree,
                        check=True,
                    )
                with open(tree.parent / "build.log", "wb") as log:
                    subprocess.run(
                        ["./auto/configure", *t.configure_flags],
                        cwd=tree,
                        env=env,
                        stdout=log,
                        stderr=log,
                        check=True,
                    )
                    subprocess.run(
                        ["make", f"-j{self.cores}"],
                        cwd=tree,
                        env=env,
                        stdout=log,
                        stderr=log,
                        check=True,
                    )
                clean_builds.append(time.monotonic() - build_start)
                run_prove_files(
                    self.layout,
                    self.layout.tests_tree(t.test_commit),
                    tree / "objs" / "nginx",
                    t.test_files,
                    t.test_timeout,
                    tree.parent / "tap",
                )
        return time.monotonic() - start, clean_builds

    def row(self, key, what, value, floor, target):
        self.rows.append((key, what, value, floor, target))
        print(f"  ({key}) {what}: {value}" + (f" (floor {floor})" if floor else ""), flush=True)

    def print_table(self):
        cpu = next(
            (
                line.split(":", 1)[1].strip()
                for line in open("/proc/cpuinfo")
                if line.startswith("model name")
            ),
            "?",
        )
        commit = (
            subprocess.run(
                ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                capture_output=True,
                text=True,
            ).stdout.strip()
            or "?"
        )
        loads = " → ".join("/".join(f"{v:.1f}" for v in load) for load in self.loads)
        print(
            f"\nMachine: {self.cores} cores, {cpu}; {time.strftime('%Y-%m-%d')}; commit "
            f"{commit}; tasks: {len(self.tasks)}{' (the whole file)' if self.whole else ''}; "
            f"load averages (1/5/15 min) before → after: {loads}\n"
        )
        print("| | measure | value | floor | target |\n|---|---|---|---|---|")
        for key, what, value, floor, target in sorted(self.rows, key=lambda r: r[0]):
            print(f"| {key} | {what} | {value} | {floor} | {target} |")
        (self.work / "bench.json").write_text(
            json.dumps(
                {
                    "tasks": len(self.tasks),
                    "commit": commit,
                    "date": time.strftime("%Y-%m-%d"),
                    "loads": self.loads,
                    "rows": self.rows,
                    "figures": self.figures,
                    "maxrss_kb": self.maxrss_kb,
                },
                indent=2,
            )
        )


# The targets of the scoring runs, as multiples of their floor.
ROWS_TARGETS = {"e": 1.3, "f": 1.15}


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--tasks",
        type=int,
        help="only the first N tasks of tasks/nginx.json (default: all of them)",
    )
    ap.add_argument("--workdir", help="where caches and results go (default: a new /tmp dir)")
    ap.add_argument(
        "--jobs", type=int, help="doit -n N -P thread (default: no -n, as the README's commands)"
    )
    ap.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="a doit variable for every run, e.g. proves=8 (repeatable)",
    )
    ap.add_argument("--cold-only", action="store_true", help="only (e), the cold gold run")
    ap.add_argument(
        "--batch",
        action="store_true",
        help="also (b): a cold batch of 3 patches per task, and the naive loop",
    )
    ap.add_argument("--skip-naive", action="store_true", help="(b) without the naive loop")
    ap.add_argument(
        "--run",
        default=RUN,
        help=f"the run's name (default {RUN}): another run in the same --workdir shares its builds",
    )
    ap.add_argument(
        "--noop-only",
        action="store_true",
        help="only (c) and (d), in a --workdir where a run made the builds",
    )
    ap.add_argument(
        "--warm-only",
        action="store_true",
        help="with --strict-only: only the warm run, in a --workdir where a strict run made the "
        "bases' sanitizer builds",
    )
    ap.add_argument(
        "--strict-only",
        action="store_true",
        help="only (g), in a --workdir where a strict=0 run made the normal builds",
    )
    args = ap.parse_args()
    if not os.environ.get("NGINX_EVAL_REPO_URL"):
        sys.exit("set NGINX_EVAL_REPO_URL to local mirrors, e.g. /srv/mirrors/{owner}+{name}/repo")
    for item in args.set or []:
        if "=" not in item:
            ap.error(f"--set {item}: expected NAME=VALUE")
    for flag, given in (("--strict-only", args.strict_only), ("--noop-only", args.noop_only)):
        if given and not (args.workdir and (Path(args.workdir) / "cache").is_dir()):
            ap.error(f"{flag}: give the --workdir of an earlier run (its cache holds the builds)")
    if args.tasks is not None and args.tasks < 1:
        ap.error("--tasks: expected a whole number >= 1")
    Bench(args).run()


if __name__ == "__main__":
    main()
