"""Mode parsing (modes.py): agent modes beside the built-in gold and none, placeholders filled and
quoted, mistakes named."""

import pytest

from nginx_eval.core.errors import UserError
from nginx_eval.run.commandline import render_command
from nginx_eval.run.modes import AgentMode, GoldMode, NoneMode, PredictionsMode, parse_modes


def test_modes_parse_and_errors(tmp_path):
    modes = parse_modes(
        {
            "modes": {
                "a": {
                    "model": "m",
                    "phases": [
                        {
                            "name": "p",
                            "command": "agent {prompt} --model {model} ${X:-y}",
                            "timeout": 5,
                        }
                    ],
                }
            }
        },
        "m.toml",
    )
    assert set(modes) == {"a", "gold", "none"}
    assert modes["a"].phases[0].timeout == 5.0
    assert (
        render_command(modes["a"].phases[0].command, {}, {"prompt": "it's", "model": "m"})
        == "agent 'it'\"'\"'s' --model m ${X:-y}"
    )
    with pytest.raises(UserError, match="unknown placeholder {promt}"):
        parse_modes({"modes": {"a": {"phases": [{"command": "x {promt}"}]}}}, "m.toml")
    with pytest.raises(UserError, match="built in"):
        parse_modes({"modes": {"gold": {"phases": [{"command": "x"}]}}}, "m.toml")


def test_each_kind_of_mode_is_its_own_type_and_keeps_only_its_own_settings(tmp_path):
    """A predictions mode's agent settings are checked (a wrong one is still an error) but not
    kept: nothing of it runs an agent, and its report entry says no tests or score."""
    (tmp_path / "p.jsonl").write_text('{"instance_id": "t-1", "model_patch": ""}\n')
    agent = {"phases": [{"command": "x"}], "score": "finished", "tests": "base"}
    rows = {"predictions": "p.jsonl", "model": "m", "score": "finished", "tests": "base"}
    modes = parse_modes({"modes": {"a": agent, "rows": rows}}, tmp_path / "m.toml")
    kinds = {n: (type(m), m.kind) for n, m in modes.items()}
    assert kinds == {
        "a": (AgentMode, "agent"),
        "rows": (PredictionsMode, "predictions"),
        "gold": (GoldMode, "gold"),
        "none": (NoneMode, "none"),
    }
    rows_mode = modes["rows"]
    assert isinstance(rows_mode, PredictionsMode)
    assert rows_mode.instances == ("t-1",) and rows_mode.model == "m"
    assert not hasattr(rows_mode, "score") and not hasattr(rows_mode, "phases")
    assert "score" not in rows_mode.to_json() and "tests" not in rows_mode.to_json()
    assert modes["a"].to_json()["score"] == "finished"
    assert modes["a"].covers("anything") and not rows_mode.covers("t-2")
    with pytest.raises(UserError, match="score"):
        parse_modes({"modes": {"rows": dict(rows, score="best")}}, tmp_path / "m.toml")


# -- commands: custom slash commands the harness installs in the workspace -------------------------


def command_mode(commands, repeats=1):
    return {
        "modes": {
            "a": {
                "commands": commands,
                "repeats": repeats,
                "phases": [{"name": "p", "command": "agent {prompt}"}],
            }
        }
    }


def templates_with(tmp_path, files):
    folder = tmp_path / "templates" / "commands"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return tmp_path / "templates"


def test_commands_are_read_and_are_agent_inputs(tmp_path):
    templates = templates_with(tmp_path, {"fix-issue.md": "Fix $ARGUMENTS.\n"})
    modes = parse_modes(command_mode(["fix-issue.md"], repeats=2), "m.toml", templates)
    assert modes["a"].command_files == (("fix-issue.md", "Fix $ARGUMENTS.\n"),)
    assert modes["a-r2"].command_files == modes["a"].command_files
    assert modes["a"].fingerprint()["commands"] == [["fix-issue.md", "Fix $ARGUMENTS.\n"]]
    assert modes["a"].to_json()["command_files"] == ["fix-issue.md"]
    # Editing the command's text changes the fingerprint, and so the agent's inputs.
    (templates / "commands" / "fix-issue.md").write_text("Fix $ARGUMENTS, then test.\n")
    edited = parse_modes(command_mode(["fix-issue.md"]), "m.toml", templates)
    assert edited["a"].fingerprint() != modes["a"].fingerprint()
    # A mode without commands keeps the fingerprint it had (its paid runs stay valid).
    plain = parse_modes(command_mode([]), "m.toml", templates)["a"]
    assert plain.command_files == () and "commands" not in plain.fingerprint()
    assert set(plain.fingerprint()) == {"phases", "model", "env", "repeat"}
    assert "command_files" not in plain.to_json()


