"""The pipeline on real nginx and nginx-tests: runs only with local mirrors configured.

NGINX_EVAL_REPO_URL='/srv/mirrors/{owner}+{name}/repo' python -m pytest tests/test_real_nginx.py

The tests share one cache (`nginx_cache`), as a user's runs do: the clones, the bases' builds
and their test runs are made once for the module; each test has results of its own.
"""

import json
import os
import shutil
import subprocess

import nginx_mirrors
import pytest
from conftest import SOURCE_ROOT
from nginx_mirrors import GZIP, GZIP_OVER_READ, doit_run, nginx_file, unified

# Every test here starts doit on real nginx (minutes): end to end (conftest.py).
E2E = True

URL = nginx_mirrors.URL
pytestmark = nginx_mirrors.needs_mirrors("nginx/nginx", "nginx/nginx-tests")


@pytest.fixture(scope="module")
def nginx_cache(tmp_path_factory):
    """NGINX_EVAL_CACHE of every test here."""
    return tmp_path_factory.mktemp("nginx-cache")


def test_gold_resolves_and_none_does_not_on_a_real_task(tmp_path, nginx_cache):
    tasks = json.loads((SOURCE_ROOT / "tasks" / "nginx.json").read_text())["tasks"]
    # The task with the fewest configure flags builds fastest.
    task = min(tasks, key=lambda t: len(t["configure_flags"]))
    doit_run(
        tmp_path,
        nginx_cache,
        "nginx:gold",
        "nginx:none",
        f"instances={task['instance_id']}",
    )
    grade = lambda mode: json.loads(
        (tmp_path / "results" / "default" / mode / task["instance_id"] / "grade.json").read_text()
    )
    assert grade("gold")["status"] == "resolved"
    assert grade("none")["status"] == "unresolved"
    assert grade("none")["fail_to_pass"]["failed"] == task["fail_to_pass"]


def main_c_patch(base_commit, insertion):
    """A patch of src/core/nginx.c at `base_commit` that runs `insertion` in main() before
    ngx_time_init() (after -V and -v have answered)."""
    path, anchor = "src/core/nginx.c", "    ngx_time_init();\n"
    before = nginx_file(URL.format(owner="nginx", name="nginx"), base_commit, path)
    assert anchor in before
    return unified(path, before, before.replace(anchor, insertion + anchor, 1))


def score_prediction(tmp_path, cache, task, patch, run):
    preds = tmp_path / f"{run}.jsonl"
    preds.write_text(
        json.dumps(
            {"instance_id": task["instance_id"], "model_patch": patch, "model_name_or_path": run}
        )
        + "\n"
    )
    doit_run(
        tmp_path,
        cache,
        "nginx:file",
        f"predictions={preds}",
        f"instances={task['instance_id']}",
        f"run={run}",
    )
    task_dir = tmp_path / "results" / run / "file" / task["instance_id"]
    return json.loads((task_dir / "grade.json").read_text()), task_dir


def test_tap_printed_by_a_patched_nginx_and_an_nginx_that_does_not_start(tmp_path, nginx_cache):
    tasks = json.loads((SOURCE_ROOT / "tasks" / "nginx.json").read_text())["tasks"]
    task = next(t for t in tasks if t["instance_id"] == "nginx__nginx-f35475c083d4")
    # Started as a server, the patched nginx prints a pass for every fail_to_pass assertion.
    lines = "".join(
        f"ok {i.split(':')[1].split(' ', 1)[0]} - {i.split(' ', 1)[1]}\\n"
        for i in task["fail_to_pass"]
    )
    spoof = main_c_patch(
        task["base_commit"],
        f'    if (!ngx_test_config) {{\n        ngx_write_stdout("{lines}");\n    }}\n\n',
    )
    grade, task_dir = score_prediction(tmp_path, nginx_cache, task, spoof, "spoof")
    assert grade["status"] == "unresolved"
    assert grade["fail_to_pass"]["failed"] == task["fail_to_pass"]
    log = (task_dir / "tap" / "range_clearing.t.nginx.log").read_text()
    assert "ok 1 - content range cleared - range request" in log
    # range_clearing.t says `$t->run()->plan(3)`: an nginx that does not start kills the file
    # before its plan, and the base build, which starts, puts the blame on the patch.
    nostart = main_c_patch(
        task["base_commit"], "    if (!ngx_test_config) {\n        return 1;\n    }\n\n"
    )
    grade, _ = score_prediction(tmp_path, nginx_cache, task, nostart, "nostart")
    assert grade["status"] == "unresolved" and grade["env_errors"] == []
    assert grade["file_failures"][0]["kind"] == "not_started"
    assert "nginx did not start" in grade["file_failures"][0]["reason"]


def file_patch(base_commit, path, edit):
    """A unified diff of `path` at `base_commit` changed by edit(text) -> text."""
    before = nginx_file(URL.format(owner="nginx", name="nginx"), base_commit, path)
    return unified(path, before, edit(before))


