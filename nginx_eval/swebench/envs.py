"""A SWE-bench task's Python environment, built here from the official harness's own
specification, and how the agent's sandbox and the local verdict (verdict.py) show it.

The specification is the ``swebench`` package's, 4.1.0 (extra ``swebench-local``):
MAP_REPO_VERSION_TO_SPECS (python, packages, pip_packages, pre_install, install, test_cmd), its
log parsers, its non-test extensions; read once per package version into
``layout.swe_specs_json`` (the import is slow). NGINX_EVAL_SWE_SPECS names a JSON file
``{repo: {version: spec}}`` of further specs, which may also name a "log_parser", replace the
packages installed first ("bootstrap": [], BOOTSTRAP otherwise) and give "venv_options".

An environment is a venv made by the spec's Python from a pinned Debian root filesystem
(scripts/make-python-rootfs.sh; or, NGINX_EVAL_SWE_PYTHON=host, the host's python3 over its /),
one per (repo, version), at the FIXED path VENV_AT inside bubblewrap, with the repository at
environment_setup_commit at TESTBED installed as the spec says: an editable install points at
TESTBED, where the agent's workspace or the grader's checkout is bound later. Built outside any
sandbox, with the network (PyPI), as root of its user namespace; cached under
``layout.swe_env_dir(key)`` by the digest of its spec, the root filesystem and the setup commit.
Its ``env.json`` (core/records.EnvJson) lies beside ``venv/``, ``build.log`` and GENERATED.

What a task's sandbox shows is its instance (build_instance): a copy of that venv with the
repository installed again at the task's base commit, as the official instance image installs
it, cached under ``layout.swe_instance_dir(key)`` by the environment's key and the base commit,
its ``instance.json`` (core/records.InstanceJson) beside ``venv/``, ``build.log`` and GENERATED.
"""

import contextlib
import filecmp
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..core import gitcmd, jsonio, locks, procs, rootfs
from ..core.errors import UserError
from ..core.layout import SOURCE_ROOT, Layout, repo_url
from ..core.records import EnvJson, InstanceJson, read_record, versioned, write_record

if TYPE_CHECKING:
    from ..run.swebench import SweTask

# The fixed paths inside every sandbox that shows an environment, and inside its build.
VENV_AT = "/opt/swe-env"
TESTBED = "/testbed"
# Debian suites by the Python they carry.
SUITES = {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}
ROOTFS_BASE_VAR = "NGINX_EVAL_PYTHON_ROOTFS"  # the root filesystems' parent directory
ROOTFS_BASE_DEFAULT = "/opt/nginx-eval"
PYTHON_VAR = "NGINX_EVAL_SWE_PYTHON"  # "host": the host's python3 over the host's /
SPECS_VAR = "NGINX_EVAL_SWE_SPECS"  # a JSON file of further specifications
HOST = "host"
SWEBENCH = "swebench"
SWEBENCH_PIN = "4.1.0"  # pyproject's swebench-local extra
BUILT: Literal["built"] = "built"
NOT_BUILT: Literal["not_built"] = "not_built"
# What the venv starts from before the spec's packages: a conda environment of the official
# images brings a pip, setuptools and wheel of its day, and a Debian venv the suite's (bullseye's
# pip 20.3 cannot make an editable install of a pyproject.toml project).
BOOTSTRAP = ("pip==24.0", "setuptools==69.5.1", "wheel==0.43.0")
# Raised when what a build does changes, so that every environment is built again.
BUILDER_VERSION = 2
# The agent's sandbox sets proxy variables (srt's, for the model endpoint) that the official
# image has not, and the tests of some projects read them (psf/requests' getproxies(), a session
# proxied by them): a venv's Python drops the variables UNSET_VAR names (comma-separated) at
# start, which only the sandbox's view sets. The agent program and its shell keep them.
UNSET_VAR = "NGINX_EVAL_SWE_UNSET"
PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "GRPC_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "grpc_proxy",
)
STARTUP_PTH = "_nginx_eval_sandbox.pth"
STARTUP_LINE = (
    "import os; [os.environ.pop(name, None) "
    f"for name in os.environ.pop({UNSET_VAR!r}, '').split(',') if name]\n"
)
MAKE_SCRIPT = "scripts/make-python-rootfs.sh"


# -- the interface the agent's sandbox uses -------------------------------------------------------


