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
