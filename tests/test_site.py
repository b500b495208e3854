"""The run's static site (report/site.py): rendered from the result files by real `doit run`s of
the fixture project, incremental page by page, and its readers of grades, TAP, diffs and
transcripts on real output. The browser's view of it is test_site_browser.py's; the page of a
Codex or Gemini attempt (from its ATIF file) is checked on test_agent_programs.py's run.

The tests of how doit renders (a run ending with its site, which pages render again) render
through doit; those of what a page says of given result files score with report=0 and render
in their own process (conftest.Project.render), which is what `doit run report` renders."""

import json
import re
import shutil
import urllib.parse
from html.parser import HTMLParser

import markupsafe
import pytest
import site_run
from anthropic_standin import StandIn
from chromium import link_problem
from claude_captures import Recorder, session_with_subagent
from conftest import SOURCE_ROOT, Project

from nginx_eval.core.layout import Layout
from nginx_eval.report import site as report_site
from nginx_eval.report import site_index as report_site_index
from nginx_eval.report import site_task as report_site_task

# Every test here reads a report or the site: its runs render them (conftest.py).
pytestmark = pytest.mark.reports

RUN = site_run.RUN


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        self.links += [v for k, v in attrs if k in ("href", "src") and v]


def links_of(page):
    parser = Links()
    parser.feed(page.read_text())
    return [urllib.parse.urljoin(page.as_uri(), href) for href in parser.links]


def pages(site):
    return sorted(site.rglob("*.html"))


def page_stamps(site):
    """{page: (inode, the digest it records)}: a page written again gets a new inode."""
    return {
        str(p.relative_to(site)): (p.stat().st_ino, report_site.recorded_inputs(p))
        for p in pages(site)
    }


def site_tasks(executed):
    return sorted(t for t in executed if t.startswith("site:"))


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """One run of gold, none and fake (site_run.py), without the Claude Code CLI. The tests
    that change it (a grade, an agent's patch, a site page rendered again) come after those
    that read it, in the order of this file."""
    project = Project(tmp_path_factory.mktemp("site"), reports=True)
    site_run.make_run(project)
    return project, project.results / RUN / "site"


# -- a run ends with its site -------------------------------------------------------------------
@pytest.mark.e2e
def test_a_run_ends_with_a_site_whose_cells_are_the_reports_outcomes(site):
    project, site_dir = site
    report = json.loads((project.results / RUN / "report.json").read_text())
    index = (site_dir / "index.html").read_text()
    for name in report_site.ASSETS:
        assert (site_dir / name).read_bytes() == (
            SOURCE_ROOT / "templates" / "site" / name
        ).read_bytes()
    codes = {"resolved": "PASS", "unresolved": "FAIL", "compile_failed": "CF"}
    for mode in ("gold", "none", "fake"):
        for iid, outcome in report["modes"][mode]["outcomes"].items():
            page = site_dir / mode / f"{iid}.html"
            assert page.exists(), page
            cell = re.search(
                rf'<td class="cell o-{outcome}" data-mode="{mode}" '
                rf'data-outcome="{outcome}"><a href="{mode}/{iid}.html"[^>]*>'
                rf"{codes[outcome]}</a>",
                index,
            )
            assert cell, (mode, iid, outcome)
    # The summary table is report.json's: fake resolved 1 of 2, 50.0%, its interval.
    fake = report["modes"]["fake"]
    interval = "[{:.1f}, {:.1f}]".format(*(100 * v for v in fake["resolved_interval"]))
    row = re.search(r"<tr><th><code>fake</code></th>(.*?)</tr>", index).group(1)
    assert "50.0%" in row and interval in row and f"${fake['cost_usd']:,.2f}" in row
    # With one agent mode, gold and none count too: they disagree on both tasks, most on
    # tiny-mul, where three outcomes differ (resolved, unresolved, compile failed).
    scores = {
        iid: int(score)
        for score, iid in re.findall(r'data-disagree="(\d+)">\s*<th>([\w-]+)</th>', index)
    }
    assert scores["tiny-mul"] > scores["tiny-add"] > 0


