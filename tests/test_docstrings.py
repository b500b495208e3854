"""Docstrings say what and why: a module's docstring is at most MAX_MODULE_LINES lines, and no
docstring of the package (module, class or function) holds a measurement or a date. Figures and
their history belong in docs/performance.md and commit messages; a long schema in
nginx_eval/core/records.py, user-facing detail in docs/."""

import ast
import re

from conftest import SOURCE_ROOT

MAX_MODULE_LINES = 25
PACKAGE = SOURCE_ROOT / "nginx_eval"

# A number with a unit of time, size or share: "0.41 s", "80.8 MiB", "99%", "4.5×", "5.5x".
UNITS = r"ns|µs|us|ms|s|sec|min|h|B|KB|kB|KiB|MB|MiB|GB|GiB|TB|TiB|%|×"
NUMBER = r"(?<![\w.])\d+(?:[.,]\d+)*"
MEASUREMENT = re.compile(
    rf"{NUMBER}\s?(?:{UNITS})(?![\w])"  # 12 s, 1.6 KB, 95%
    rf"|{NUMBER}\.\d+x(?![\w])"  # 5.5x faster
    r"|(?i:\bmeasured\b)"
    r"|\b(?:19|20)\d\d-(?:0[1-9]|1[0-2])(?:-\d\d)?\b"  # 2026-11-25, 2017-09
)
# What a number with a unit may be without being a measurement: the level of an interval or a
# test ("95% interval", "80% power", "a two-sided 5% level").
STATISTICAL = re.compile(r"\d+%\s(?:intervals?|power|level|confidence)\b")
# Inline literals (``...``, `...`) quote code and output: a format, an example line.
LITERAL = re.compile(r"``.+?``|`[^`]+`", re.DOTALL)


def docstrings(tree):
    """(node, line of the docstring's first line, docstring) of a module's docstrings."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None:
                yield node, node.body[0].lineno, doc


def prose(doc):
    """`doc` without its inline literals, each left as the line breaks it held."""
    return LITERAL.sub(lambda m: "\n" * m.group(0).count("\n"), doc)


def measurements(text):
    """The measurements and dates the prose of `text` (one line) holds."""
    text = STATISTICAL.sub("", prose(text))
    return [m.group(0) for m in MEASUREMENT.finditer(text)]


def offences(path, root=SOURCE_ROOT):
    """'<module>:<line>: <why>' for each docstring of the file `path` that breaks a rule."""
    name = path.relative_to(root).as_posix()
    tree = ast.parse(path.read_text(), filename=name)
    found = []
    for node, first, doc in docstrings(tree):
        lines = doc.splitlines()
        if isinstance(node, ast.Module) and len(lines) > MAX_MODULE_LINES:
            found.append(f"{name}:{first}: module docstring of {len(lines)} lines")
        for i, line in enumerate(prose(doc).splitlines()):
            for m in measurements(line):
                found.append(f"{name}:{first + i}: measurement or date in a docstring: {m!r}")
    return found


def modules():
    return sorted(PACKAGE.rglob("*.py"))


def test_every_module_is_checked():
    names = {p.relative_to(PACKAGE).as_posix() for p in modules()}
    assert {"cli.py", "core/outcomes.py", "report/stage.py", "doitext/slim.py"} <= names


def test_docstrings_say_what_and_why():
    found = [o for p in modules() for o in offences(p)]
    assert not found, "\n".join(found)


def test_what_counts_as_a_measurement():
    flagged = [
        "a run of 15 agent units: 80.8 MiB, 74.5 MiB with two arenas",
        "0.41 s per phase",
        "took 1925 s",
        "16 us with WAL",
        "a 1.6 KB dictionary",
        "the processors 41% idle",
        "5.5x sooner",
        "4.5× faster",
        "measured on the shipped benchmark",
        "Measured with the pinned CLI",
        "on 2026-11-25",
        "a 2017-09 base",
    ]
    assert [t for t in flagged if not measurements(t)] == []
    legitimate = [
        "exit code 3, exit 127, signal 9",
        '{"schema_version": 2, "runs": 2, "level": 0.95, "alpha": 0.05}',
        "fixes on or after a cutoff (YYYY-MM-DD)",
        "a Wilson 95% interval; smallest difference detected with 80% power",
        "two-sided tests at the 5% level",
        "Stage 2b, stage 6b",
        "0x and 4 hex digits or more; objs/nginx+0x1f",
        "12 hex digits, 40-hex hashes, 1,176 units, 196 tasks",
        "Miller 2024, Newcombe 1998",
        "prints ``3 s``, ``40 s``, ``1 h 5 m``",
        "the line `freed 214 MiB`",
        "one line: ``nginx-eval: removed 2 workspaces, freed\n214 MiB``",
    ]
    assert {t: measurements(t) for t in legitimate if measurements(t)} == {}


def test_offences_name_the_module_and_line(tmp_path):
    long_doc = "\n".join(f"line {i}" for i in range(MAX_MODULE_LINES + 1))
    module = tmp_path / "nginx_eval" / "m.py"
    module.parent.mkdir()
    module.write_text(f'"""{long_doc}\n"""\n\n\ndef f():\n    """Fast.\n\n    It takes 0.2 s."""\n')
    assert offences(module, root=tmp_path) == [
        f"nginx_eval/m.py:1: module docstring of {MAX_MODULE_LINES + 1} lines",
        f"nginx_eval/m.py:{MAX_MODULE_LINES + 8}: measurement or date in a docstring: '0.2 s'",
    ]
