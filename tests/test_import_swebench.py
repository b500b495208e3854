"""scripts/import_swebench.py's errors, one test per way it can refuse its input: each is one
line on stderr starting ``import_swebench:`` that names the file, the row and the field at fault
(or the option), and nothing is written. Run in this process on rows made here (the real rows:
tests/test_swebench_rows.py, tests/test_swebench_pro.py)."""

import json

import pytest
import swebench_fixture as sf

COMMITS = {"p_base": "a" * 40, "gold": "diff --git a/x b/x\n", "test_patch": ""}
PRO = sf.pro_row(COMMITS, "b" * 40)
VERIFIED = sf.dataset_row(COMMITS)


imp = sf.importer()


def run(tmp_path, capsys, rows, *options, name="rows.jsonl", out=None):
    """(exit status, stderr lines, out) of an import of `rows` (a list of rows written as JSON
    lines, or the file's text) into `out` (default tmp_path/out.json)."""
    source = tmp_path / name
    if isinstance(rows, list):
        source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        source.write_text(rows)
    out = out or tmp_path / "out.json"
    try:
        code = imp.main(["--rows", str(source), "--out", str(out), *options])
    except SystemExit as e:  # argparse's mistakes
        code = e.code
    return code, capsys.readouterr().err.splitlines(), out


def refused_row(tmp_path, capsys, rows, *options):
    """The one row error, after checking that the import said so in the form every one has."""
    code, err, out = run(tmp_path, capsys, rows, *options)
    assert (code, out.exists()) == (1, False)
    *lines, summary = err
    assert summary == (
        f"import_swebench: {len(lines)} bad row(s); {out} not written "
        f"(--skip-bad writes the other {len(rows) - len(lines)})"
    )
    (line,) = lines
    return line


def test_a_row_that_is_no_object_is_named_by_its_line(tmp_path, capsys):
    line = refused_row(tmp_path, capsys, [PRO, ["a", "list"]], "--pro")
    assert line == f"import_swebench: {tmp_path / 'rows.jsonl'}, line 2: must be a JSON object"


@pytest.mark.parametrize("pro", [True, False])
def test_a_missing_field_is_named_with_its_row_and_task(tmp_path, capsys, pro):
    row, field = (PRO, "requirements") if pro else (VERIFIED, "environment_setup_commit")
    bad = {k: v for k, v in dict(row, instance_id="acme__x-2").items() if k != field}
    line = refused_row(tmp_path, capsys, [row, bad], *(["--pro"] if pro else []))
    assert line == (
        f"import_swebench: {tmp_path / 'rows.jsonl'}, task acme__x-2, line 2, field {field}: "
        f"is missing"
    )


def test_a_field_of_the_wrong_type_is_named(tmp_path, capsys):
    line = refused_row(tmp_path, capsys, [dict(PRO, before_repo_set_cmd=3)], "--pro")
    assert line == (
        f"import_swebench: {tmp_path / 'rows.jsonl'}, task {sf.PRO_IID}, line 1, "
        f"field before_repo_set_cmd: must be a string, got int"
    )


def test_a_bad_value_is_named(tmp_path, capsys):
    line = refused_row(tmp_path, capsys, [dict(PRO, repo_language="rust")], "--pro")
    assert line == (
        f"import_swebench: {tmp_path / 'rows.jsonl'}, task {sf.PRO_IID}, line 1, "
        f"field repo_language: must be one of python, go, js, ts, got 'rust'"
    )


def test_a_repeated_instance_is_named_with_its_first_row(tmp_path, capsys):
    line = refused_row(tmp_path, capsys, [PRO, PRO], "--pro")
    assert line == (
        f"import_swebench: {tmp_path / 'rows.jsonl'}, task {sf.PRO_IID}, line 2, "
        f"field instance_id: instance_id {sf.PRO_IID} again (first at line 1): skipped"
    )


def test_an_instance_asked_for_without_a_row_is_named(tmp_path, capsys):
    code, err, out = run(tmp_path, capsys, [PRO], "--pro", "--instances", f"{sf.PRO_IID},gone")
    assert (code, out.exists()) == (1, False)
    assert err[0] == (
        f"import_swebench: {tmp_path / 'rows.jsonl'}, task gone, field --instances: "
        f"no row has this instance_id"
    )


def test_rows_that_leave_no_task_write_nothing(tmp_path, capsys):
    """A file with no row, or none of the languages asked for, wrote a task file without
    tasks (over one with tasks too)."""
    out = tmp_path / "out.json"
    assert run(tmp_path, capsys, [PRO], "--pro")[0] == 0
    before = out.read_text()
    for rows, options in (("", ()), ([PRO], ("--languages", "go"))):
        code, err, _ = run(tmp_path, capsys, rows, "--pro", *options)
        read = 0 if rows == "" else 1
        assert (code, err) == (
            2,
            [
                f"import_swebench: {tmp_path / 'rows.jsonl'}: no task to write ({read} row(s) "
                f"read, 0 bad, none kept); {out} not written"
            ],
        )
    assert out.read_text() == before