@pytest.mark.e2e
def test_every_link_of_every_page_resolves_on_the_file_system(site):
    _, site_dir = site
    checked = 0
    for page in pages(site_dir):
        for url in links_of(page):
            assert link_problem(url) is None, (page, url)
            checked += 1
    assert checked > 50
    # No page asks for anything beyond the file system.
    for page in pages(site_dir):
        assert not re.search(r'(src|href)="(https?:)?//', page.read_text()), page


@pytest.mark.e2e
def test_a_task_page_shows_the_verdict_with_tap_lines_the_patches_and_the_logs(site):
    project, site_dir = site
    add = (site_dir / "fake" / "tiny-add.html").read_text()
    assert "tiny-add: the calculator prints wrong results." in add  # the statement
    assert re.search(
        r'<tr class="r-passed"><td>fail to pass</td><td><code>calc_add.t:1 add two '
        r"numbers</code></td><td>passed</td><td><code>ok 1 - add two numbers</code>",
        add,
    )
    # the patch beside the gold fix, highlighted, the file in both
    assert add.count('<span class="d-add">+    return a + b;</span>') == 2
    assert add.count('<span class="both">in both</span>') == 2
    assert 'href="../../fake/tiny-add/model.patch"' in add
    assert 'href="../../fake/tiny-add/build.log"' in add
    assert 'href="../../fake/tiny-add/tap/calc_add.t.tap"' in add
    assert "<b>fake</b>" in add and '<a href="../gold/tiny-add.html">gold</a>' in add
    # cost and tokens of the scripted agent's result line
    agent = project.read("fake", "tiny-add", "agent.json", RUN)
    assert f"${agent['cost_usd']:,.2f}" in add and "1,000 in" in add
    # a build that failed: its log's end, every graded assertion failed with no TAP line
    mul = (site_dir / "fake" / "tiny-mul.html").read_text()
    assert "Build <b>compile failed</b>" in mul and "error" in mul.split("build log", 1)[1]
    assert mul.count('<tr class="r-failed">') == 4 and "no TAP line" in mul
    assert "No transcript" in mul  # the scripted agent writes none
    # gold's own page shows no second gold diff
    assert "the gold fix" not in (site_dir / "gold" / "tiny-add.html").read_text()


def test_a_unit_that_was_not_scored_shows_no_verdict_its_tap_contradicts(project):
    """An infra error: the tests ran on the unchanged base (its TAP says `ok 2 - add zeros`), so
    neither the grade nor the page calls an assertion failed, and no strict verdict shows: the
    page and the index cell say the unit was not scored, and why (the agent's error line)."""
    project.doit(
        "run",
        "tiny:gold",
        "tiny:fake",
        "agent_retries=0",
        f"run={RUN}",
        "report=0",
        env={"FAKE_AGENT_tiny_add": "api-error"},
    )
    project.render(f"run={RUN}", site=True)
    grade = project.read("fake", "tiny-add", "grade.json", RUN)
    assert (grade["status"], grade["strict"]) == ("infra_error", None)
    assert grade["fail_to_pass"] == grade["pass_to_pass"] == {"passed": [], "failed": []}
    tap = project.task_dir("fake", "tiny-add", RUN) / "tap" / "calc_add.t.tap"
    assert "ok 2 - add zeros" in tap.read_text().splitlines()
    error = project.read("fake", "tiny-add", "agent.json", RUN)["error"]
    assert error.startswith("phase solve: exit code 1: API Error: 500")
    site_dir = project.results / RUN / "site"
    page = (site_dir / "fake" / "tiny-add.html").read_text()
    assert 'class="r-failed"' not in page and 'class="r-passed"' not in page
    assert "strict:" not in page and '<span class="badge">not scored</span>' in page
    assert (
        f'<p class="warn">Not scored: infra error: {markupsafe.escape(error)}; the next '
        f"<code>doit run</code> runs it again.</p>"
    ) in page
    assert "No assertion was graded: the agent's run gave no patch" in page
    assert "ok 2 - add zeros" in page  # the base's TAP, under the tests
    index = (site_dir / "index.html").read_text()
    cell = re.search(r'data-mode="fake" data-outcome="infra_error">(.*?)</td>', index).group(1)
    assert cell == (
        f'<a href="fake/tiny-add.html" title="fake: not scored: infra error: '
        f'{markupsafe.escape(error)}">INFRA</a>'
    )
    # The unit that was scored keeps its verdict.
    mul = (site_dir / "fake" / "tiny-mul.html").read_text()
    assert mul.count('<tr class="r-passed">') == 4 and "Not scored" not in mul