@pytest.mark.parametrize(
    "commands,message",
    [
        (
            ["fix-isue.md"],
            "no command file 'fix-isue.md' in {folder}; did you mean 'fix-issue.md'?",
        ),
        (["other.md"], "no command file 'other.md' in {folder}"),
        # Only a plain name: the file goes to .claude/commands/ by that name.
        (
            ["../fix-issue.md"],
            "no command file '../fix-issue.md' in {folder}; did you mean 'fix-issue.md'?",
        ),
        (
            ["sub/fix-issue.md"],
            "no command file 'sub/fix-issue.md' in {folder}; did you mean 'fix-issue.md'?",
        ),
        ("fix-issue.md", "must be a list of file names in templates/commands/"),
        ([""], "must be a list of file names in templates/commands/"),
    ],
)
def test_a_command_that_is_not_there_names_the_mode_and_the_key(tmp_path, commands, message):
    templates = templates_with(tmp_path, {"fix-issue.md": "Fix it.\n"})
    with pytest.raises(UserError) as e:
        parse_modes(command_mode(commands), "m.toml", templates)
    folder = templates / "commands"
    assert str(e.value) == f"m.toml, mode a, field commands: {message.format(folder=folder)}"


def test_the_fix_command_mode_installs_fix_issue_and_sends_the_slash_command():
    import jinja2

    from nginx_eval.core.layout import SOURCE_ROOT
    from nginx_eval.run.modes import load_modes

    modes = load_modes(SOURCE_ROOT / "modes.toml", SOURCE_ROOT / "templates")
    shipped = (SOURCE_ROOT / "templates" / "commands" / "fix-issue.md").read_text()
    assert modes["fix-command"].command_files == (("fix-issue.md", shipped),)
    assert "$ARGUMENTS" in shipped and shipped.startswith("---\ndescription: ")
    assert all(not modes[m].command_files for m in ("raw", "plan-implement", "plan-verify"))
    (phase,) = modes["fix-command"].phases
    template = jinja2.Environment(
        loader=jinja2.FileSystemLoader(SOURCE_ROOT / "templates"), keep_trailing_newline=True
    ).get_template(phase.prompt)
    assert (
        template.render(issue_file=".issue.md", problem_statement="x") == "/fix-issue .issue.md\n"
    )


def test_a_missing_command_file_stops_doit_with_one_line(project):
    from nginx_eval.core.layout import SOURCE_ROOT

    modes = project.root / "modes.toml"
    modes.write_text(
        modes.read_text().replace(
            'model = "fake-1"', 'model = "fake-1"\ncommands = ["fix-isue.md"]'
        )
    )
    proc, executed = project.doit("run", "tiny:gold", check=False)
    assert proc.returncode == 2 and executed == [] and project.agent_calls() == []
    assert proc.stderr.splitlines() == [
        f"nginx-eval: error: {modes}, mode fake, field commands: no command file 'fix-isue.md' "
        f"in {SOURCE_ROOT / 'templates' / 'commands'}; did you mean 'fix-issue.md'?"
    ]


# -- agent_home: files of the agent's own configuration directory; web_tools ----------------------


def home_mode(**keys):
    return {"modes": {"a": dict(keys, phases=[{"name": "p", "command": "agent {prompt}"}])}}


