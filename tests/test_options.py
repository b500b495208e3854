"""Command-line variables (nginx_eval/run/options.py): parsed and checked once, each mistake one
``nginx-eval: error:`` line naming the variable; unknown task names; what a bare `doit` runs."""

import dataclasses
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from doit import doit_cmd
from doit.doit_cmd import DoitMain
from test_bad_input import assert_refused

from nginx_eval.core.errors import UserError
from nginx_eval.doitext.invocation import command_line_variables
from nginx_eval.run.options import VARIABLES, Options


def parse(argv=None, **variables):
    return Options.parse(variables, argv)


def test_defaults_and_values():
    assert Options.parse({}) == Options()
    assert (Options().run, Options().repeats, Options().limit, Options().instances) == (
        "default",
        5,
        None,
        (),
    )
    opts = parse(
        run="nightly",
        bench="nginx",
        instances="A, B ,,A",
        limit="2",
        modes=" gold , none",
        baseline="raw",
        predictions="p.jsonl",
        repeats="5",
        verbosity="2",
    )
    assert (
        opts.run,
        opts.bench,
        opts.instances,
        opts.limit,
        opts.modes,
        opts.baseline,
        opts.predictions,
        opts.repeats,
        opts.verbosity,
    ) == ("nightly", "nginx", ("A", "B"), 2, ("gold", "none"), "raw", "p.jsonl", 5, 2)
    assert opts.raw("instances") == "A, B ,,A"
    # Empty values mean the default, as before.
    assert parse(run="", limit="", repeats="", instances="") == Options()


def test_budget_and_agent_retries():
    """max_cost=USD (a positive amount, no default) and agent_retries=N (N >= 0, default 2), as
    the agent stage reads them: ctx.options.max_cost, ctx.options.agent_retries."""
    assert (Options().max_cost, Options().agent_retries) == (None, 2)
    assert parse(max_cost="2.50", agent_retries="0") == Options(
        max_cost=2.5, agent_retries=0, given=(("max_cost", "2.50"), ("agent_retries", "0"))
    )
    assert (
        parse(max_cost="5").max_cost,
        parse(max_cost=".5").max_cost,
        parse(agent_retries="7").agent_retries,
    ) == (5.0, 0.5, 7)
    assert parse(max_cost=" ", agent_retries="") == Options()
    with pytest.raises(UserError) as e:
        parse(max_cost="0")
    assert str(e.value) == (
        "max_cost=0: must be an amount of US dollars above 0 (max_cost=5 or max_cost=2.50)"
    )
    with pytest.raises(UserError) as e:
        parse(agent_retries="-1")
    assert str(e.value) == "agent_retries=-1: must be a whole number >= 0"


def test_rerun_failed_is_a_switch():
    """rerun_failed=0|1 (default 0), as the prove stage reads it: ctx.options.rerun_failed."""
    assert Options().rerun_failed == 0 and parse(rerun_failed="").rerun_failed == 0
    assert (parse(rerun_failed="1").rerun_failed, parse(rerun_failed=" 0 ").rerun_failed) == (1, 0)
    for bad in ("2", "yes", "-1", "1.0"):
        with pytest.raises(UserError) as e:
            parse(rerun_failed=bad)
        assert str(e.value) == f"rerun_failed={bad}: must be 0 or 1"


def test_executor_is_local_or_ray():
    assert Options().executor == "local" and parse(executor=" ray ").executor == "ray"
    with pytest.raises(UserError) as e:
        parse(executor="dask")
    assert str(e.value) == "executor=dask: must be one of local, ray"


def test_options_are_frozen_and_every_variable_has_help():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Options().limit = 3
    assert all(v.help for v in VARIABLES.values())


