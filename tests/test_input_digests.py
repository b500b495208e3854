"""The digests of representative inputs, as the code before the one canonical-inputs rule
(core/inputs.py) computed them: a finished agent run, build, prove or grade whose inputs did not
change keeps its digest, and so is not redone (nor paid for again). The expected values were
recorded from that code; a change of any of them makes every user's records of that kind stale."""

from pathlib import Path
from types import SimpleNamespace

from nginx_eval.agent import sandbox
from nginx_eval.agent import stage as agent_stage
from nginx_eval.build.cache import BuildSpec
from nginx_eval.checks import validate
from nginx_eval.core import inputs, jsonio, stamps
from nginx_eval.core.layout import Layout
from nginx_eval.grade import stage as grade_stage
from nginx_eval.patch import stage as patch_stage
from nginx_eval.prove import stage as prove_stage
from nginx_eval.prove import tree as prove_tree
from nginx_eval.report import stage as report_stage
from nginx_eval.repositories import stage as repos_stage
from nginx_eval.run import benchmark
from nginx_eval.run.benchmark import Benchmark, Task
from nginx_eval.run.modes import (
    AgentMode,
    GoldMode,
    Loop,
    Mode,
    NoneMode,
    Phase,
    PredictionsMode,
)

TASK = Task(
    instance_id="nginx-1",
    repo="nginx/nginx",
    test_repo="nginx/nginx-tests",
    base_commit="a" * 40,
    fix_commit="b" * 40,
    test_commit="c" * 40,
    test_files=("h2.t",),
    configure_flags=("--with-http_v2_module",),
    fail_to_pass=("h2.t:3 body",),
    pass_to_pass=("h2.t:1 start",),
    problem_statement="a request hangs",
)
AUTHORED = Task(
    **{k: getattr(TASK, k) for k in ("repo", "test_repo", "base_commit", "fix_commit")},
    instance_id="nginx-2",
    test_commit="c" * 40,
    test_files=("own.t",),
    configure_flags=(),
    fail_to_pass=("own.t:1 x",),
    pass_to_pass=(),
    problem_statement="p",
    tests="authored",
    authored=(("own.t", b"print 1;\n"),),
)
AUTHORED_NO_FILES = Task(**{**vars(AUTHORED), "authored": ()})
NGINX_WITH_FILES = Task(**{**vars(TASK), "authored": (("own.t", b"x"),)})

SOLVE = Phase("solve", "claude -p {prompt}", prompt="solve.j2")
MODES: dict[str, Mode] = {
    "plain": AgentMode("plain", phases=(SOLVE,)),
    "rich": AgentMode(
        "rich",
        phases=(
            Phase("plan", "codex exec {prompt}", program="codex", model="gpt-5", share=0.3),
            Phase(
                "solve",
                "claude -p {prompt}",
                share="rest",
                group="g",
                output="out.md",
                loop=Loop(max=4),
                fallback=Phase("solve2", "gemini -p {prompt}", program="gemini"),
            ),
        ),
        model="m",
        env=(("AGENT", "x"),),
        repeat=2,
        allow_hosts=("example.org",),
        sandbox_binds=("/tmp/b",),
        command_files=(("c.sh", "echo"),),
        web_tools=True,
        agent_home="home",
        home_files=(("a", "b"),),
        tests="base",
        timeout=900.0,
        score="finished",
    ),
    "open": AgentMode("open", phases=(SOLVE,), isolation="none"),
    "gold": GoldMode("gold"),
    "none": NoneMode("none"),
    "predictions": PredictionsMode("predictions", predictions="p.jsonl"),
    "rows": PredictionsMode(
        "rows", predictions="p.jsonl", instances=("nginx-1",), model="m", description="d"
    ),
}
ENV = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:1", "OPENAI_BASE_URL": "http://127.0.0.1:2"}

