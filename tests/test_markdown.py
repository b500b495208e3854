"""report/markdown.py: the report's Jinja environment, and its cache of compiled templates."""

import jinja2
import pytest

from nginx_eval.report.markdown import compiled_cache, render


def test_compiled_templates_are_kept_and_an_edited_template_is_compiled_again(tmp_path):
    templates, compiled = tmp_path / "templates", tmp_path / "cache" / "templates"
    templates.mkdir()
    (templates / "t.md.j2").write_text("{{ n | num }} tasks\n")
    assert render({"n": 3}, templates, "t.md.j2", compiled) == "3 tasks\n"
    (kept,) = compiled.iterdir()
    assert kept.name.startswith("__jinja2_")
    before = kept.read_bytes()
    assert render({"n": 4}, templates, "t.md.j2", compiled) == "4 tasks\n"
    assert kept.read_bytes() == before  # read, not written again
    (templates / "t.md.j2").write_text("{{ n | num }} task(s)\n")
    assert render({"n": 1}, templates, "t.md.j2", compiled) == "1 task(s)\n"


def test_without_a_directory_nothing_is_kept(tmp_path):
    assert compiled_cache(None) is None
    (tmp_path / "t.md.j2").write_text("{{ missing }}\n")
    with pytest.raises(jinja2.UndefinedError):  # the environment stays strict either way
        render({}, tmp_path, "t.md.j2")


def test_dollars_show_cents_and_under_a_dollar_a_hundredth_of_a_cent():
    from nginx_eval.report.markdown import usd

    assert [usd(v) for v in (None, 0, 0.0213661, 0.10088265, 1, 1234.567)] == [
        "—",
        "$0.00",
        "$0.0214",
        "$0.1009",
        "$1.00",
        "$1,234.57",
    ]
