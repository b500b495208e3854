"""Mode parsing (modes.py): agent modes beside the built-in gold and none, placeholders filled and
quoted, mistakes named."""

import pytest

from nginx_eval.core.errors import UserError
from nginx_eval.run.commandline import render_command
from nginx_eval.run.modes import parse_modes


def test_modes_parse_and_errors(tmp_path):
    modes = parse_modes({"modes": {"a": {"model": "m", "phases": [
        {"name": "p", "command": "agent {prompt} --model {model} ${X:-y}", "timeout": 5}]}}}, "m.toml")
    assert set(modes) == {"a", "gold", "none"}
    assert modes["a"].phases[0].timeout == 5.0
    assert render_command(modes["a"].phases[0].command, {}, {"prompt": "it's", "model": "m"}) == \
        "agent 'it'\"'\"'s' --model m ${X:-y}"
    with pytest.raises(UserError, match="unknown placeholder {promt}"):
        parse_modes({"modes": {"a": {"phases": [{"command": "x {promt}"}]}}}, "m.toml")
    with pytest.raises(UserError, match="built in"):
        parse_modes({"modes": {"gold": {"phases": [{"command": "x"}]}}}, "m.toml")


# -- commands: custom slash commands the harness installs in the workspace --------------------------

def command_mode(commands, repeats=1):
    return {"modes": {"a": {"commands": commands, "repeats": repeats,
                            "phases": [{"name": "p", "command": "agent {prompt}"}]}}}


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


@pytest.mark.parametrize("commands,message", [
    (["fix-isue.md"], "no command file 'fix-isue.md' in {folder}; did you mean 'fix-issue.md'?"),
    (["other.md"], "no command file 'other.md' in {folder}"),
    # Only a plain name: the file goes to .claude/commands/ by that name.
    (["../fix-issue.md"], "no command file '../fix-issue.md' in {folder}; did you mean "
                          "'fix-issue.md'?"),
    (["sub/fix-issue.md"], "no command file 'sub/fix-issue.md' in {folder}; did you mean "
                           "'fix-issue.md'?"),
    ("fix-issue.md", "must be a list of file names in templates/commands/"),
    ([""], "must be a list of file names in templates/commands/"),
])
def test_a_command_that_is_not_there_names_the_mode_and_the_key(tmp_path, commands, message):
    templates = templates_with(tmp_path, {"fix-issue.md": "Fix it.\n"})
    with pytest.raises(UserError) as e:
        parse_modes(command_mode(commands), "m.toml", templates)
    folder = templates / "commands"
    assert str(e.value) == f"m.toml, mode a, field commands: {message.format(folder=folder)}"


def test_the_shipped_nlcmd_mode_installs_fix_issue_and_sends_the_slash_command():
    import jinja2
    from nginx_eval.core.layout import SOURCE_ROOT
    from nginx_eval.run.modes import load_modes
    modes = load_modes(SOURCE_ROOT / "modes.toml", SOURCE_ROOT / "templates")
    shipped = (SOURCE_ROOT / "templates" / "commands" / "fix-issue.md").read_text()
    assert modes["nlcmd"].command_files == (("fix-issue.md", shipped),)
    assert "$ARGUMENTS" in shipped and shipped.startswith("---\ndescription: ")
    assert all(not modes[m].command_files for m in ("raw", "impl", "full"))
    (phase,) = modes["nlcmd"].phases
    template = jinja2.Environment(loader=jinja2.FileSystemLoader(SOURCE_ROOT / "templates"),
                                  keep_trailing_newline=True).get_template(phase.prompt)
    assert template.render(issue_file=".issue.md", problem_statement="x") == \
        "/fix-issue .issue.md\n"


def test_a_missing_command_file_stops_doit_with_one_line(project):
    from nginx_eval.core.layout import SOURCE_ROOT
    modes = project.root / "modes.toml"
    modes.write_text(modes.read_text().replace('model = "fake-1"',
                                               'model = "fake-1"\ncommands = ["fix-isue.md"]'))
    proc, executed = project.doit("run", "tiny:gold", check=False)
    assert proc.returncode == 2 and executed == [] and project.agent_calls() == []
    assert proc.stderr.splitlines() == [
        f"nginx-eval: error: {modes}, mode fake, field commands: no command file 'fix-isue.md' "
        f"in {SOURCE_ROOT / 'templates' / 'commands'}; did you mean 'fix-issue.md'?"]
