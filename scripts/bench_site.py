#!/usr/bin/env python3
"""Measure the run's static site (nginx_eval/report_site.py) at full size: the shipped benchmark's
tasks (173) in six modes (gold, none and the four agent modes of modes.toml), with result files
synthesized to the sizes real runs leave, and print a table.

What is synthesized, per unit (seeded, so every run of this script writes the same files):
grade.json (an outcome per mode: gold resolves, none does not, agent modes vary), patch.json and
model.patch (the gold mode's patch is the "fix"), build.json and a build.log of ~70 KB (nginx's
configure and make print about that much), prove.json with a TAP stream, stderr and nginx log per
test file, and for agent modes agent.json with its phases and a Claude Code transcript per phase
(15 to 60 turns, tool results of 100 B to 20 KB, plus the CLI's bookkeeping lines: 0.2 to 0.7 MB;
the real CLI's 3-turn transcript in the test suite is 0.28 MB, mostly bookkeeping). results.jsonl
and the report are then made by the harness's own code (summary.write_summary,
report.write_report), and the site by report_site.write_site.

Measured: (a) rendering the whole site cold, (b) the no-op (every page up to date), (c) after one
grade changed (two pages: its own and the index), (d) `doit run report` no-op and (e) after one
more grade changed, as a user runs them (doit loads the whole pipeline first); and the site's
size: all pages, the index, the largest page, and the result files the site links to instead.

    python3 scripts/bench_site.py [--workdir DIR] [--tasks N] [--keep]
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nginx_eval.core import jsonio  # noqa: E402
from nginx_eval.core.layout import Layout  # noqa: E402
from nginx_eval.report import site as report_site  # noqa: E402
from nginx_eval.report import stage as report  # noqa: E402
from nginx_eval.results import stage as summary  # noqa: E402
from nginx_eval.run.benchmark import load_benchmark  # noqa: E402
from nginx_eval.run.modes import AgentMode, load_modes  # noqa: E402
from nginx_eval.run.record import bind_run  # noqa: E402

RUN = "bench"
SEED = 32
AGENT_OUTCOMES = [
    ("resolved", 45),
    ("unresolved", 30),
    ("partially_resolved", 6),
    ("compile_failed", 8),
    ("patch_failed", 2),
    ("timeout", 4),
    ("agent_error", 2),
    ("env_error", 1),
    ("infra_error", 2),
]
TOOLS = ("Bash", "Read", "Grep", "Edit", "Glob")
WORDS = (
    "nginx",
    "request",
    "upstream",
    "buffer",
    "header",
    "ngx_http_request_t",
    "conf",
    "the",
    "a",
    "is",
    "returns",
    "NGX_OK",
    "NGX_ERROR",
    "r->headers_out",
    "if",
    "len",
    "ctx",
    "rc",
    "ngx_pnalloc",
    "chain",
    "last_buf",
    "location",
    "server",
    "test",
)


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def lines(rng, n, width=12):
    return "\n".join(words(rng, rng.randint(3, width)) for _ in range(n))


def diff(rng, path, n):
    body = []
    for _ in range(n):
        body += [f" {words(rng, 6)}", f"-{words(rng, 7)}", f"+{words(rng, 7)}"]
    return (
        f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n--- a/{path}\n"
        f"+++ b/{path}\n@@ -10,{n * 2} +10,{n * 2} @@\n" + "\n".join(body) + "\n"
    )


def transcript(rng, prompt, session, turns):
    """Lines of a Claude Code transcript: the shapes of the real CLI's (tests/claude_captures),
    bookkeeping included."""
    stamp = "2026-01-01T10:00:00.000Z"
    out = [
        {"type": "queue-operation", "operation": "enqueue", "sessionId": session},
        {
            "type": "user",
            "uuid": "u0",
            "timestamp": stamp,
            "sessionId": session,
            "message": {"role": "user", "content": prompt},
        },
        {
            "type": "attachment",
            "sessionId": session,
            "attachment": {"type": "prompt_snapshot", "systemPrompt": [lines(rng, 2500)]},
        },
        {"type": "api-request-shape", "sessionId": session, "shape": lines(rng, 800)},
    ]
    for n in range(turns):
        t = f"2026-01-01T10:{n // 60:02d}:{n % 60:02d}.000Z"
        tool = rng.choice(TOOLS)
        result = lines(rng, max(1, int(rng.lognormvariate(3.2, 1.1))))[:20000]
        call = {
            "type": "tool_use",
            "id": f"toolu_{n}",
            "name": tool,
            "input": {"command": f"grep -rn {rng.choice(WORDS)} src/http"}
            if tool == "Bash"
            else {"file_path": f"src/http/ngx_http_{rng.choice(WORDS)}.c"},
        }
        message = {"id": f"msg_{n}", "model": "claude-sonnet-4-5", "role": "assistant"}
        out += [
            {
                "type": "assistant",
                "timestamp": t,
                "sessionId": session,
                "message": dict(
                    message, content=[{"type": "text", "text": words(rng, rng.randint(5, 60))}]
                ),
            },
            {
                "type": "assistant",
                "timestamp": t,
                "sessionId": session,
                "message": dict(message, content=[call]),
            },
            {
                "type": "user",
                "timestamp": t,
                "sessionId": session,
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": f"toolu_{n}",
                            "content": result,
                            "is_error": rng.random() < 0.1,
                        }
                    ],
                },
            },
            {
                "type": "api-request-blob",
                "sessionId": session,
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": result}
                ],
            },
        ]
    return "".join(json.dumps(e) + "\n" for e in out)


class Synth:
    def __init__(self, layout, tasks, modes):
        self.layout, self.tasks, self.modes = layout, tasks, modes
        self.rng = random.Random(SEED)

    def outcome(self, mode):
        if mode == "gold":
            return "resolved"
        if mode == "none":
            return "unresolved"
        names, weights = zip(*AGENT_OUTCOMES, strict=True)
        return self.rng.choices(names, weights)[0]

    def unit(self, mode, task):
        layout, rng, iid = self.layout, self.rng, task.instance_id
        outcome = self.outcome(mode)
        task_dir = layout.task_dir(mode, iid)
        patch = (
            ""
            if mode == "none"
            else "".join(
                diff(rng, f"src/http/ngx_http_{rng.choice(WORDS)}.c", rng.randint(2, 12))
                for _ in range(rng.randint(1, 3))
            )
        )
        jsonio.write_text(layout.model_patch(mode, iid), patch)
        files = [
            line.split(" b/", 1)[1] for line in patch.splitlines() if line.startswith("diff --git")
        ]
        jsonio.write_json(
            layout.patch_json(mode, iid),
            {
                "files": files,
                "lines_added": patch.count("\n+") - len(files),
                "lines_removed": patch.count("\n-") - len(files),
                "sha256": jsonio.digest(patch),
                "bytes": len(patch),
                "binary": False,
                "left_out": [],
                "skipped_files": [],
                "note": "",
                "source": "workspace",
                "inputs": "x",
            },
        )
        built = outcome not in ("compile_failed", "patch_failed", "infra_error")
        jsonio.write_text(layout.build_log(mode, iid), lines(rng, 1500, 10))
        jsonio.write_json(
            layout.build_json(mode, iid),
            {
                "status": "built" if built else outcome,
                "kind": "incremental",
                "seconds": round(rng.uniform(2, 90), 3),
                "configure_flags": list(task.configure_flags),
                "compiler": {"version": "cc (Debian 12.2.0-14+deb12u1) 12.2.0"},
                "inputs": "x",
            },
        )
        prove_files = {}
        if built:
            for name in task.test_files:
                stem = name.replace("/", "__")
                n = rng.randint(10, 80)
                tap = (
                    "\n".join(
                        [f"{name} .. ", f"1..{n}"]
                        + [
                            f"{'ok' if rng.random() < 0.9 else 'not ok'} {i} - {words(rng, 5)}"
                            for i in range(1, n + 1)
                        ]
                    )
                    + "\n"
                )
                jsonio.write_text(layout.tap_dir(mode, iid) / f"{stem}.tap", tap)
                jsonio.write_text(layout.tap_dir(mode, iid) / f"{stem}.stderr", lines(rng, 20))
                jsonio.write_text(layout.tap_dir(mode, iid) / f"{stem}.nginx.log", lines(rng, 300))
                prove_files[name] = {
                    "exit_code": 0,
                    "timed_out": False,
                    "missing": False,
                    "seconds": round(rng.uniform(0.2, 8), 3),
                    "network": "private",
                    "tap": f"{stem}.tap",
                    "stderr": f"{stem}.stderr",
                    "nginx_log": f"{stem}.nginx.log",
                }
            jsonio.write_json(
                layout.prove_json(mode, iid),
                {
                    "files": prove_files,
                    "reference": {},
                    "notes": [],
                    "inputs": "x",
                    "versions": {"perl": "v5.36.0", "openssl": "OpenSSL 3.0.22"},
                },
            )
        agent_status = None
        if isinstance(self.modes[mode], AgentMode):
            agent_status = {
                "timeout": "timeout",
                "agent_error": "failed",
                "infra_error": "infra_error",
            }.get(outcome, "completed")
            self.agent(mode, task, agent_status)
        passed = outcome == "resolved"
        status = (
            outcome
            if outcome
            in ("compile_failed", "patch_failed", "env_error", "partially_resolved", "infra_error")
            else ("resolved" if passed else "unresolved")
        )
        f2p, p2p = list(task.fail_to_pass), list(task.pass_to_pass)
        half = len(f2p) // 2 if outcome == "partially_resolved" else (len(f2p) if passed else 0)
        jsonio.write_json(
            layout.grade_json(mode, iid),
            {
                "instance_id": iid,
                "mode": mode,
                "status": status,
                "resolved": passed,
                "fail_to_pass": {"passed": f2p[:half], "failed": f2p[half:]},
                "pass_to_pass": {"passed": p2p if built else [], "failed": [] if built else p2p},
                "env_errors": ["Perl module missing"] if outcome == "env_error" else [],
                "file_failures": [],
                "timed_out_files": [],
                "skipped_assertions": [],
                "agent_status": agent_status,
                "build_status": "built" if built else outcome,
                "inputs": "x",
            },
        )
        return task_dir

    def agent(self, mode, task, status):
        layout, rng, iid = self.layout, self.rng, task.instance_id
        phases = []
        for i, phase in enumerate(self.modes[mode].phases, 1):
            stem = f"{i}-{phase.name}"
            session = f"session-{mode}-{iid}"
            prompt = (
                f"A user reported the bug below.\n\n<issue>\n{task.problem_statement}\n</issue>"
            )
            jsonio.write_text(layout.agent_logs(mode, iid) / f"{stem}.prompt.md", prompt)
            jsonio.write_text(
                layout.agent_logs(mode, iid) / f"{stem}.transcript.jsonl",
                transcript(rng, prompt, session, rng.randint(15, 60)),
            )
            jsonio.write_text(layout.agent_logs(mode, iid) / f"{stem}.stdout", "{}\n")
            jsonio.write_text(layout.agent_logs(mode, iid) / f"{stem}.stderr", "")
            tokens = {
                "input": rng.randint(2000, 9000),
                "output": rng.randint(2000, 20000),
                "cache_read": rng.randint(10**5, 3 * 10**6),
                "cache_creation": rng.randint(10**4, 10**5),
            }
            phases.append(
                {
                    "name": phase.name,
                    "command": phase.command,
                    "exit_code": 0,
                    "timed_out": status == "timeout",
                    "wall_seconds": rng.uniform(60, 900),
                    "cost_usd": rng.uniform(0.1, 2.5),
                    "tokens": tokens,
                    "num_turns": 40,
                    "session_id": session,
                    "result": words(rng, 80),
                    "prompt_file": f"agent/{stem}.prompt.md",
                    "transcript": f"agent/{stem}.transcript.jsonl",
                    "stdout": f"agent/{stem}.stdout",
                    "stderr": f"agent/{stem}.stderr",
                }
            )
        jsonio.write_json(
            layout.agent_json(mode, iid),
            {
                "mode": mode,
                "instance_id": iid,
                "status": status,
                "error": "" if status == "completed" else f"phase solve: {status}",
                "attempts": [{"status": status}],
                "agent_version": "2.1.330 (Claude Code)",
                "wall_seconds": sum(p["wall_seconds"] for p in phases),
                "cost_usd": sum(p["cost_usd"] for p in phases),
                "phases": phases,
                "tokens": {k: sum(p["tokens"][k] for p in phases) for k in phases[0]["tokens"]},
                "trajectory": None,
                "inputs": "x",
            },
        )


def size(paths):
    return sum(p.stat().st_size for p in paths)


def mb(n):
    return f"{n / 1e6:.1f} MB"


def timed(label, rows, func):
    start = time.monotonic()
    value = func()
    rows.append((label, f"{time.monotonic() - start:.2f} s"))
    return value


def doit_report(work, env):
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "doit", "-f", str(ROOT / "dodo.py"), "run", "report", f"run={RUN}"],
        env=env,
        capture_output=True,
        text=True,
        cwd=work,
    )
    if proc.returncode:
        raise SystemExit(f"doit run report failed:\n{proc.stdout}\n{proc.stderr}")
    executed = [line[3:] for line in proc.stdout.splitlines() if line.startswith(".  ")]
    return time.monotonic() - start, executed


def change_grade(layout, mode, iid, strict):
    path = layout.grade_json(mode, iid)
    jsonio.write_json(path, dict(jsonio.read_json(path), strict={"status": strict}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", help="where the results go (default: a new directory in /tmp)")
    ap.add_argument("--tasks", type=int, help="the first N tasks only")
    ap.add_argument("--keep", action="store_true", help="keep the workdir")
    args = ap.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="nginx-eval-bench-site-")).resolve()
    layout = Layout(root=ROOT, cache=work / "cache", results_root=work / "results", run=RUN)
    bench = load_benchmark(ROOT / "tasks" / "nginx.json")
    tasks = list(bench.tasks[: args.tasks] if args.tasks else bench.tasks)
    configured = load_modes(ROOT / "modes.toml", ROOT / "templates")
    modes = {m: configured[m] for m in ("gold", "none", "raw", "impl", "full", "nlcmd")}

    print(f"synthesizing {len(tasks)} tasks x {len(modes)} modes in {work} ...", flush=True)
    bind_run(layout, bench, tasks, list(modes))  # run.json: the run's tasks, for doit too
    synth = Synth(layout, tasks, modes)
    for mode in modes:
        for task in tasks:
            synth.unit(mode, task)
        summary.write_summary(layout, modes[mode], tasks)
    report.write_report(layout, bench, tasks, modes, None, layout.templates_dir, quiet=True)

    rows, templates = [], layout.templates_dir
    args_ = (layout, bench, tasks, list(modes), templates)
    rendered = timed(
        "(a) render the whole site, cold", rows, lambda: report_site.write_site(*args_)
    )
    assert len(rendered) == len(tasks) * len(modes) + 1, len(rendered)
    rendered = timed(
        "(b) no-op: every page up to date", rows, lambda: report_site.write_site(*args_)
    )
    assert rendered == [], rendered
    change_grade(layout, "raw", tasks[0].instance_id, "unresolved")
    rendered = timed(
        "(c) one grade changed (its page and the index)",
        rows,
        lambda: report_site.write_site(*args_),
    )
    assert sorted(rendered) == sorted([f"raw/{tasks[0].instance_id}", "index"]), rendered

    env = dict(
        os.environ,
        NGINX_EVAL_ROOT=str(ROOT),
        NGINX_EVAL_CACHE=str(work / "cache"),
        NGINX_EVAL_RESULTS=str(work / "results"),
    )
    seconds, executed = doit_report(work, env)
    assert executed == [], executed
    rows.append(("(d) `doit run report`, nothing to do", f"{seconds:.2f} s"))
    change_grade(layout, "impl", tasks[1].instance_id, "resolved")
    seconds, executed = doit_report(work, env)
    assert sorted(executed) == sorted([f"site:impl/{tasks[1].instance_id}", "site:index"]), executed
    rows.append(("(e) `doit run report`, one grade changed", f"{seconds:.2f} s"))

    site = layout.site_dir
    pages = sorted(site.rglob("*.html"))
    task_pages = [p for p in pages if p != layout.site_index]
    largest = max(task_pages, key=lambda p: p.stat().st_size)
    results = [p for p in layout.run_dir.rglob("*") if p.is_file() and site not in p.parents]
    rows += [
        ("pages", f"{len(pages)} ({len(task_pages)} task pages and the index)"),
        (
            "site size",
            f"{mb(size(site.rglob('*.*')))} "
            f"(task pages: mean {size(task_pages) / len(task_pages) / 1e3:.0f} KB)",
        ),
        ("index", f"{size([layout.site_index]) / 1e3:.0f} KB"),
        ("largest page", f"{largest.stat().st_size / 1e3:.0f} KB ({largest.relative_to(site)})"),
        ("result files it links to", mb(size(results))),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\nsite of {len(tasks)} tasks x {len(modes)} modes ({os.cpu_count()} CPUs):")
    for label, value in rows:
        print(f"  {label.ljust(width)}  {value}")
    if not args.keep and not args.workdir:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