@pytest.mark.parametrize(
    "name, text, said",
    [
        ("rows.json", "[1,", "malformed JSON at line 1 column 4: Expecting value"),
        (
            "rows.jsonl",
            '{"a": 1}\n{"a"\n',
            "line 2: malformed JSON (column 5): Expecting ':' delimiter",
        ),
        ("rows.parquet", "no parquet", "cannot read as parquet: "),
        ("rows.jsonl", b"\xff\xfe", "cannot read: 'utf-8' codec can't decode"),
        ("rows.csv", b"a,b\n\xff\n", "cannot read as CSV: 'utf-8' codec can't decode"),
    ],
)
def test_a_file_that_cannot_be_read_is_named(tmp_path, capsys, name, text, said):
    source = tmp_path / name
    source.write_bytes(text if isinstance(text, bytes) else text.encode())
    code = imp.main(["--pro", "--rows", str(source), "--out", str(tmp_path / "out.json")])
    (err,) = capsys.readouterr().err.splitlines()
    assert code == 2 and not (tmp_path / "out.json").exists()
    assert err.startswith(f"import_swebench: {source}{',' if said.startswith('line') else ':'} ")
    assert said in err


def test_a_missing_rows_file_is_named(tmp_path, capsys):
    gone = tmp_path / "gone.jsonl"
    assert imp.main(["--rows", str(gone), "--out", str(tmp_path / "out.json")]) == 2
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith(f"import_swebench: {gone}: cannot read: [Errno 2] No such file")


@pytest.mark.parametrize(
    "text, said",
    [
        ("[1]", ": is not a task file to write over (not a JSON object with tasks)"),
        ("{", ": is not a task file to write over (not a JSON object with tasks)"),
        (
            '{"tasks": [{"repo": "a/b"}]}',
            ", task 1, field instance_id: is not a task file to write over (no instance_id)",
        ),
        (
            '{"version": "1.0", "tasks": []}',
            ", field changelog: has a version but no changelog list",
        ),
    ],
)
def test_a_file_written_over_that_is_no_task_file_is_kept(tmp_path, capsys, text, said):
    """A damaged task file was read as none: written over, its version and changelog lost; a
    list or a task without an id was a traceback."""
    out = tmp_path / "out.json"
    out.write_text(text)
    code, err, _ = run(tmp_path, capsys, [PRO], "--pro")
    assert (code, err, out.read_text()) == (2, [f"import_swebench: {out}{said}"], text)


def test_an_out_that_cannot_be_written_is_named(tmp_path, capsys):
    for out, said in (
        (tmp_path, "is not a file"),
        (tmp_path / "rows.jsonl" / "out.json", f"cannot write: File exists: {tmp_path}/rows.jsonl"),
    ):
        code, err, _ = run(tmp_path, capsys, [PRO], "--pro", out=out)
        assert (code, err) == (2, [f"import_swebench: {out}: {said}"])


def test_a_task_file_that_would_not_load_is_named(tmp_path, capsys):
    code, err, out = run(tmp_path, capsys, [VERIFIED], "--dataset-name", "")
    assert (code, out.exists()) == (2, False)
    assert err == [
        f"import_swebench: the task file would not load, so it is not written: {out}, field "
        f'dataset: must be {{"name": <dataset>, "split": <split>}} (and "harness": '
        f'"swe-bench-pro" for SWE-bench Pro)'
    ]


@pytest.mark.parametrize(
    "options, said",
    [
        ((), "the following arguments are required: --rows"),
        (("--rows", "r.jsonl", "--limit", "x"), "argument --limit: invalid int value: 'x'"),
        (("--rows", "r.jsonl", "--limit", "0"), "argument --limit: must be 1 or more, got 0"),
        (
            ("--rows", "r.jsonl", "--pro", "--per-language", "-1"),
            "argument --per-language: must be 1 or more, got -1",
        ),
        (("--rows", "r.jsonl", "--per-language", "2"), "argument --per-language: only with --pro"),
        (("--rows", "r.jsonl", "--languages", "go"), "argument --languages: only with --pro"),
        (
            ("--rows", "r.jsonl", "--pro", "--languages", "go,rust"),
            "argument --languages: rust not one of python, go, js, ts",
        ),
    ],
)
def test_a_bad_option_is_one_line_naming_it(capsys, options, said):
    """argparse printed its usage first, then ``import_swebench.py: error: ...``; --per-language
    without --pro was a KeyError, and --languages without it dropped every row."""
    with pytest.raises(SystemExit) as e:
        imp.main(list(options))
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines() == [f"import_swebench: {said} (--help says more)"]