EXPECTED: dict[str, str] = {
    "agent.agent_inputs/open/nginx-1/None": "44749e97ec53f8bc",
    "agent.agent_inputs/open/nginx-1/claude 2.0": "ef9bdb6a3a7a3123",
    "agent.agent_inputs/open/nginx-2/None": "f37a89d1749510ad",
    "agent.agent_inputs/open/nginx-2/claude 2.0": "0a4d2d74cc087618",
    "agent.agent_inputs/plain/nginx-1/None": "749edd534d1177fa",
    "agent.agent_inputs/plain/nginx-1/claude 2.0": "bd0e07d74c7051e2",
    "agent.agent_inputs/plain/nginx-2/None": "fb04b339b5e4e254",
    "agent.agent_inputs/plain/nginx-2/claude 2.0": "645116e23211fc2f",
    "agent.agent_inputs/rich/nginx-1/None": "df62dd6629a85118",
    "agent.agent_inputs/rich/nginx-1/claude 2.0": "2236b1f8eca39cdb",
    "agent.agent_inputs/rich/nginx-2/None": "f1878dd6f926c81d",
    "agent.agent_inputs/rich/nginx-2/claude 2.0": "0c58917794faab02",
    "agent.mode_inputs/open/None": "1a8f2ee907c65bbf",
    "agent.mode_inputs/open/claude 2.0": "2f2a53344b6516e6",
    "agent.mode_inputs/plain/None": "04fbc1dda45ee9a8",
    "agent.mode_inputs/plain/claude 2.0": "a4a0b310ffce4f09",
    "agent.mode_inputs/rich/None": "0b0e0ca4f8db2c31",
    "agent.mode_inputs/rich/claude 2.0": "98f2341c9ce3432e",
    "benchmark._digest/authored": "7c3d89d399e7baa7",
    "benchmark._digest/plain": "44136fa355b3678a",
    "grade:b/gold/nginx-1/strict=0,0/1.2": "4cc080f78e5b3263",
    "grade:b/gold/nginx-1/strict=1,0/None": "77bb16b2c199cc4c",
    "grade:b/gold/nginx-1/strict=1,1/1.2": "2c71e206d7b31ffd",
    "grade:b/gold/nginx-2/strict=0,0/1.2": "99db950c494e80de",
    "grade:b/gold/nginx-2/strict=1,0/None": "4a0ac5c6535679ce",
    "grade:b/gold/nginx-2/strict=1,1/1.2": "d174655f5481ebeb",
    "grade:b/none/nginx-1/strict=0,0/1.2": "124cb1578a97f824",
    "grade:b/none/nginx-1/strict=1,0/None": "2ea53436a56db3b9",
    "grade:b/none/nginx-1/strict=1,1/1.2": "124cb1578a97f824",
    "grade:b/none/nginx-2/strict=0,0/1.2": "dcc29796a46285c3",
    "grade:b/none/nginx-2/strict=1,0/None": "26d675a068dc4d8c",
    "grade:b/none/nginx-2/strict=1,1/1.2": "dcc29796a46285c3",
    "grade:b/open/nginx-1/strict=0,0/1.2": "4cc080f78e5b3263",
    "grade:b/open/nginx-1/strict=1,0/None": "2ed4628bc0a43140",
    "grade:b/open/nginx-1/strict=1,1/1.2": "2c71e206d7b31ffd",
    "grade:b/open/nginx-2/strict=0,0/1.2": "99db950c494e80de",
    "grade:b/open/nginx-2/strict=1,0/None": "edef64c2ab178501",
    "grade:b/open/nginx-2/strict=1,1/1.2": "d174655f5481ebeb",
    "grade:b/plain/nginx-1/strict=0,0/1.2": "4cc080f78e5b3263",
    "grade:b/plain/nginx-1/strict=1,0/None": "2ed4628bc0a43140",
    "grade:b/plain/nginx-1/strict=1,1/1.2": "2c71e206d7b31ffd",
    "grade:b/plain/nginx-2/strict=0,0/1.2": "99db950c494e80de",
    "grade:b/plain/nginx-2/strict=1,0/None": "edef64c2ab178501",
    "grade:b/plain/nginx-2/strict=1,1/1.2": "d174655f5481ebeb",
    "grade:b/predictions/nginx-1/strict=0,0/1.2": "4cc080f78e5b3263",
    "grade:b/predictions/nginx-1/strict=1,0/None": "2ed4628bc0a43140",
    "grade:b/predictions/nginx-1/strict=1,1/1.2": "2c71e206d7b31ffd",
    "grade:b/predictions/nginx-2/strict=0,0/1.2": "99db950c494e80de",
    "grade:b/predictions/nginx-2/strict=1,0/None": "edef64c2ab178501",
    "grade:b/predictions/nginx-2/strict=1,1/1.2": "d174655f5481ebeb",
    "grade:b/rich/nginx-1/strict=0,0/1.2": "4cc080f78e5b3263",
    "grade:b/rich/nginx-1/strict=1,0/None": "2ed4628bc0a43140",
    "grade:b/rich/nginx-1/strict=1,1/1.2": "2c71e206d7b31ffd",
    "grade:b/rich/nginx-2/strict=0,0/1.2": "99db950c494e80de",
    "grade:b/rich/nginx-2/strict=1,0/None": "edef64c2ab178501",
    "grade:b/rich/nginx-2/strict=1,1/1.2": "d174655f5481ebeb",
    "grade:b/rows/nginx-1/strict=0,0/1.2": "4cc080f78e5b3263",
    "grade:b/rows/nginx-1/strict=1,0/None": "2ed4628bc0a43140",
    "grade:b/rows/nginx-1/strict=1,1/1.2": "2c71e206d7b31ffd",
    "grade:b/rows/nginx-2/strict=0,0/1.2": "99db950c494e80de",
    "grade:b/rows/nginx-2/strict=1,0/None": "edef64c2ab178501",
    "grade:b/rows/nginx-2/strict=1,1/1.2": "d174655f5481ebeb",
    "mode.fingerprint/open": "0d4129fa324b74ab",
    "mode.fingerprint/plain": "0d4129fa324b74ab",
    "mode.fingerprint/rich": "2e82562db3047156",
    "mode.to_json/gold": "4f2bde5df05b6a8d",
    "mode.to_json/none": "2d6bc25da74b13a1",
    "mode.to_json/open": "d85efdd7555e38c3",
    "mode.to_json/plain": "fdf6ad52267dd1ea",
    "mode.to_json/predictions": "9164c22e106829ca",
    "mode.to_json/rich": "5fc4286cd9e9e1db",
    "mode.to_json/rows": "2bcd1342a6f4f9a0",
    "patch:b/gold/nginx-1": "08dc695238c65587",
    "patch:b/gold/nginx-2": "08dc695238c65587",
    "patch:b/none/nginx-1": "765eb412be0ef01d",
    "patch:b/none/nginx-2": "765eb412be0ef01d",
    "patch:b/open/nginx-1": "418a19aee37f1b1d",
    "patch:b/open/nginx-2": "418a19aee37f1b1d",
    "patch:b/plain/nginx-1": "418a19aee37f1b1d",
    "patch:b/plain/nginx-2": "418a19aee37f1b1d",
    "patch:b/predictions/nginx-1": "6d76f6f1dd607354",
    "patch:b/predictions/nginx-2": "6d76f6f1dd607354",
    "patch:b/rich/nginx-1": "44f5b73807e9f1c9",
    "patch:b/rich/nginx-2": "44f5b73807e9f1c9",
    "patch:b/rows/nginx-1": "6d76f6f1dd607354",
    "patch:b/rows/nginx-2": "6d76f6f1dd607354",
    "phase.fingerprint/solve": "dc8aa53ffb575efa",
    "prove:b/plain/nginx-1/rerun=0": "af9e189424598bc9",
    "prove:b/plain/nginx-1/rerun=1": "9e1acdaab1373e37",
    "prove:b/plain/nginx-2/rerun=0": "986df22269e3dfdc",
    "prove:b/plain/nginx-2/rerun=1": "ba376f014f6ae488",
    "report_inputs/plain+gold/None": "c6c42c01f44880b1",
    "report_inputs/plain+gold/other": "454d18a2443382cf",
    "report_inputs/rich+plain+gold/None": "814d9fafcaea979d",
    "report_inputs/rich+plain+gold/other": "04ad0afac1625429",
    "repos:nginx+nginx-tests/1": "23cca7a4ebf5577e",
    "repos:nginx+nginx-tests/2": "936d4feaa6440608",
    "repos:nginx+nginx/1": "44ee65d4ee28ab78",
    "repos:nginx+nginx/2": "44ee65d4ee28ab78",
    "sandbox.settings/open": "74234e98afe7498f",
    "sandbox.settings/plain": "1f3fb9552e1e3404",
    "sandbox.settings/rich": "b0477aa0d2c56b1a",
    "task.to_json/nginx-1/0": "1b78d2335045f790",
    "task.to_json/nginx-1/1": "1b78d2335045f790",
    "task.to_json/nginx-2/0": "7db450f2efe5c02e",
    "task.to_json/nginx-2/1": "65b68ab95d231766",
    "tests_stamp/0": "3a84491fa08b3754",
    "tests_stamp/1": "89a4cc3e93f0045e",
    "validation/nginx-1/0/cpu": "43603ebad02c9fb2",
    "validation/nginx-1/0/none": "b9911a07a7dce559",
    "validation/nginx-1/1/cpu": "43603ebad02c9fb2",
    "validation/nginx-1/1/none": "b9911a07a7dce559",
    "validation/nginx-2/0/cpu": "177bda85fa27bcdf",
    "validation/nginx-2/0/none": "dbf14c54c615dadb",
    "validation/nginx-2/1/cpu": "80d0d04f3cf9402c",
    "validation/nginx-2/1/none": "3786feb7a69812c1",
}


