"""mlflow (SQLite tracking store) and mcp-server-motherduck (a DuckDB file): local files, no service needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.catalog.live.helpers import Call, run_live, text

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


async def test_mlflow_experiments_and_runs(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    calls = [
        Call("create_experiment", {"experiment_name": "catalog-exp"}, "1"),
        Call("search_experiments", {}, "catalog-exp"),
        Call("create_run", {"experiment_name": "catalog-exp", "run_name": "first-run"}, "first-run"),
        Call("list_runs", {"experiment_id": "1"}, "first-run"),
        Call("get_experiment", {"experiment_name": "catalog-exp", "output": "json"}, "catalog-exp"),
    ]
    outcome = await run_live("mlflow", tmp_path, calls, env={"MLFLOW_TRACKING_URI": store}, call_timeout=60)
    assert (tmp_path / "mlflow.db").stat().st_size > 0
    assert "evaluate_traces" not in {t.name for t in outcome.tools}
    assert "catalog-exp" in text(outcome.results[1])


async def test_motherduck_sql_on_a_duckdb_file(tmp_path: Path) -> None:
    db = tmp_path / "cat.duckdb"
    calls = [
        Call("execute_query", {"sql": "create table langs(name varchar, year int)"}, ""),
        Call("execute_query", {"sql": "insert into langs values ('python', 1991), ('duckdb', 2019)"}, ""),
        Call("execute_query", {"sql": "select sum(year) as total from langs"}, "4010"),
        Call("list_tables", {}, "langs"),
        Call("list_columns", {"table": "langs"}, "year"),
        Call("list_databases", {}, "cat"),
    ]
    await run_live("motherduck", tmp_path, calls, args=["--db-path", str(db), "--read-write"])
    assert db.exists()


async def test_duckdb_server_writes_and_reads(tmp_path: Path) -> None:
    db = tmp_path / "plain.duckdb"
    calls = [
        Call("query", {"query": "create table t as select range as n from range(10)"}, ""),
        Call("query", {"query": "select sum(n) as total, count(*) as rows from t"}, "45"),
    ]
    await run_live("duckdb", tmp_path, calls, args=["--db-path", str(db)])
    assert db.exists()


async def test_chroma_collection_tools(tmp_path: Path) -> None:
    data = tmp_path / "chroma"
    data.mkdir()
    calls = [
        Call("chroma_create_collection", {"collection_name": "notes", "metadata": {"owner": "hub"}}, "notes"),
        Call("chroma_list_collections", {}, "notes"),
        Call("chroma_get_collection_info", {"collection_name": "notes"}, "notes"),
        Call("chroma_get_collection_count", {"collection_name": "notes"}, "0"),
        Call("chroma_peek_collection", {"collection_name": "notes", "limit": 5}, "ids"),
        Call("chroma_get_documents", {"collection_name": "notes", "limit": 5}, "ids"),
        Call("chroma_modify_collection", {"collection_name": "notes", "new_name": "notes2"}, "updated name"),
        Call("chroma_create_collection", {"collection_name": "kept"}, "kept"),
        Call("chroma_delete_documents", {"collection_name": "notes2", "ids": ["missing"]}, "notes2"),
        Call("chroma_delete_collection", {"collection_name": "notes2"}, "notes2"),
        Call("chroma_list_collections", {}, "kept"),
    ]
    outcome = await run_live("chroma", tmp_path, calls, args=["--client-type", "persistent", "--data-dir", str(data)])
    hidden = {"chroma_add_documents", "chroma_query_documents", "chroma_fork_collection"}
    assert not hidden & {t.name for t in outcome.tools}
    assert "notes2" not in str(outcome.results[-1].content)
