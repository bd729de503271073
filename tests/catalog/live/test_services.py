"""Servers that talk to a real service started here: dbhub → PostgreSQL 15, jupyter-mcp-server → a Jupyter server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.catalog.live import services
from tests.catalog.live.helpers import Call, run_live

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[services.Postgres]:
    with services.postgres(tmp_path_factory.mktemp("pg")) as server:
        yield server


@pytest.fixture(scope="module")
def jupyter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[services.Jupyter]:
    with services.jupyter(tmp_path_factory.mktemp("jupyter")) as server:
        yield server


async def test_dbhub_sql_against_postgres(tmp_path: Path, pg: services.Postgres) -> None:
    calls = [
        Call("execute_sql", {"sql": "create table if not exists items(id int primary key, name text)"}, ""),
        Call("execute_sql", {"sql": "insert into items values (1, 'hub'), (2, 'catalog') on conflict do nothing"}, ""),
        Call("execute_sql", {"sql": "select name from items order by id"}, "catalog"),
        Call("search_objects", {"object_type": "table", "pattern": "item%"}, "items"),
    ]
    await run_live("dbhub", tmp_path, calls, env={"DSN": pg.dsn})


async def test_archived_postgres_server_runs_read_only_queries(tmp_path: Path, pg: services.Postgres) -> None:
    url = f"postgresql://postgres@127.0.0.1:{pg.port}/postgres"
    calls = [
        Call("query", {"sql": "select 40 + 2 as answer"}, "42"),
        Call("query", {"sql": "select current_setting('transaction_read_only') as ro"}, "on"),
    ]
    outcome = await run_live("postgres", tmp_path, calls, args=[url], keep_args=1)
    assert outcome.results


async def test_jupyter_runs_code_in_a_notebook(tmp_path: Path, jupyter: services.Jupyter) -> None:
    env = {"JUPYTER_URL": jupyter.url, "JUPYTER_TOKEN": jupyter.token}
    calls = [
        Call("use_notebook", {"notebook_name": "nb", "notebook_path": "catalog.ipynb", "mode": "create"}, "nb"),
        Call("insert_execute_code_cell", {"cell_index": -1, "cell_source": "print(6 * 7)"}, "42"),
        Call("read_notebook", {"notebook_name": "nb"}, "print"),
        Call("list_files", {}, "catalog.ipynb"),
        Call("list_kernels", {}, "python"),
    ]
    await run_live("jupyter", tmp_path, calls, env=env, call_timeout=90)
    assert (jupyter.root / "catalog.ipynb").exists()
