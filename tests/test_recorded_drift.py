"""The recorded runs (tests/recorded/) are still what the stages write: the fixture benchmark's
tiny-mul run again, its test output and records compared with the recording (end to end: doit,
make, prove). tests/test_recorded_verdicts.py checks, in the quick loop, what today's code makes
of the recording; this checks that the recording is still what today's stages would record."""

import json
import re
from pathlib import Path

from nginx_eval.core import records

RECORDED = Path(__file__).parent / "recorded" / "tiny" / "default"
# prove's summary line holds the run's times.
TIMES = re.compile(r"^Files=\d+, Tests=\d+, .*$", re.M)
# What differs from one run to the next: times, where it ran, the inputs of this project.
VARYING = {"seconds", "cpu_seconds", "inputs", "binary", "wait_seconds", "reused", "kind"}
# The recorded records were written before records carried their version (read as version 1,
# core/records.py); the stages write it now.
FORMAT_FIELD = records.FORMAT_FIELD
VARYING |= {FORMAT_FIELD}


def normalized(text):
    return TIMES.sub("Files=..., Tests=..., (times)", text)


def test_the_stages_still_write_what_was_recorded(project):
    project.doit("run", "tiny:gold", "tiny:none", "instances=tiny-mul", "strict=1")
    for mode in ("gold", "none"):
        recorded, made = RECORDED / mode / "tiny-mul", project.task_dir(mode, "tiny-mul")
        for name in ("calc_mul.t.tap", "version.t.tap"):
            assert normalized((made / "tap" / name).read_text()) == normalized(
                (recorded / "tap" / name).read_text()
            ), (mode, name)
        read = lambda d, n: json.loads((d / n).read_text())
        old, new = read(recorded, "prove.json"), read(made, "prove.json")
        assert set(old) | {FORMAT_FIELD} == set(new) and set(old["files"]) == set(new["files"])
        for file, run in new["files"].items():
            keep = set(run) - VARYING
            assert {k: run[k] for k in keep} == {k: old["files"][file][k] for k in keep}
        old, new = read(recorded, "grade.json"), read(made, "grade.json")
        assert {k: v for k, v in new.items() if k not in VARYING} == {
            k: v for k, v in old.items() if k not in VARYING
        }
        old, new = read(recorded, "build.json"), read(made, "build.json")
        assert set(old) | {FORMAT_FIELD} == set(new) and new["status"] == old["status"]