@dataclass(frozen=True)
class SandboxView:
    """What a sandbox binds to show a built environment (host paths, and where they go inside).

    rootfs: the root filesystem whose /usr (with its /bin, /lib, /lib64, /sbin links) and /etc
    files replace the host's; "/" when the environment was made with the host's own Python
    (nothing to replace). venv: the directory to bind READ-ONLY at `venv_at`. The repository (the
    agent's workspace) goes at `testbed`, where the environment's editable install points.
    `path`: directories to put first on PATH; `environment`: variables to set inside.
    `testbed_files`: a host directory (or None) of files the install wrote into the checkout
    (pytest's src/_pytest/_version.py, egg-info) to copy into the workspace before the agent
    starts, as the official image's /testbed has them: pytest does not import without its
    _version.py."""

    rootfs: Path
    venv: Path
    python: str
    testbed_files: Path | None = None
    key: str = ""  # what the sandbox shows: the task's install's key, else the environment's
    venv_at: str = VENV_AT
    testbed: str = TESTBED
    path: tuple[str, ...] = (f"{VENV_AT}/bin",)
    environment: Mapping[str, str] = field(
        default_factory=lambda: {
            "VIRTUAL_ENV": VENV_AT,
            "PYTHONDONTWRITEBYTECODE": "1",  # the venv is read-only; /testbed keeps no .pyc
            UNSET_VAR: ",".join(PROXY_VARIABLES),
        }
    )


def sandbox_view(task: "SweTask", layout: Layout | None = None) -> SandboxView | None:
    """How a sandbox shows the environment of `task` with the repository installed at its base
    commit (build_instance), or None when that is not built (env.json and instance.json say
    why; not yet built: neither is there)."""
    layout = layout or Layout.from_env()
    env = environment_of(task, layout)
    rec = read_record(env.env_json)
    if not rec or rec.get("status") != BUILT or rec.get("key") != env.key:
        return None
    if env.python_root is None:  # a built environment has one
        return None
    inst = instance_of(task, layout)
    shown: Environment | Instance = env
    if inst is not None:
        irec = instance_record(task, layout)
        if not irec or irec["status"] != BUILT:
            return None
        shown = inst
    generated = shown.directory / GENERATED
    return SandboxView(
        rootfs=env.python_root.root,
        venv=shown.venv,
        python=env.python,
        testbed_files=generated if generated.is_dir() else None,
        key=shown.key,
    )


def test_command(task: "SweTask", layout: Layout | None = None) -> str:
    """The command, run in TESTBED with the environment's PATH, that runs the task's test files
    as the official eval script does: the spec's test_cmd and the test patch's test files."""
    spec = spec_of(task.repo, task.version, layout or Layout.from_env())
    if spec is None:
        raise UserError(
            f"the swebench package has no specification of {task.repo} {task.version}",
            task=task.instance_id,
            field="version",
        )
    cmd = spec["test_cmd"]
    if isinstance(cmd, list):  # several commands: the eval script runs the last on the files
        cmd = cmd[-1]
    return " ".join([cmd, *test_directives(task, layout)])


def env_task_name(task: "SweTask") -> str:
    """The doit task that builds the environment of `task` (a task_dep of whatever needs it)."""
    return f"{ENV_BASENAME}:{env_name(task.repo, task.version)}"


def env_record(task: "SweTask", layout: Layout | None = None) -> EnvJson | None:
    """The env.json of `task`'s environment as built now, or None when none was built."""
    layout = layout or Layout.from_env()
    env = environment_of(task, layout)
    rec = read_record(env.env_json)
    return rec if rec and rec.get("key") == env.key else None


# -- the specification ----------------------------------------------------------------------------


def swebench_version() -> str | None:
    """The installed swebench package's version (cheap: its metadata), or None."""
    try:
        return importlib.metadata.version(SWEBENCH)
    except importlib.metadata.PackageNotFoundError:
        return None


def missing_package() -> str | None:
    """Why the swebench package cannot give specifications here, or None."""
    version = swebench_version()
    if version is None:
        return (
            f"the swebench package is not installed in {sys.executable} "
            f"(pip install 'nginx-eval[swebench-local]')"
        )
    if version != SWEBENCH_PIN:
        return (
            f"swebench {version} is installed; environments need {SWEBENCH_PIN} "
            "(5.x no longer carries the specifications): pip install 'nginx-eval[swebench-local]'"
        )
    return None


def read_package() -> dict[str, Any]:
    """What the swebench package says of environments and logs, as specs.json holds it (the
    slow import: once per package version)."""
    from swebench.harness import constants
    from swebench.harness.log_parsers import MAP_REPO_TO_PARSER

    return {
        "swebench": swebench_version(),
        "specs": json.loads(json.dumps(constants.MAP_REPO_VERSION_TO_SPECS, default=str)),
        "parsers": {repo: fn.__name__ for repo, fn in MAP_REPO_TO_PARSER.items()},
        "reqs_paths": dict(constants.MAP_REPO_TO_REQS_PATHS),
        "repo_install": dict(constants.MAP_REPO_TO_INSTALL),
        "non_test_exts": list(constants.NON_TEST_EXTS),
        "start": constants.START_TEST_OUTPUT,
        "end": constants.END_TEST_OUTPUT,
    }


