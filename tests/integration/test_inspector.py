"""The MCP Inspector CLI, a real third-party client, lists and calls tools through the hub over stdio and HTTP."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from hanzo_hub.config import HubSettings
from tests.conftest import REPO, MakeSettings, hub_command, inproc, serve_http_in_process

pytestmark = [pytest.mark.npm, pytest.mark.integration]

INSPECTOR = REPO / "third_party" / "npm" / "node_modules" / ".bin" / "mcp-inspector"


@pytest.fixture
def settings(make_settings: MakeSettings) -> HubSettings:
    if not INSPECTOR.exists():
        pytest.skip(f"{INSPECTOR} is missing: run scripts/install-test-servers")
    return make_settings({"alpha": inproc("alpha"), "beta": inproc("beta")})


async def inspector(tmp_path: Path, *args: str) -> Any:
    """Run the Inspector CLI (it keeps state under $HOME, so HOME is a temporary directory); its JSON result."""
    home = tmp_path / "inspector-home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home)}
    with anyio.fail_after(60):
        done = await anyio.run_process([str(INSPECTOR), "--cli", *args], env=env, cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr.decode()
    output = json.loads(done.stdout)
    return output.get("result", output)  # `--format json` wraps the result, the default output does not


def stdio_target(settings: HubSettings) -> list[str]:
    return [sys.executable, *hub_command(settings)[1:], "--"]


async def test_inspector_lists_and_calls_tools_over_stdio(settings: HubSettings, tmp_path: Path) -> None:
    target = stdio_target(settings)
    listed = await inspector(tmp_path, *target, "--method", "tools/list", "--format", "json")
    called = await inspector(
        tmp_path,
        *target,
        "--method",
        "tools/call",
        "--tool-name",
        "beta__echo",
        "--tool-arg",
        "text=inspected",
        "--format",
        "json",
    )
    names = {tool["name"] for tool in listed["tools"]}
    assert {"alpha__echo", "beta__echo", "alpha__add"} <= names
    assert called["content"] == [{"type": "text", "text": "inspected"}]
    assert called["isError"] is False


async def test_inspector_lists_calls_and_reads_over_http(settings: HubSettings, tmp_path: Path) -> None:
    async with serve_http_in_process(settings) as url:
        base = ["--transport", "http", "--server-url", url]
        listed = await inspector(tmp_path, *base, "--method", "tools/list", "--format", "json")
        called = await inspector(
            tmp_path, *base, "--method", "tools/call", "--tool-name", "alpha__echo", "--tool-arg", "text=over http"
        )
        read = await inspector(tmp_path, *base, "--method", "resources/read", "--uri", "hub://beta/fixture://doc")
    assert {"alpha__echo", "beta__echo"} <= {tool["name"] for tool in listed["tools"]}
    assert called["content"] == [{"type": "text", "text": "over http"}]
    assert [content["text"] for content in read["contents"]] == ["the document"]
