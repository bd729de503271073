"""Plot tools: line, bar, histogram, scatter and heatmap charts of named frames, returned as PNG image content.

matplotlib is imported on first use with the non-interactive Agg backend; every figure is closed after rendering.
"""

from __future__ import annotations

import io
import threading
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, image_result
from servers._hints import READ_ONLY
from servers._toolset import Toolset, tool
from servers.data.store import FrameName, FrameStore, check_columns, numeric_columns

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_POINTS = 200_000
Title = Annotated[str | None, Field(max_length=200, description="chart title")]
Size = Annotated[tuple[float, float], Field(description="figure width and height in inches")]
_PLOT_LOCK = threading.Lock()  # pyplot's figure manager is not thread-safe


def _figure(size: tuple[float, float]) -> Figure:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    width, height = size
    if not (1 <= width <= 30 and 1 <= height <= 30):
        raise ToolError("figure size must be between 1 and 30 inches in each direction")
    return Figure(figsize=size, dpi=100, layout="tight")


def _png(fig: Figure, caption: str, **extra: Any) -> CallToolResult:
    buf = io.BytesIO()
    with _PLOT_LOCK:
        fig.savefig(buf, format="png")
    return image_result(buf.getvalue(), caption=caption, **extra)


class PlotTools(Toolset):
    """Charts of named frames as PNG images."""

    def __init__(self, store: FrameStore) -> None:
        self.store = store

    @tool(
        name="plot_line",
        description=(
            "Draw a line chart of one or more numeric columns against an x column (e.g. a date or step), optionally "
            "with a rolling mean. Use for trends over time. Returns a PNG image."
        ),
        annotations=READ_ONLY,
    )
    def plot_line(
        self,
        name: FrameName,
        x: Annotated[str, Field(description="x-axis column")],
        y: Annotated[list[str], Field(min_length=1, max_length=12, description="numeric columns to draw")],
        rolling: Annotated[int | None, Field(ge=2, le=10_000, description="rolling-mean window")] = None,
        title: Title = None,
        size: Size = (8.0, 4.5),
    ) -> CallToolResult:
        frame = self.store.get(name)
        check_columns(frame, [x], name)
        values = numeric_columns(frame, y, name)
        fig = _figure(size)
        ax = fig.subplots()
        order = frame[x].argsort(kind="stable")
        xs = frame[x].iloc[order]
        for col in y:
            series = values[col].iloc[order]
            ax.plot(xs, series.rolling(rolling).mean() if rolling else series, label=col)
        ax.set_xlabel(x)
        ax.set_title(title or f"{', '.join(y)} by {x}")
        ax.legend()
        ax.grid(alpha=0.3)
        return _png(fig, f"line chart of {y} against {x} ({len(frame)} points)")

    @tool(
        name="plot_bar",
        description=(
            "Draw a bar chart: the values of a numeric column per category, aggregated (sum, mean, count...) when a "
            "category repeats; horizontal or vertical, top N. Use to compare groups. Returns a PNG image."
        ),
        annotations=READ_ONLY,
    )
    def plot_bar(
        self,
        name: FrameName,
        category: Annotated[str, Field(description="column with the bar labels")],
        value: Annotated[str | None, Field(description="numeric column (default: count rows)")] = None,
        agg: Annotated[
            Literal["sum", "mean", "median", "max", "min", "count"], Field(description="aggregation per category")
        ] = "sum",
        top: Annotated[int, Field(ge=1, le=200, description="largest N bars")] = 20,
        horizontal: Annotated[bool, Field(description="horizontal bars")] = False,
        title: Title = None,
        size: Size = (8.0, 4.5),
    ) -> CallToolResult:
        frame = self.store.get(name)
        check_columns(frame, [category], name)
        if value:
            numeric_columns(frame, [value], name)
            totals = frame.groupby(category)[value].agg(agg)
        else:
            totals = frame.groupby(category).size()
        totals = totals.sort_values(ascending=False).head(top)
        fig = _figure(size)
        ax = fig.subplots()
        labels = [str(i) for i in totals.index]
        if horizontal:
            ax.barh(labels[::-1], totals.to_numpy()[::-1])
        else:
            ax.bar(labels, totals.to_numpy())
            ax.tick_params(axis="x", labelrotation=45)
        ax.set_title(title or f"{agg if value else 'count'} of {value or 'rows'} by {category}")
        data = {str(k): float(v) for k, v in totals.items()}
        return _png(fig, f"bar chart of {len(totals)} categories", bars=data)

    @tool(
        name="plot_histogram",
        description=(
            "Draw a histogram of a numeric column (bins configurable), optionally one overlaid histogram per group, "
            "with the mean marked. Use to see a distribution's shape. Returns a PNG image and the bin counts."
        ),
        annotations=READ_ONLY,
    )
    def plot_histogram(
        self,
        name: FrameName,
        column: Annotated[str, Field(description="numeric column")],
        bins: Annotated[int, Field(ge=2, le=500, description="number of bins")] = 30,
        group_by: Annotated[str | None, Field(description="overlay one histogram per value of this column")] = None,
        title: Title = None,
        size: Size = (8.0, 4.5),
    ) -> CallToolResult:
        import numpy as np

        frame = self.store.get(name)
        series = numeric_columns(frame, [column], name)[column].dropna()
        if series.empty:
            raise ToolError(f"column {column!r} has no values")
        fig = _figure(size)
        ax = fig.subplots()
        counts, edges = np.histogram(series, bins=bins)
        if group_by:
            check_columns(frame, [group_by], name)
            for key, part in frame.dropna(subset=[column]).groupby(group_by):
                ax.hist(part[column], bins=edges.tolist(), alpha=0.5, label=str(key))
            ax.legend(title=group_by)
        else:
            ax.hist(series, bins=edges.tolist())
        ax.axvline(float(series.mean()), color="black", linestyle="--", linewidth=1)
        ax.set_xlabel(column)
        ax.set_title(title or f"distribution of {column}")
        return _png(fig, f"histogram of {column}", counts=counts.tolist(), edges=[float(e) for e in edges])

    @tool(
        name="plot_scatter",
        description=(
            "Draw a scatter plot of two numeric columns, optionally coloured by a category and with a least-squares "
            "trend line (slope, intercept and r returned). Use to look for relationships. Returns a PNG image."
        ),
        annotations=READ_ONLY,
    )
    def plot_scatter(
        self,
        name: FrameName,
        x: Annotated[str, Field(description="numeric x column")],
        y: Annotated[str, Field(description="numeric y column")],
        color_by: Annotated[str | None, Field(description="category column for colours")] = None,
        trend_line: Annotated[bool, Field(description="add a least-squares line")] = False,
        title: Title = None,
        size: Size = (7.0, 5.0),
    ) -> CallToolResult:
        import numpy as np

        frame = self.store.get(name)
        pair = numeric_columns(frame, [x, y], name)
        keep = pair.dropna().index[:MAX_POINTS]
        fig = _figure(size)
        ax = fig.subplots()
        if color_by:
            check_columns(frame, [color_by], name)
            for key, part in frame.loc[keep].groupby(color_by):
                ax.scatter(part[x], part[y], s=12, label=str(key))
            ax.legend(title=color_by)
        else:
            ax.scatter(pair.loc[keep, x], pair.loc[keep, y], s=12)
        extra: dict[str, Any] = {"points": len(keep)}
        if trend_line:
            if len(keep) < 2:
                raise ToolError("a trend line needs at least two complete points")
            xs, ys = pair.loc[keep, x].to_numpy(float), pair.loc[keep, y].to_numpy(float)
            slope, intercept = np.polyfit(xs, ys, 1)
            grid = np.linspace(xs.min(), xs.max(), 50)
            ax.plot(grid, slope * grid + intercept, color="red")
            extra |= {"slope": float(slope), "intercept": float(intercept), "r": float(np.corrcoef(xs, ys)[0, 1])}
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.set_title(title or f"{y} vs {x}")
        return _png(fig, f"scatter of {y} against {x}", **extra)

    @tool(
        name="plot_heatmap",
        description=(
            "Draw a heatmap with annotated cells: the correlation matrix of numeric columns (mode=correlation) or a "
            "pivot of a value over two category columns (mode=pivot). Use to spot patterns across two dimensions. "
            "Returns a PNG image and the matrix."
        ),
        annotations=READ_ONLY,
    )
    def plot_heatmap(
        self,
        name: FrameName,
        mode: Annotated[Literal["correlation", "pivot"], Field(description="what to draw")] = "correlation",
        columns: Annotated[list[str] | None, Field(description="numeric columns (correlation mode)")] = None,
        rows: Annotated[str | None, Field(description="row category (pivot mode)")] = None,
        cols: Annotated[str | None, Field(description="column category (pivot mode)")] = None,
        value: Annotated[str | None, Field(description="numeric value, averaged per cell (pivot mode)")] = None,
        title: Title = None,
        size: Size = (7.0, 6.0),
    ) -> CallToolResult:
        frame = self.store.get(name)
        if mode == "correlation":
            matrix = numeric_columns(frame, columns, name).corr()
        else:
            if not (rows and cols and value):
                raise ToolError("pivot mode needs rows, cols and value")
            check_columns(frame, [rows, cols], name)
            numeric_columns(frame, [value], name)
            matrix = frame.pivot_table(index=rows, columns=cols, values=value, aggfunc="mean")
        if matrix.shape[0] > 60 or matrix.shape[1] > 60:
            raise ToolError(f"matrix is {matrix.shape[0]}x{matrix.shape[1]}; at most 60x60 can be drawn")
        fig = _figure(size)
        ax = fig.subplots()
        image = ax.imshow(matrix.to_numpy(float), cmap="coolwarm" if mode == "correlation" else "viridis")
        fig.colorbar(image, ax=ax)
        ax.set_xticks(range(matrix.shape[1]), [str(c) for c in matrix.columns], rotation=45, ha="right")
        ax.set_yticks(range(matrix.shape[0]), [str(i) for i in matrix.index])
        if matrix.size <= 400:
            for (i, j), v in _cells(matrix):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8)
        ax.set_title(title or (f"correlation of {name}" if mode == "correlation" else f"mean {value}"))
        cells = {str(r): {str(c): _num(v) for c, v in row.items()} for r, row in matrix.iterrows()}
        return _png(fig, f"heatmap {matrix.shape[0]}x{matrix.shape[1]}", matrix=cells)


def _cells(matrix: Any) -> list[tuple[tuple[int, int], float]]:
    values = matrix.to_numpy(float)
    return [((i, j), float(values[i, j])) for i in range(values.shape[0]) for j in range(values.shape[1])]


def _num(value: Any) -> float | None:
    number = float(value)
    return None if number != number else round(number, 6)