def _bench(version=None):
    return Benchmark("b", Path("b.json"), (TASK, AUTHORED), "d" * 64, version=version)


def _ctx(tmp_path, modes, tasks=(TASK, AUTHORED), version=None, **options):
    bench = _bench(version)
    units = [(bench, m, t) for m in modes for t in tasks]
    opts = dict(rerun_failed=0, strict=1, strict_gold=0, strict_files=0, keep_workspaces=0)
    opts.update(options)
    return SimpleNamespace(
        layout=Layout(tmp_path, tmp_path / "cache", tmp_path / "results"),
        options=SimpleNamespace(**opts),
        benchmark=bench,
        tasks=list(tasks),
        units=lambda: iter(units),
        nginx_units=lambda: iter(units),
    )


def _configs(tasks):
    """{doit task name: the digest of its config} of generated stage tasks (stamps.stage_task:
    the action's arguments end with the config and the input files)."""
    return {f"{t['basename']}:{t['name']}": jsonio.digest(t["actions"][0][1][-2]) for t in tasks}


def computed(tmp_path, monkeypatch) -> dict[str, str]:
    """Every digest the test compares, by name."""
    for name in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL", "AGENT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("NGINX_EVAL_REPO_URL", "/mirrors/{owner}+{name}")
    out = {}
    for name, mode in MODES.items():
        out[f"mode.to_json/{name}"] = jsonio.digest(mode.to_json())
        if isinstance(mode, AgentMode):
            out[f"mode.fingerprint/{name}"] = jsonio.digest(mode.fingerprint())
            out[f"sandbox.settings/{name}"] = jsonio.digest(sandbox.settings(mode, ENV))
    out["phase.fingerprint/solve"] = jsonio.digest(SOLVE.fingerprint())
    layout = Layout(tmp_path, tmp_path / "cache", tmp_path / "results")
    for version in (None, "claude 2.0"):
        monkeypatch.setattr(agent_stage, "agent_version", lambda layout, mode, v=version: v)
        for name, mode in MODES.items():
            if not isinstance(mode, AgentMode):
                continue
            of_mode = agent_stage.mode_inputs(layout, mode)
            out[f"agent.mode_inputs/{name}/{version}"] = jsonio.digest(of_mode)
            for task in (TASK, AUTHORED):
                out[f"agent.agent_inputs/{name}/{task.instance_id}/{version}"] = (
                    agent_stage.agent_inputs(
                        layout, mode, task, ["prompt"], of_mode, {"commit": "e" * 40}
                    )
                )
    for task in (TASK, AUTHORED, AUTHORED_NO_FILES, NGINX_WITH_FILES):
        out[f"task.to_json/{task.instance_id}/{len(task.authored)}"] = jsonio.digest(task.to_json())
        for load in ("none", "cpu"):
            out[f"validation/{task.instance_id}/{len(task.authored)}/{load}"] = jsonio.digest(
                validate.validation_config(task, 3, load)
            )
    for task in (TASK, AUTHORED):
        stamp = prove_tree._stamp(task.test_repo, task.test_commit, task.authored)
        out[f"tests_stamp/{len(task.authored)}"] = jsonio.digest(stamp)
    out["benchmark._digest/plain"] = benchmark._digest("{}", [TASK])
    out["benchmark._digest/authored"] = benchmark._digest("{}", [TASK, AUTHORED])
    out.update(_configs(patch_stage.gen_tasks(_ctx(tmp_path, MODES.values()))))
    monkeypatch.setattr(prove_stage.testtree, "gen_tasks", lambda ctx: iter(()))
    monkeypatch.setattr(prove_stage, "environment_inputs", lambda tree: {"perl": "v5"})
    monkeypatch.setattr(prove_stage.jsonio, "file_digest", lambda path: "guard")
    for rerun in (0, 1):
        ctx = _ctx(tmp_path, [MODES["plain"]], rerun_failed=rerun)
        for k, v in _configs(prove_stage.gen_tasks(ctx)).items():
            out[f"{k}/rerun={rerun}"] = v
    monkeypatch.undo()
    for strict, strict_gold, version in ((1, 0, None), (0, 0, "1.2"), (1, 1, "1.2")):
        ctx = _ctx(
            tmp_path, MODES.values(), version=version, strict=strict, strict_gold=strict_gold
        )
        for k, v in _configs(grade_stage.gen_tasks(ctx)).items():
            out[f"{k}/strict={strict},{strict_gold}/{version}"] = v
    for tasks in ((TASK,), (TASK, AUTHORED)):
        ctx = _ctx(tmp_path, [MODES["gold"]], tasks=tasks)
        monkeypatch.setenv("NGINX_EVAL_REPO_URL", "/mirrors/{owner}+{name}")
        for k, v in _configs(repos_stage.gen_tasks(ctx)).items():
            out[f"{k}/{len(tasks)}"] = v
    captured = []
    monkeypatch.setattr(
        report_stage.stamps, "inputs_digest", lambda config, files=(): captured.append(config)
    )
    for modes in (("plain", "gold"), ("rich", "plain", "gold")):
        for cross in (None, "other"):
            captured.clear()
            report_stage.report_inputs(
                layout,
                _bench(),
                [TASK],
                {m: MODES[m] for m in modes},
                "gold",
                tmp_path,
                cutoff="2024-01-01",
                cross=cross,
            )
            config = dict(captured[0], version="-")  # the harness's version is an input
            out[f"report_inputs/{'+'.join(modes)}/{cross}"] = jsonio.digest(config)
    return out


