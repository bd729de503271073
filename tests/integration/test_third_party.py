"""Pinned third-party servers behind the hub answer exactly as they do over a direct connection.

Installed by ``scripts/install-test-servers`` (CI runs it); without it these tests skip and say so.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.server import build_server
from tests.conftest import REPO, MakeSettings, static_page

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_leaked_children")]

VENVS = REPO / ".cache" / "test-servers" / "venvs"
EVERYTHING = REPO / "third_party" / "npm" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
PAGE = b"<html><head><title>Fixture page</title></head><body><h1>Hello hub</h1><p>Served locally.</p></body></html>"


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is missing: run scripts/install-test-servers")
    return path


@dataclass
class Case:
    entry: dict[str, Any]
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


@pytest.fixture(scope="module")
def web_page() -> Iterator[str]:
    """A page on 127.0.0.1 for the fetch server, from a thread of this process."""
    with static_page(PAGE, "/page.html") as url:
        yield url


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    ident = ["-c", "user.name=Hub Test", "-c", "user.email=hub@test.invalid"]

    def git(*args: str) -> None:
        subprocess.run(["git", *ident, "-C", str(repo), *args], check=True, capture_output=True, timeout=30)

    git("init", "-q")
    (repo / "README.md").write_text("# fixture repo\n", encoding="utf-8")
    git("add", "README.md")
    git("commit", "-q", "-m", "first commit")
    (repo / "README.md").write_text("# fixture repo\n\nchanged\n", encoding="utf-8")
    return repo


def case_for(server: str, git_repo: Path, web_page: str) -> Case:
    if server == "time":
        binary = need(VENVS / "time" / "bin" / "mcp-server-time")
        return Case(
            {"command": str(binary)},
            [("convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})],
        )
    if server == "git":
        binary = need(VENVS / "git" / "bin" / "mcp-server-git")
        return Case(
            {"command": str(binary), "args": ["--repository", str(git_repo)]},
            [
                ("git_status", {"repo_path": str(git_repo)}),
                ("git_log", {"repo_path": str(git_repo), "max_count": 5}),
                ("git_diff_unstaged", {"repo_path": str(git_repo)}),
            ],
        )
    if server == "fetch":
        binary = need(VENVS / "fetch" / "bin" / "mcp-server-fetch")
        return Case(
            {"command": str(binary), "args": ["--allow-private-ips", "--ignore-robots-txt"]},
            [("fetch", {"url": web_page})],
        )
    script = need(EVERYTHING / "index.js")
    return Case(
        {"command": "node", "args": [str(script), "stdio"]},
        [
            ("echo", {"message": "through the hub"}),
            ("get-sum", {"a": 2, "b": 3}),
            ("get-tiny-image", {}),
            ("get-annotated-message", {"messageType": "error", "includeImage": True}),
        ],
    )


def comparable(result: Any) -> dict[str, Any]:
    """A result without ``_meta``, which names the answering server (the hub, or the server itself)."""
    return result.model_dump(exclude={"meta"})


@pytest.mark.parametrize("server", ["time", "git", "fetch", "everything"])
async def test_hub_results_equal_direct_results(
    server: str, make_settings: MakeSettings, git_repo: Path, web_page: str
) -> None:
    case = case_for(server, git_repo, web_page)
    params = StdioServerParameters(command=case.entry["command"], args=case.entry.get("args", []))
    async with Client(params) as direct:
        era = "legacy" if direct.protocol_version == "2025-11-25" else "auto"
        expected_tools = (await direct.list_tools()).tools
        expected = [comparable(await direct.call_tool(name, args)) for name, args in case.calls]
    settings = make_settings({server: case.entry})
    # The hub's client speaks to our client in the era the server itself speaks, so both see the same surface.
    async with Hub.open(settings) as hub, Client(build_server(hub), mode=era) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}  # one server: no prefixes
        results = [comparable(await client.call_tool(name, args)) for name, args in case.calls]
    # A server may offer more tools to the hub, which declares more client capabilities (sampling, roots...).
    assert [tools.get(tool.name) for tool in expected_tools] == expected_tools
    assert results == expected
    assert not any(result["is_error"] for result in results)


async def test_all_four_behind_one_hub_are_namespaced_and_answer(
    make_settings: MakeSettings, git_repo: Path, web_page: str
) -> None:
    cases = {name: case_for(name, git_repo, web_page) for name in ("time", "git", "fetch", "everything")}
    settings = make_settings({name: case.entry for name, case in cases.items()})
    async with Hub.open(settings) as hub, Client(build_server(hub), mode="legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        answers = {
            name: await client.call_tool(f"{name}__{case.calls[0][0]}", case.calls[0][1])
            for name, case in cases.items()
        }
        current = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
    assert {"time__convert_time", "git__git_log", "fetch__fetch", "everything__echo"} <= names
    assert all(name.split("__", 1)[0] in cases for name in names)
    assert not any(result.is_error for result in answers.values())
    assert "Hello hub" in str(answers["fetch"].content)
    assert current.structured_content is not None
    assert current.structured_content["timezone"] == "UTC"
