"""Frame tools: load and save files, inspect frames, missing values and frequency tables."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers._hints import CREATES, READ_ONLY, REPLACES
from servers._roots import AllowedRoots
from servers._toolset import Toolset, tool
from servers.data.store import FrameName, FrameStore, NewFrameName, check_columns, frame_table, records

if TYPE_CHECKING:
    import pandas as pd

FileFormat = Literal["csv", "parquet", "json", "jsonl", "excel"]
SUFFIXES: dict[str, FileFormat] = {
    ".csv": "csv",
    ".tsv": "csv",
    ".txt": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".xlsx": "excel",
    ".xls": "excel",
}


def _format(path: Path, given: FileFormat | None) -> FileFormat:
    fmt = given or SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise ToolError(f"cannot tell the format of {path.name}; pass format (csv, parquet, json, jsonl, excel)")
    return fmt


def read_file(path: Path, fmt: FileFormat, *, sep: str | None, sheet: str | None, nrows: int | None) -> pd.DataFrame:
    """Read ``path`` as ``fmt``; reader errors become ToolErrors naming the file."""
    import pandas as pd

    try:
        if fmt == "csv":
            delim = sep if sep is not None else ("\t" if path.suffix.lower() == ".tsv" else None)
            return pd.read_csv(path, sep=delim, engine="python" if delim is None else "c", nrows=nrows)
        if fmt == "parquet":
            frame = pd.read_parquet(path)
        elif fmt == "json":
            frame = pd.read_json(path)
        elif fmt == "jsonl":
            frame = pd.read_json(path, lines=True, nrows=nrows)
        else:
            frame = pd.read_excel(path, sheet_name=sheet or 0)
    except (ValueError, OSError, KeyError, pd.errors.ParserError) as exc:
        raise ToolError(f"could not read {path.name} as {fmt}: {exc}") from None
    return frame.head(nrows) if nrows else frame


class FrameTools(Toolset):
    """Loading, saving and inspecting named frames."""

    def __init__(self, store: FrameStore, roots: AllowedRoots) -> None:
        self.store = store
        self.roots = roots

    @tool(
        name="df_load",
        description=(
            "Load a CSV/TSV, Parquet, JSON, JSON Lines or Excel file into a named in-memory frame (format from the "
            "extension unless given). Start here: every other df_/plot_/stats_ tool works on named frames. Returns "
            "the shape, column dtypes and the first rows."
        ),
        annotations=CREATES,
    )
    def df_load(
        self,
        path: Annotated[str, Field(description="file inside the allowed roots")],
        name: NewFrameName,
        format: Annotated[FileFormat | None, Field(description="default: from the extension")] = None,
        sep: Annotated[str | None, Field(max_length=4, description="CSV delimiter; sniffed when omitted")] = None,
        sheet: Annotated[str | None, Field(description="Excel sheet name (default: first)")] = None,
        nrows: Annotated[int | None, Field(ge=1, description="read at most this many rows")] = None,
    ) -> CallToolResult:
        real = self.roots.existing_file(path)
        frame = read_file(real, _format(real, format), sep=sep, sheet=sheet, nrows=nrows)
        self.store.put(name, frame)
        dtypes = {str(c): str(t) for c, t in frame.dtypes.items()}
        return frame_table(
            frame, title=f"{name}: {frame.shape[0]} rows x {frame.shape[1]} columns", limit=5, name=name, dtypes=dtypes
        )

    @tool(
        name="df_list",
        description="List the loaded frames with their shape, memory use and columns. Returns one row per frame.",
        annotations=READ_ONLY,
    )
    def df_list(self) -> CallToolResult:
        rows = [
            [name, f.shape[0], f.shape[1], int(f.memory_usage(deep=True).sum()), ", ".join(map(str, f.columns[:30]))]
            for name, f in self.store.items()
        ]
        return table_result(["name", "rows", "columns", "bytes", "columnNames"], rows)

    @tool(
        name="df_info",
        description=(
            "Describe a frame's structure: one row per column with dtype, non-null count, null count, number of "
            "distinct values and an example value. Use to understand a dataset before analysing it."
        ),
        annotations=READ_ONLY,
    )
    def df_info(self, name: FrameName) -> CallToolResult:
        frame = self.store.get(name)
        rows = []
        for col in frame.columns:
            series = frame[col]
            non_null = series.dropna()
            example = records(non_null.head(1).to_frame())[0][0] if len(non_null) else None
            rows.append(
                [
                    str(col),
                    str(series.dtype),
                    int(series.notna().sum()),
                    int(series.isna().sum()),
                    int(series.nunique(dropna=True)),
                    example,
                ]
            )
        return table_result(
            ["column", "dtype", "nonNull", "nulls", "distinct", "example"],
            rows,
            title=f"{name}: {frame.shape[0]} rows",
            shape=list(frame.shape),
            memoryBytes=int(frame.memory_usage(deep=True).sum()),
        )

    @tool(
        name="df_head",
        description=(
            "Show rows of a frame: the first n (head), the last n (tail) or a random sample, optionally only some "
            "columns. Use to eyeball data. Returns a table."
        ),
        annotations=READ_ONLY,
    )
    def df_head(
        self,
        name: FrameName,
        n: Annotated[int, Field(ge=1, le=1000, description="rows to show")] = 10,
        mode: Annotated[Literal["head", "tail", "sample"], Field(description="which rows")] = "head",
        columns: Annotated[list[str] | None, Field(description="only these columns")] = None,
        seed: Annotated[int, Field(ge=0, description="random seed for sample")] = 0,
    ) -> CallToolResult:
        frame = self.store.get(name)
        if columns:
            check_columns(frame, columns, name)
            frame = frame[columns]
        if mode == "head":
            part = frame.head(n)
        elif mode == "tail":
            part = frame.tail(n)
        else:
            part = frame.sample(n=min(n, len(frame)), random_state=seed)
        return frame_table(part, title=f"{name} ({mode} {n})", limit=n, shape=list(frame.shape))

    @tool(
        name="df_describe",
        description=(
            "Summary statistics per column: count, mean, std, min, percentiles, max for numbers; count, unique, top "
            "and freq for text (include='all'). Use for a quick statistical overview. Returns one row per statistic."
        ),
        annotations=READ_ONLY,
    )
    def df_describe(
        self,
        name: FrameName,
        include: Annotated[Literal["numeric", "all"], Field(description="numeric columns or all columns")] = "numeric",
        percentiles: Annotated[list[float] | None, Field(description="e.g. [0.1, 0.5, 0.9]")] = None,
    ) -> CallToolResult:
        frame = self.store.get(name)
        if percentiles and not all(0 < p < 1 for p in percentiles):
            raise ToolError("percentiles must lie strictly between 0 and 1")
        try:
            desc = frame.describe(include="all" if include == "all" else "number", percentiles=percentiles)
        except ValueError as exc:
            raise ToolError(f"cannot describe {name}: {exc}") from None
        desc = desc.reset_index(names="statistic")
        return frame_table(desc, title=f"describe {name}", limit=len(desc))

    @tool(
        name="df_value_counts",
        description=(
            "Frequency table of one column or a combination of columns (counts and shares), most frequent first. "
            "Use for categorical columns. Returns value(s), count and fraction."
        ),
        annotations=READ_ONLY,
    )
    def df_value_counts(
        self,
        name: FrameName,
        columns: Annotated[list[str], Field(min_length=1, max_length=8, description="column(s) to count")],
        top: Annotated[int, Field(ge=1, le=10_000, description="rows returned")] = 50,
        dropna: Annotated[bool, Field(description="ignore missing values")] = True,
    ) -> CallToolResult:
        frame = self.store.get(name)
        check_columns(frame, columns, name)
        counts = frame.value_counts(subset=columns, dropna=dropna)
        table = counts.rename("count").reset_index()
        table["fraction"] = (table["count"] / max(int(counts.sum()), 1)).round(6)
        return frame_table(table, title=f"value counts of {columns} in {name}", limit=top, distinct=len(table))

    @tool(
        name="df_missing_report",
        description=(
            "Report missing values per column (count and percent) and how many rows have any missing value. Use "
            "before df_fill_missing to decide how to treat gaps. Returns one row per column with gaps."
        ),
        annotations=READ_ONLY,
    )
    def df_missing_report(self, name: FrameName) -> CallToolResult:
        frame = self.store.get(name)
        nulls = frame.isna().sum()
        total = max(len(frame), 1)
        gaps = sorted(((str(c), int(v)) for c, v in nulls.items() if v), key=lambda cv: -cv[1])
        rows = [[c, v, round(100.0 * v / total, 3), str(frame[c].dtype)] for c, v in gaps]
        return table_result(
            ["column", "missing", "percent", "dtype"],
            rows,
            title=f"missing values in {name}",
            rowsWithMissing=int(frame.isna().any(axis=1).sum()),
            totalRows=len(frame),
        )

    @tool(
        name="df_fill_missing",
        description=(
            "Treat missing values: fill with a constant, the column mean/median/mode, forward/backward fill, or drop "
            "rows with gaps. Applies to the given columns (default all) and stores the result under `output` "
            "(default: replace the frame). Returns the remaining missing counts."
        ),
        annotations=REPLACES,
    )
    def df_fill_missing(
        self,
        name: FrameName,
        strategy: Annotated[
            Literal["value", "mean", "median", "mode", "ffill", "bfill", "drop"], Field(description="how to fill")
        ],
        value: Annotated[str | float | None, Field(description="the constant for strategy=value")] = None,
        columns: Annotated[list[str] | None, Field(description="columns to treat (default all)")] = None,
        output: Annotated[
            str | None,
            Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$", description="store under this name (default: replace)"),
        ] = None,
    ) -> CallToolResult:
        frame = self.store.get(name).copy()
        cols = columns or [str(c) for c in frame.columns]
        check_columns(frame, cols, name)
        if strategy == "value" and value is None:
            raise ToolError("strategy=value needs a value")
        before = int(frame[cols].isna().sum().sum())
        if strategy == "drop":
            frame = frame.dropna(subset=cols).reset_index(drop=True)
        elif strategy in ("ffill", "bfill"):
            frame[cols] = frame[cols].ffill() if strategy == "ffill" else frame[cols].bfill()
        else:
            for col in cols:
                frame[col] = _filled(frame[col], strategy, value, col)
        self.store.put(output or name, frame)
        after = int(frame[cols].isna().sum().sum())
        return json_result(
            {"frame": output or name, "missingBefore": before, "missingAfter": after, "rows": len(frame)}
        )

    @tool(
        name="df_save",
        description=(
            "Write a frame to a CSV, Parquet, JSON (records), JSON Lines or Excel file inside the allowed roots "
            "(format from the extension unless given). Returns the path, format, rows and bytes written."
        ),
        annotations=REPLACES,
    )
    def df_save(
        self,
        name: FrameName,
        path: Annotated[str, Field(description="output file inside the allowed roots")],
        format: Annotated[FileFormat | None, Field(description="default: from the extension")] = None,
        overwrite: Annotated[bool, Field(description="replace an existing file")] = False,
    ) -> CallToolResult:
        frame = self.store.get(name)
        real = self.roots.output_file(path, overwrite=overwrite)
        fmt = _format(real, format)
        try:
            if fmt == "csv":
                frame.to_csv(real, index=False)
            elif fmt == "parquet":
                frame.to_parquet(real, index=False)
            elif fmt == "json":
                frame.to_json(real, orient="records", date_format="iso", indent=1)
            elif fmt == "jsonl":
                frame.to_json(real, orient="records", lines=True, date_format="iso")
            else:
                frame.to_excel(real, index=False)
        except (ValueError, OSError, TypeError) as exc:
            raise ToolError(f"could not write {name} as {fmt}: {exc}") from None
        return json_result({"path": str(real), "format": fmt, "rows": len(frame), "bytes": real.stat().st_size})

    @tool(
        name="df_drop",
        description="Remove a named frame from memory when it is no longer needed. Returns the frames still loaded.",
        annotations=REPLACES,
    )
    def df_drop(self, name: FrameName) -> CallToolResult:
        self.store.drop(name)
        return json_result({"dropped": name, "remaining": [n for n, _ in self.store.items()]})


def _filled(series: pd.Series[Any], strategy: str, value: Any, col: str) -> pd.Series[Any]:
    import pandas as pd

    if strategy == "value":
        return series.fillna(value)
    if strategy == "mode":
        modes = series.mode(dropna=True)
        return series.fillna(modes.iloc[0]) if len(modes) else series
    if not pd.api.types.is_numeric_dtype(series):
        raise ToolError(f"column {col!r} is not numeric; {strategy} needs numbers (use mode or value)")
    return series.fillna(series.mean() if strategy == "mean" else series.median())
