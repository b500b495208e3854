"""docs/walkthrough.md runs as written: its `doit` commands, parsed from the page (so that the
page and this test cannot drift apart), run in order on the fixture benchmark (`nginx` read as
`tiny`, whose two tasks `limit=10` takes whole), each succeeds, and every line of the output the
page shows after a command is one the command prints (numbers, paths, commits and instance ids
aside; `...` stands for lines left out)."""

import re

import doit_server
import pytest
from conftest import SOURCE_ROOT

PAGE = SOURCE_ROOT / "docs" / "walkthrough.md"
# The page's commands that are not doit's: the clone, the setup and the mirrors, which the
# fixture project stands for.
NOT_RUN = ("git clone ", "sh scripts/setup-debian.sh", "export NGINX_EVAL_REPO_URL=")


def steps(text):
    """[(commands of a ```sh block, the ```text block after it or None)], in the page's order."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)
    out = []
    for i, (kind, body) in enumerate(blocks):
        if kind != "sh":
            continue
        commands = [c for c in body.splitlines() if c.strip() and not c.startswith("#")]
        shown = blocks[i + 1][1] if i + 1 < len(blocks) and blocks[i + 1][0] == "text" else None
        out.append((commands, shown))
    return out


def pattern(line):
    """A regular expression for a line the page shows: any number, path, commit or id there
    stands for the fixture's own; runs of spaces (column widths) match any run."""
    line = line.replace("nginx:", "tiny:").replace("benchmark nginx", "benchmark tiny")
    words = []
    for word in line.split():
        if word in ("s", "m", "h"):
            words.append("[smh]")  # a duration is "1 m" on the page and "2 s" on the fixture
            continue
        if word.startswith("/") or re.fullmatch(r"[\w.-]+\+[\w.-]+/\S*", word):
            words.append(r"\S+")  # a path, or a base build: <owner>+<name>/<commit>
            continue
        word = re.sub(r"nginx__nginx-[0-9a-f]+", "ID", word)
        word = re.sub(r"\d+", "0", word)
        word = re.escape(word).replace("ID", r"\S+").replace("0", r"\d+(?:\.\d+)?")
        words.append(word)
    text = r"\s+".join(words)
    return re.compile(r"\s*" + text + r"\s*")


def test_the_patterns_match_what_they_stand_for():
    assert pattern("[base 1/10] nginx+nginx/14341ce2377d built in 1 m").fullmatch(
        "[base 2/2] acme+tiny/30f2510d0451 built in 3 s"
    )
    assert pattern("  gold  10 of 10  100.0%  [72.2, 100.0]").fullmatch(
        "  gold    2 of 2  100.0%  [34.2, 100.0]"
    )
    assert pattern("report: /srv/x/results/default/report.md").fullmatch(
        "report: /tmp/p/results/default/report.md"
    )
    assert not pattern("  none   0 of 10    0.0%  [0.0, 27.8]    10 unresolved").fullmatch(
        "  none  0 of 2  0.0%  [0.0, 65.8]  2 resolved"
    )


@pytest.mark.reports
def test_the_walkthrough_runs_as_written(project):
    page = steps(PAGE.read_text())
    commands = [c for cs, _ in page for c in cs]
    assert [c for c in commands if not c.startswith("doit ")] and all(
        c.startswith("doit ") or c.startswith(NOT_RUN) for c in commands
    ), commands
    ran = 0
    server = doit_server.server(SOURCE_ROOT)
    for cs, shown in page:
        out = ""  # what the block's commands print, one after the other
        for command in cs:
            if not command.startswith("doit "):
                continue
            words = [w.replace("nginx:", "tiny:") for w in command.split()[1:]]
            # As a user types it: no strict=0 or report=0 that project.doit adds.
            project.seed_compiled_templates()
            code, printed, err = server.run(
                ["-f", str(SOURCE_ROOT / "dodo.py"), *words], env=project.env, timeout=600
            )
            project.keep_compiled_templates()
            assert code == 0, f"{command}:\n{printed}\n{err}"
            out += printed
            ran += 1
        if shown is None:
            continue
        lines = out.splitlines()
        for line in shown.splitlines():
            if line.strip() in ("", "..."):
                continue
            assert any(pattern(line).fullmatch(p) for p in lines), (
                f"{cs[-1]}: the page shows\n{line}\nwhich it does not print:\n{out}"
            )
    assert ran >= 6
    assert (project.results / "default" / "report.md").exists()
