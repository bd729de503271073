"""Transform tools: query, SQL (DuckDB), group-by aggregation, pivot, melt and join of named frames."""

from __future__ import annotations

import ast
import re
from typing import Annotated, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError
from servers._hints import CREATES
from servers._toolset import Toolset, tool
from servers.data.store import (
    NAME_PATTERN,
    FrameName,
    FrameStore,
    NewFrameName,
    check_columns,
    flat_columns,
    frame_table,
)

AggFunc = Literal["sum", "mean", "median", "min", "max", "count", "nunique", "std", "var", "first", "last"]
OptionalName = Annotated[str | None, Field(pattern=NAME_PATTERN, description="also store the result under this name")]
RowLimit = Annotated[int, Field(ge=1, le=5000, description="rows returned in the result table")]
# Calls a query expression may make: pandas' math functions and read-only Series/str/dt methods. Anything else
# (to_csv, pipe, apply, dunder attributes...) is refused before pandas evaluates the expression.
SAFE_CALLS = frozenset(
    [
        "abs",
        "sin",
        "cos",
        "tan",
        "log",
        "log10",
        "log1p",
        "exp",
        "expm1",
        "sqrt",
        "sinh",
        "cosh",
        "tanh",
        "arcsin",
        "arccos",
        "arctan",
        "arcsinh",
        "arccosh",
        "arctanh",
        "isin",
        "isna",
        "notna",
        "isnull",
        "notnull",
        "between",
        "round",
        "contains",
        "startswith",
        "endswith",
        "match",
        "fullmatch",
        "lower",
        "upper",
        "strip",
        "len",
    ]
)


def check_query(expr: str) -> None:
    """Refuse query expressions that call anything but SAFE_CALLS or touch private or ``to_*`` attributes."""
    source = re.sub(r"`[^`]*`", "_column", expr)
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"query {expr!r} is not a valid expression: {exc.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (node.attr.startswith("_") or node.attr.startswith("to_")):
            raise ToolError(f"query may not use the attribute {node.attr!r}")
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name not in SAFE_CALLS:
                raise ToolError(f"query may call only {', '.join(sorted(SAFE_CALLS))}; not {name or 'this'}")
        if isinstance(node, ast.Lambda | ast.NamedExpr | ast.ListComp | ast.GeneratorExp | ast.DictComp | ast.SetComp):
            raise ToolError("query may not contain lambdas, comprehensions or assignments")


