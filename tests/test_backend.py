"""doitext/backend.py: doit's database writes what doit saves of a task as it comes, keeps
none of it in memory, and answers doit's questions from the file."""

import sqlite3

from doit.dependency import Dependency, JSONCodec
from doit.task import Stream, Task

from nginx_eval.doitext.backend import DurableDB


def rows(path):
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("select task_id, task_data from doit").fetchall())


def test_what_doit_saves_is_in_the_file_at_once_and_not_in_memory(tmp_path):
    path = str(tmp_path / "doit.db")
    db = DurableDB(path, JSONCodec())
    db.set("build:a", "_values_:", {"digest": "1"})
    db.set("build:a", "checker:", "MD5Checker")
    assert '"checker:": "MD5Checker"' in rows(path)["build:a"]  # another reader sees it
    assert db.get("build:a", "_values_:") == {"digest": "1"}
    assert db.in_("build:a") and not db.in_("build:b") and db.get("build:b", "x") is None
    assert db._cache == {} and not db._dirty
    db.remove("build:a")
    assert rows(path) == {}


def test_a_run_killed_before_doit_dumps_keeps_what_its_tasks_saved(tmp_path):
    path = str(tmp_path / "doit.db")
    deps = Dependency(DurableDB, path, codec_cls=JSONCodec)
    task = Task("prove:a", [(lambda: {"passed": 3}, [])])
    task.execute(Stream(0))
    deps.save_success(task)
    # no deps.close(): as if killed
    again = Dependency(DurableDB, path, codec_cls=JSONCodec)
    assert again.get_values("prove:a") == {"passed": 3}


def test_a_row_the_file_cannot_take_is_kept_in_memory_with_one_warning(tmp_path, capsys):
    path = str(tmp_path / "doit.db")
    db = DurableDB(path, JSONCodec())
    db.set("grade:a", "checker:", "MD5Checker")
    pages = db._conn.execute("pragma page_count").fetchone()["page_count"]
    db._conn.execute(f"pragma max_page_count={pages}")  # the disk is full from here
    for i in range(50):
        db.set(f"grade:{i}", "_values_:", {"x" * 200: i})
        db.set(f"grade:{i}", "checker:", "MD5Checker")
    assert capsys.readouterr().err.count("warning: doit database") == 1
    assert db.get("grade:7", "_values_:") == {"x" * 200: 7} and db.in_("grade:49")
    assert db.get("grade:a", "checker:") == "MD5Checker"
    db._conn.execute("pragma max_page_count=1000000")  # room again: doit's dump
    db.dump()
    assert len(rows(path)) == 51


def test_a_task_with_many_files_is_read_once_when_doit_checks_it(tmp_path, monkeypatch):
    # doit asks for each file_dep's saved state in turn; decoding the task's row for each made
    # the check quadratic in the number of files (a results task has one per unit).
    files = []
    for i in range(300):
        files.append(tmp_path / f"grade-{i}.json")
        files[-1].write_text(str(i))
    path = str(tmp_path / "doit.db")
    deps = Dependency(DurableDB, path, codec_cls=JSONCodec)
    task = Task("results:gold", [(lambda: None, [])], file_dep=[str(f) for f in files])
    task.execute(Stream(0))
    deps.save_success(task)
    deps.close()
    again = Dependency(DurableDB, path, codec_cls=JSONCodec)
    reads = []
    original = DurableDB._get_task_data
    monkeypatch.setattr(
        DurableDB,
        "_get_task_data",
        lambda self, task_id: reads.append(task_id) or original(self, task_id),
    )
    assert (
        again.get_status(
            Task("results:gold", [(lambda: None, [])], file_dep=[str(f) for f in files]), {}
        ).status
        == "up-to-date"
    )
    assert len(reads) <= 2
