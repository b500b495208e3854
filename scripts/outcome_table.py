#!/usr/bin/env python3
"""The README's table of outcomes ("What the verdicts mean"), rendered from core/outcomes.py's
TABLE: printed, or written over the README's copy with ``--write``. tests/test_docs.py fails
while the README's copy differs.

Usage:
    python scripts/outcome_table.py [--write]
"""

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nginx_eval.core.outcomes import TABLE  # noqa: E402

README = ROOT / "README.md"
HEADER = ["| outcome | matrix | meaning |", "|---|---|---|"]


def table_lines() -> list[str]:
    """The table, one Markdown line a row, header first."""
    return HEADER + [
        f"| `{o.name}` | {o.cell} | {'' if o.scored else 'not scored: '}{o.meaning} |"
        for o in TABLE
    ]


def replace_table(text: str) -> str:
    """`text` (the README) with its table of outcomes replaced by table_lines()."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip("\n") == HEADER[0])
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "".join(lines[:start] + [line + "\n" for line in table_lines()] + lines[end:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite README.md's table")
    args = parser.parse_args()
    if args.write:
        README.write_text(replace_table(README.read_text()))
    else:
        print("\n".join(table_lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
