"""scripts/import_swebench.py on the real rows of SWE-bench Verified: the 500 rows of
``../shared/data/swebench-verified.parquet`` (its README gives their provenance) as shipped
(FAIL_TO_PASS / PASS_TO_PASS as JSON text), as parquet list columns (pyarrow and the datasets
library write them so; pandas reads them as numpy arrays), as a JSON list and as JSON lines; and
bad exports made of them (a row twice, a malformed line).

The data folder is ``shared/data`` beside the project's checkout, or the folder SHARED_DATA_DIR
names; where it is absent these tests skip, saying so. Nothing of it is copied into the project.
"""

import json

import pytest
from swebench_fixture import VERIFIED, importer, needs_verified

from nginx_eval.run.benchmark import load_benchmark
from nginx_eval.run.swebench import LISTS, REQUIRED

pytestmark = needs_verified


imp = importer()


@pytest.fixture(scope="module")
def rows():
    """The 500 rows as the parquet file holds them (pyarrow: strings as str)."""
    import pyarrow.parquet  # here, not at collection: every xdist worker collects every module

    return pyarrow.parquet.read_table(VERIFIED).to_pylist()


@pytest.fixture(scope="module")
def expected(rows):
    """{instance_id: the task file's row}: the dataset's fields, the lists read from their JSON."""
    out = {}
    for r in rows:
        row = {k: r[k] for k in REQUIRED}
        row.update({k: json.loads(r[k]) for k in LISTS}, created_at=r["created_at"])
        out[r["instance_id"]] = row
    return out


def run_import(tmp_path, source, *extra):
    out = tmp_path / "tasks" / "swebench-verified.json"
    out.parent.mkdir(exist_ok=True)
    return imp.main(["--rows", str(source), "--out", str(out), *extra]), out


def imported(out):
    return {t["instance_id"]: t for t in json.loads(out.read_text())["tasks"]}


def test_the_shipped_parquet_imports_whole(tmp_path, rows, expected, capsys):
    code, out = run_import(tmp_path, VERIFIED)
    assert code == 0, capsys.readouterr().err
    assert len(rows) == 500
    tasks = imported(out)
    assert list(tasks) == [r["instance_id"] for r in rows]  # every row, in the file's order
    assert tasks == expected
    bench = load_benchmark(out)
    assert len(bench.tasks) == 500 and bench.kind == "swebench"
    assert {t.repo for t in bench.tasks} >= {"psf/requests", "pallets/flask", "django/django"}
    assert capsys.readouterr().out == f"import_swebench: 500 task(s) in {out} (version 1.0)\n"


def list_columns(tmp_path):
    """The shipped parquet with FAIL_TO_PASS and PASS_TO_PASS as list<string> columns, as
    pyarrow and the datasets library write them."""
    import pyarrow
    import pyarrow.parquet

    table = pyarrow.parquet.read_table(VERIFIED)
    for name in LISTS:
        values = [json.loads(v) for v in table.column(name).to_pylist()]
        table = table.set_column(
            table.schema.get_field_index(name),
            name,
            pyarrow.array(values, pyarrow.list_(pyarrow.string())),
        )
    path = tmp_path / "verified-lists.parquet"
    pyarrow.parquet.write_table(table, path)
    return path


def test_parquet_list_columns_import_as_the_json_text_does(tmp_path, expected, capsys):
    import pandas
    import pyarrow
    import pyarrow.parquet

    source = list_columns(tmp_path)
    assert pyarrow.parquet.read_schema(source).field("FAIL_TO_PASS").type == pyarrow.list_(
        pyarrow.string()
    )
    code, out = run_import(tmp_path, source)
    assert code == 0, capsys.readouterr().err
    assert imported(out) == expected
    # Read by pandas, the same columns are numpy arrays: accepted as lists too.
    frame = pandas.read_parquet(source).to_dict(orient="records")
    assert type(frame[0]["FAIL_TO_PASS"]).__name__ == "ndarray"
    good, bad = imp.convert([(f"row {n}", r) for n, r in enumerate(frame, 1)], source)
    assert bad == [] and {r["instance_id"]: r for r in good} == expected


def test_json_list_and_json_lines_exports_import_whole(tmp_path, rows, expected, capsys):
    as_list = tmp_path / "verified.json"
    as_list.write_text(json.dumps(rows))
    as_lines = tmp_path / "verified.jsonl"
    as_lines.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for source in (as_list, as_lines):
        code, out = run_import(tmp_path, source)
        assert code == 0, capsys.readouterr().err
        assert imported(out) == expected, source


def test_a_row_twice_is_named_in_the_user_s_file_and_skip_bad_skips_it(tmp_path, rows, capsys):
    """An id twice was refused by the loader of a temporary copy: the error named that copy,
    no row, and --skip-bad did not help."""
    twice = dict(rows[7], problem_statement="a later edit of the same task")
    lines = [json.dumps(r) for r in rows[:10]] + ["", json.dumps(twice)]  # a blank line: line 12
    source = tmp_path / "verified.jsonl"
    source.write_text("\n".join(lines) + "\n")
    code, out = run_import(tmp_path, source)
    err = capsys.readouterr().err.splitlines()
    iid = rows[7]["instance_id"]
    assert (code, out.exists()) == (1, False)
    assert err == [
        f"import_swebench: {source}, task {iid}, line 12, field instance_id: instance_id "
        f"{iid} again (first at line 8): skipped",
        f"import_swebench: 1 bad row(s); {out} not written (--skip-bad writes the other 10)",
    ]
    code, out = run_import(tmp_path, source, "--skip-bad")
    assert code == 1 and list(imported(out)) == [r["instance_id"] for r in rows[:10]]
    assert imported(out)[iid]["problem_statement"] == rows[7]["problem_statement"]  # the first


def test_a_malformed_json_line_is_named_by_its_own_line(tmp_path, rows, capsys):
    """Each line was parsed alone, so json said "line 1" of every line."""
    lines = [json.dumps(r) for r in rows[:6]]
    lines[4] = lines[4][:-1]  # the closing brace lost
    source = tmp_path / "verified.jsonl"
    source.write_text("\n".join(lines) + "\n")
    code, out = run_import(tmp_path, source)
    (err,) = capsys.readouterr().err.splitlines()
    assert (code, out.exists()) == (2, False)
    assert err.startswith(f"import_swebench: {source}, line 5: malformed JSON (column ")
    assert "line 1" not in err
