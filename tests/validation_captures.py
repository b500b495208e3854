"""What real `prove -v` printed for geo_include_mask.t as tasks 5.1 had it (before issue 54),
captured on 2026-11-28 in the pinned toolchain (the harness's own prove, prove/stage.py) on a
2-core machine, line for line: FIX_RUNS, twelve runs one after the other against the gold build
of nginx__nginx-0de6e878ba43 while six CPU-bound processes ran (run 9 failed assertions 3 to 5:
a worker of the first configuration answered after the reload); BASE_RUN, a run against the base
build (the reload refused). Validation's flake rates and admission are tested on them.

The captures are files of tests/recorded/validation/<task>/<file>/: gold-NN.tap in the order they
ran, base.tap."""

from pathlib import Path

CAPTURES = (
    Path(__file__).parent
    / "recorded"
    / "validation"
    / "nginx__nginx-0de6e878ba43"
    / "geo_include_mask.t"
)
FIX_RUNS = [p.read_text() for p in sorted(CAPTURES.glob("gold-*.tap"))]
BASE_RUN = (CAPTURES / "base.tap").read_text()
