"""The report's compiler, Perl and OpenSSL come from the run's records (build.json's "compiler",
prove.json's "versions"), never from the machine that renders it."""

import json
import subprocess

from conftest import SOURCE_ROOT
from nginx_eval import report
from nginx_eval.layout import Layout
from nginx_eval.prove import tool_versions

RUN = "tc"
CC = {"cc": "/usr/bin/x86_64-linux-gnu-gcc-12", "version": "cc (Elsewhere 12.2.0-14) 12.2.0",
      "cc_opt": "-g0 -MD"}
NOT_RECORDED = {"compiler": "not recorded", "perl": "not recorded", "openssl": "not recorded"}


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
    layout = Layout(root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results",
                    run=RUN)
    assert report.toolchain(layout, ["gold"]) == NOT_RECORDED
    _write(layout, "gold", "t-1", "build.json", {"status": "built", "compiler": CC})
    _write(layout, "gold", "t-1", "prove.json", {"files": {}, "versions": {
        "perl": "v5.36.0", "openssl": "OpenSSL 3.0.22 25 Aug 2026"}})
    assert report.toolchain(layout, ["gold"]) == {
        "compiler": "cc (Elsewhere 12.2.0-14) 12.2.0", "perl": "v5.36.0",
        "openssl": "OpenSSL 3.0.22 25 Aug 2026"}

    # A prove.json from before the field says nothing; one whose openssl did not answer says so.
    _write(layout, "none", "t-1", "build.json", {"status": "built", "compiler": CC})
    _write(layout, "none", "t-1", "prove.json", {"files": {}})
    assert report.toolchain(layout, ["none"]) == dict(
        NOT_RECORDED, compiler="cc (Elsewhere 12.2.0-14) 12.2.0")
    _write(layout, "none", "t-2", "build.json",
           {"status": "compile_failed", "compiler": dict(CC, version="cc (Other) 13.1.0")})
    _write(layout, "none", "t-2", "prove.json", {"versions": {"perl": "v5.36.0", "openssl": None}})
    assert report.toolchain(layout, ["none"]) == {
        "compiler": "cc (Elsewhere 12.2.0-14) 12.2.0; cc (Other) 13.1.0", "perl": "v5.36.0",
        "openssl": "not found"}
    assert report.toolchain(layout, ["gold", "none"])["openssl"] == "OpenSSL 3.0.22 25 Aug 2026"

    # The records are among the files the report's digest is made of.
    files = report.input_files(layout, ["gold", "none"], SOURCE_ROOT / "templates")
    assert {str(layout.build_json(m, i)) for m, i in (("gold", "t-1"), ("none", "t-2"))} \
        <= set(files)
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
    assert f"| compiler | {build['compiler']['version']} |" in md
    assert f"| Perl | {prove['versions']['perl']} |" in md
    assert f"| OpenSSL | {prove['versions']['openssl']} |" in md

    # Rendered from these files on a machine with another compiler: the records' compiler.
    for path in run_dir.glob("gold/*/build.json"):
        record = json.loads(path.read_text())
        record["compiler"]["version"] = "cc (Elsewhere) 1.0"
        path.write_text(json.dumps(record))
    _, executed = project.doit("run", "report", f"run={RUN}")
    assert executed == ["report"]
    assert "| compiler | cc (Elsewhere) 1.0 |" in (run_dir / "report.md").read_text()
