"""Load the ckptgate plugin: options, fixtures and the gate report live in fixtures/plugin.py."""

pytest_plugins = ["fixtures.plugin"]