@lru_cache(maxsize=4)
def _package_facts(path: Path) -> dict[str, Any]:
    data = jsonio.read_json(path)
    if not data:
        problem = missing_package()
        if problem:
            raise UserError(problem)
        data = read_package()
        jsonio.write_json(path, data)
    return data


def package_facts(layout: Layout) -> dict[str, Any]:
    """specs.json of the installed swebench package (read from it the first time), with the
    specifications of NGINX_EVAL_SWE_SPECS merged in."""
    version = swebench_version()
    if version is None or version != SWEBENCH_PIN:
        facts: dict[str, Any] = {"specs": {}, "parsers": {}, "reqs_paths": {}, "repo_install": {}}
        facts.update(_FALLBACK)
    else:
        facts = dict(_package_facts(layout.swe_specs_json(version)))
    extra = os.environ.get(SPECS_VAR)
    if extra:
        added = _extra_specs(Path(extra))
        facts["specs"] = {
            **facts["specs"],
            **{r: {**facts["specs"].get(r, {}), **v} for r, v in added.items()},
        }
        facts["parsers"] = dict(facts["parsers"])
        for repo, versions in added.items():
            for spec in versions.values():
                if spec.get("log_parser"):
                    facts["parsers"][repo] = spec["log_parser"]
    return facts


# Without the package (only NGINX_EVAL_SWE_SPECS's specifications): its constants as of 4.1.0.
_FALLBACK = {
    "non_test_exts": [".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml",
                      ".yaml", ".toml"],
    "start": ">>>>> Start Test Output",
    "end": ">>>>> End Test Output",
}  # fmt: skip


