#!/usr/bin/env python3
"""What isolation costs an agent phase: the start of srt with the harness's settings, over the
same command run bare, in a workspace of nginx's size.

    python3 scripts/bench_isolation.py [--runs 10] [--nginx /path/to/nginx.git]

The workspace is nginx's tree at HEAD of the bare repository --nginx (default: the mirror that
NGINX_EVAL_REPO_URL names), else a synthetic tree of as many files; srt scans the workspace for
files to protect before each start, so its size matters. Prints the median and the largest
extra seconds per phase (the target is at most 1 s), and what the sandbox's self-test costs a
`doit run` that starts agents (agent/selftest.py: min, median, largest).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from nginx_eval.agent import sandbox, selftest  # noqa: E402
from nginx_eval.core import gitcmd  # noqa: E402
from nginx_eval.core.layout import Layout  # noqa: E402


def nginx_mirror():
    template = os.environ.get("NGINX_EVAL_REPO_URL", "")
    path = template.format(owner="nginx", name="nginx") if template.startswith("/") else ""
    return path if path and os.path.isdir(path) else None


def workspace(base, bare):
    ws = base / "ws"
    ws.mkdir()
    if bare:
        gitcmd.extract_tree(bare, "HEAD", ws)
    else:
        for i in range(600):
            d = ws / "src" / f"m{i % 30}"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"f{i}.c").write_text("int x;\n" * 200)
    gitcmd.init_repository(ws)
    return ws


def timed(argv, cwd, env):
    start = time.monotonic()
    subprocess.run(
        argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.monotonic() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--nginx", default=nginx_mirror())
    args = ap.parse_args()
    problem = sandbox.sandbox_problem()
    if problem:
        sys.exit(f"bench_isolation: {problem}")
    with tempfile.TemporaryDirectory(prefix="bench-isolation-") as tmp:
        base = Path(tmp)
        ws, logs, scratch = workspace(base, args.nginx), base / "logs", base / "tmp"
        logs.mkdir()
        scratch.mkdir()
        box = {"endpoint": sandbox.DEFAULT_ENDPOINT, "allow_hosts": [], "binds": []}
        env = dict(os.environ, CLAUDE_CONFIG_DIR=str(base / "claude"))
        settings = logs / "srt.json"
        support = sandbox.write_support(base / "cache" / "sandbox-support")
        settings.write_text(
            json.dumps(
                sandbox.srt_settings(
                    box,
                    workspace=ws,
                    writable=[logs, scratch],
                    hidden=[base / "cache"],
                    environ=env,
                    support=support,
                )
            )
        )
        phase_env = sandbox.phase_environment(env, scratch, support)
        command = "true"
        bare = [timed(["bash", "-c", command], ws, env) for _ in range(args.runs)]
        wrapped = sandbox.wrap(
            command,
            settings_file=settings,
            stderr_file=logs / "stderr",
            environ=phase_env,
            support=support,
        )
        isolated = [timed(wrapped, ws, phase_env) for _ in range(args.runs)]
        layout = Layout.from_env(
            root=base / "project", environ={"NGINX_EVAL_CACHE": str(base / "cache")}
        )
        tests = [selftest.run(layout, box, dict(os.environ)) for _ in range(args.runs)]
    failed = [t["failed"] for t in tests if not t["ok"]]
    if failed:
        sys.exit(f"bench_isolation: {failed[0]}")
    seconds = sorted(t["seconds"] for t in tests)
    extra = [i - statistics.median(bare) for i in isolated]
    print(
        f"workspace: {'nginx at HEAD of ' + args.nginx if args.nginx else 'synthetic, 600 files'}"
    )
    print(
        f"bare start: median {statistics.median(bare):.3f} s; isolated start: median "
        f"{statistics.median(isolated):.3f} s, largest {max(isolated):.3f} s ({args.runs} runs)"
    )
    print(
        f"isolation costs {statistics.median(extra):.3f} s per phase (median), "
        f"{max(extra):.3f} s at most; target: at most 1 s"
    )
    print(
        f"self-test: {seconds[0]:.3f} s min, {statistics.median(seconds):.3f} s median, "
        f"{seconds[-1]:.3f} s largest ({args.runs} runs)"
    )
    return 0 if statistics.median(extra) <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
