"""Atomic writes (nginx_eval/jsonio.py): the installed scripts the harness runs from its cache."""

import os

from nginx_eval.core.jsonio import install_executable


def test_install_executable_writes_once_and_replaces_a_stale_or_non_executable_file(tmp_path):
    target = tmp_path / "bin" / "tool"
    install_executable(target, b"#!/bin/sh\necho one\n")
    assert target.read_bytes() == b"#!/bin/sh\necho one\n" and os.access(target, os.X_OK)
    inode = target.stat().st_ino
    install_executable(target, b"#!/bin/sh\necho one\n")
    assert target.stat().st_ino == inode                  # up to date: left alone
    install_executable(target, b"#!/bin/sh\necho two\n")
    assert target.read_bytes() == b"#!/bin/sh\necho two\n" and target.stat().st_ino != inode
    target.chmod(0o644)
    install_executable(target, b"#!/bin/sh\necho two\n")
    assert os.access(target, os.X_OK)                     # same text, lost its bit: replaced
    assert [p.name for p in target.parent.iterdir()] == ["tool"]   # no temp file left
