"""The report's compiler, Perl and OpenSSL come from the run's records (build.json's "compiler",
prove.json's "versions"), never from the machine that renders it; and the build's own toolchain
(toolchain.py): configure's command line and the compiler that keeps its test programs."""

import json
import subprocess

from conftest import SOURCE_ROOT

from nginx_eval.core.layout import Layout
from nginx_eval.prove.env import tool_versions
from nginx_eval.report import records as report_records
from nginx_eval.report import stage as report

RUN = "tc"
CC = {
    "cc": "/usr/bin/x86_64-linux-gnu-gcc-12",
    "version": "cc (Elsewhere 12.2.0-14) 12.2.0",
    "cc_opt": "-g0 -MD",
}
NOT_RECORDED = {
    "toolchain": "not recorded",
    "compiler": "not recorded",
    "perl": "not recorded",
    "openssl": "not recorded",
}
DIGEST = "158a4c4d38774fa2cb53822e9f6ea9fd4eeb440f3e745ce33926c909d387b4c3"


def _write(layout, mode, iid, name, data):
    path = layout.task_dir(mode, iid) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    (layout.mode_dir(mode) / "results.jsonl").touch()
    return path


def _refuse(*args, **kwargs):
    raise AssertionError(f"the report ran a program: {args[:1]}")


def test_toolchain_is_read_from_build_and_prove_records(tmp_path, monkeypatch):
    monkeypatch.setattr(subprocess, "run", _refuse)
    monkeypatch.setattr(subprocess, "Popen", _refuse)
    layout = Layout(
        root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results", run=RUN
    )
    assert report_records.toolchain(layout, ["gold"]) == NOT_RECORDED
    _write(
        layout,
        "gold",
        "t-1",
        "build.json",
        {"status": "built", "compiler": CC | {"toolchain": DIGEST}},
    )
    _write(
        layout,
        "gold",
        "t-1",
        "prove.json",
        {
            "files": {},
            "versions": {"perl": "v5.36.0", "openssl": "OpenSSL 3.0.22 25 Aug 2026"},
            "toolchain": {"name": "debian-12", "digest": DIGEST},
        },
    )
    assert report_records.toolchain(layout, ["gold"]) == {
        "toolchain": "debian-12 root filesystem 158a4c4d3877",
        "compiler": "cc (Elsewhere 12.2.0-14) 12.2.0",
        "perl": "v5.36.0",
        "openssl": "OpenSSL 3.0.22 25 Aug 2026",
    }

    # A prove.json from before the field says nothing; one whose openssl did not answer says so.
    _write(layout, "none", "t-1", "build.json", {"status": "built", "compiler": CC})
    _write(layout, "none", "t-1", "prove.json", {"files": {}})
    assert report_records.toolchain(layout, ["none"]) == dict(
        NOT_RECORDED, compiler="cc (Elsewhere 12.2.0-14) 12.2.0"
    )
    # A prove with the pin off says so; a report over both names both.
    _write(
        layout,
        "none",
        "t-1",
        "prove.json",
        {"files": {}, "toolchain": {"name": "host", "digest": None}},
    )
    assert report_records.toolchain(layout, ["none"])["toolchain"] == "host (pin off)"
    assert report_records.toolchain(layout, ["gold", "none"])["toolchain"] == (
        "debian-12 root filesystem 158a4c4d3877; host (pin off)"
    )
    _write(layout, "none", "t-1", "prove.json", {"files": {}})
    _write(
        layout,
        "none",
        "t-2",
        "build.json",
        {"status": "compile_failed", "compiler": dict(CC, version="cc (Other) 13.1.0")},
    )
    _write(layout, "none", "t-2", "prove.json", {"versions": {"perl": "v5.36.0", "openssl": None}})
    assert report_records.toolchain(layout, ["none"]) == {
        "toolchain": "not recorded",
        "compiler": "cc (Elsewhere 12.2.0-14) 12.2.0; cc (Other) 13.1.0",
        "perl": "v5.36.0",
        "openssl": "not found",
    }
    assert (
        report_records.toolchain(layout, ["gold", "none"])["openssl"]
        == "OpenSSL 3.0.22 25 Aug 2026"
    )

    # The records are among the files the report's digest is made of.
    files = report.input_files(layout, ["gold", "none"], SOURCE_ROOT / "templates")
    assert {str(layout.build_json(m, i)) for m, i in (("gold", "t-1"), ("none", "t-2"))} <= set(
        files
    )
    assert str(layout.prove_json("none", "t-1")) in files


