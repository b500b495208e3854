"""What stands in, on an agent's PATH, for the commands that would reach beyond the benchmark:
``gh`` (GitHub's CLI) succeeds and does nothing, so a planner that reports to GitHub goes on;
``git push``, ``fetch``, ``pull`` and ``rebase`` are refused with one line (the workspace has no
remote to reach, and a rebase would rewrite the commits a loop phase made), every other git
command runs the real git. Written into each attempt's home (``bin/``), first on the phases'
PATH (agent/stage.py); the harness's own git calls do not go through them.
"""

import os
import shlex
import shutil
from pathlib import Path

STUB_DIR = "bin"
REFUSED_GIT = ("push", "fetch", "pull", "rebase")
# git's options that take the next word as their value: what follows them is not the command.
GIT_VALUE_OPTIONS = ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path")

GH = """#!/bin/sh
# nginx-eval: GitHub's CLI stubbed for the benchmark: nothing is sent, and it succeeds.
exit 0
"""

GIT = """#!/bin/sh
# nginx-eval: git with the commands that reach a remote or rewrite history refused.
skip=
for word in "$@"; do
  if [ -n "$skip" ]; then skip=; continue; fi
  case "$word" in
    {value_options}) skip=1 ;;
    -*) ;;
    {refused})
      echo "git $word: refused by the benchmark harness (no remote, no history rewrite)" >&2
      exit 1 ;;
    *) break ;;
  esac
done
exec {git} "$@"
"""


def stub_dir(attempt_home: Path) -> Path:
    return attempt_home / STUB_DIR


def write_stubs(attempt_home: Path, environ: dict[str, str]) -> Path:
    """The stubs (module docstring) in the attempt's home; their directory, for PATH."""
    folder = stub_dir(attempt_home)
    folder.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join(p for p in environ.get("PATH", "").split(os.pathsep) if p != str(folder))
    real = shutil.which("git", path=path) or "git"
    scripts = {
        "gh": GH,
        "git": GIT.format(
            value_options="|".join(GIT_VALUE_OPTIONS),
            refused="|".join(REFUSED_GIT),
            git=shlex.quote(real),
        ),
    }
    for name, text in scripts.items():
        (folder / name).write_text(text, encoding="utf-8")
        (folder / name).chmod(0o755)
    return folder