def test_a_contaminated_unit_is_not_scored_whatever_its_grade_says():
    """A contaminated run's patch was graded (its TAP agrees with the grade), but the outcome is
    contaminated: the page says so and why, with no strict verdict, not "resolved"."""
    grade = {
        "status": "resolved",
        "resolved": True,
        "agent_status": "completed",
        "strict": True,
        "fail_to_pass": {"passed": ["t.t:1 one"], "failed": []},
    }
    agent = {
        "status": "completed",
        "contaminated": True,
        "flags": [
            {"kind": "network", "phase": "solve", "detail": "curl github.com"},
            {
                "kind": "contamination",
                "phase": "solve",
                "detail": "the fix commit's id in a tool result",
            },
        ],
    }
    view = report_site_task.verdict(grade, {}, agent)
    assert (view["outcome"], view["strict"]) == ("contaminated", None)
    assert view["not_scored"] == {
        "outcome": "contaminated",
        "again": False,
        "why": "the fix reached the agent (the fix commit's id in a tool result)",
    }
    assert [a["result"] for a in view["assertions"]] == ["passed"]
    scored = report_site_task.verdict(grade, {}, dict(agent, contaminated=False))
    assert (scored["outcome"], scored["strict"], scored["not_scored"]) == (
        "resolved",
        "resolved",
        None,
    )
    left = report_site_task.not_scored("not_run", {"status": "not_run", "error": ""})
    assert left == {
        "outcome": "not_run",
        "again": True,
        "why": "the run's budget (max_cost) was spent before it started",
    }


# -- incremental, page by page ------------------------------------------------------------------
@pytest.mark.e2e
def test_a_changed_grade_rerenders_its_page_and_the_index_and_nothing_else(site):
    """doit run report: a strict verdict added to one grade.json; then, through the pipeline, a
    task whose grade changes (the scripted agent now fixes tiny-mul). It changes the module's
    run: it comes after the tests that read that run as made."""
    project, site_dir = site
    _, executed = project.doit("run", "report", f"run={RUN}")
    assert executed == []
    grade_path = project.task_dir("fake", "tiny-add", RUN) / "grade.json"
    grade = json.loads(grade_path.read_text())
    grade_path.write_text(json.dumps(dict(grade, strict={"status": "unresolved"})))
    _, executed = project.doit("run", "report", f"run={RUN}")
    assert sorted(executed) == ["site:fake/tiny-add", "site:index"]
    index = (site_dir / "index.html").read_text()
    assert '<small class="strict" title="strict verdict: unresolved">FAIL</small>' in index
    assert "strict: unresolved" in (site_dir / "fake" / "tiny-add.html").read_text()

    before = page_stamps(site_dir)
    project.doit("forget", "agent:tiny/fake/tiny-mul", f"run={RUN}")
    project.doit("run", "tiny:fake", f"run={RUN}")  # FAKE_AGENT: fix
    after = page_stamps(site_dir)
    assert sorted(p for p in after if after[p] != before[p]) == ["fake/tiny-mul.html", "index.html"]
    assert "resolved</span>" in (site_dir / "fake" / "tiny-mul.html").read_text()
    _, executed = project.doit("run", "report", f"run={RUN}")
    assert executed == []


