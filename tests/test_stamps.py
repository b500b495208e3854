"""core/stamps.py's freshness check, and the file digests it is made of (core/jsonio.py)."""

import json
import os
import time

from nginx_eval.core import jsonio, stamps


def test_recorded_inputs_reads_the_outer_object_s_inputs_only(tmp_path):
    out = tmp_path / "grade.json"
    digest = "a" * 64
    jsonio.write_json(out, {"inputs": digest, "files": {"x.t": {"inputs": "b" * 64}}})
    assert stamps.recorded_inputs(out) == digest
    jsonio.write_json(out, {"files": {"x.t": {"inputs": "b" * 64}}})
    assert stamps.recorded_inputs(out) is None
    # Written by another writer (no indent): parsed whole.
    out.write_text(json.dumps({"inputs": digest, "status": "resolved"}))
    assert stamps.recorded_inputs(out) == digest
    # Cut short: not a record at all.
    jsonio.write_json(out, {"inputs": digest, "status": "resolved"})
    out.write_text(out.read_text()[:-4])
    assert stamps.recorded_inputs(out) is None
    assert stamps.recorded_inputs(tmp_path / "missing.json") is None


def test_is_current_compares_the_record_with_the_inputs_now(tmp_path):
    source, out = tmp_path / "prove.json", tmp_path / "grade.json"
    source.write_text("one")
    config = {"fix": "abc"}
    jsonio.write_json(out, {"inputs": stamps.inputs_digest(config, [source])})
    assert stamps.is_current(out, config, [source])
    assert not stamps.is_current(out, {"fix": "abd"}, [source])
    source.write_text("two")
    assert not stamps.is_current(out, config, [source])


def test_a_kept_digest_never_hides_a_change(tmp_path, monkeypatch):
    """Digests are kept for files older than the process; a change in place, of the same size,
    with the modification time set back, still shows: its ctime moved."""
    monkeypatch.setattr(jsonio, "_STARTED_NS", time.time_ns() + 10**12)  # every file is old
    monkeypatch.setattr(jsonio, "_digests", {})
    path = tmp_path / "tap"
    path.write_text("ok 1\n")
    first = jsonio.file_digest(path)
    assert str(path) in jsonio._digests
    st = os.stat(path)
    time.sleep(0.05)  # past a tick of the kernel's coarse file clock (RACY_NS covers that case)
    with open(path, "r+") as f:
        f.write("no 1\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_mtime_ns == st.st_mtime_ns
    assert jsonio.file_digest(path) != first
    assert jsonio.file_digest(path) == jsonio.file_digest(str(path))


def test_a_file_changed_during_the_run_is_never_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonio, "_digests", {})
    path = tmp_path / "new"
    path.write_text("x")
    jsonio.file_digest(path)
    assert jsonio._digests == {}
