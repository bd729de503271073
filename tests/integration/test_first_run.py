"""``hanzo-hub serve`` with nothing to serve yet says how to add servers; with servers it says nothing of it."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import REPO, MakeSettings, hub_command, stdio

pytestmark = pytest.mark.integration

HINT = "no downstream servers yet: add them to "


def serve_until_stdin_ends(command: list[str]) -> str:
    """Run the hub over stdio with an empty stdin (it serves, sees the end of its input and exits); its stderr."""
    done = subprocess.run(command, cwd=REPO, input=b"", capture_output=True, timeout=120, check=True)
    return done.stderr.decode("utf-8", "replace")


def test_a_hub_with_no_servers_says_how_to_add_some(make_settings: MakeSettings) -> None:
    settings = make_settings({})
    said = serve_until_stdin_ends(hub_command(settings))
    assert f"{HINT}{settings.config_file}" in said
    assert "hanzo-hub catalog enable ID" in said


def test_a_hub_with_servers_or_enabled_catalog_entries_gives_no_hint(make_settings: MakeSettings) -> None:
    assert HINT not in serve_until_stdin_ends(hub_command(make_settings({"one": stdio()})))
    assert HINT not in serve_until_stdin_ends(hub_command(make_settings({}, catalog={"enabled": ["files"]})))
