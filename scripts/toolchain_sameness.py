#!/usr/bin/env python3
"""Proof of sameness of the pinned toolchain (docs/toolchain.md#proof-of-sameness): the harness
run on this Debian 12 host and, as "another host", inside a Debian 13 (trixie) root filesystem,
gives the same gold and none verdicts and the same TAP for a sample of tasks; the same sample with
the pin off inside trixie (trixie's own compiler, OpenSSL and Perl) lists what changes.

  python3 scripts/toolchain_sameness.py trixie          # make the trixie root fs and its venv
  python3 scripts/toolchain_sameness.py run SIDE ...    # bookworm | trixie | trixie-pin-off
  python3 scripts/toolchain_sameness.py compare         # the tables (markdown) and same.json

WORK (--work, default /work/tmp/same) holds everything, outside the repository: trixie-root/ (the
root fs), venv/ (the harness's Python dependencies, installed with trixie's pip from PyPI),
<side>/cache and <side>/results (a cache of its own per side: nothing built is shared), and
<side>/wall.txt (seconds). The harness inside trixie is this checkout, bound read-only, started
by bwrap as root with trixie at / and a network namespace of its own; its builds and proves go
through the pinned bookworm root fs (bound read-only at its own path) by a nested bwrap, or,
pin off, through trixie's own tools. compare writes WORK/same.json: per task and mode, each
side's verdict fields and each TAP file's digest after normalising (see NORMALISE).
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BOOKWORM = os.environ.get("NGINX_EVAL_TOOLCHAIN_BOOKWORM", "/opt/nginx-eval/toolchain")
# The git mirrors every side clones from (bound read-only into trixie): a local template.
REPO_URL = os.environ.get("NGINX_EVAL_REPO_URL") or "/work/.mirror/{owner}+{name}/repo"
MIRRORS = os.path.dirname(REPO_URL.split("{")[0])
# Spread over 2013-2026 by fix date: 14 bases before nginx 1.21.5 (no libpcre3 in trixie), 9 with
# the old-base compiler options of mining/oldbuilds.py, 5 with SSL tests; short test files.
SAMPLE = (
    "nginx__nginx-a6b7cfe96767 nginx__nginx-2f917b6d0636 nginx__nginx-fda7d021ca23 "
    "nginx__nginx-bf838dc9dfca nginx__nginx-bdc0b779e50c nginx__nginx-a87e05a3312e "
    "nginx__nginx-ce4a23d14476 nginx__nginx-3377c001191d nginx__nginx-85137dd2a639 "
    "nginx__nginx-abe660636c93 nginx__nginx-9c3ac44de268 nginx__nginx-fa2f2e35082b "
    "nginx__nginx-5f85bb3714a8 nginx__nginx-1fecec0cbf15 nginx__nginx-22d4ff08bbe7 "
    "nginx__nginx-3c949f7c409e nginx__nginx-ce88b171236d nginx__nginx-42ca3a4576a3 "
    "nginx__nginx-0373fe5d98c1 nginx__nginx-ec714d52bd49"
).split()
# Packages of scripts/toolchain-packages.txt that trixie does not have.
DROPPED = {
    "libpcre3-dev": "trixie has no libpcre3 (PCRE 8.x): nginx before 1.21.5 cannot configure"
}
# What the harness itself needs on a host (docs/toolchain.md#setting-up-a-host).
HOST_PACKAGES = ["bubblewrap", "python3-venv", "python3-pip", "git", "ca-certificates"]
PY_DEPS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
SIDES = {
    # side: (harness inside trixie, NGINX_EVAL_TOOLCHAIN)
    "bookworm": (False, BOOKWORM),
    "trixie": (True, BOOKWORM),
    "trixie-pin-off": (True, "host"),
}
# What legitimately varies between two runs of a test file, replaced before comparing TAP.
NORMALISE = (
    (re.compile(r"/tmp/[A-Za-z0-9_.-]+"), "/tmp/X"),  # nginx-tests' temporary directories
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:PORT"),  # ports the tests chose
    # clock times and process ids in the diagnostics of a failing test: an HTTP Date header,
    # an error log line's time and its "pid#tid:"
    (re.compile(r"\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT"), "DATE"),
    (re.compile(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d"), "DATE"),
    (re.compile(r"\b\d+#\d+:"), "PID#TID:"),
    (re.compile(r"\b\d+(\.\d+)? ?(wallclock )?secs?\b.*"), "TIME"),  # timings
    (re.compile(r"\b\d+(\.\d+)?m?s\b"), "TIME"),
)
VERDICT_FIELDS = (
    "status",
    "resolved",
    "build_status",
    "fail_to_pass",
    "pass_to_pass",
    "skipped_assertions",
    "timed_out_files",
    "file_failures",
    "env_errors",
)


def sh(argv: list[str], **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(argv)[:300], file=sys.stderr)
    return subprocess.run(argv, check=True, **kw)


def wanted_packages() -> list[str]:
    text = (REPO / "scripts" / "toolchain-packages.txt").read_text()
    names = {w for line in text.splitlines() for w in line.split("#")[0].split()}
    return sorted(names - DROPPED.keys())


def make_trixie(work: Path) -> None:
    """The trixie root fs (mmdebstrap) with the pinned package list less DROPPED, plus what the
    harness needs on a host, and a venv with the harness's Python dependencies from PyPI."""
    root = work / "trixie-root"
    if not (root / "usr" / "bin" / "bwrap").exists():
        shutil.rmtree(root, ignore_errors=True)
        account = "nginx-eval:x:1000:1000:nginx-eval:/tmp:/bin/sh"
        sh(["mmdebstrap", "--variant=apt", "--mode=root", "--format=directory",
            "--include=" + ",".join(wanted_packages() + HOST_PACKAGES),
            "--customize-hook=rm -rf \"$1\"/var/cache/apt/archives/*.deb",
            f"--customize-hook=echo '{account}' >>\"$1/etc/passwd\"",
            "--customize-hook=echo 'nginx-eval:x:1000:' >>\"$1/etc/group\"",
            "trixie", str(root)])  # fmt: skip
    manifest = subprocess.run(
        ["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W", "-f=${Package}=${Version}\n"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    (work / "trixie-manifest.txt").write_text("".join(sorted(manifest.splitlines(True))))
    venv = work / "venv"
    if not (venv / "bin" / "doit").exists():
        inside = ["python3", "-m", "venv", str(venv)]
        sh(trixie_argv(work, inside, network=True))
        sh(trixie_argv(work, [f"{venv}/bin/pip", "install", "-q", *PY_DEPS], network=True))
    # The package's metadata too: doit finds the harness's database backend by its entry point.
    # Installed from a copy (pip builds in the source tree, bound read-only); the code itself
    # is this checkout's, first on PYTHONPATH.
    src = work / "src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "HEAD"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    sh(trixie_argv(work, [f"{venv}/bin/pip", "install", "-q", "--no-deps", str(src)], network=True))


def trixie_argv(work: Path, argv: list[str], network: bool = False) -> list[str]:
    """bwrap's argv that runs `argv` with trixie at / as root: this checkout and the mirrors
    read-only, the pinned bookworm root fs read-only at its own path, WORK read-write."""
    args = ["bwrap", "--bind", str(work / "trixie-root"), "/", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--ro-bind", str(REPO), str(REPO),
            "--bind", str(work), str(work), "--ro-bind", MIRRORS, MIRRORS,
            "--cap-add", "ALL", "--die-with-parent"]  # fmt: skip
    if os.path.isdir(BOOKWORM):
        args += ["--ro-bind", BOOKWORM, BOOKWORM]
    if network:
        # The host's name servers and certificate authorities (a proxy's own, where PyPI is
        # reached through one).
        for path in ("/etc/resolv.conf", "/etc/ssl/certs/ca-certificates.crt"):
            args += ["--ro-bind", path, path]
    else:
        args.append("--unshare-net")
    return [*args, "--chdir", str(REPO), "--", *argv]


def run_side(work: Path, side: str, instances: list[str], extra: list[str]) -> None:
    inside, toolchain = SIDES[side]
    out = work / side
    out.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "PYTHONUNBUFFERED": "1",
        "HOME": str(out),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(REPO),
        "NGINX_EVAL_CACHE": str(out / "cache"),
        "NGINX_EVAL_RESULTS": str(out / "results"),
        "NGINX_EVAL_REPO_URL": REPO_URL,
        "NGINX_EVAL_TOOLCHAIN": toolchain,
    }
    doit = [f"{work}/venv/bin/doit"] if inside else [sys.executable, "-m", "doit"]
    argv = [*doit, "run", "nginx:gold", "nginx:none", "instances=" + ",".join(instances), *extra]
    if inside:
        env["PATH"] = f"{work}/venv/bin:" + env["PATH"]
        argv = trixie_argv(work, argv)
    start = time.monotonic()
    with open(out / "log", "a") as log:
        rc = subprocess.run(
            argv, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT
        ).returncode
    wall = time.monotonic() - start
    (out / "wall.txt").write_text(f"{wall:.1f} {len(instances)} rc={rc}\n")
    print(f"{side}: {len(instances)} tasks, {wall:.1f} s, doit exit {rc}")


def normalised_tap(path: Path) -> str:
    text = path.read_text(errors="replace")
    for pattern, repl in NORMALISE:
        text = pattern.sub(repl, text)
    return text


def side_record(work: Path, side: str, mode: str, iid: str) -> dict | None:
    task = work / side / "results" / "default" / mode / iid
    try:
        grade = json.loads((task / "grade.json").read_text())
    except OSError:
        return None
    taps, raw = {}, {}
    for tap in sorted((task / "tap").rglob("*.tap")) if (task / "tap").is_dir() else ():
        name = str(tap.relative_to(task / "tap"))
        taps[name] = hashlib.sha256(normalised_tap(tap).encode()).hexdigest()[:12]
        raw[name] = hashlib.sha256(tap.read_bytes()).hexdigest()[:12]
    return {"verdict": {f: grade.get(f) for f in VERDICT_FIELDS}, "tap": taps, "raw": raw}


def why(rec: dict | None, work: Path, side: str, mode: str, iid: str) -> str:
    if rec is None:
        return "no grade.json"
    v = rec["verdict"]
    if v["env_errors"]:
        text = "; ".join(v["env_errors"])
        if "requires the PCRE library" in text:
            return "configure: the HTTP rewrite module requires the PCRE library (no libpcre3)"
        return text[:160]
    if v["build_status"] != "built":
        log = work / side / "results" / "default" / mode / iid / "build.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        for needle in ("requires the PCRE library", "error:"):
            for line in text.splitlines():
                if needle in line:
                    return f"{v['build_status']}: {line.strip()[:120]}"
        return v["build_status"]
    failed = [a for a in (v["fail_to_pass"] or {}).get("failed", [])]
    failed += [a for a in (v["pass_to_pass"] or {}).get("failed", [])]
    return f"{v['status']}; failing: {', '.join(failed[:4])}" if failed else v["status"]


def tap_differences(a: dict, b: dict) -> list[str]:
    """The TAP files whose normalised text differs between two sides' records."""
    return sorted(f for f in set(a["tap"]) | set(b["tap"]) if a["tap"].get(f) != b["tap"].get(f))


def stripped_digest(binary: Path) -> str:
    """sha256 of an nginx binary without its symbols, debug sections (they name the build's
    directory) and build id."""
    copy = binary.with_name("nginx.stripped-for-sameness")
    subprocess.run(["objcopy", "--strip-all", "--remove-section=.note.gnu.build-id",
                    str(binary), str(copy)], check=True)  # fmt: skip
    try:
        return hashlib.sha256(copy.read_bytes()).hexdigest()
    finally:
        copy.unlink()


def binaries(work: Path) -> tuple[int, list[str]]:
    """How many builds (by build key) both pinned sides made, and the keys whose stripped
    nginx binaries differ."""
    sides = [work / side / "cache" / "builds" for side in ("bookworm", "trixie")]
    keys = sorted(set(os.listdir(sides[0])) & set(os.listdir(sides[1])))
    compared, differ = 0, []
    for key in keys:
        found = [next(iter((side / key).rglob("objs/nginx")), None) for side in sides]
        if not all(found) or not shutil.which("objcopy"):
            continue
        compared += 1
        if stripped_digest(found[0]) != stripped_digest(found[1]):
            differ.append(key)
    return compared, differ


def compare(work: Path, instances: list[str]) -> None:
    """Print the two tables (markdown) and write WORK/same.json."""
    tasks = {
        t["instance_id"]: t
        for t in json.loads((REPO / "tasks" / "nginx.json").read_text())["tasks"]
    }
    out, same_rows, off_rows = {}, [], []
    raw_same = raw_all = 0
    for iid in sorted(instances, key=lambda i: (tasks[i]["fix_date"], i)):
        t = tasks[iid]
        recs = {m: {s: side_record(work, s, m, iid) for s in SIDES} for m in ("gold", "none")}
        out[iid] = recs
        cells, verdicts, files, off, reasons = [], [], 0, [], []
        for mode, r in recs.items():
            a, b, c = r["bookworm"], r["trixie"], r["trixie-pin-off"]
            cells.append(f"{a['verdict']['status'] if a else '-'} / "
                         f"{b['verdict']['status'] if b else '-'}")  # fmt: skip
            if a is not None and c is not None:
                off.append(c["verdict"]["status"])
                if a["verdict"]["status"] != c["verdict"]["status"]:
                    reasons.append(why(c, work, "trixie-pin-off", mode, iid))
                elif (a["verdict"], a["tap"]) != (c["verdict"], c["tap"]):
                    reasons.append(f"{mode}: same status; assertions or TAP differ")
            if a is None or b is None:
                verdicts.append(f"{mode} not run")
                continue
            files += len(a["tap"])
            raw_same += sum(a["raw"].get(f) == b["raw"].get(f) for f in a["raw"])
            raw_all += len(a["raw"])
            if a["verdict"] != b["verdict"]:
                diff = [f for f in VERDICT_FIELDS if a["verdict"][f] != b["verdict"][f]]
                verdicts.append(f"{mode}: verdict differs ({', '.join(diff)})")
            elif tap_differences(a, b):
                verdicts.append(f"{mode}: TAP differs ({', '.join(tap_differences(a, b))})")
        same = "; ".join(verdicts) or "identical"
        ssl = " (ssl)" if any("ssl" in f for f in t["test_files"] + t["configure_flags"]) else ""
        old = " (old-base options)" if any("-Wno-" in f for f in t["configure_flags"]) else ""
        same_rows.append(f"| {iid[13:]}{ssl}{old} | {t['fix_date']} | {cells[0]} | {cells[1]} | "
                         f"{files} | {same} |")  # fmt: skip
        if reasons:
            a_st = " / ".join(r["bookworm"]["verdict"]["status"] if r["bookworm"] else "-"
                              for r in recs.values())  # fmt: skip
            off_rows.append(f"| {iid[13:]}{ssl} | {t['fix_date']} | {a_st} | {' / '.join(off)} | "
                            f"{'; '.join(sorted(set(reasons)))} |")  # fmt: skip
    (work / "same.json").write_text(json.dumps(out, indent=1, sort_keys=True))
    print("| task | fix date | gold: bookworm host / trixie host | none: bookworm / trixie "
          "| TAP files | same? |\n|---|---|---|---|---|---|")  # fmt: skip
    print("\n".join(same_rows))
    print(f"\nTAP files byte-identical before normalising: {raw_same} of {raw_all}")
    compared, differ = binaries(work)
    print(
        f"nginx binaries (stripped, without build id) identical: {compared - len(differ)} of "
        f"{compared} builds both pinned sides made{': ' if differ else ''}{' '.join(differ)}\n"
    )
    print("| task | fix date | gold / none, pin | gold / none, pin off (trixie) | why |")
    print("|---|---|---|---|---|")
    print("\n".join(off_rows) or "| (none) |")
    for side in SIDES:
        wall = work / side / "wall.txt"
        print(f"{side}: wall {wall.read_text().strip() if wall.exists() else 'not run'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, default=Path("/work/tmp/same"))
    p.add_argument("--instances", help="comma-separated ids (default: the sample)")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("trixie")
    r = sub.add_parser("run")
    r.add_argument("sides", nargs="+", choices=list(SIDES))
    r.add_argument("--extra", nargs="*", default=["strict=0"], help="more doit variables")
    sub.add_parser("compare")
    args = p.parse_args()
    instances = args.instances.split(",") if args.instances else list(SAMPLE)
    args.work.mkdir(parents=True, exist_ok=True)
    if args.cmd == "trixie":
        make_trixie(args.work)
    elif args.cmd == "run":
        for side in args.sides:
            run_side(args.work, side, instances, args.extra)
    else:
        compare(args.work, instances)


if __name__ == "__main__":
    main()