def test_agent_home_files_are_read_and_are_agent_inputs(tmp_path):
    templates = tmp_path / "templates"
    house = templates / "agent-homes" / "house"
    (house / "agents").mkdir(parents=True)
    (house / "CLAUDE.md").write_text("House rules.\n")
    (house / "agents" / "helper.md").write_text("---\nname: helper\n---\n")
    mode = parse_modes(home_mode(agent_home="house"), "m.toml", templates)["a"]
    assert mode.home_files == (
        ("CLAUDE.md", "House rules.\n"),
        ("agents/helper.md", "---\nname: helper\n---\n"),
    )
    assert mode.fingerprint()["agent_home"] == [list(f) for f in mode.home_files]
    assert mode.to_json()["agent_home"] == "house"
    # An edited file is another agent: the fingerprint changes.
    (house / "CLAUDE.md").write_text("Other rules.\n")
    edited = parse_modes(home_mode(agent_home="house"), "m.toml", templates)["a"]
    assert edited.fingerprint() != mode.fingerprint()
    # Without agent_home and web_tools, or with web_tools (what every mode ran before it was
    # closed): the fingerprint the mode had, so its paid runs stay valid.
    for keys in ({}, {"web_tools": True}, {"web_tools": False}):
        plain = parse_modes(home_mode(**keys), "m.toml", templates)["a"]
        assert set(plain.fingerprint()) == {"phases", "model", "env", "repeat"}
        assert plain.web_tools is keys.get("web_tools", False)
    assert (
        parse_modes(home_mode(web_tools=True), "m.toml", templates)["a"].to_json()["web_tools"]
        is True
    )


@pytest.mark.parametrize(
    "keys,message",
    [
        ({"agent_home": "hous"}, "no folder 'hous' in {parent}; did you mean 'house'?"),
        ({"agent_home": "../house"}, "no folder '../house' in {parent}; did you mean 'house'?"),
        ({"agent_home": 3}, "must be the name of a folder in {parent}"),
        ({"agent_home": ""}, "must be the name of a folder in {parent}"),
        ({"web_tools": "yes"}, "must be true or false"),
    ],
)
def test_a_wrong_agent_home_or_web_tools_names_the_mode_and_the_key(tmp_path, keys, message):
    templates = tmp_path / "templates"
    (templates / "agent-homes" / "house").mkdir(parents=True)
    with pytest.raises(UserError) as e:
        parse_modes(home_mode(**keys), "m.toml", templates)
    field = next(iter(keys))
    assert str(e.value) == (
        f"m.toml, mode a, field {field}: {message.format(parent=templates / 'agent-homes')}"
    )


def test_an_agent_home_may_not_bring_credentials(tmp_path):
    templates = tmp_path / "templates"
    house = templates / "agent-homes" / "house"
    house.mkdir(parents=True)
    (house / ".credentials.json").write_text("{}")
    with pytest.raises(UserError, match="the agent's credentials are the user's"):
        parse_modes(home_mode(agent_home="house"), "m.toml", templates)


def workflow_mode(**phase):
    return {
        "modes": {
            "w": {
                "models": {"opus": "claude-opus-4-5", "sonnet": "claude-sonnet-4-5"},
                "model": "sonnet",
                "phases": [
                    {"name": "a", "command": "x {model}", "model": "opus", "group": "g"},
                    {"name": "b", "command": "x", "group": "g"},
                    {"name": "c", "command": "x", **phase},
                ],
            }
        }
    }


def test_a_workflows_keys_are_checked_by_mode_phase_and_key(monkeypatch):
    monkeypatch.delenv("NGINX_EVAL_MODELS", raising=False)
    mode = parse_modes(workflow_mode(loop={"max": 2}, share="rest"), "m.toml")["w"]
    a, b, c = mode.phases
    assert (a.model, mode.model, a.group, b.group) == (
        "claude-opus-4-5",
        "claude-sonnet-4-5",
        "g",
        "g",
    )
    assert c.loop.max == 2 and c.loop.no_progress == 3 and c.share == "rest"
    for phase, message in (
        (
            {"loop": {"mxa": 2}},
            "m.toml: mode w phase c loop: unknown key 'mxa'; did you mean 'max'?",
        ),
        (
            {"fallback": {"program": "claude", "modle": "x", "command": "y"}},
            "m.toml: mode w phase c fallback: unknown key 'modle'; did you mean 'model'?",
        ),
        ({"share": 2}, "m.toml, mode w phase c, field share: must be a fraction"),
        ({"loop": {"max": 0}}, "m.toml, mode w phase c, field loop.max: must be a whole number"),
        (
            {"group": "g", "loop": {}},
            "m.toml, mode w phase c, field group: a loop phase runs alone",
        ),
    ):
        with pytest.raises(UserError) as e:
            parse_modes(workflow_mode(**phase), "m.toml")
        assert str(e.value).startswith(message), str(e.value)
    # A group's phases follow one another.
    data = workflow_mode(group="g")
    data["modes"]["w"]["phases"].insert(2, {"name": "d", "command": "x"})
    with pytest.raises(UserError, match="must follow one another"):
        parse_modes(data, "m.toml")