@pytest.mark.parametrize(
    "name,value",
    [
        ("limit", "0"),
        ("limit", "-1"),
        ("limit", "abc"),
        ("limit", "1.5"),
        ("repeats", "0"),
        ("repeats", "-2"),
        ("repeats", "abc"),
        ("run", "a/b"),
        ("run", "../x"),
        ("verbosity", "3"),
        ("max_cost", "0"),
        ("max_cost", "-1"),
        ("max_cost", "0.0"),
        ("max_cost", "inf"),
        ("max_cost", "nan"),
        ("max_cost", "1e3"),
        ("max_cost", "$5"),
        ("max_cost", "five"),
        ("agent_retries", "-1"),
        ("agent_retries", "1.5"),
        ("agent_retries", "two"),
    ],
)
def test_bad_value_names_the_variable(name, value):
    with pytest.raises(UserError) as e:
        parse(**{name: value})
    assert str(e.value).startswith(f"{name}={value}: "), str(e.value)


@pytest.mark.parametrize(
    "given,suggested",
    [
        ("limt", "limit"),
        ("instance", "instances"),
        ("LIMIT", "limit"),
        ("repeat", "repeats"),
        ("basline", "baseline"),
    ],
)
def test_unknown_variable_suggests_the_closest(given, suggested):
    with pytest.raises(UserError) as e:
        parse(**{given: "2"})
    assert str(e.value).startswith(
        f"unknown variable {given}=2; did you mean {suggested}=? "
        f"(known: {', '.join(sorted(VARIABLES))})"
    ), str(e.value)


def test_unknown_variable_without_a_close_name_lists_the_known_ones():
    with pytest.raises(UserError) as e:
        parse(foo="bar")
    assert str(e.value) == f"unknown variable foo=bar (known: {', '.join(sorted(VARIABLES))})"


@pytest.mark.parametrize(
    "name", ["AGENT", "NGINX_EVAL_CACHE", "NGINX_EVAL_SANDBOX", "ANTHROPIC_API_KEY"]
)
def test_environment_variable_given_as_doit_variable(name):
    with pytest.raises(UserError) as e:
        parse(argv=["run", "nginx:raw", f"{name}=x y", "run=n"], **{name: "x y"})
    assert str(e.value) == (
        f"{name} is an environment variable, not a doit variable: set it "
        f"before the command, as in {name}='x y' doit run nginx:raw run=n"
    )


def test_checks_against_the_benchmark_and_the_modes():
    bench = SimpleNamespace(
        name="tiny", tasks=[SimpleNamespace(instance_id=i) for i in ("tiny-add", "tiny-mul")]
    )
    parse(instances="tiny-mul, tiny-add").check_instances(bench)
    with pytest.raises(
        UserError,
        match=r"^instances=tiny-add, tiny-mull: no task 'tiny-mull' in "
        r"benchmark tiny; did you mean 'tiny-mul'\?$",
    ):
        parse(instances="tiny-add, tiny-mull").check_instances(bench)
    modes = {"gold": None, "none": None, "raw": None}
    parse(modes="gold,raw").check_modes(modes)
    with pytest.raises(
        UserError,
        match=r"^modes=gold,rwa: unknown mode 'rwa'; did you mean "
        r"'raw'\? \(known modes: gold, none, raw\)$",
    ):
        parse(modes="gold,rwa").check_modes(modes)
    parse(baseline="raw").check_baseline(set(modes))
    parse().check_baseline(set(modes))
    with pytest.raises(UserError, match=r"^baseline=nope: no mode 'nope' in run 'default'"):
        parse(baseline="nope").check_baseline(set(modes))


def doit_read(monkeypatch, argv):
    """argv, with doit's variables as doit takes them from it (restored after the test)."""
    monkeypatch.setattr(doit_cmd, "_CMDLINE_VARS", None)
    DoitMain().process_args(argv)
    return argv


def test_every_command_line_variable_is_read(monkeypatch):
    argv = doit_read(monkeypatch, ["run", "limit=2", "tiny", "instances=a, b"])
    assert Options.parse(command_line_variables(argv)) == Options(
        limit=2, instances=("a", "b"), given=(("limit", "2"), ("instances", "a, b"))
    )
    argv = doit_read(monkeypatch, ["limit=2", "limt=3"])
    with pytest.raises(UserError, match="unknown variable limt=3"):
        Options.parse(command_line_variables(argv))


def test_only_the_doit_invocation_reads_doit_variables():
    package = Path(__file__).resolve().parent.parent / "nginx_eval"
    calls = {p.name for p in package.rglob("*.py") if re.search(r"\bget_var\(", p.read_text())}
    assert calls == {"invocation.py"}