@lru_cache(maxsize=4)
def _extra_specs(path: Path) -> dict[str, dict[str, dict]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read it as JSON ({e})", file=path) from None
    if not isinstance(data, dict) or not all(
        isinstance(v, dict) and all(isinstance(s, dict) for s in v.values()) for v in data.values()
    ):
        raise UserError("must be {repo: {version: spec}}", file=path)
    return data


def spec_of(repo: str, version: str, layout: Layout) -> dict[str, Any] | None:
    """The specification of (repo, version), or None when there is none."""
    return package_facts(layout)["specs"].get(repo, {}).get(version)


DIFF_HEADER = re.compile(r"diff --git a/.* b/(.*)")


def test_directives(task: "SweTask", layout: Layout | None = None) -> list[str]:
    """The test files the official eval script runs: swebench's get_test_directives (the files
    of the test patch but those with a non-test extension; Django's are its own) reproduced,
    not imported (tests/test_swe_envs.py compares the two on real rows)."""
    exts = package_facts(layout or Layout.from_env())["non_test_exts"]
    files = DIFF_HEADER.findall(task.test_patch)
    return [f for f in files if not any(f.endswith(e) for e in exts)]


def test_files(task: "SweTask") -> list[str]:
    """The files the test patch touches (swebench's get_modified_files: the eval script resets
    them to the base before applying the patch)."""
    found = []
    for line in task.test_patch.splitlines():
        if line.startswith("--- a/"):
            found.append(line[len("--- a/") :])
    return found


# -- the Python root filesystem -------------------------------------------------------------------


@dataclass(frozen=True)
class PythonRoot:
    """Where an environment's Python comes from: a suite's root filesystem, or the host's /."""

    suite: str  # "bullseye"..., or HOST
    directory: Path | None  # the made root filesystem's directory (None: the host's)
    python: str  # "3.9"
    executable: str  # the interpreter inside

    @property
    def root(self) -> Path:
        return self.directory / "root" if self.directory else Path("/")

    def digest(self) -> str | None:
        """The root filesystem's digest (sha256 of its manifest), or None when not made."""
        if self.directory is None:
            return HOST
        try:
            return (self.directory / "manifest.sha256").read_text().strip() or None
        except OSError:
            return None


def rootfs_base(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    value = env.get(ROOTFS_BASE_VAR) or ROOTFS_BASE_DEFAULT
    if not os.path.isabs(value):
        raise UserError(f"{ROOTFS_BASE_VAR} must be an absolute path, not {value!r}")
    return Path(value)


@lru_cache(maxsize=1)
def host_python() -> tuple[str, str] | None:
    """(version "3.11", real path) of the host's python3, or None."""
    found = shutil.which("python3")
    if not found:
        return None
    out = subprocess.run(
        [found, "-c", "import sys; print('%d.%d' % sys.version_info[:2], sys.executable)"],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        return None
    version, exe = out.stdout.split()
    return version, os.path.realpath(exe)


def python_root(python: str, environ: Mapping[str, str] | None = None) -> PythonRoot | str:
    """The root filesystem that gives Python `python` ("3.9"), or why none does."""
    env = os.environ if environ is None else environ
    if env.get(PYTHON_VAR) == HOST:
        found = host_python()
        if found is None:
            return "no python3 on the host's PATH"
        if found[0] != python:
            return f"the spec asks for Python {python}; the host's python3 is {found[0]}"
        return PythonRoot(HOST, None, python, found[1])
    suite = SUITES.get(python)
    if suite is None:
        offered = ", ".join(f"{s} {v}" for v, s in SUITES.items())
        return f"the spec asks for Python {python}; no Debian suite here offers it ({offered})"
    return PythonRoot(
        suite, rootfs_base(env) / f"python-{suite}", python, f"/usr/bin/python{python}"
    )


# -- one environment ------------------------------------------------------------------------------


def env_name(repo: str, version: str) -> str:
    """The environment's name: psf+requests-2.0."""
    return f"{repo.replace('/', '+')}-{version}"


@dataclass(frozen=True)
class Environment:
    """The environment of (repo, version) as it would be built now."""

    repo: str
    version: str
    setup_commit: str
    spec: dict[str, Any] | None
    python_root: PythonRoot | None
    problem: str | None  # why it cannot be built here, or None
    key: str
    directory: Path

    @property
    def python(self) -> str:
        return str((self.spec or {}).get("python", ""))

    @property
    def venv(self) -> Path:
        return self.directory / "venv"

    @property
    def env_json(self) -> Path:
        return self.directory / "env.json"

    @property
    def build_log(self) -> Path:
        return self.directory / "build.log"

    @property
    def name(self) -> str:
        return env_name(self.repo, self.version)

    def spec_digest(self) -> str:
        return jsonio.digest(
            {
                "spec": self.spec,
                "bootstrap": BOOTSTRAP,
                "builder": BUILDER_VERSION,
                "setup_commit": self.setup_commit,
                "repo_install": self.repo_install,
            }
        )

    repo_install: str | None = None


def environment_of(task: "SweTask", layout: Layout) -> Environment:
    """The environment `task` runs in (its key and directory; whether it can be built here)."""
    return _environment(
        layout, task.repo, task.version, task.environment_setup_commit or task.base_commit
    )


def _environment(layout: Layout, repo: str, version: str, setup_commit: str) -> Environment:
    facts = package_facts(layout)
    spec = facts["specs"].get(repo, {}).get(version)
    problem = None
    root: PythonRoot | None = None
    if spec is None:
        problem = (
            missing_package() or f"the swebench package has no specification of {repo} {version}"
        )
    else:
        found = python_root(str(spec.get("python", "")))
        if isinstance(found, str):
            problem = found
        else:
            root = found
            problem = unsupported(spec)
    env = Environment(
        repo=repo,
        version=version,
        setup_commit=setup_commit,
        spec=spec,
        python_root=root,
        problem=problem,
        key="",
        directory=Path(),
        repo_install=facts["repo_install"].get(repo),
    )
    digest = jsonio.digest({"spec": env.spec_digest(), "rootfs": root.digest() if root else None})
    key = f"{env.name}-{digest[:12]}"
    return Environment(**{**env.__dict__, "key": key, "directory": layout.swe_env_dir(key)})


def unsupported(spec: Mapping[str, Any]) -> str | None:
    """Why a specification asks for what is not built here (conda's own environment files, a
    command that installs system packages), or None."""
    if spec.get("packages") == "environment.yml":
        return "the spec installs a conda environment.yml (conda is not used here)"
    for command in [*spec.get("pre_install", []), *spec.get("eval_commands", [])]:
        if re.search(r"\b(apt-get|apt|conda)\b", command):
            return f"the spec runs {command!r} (system or conda packages are not installed here)"
    return None


ENV_BASENAME = "swe-env"


def bytes_of(path: Path, besides: Path | None = None) -> int:
    """The disk a directory takes (its files' sizes), leaving out the files it shares (hard
    links) with the directory `besides`."""
    shared = set()
    if besides is not None:
        for here, _, files in os.walk(besides):
            for name in files:
                with contextlib.suppress(OSError):
                    shared.add(os.lstat(os.path.join(here, name)).st_ino)
    total = 0
    for here, _, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(here, name))
            except OSError:
                continue
            if st.st_ino not in shared:
                total += st.st_size
    return total


def share_unchanged(copy: Path, original: Path) -> int:
    """Make each regular file of `copy` whose bytes equal those of the file at the same path
    under `original` a hard link to that file; the bytes no longer held twice. An install at a
    base commit changes a few files of its copy of the environment's venv; both trees are
    read-only once built (the sandbox binds them read-only; a verdict copies the
    environment's), so sharing their files is safe."""
    saved = 0
    for here, _, files in os.walk(copy):
        for name in files:
            path = Path(here) / name
            twin = original / path.relative_to(copy)
            try:
                mine, theirs = os.lstat(path), os.lstat(twin)
            except OSError:
                continue
            if (
                not stat.S_ISREG(mine.st_mode)
                or not stat.S_ISREG(theirs.st_mode)
                or mine.st_size != theirs.st_size
                or mine.st_ino == theirs.st_ino
                or not filecmp.cmp(path, twin, shallow=False)
            ):
                continue
            partial = path.with_name(f".{name}.shared")
            os.link(twin, partial)
            os.replace(partial, path)
            saved += mine.st_size
    return saved


# -- building -------------------------------------------------------------------------------------

BUILD_TIMEOUT = 1800.0  # seconds; the official harness gives an image build no limit
# Files of the checkout an install writes (setuptools_scm's _version.py, egg-info) that the
# agent's workspace and the verdict's checkout get too, as the official image has them.
GENERATED = "testbed-files"
SKIPPED_GENERATED = ("__pycache__", ".pyc")
PASSED_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)


def source_of(layout: Layout, repo: str) -> str:
    """Where a checkout of `repo` is fetched from: the run's bare clone when there is one,
    otherwise NGINX_EVAL_REPO_URL's."""
    bare = layout.bare_repo(repo)
    return str(bare) if bare.is_dir() else repo_url(repo)


def checkout(source: str, commit: str, dest: Path, tags: bool = False) -> None:
    """`dest` (made afresh) a repository at `commit` from `source`; with `tags`, the tags of
    `source` too (setuptools_scm takes a version from the last one before `commit`, as in the
    official image's clone)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    env = gitcmd.git_environment(dest)

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=dest, env=env, check=True, capture_output=True)

    if tags and os.path.isdir(source):
        # A local repository: its objects hard-linked, its tags with them (fetching every tag
        # copies the whole history each time).
        git("clone", "--quiet", "--local", "--no-checkout", source, ".")
        git("remote", "remove", "origin")
    else:
        git("init", "--quiet")
        refs = [commit] + (["+refs/tags/*:refs/tags/*"] if tags else [])
        git("fetch", "--quiet", "--no-tags", source, *refs)
    git("checkout", "--quiet", "-B", "main", commit)
    git("config", "user.email", "setup@swebench.config")
    git("config", "user.name", "SWE-bench")


def requirements(layout: Layout, env: Environment, testbed: Path) -> str | None:
    """The requirements a "packages": "requirements.txt" spec installs: swebench's
    get_requirements_by_commit (the first of the repository's requirement paths that exists at
    environment_setup_commit, its `-r` files inlined, `-e .`, comments and `.[test` left out;
    then clean_requirements) read from the checkout instead of GitHub."""
    from swebench.harness.test_spec.python import clean_requirements

    paths = package_facts(layout)["reqs_paths"].get(env.repo) or []
    for path in paths:
        if (testbed / path).is_file():
            break
    else:
        return None

    def excluded(line: str) -> bool:
        return any(line.strip().startswith(x) for x in ("-e .", "#", ".[test"))

    original, additional = [], []
    directory = Path(path).parent
    for line in (testbed / path).read_text().split("\n"):
        if line.strip().startswith("-r"):
            included = testbed / directory / line[len("-r") :].strip()
            if included.is_file():
                additional += [x for x in included.read_text().split("\n") if not excluded(x)]
        elif not excluded(line):
            original.append(line)
    additional.append("\n".join(original))
    return str(clean_requirements("\n".join(additional)))


def build_steps(env: Environment, reqs: bool) -> list[str]:
    """The shell commands of a build, run in TESTBED (the official image's env and instance
    scripts, with a venv for conda's environment)."""
    assert env.spec is not None and env.python_root is not None
    spec = env.spec
    options = "".join(f" {shlex.quote(o)}" for o in spec.get("venv_options", []))
    steps = [
        f"{env.python_root.executable} -m venv{options} {VENV_AT}",
        f". {VENV_AT}/bin/activate",
    ]
    bootstrap = spec.get("bootstrap", BOOTSTRAP)
    if bootstrap:
        steps.append("python -m pip install " + " ".join(shlex.quote(p) for p in bootstrap))
    packages = spec.get("packages", "")
    if reqs:
        steps.append("python -m pip install -r /tmp/swe-build/requirements.txt")
    elif packages and packages != "requirements.txt":
        steps.append(f"python -m pip install {packages}")
    if spec.get("pip_packages"):
        steps.append(
            "python -m pip install " + " ".join(shlex.quote(p) for p in spec["pip_packages"])
        )
    return steps + install_steps(env)


def install_steps(env: Environment) -> list[str]:
    """The repository's install (the official instance image's: the repository's own install
    command, the spec's pre_install and install), run in TESTBED in the activated venv."""
    spec = env.spec or {}
    steps = [env.repo_install] if env.repo_install else []
    steps += list(spec.get("pre_install", []))
    if spec.get("install"):
        steps.append(spec["install"])
    return steps


def passed_environment() -> tuple[dict[str, str], list[str]]:
    """The host's pip settings (PIP_*) and proxies a build keeps, and the host paths they name
    (a find-links directory, a certificate file), bound read-only."""
    kept = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k in PASSED_VARIABLES}
    paths = [
        v
        for k, v in kept.items()
        if k.startswith("PIP_") and os.path.isabs(v) and os.path.exists(v)
    ]
    return kept, paths


def run_script(
    layout: Layout,
    root: PythonRoot,
    script: str,
    log: Path,
    *,
    mounts: list[tuple[str, str | Path, str]],
    timeout: float,
    extra_env: Mapping[str, str] | None = None,
    outer: Sequence[str] = (),
    launcher: Sequence[str] = (),
) -> procs.Outcome:
    """Run `script` (sh -ex) in bwrap over `root` as root of its namespace, in TESTBED, with the
    host's network, its pip settings (passed_environment) and pip's shared cache, its output
    appended to `log`; bwrap started by the host's argv prefix `outer` (a network namespace of
    its own: services.py), the script by `launcher` inside."""
    kept, paths = passed_environment()
    layout.swe_pip_cache.mkdir(parents=True, exist_ok=True)
    argv = rootfs.command_in(
        root.root,
        [*launcher, "/bin/sh", "-exc", script],
        cwd=TESTBED,
        readable=[*paths, "/etc/resolv.conf"] if root.directory else paths,
        writable=[layout.swe_pip_cache],
        network=True,
        mounts=mounts,
        uid=0,
    )
    env = rootfs.environment(
        {
            "HOME": "/tmp",
            "USER": "root",
            "LOGNAME": "root",
            "LANG": "C.UTF-8",
            **kept,
            "PIP_CACHE_DIR": str(layout.swe_pip_cache),
            **(extra_env or {}),
        },
        path=f"{VENV_AT}/bin:{rootfs.PATH}:/usr/sbin:/sbin",
    )
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return procs.run_limited(
            [*outer, *argv], cwd="/", env=env, timeout=timeout, stdout=out, stderr=out
        )


def last_lines(path: Path, n: int = 1) -> str:
    try:
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-n:])


