"""The `data` server: named pandas frames, DuckDB SQL, matplotlib charts (PNG) and scipy/statsmodels statistics.

Files are read and written only inside the allowed roots in ``DATA_ROOTS`` (``os.pathsep``-separated; the working
directory when unset). Frames live in memory for the life of the server process. pandas, DuckDB, matplotlib, scipy and
statsmodels are imported inside the tools, so listing the tools stays fast.
"""

from __future__ import annotations

from mcp.server import MCPServer

from servers._roots import AllowedRoots
from servers.data.frames import FrameTools
from servers.data.plots import PlotTools
from servers.data.stats import StatsTools
from servers.data.store import FrameStore
from servers.data.transform import TransformTools

ROOTS_ENV = "DATA_ROOTS"

__all__ = ["ROOTS_ENV", "build_server", "mcp"]


def build_server(roots: AllowedRoots, store: FrameStore | None = None) -> MCPServer:
    """A `data` server reading and writing files inside ``roots``, with its own frame registry."""
    frames = store or FrameStore()
    server = MCPServer(
        "data",
        title="Data analysis",
        description="Dataframes, SQL, charts and statistics over local CSV/Parquet/JSON/Excel files",
        instructions=(
            "Load a file with df_load under a name, then inspect (df_info, df_head, df_describe), transform "
            "(df_query, df_sql, df_groupby_agg, df_pivot, df_melt, df_join), chart (plot_*) or test (stats_*) it. "
            f"Files must lie inside: {roots.describe()}."
        ),
    )
    for toolset in (FrameTools(frames, roots), TransformTools(frames), PlotTools(frames), StatsTools(frames)):
        toolset.register(server)
    return server


mcp = build_server(AllowedRoots.from_env(ROOTS_ENV))