def test_task_names_follow_each_commands_own_options():
    from nginx_eval.doitext.invocation import command_targets

    # `-n` takes a value in `run` (processes), none in `clean` (dry run).
    assert command_targets(["-n", "2", "tiny:gold", "run=x"]) == ["tiny:gold"]
    assert command_targets(["clean", "-n", "tiny:gld"]) == ["tiny:gld"]
    assert command_targets(["list", "--sort", "name", "tiny"]) == ["tiny"]


# End to end: refused with one line, nothing run, nothing under results/.
REFUSED = {
    "misspelt variable": (
        ("run", "tiny", "limt=2"),
        "unknown variable limt=2; did you mean limit=? (known: ",
    ),
    "unknown variable": (("run", "tiny:gold", "foo=bar"), "unknown variable foo=bar (known: "),
    "repeats not a number": (
        ("run", "tiny:validate", "repeats=abc"),
        "repeats=abc: must be a whole number >= 1",
    ),
    "limit zero": (("run", "tiny:gold", "limit=0"), "limit=0: must be a whole number >= 1"),
    "budget zero": (
        ("run", "tiny:fake", "max_cost=0"),
        "max_cost=0: must be an amount of US dollars above 0",
    ),
    "negative retries": (
        ("run", "tiny:fake", "agent_retries=-1"),
        "agent_retries=-1: must be a whole number >= 0",
    ),
    "rerun not a switch": (
        ("run", "tiny:gold", "rerun_failed=yes"),
        "rerun_failed=yes: must be 0 or 1",
    ),
    "unknown baseline": (
        ("run", "report", "baseline=nope"),
        "baseline=nope: no mode 'nope' in run 'default'; did you mean 'none'? "
        "(known modes: fake, gold, none)",
    ),
    "environment variable after the command": (
        ("run", "tiny:fake", "AGENT=true"),
        "AGENT is an environment variable, not a doit variable: set it before the command, "
        "as in AGENT=true doit",
    ),
    "unknown instance": (
        ("run", "tiny:gold", "instances=tiny-add, tiny-mull"),
        "instances=tiny-add, tiny-mull: no task 'tiny-mull' in benchmark tiny; "
        "did you mean 'tiny-mul'?",
    ),
    "misspelt mode, info": (("info", "tiny:gld"), "no task 'tiny:gld'; did you mean 'tiny:gold'?"),
    "misspelt benchmark, info": (
        ("info", "tnyi:gold"),
        "no task 'tnyi:gold'; did you mean 'tiny:gold'?",
    ),
    "misspelt task, run": (
        ("run", "grade:tiny/gold/tiny-ad"),
        "no task 'grade:tiny/gold/tiny-ad'; did you mean 'grade:tiny/gold/tiny-add'?",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_with_one_line(project, case):
    args, expected = REFUSED[case]
    proc, executed = project.doit(*args, check=False)
    assert_refused(project, proc, executed, expected)
    assert "Traceback" not in proc.stderr and "ERROR" not in proc.stdout


def test_instances_with_spaces_after_the_commas(project):
    # A dry run reads the selection and does nothing (a report of a run without results is an
    # error of its own).
    proc, _ = project.doit(
        "run", "tiny:gold", "instances=tiny-mul, tiny-add", "dry_run=1", check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and "2 tasks" in proc.stdout, proc.stdout


def test_bare_doit_runs_gold_none_and_the_report_never_an_agent(project):
    proc, executed = project.doit()
    assert project.agent_calls() == []
    assert not [t for t in executed if t.startswith(("agent:", "workspace:"))]
    assert sorted(t for t in executed if t.startswith("grade:")) == [
        f"grade:tiny/{m}/{i}" for m in ("gold", "none") for i in ("tiny-add", "tiny-mul")
    ]
    assert project.read("gold", "tiny-add", "grade.json")["status"] == "resolved"
    assert project.read("none", "tiny-add", "grade.json")["status"] == "unresolved"
    assert (project.results / "default" / "report.md").exists()
    assert not (project.results / "default" / "fake").exists()
    run = json.loads((project.results / "default" / "run.json").read_text())
    assert run["modes"] == ["gold", "none"]