def test_a_run_that_changes_nothing_checks_no_page_after_a_complete_rendering(project):
    """A run that executes nothing, after one that rendered the whole site, reads no page: a
    page edited behind the harness's back stays as it is. Without the record of that complete
    rendering (a run stopped before its end, a command that may change results) every page is
    checked again; a missing page is always rendered."""
    args = ("run", "tiny:gold", "tiny:none", f"run={RUN}")
    project.doit(*args)
    site_dir = project.results / RUN / "site"
    complete, page = site_dir / ".complete", site_dir / "gold" / "tiny-add.html"
    assert complete.exists()
    made = report_site.recorded_inputs(page)
    page.write_text(page.read_text().replace(made, "0" * 64))
    _, executed = project.doit(*args)
    assert executed == [] and report_site.recorded_inputs(page) == "0" * 64
    complete.unlink()  # as a run stopped before its site
    project.doit(*args)
    assert report_site.recorded_inputs(page) == made and complete.exists()

    page.write_text(page.read_text().replace(made, "0" * 64))
    project.doit("forget", "grade:tiny/gold/tiny-add", f"run={RUN}")
    assert not complete.exists()
    project.doit(*args)
    assert report_site.recorded_inputs(page) == made

    page.unlink()
    _, executed = project.doit(*args)
    assert executed == [] and report_site.recorded_inputs(page) == made


def test_templates_decide_which_pages_render_again(project):
    shutil.copytree(SOURCE_ROOT / "templates", project.root / "templates")
    project.doit("run", "tiny:gold", "tiny:none", f"run={RUN}")
    site_dir = project.results / RUN / "site"
    assert [p.relative_to(site_dir).as_posix() for p in pages(site_dir)] == [
        "gold/tiny-add.html",
        "gold/tiny-mul.html",
        "index.html",
        "none/tiny-add.html",
        "none/tiny-mul.html",
    ]
    # The report's template: the report only.
    report_md = project.root / "templates" / "report.md.j2"
    report_md.write_text(report_md.read_text().replace("## Summary", "## Summary of outcomes"))
    _, executed = project.doit("run", "report", f"run={RUN}")
    assert executed == ["report:markdown"]
    # The site's: every page.
    task = project.root / "templates" / "site" / "task.html.j2"
    task.write_text(
        task.read_text().replace(
            '<h2 id="statement">Statement</h2>', '<h2 id="statement">The issue</h2>'
        )
    )
    _, executed = project.doit("run", "report", f"run={RUN}")
    assert site_tasks(executed) == [
        "site:gold/tiny-add",
        "site:gold/tiny-mul",
        "site:index",
        "site:none/tiny-add",
        "site:none/tiny-mul",
    ]
    assert "The issue</h2>" in (site_dir / "gold" / "tiny-add.html").read_text()
    # A page removed is a page made again, and only that one.
    (site_dir / "none" / "tiny-mul.html").unlink()
    _, executed = project.doit("run", "site", f"run={RUN}")
    assert executed == ["site:none/tiny-mul"]


def test_without_a_gold_mode_the_gold_fix_comes_from_the_clone(project):
    project.doit("run", "tiny:none", f"run={RUN}", "report=0")
    # A page that cannot be rendered raises here, where doit's run says the site "was not
    # rendered" (progress.finish) and goes on.
    project.render(f"run={RUN}", site=True)
    page = (project.results / RUN / "site" / "none" / "tiny-add.html").read_text()
    assert "empty: no change" in page
    assert page.count('<span class="d-add">+    return a + b;</span>') == 1  # the gold fix


