"""Thin wrappers over GitPython's command interface with an environment that never finds the
project's own repository (the cache may live inside it)."""

import os
import subprocess

import git


def isolated_env(extra=None):
    env = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
           "GIT_AUTHOR_NAME": "nginx-eval", "GIT_AUTHOR_EMAIL": "nginx-eval@localhost",
           "GIT_COMMITTER_NAME": "nginx-eval", "GIT_COMMITTER_EMAIL": "nginx-eval@localhost"}
    if extra:
        env.update(extra)
    return env


def git_in(path, extra_env=None):
    """A git.Git bound to `path` (a bare repository or a work tree)."""
    g = git.Git(str(path))
    g.update_environment(**isolated_env(extra_env))
    return g


def has_commit(git_dir, sha):
    try:
        git_in(git_dir).execute(["git", "cat-file", "-e", f"{sha}^{{commit}}"])
        return True
    except git.GitCommandError:
        return False


def ceiling_env(path):
    """Environment in which git run below `path` does not discover an enclosing repository."""
    return {"GIT_CEILING_DIRECTORIES": os.path.dirname(os.path.abspath(path))}


def extract_tree(git_dir, commit, dest, paths=(), touch=False):
    """Write the files of `commit` (or just `paths`) into `dest` with git archive | tar.

    touch=True gives the files the current time instead of the commit's, so make sees them as
    newer than objects built earlier.
    """
    os.makedirs(dest, exist_ok=True)
    archive = subprocess.Popen(["git", f"--git-dir={git_dir}", "archive", "--format=tar", commit,
                                "--", *paths], stdout=subprocess.PIPE)
    tar = ["tar", "-x", "-C", str(dest)] + (["--touch"] if touch else [])
    subprocess.run(tar, stdin=archive.stdout, check=True)
    archive.stdout.close()
    if archive.wait() != 0:
        raise RuntimeError(f"git archive {commit} from {git_dir} failed")
