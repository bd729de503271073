"""Shell servers (cli-mcp-server, mcp-shell-server) on a scratch folder, and mcp-graphql against a GraphQL endpoint
served here on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.catalog.live import services
from tests.catalog.live.helpers import Call, run_live, text

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with services.graphql(tmp_path_factory.mktemp("graphql")) as url:
        yield url


def _work(tmp: Path) -> Path:
    work = tmp / "work"
    work.mkdir()
    (work / "notes.txt").write_text("alpha\nbeta\ngamma\n", encoding="utf-8")
    return work


async def test_cli_server_runs_allowed_commands_only(tmp_path: Path) -> None:
    work = _work(tmp_path)
    calls = [
        Call("run_command", {"command": "cat notes.txt"}, "gamma"),
        Call("run_command", {"command": "wc -l notes.txt"}, "3"),
        Call("show_security_rules", {}, "cat"),
    ]
    outcome = await run_live("cli", tmp_path, calls, project=work)
    assert "beta" in text(outcome.results[0])


async def test_shell_server_executes_with_stdin_and_directory(tmp_path: Path) -> None:
    work = _work(tmp_path)
    calls = [
        Call("shell_execute", {"command": ["ls"], "directory": str(work)}, "notes.txt"),
        Call("shell_execute", {"command": ["sort"], "stdin": "b\na\nc\n", "directory": str(work)}, "a\\nb\\nc"),
    ]
    await run_live("shell", tmp_path, calls)


async def test_graphql_introspects_and_queries(tmp_path: Path, endpoint: str) -> None:
    calls = [
        Call("introspect-schema", {}, "Book"),
        Call("query-graphql", {"query": "{ books { title year } }"}, "Dune"),
        Call(
            "query-graphql",
            {"query": "query($id: Int!) { book(id: $id) { title } }", "variables": '{"id": 1}'},
            "Structure",
        ),
    ]
    await run_live("graphql", tmp_path, calls, env={"ENDPOINT": endpoint})