@pytest.mark.e2e
def test_the_site_tasks_are_listed_and_score_nothing(site):
    project, _ = site
    proc, _ = project.doit("list", "--all", f"run={RUN}")
    names = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert {"report", "report:markdown", "site", "site:index", "site:fake/tiny-mul"} <= names
    proc, _ = project.doit("list")
    assert not [line for line in proc.stdout.splitlines() if line.startswith("site")]
    record = (project.results / RUN / "run.json").read_text()
    project.doit("run", "site:index", "instances=tiny-add", f"run={RUN}")
    assert (project.results / RUN / "run.json").read_text() == record


# -- the readers, on real output ----------------------------------------------------------------
def test_tap_lines_and_graded_assertions_from_real_prove_output(prove_v):
    out, _ = prove_v(
        "t.t",
        "plan(tests => 4);\nok(1, 'one');\nok(0, 'two');\n"
        "SKIP: { skip 'no module', 1; ok(1, 'three'); }\n"
        "subtest 'sub' => sub { plan(tests => 1); ok(1, 'inner'); };\n",
    )
    lines = report_site_task.tap_lines(out)
    assert lines[1] == "ok 1 - one" and lines[2] == "not ok 2 - two"
    assert lines[3].startswith("ok 3 # skip") and lines[4] == "ok 4 - sub"
    grade = {
        "fail_to_pass": {"passed": ["t.t:1 one"], "failed": ["t.t:2 two", "t.t:3 three"]},
        "pass_to_pass": {"passed": ["t.t:4 sub"], "failed": ["u.t:1 elsewhere"]},
        "skipped_assertions": ["t.t:3 three"],
    }
    rows = report_site_task.assertions(grade, {"t.t": out})
    assert [(r["kind"][:4], r["id"], r["result"], r["tap"]) for r in rows] == [
        ("fail", "t.t:2 two", "failed", "not ok 2 - two"),
        ("fail", "t.t:3 three", "skipped", lines[3]),
        ("fail", "t.t:1 one", "passed", "ok 1 - one"),
        ("pass", "u.t:1 elsewhere", "failed", None),
        ("pass", "t.t:4 sub", "passed", "ok 4 - sub"),
    ]


def test_strict_verdicts_disagreement_and_splits():
    sv = report_site_task.strict_verdict
    assert sv({}) is None and sv({"strict": "resolved"}) == "resolved"
    assert sv({"strict": {"status": "unresolved"}}) == "unresolved"
    assert (
        sv({"strict": {"resolved": True}}) == "resolved" and sv({"strict": False}) == "unresolved"
    )
    d = report_site_index.disagreement
    assert d(["resolved", "resolved"])[2] == 0 and d(["unresolved", "compile_failed"])[2] == 0
    assert d(["resolved", "unresolved", None, "infra_error"]) == (1, 2, 102)
    assert (
        d(["resolved", "resolved", "unresolved", "compile_failed"])[2]
        > d(["resolved", "unresolved", "unresolved", "unresolved"])[2]
    )
    assert report_site_index.compared_modes(["gold", "none", "raw", "impl"]) == ["raw", "impl"]
    assert report_site_index.compared_modes(["gold", "none", "raw"]) == ["gold", "none", "raw"]


def test_diff_view_keeps_files_apart_and_cuts_long_diffs(monkeypatch):
    diff = (
        "diff --git a/x.c b/x.c\n--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-old\n+new\n ctx\n"
        "diff --git a/y.c b/y.c\nnew file mode 100644\n--- /dev/null\n+++ b/y.c\n"
        "@@ -0,0 +1 @@\n+y\n"
    )
    view = report_site_task.diff_view(diff, other_files=["y.c"])
    assert [(f["path"], f["in_other"], f["added"], f["removed"]) for f in view["files"]] == [
        ("x.c", False, 1, 1),
        ("y.c", True, 1, 0),
    ]
    assert [k for k, _ in view["files"][0]["lines"]] == [
        "meta",
        "meta",
        "meta",
        "hunk",
        "del",
        "add",
        "ctx",
    ]
    monkeypatch.setattr(report_site_task, "DIFF_LINES", 5)
    view = report_site_task.diff_view(diff)
    assert view["cut"] == 13 - 5 and sum(len(f["lines"]) for f in view["files"]) == 5
    assert report_site_task.diff_view("")["files"] == []


