"""Atomic writes (nginx_eval/core/jsonio.py): the installed scripts the harness runs from its
cache."""

import os
import stat

from nginx_eval.core.jsonio import install_executable, write_bytes, write_json


def test_install_executable_writes_once_and_replaces_a_stale_or_non_executable_file(tmp_path):
    target = tmp_path / "bin" / "tool"
    install_executable(target, b"#!/bin/sh\necho one\n")
    assert target.read_bytes() == b"#!/bin/sh\necho one\n" and os.access(target, os.X_OK)
    inode = target.stat().st_ino
    install_executable(target, b"#!/bin/sh\necho one\n")
    assert target.stat().st_ino == inode  # up to date: left alone
    install_executable(target, b"#!/bin/sh\necho two\n")
    assert target.read_bytes() == b"#!/bin/sh\necho two\n" and target.stat().st_ino != inode
    target.chmod(0o644)
    install_executable(target, b"#!/bin/sh\necho two\n")
    assert os.access(target, os.X_OK)  # same text, lost its bit: replaced
    assert [p.name for p in target.parent.iterdir()] == ["tool"]  # no temp file left


def test_files_get_the_bits_of_any_new_file_unless_told(tmp_path):
    """0666 less the umask, as open() gives (mkstemp's 0600 made result files unreadable to
    anyone else); an explicit mode is kept whatever the umask."""
    before = os.umask(0o027)
    try:
        write_json(tmp_path / "grade.json", {"status": "resolved"})
        write_bytes(tmp_path / "page.html", b"<p>", sync=False)
        write_bytes(tmp_path / "tool", b"#!/bin/sh\n", mode=0o755)
    finally:
        os.umask(before)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"grade.json": 0o640, "page.html": 0o640, "tool": 0o755}
