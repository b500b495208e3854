"""The documentation stays in shape: a short README that links every page of docs/, relative
links (and their #anchors) that resolve, and setup and test commands that are CI's own."""

import re

from conftest import SOURCE_ROOT, script_module

README_MAX_LINES = 220
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def prose(text):
    """The lines of a Markdown text outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def links(text):
    """The targets of the inline links of a Markdown text (code blocks left out)."""
    return [m.group(1) for line in prose(text) for m in LINK.finditer(line)]


def anchors(text):
    """The #anchors GitHub gives the headings of a Markdown text."""
    seen, out = {}, set()
    for line in prose(text):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(path):
    """The relative links of the Markdown file `path` whose file or #anchor does not exist."""
    bad = []
    for target in links(path.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            bad.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            bad.append(target)
    return bad


def doc_pages():
    return sorted((SOURCE_ROOT / "docs").glob("*.md"))


def test_readme_is_short():
    lines = (SOURCE_ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_readme_links_every_docs_page():
    linked = {
        (SOURCE_ROOT / t.partition("#")[0]).resolve()
        for t in links((SOURCE_ROOT / "README.md").read_text())
    }
    pages = doc_pages()
    assert pages, "docs/ has no pages"
    assert [p.name for p in pages if p.resolve() not in linked] == []


def test_relative_links_resolve():
    for path in [SOURCE_ROOT / "README.md", *doc_pages()]:
        assert broken_links(path) == [], path.name


def test_readme_commands_are_ci_s():
    """The README's setup and test commands are the ones .ci/run runs."""
    ci = (SOURCE_ROOT / ".ci" / "run").read_text().splitlines()
    readme = (SOURCE_ROOT / "README.md").read_text()
    setup = [line.strip() for line in ci if line.strip().startswith("sh scripts/")]
    pytest_cmd = [line.strip() for line in ci if "-m pytest" in line]
    assert setup == ["sh scripts/setup-debian.sh"] and len(pytest_cmd) == 1
    assert f"{setup[0]} && {pytest_cmd[0]}" in readme
    assert f"{setup[0]} && doit run nginx:gold" in readme


def test_running_md_names_every_command_line_variable():
    """docs/running.md's table of command-line variables is the one description of them: it
    names every variable run/options.py parses, and no other."""
    from nginx_eval.run.options import VARIABLES

    text = (SOURCE_ROOT / "docs" / "running.md").read_text()
    table = text.split("## Command-line variables", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE)
    assert sorted(named) == sorted(VARIABLES)
    assert len(named) == len(set(named))


def test_benchmark_md_names_every_field_of_a_task():
    """docs/benchmark.md's table of a task's fields is the one description of the task file: it
    names every field run/benchmark.py accepts, and no other."""
    from nginx_eval.run.benchmark import OPTIONAL, REQUIRED

    text = (SOURCE_ROOT / "docs" / "benchmark.md").read_text()
    table = text.split("## The task file", 1)[1].split("\n## ", 1)[0]
    named = [
        field
        for row in re.findall(r"^\| (`.*?) \|", table, re.MULTILINE)
        for field in re.findall(r"`([a-z_]+)`", row)
    ]
    assert sorted(named) == sorted([*REQUIRED, *OPTIONAL])


def outcome_table_script():
    return script_module("outcome_table")


def test_readme_outcome_table_is_core_outcomes():
    """The README's table of outcomes is core/outcomes.py's TABLE, row for row, in its order;
    `python scripts/outcome_table.py --write` renders it again."""
    script = outcome_table_script()
    readme = (SOURCE_ROOT / "README.md").read_text()
    lines = readme.splitlines()
    start = lines.index(script.HEADER[0])
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    assert lines[start:end] == script.table_lines(), "run: python3 scripts/outcome_table.py --write"
    assert script.replace_table(readme) == readme


def test_outcome_table_check_sees_a_changed_meaning():
    script = outcome_table_script()
    readme = (SOURCE_ROOT / "README.md").read_text()
    changed = readme.replace("| `timeout` | TO | the agent hit", "| `timeout` | TO | the agent met")
    assert changed != readme
    assert script.replace_table(changed) == readme


def test_checker_finds_broken_links(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title\n\n## Two words: here\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "[ok](docs/a.md) [anchor](docs/a.md#two-words-here) [web](https://x.org)\n"
        "[gone](docs/b.md) [bad anchor](docs/a.md#three)\n"
        "```\n[in code](nowhere.md)\n```\n"
    )
    assert broken_links(readme) == ["docs/b.md", "docs/a.md#three"]
    assert anchors("# A\n# A\n## `x.py`: B, c\n") == {"a", "a-1", "xpy-b-c"}
