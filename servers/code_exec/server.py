"""The ``code-exec`` MCP server: sandboxed execution, persistent kernels, pytest, ruff and static analysis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server import MCPServer

from servers.code_exec import exec_tools, kernels, static
from servers.code_exec.runner import Runner

__all__ = ["mcp", "pool", "runner"]

runner = Runner()
pool = kernels.KernelPool(runner)


@asynccontextmanager
async def lifespan(_: MCPServer) -> AsyncIterator[None]:
    """Stop every kernel when the server stops."""
    try:
        yield
    finally:
        await pool.aclose()


mcp = MCPServer(
    "code-exec",
    title="Code execution",
    version="0.1.0",
    description="Run Python, Node.js and Bash in the hub's sandbox; persistent Python kernels; pytest; ruff; AST.",
    instructions=(
        "All code runs inside the hub's sandbox (bubblewrap by default): no network unless the operator granted it, "
        "only a scratch folder writable, limits on time, CPU and memory. Use kernels for multi-step work."
    ),
    lifespan=lifespan,
)
exec_tools.register(mcp, runner)
kernels.register(mcp, pool)
static.register(mcp, runner)
