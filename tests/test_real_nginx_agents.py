"""Each agent program's mode on real nginx and nginx-tests: Claude Code, Codex and Gemini CLI fix
the range task (built as test_real_nginx.py's: nginx_mirrors.range_task) through their own shell
tools, metered. Runs only with local mirrors configured
(tests/nginx_mirrors.py); shares test_real_nginx.py's cache (its docstring says how).
"""

import json
import os

import pytest
from conftest import SOURCE_ROOT
from nginx_mirrors import doit_run, gold_diff, needs_mirrors, project_with, range_task

# Every test here starts doit and the agent CLIs on real nginx (minutes): end to end (conftest.py).
E2E = True

pytestmark = needs_mirrors("nginx/nginx", "nginx/nginx-tests")


# The range task's fix, applied by the model's own shell tool: the patch in a here-document.
def apply_gold(task):
    return f"git apply <<'PATCH'\n{gold_diff(task)}PATCH"


PROGRAM_MODELS = {"claude": "claude-sonnet-4-5", "codex": "gpt-5-codex", "gemini": "gemini-2.5-pro"}


def test_a_mode_per_program_resolves_a_real_task_at_its_metered_cost(
    tmp_path,
    real_nginx_cache,
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
    root = project_with(tmp_path, task)
    (root / "modes.toml").unlink()
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
        real_nginx_cache,
        "nginx:by-claude",
        "nginx:by-codex",
        "nginx:by-gemini",
        f"instances={task['instance_id']}",
        "strict=0",
        "run=by-program",
        env=env,
        report=True,
    )
    results = tmp_path / "results" / "by-program"
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
