"""The named-frame registry of one `data` server, and the conversions every data tool shares.

Frames live in memory under a name (a SQL identifier, so DuckDB can query them by name). The store is guarded by a
lock because the SDK runs synchronous tools on worker threads. pandas is imported lazily: the server lists its tools
without paying for it.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from servers._common import ToolError, table_result

if TYPE_CHECKING:
    import pandas as pd
    from mcp_types import CallToolResult

NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
FrameName = Annotated[str, Field(pattern=NAME_PATTERN, description="name of a loaded frame (letters, digits, _)")]
NewFrameName = Annotated[str, Field(pattern=NAME_PATTERN, description="name to store the result under")]
MAX_FRAMES = 64
MAX_CELLS = 50_000_000
PREVIEW_ROWS = 20


class FrameStore:
    """Named pandas DataFrames, thread-safe, bounded in count and size."""

    def __init__(self) -> None:
        self._frames: dict[str, pd.DataFrame] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> pd.DataFrame:
        with self._lock:
            frame = self._frames.get(name)
            known = sorted(self._frames)
        if frame is None:
            raise ToolError(f"no frame named {name!r}; loaded frames: {', '.join(known) or 'none (use df_load)'}")
        return frame

    def put(self, name: str, frame: pd.DataFrame) -> None:
        if frame.size > MAX_CELLS:
            raise ToolError(f"result has {frame.size} cells, more than the {MAX_CELLS} a frame may hold")
        with self._lock:
            if name not in self._frames and len(self._frames) >= MAX_FRAMES:
                raise ToolError(f"{MAX_FRAMES} frames are loaded; drop one with df_drop first")
            self._frames[name] = frame

    def drop(self, name: str) -> None:
        with self._lock:
            if self._frames.pop(name, None) is None:
                raise ToolError(f"no frame named {name!r}")

    def items(self) -> list[tuple[str, pd.DataFrame]]:
        with self._lock:
            return sorted(self._frames.items())

    def column(self, name: str, column: str) -> pd.Series[Any]:
        frame = self.get(name)
        check_columns(frame, [column], name)
        return frame[column]


def check_columns(frame: pd.DataFrame, columns: list[str], name: str = "frame") -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ToolError(
            f"{name} has no column {', '.join(map(repr, missing))}; columns: {list(map(str, frame.columns))}"
        )


def numeric_columns(frame: pd.DataFrame, columns: list[str] | None, name: str) -> pd.DataFrame:
    """``columns`` of ``frame`` (all numeric ones when None), each checked to be numeric."""
    import pandas as pd

    if columns:
        check_columns(frame, columns, name)
        picked = frame[columns]
        bad = [c for c in columns if not pd.api.types.is_numeric_dtype(picked[c])]
        if bad:
            raise ToolError(f"columns {bad} of {name} are not numeric")
        return picked
    picked = frame.select_dtypes("number")
    if picked.shape[1] == 0:
        raise ToolError(f"{name} has no numeric columns")
    return picked


def records(frame: pd.DataFrame) -> list[list[Any]]:
    """Rows as JSON-safe lists (NaN → null, timestamps → ISO strings)."""
    payload = json.loads(frame.to_json(orient="split", index=False, date_format="iso", default_handler=str))
    return list(payload["data"])


def frame_table(
    frame: pd.DataFrame,
    *,
    title: str = "",
    limit: int = PREVIEW_ROWS,
    shape: list[int] | None = None,
    **extra: Any,
) -> CallToolResult:
    """A table result of the first ``limit`` rows, with the full shape (or ``shape``) in the structured content."""
    shown = frame.head(limit)
    return table_result(
        [str(c) for c in shown.columns],
        records(shown),
        title=title,
        shape=shape or list(frame.shape),
        truncated=len(frame) > limit,
        **extra,
    )


def flat_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Join MultiIndex column levels with '_' and turn the index into columns (results of groupby/pivot)."""
    import pandas as pd

    out = frame.copy()
    if isinstance(out.columns, pd.MultiIndex):
        out.columns = ["_".join(str(p) for p in parts if str(p)) for parts in out.columns]
    else:
        out.columns = [str(c) for c in out.columns]
    if not isinstance(out.index, pd.RangeIndex) or out.index.name is not None:
        out = out.reset_index()
    return out
