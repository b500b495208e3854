"""cluster/node.py: a unit's files as they travel between the coordinator and a node."""

import threading

import pytest

from nginx_eval.cluster import node as nodework


def test_files_travel_and_replace_what_was_there(tmp_path):
    node, here = tmp_path / "node", tmp_path / "here"
    (node / "tap" / "reference").mkdir(parents=True)
    (node / "prove.json").write_text('{"files": {}}')
    (node / "tap" / "a.t.tap").write_bytes(b"ok 1\n")
    (node / "tap" / "reference" / "a.t.tap").write_bytes(b"\xff binary\n")
    (node / "not-shipped.log").write_text("stays on the node")
    files = nodework.read_unit_files(node, ["prove.json", "tap/", "absent.json"])
    assert files == {
        "prove.json": b'{"files": {}}',
        "tap/a.t.tap": b"ok 1\n",
        "tap/reference/a.t.tap": b"\xff binary\n",
    }
    # What an earlier run left here under the shipped names goes; other files stay.
    (here / "tap").mkdir(parents=True)
    (here / "tap" / "old.t.tap").write_text("an earlier run's")
    (here / "model.patch").write_text("input")
    nodework.write_unit_files(here, ["prove.json", "tap/"], files)
    assert sorted(str(p.relative_to(here)) for p in here.rglob("*") if p.is_file()) == [
        "model.patch",
        "prove.json",
        "tap/a.t.tap",
        "tap/reference/a.t.tap",
    ]
    assert (here / "tap" / "reference" / "a.t.tap").read_bytes() == b"\xff binary\n"


def test_a_file_outside_the_unit_is_refused(tmp_path):
    with pytest.raises(ValueError, match="outside the unit's directory"):
        nodework.write_unit_files(tmp_path / "unit", [], {"../escape.json": b"{}"})
    assert not (tmp_path / "escape.json").exists()


def test_the_node_flag_is_per_call_and_per_thread():
    assert not nodework.on_node()
    seen = []
    with nodework.working_on_node():
        assert nodework.on_node()
        other = threading.Thread(target=lambda: seen.append(nodework.on_node()))
        other.start()
        other.join()
    assert seen == [False]
    assert not nodework.on_node()
