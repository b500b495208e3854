"""The run's site as a person sees it: headless Chromium (tests/chromium.py, Debian's `chromium`)
opens every page of a fixture run's site from the file system. No page may log an error, request
anything beyond the file system or hold a link to nothing; the index's filters and sort work; and
the check fails for a page that breaks any of that.

Screenshots of the index and of a task page are taken at 1000x700; with
``NGINX_EVAL_SCREENSHOTS=<dir>`` they are also copied there (docs/viewer.md shows
``NGINX_EVAL_SCREENSHOTS=docs``).
"""

import os
import shutil
import struct
from pathlib import Path

import pytest
import site_run
from chromium import Chromium, find_chromium, problems
from conftest import Project

# Every test here starts doit, make, prove, the sandbox or the CLI (conftest.py).
E2E = True

# Every test here reads a report or the site: its runs render them (conftest.py).
pytestmark = [
    pytest.mark.reports,
    pytest.mark.skipif(
        find_chromium() is None,
        reason="no chromium on PATH: the browser check needs Debian's `chromium` "
        "(scripts/debian-packages.txt; setup-debian.sh and CI install it)",
    ),
]

SIZE = (1000, 700)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """gold, none, fake, and raw with the real Claude Code CLI when it is installed."""
    project = Project(tmp_path_factory.mktemp("site-browser"), reports=True)
    modes = site_run.make_run(project, site_run.available_claude())
    return project.results / site_run.RUN / "site", modes


@pytest.fixture(scope="module")
def browser():
    with Chromium(size=SIZE) as chromium:
        yield chromium


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def keep_screenshot(data, name, tmp_path):
    (tmp_path / name).write_bytes(data)
    wanted = os.environ.get("NGINX_EVAL_SCREENSHOTS")
    if wanted:
        Path(wanted).mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / name, Path(wanted) / name)


def test_every_page_loads_without_errors_and_every_link_resolves(site, browser, tmp_path):
    site_dir, modes = site
    pages = sorted(site_dir.rglob("*.html"))
    assert len(pages) == 1 + 2 * len(modes)
    shots = {}
    for page in pages:
        report = browser.load(page)
        assert problems(report) == [], page
        assert report.links and all(u.startswith("file://") for u in report.requests), page
        shots[page.relative_to(site_dir).as_posix()] = report.screenshot
    # The screenshots the docs show: the index, and a task page at its trajectory when it has
    # one (else at its top, as loaded above).
    task, at = (
        ("raw/tiny-add.html", "trajectory") if "raw" in modes else ("fake/tiny-mul.html", None)
    )
    if at:
        shots[task] = browser.load(site_dir / task, fragment=at).screenshot
    for page, name in (("index.html", "viewer-index.png"), (task, "viewer-task.png")):
        assert png_size(shots[page]) == SIZE
        keep_screenshot(shots[page], name, tmp_path)


FILTERS = """(() => {
  const form = document.getElementById("filters");
  const set = (name, value) => {
    form.elements[name].value = value;
    form.dispatchEvent(new Event("change"));
  };
  const shown = () => Array.from(document.querySelectorAll("#matrix tbody tr"))
    .filter(row => !row.hidden).map(row => row.querySelector("th").textContent);
  const seen = {all: shown(), count: document.getElementById("count").textContent};
  set("outcome", "compile_failed"); seen.compile_failed = shown();
  set("mode", "gold"); seen.compile_failed_in_gold = shown();
  set("outcome", ""); set("mode", ""); set("area", "core"); seen.core = shown();
  set("area", ""); set("split", "recent"); seen.recent = shown();
  set("split", ""); set("sort", "disagree"); seen.sorted = shown();
  set("sort", ""); seen.unsorted = shown();
  return seen;
})()"""


def test_the_filters_and_the_sort_of_the_index(site, browser):
    site_dir, _ = site
    seen = browser.load(site_dir / "index.html", FILTERS).value
    assert seen["all"] == ["tiny-add", "tiny-mul"] and seen["count"] == "2 of 2 tasks"
    assert seen["compile_failed"] == ["tiny-mul"] and seen["compile_failed_in_gold"] == []
    assert seen["core"] == ["tiny-add"]
    assert seen["recent"] == ["tiny-mul"]  # fixed 2025-02-14 (site_run.FACTS)
    assert seen["sorted"] == ["tiny-mul", "tiny-add"]  # the most disagreement first
    assert seen["unsorted"] == ["tiny-add", "tiny-mul"]


BREAKAGES = {
    "a script error": ("<script>notAFunction();</script>", "uncaught: ReferenceError"),
    "a console error": ('<script>console.error("broken")</script>', "console.error: broken"),
    "a dangling link": ('<a href="nowhere.html">x</a>', "link no such file"),
    "a missing fragment": ('<a href="index.html#nowhere">x</a>', "no element #nowhere"),
    "a missing image": ('<img src="missing.png" alt="">', "ERR_FILE_NOT_FOUND"),
    "a link off the file system": (
        '<a href="https://example.org/">x</a>',
        "leaves the file system",
    ),
}


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_the_check_fails_for_a_broken_page(site, browser, breakage):
    site_dir, _ = site
    html, expected = BREAKAGES[breakage]
    broken = site_dir / "broken.html"
    broken.write_text((site_dir / "index.html").read_text().replace("</main>", html + "</main>"))
    try:
        found = problems(browser.load(broken))
    finally:
        broken.unlink()
    assert found and any(expected in p for p in found), found
