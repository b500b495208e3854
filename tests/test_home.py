"""The agent's home (agent/home.py): what goes in, what does not, and a refreshed login going
back to the user."""

import json
import os
import stat

from nginx_eval.agent.programs import claude as home

LOGIN = b'{"claudeAiOauth": {"accessToken": "a1", "refreshToken": "r1", "expiresAt": 1}}'
REFRESHED = b'{"claudeAiOauth": {"accessToken": "a2", "refreshToken": "r2", "expiresAt": 2}}'


def user_config(tmp_path, **files):
    config = tmp_path / "user"
    config.mkdir()
    (config / "CLAUDE.md").write_text("Always end every answer with MEMORY.\n")
    (config / "settings.json").write_text(
        json.dumps(
            {
                "env": {"X": "y"},
                "apiKeyHelper": "/usr/local/bin/key",
                "hooks": {
                    "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo"}]}]
                },
                "permissions": {"allow": ["WebSearch"]},
            }
        )
    )
    for sub in ("agents", "skills", "commands", "output-styles", "plugins", "projects"):
        (config / sub).mkdir()
        (config / sub / "x.md").write_text("x")
    (config / ".claude.json").write_text('{"mcpServers": {"m": {"command": "x"}}}')
    for name, data in files.items():
        (config / name).write_bytes(data)
    return config


def test_the_home_holds_the_login_and_the_modes_files_and_nothing_else_of_the_user(tmp_path):
    config = user_config(tmp_path, **{".credentials.json": LOGIN})
    agent = tmp_path / "homes" / "raw" / "t1"
    files = (("CLAUDE.md", "Mode memory.\n"), ("agents/helper.md", "---\nname: h\n---\n"))
    assert home.prepare_files(agent, files, config) == LOGIN
    found = sorted(str(p.relative_to(agent)) for p in agent.rglob("*") if p.is_file())
    assert found == [".credentials.json", "CLAUDE.md", "agents/helper.md", "settings.json"]
    assert (agent / ".credentials.json").read_bytes() == LOGIN
    assert stat.S_IMODE(os.stat(agent / ".credentials.json").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(agent).st_mode) == 0o700
    assert (agent / "CLAUDE.md").read_text() == "Mode memory.\n"
    # Of the user's settings, only what gives credentials.
    assert json.loads((agent / "settings.json").read_text()) == {
        "apiKeyHelper": "/usr/local/bin/key"
    }
    # Afresh for each attempt: what the last one left is gone.
    (agent / "projects").mkdir()
    assert home.prepare_files(agent, (), config) == LOGIN
    assert sorted(p.name for p in agent.iterdir()) == [".credentials.json", "settings.json"]


def test_without_a_login_the_home_has_no_credentials_file(tmp_path):
    config = tmp_path / "nowhere"
    agent = tmp_path / "home"
    assert home.prepare_files(agent, (("settings.json", '{"model": "x"}'),), config) is None
    assert [p.name for p in agent.iterdir()] == ["settings.json"]
    assert home.sync_credentials(agent, config, None) is None and not config.exists()


def test_a_login_the_cli_refreshed_goes_back_to_the_user(tmp_path):
    config = user_config(tmp_path, **{".credentials.json": LOGIN})
    agent = tmp_path / "home"
    baseline = home.prepare_files(agent, (), config)
    assert home.sync_credentials(agent, config, baseline) == LOGIN  # nothing changed
    (agent / ".credentials.json").write_bytes(REFRESHED)  # the CLI refreshed
    assert home.sync_credentials(agent, config, baseline) == REFRESHED
    assert (config / ".credentials.json").read_bytes() == REFRESHED
    assert stat.S_IMODE(os.stat(config / ".credentials.json").st_mode) == 0o600


def test_a_login_refreshed_elsewhere_meanwhile_is_kept(tmp_path):
    config = user_config(tmp_path, **{".credentials.json": LOGIN})
    agent = tmp_path / "home"
    baseline = home.prepare_files(agent, (), config)
    other = b'{"claudeAiOauth": {"accessToken": "b2", "refreshToken": "s2"}}'
    (config / ".credentials.json").write_bytes(other)  # another run refreshed it
    (agent / ".credentials.json").write_bytes(REFRESHED)  # and so did this one
    assert home.sync_credentials(agent, config, baseline) == LOGIN
    assert (config / ".credentials.json").read_bytes() == other
    # Refreshed elsewhere while the home's copy is unchanged: the next phase gets it.
    (agent / ".credentials.json").write_bytes(LOGIN)
    assert home.sync_credentials(agent, config, baseline) == other
    assert (agent / ".credentials.json").read_bytes() == other


def test_the_users_own_state_is_named_for_the_sandbox_to_hide(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude.json").write_text("{}")
    assert home.user_state({"HOME": str(tmp_path)}) == [
        str(tmp_path / ".claude"),
        str(tmp_path / ".claude.json"),
    ]
    elsewhere = tmp_path / "cfg"
    elsewhere.mkdir()
    assert home.user_state({"CLAUDE_CONFIG_DIR": str(elsewhere)}) == [
        str(elsewhere),
        str(tmp_path / ".claude"),
        str(tmp_path / ".claude.json"),
    ]