def ensure_rootfs(root: PythonRoot) -> str | None:
    """Make the suite's root filesystem when it is missing or stale (scripts/make-python-rootfs.sh),
    then why it cannot be used, or None."""
    if root.directory is None:
        return None if shutil.which("bwrap") else "bwrap is not on PATH"
    chain = rootfs.Toolchain(root.directory)
    if rootfs.problem(chain) is None:
        return None
    script = SOURCE_ROOT / MAKE_SCRIPT
    done = subprocess.run(
        ["sh", str(script), root.suite],
        env=dict(os.environ, **{ROOTFS_BASE_VAR: str(root.directory.parent)}),
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        return f"{MAKE_SCRIPT} {root.suite} failed: {last_lines_of(done.stdout + done.stderr)}"
    return rootfs.problem(chain)


def last_lines_of(text: str) -> str:
    lines = [x for x in text.splitlines() if x.strip()]
    return lines[-1] if lines else ""


def build(layout: Layout, task: "SweTask") -> EnvJson:
    """Build the environment of `task` when its env.json is not current (env.json: built or
    not_built with the reason), and return its env.json."""
    env = environment_of(task, layout)
    if env.python_root is not None and env.problem is None:
        problem = ensure_rootfs(env.python_root)
        env = environment_of(task, layout)  # the root filesystem's digest is known now
    else:
        problem = env.problem
    current = read_record(env.env_json)
    if current and current.get("key") == env.key:
        return current
    with locks.locked(layout.lock(f"swe-env-{env.key}")):
        current = read_record(env.env_json)
        if current and current.get("key") == env.key:
            return current
        return _build(layout, env, problem)


def _record(
    env: Environment, status: Literal["built", "not_built"], reason: str | None, seconds: float
) -> EnvJson:
    root = env.python_root
    return {
        "repo": env.repo,
        "version": env.version,
        "environment_setup_commit": env.setup_commit,
        "key": env.key,
        "python": env.python,
        "suite": root.suite if root else None,
        "rootfs_digest": root.digest() if root else None,
        "spec_digest": env.spec_digest(),
        "spec": env.spec,
        "status": status,
        "reason": reason,
        "seconds": round(seconds, 1),
        "bytes": bytes_of(env.directory) if status == BUILT else 0,
    }


def _written(env: Environment, rec: EnvJson) -> EnvJson:
    """env.json written, and returned as it was written (with its format version)."""
    rec = versioned(rec)
    write_record(env.env_json, rec)
    return rec


def _build(layout: Layout, env: Environment, problem: str | None) -> EnvJson:
    start = time.monotonic()
    if env.directory.exists():
        shutil.rmtree(env.directory)
    env.directory.mkdir(parents=True)
    if problem is not None or env.python_root is None:
        rec = _record(env, NOT_BUILT, problem or "no Python", 0)
        return _written(env, rec)
    scratch = layout.swe_env_scratch(env.key)
    testbed = scratch / "testbed"
    try:
        checkout(source_of(layout, env.repo), env.setup_commit, testbed, tags=True)
    except subprocess.CalledProcessError as e:
        said = last_lines_of(e.stderr.decode(errors="replace"))
        reason = f"no checkout of {env.repo} at {env.setup_commit}: {said}"
        rec = _record(env, NOT_BUILT, reason, time.monotonic() - start)
        return _written(env, rec)
    reqs = None
    if (env.spec or {}).get("packages") == "requirements.txt":
        reqs = requirements(layout, env, testbed)
        if reqs is None:
            rec = _record(env, NOT_BUILT, "no requirements file at environment_setup_commit", 0)
            return _written(env, rec)
        (scratch / "requirements.txt").write_text(reqs)
    env.venv.mkdir()
    script = "\n".join(build_steps(env, reqs is not None))
    jsonio.write_text(env.build_log, f"# {env.name}: {env.python_root.suite} Python {env.python}\n")
    outcome = run_script(
        layout,
        env.python_root,
        script,
        env.build_log,
        mounts=[
            ("--bind", env.venv, VENV_AT),
            ("--bind", testbed, TESTBED),
            ("--ro-bind", scratch, "/tmp/swe-build"),
        ],
        timeout=BUILD_TIMEOUT,
    )
    failed = script_failure(outcome, "build", env.build_log)
    if failed:
        shutil.rmtree(env.venv, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
        return _written(env, _record(env, NOT_BUILT, failed, time.monotonic() - start))
    keep_generated(testbed, env.directory / GENERATED)
    shutil.rmtree(scratch, ignore_errors=True)
    write_startup(env.venv)
    rec = _record(env, BUILT, None, time.monotonic() - start)
    return _written(env, rec)


def script_failure(outcome: procs.Outcome, what: str, log: Path) -> str | None:
    """Why a build's script failed, in one line of at most 600 characters, or None."""
    if not outcome.timed_out and outcome.exit_code == 0:
        return None
    why = "timed out" if outcome.timed_out else f"exited with {outcome.exit_code}"
    return f"the {what} {why} ({log}): {last_lines(log, 1)}"[:600]


def write_startup(venv: Path) -> None:
    """STARTUP_PTH in each site-packages of `venv`: a line Python runs at start (a .pth file's
    import line), inert unless UNSET_VAR is set. The installs at a base commit copy it."""
    for site in venv.glob("lib/python*/site-packages"):
        (site / STARTUP_PTH).write_text(STARTUP_LINE)


def keep_generated(testbed: Path, dest: Path) -> list[str]:
    """Copy the files the install wrote into the checkout (untracked, ignored ones too; no
    byte code) to `dest`; their paths."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--others"],
        cwd=testbed,
        env=gitcmd.git_environment(testbed),
        capture_output=True,
        check=True,
    ).stdout.decode(errors="replace")
    kept = []
    for rel in filter(None, out.split("\0")):
        if any(part in rel for part in SKIPPED_GENERATED):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(testbed / rel, target, follow_symlinks=False)
        kept.append(rel)
    return kept


def put_generated(env_dir: Path, testbed: Path) -> None:
    """Copy an environment's generated files (keep_generated) into a checkout."""
    source = env_dir / GENERATED
    if source.is_dir():
        shutil.copytree(source, testbed, symlinks=True, dirs_exist_ok=True)


# -- a task's install at its base commit (the official instance image) ---------------------------
# The official harness builds an environment image per (repo, version) and over it an image per
# task that installs the repository at the task's base commit: a base whose install asks for
# more than the setup commit's (pytest 4.6's and 5.0's importlib-metadata, 5.4's wcwidth) gets
# it there. The agent's sandbox shows that install; the local verdict installs again itself.


@dataclass(frozen=True)
class Instance:
    """The install of `base_commit` over a copy of `env`'s venv."""

    env: Environment
    base_commit: str
    key: str
    directory: Path

    @property
    def venv(self) -> Path:
        return self.directory / "venv"

    @property
    def instance_json(self) -> Path:
        return self.directory / "instance.json"

    @property
    def build_log(self) -> Path:
        return self.directory / "build.log"


def instance_of(task: "SweTask", layout: Layout) -> Instance | None:
    """The install `task`'s sandbox shows, or None when its base is the environment's setup
    commit (the environment is that install already)."""
    env = environment_of(task, layout)
    if task.base_commit == env.setup_commit:
        return None
    key = f"{env.key}-{task.base_commit[:12]}"
    return Instance(env, task.base_commit, key, layout.swe_instance_dir(key))


def instance_record(task: "SweTask", layout: Layout) -> InstanceJson | None:
    """The instance.json of `task`'s install as built now, or None when none was built (or
    none is needed: instance_of)."""
    inst = instance_of(task, layout)
    if inst is None:
        return None
    rec = read_record(inst.instance_json)
    return rec if rec and rec.get("key") == inst.key else None


def build_instance(layout: Layout, task: "SweTask") -> InstanceJson | None:
    """Build `task`'s environment (build) and then its install at its base commit when that
    is not current; instance.json, or None when the environment is the install."""
    env_rec = build(layout, task)
    inst = instance_of(task, layout)
    if inst is None:
        return None
    current = instance_record(task, layout)
    if current:
        return current
    with locks.locked(layout.lock(f"swe-instance-{inst.key}")):
        current = instance_record(task, layout)
        if current:
            return current
        return _build_instance(layout, inst, env_rec)


def _instance_record(
    inst: Instance, status: Literal["built", "not_built"], reason: str | None, seconds: float
) -> InstanceJson:
    rec: InstanceJson = {
        "env_key": inst.env.key,
        "base_commit": inst.base_commit,
        "key": inst.key,
        "status": status,
        "reason": reason,
        "seconds": round(seconds, 1),
        "bytes": bytes_of(inst.directory, besides=inst.env.venv) if status == BUILT else 0,
    }
    rec = versioned(rec)
    write_record(inst.instance_json, rec)
    return rec


def _build_instance(layout: Layout, inst: Instance, env_rec: EnvJson) -> InstanceJson:
    start = time.monotonic()
    if inst.directory.exists():
        shutil.rmtree(inst.directory)
    inst.directory.mkdir(parents=True)
    root = inst.env.python_root
    if env_rec["status"] != BUILT or root is None:
        reason = f"its environment is not built: {env_rec['reason']}"
        return _instance_record(inst, NOT_BUILT, reason, 0)
    scratch = layout.swe_instance_scratch(inst.key)
    testbed = scratch / "testbed"
    try:
        checkout(source_of(layout, inst.env.repo), inst.base_commit, testbed, tags=True)
    except subprocess.CalledProcessError as e:
        said = last_lines_of(e.stderr.decode(errors="replace"))
        reason = f"no checkout of {inst.env.repo} at {inst.base_commit}: {said}"
        return _instance_record(inst, NOT_BUILT, reason, time.monotonic() - start)
    subprocess.run(["cp", "-a", str(inst.env.venv), str(inst.venv)], check=True)
    script = "\n".join([f". {VENV_AT}/bin/activate", *install_steps(inst.env)])
    jsonio.write_text(inst.build_log, f"# {inst.key}: the install at {inst.base_commit}\n")
    outcome = run_script(
        layout,
        root,
        script,
        inst.build_log,
        mounts=[("--bind", inst.venv, VENV_AT), ("--bind", testbed, TESTBED)],
        timeout=BUILD_TIMEOUT,
    )
    failed = script_failure(outcome, "install", inst.build_log)
    if failed:
        shutil.rmtree(inst.venv, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
        return _instance_record(inst, NOT_BUILT, failed, time.monotonic() - start)
    keep_generated(testbed, inst.directory / GENERATED)
    shutil.rmtree(scratch, ignore_errors=True)
    share_unchanged(inst.venv, inst.env.venv)
    return _instance_record(inst, BUILT, None, time.monotonic() - start)