def test_digests_are_as_before(tmp_path, monkeypatch):
    found = computed(tmp_path, monkeypatch)
    found = {k: v[:16] for k, v in found.items()}  # 64 bits: no change goes unseen
    changed = sorted(k for k in found.keys() | EXPECTED.keys() if found.get(k) != EXPECTED.get(k))
    assert not changed, f"digests changed: {changed}"


def test_canonical_drops_only_optional_fields_at_their_default():
    defaults = {"share": None, "rerun_failed": 0, "authored": {}}
    fields = {"base": None, "share": None, "rerun_failed": 0, "authored": {"a.t": "x"}}
    assert inputs.canonical(fields, defaults) == {"base": None, "authored": {"a.t": "x"}}
    # equal but of another type is not the default: False is no 0, 0.0 no 0
    assert inputs.canonical({"rerun_failed": False}, defaults) == {"rerun_failed": False}
    assert inputs.canonical({"rerun_failed": 0.0}, defaults) == {"rerun_failed": 0.0}


def test_a_new_field_at_its_default_keeps_the_digest():
    before = inputs.digest({"base": "a"})
    assert inputs.digest({"base": "a", "new": []}, {"new": []}) == before
    assert inputs.digest({"base": "a", "new": ["x"]}, {"new": []}) != before
    # version 1 is left out: a digest is the plain one of the fields
    assert before == jsonio.digest({"base": "a"})


def test_another_inputs_version_changes_every_digest(monkeypatch):
    before = stamps.inputs_digest({"base": "a"}), BuildSpec.of("a", ["--x"]).key
    monkeypatch.setattr(inputs, "INPUTS_VERSION", 2)
    after = stamps.inputs_digest({"base": "a"}), BuildSpec.of("a", ["--x"]).key
    assert before[0] != after[0] and before[1] != after[1]
