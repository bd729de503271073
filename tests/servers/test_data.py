"""The `data` server through the MCP protocol, on real CSV/Parquet/JSON/Excel files written by the test."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from mcp_types import ImageContent

from servers._roots import AllowedRoots
from servers.data.server import build_server
from tests.servers.conftest import Client, err, ok

pytestmark = pytest.mark.anyio

CITIES = ["Oslo", "Lima", "Pune"]


def _sales(n: int = 120) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    area = rng.uniform(20, 120, n)
    city = np.array(CITIES)[np.arange(n) % 3]
    price = 1000 + 30 * area + np.where(city == "Lima", 500, 0) + rng.normal(0, 50, n)
    return pd.DataFrame(
        {
            "day": pd.date_range("2026-01-01", periods=n, freq="D").strftime("%Y-%m-%d"),
            "city": city,
            "area": area.round(2),
            "price": price.round(2),
            "rooms": (area // 30 + 1).astype(int),
        }
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    base.mkdir()
    frame = _sales()
    frame.to_csv(base / "sales.csv", index=False)
    frame.to_parquet(base / "sales.parquet", index=False)
    frame.head(10).to_excel(base / "sales.xlsx", index=False)
    pd.DataFrame({"city": [*CITIES, "Rome"], "country": ["NO", "PE", "IN", "IT"]}).to_json(
        base / "cities.json", orient="records"
    )
    (base / "gaps.csv").write_text("a,b,c\n1,,x\n2,5,\n,6,y\n4,8,y\n")
    (tmp_path / "outside.csv").write_text("a\n1\n")
    return base


@pytest.fixture
async def client(root: Path) -> AsyncIterator[Client]:
    async with Client(build_server(AllowedRoots([root]))) as c:
        assert "no frame named 'sales'" in err(await c.call_tool("df_head", {"name": "sales"}))
        ok(await c.call_tool("df_load", {"path": "sales.csv", "name": "sales"}))
        yield c


def _png(result: object) -> bytes:
    images = [c for c in result.content if isinstance(c, ImageContent)]  # type: ignore[attr-defined]
    assert len(images) == 1
    assert images[0].mime_type == "image/png"
    data = base64.b64decode(images[0].data)
    assert data.startswith(b"\x89PNG")
    assert len(data) > 2000
    return data


async def test_load_every_format_and_refuse_outside(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert len(tools) >= 20
    for path, name in [("sales.parquet", "pq"), ("sales.xlsx", "xl"), ("cities.json", "cities")]:
        loaded = ok(await client.call_tool("df_load", {"path": path, "name": name}))
        assert loaded["name"] == name
    assert ok(await client.call_tool("df_info", {"name": "pq"}))["shape"] == [120, 5]
    assert ok(await client.call_tool("df_info", {"name": "xl"}))["shape"] == [10, 5]
    assert "outside the allowed roots" in err(
        await client.call_tool("df_load", {"path": "../outside.csv", "name": "o"})
    )
    assert "does not exist" in err(await client.call_tool("df_load", {"path": "missing.csv", "name": "m"}))
    listed = ok(await client.call_tool("df_list", {}))
    assert {r[0] for r in listed["rows"]} == {"sales", "pq", "xl", "cities"}
    ok(await client.call_tool("df_drop", {"name": "pq"}))
    assert "no frame named 'pq'" in err(await client.call_tool("df_info", {"name": "pq"}))


async def test_info_head_describe(client: Client) -> None:
    info = ok(await client.call_tool("df_info", {"name": "sales"}))
    by_col = {r[0]: r for r in info["rows"]}
    assert by_col["city"][4] == 3
    assert by_col["price"][3] == 0
    tail = ok(await client.call_tool("df_head", {"name": "sales", "n": 2, "mode": "tail", "columns": ["day"]}))
    assert tail["rows"] == [["2026-04-29"], ["2026-04-30"]]
    sample = ok(await client.call_tool("df_head", {"name": "sales", "n": 5, "mode": "sample"}))
    assert sample["rowCount"] == 5
    desc = ok(await client.call_tool("df_describe", {"name": "sales", "percentiles": [0.5]}))
    stats = {r[0]: r for r in desc["rows"]}
    assert stats["count"][desc["columns"].index("area")] == 120
    assert "between 0 and 1" in err(await client.call_tool("df_describe", {"name": "sales", "percentiles": [50]}))


async def test_query_sql_groupby(client: Client) -> None:
    big = ok(
        await client.call_tool(
            "df_query",
            {
                "name": "sales",
                "expr": "area > 100 and city == 'Oslo'",
                "sort_by": ["area"],
                "descending": True,
                "output": "big",
            },
        )
    )
    frame = _sales()
    want = frame[(frame.area > 100) & (frame.city == "Oslo")]
    assert big["shape"][0] == len(want)
    assert big["rows"][0][2] == want.area.max()
    assert "query" in err(await client.call_tool("df_query", {"name": "sales", "expr": "nosuch > 1"}))
    text_filter = ok(await client.call_tool("df_query", {"name": "sales", "expr": "city.str.startswith('Li')"}))
    assert text_filter["shape"][0] == 40
    for unsafe, why in [
        ("city.to_csv('/tmp/x')", "to_csv"),
        ("area.__class__", "__class__"),
        ("area.pipe(print)", "may call only"),
        ("(lambda: 1)()", "may call only"),
    ]:
        assert why in err(await client.call_tool("df_query", {"name": "sales", "expr": unsafe}))
    sql = ok(
        await client.call_tool(
            "df_sql",
            {"sql": "SELECT city, count(*) AS n, round(avg(price), 2) AS p FROM sales GROUP BY city ORDER BY city"},
        )
    )
    assert [r[:2] for r in sql["rows"]] == [["Lima", 40], ["Oslo", 40], ["Pune", 40]]
    joined = ok(await client.call_tool("df_sql", {"sql": "SELECT count(*) AS n FROM big JOIN sales USING (day)"}))
    assert joined["rows"] == [[len(want)]]
    blocked = err(await client.call_tool("df_sql", {"sql": "SELECT * FROM read_csv('/etc/passwd')"}))
    assert "SQL failed" in blocked
    grouped = ok(
        await client.call_tool(
            "df_groupby_agg",
            {
                "name": "sales",
                "by": ["city"],
                "aggregations": {"price": ["mean", "max"], "day": ["count"]},
                "sort_by": "price_mean",
            },
        )
    )
    assert grouped["columns"] == ["city", "price_mean", "price_max", "day_count"]
    assert grouped["rows"][0][0] == "Lima"
    assert "no column 'nope'" in err(
        await client.call_tool("df_groupby_agg", {"name": "sales", "by": ["nope"], "aggregations": {"price": ["sum"]}})
    )


async def test_pivot_melt_join(client: Client) -> None:
    wide = ok(
        await client.call_tool(
            "df_pivot",
            {
                "name": "sales",
                "index": ["rooms"],
                "columns": ["city"],
                "values": "price",
                "aggfunc": "count",
                "fill_value": 0,
                "output": "wide",
            },
        )
    )
    assert wide["columns"] == ["rooms", "Lima", "Oslo", "Pune"]
    assert sum(sum(r[1:]) for r in wide["rows"]) == 120
    long = ok(
        await client.call_tool(
            "df_melt",
            {"name": "wide", "id_columns": ["rooms"], "output": "long", "var_name": "city", "value_name": "n"},
        )
    )
    assert long["shape"] == [len(wide["rows"]) * 3, 3]
    ok(await client.call_tool("df_load", {"path": "cities.json", "name": "cities"}))
    joined = ok(
        await client.call_tool(
            "df_join",
            {"left": "cities", "right": "sales", "on": ["city"], "how": "left", "indicator": True, "output": "j"},
        )
    )
    assert joined["shape"][0] == 121
    rome = ok(await client.call_tool("df_query", {"name": "j", "expr": "_merge == 'left_only'"}))
    assert rome["rows"][0][0] == "Rome"
    assert "give `on`" in err(await client.call_tool("df_join", {"left": "cities", "right": "sales", "output": "x"}))


async def test_value_counts_missing_fill_save(client: Client, root: Path) -> None:
    counts = ok(await client.call_tool("df_value_counts", {"name": "sales", "columns": ["rooms"], "top": 2}))
    assert counts["columns"] == ["rooms", "count", "fraction"]
    assert counts["rows"][0][1] >= counts["rows"][1][1]
    ok(await client.call_tool("df_load", {"path": "gaps.csv", "name": "gaps"}))
    report = ok(await client.call_tool("df_missing_report", {"name": "gaps"}))
    assert {r[0]: r[1] for r in report["rows"]} == {"a": 1, "b": 1, "c": 1}
    assert report["rowsWithMissing"] == 3
    filled = ok(
        await client.call_tool(
            "df_fill_missing", {"name": "gaps", "strategy": "mean", "columns": ["a", "b"], "output": "g2"}
        )
    )
    assert filled["missingAfter"] == 0
    head = ok(await client.call_tool("df_head", {"name": "g2"}))
    assert head["rows"][2][0] == pytest.approx(7 / 3)
    assert "not numeric" in err(
        await client.call_tool("df_fill_missing", {"name": "gaps", "strategy": "median", "columns": ["c"]})
    )
    dropped = ok(await client.call_tool("df_fill_missing", {"name": "gaps", "strategy": "drop"}))
    assert dropped["rows"] == 1
    saved = ok(await client.call_tool("df_save", {"name": "g2", "path": "out/g2.parquet"}))
    assert saved["rows"] == 4
    assert pd.read_parquet(root / "out" / "g2.parquet")["a"].isna().sum() == 0
    ok(await client.call_tool("df_save", {"name": "sales", "path": "out/s.jsonl"}))
    assert len((root / "out" / "s.jsonl").read_text().splitlines()) == 120
    assert "overwrite" in err(await client.call_tool("df_save", {"name": "sales", "path": "out/s.jsonl"}))


async def test_plots_return_png(client: Client) -> None:
    _png(await client.call_tool("plot_line", {"name": "sales", "x": "day", "y": ["price"], "rolling": 7}))
    bar = await client.call_tool("plot_bar", {"name": "sales", "category": "city", "value": "price", "agg": "mean"})
    _png(bar)
    assert set(ok(bar)["bars"]) == set(CITIES)
    hist = await client.call_tool("plot_histogram", {"name": "sales", "column": "area", "bins": 10, "group_by": "city"})
    _png(hist)
    assert sum(ok(hist)["counts"]) == 120
    scatter = await client.call_tool(
        "plot_scatter", {"name": "sales", "x": "area", "y": "price", "trend_line": True, "color_by": "city"}
    )
    _png(scatter)
    assert ok(scatter)["slope"] == pytest.approx(30, abs=3)
    heat = await client.call_tool("plot_heatmap", {"name": "sales", "columns": ["area", "price", "rooms"]})
    _png(heat)
    assert ok(heat)["matrix"]["area"]["area"] == 1.0
    _png(
        await client.call_tool(
            "plot_heatmap", {"name": "sales", "mode": "pivot", "rows": "city", "cols": "rooms", "value": "price"}
        )
    )
    assert "not numeric" in err(await client.call_tool("plot_line", {"name": "sales", "x": "day", "y": ["city"]}))
    assert "pivot mode needs" in err(await client.call_tool("plot_heatmap", {"name": "sales", "mode": "pivot"}))


async def test_correlation_ttest_regression(client: Client) -> None:
    corr = ok(
        await client.call_tool(
            "stats_correlation", {"name": "sales", "columns": ["area", "price", "rooms"], "method": "spearman"}
        )
    )
    top = corr["pairs"][0]
    assert {top["a"], top["b"]} == {"area", "price"}
    assert top["p"] < 1e-10
    one = ok(await client.call_tool("stats_ttest", {"name": "sales", "kind": "one-sample", "column": "area", "mu": 70}))
    assert one["p"] > 0.001
    ok(await client.call_tool("df_query", {"name": "sales", "expr": "city != 'Pune'", "output": "lo"}))
    two = ok(
        await client.call_tool("stats_ttest", {"name": "lo", "kind": "two-sample", "column": "price", "group": "city"})
    )
    assert set(two["groups"]) == {"Lima", "Oslo"}
    assert two["cohensD"] > 0
    paired = ok(
        await client.call_tool("stats_ttest", {"name": "sales", "kind": "paired", "column": "price", "other": "area"})
    )
    assert paired["significant"] is True
    assert paired["effect"] == "large"
    assert "exactly two" in err(
        await client.call_tool(
            "stats_ttest", {"name": "sales", "kind": "two-sample", "column": "price", "group": "city"}
        )
    )
    reg = ok(await client.call_tool("stats_regression", {"name": "sales", "formula": "price ~ area + C(city)"}))
    coefs = {r[0]: r[1] for r in reg["rows"]}
    assert coefs["area"] == pytest.approx(30, abs=1)
    assert coefs["C(city)[T.Oslo]"] == pytest.approx(-500, abs=40)
    assert reg["rSquared"] > 0.95
    assert "cannot fit" in err(await client.call_tool("stats_regression", {"name": "sales", "formula": "price ~ zz"}))


async def test_normality_anova_chi_square(client: Client) -> None:
    norm = ok(await client.call_tool("stats_normality", {"name": "sales", "column": "area"}))
    assert norm["n"] == 120
    assert norm["tests"]["shapiro"]["normal"] is False  # uniform, not normal
    anova = ok(await client.call_tool("stats_anova", {"name": "sales", "value": "price", "group": "city"}))
    assert anova["anova"]["p"] < 0.05
    assert 0 < anova["anova"]["etaSquared"] < 1
    assert set(anova["groups"]) == set(CITIES)
    chi = ok(await client.call_tool("stats_chi_square", {"name": "sales", "column": "city", "other": "rooms"}))
    assert chi["test"] == "independence"
    assert chi["p"] > 0.01
    fit = ok(
        await client.call_tool(
            "stats_chi_square", {"name": "sales", "column": "city", "expected": {"Oslo": 1, "Lima": 1, "Pune": 1}}
        )
    )
    assert fit["chi2"] == 0
    assert "no proportion" in err(
        await client.call_tool("stats_chi_square", {"name": "sales", "column": "city", "expected": {"Oslo": 1}})
    )
    assert "not numeric" in err(
        await client.call_tool("stats_anova", {"name": "sales", "value": "city", "group": "rooms"})
    )
