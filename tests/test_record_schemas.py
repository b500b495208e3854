"""The TypedDicts of nginx_eval/core/records.py are the schemas of the files the stages write:
a real run's records have every key they require and none they do not name, each value of the
type they give."""

import json
import types
import typing
from typing import (
    Any,
    Literal,
    NotRequired,
    TypedDict,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from nginx_eval.core import records


def mismatches(value, tp, where="$"):
    """Where `value` (parsed JSON) departs from the type `tp` of records.py, one line each."""
    if tp is Any:
        return []
    origin, args = get_origin(tp), get_args(tp)
    if typing.is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        hints = get_type_hints(tp)
        found = [f"{where}: no {k!r}" for k in sorted(tp.__required_keys__ - value.keys())]
        found += [
            f"{where}: {k!r} is not in {tp.__name__}" for k in sorted(value.keys() - hints.keys())
        ]
        for key in sorted(value.keys() & hints.keys()):
            found += mismatches(value[key], hints[key], f"{where}.{key}")
        return found
    if origin is Literal:
        return [] if value in args else [f"{where}: {value!r}, not one of {list(args)}"]
    if origin in (Union, types.UnionType):
        tries = [mismatches(value, arm, where) for arm in args]
        return [] if any(not t for t in tries) else min(tries, key=len)
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        return [m for i, v in enumerate(value) for m in mismatches(v, args[0], f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        return [m for k, v in value.items() for m in mismatches(v, args[1], f"{where}.{k}")]
    if tp is None or tp is type(None):
        return [] if value is None else [f"{where}: {value!r}, not null"]
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp)
    return [] if ok else [f"{where}: {value!r}, not {tp.__name__}"]


class _Inner(TypedDict):
    n: int


class _Outer(TypedDict):
    name: str
    rate: float | None
    inner: list[_Inner]
    extra: NotRequired[dict[str, bool]]


def test_mismatches_names_each_departure():
    good = {"name": "a", "rate": 1, "inner": [{"n": 2}], "extra": {"x": True}}
    assert mismatches(good, _Outer) == []
    assert mismatches(dict(good, rate=None), _Outer) == []
    bad = {"name": 3, "rate": "x", "inner": [{"n": True}, {}], "other": 1, "extra": {"y": 0}}
    assert mismatches(bad, _Outer) == [
        "$: 'other' is not in _Outer",
        "$.extra.y: 0, not bool",
        "$.inner[0].n: True, not int",
        "$.inner[1]: no 'n'",
        "$.name: 3, not str",
        "$.rate: 'x', not float",
    ]


def test_every_file_type_is_a_typed_dict():
    named = [
        records.AgentJson,
        records.PatchJson,
        records.BuildJson,
        records.ProveJson,
        records.StrictJson,
        records.GradeJson,
        records.ResultRow,
        records.SwebenchRow,
        records.Prediction,
        records.RunJson,
        records.ValidationJson,
        records.ValidationRecord,
        records.ReportJson,
        records.CompareJson,
    ]
    assert all(typing.is_typeddict(t) for t in named)


def jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_runs_records_match_their_schemas(project):
    """One run of the fixture benchmark in every mode (an agent mode too), with the strict
    verdict and reruns, its validation, its report and a comparison of two runs."""
    project.doit("run", "tiny", "strict=1", "strict_files=1", "rerun_failed=1")
    project.doit("run", "tiny:validate", "repeats=1")
    project.doit("run", "tiny:gold", "run=other")
    project.render("compare=other")
    run = project.results / "default"
    found = []

    def check(path, tp, value=None):
        value = json.loads(path.read_text()) if value is None else value
        found.extend(f"{path.relative_to(run)}: {m}" for m in mismatches(value, tp))
        # every record the harness writes says its format version (core/records.py)
        if tp is not records.Prediction and value.get("format_version") != records.FORMAT_VERSION:
            found.append(f"{path.relative_to(run)}: format_version {value.get('format_version')}")

    checked = set()
    for mode in ("gold", "none", "fake"):
        for iid in ("tiny-add", "tiny-mul"):
            unit = run / mode / iid
            for name, tp in [
                ("patch.json", records.PatchJson),
                ("build.json", records.BuildJson),
                ("prove.json", records.ProveJson),
                ("strict.json", records.StrictJson),
                ("grade.json", records.GradeJson),
            ] + ([("agent.json", records.AgentJson)] if mode == "fake" else []):
                if (unit / name).exists():
                    check(unit / name, tp)
                    checked.add(name)
        for row in jsonl(run / mode / "results.jsonl"):
            check(run / mode / "results.jsonl", records.ResultRow, row)
        for row in jsonl(run / mode / "predictions.jsonl"):
            check(run / mode / "predictions.jsonl", records.Prediction, row)
    for iid in ("tiny-add", "tiny-mul"):
        check(run / "validate" / iid / "validation.json", records.ValidationJson)
    for record in json.loads((run / "validation.json").read_text()).values():
        check(run / "validation.json", records.ValidationRecord, record)
    check(run / "run.json", records.RunJson)
    check(run / "report.json", records.ReportJson)
    check(run / "compare-other.json", records.CompareJson)
    assert checked == {
        "patch.json",
        "build.json",
        "prove.json",
        "strict.json",
        "grade.json",
        "agent.json",
    }
    assert found == []


def test_report_json_names_each_outcome_it_does_not_score():
    """report/data.py writes <outcome>_instances and <outcome>_ids of each NOT_SCORED outcome by
    name (records.NotScoredFigures, so that mypy checks them): the two lists stay one."""
    from nginx_eval.core.outcomes import NOT_SCORED
    from nginx_eval.report.data import not_scored_json

    named = {f"{o}_{what}" for o in NOT_SCORED for what in ("instances", "ids")}
    assert records.NotScoredFigures.__required_keys__ == named
    assert named <= records.ReportMode.__optional_keys__
    figures = not_scored_json({o: [f"{o}-2", f"{o}-1"] for o in NOT_SCORED})
    assert figures["eval_error_ids"] == ["eval_error-1", "eval_error-2"]
    assert not mismatches(figures, records.NotScoredFigures)