def test_prove_records_perl_and_openssl_and_the_report_names_what_built(project):
    project.doit("run", "tiny:gold", f"run={RUN}")
    project.doit("run", "report", f"run={RUN}")
    run_dir = project.results / RUN
    iid = project.benchmark()["tasks"][0]["instance_id"]
    prove = json.loads((run_dir / "gold" / iid / "prove.json").read_text())
    assert prove["versions"] == tool_versions() and prove["versions"]["perl"].startswith("v5.")
    build = json.loads((run_dir / "gold" / iid / "build.json").read_text())
    md = (run_dir / "report.md").read_text()
    # The fixture session runs with the pin off (conftest.py), and every record says so.
    assert build["compiler"]["toolchain"] == "host"
    assert prove["toolchain"] == {"name": "host", "digest": None}
    assert "| toolchain | host (pin off) (builds and proves; docs/toolchain.md) |" in md
    assert f"| compiler | {build['compiler']['version']} |" in md
    assert f"| Perl | {prove['versions']['perl']} |" in md
    assert f"| OpenSSL | {prove['versions']['openssl']} |" in md

    # Rendered from these files on a machine with another compiler: the records' compiler.
    for path in run_dir.glob("gold/*/build.json"):
        record = json.loads(path.read_text())
        record["compiler"]["version"] = "cc (Elsewhere) 1.0"
        path.write_text(json.dumps(record))
    _, executed = project.doit("run", "report", f"run={RUN}")
    # and the pages of the site that show what changed (test_site.py)
    assert [t for t in executed if not t.startswith("site:")] == ["report:markdown"]
    assert "| compiler | cc (Elsewhere) 1.0 |" in (run_dir / "report.md").read_text()


# -- configure's command line and compiler (toolchain.py) ------------------------------------------


def test_configure_leaves_out_debug_info_and_keeps_the_tasks_cc_opt():
    from nginx_eval.build.toolchain import configure_argv

    assert configure_argv([]) == ["./auto/configure", "--with-cc-opt=-g0 -MD"]
    assert configure_argv(["--with-stream", "--with-cc-opt=-DX=1"]) == [
        "./auto/configure",
        "--with-stream",
        "--with-cc-opt=-DX=1 -g0 -MD",
    ]


def test_configure_test_programs_are_compiled_once(tmp_path):
    """feature_test_cc.sh, the `cc` configure runs: a test program that built is copied back
    the next time the same command and source come (a different source, a failed test, or any
    other call reaches the compiler), with the compiler's messages."""
    import os
    import shutil
    import subprocess

    from nginx_eval.build.toolchain import configure_env
    from nginx_eval.core.layout import Layout

    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results")
    calls = tmp_path / "compiler-calls"
    real = tmp_path / "real-cc"
    real.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {shutil.which("cc")} "$@"\n')
    real.chmod(0o755)
    env = configure_env(layout, dict(os.environ))
    env["NGINX_EVAL_REAL_CC"] = str(real)
    objs = tmp_path / "tree" / "objs"
    objs.mkdir(parents=True)

    def feature_test(source):
        """configure's way: write objs/autotest.c, build objs/autotest, run it, remove both."""
        (objs / "autotest.c").write_text(source)
        cc = subprocess.run(
            ["cc", "-o", "objs/autotest", "objs/autotest.c"],
            env=env,
            cwd=objs.parent,
            capture_output=True,
            text=True,
        )
        run = (
            subprocess.run(["objs/autotest"], cwd=objs.parent, capture_output=True, text=True)
            if cc.returncode == 0
            else None
        )
        for f in objs.glob("autotest*"):
            f.unlink()
        return cc.returncode, cc.stderr, run and run.stdout

    def compiled():
        return len(calls.read_text().splitlines()) if calls.exists() else 0

    warns = '#include <stdio.h>\nint main(void) { int unused; printf("%d", (int) sizeof(long)); }\n'
    # configure finds the wrapper first on its PATH, with the real compiler behind it.
    assert shutil.which("cc", path=env["PATH"]) == str(layout.feature_tests / "bin" / "cc")
    first = feature_test(warns.replace("int unused;", "int unused = 0;"))
    assert first[0] == 0 and first[2] == "8" and compiled() == 1
    again = feature_test(warns.replace("int unused;", "int unused = 0;"))
    assert again == first and compiled() == 1  # copied back, and it runs
    (objs / "autotest.c").write_text(warns)
    with_warning = subprocess.run(
        ["cc", "-Wall", "-o", "objs/autotest", "objs/autotest.c"],
        env=env,
        cwd=objs.parent,
        capture_output=True,
        text=True,
    )
    assert with_warning.returncode == 0 and "unused" in with_warning.stderr and compiled() == 2
    (objs / "autotest").unlink()
    replay = subprocess.run(
        ["cc", "-Wall", "-o", "objs/autotest", "objs/autotest.c"],
        env=env,
        cwd=objs.parent,
        capture_output=True,
        text=True,
    )
    assert replay.returncode == 0 and replay.stderr == with_warning.stderr and compiled() == 2
    assert (objs / "autotest").stat().st_mode & 0o111
    broken = "int main(void) { return missing_function(); }\n"
    assert feature_test(broken)[0] != 0 and compiled() == 3
    assert feature_test(broken)[0] != 0 and compiled() == 4  # failures are not kept
    assert subprocess.run(["cc", "--version"], env=env, capture_output=True).returncode == 0
    assert compiled() == 5  # other calls pass through
    # Another compiler or another state of the system's packages: compiled again.
    env["NGINX_EVAL_CC_ID"] = "another"
    feature_test(warns.replace("int unused;", "int unused = 0;"))
    assert compiled() == 6
