"""doitext/plugins.py: doit's plugin look-ups served from one reading of the entry points."""

from importlib import metadata

import doit.plugin

from nginx_eval.doitext import plugins


def test_each_kind_of_plugin_is_what_importlib_finds(monkeypatch):
    monkeypatch.setattr(doit.plugin, "entry_points_impl", doit.plugin.entry_points_impl)
    plugins.read_entry_points_once()
    for kind in ("COMMAND", "LOADER", "BACKEND", "REPORTER"):
        found = doit.plugin.PluginDict()
        found.add_plugins({}, kind)
        expected = [(p.name, p.value) for p in metadata.entry_points(group=f"doit.{kind}")]
        assert [(n, e.location) for n, e in found.items()] == expected
    backends = doit.plugin.PluginDict()
    backends.add_plugins({}, "BACKEND")
    assert backends["nginx_eval"].location == "nginx_eval.doitext.backend:DurableDB"


def test_the_installed_distributions_are_read_once(monkeypatch):
    monkeypatch.setattr(doit.plugin, "entry_points_impl", doit.plugin.entry_points_impl)
    readings = []
    real = metadata.entry_points
    monkeypatch.setattr(metadata, "entry_points", lambda **p: readings.append(p) or real(**p))
    plugins.installed_entry_points.cache_clear()
    plugins.read_entry_points_once()
    for kind in ("COMMAND", "BACKEND", "REPORTER"):
        doit.plugin.PluginDict().add_plugins({}, kind)
    assert readings == [{}]
    plugins.installed_entry_points.cache_clear()
