"""A fixture run for the site's tests (test_site.py, test_site_browser.py), made by real `doit run`s
of the fixture project (conftest.Project): gold, none and the scripted agent ``fake``, which fixes
tiny-add and breaks the build of tiny-mul (so the modes disagree on tiny-mul); and, given the
Claude Code CLI, ``raw`` with the real CLI against the Anthropic stand-in, so that a page shows a
real transcript: a long output, a failing command, the fix.
"""

import os
import re
import shutil

import claude_cli
from anthropic_standin import StandIn, call, say
from conftest import SOURCE_ROOT

RUN = "site"
RAW_PROMPT = "A user reported the bug below"  # a phrase of templates/prompt_raw.md.j2
FIX = "sed -i -e 's/a - b/a + b/' -e 's/a \\* b + (a > 1)/a * b/' src/core/calc.c"
SCRIPT = {
    RAW_PROMPT: [
        [say("Let me look at the code first."), call("Bash", command="seq 1 400")],
        [call("Bash", command="grep -n 'return' src/core/calc.c; exit 3")],
        [say("add() subtracts; fixing it."), call("Bash", command=FIX)],
        [say("Fixed: `calc_add` adds again.")],
    ]
}
BREAK = {"FAKE_AGENT_tiny_mul": "break"}


def raw_mode():
    """The shipped modes.toml's `raw` mode, as text."""
    text = (SOURCE_ROOT / "modes.toml").read_text()
    return re.search(r"^\[modes\.raw\]\n.*?(?=^\[modes\.(?!raw\.))", text, re.M | re.S).group(0)


# Informative fields of the fixture's tasks, so that the index has areas and a split to filter.
FACTS = {
    "tiny-add": {"area": "core", "fix_date": "2024-11-05"},
    "tiny-mul": {"area": "http", "fix_date": "2025-02-14"},
}


def make_run(project, claude_program=None):
    """Run the modes (raw only with `claude_program`); returns the names of the modes run."""
    bench = project.benchmark()
    for task in bench["tasks"]:
        task.update(FACTS[task["instance_id"]])
    project.write_benchmark(bench)
    targets = ["tiny:gold", "tiny:none", "tiny:fake"]
    env = dict(BREAK)
    if claude_program is None:
        proc, _ = project.doit("run", *targets, f"run={RUN}", env=env)
        assert "was not rendered" not in proc.stderr, proc.stderr  # progress.finish's warning
        return ["gold", "none", "fake"]
    with open(project.root / "modes.toml", "a") as f:
        f.write("\n" + raw_mode())
    bin_dir = project.base / "claude-bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(claude_program)
    config = project.base / "claude-config"
    config.mkdir()
    with StandIn(SCRIPT) as api:
        cli_env = claude_cli.environment(api, config, CLAUDE_CODE_MAX_RETRIES="0")
        env.update({k: v for k, v in cli_env.items() if os.environ.get(k) != v})
        env["PATH"] = f"{bin_dir}{os.pathsep}{project.env['PATH']}"
        proc, _ = project.doit("run", *targets, "tiny:raw", f"run={RUN}", env=env)
    assert "was not rendered" not in proc.stderr, proc.stderr
    return ["gold", "none", "fake", "raw"]


def available_claude():
    """The Claude Code CLI if it is installed (never installed here), else None."""
    program = claude_cli.installed_claude()
    return program if program and shutil.which(program) else None