class TransformTools(Toolset):
    """Query, SQL, aggregation and reshaping of named frames."""

    def __init__(self, store: FrameStore) -> None:
        self.store = store

    @tool(
        name="df_query",
        description=(
            "Filter rows of a frame with a pandas query expression, e.g. \"age > 30 and city == 'Oslo'\" (backticks "
            "for odd column names; isin, between, str.contains and math functions allowed), optionally keeping some "
            "columns and sorting. Returns matching rows; `output` stores them as a new frame."
        ),
        annotations=CREATES,
    )
    def df_query(
        self,
        name: FrameName,
        expr: Annotated[str, Field(min_length=1, max_length=2000, description="pandas query expression")],
        columns: Annotated[list[str] | None, Field(description="columns to keep")] = None,
        sort_by: Annotated[list[str] | None, Field(description="columns to sort by")] = None,
        descending: Annotated[bool, Field(description="sort descending")] = False,
        output: OptionalName = None,
        limit: RowLimit = 50,
    ) -> CallToolResult:
        frame = self.store.get(name)
        check_query(expr)
        try:
            result = frame.query(expr, local_dict={}, global_dict={})
        except Exception as exc:  # pandas raises many types for a bad expression
            raise ToolError(f"query {expr!r} failed: {type(exc).__name__}: {exc}") from None
        if columns:
            check_columns(result, columns, name)
            result = result[columns]
        if sort_by:
            check_columns(result, sort_by, name)
            result = result.sort_values(sort_by, ascending=not descending)
        result = result.reset_index(drop=True)
        if output:
            self.store.put(output, result)
        return frame_table(result, title=f"{len(result)} rows of {name} where {expr}", limit=limit, stored=output)

    @tool(
        name="df_sql",
        description=(
            "Run a DuckDB SQL query over the loaded frames, which appear as tables under their names (joins, "
            "window functions, CTEs, aggregates). File access from SQL is disabled: load files with df_load. Use for "
            "anything easier to say in SQL. Returns the result rows; `output` stores them as a new frame."
        ),
        annotations=CREATES,
    )
    def df_sql(
        self,
        sql: Annotated[str, Field(min_length=1, max_length=20_000, description="a single DuckDB SELECT query")],
        output: OptionalName = None,
        limit: RowLimit = 100,
    ) -> CallToolResult:
        import duckdb

        con = duckdb.connect(":memory:")
        try:
            for frame_name, frame in self.store.items():
                con.register(frame_name, frame)
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
            result = con.execute(sql).df()
        except duckdb.Error as exc:
            raise ToolError(f"SQL failed: {exc}") from None
        finally:
            con.close()
        if output:
            self.store.put(output, result)
        return frame_table(result, title=f"{len(result)} rows", limit=limit, stored=output)

    @tool(
        name="df_groupby_agg",
        description=(
            "Group a frame by one or more columns and aggregate other columns (sum, mean, median, min, max, count, "
            "nunique, std, var, first, last), e.g. aggregations={'sales': ['sum', 'mean']}. Returns one row per "
            "group with columns like sales_sum; `output` stores it."
        ),
        annotations=CREATES,
    )
    def df_groupby_agg(
        self,
        name: FrameName,
        by: Annotated[list[str], Field(min_length=1, max_length=10, description="grouping columns")],
        aggregations: Annotated[dict[str, list[AggFunc]], Field(min_length=1, description="column -> functions")],
        sort_by: Annotated[str | None, Field(description="result column to sort by (descending)")] = None,
        output: OptionalName = None,
        limit: RowLimit = 100,
    ) -> CallToolResult:
        frame = self.store.get(name)
        check_columns(frame, by + list(aggregations), name)
        try:
            result = flat_columns(frame.groupby(by, dropna=False).agg(aggregations))
        except (TypeError, ValueError) as exc:
            raise ToolError(f"aggregation failed (numeric function on a text column?): {exc}") from None
        if sort_by:
            check_columns(result, [sort_by], "the result")
            result = result.sort_values(sort_by, ascending=False).reset_index(drop=True)
        if output:
            self.store.put(output, result)
        return frame_table(result, title=f"{name} grouped by {by}", limit=limit, stored=output)

    @tool(
        name="df_pivot",
        description=(
            "Pivot a frame from long to wide (pandas pivot_table): rows from `index`, one column per value of "
            "`columns`, cells aggregated from `values` with `aggfunc`. Use for cross-tabulations. Returns the wide "
            "table; `output` stores it."
        ),
        annotations=CREATES,
    )
    def df_pivot(
        self,
        name: FrameName,
        index: Annotated[list[str], Field(min_length=1, description="row keys")],
        columns: Annotated[list[str], Field(min_length=1, description="columns whose values become columns")],
        values: Annotated[str | None, Field(description="column to aggregate (default: count rows)")] = None,
        aggfunc: Annotated[AggFunc, Field(description="aggregation")] = "sum",
        fill_value: Annotated[float | None, Field(description="value for empty cells")] = None,
        output: OptionalName = None,
        limit: RowLimit = 100,
    ) -> CallToolResult:
        frame = self.store.get(name)
        check_columns(frame, index + columns + ([values] if values else []), name)
        source = frame if values else frame.assign(_rows=1)
        try:
            wide = source.pivot_table(
                index=index,
                columns=columns,
                values=values or "_rows",
                aggfunc=aggfunc if values else "sum",
                fill_value=fill_value,
            )
        except (TypeError, ValueError) as exc:
            raise ToolError(f"pivot failed: {exc}") from None
        result = flat_columns(wide)
        if output:
            self.store.put(output, result)
        return frame_table(result, title=f"pivot of {name}", limit=limit, stored=output)

    @tool(
        name="df_melt",
        description=(
            "Unpivot a frame from wide to long (pandas melt): keep `id_columns`, turn `value_columns` (default: "
            "all others) into variable/value pairs. Use to tidy data before plotting or grouping. Returns and stores "
            "the long frame under `output`."
        ),
        annotations=CREATES,
    )
    def df_melt(
        self,
        name: FrameName,
        id_columns: Annotated[list[str], Field(min_length=1, description="identifier columns kept as they are")],
        output: NewFrameName,
        value_columns: Annotated[list[str] | None, Field(description="columns to unpivot")] = None,
        var_name: Annotated[
            str, Field(min_length=1, max_length=64, description="column for the old names")
        ] = "variable",
        value_name: Annotated[str, Field(min_length=1, max_length=64, description="column for the values")] = "value",
    ) -> CallToolResult:
        frame = self.store.get(name)
        check_columns(frame, id_columns + (value_columns or []), name)
        if value_name in frame.columns:
            raise ToolError(f"value_name {value_name!r} clashes with an existing column")
        result = frame.melt(id_vars=id_columns, value_vars=value_columns, var_name=var_name, value_name=value_name)
        self.store.put(output, result)
        return frame_table(result, title=f"{output}: {len(result)} rows", stored=output)

    @tool(
        name="df_join",
        description=(
            "Join two frames on key columns (inner, left, right, outer; or cross), like SQL JOIN / pandas merge. "
            "Duplicate column names get suffixes _left/_right. Returns the first rows and stores the joined frame "
            "under `output`; `indicator` adds a _merge column showing where each row came from."
        ),
        annotations=CREATES,
    )
    def df_join(
        self,
        left: FrameName,
        right: FrameName,
        output: NewFrameName,
        on: Annotated[list[str] | None, Field(description="key columns present in both frames")] = None,
        left_on: Annotated[list[str] | None, Field(description="keys in the left frame")] = None,
        right_on: Annotated[list[str] | None, Field(description="keys in the right frame")] = None,
        how: Annotated[Literal["inner", "left", "right", "outer", "cross"], Field(description="join type")] = "inner",
        indicator: Annotated[bool, Field(description="add a _merge column")] = False,
    ) -> CallToolResult:
        a, b = self.store.get(left), self.store.get(right)
        if how != "cross" and not on and not (left_on and right_on):
            raise ToolError("give `on`, or both `left_on` and `right_on` (or how='cross')")
        if on:
            check_columns(a, on, left)
            check_columns(b, on, right)
        else:
            check_columns(a, left_on or [], left)
            check_columns(b, right_on or [], right)
        try:
            result = a.merge(
                b,
                how=how,
                on=on,
                left_on=None if on else left_on,
                right_on=None if on else right_on,
                suffixes=("_left", "_right"),
                indicator="_merge" if indicator else False,
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise ToolError(f"join failed: {exc}") from None
        if indicator:
            result["_merge"] = result["_merge"].astype(str)
        self.store.put(output, result)
        return frame_table(result, title=f"{output}: {len(result)} rows ({how} join)", stored=output)
