#!/usr/bin/env python3
"""The NGINX_EVAL_REPO_URL of local mirrors of nginx and nginx-tests, for .ci/run: with it the
tests that need real nginx run instead of skipping.

    python3 scripts/mirrors_url.py [CHECKOUT]
    python3 scripts/mirrors_url.py --data [CHECKOUT]

prints `<folder>/{owner}+{name}/repo` for the first folder of mirrors found, or nothing when
there is none; with --data, the shared data folder found the same way (../shared/data: the real
SWE-bench rows the importer's tests read, as SHARED_DATA_DIR). It looks, in this order, for:
1. the folder NGINX_EVAL_MIRRORS names (an error when it names no folder);
2. ../shared/mirrors beside CHECKOUT's root (default: the checkout this script is in);
3. ../shared/mirrors beside the repository the checkout comes from: a worktree's main checkout,
   or the origin of a clone when that is a local path (CI may run a temporary clone).
"""

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BESIDE = Path("..", "shared", "mirrors")
DATA_BESIDE = Path("..", "shared", "data")
TEMPLATE = "{owner}+{name}/repo"


class NoMirrors(Exception):
    """NGINX_EVAL_MIRRORS names no folder."""


def _git(checkout: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(checkout), *args], capture_output=True, text=True, check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 else ""


def roots(checkout: Path) -> list[Path]:
    """The checkout's root, then the roots of the repositories it comes from."""
    found = [Path(_git(checkout, "rev-parse", "--show-toplevel") or checkout)]
    common = _git(checkout, "rev-parse", "--path-format=absolute", "--git-common-dir")
    if common:  # a worktree's is its main checkout's .git
        found.append(Path(common).parent)
    origin = _git(checkout, "config", "--get", "remote.origin.url").removeprefix("file://")
    if os.path.isabs(origin):
        found.append(Path(origin))
    return list(dict.fromkeys(p.resolve() for p in found))


def mirrors_folder(checkout: Path, environ: Mapping[str, str]) -> Path | None:
    """The folder of mirrors for `checkout` (see the module's docstring), or None."""
    named = environ.get("NGINX_EVAL_MIRRORS")
    if named:
        if not Path(named).is_dir():
            raise NoMirrors(f"NGINX_EVAL_MIRRORS={named} is not a folder")
        return Path(named).resolve()
    for root in roots(checkout):
        if (root / BESIDE).is_dir():
            return (root / BESIDE).resolve()
    return None


def data_folder(checkout: Path) -> Path | None:
    """The shared data folder beside `checkout` or a repository it comes from, or None."""
    for root in roots(checkout):
        if (root / DATA_BESIDE).is_dir():
            return (root / DATA_BESIDE).resolve()
    return None


def mirrors_url(checkout: Path, environ: Mapping[str, str]) -> str | None:
    """NGINX_EVAL_REPO_URL for the folder of mirrors, or None."""
    folder = mirrors_folder(checkout, environ)
    return f"{folder}/{TEMPLATE}" if folder else None


def main(argv: list[str]) -> int:
    if argv[:1] == ["--data"]:
        folder = data_folder(Path(argv[1]) if argv[1:] else ROOT)
        if folder:
            print(folder)
        return 0
    checkout = Path(argv[0]) if argv else ROOT
    try:
        url = mirrors_url(checkout, os.environ)
    except NoMirrors as e:
        print(f"nginx-eval: error: {e}", file=sys.stderr)
        return 2
    if url:
        print(url)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