def test_isolation_flags_and_blocked_attempts_are_shown_when_agent_json_has_them(tmp_path):
    """The fields the sandbox is to record (issue 32 renders them; nothing requires them)."""
    layout = Layout(
        root=tmp_path, cache=tmp_path / "cache", results_root=tmp_path / "results", run="r"
    )
    agent = {
        "status": "completed",
        "isolation": "srt",
        "phases": [
            {
                "name": "solve",
                "blocked": [
                    {"host": "pypi.org", "port": 443, "time": "2026-01-01T10:00:05Z"},
                    {"host": "10.0.0.1", "port": 80, "time": None},
                ],
            }
        ],
        "flags": [
            {"kind": "network", "phase": "solve", "detail": "2 connections refused"},
            {"kind": "budget", "phase": None, "detail": "near max_cost"},
        ],
    }
    page = layout.site_page("raw", "t")
    view = report_site_task.agent_view(layout, "raw", "t", agent, page)
    assert view["isolation"] == "srt" and view["blocked"] == 2
    assert [f["kind"] for f in view["phases"][0]["flags"]] == ["network"]
    assert [f["kind"] for f in view["flags_elsewhere"]] == ["budget"]
    turns = [
        {"time": "2026-01-01T10:00:00Z", "blocked": []},
        {"time": "2026-01-01T10:00:10Z", "blocked": []},
    ]
    unplaced = report_site_task.mark_blocked(turns, agent["phases"][0]["blocked"])
    assert [len(t["blocked"]) for t in turns] == [1, 0] and unplaced == [
        agent["phases"][0]["blocked"][1]
    ]
    assert report_site_index.unit_marks(agent) == ["flags", "blocked"]
    assert report_site_index.unit_marks({"phases": [{"name": "solve"}]}) == []
    assert (
        report_site_task.agent_view(layout, "raw", "t", {"status": "completed"}, page)["isolation"]
        is None
    )


TRAJECTORY = session_with_subagent("SITE-1", "SITESUB-2")


def test_turns_of_a_real_claude_code_transcript(claude_program, tmp_path):
    with StandIn(TRAJECTORY) as api:
        rec = Recorder(claude_program, api, tmp_path / "cli")
        capture = rec.run("Please SITE-1", cwd=rec.workspace())
    transcript = tmp_path / "1-solve.transcript.jsonl"
    transcript.write_text("\n".join(capture.lines) + "\n")
    prompt, turns = report_site_task.conversation(
        [e for e in report_site_task.transcript_entries(transcript) if not e.get("agentId")]
    )
    assert prompt["text"] == "Please SITE-1"
    calls = [(c["name"], c["summary"]) for t in turns for c in t["calls"]]
    assert calls[:3] == [("Bash", "seq 1 500"), ("Bash", "echo no; exit 3"), ("Agent", "check")]
    seq = turns[0]["calls"][0]
    assert turns[0]["texts"][0]["text"] == "Let me look."
    assert seq["result"]["text"].startswith("1\n2\n3") and seq["result"]["long"]
    assert seq["result"]["lines"] == 500 and not seq["error"]
    assert turns[1]["calls"][0]["error"] and "Exit code 3" in turns[1]["calls"][0]["result"]["text"]
    assert turns[-1]["texts"][0]["text"] == "All done."
    assert all(t["time"] for t in turns) and [t["n"] for t in turns] == list(
        range(1, len(turns) + 1)
    )
    # The subagent's turns are its own.
    sub = [e for e in report_site_task.transcript_entries(transcript) if e.get("agentId")]
    _, sub_turns = report_site_task.conversation(sub)
    assert [c["summary"] for t in sub_turns for c in t["calls"]] == ["echo from the subagent"]