def gold_plus(task, path, edit):
    """The task's fix, plus `edit` of another file."""
    repo = URL.format(owner="nginx", name="nginx")
    gold = subprocess.run(
        ["git", "--git-dir", repo, "diff", task["base_commit"], task["fix_commit"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return gold + file_patch(task["base_commit"], path, edit)


def range_task():
    tasks = json.loads((SOURCE_ROOT / "tasks" / "nginx.json").read_text())["tasks"]
    return next(t for t in tasks if t["instance_id"] == "nginx__nginx-f35475c083d4")


def strict_prediction(tmp_path, cache, task, patch, run):
    grade, task_dir = score_prediction(tmp_path, cache, task, patch, run)
    return grade, json.loads((task_dir / "strict.json").read_text())


def test_the_fix_plus_gzip_switched_off_is_resolved_but_not_strict(tmp_path, nginx_cache):
    """range_clearing.t never asks for gzip; the regression files of a patch that touches the
    gzip filter (gzip*.t) do."""
    task = range_task()
    # The header filter passes every response on untouched: gzip is off.
    patch = gold_plus(
        task,
        GZIP,
        lambda text: text.replace("    if (!conf->enable\n", "    if (1 || !conf->enable\n", 1),
    )
    grade, strict = strict_prediction(tmp_path, nginx_cache, task, patch, "nogzip")
    assert grade["resolved"] and grade["strict"] is False
    assert "gzip.t" in strict["files"] and strict["reference"] == "gold"
    assert grade["regressions"] and all(i.startswith("gzip") for i in grade["regressions"])
    assert grade["strict_reason"].startswith(f"{len(grade['regressions'])} regression(s): gzip")


def test_the_fix_plus_an_over_read_on_the_gzip_path_is_resolved_but_not_strict(
    tmp_path, nginx_cache
):
    task = range_task()
    patch = gold_plus(
        task,
        GZIP,
        lambda text: text.replace(
            "\nstatic ngx_int_t\nngx_http_gzip_header_filter(ngx_http_request_t *r)\n{",
            GZIP_OVER_READ,
            1,
        ).replace(
            "    if (!conf->enable\n", "    ngx_http_gzip_peek(r);\n\n    if (!conf->enable\n", 1
        ),
    )
    grade, strict = strict_prediction(tmp_path, nginx_cache, task, patch, "overread")
    assert grade["resolved"] and grade["strict"] is False and grade["regressions"] == []
    kinds = {(f["tool"], f["kind"], f["frame"].split(" ")[0]) for f in grade["sanitizer_findings"]}
    # The compiler inlines the static helper: its caller may be the first frame.
    assert kinds & {
        ("AddressSanitizer", "heap-buffer-overflow", "ngx_http_gzip_peek"),
        ("AddressSanitizer", "heap-buffer-overflow", "ngx_http_gzip_header_filter"),
    }


def test_gold_of_the_range_task_is_strict(tmp_path, nginx_cache):
    task = range_task()
    doit_run(
        tmp_path,
        nginx_cache,
        "nginx:gold",
        f"instances={task['instance_id']}",
        # Gold is judged strictly only when asked (docs/verdicts.md).
        "strict_gold=1",
        timeout=1800,
    )
    grade = json.loads(
        (tmp_path / "results" / "default" / "gold" / task["instance_id"] / "grade.json").read_text()
    )
    assert (grade["resolved"], grade["strict"], grade["strict_reason"]) == (True, True, "")


# Kills the prove that runs its test file (its nearest ancestor named prove), once nginx starts
# serving: only that one, not the prove of another test or another run on the machine.
KILL_PROVE = """    if (!ngx_test_config) {
        FILE  *f;
        char   path[64], comm[64];
        int    pid, parent;

        pid = (int) getppid();

        while (pid > 1) {
            snprintf(path, sizeof(path), "/proc/%d/comm", pid);
            f = fopen(path, "r");
            if (f == NULL) {
                break;
            }
            if (fgets(comm, sizeof(comm), f) == NULL) {
                comm[0] = '\\0';
            }
            fclose(f);

            if (strcmp(comm, "prove\\n") == 0) {
                kill(pid, SIGKILL);
                break;
            }

            snprintf(path, sizeof(path), "/proc/%d/stat", pid);
            f = fopen(path, "r");
            if (f == NULL) {
                break;
            }
            if (fscanf(f, "%*d (%*[^)]) %*c %d", &parent) != 1) {
                parent = 0;
            }
            fclose(f);
            pid = parent;
        }
    }

"""


def test_an_nginx_that_kills_prove_is_the_patchs_fault(tmp_path, nginx_cache):
    task = range_task()
    # Another prove on the machine (a sleep by that name) lives on: the patch kills its own.
    (tmp_path / "prove").symlink_to(shutil.which("sleep"))
    other = subprocess.Popen([str(tmp_path / "prove"), "1800"])
    try:
        grade, _ = score_prediction(
            tmp_path, nginx_cache, task, main_c_patch(task["base_commit"], KILL_PROVE), "killer"
        )
        assert other.poll() is None, f"the other prove ended ({other.returncode})"
    finally:
        other.kill()
        other.wait()
    assert grade["status"] == "unresolved" and grade["env_errors"] == []
    (failure,) = grade["file_failures"]
    assert (failure["file"], failure["kind"]) == ("range_clearing.t", "killed")
    assert failure["reason"] == (
        "prove was killed by signal 9; the base build runs the file to its end"
    )


# The range task's fix, applied by the model's own shell tool: the patch in a here-document.
def apply_gold(task):
    gold = subprocess.run(
        ["git", "--git-dir", URL.format(owner="nginx", name="nginx"), "diff"]
        + [task["base_commit"], task["fix_commit"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return f"git apply <<'PATCH'\n{gold}PATCH"


PROGRAM_MODELS = {"claude": "claude-sonnet-4-5", "codex": "gpt-5-codex", "gemini": "gemini-2.5-pro"}


def test_a_mode_per_program_resolves_a_real_task_at_its_metered_cost(
    tmp_path,
    nginx_cache,
    anthropic_api,
    openai_api,
    gemini_api,
    claude_program,
    codex_program,
    gemini_program,
):
    """Claude Code, Codex and Gemini CLI, each a mode of one phase, fix the range task through
    their own shell tool against their stand-in APIs; every call goes through the attempt's
    metering proxy, and the report's cost of each mode is the stand-in's usage priced by hand."""
    import claude_cli
    from anthropic_standin import call, say
    from harbor.utils.trajectory_validator import TrajectoryValidator
    from test_agent_claude import RAW
    from test_agent_programs import Program
    from test_meter_claude import by_hand

    from nginx_eval.agent.programs import registry

    task = range_task()
    fix = apply_gold(task)
    root = tmp_path / "project"
    root.mkdir()
    for name in ("tasks", "templates"):
        (root / name).symlink_to(SOURCE_ROOT / name)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    modes = (SOURCE_ROOT / "modes.toml").read_text()
    for name, path in (
        ("claude", claude_program),
        ("codex", codex_program),
        ("gemini", gemini_program),
    ):
        (bin_dir / name).symlink_to(path)
        command = registry.named(name).command(False).replace('"', '\\"')
        modes += (
            f'\n[modes.by-{name}]\nmodel = "{PROGRAM_MODELS[name]}"\n[[modes.by-{name}.phases]]\n'
            f'name = "solve"\nprogram = "{name}"\nprompt = "prompt_raw.md.j2"\n'
            f'command = "{command}"\n'
        )
    (root / "modes.toml").write_text(modes)
    others = {"codex": Program("codex", openai_api, codex_program)}
    others["gemini"] = Program("gemini", gemini_api, gemini_program)
    anthropic_api.script = {RAW: [[say("Fixing it."), call("Bash", command=fix)], [say("Fixed.")]]}
    for program in others.values():
        program.api.script = {
            RAW: [
                [program.standin.say("Fixing it."), program.shell(fix)],
                [program.standin.say("Fixed.")],
            ]
        }
    config = tmp_path / "claude-config"
    config.mkdir()
    env = claude_cli.environment(anthropic_api, config, CLAUDE_CODE_MAX_RETRIES="0")
    for program in others.values():
        env.update(program.env())
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env['PATH']}",
        NGINX_EVAL_ROOT=str(root),
        NGINX_EVAL_AGENT_BACKOFF="0.05",
    )
    doit_run(
        tmp_path,
        nginx_cache,
        "nginx:by-claude",
        "nginx:by-codex",
        "nginx:by-gemini",
        f"instances={task['instance_id']}",
        "strict=0",
        env=env,
    )
    results = tmp_path / "results" / "default"
    read = lambda mode, name: json.loads((results / mode / task["instance_id"] / name).read_text())
    by_hand_usd = {
        "claude": by_hand([r for r in anthropic_api.messages_requests() if r["usage"]]),
        **{n: p.cost_by_hand(p.requests()) for n, p in others.items()},
    }
    report = json.loads((results / "report.json").read_text())
    report_md = (results / "report.md").read_text()
    for name, usd in by_hand_usd.items():
        mode = f"by-{name}"
        agent = read(mode, "agent.json")
        assert (agent["status"], agent["cost_source"]) == ("completed", "metered"), agent["error"]
        assert read(mode, "grade.json")["status"] == "resolved"
        assert agent["cost_usd"] == pytest.approx(usd, rel=1e-9)
        assert report["modes"][mode]["cost_usd"] == round(usd, 4)
        assert f"${usd:.4f}" in report_md, (name, usd)
        atif = results / mode / task["instance_id"] / agent["atif"]
        validator = TrajectoryValidator()
        assert validator.validate(atif), validator.get_errors()
        print(f"\n{mode}: metered {agent['cost_usd']:.8f} USD, by hand {usd:.8f} USD")