def test_one_variable_changes_every_stage_model(monkeypatch):
    monkeypatch.setenv("NGINX_EVAL_MODELS", "opus=claude-x")
    mode = parse_modes(workflow_mode(), "m.toml")["w"]
    assert [p.model for p in mode.phases] == [
        "claude-x",
        "",
        "",
    ] and mode.model == "claude-sonnet-4-5"
    monkeypatch.setenv("NGINX_EVAL_MODELS", "claude-y")
    changed = parse_modes(workflow_mode(), "m.toml")["w"]
    assert changed.phases[0].model == changed.model == "claude-y"
    assert changed.fingerprint() != mode.fingerprint()
    # The shipped full mode: every stage's model comes from its table.
    from nginx_eval.core.layout import SOURCE_ROOT
    from nginx_eval.run.modes import load_modes

    monkeypatch.setenv("NGINX_EVAL_MODELS", "opus=claude-sonnet-4-5")
    full = load_modes(SOURCE_ROOT / "modes.toml", SOURCE_ROOT / "templates")["full"]
    assert {p.model for p in full.every_phase} == {"claude-sonnet-4-5", "gpt-5.2-codex"}


def test_a_subagent_naming_a_model_role_gets_the_modes_model(tmp_path, monkeypatch):
    templates = tmp_path / "templates"
    house = templates / "agent-homes" / "house"
    (house / "agents").mkdir(parents=True)
    (house / "plugins" / "kit" / "agents").mkdir(parents=True)
    front = "---\nname: {0}\nmodel: {1}\ntools: Read\n---\nThe body says model: {1}.\n"
    (house / "agents" / "scout.md").write_text(front.format("scout", "sonnet"))
    (house / "plugins" / "kit" / "agents" / "judge.md").write_text(front.format("judge", "opus"))
    (house / "agents" / "own.md").write_text(front.format("own", "haiku"))
    (house / "notes.md").write_text("model: sonnet\n")
    (house / "agents" / "asker.md").write_text("Ask `tool -m {models.opus}` ({models.nope}).\n")
    table = {"sonnet": "claude-sonnet-4-5", "opus": "claude-opus-4-5"}
    data = home_mode(agent_home="house")
    data["modes"]["a"]["models"] = table
    monkeypatch.delenv("NGINX_EVAL_MODELS", raising=False)
    files = dict(parse_modes(data, "m.toml", templates)["a"].home_files)
    # Only the front matter's model, only of a role the table has, only under agents/.
    assert files["agents/scout.md"] == front.format("scout", "claude-sonnet-4-5").replace(
        "says model: claude-sonnet-4-5", "says model: sonnet"
    )
    assert "model: claude-opus-4-5\n" in files["plugins/kit/agents/judge.md"]
    assert files["agents/own.md"] == front.format("own", "haiku")
    assert files["notes.md"] == "model: sonnet\n"
    assert files["agents/asker.md"] == "Ask `tool -m claude-opus-4-5` ({models.nope}).\n"
    # NGINX_EVAL_MODELS reaches the subagents too, and so the mode's fingerprint.
    monkeypatch.setenv("NGINX_EVAL_MODELS", "sonnet=claude-haiku-4-5")
    other = parse_modes(data, "m.toml", templates)["a"]
    assert "model: claude-haiku-4-5\n" in dict(other.home_files)["agents/scout.md"]
