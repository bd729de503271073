"""Persistent Python kernels (jupyter_client + ipykernel) started inside the sandbox.

Each kernel is ``ipykernel_launcher`` wrapped by ``Sandbox.wrap()`` (memory/pid limits, the operator's network grant,
only its own folder writable). The kernel talks ZeroMQ over **IPC sockets** in that folder, so it needs no network
at all: the sockets are files the server and the sandboxed kernel both see.
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import anyio
import anyio.to_thread
from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from mcp.server import MCPServer
from mcp_types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import Field

from hanzo_hub.errors import SandboxError
from hanzo_hub.sandbox import Grants, LaunchPlan
from servers._common import ToolError, json_result, table_result
from servers.code_exec.runner import MAX_OUTPUT_CHARS, Runner

__all__ = ["KernelPool", "register"]

START_TIMEOUT = 60.0
SHUTDOWN_TIMEOUT = 5.0
ANSI = re.compile(r"\x1b\[[0-9;]*m")
KernelId = Annotated[str, Field(pattern=r"^k-[0-9a-f]{8}$", description="id returned by kernel_start")]


@dataclass
class Kernel:
    """One running kernel and what is needed to stop it."""

    id: str
    name: str
    manager: AsyncKernelManager
    client: Any
    plan: LaunchPlan
    folder: Path
    started: float = field(default_factory=time.time)
    executions: int = 0


@dataclass
class KernelPool:
    """The kernels of this server process; ``aclose()`` stops them all."""

    runner: Runner
    kernels: dict[str, Kernel] = field(default_factory=dict)

    async def start(self, name: str, memory_mb: int) -> Kernel:
        """Start a sandboxed kernel and wait until it answers."""
        if len(self.kernels) >= self.runner.settings.max_kernels:
            raise ToolError(f"already {len(self.kernels)} kernels running; shut one down with kernel_shutdown")
        backend = await self.runner.sandbox()
        folder = Path(tempfile.mkdtemp(prefix="kern-"))
        limits = self.runner.limits(self.runner.settings.max_seconds, memory_mb).with_(wall_seconds=None)
        argv = [sys.executable, "-I", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        try:
            plan = backend.wrap(argv, {"MPLBACKEND": "agg"}, str(folder), limits, Grants(writable=(folder,)))
        except SandboxError as exc:
            shutil.rmtree(folder, ignore_errors=True)
            raise ToolError(f"cannot prepare the kernel sandbox: {exc}") from exc
        manager = AsyncKernelManager(transport="ipc", ip=str(folder / "zmq"), connection_file=str(folder / "conn.json"))
        manager._kernel_spec = KernelSpec(
            argv=plan.argv, env=plan.env, display_name=name, language="python", interrupt_mode="message"
        )
        kernel = Kernel(f"k-{secrets.token_hex(4)}", name, manager, None, plan, folder)
        try:
            with anyio.fail_after(START_TIMEOUT):
                await manager.start_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=plan.cwd)
                kernel.client = manager.client()
                kernel.client.start_channels()
                await kernel.client.wait_for_ready(timeout=START_TIMEOUT)
        except (TimeoutError, RuntimeError, OSError) as exc:
            await self._stop(kernel)
            raise ToolError(
                f"the kernel did not start: {exc or 'timed out'} (sandbox_info checks the sandbox)"
            ) from exc
        self.kernels[kernel.id] = kernel
        return kernel

    def get(self, kernel_id: str) -> Kernel:
        """The kernel ``kernel_id``."""
        kernel = self.kernels.get(kernel_id)
        if kernel is None:
            raise ToolError(f"no kernel {kernel_id!r}; running: {sorted(self.kernels) or 'none'} (kernel_start)")
        return kernel

    async def shutdown(self, kernel_id: str) -> Kernel:
        """Stop one kernel."""
        kernel = self.get(kernel_id)
        del self.kernels[kernel_id]
        await self._stop(kernel)
        return kernel

    async def _stop(self, kernel: Kernel) -> None:
        with anyio.CancelScope(shield=True):
            if kernel.client is not None:
                kernel.client.stop_channels()
            with anyio.move_on_after(SHUTDOWN_TIMEOUT) as scope:
                await kernel.manager.shutdown_kernel(now=False)
            if scope.cancelled_caught:
                with anyio.move_on_after(SHUTDOWN_TIMEOUT):
                    await kernel.manager.shutdown_kernel(now=True)
            await kernel.plan.aclose()
            await anyio.to_thread.run_sync(shutil.rmtree, kernel.folder, True)

    async def aclose(self) -> None:
        """Stop every kernel."""
        for kernel_id in list(self.kernels):
            await self.shutdown(kernel_id)


def _outputs(messages: list[dict[str, Any]]) -> tuple[dict[str, Any], list[ImageContent]]:
    stdout: list[str] = []
    stderr: list[str] = []
    results: list[str] = []
    images: list[ImageContent] = []
    error = None
    for msg in messages:
        kind, content = msg["header"]["msg_type"], msg["content"]
        if kind == "stream":
            (stdout if content["name"] == "stdout" else stderr).append(content["text"])
        elif kind in ("execute_result", "display_data"):
            data = content.get("data", {})
            if "image/png" in data:
                images.append(ImageContent(type="image", data=data["image/png"].strip(), mime_type="image/png"))
            if "text/plain" in data and (kind == "execute_result" or "image/png" not in data):
                results.append(data["text/plain"])
        elif kind == "error":
            error = {"name": content["ename"], "value": content["evalue"],
                     "traceback": ANSI.sub("", "\n".join(content["traceback"]))[-5000:]}  # fmt: skip
    body = {"stdout": "".join(stdout)[:MAX_OUTPUT_CHARS], "stderr": "".join(stderr)[:MAX_OUTPUT_CHARS],
            "results": results, "error": error, "images": len(images)}  # fmt: skip
    return body, images


def register(mcp: MCPServer, pool: KernelPool) -> None:
    """Add the kernel tools to ``mcp``."""
    write = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False)

    @mcp.tool(annotations=write)
    async def kernel_start(
        name: Annotated[str, Field(min_length=1, max_length=60, description="label for the kernel")] = "python",
        memory_mb: Annotated[int, Field(ge=64, le=65536, description="memory limit (capped by the operator)")] = 1024,
    ) -> CallToolResult:
        """Start a persistent IPython kernel in the sandbox, for step-by-step work where variables, imports and
        loaded data stay between calls (kernel_execute). Returns its id. Kernels hold memory: shut them down after.
        """
        kernel = await pool.start(name, memory_mb)
        return json_result({"kernel_id": kernel.id, "name": kernel.name, "network": pool.runner.settings.network})

    @mcp.tool(annotations=write)
    async def kernel_execute(
        kernel_id: KernelId,
        code: Annotated[str, Field(min_length=1, max_length=200_000, description="Python/IPython cell")],
        timeout: Annotated[float, Field(gt=0, le=600, description="seconds before the cell is interrupted")] = 30,
    ) -> CallToolResult:
        """Run a cell in a kernel and return its stdout, stderr, the value of the last expression, an error with
        traceback if it raised, and any PNG images it displayed (matplotlib figures, IPython.display.Image) as image
        content. A cell still running at ``timeout`` is interrupted (the kernel and its state survive).
        """
        kernel = pool.get(kernel_id)
        messages: list[dict[str, Any]] = []
        timed_out = False
        try:
            # stop_on_error=False: a cell interrupted at its timeout must not abort the next cell queued behind it
            reply = await kernel.client.execute_interactive(
                code, output_hook=messages.append, timeout=timeout, stop_on_error=False
            )
            status = reply["content"]["status"]
        except TimeoutError:
            timed_out, status = True, "timeout"
            await kernel.manager.interrupt_kernel()
        kernel.executions += 1
        body, images = _outputs(messages)
        body.update(kernel_id=kernel_id, status=status, timed_out=timed_out, execution=kernel.executions)
        summary = body["stdout"] + "".join(f"\n{r}" for r in body["results"])
        if body["error"]:
            summary += f"\n{body['error']['name']}: {body['error']['value']}"
        if timed_out:
            summary += f"\n[interrupted after {timeout} s]"
        content: list[TextContent | ImageContent] = [TextContent(type="text", text=summary.strip() or status), *images]
        return CallToolResult(content=content, structured_content=body)

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True))
    async def kernel_list() -> CallToolResult:
        """The running kernels: id, name, start time, cells executed and whether the process is alive."""
        rows = [[k.id, k.name, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(k.started)), k.executions,
                 await k.manager.is_alive()] for k in pool.kernels.values()]  # fmt: skip
        return table_result(["kernel_id", "name", "started", "executions", "alive"], rows, title="kernels")

    @mcp.tool(annotations=write)
    async def kernel_interrupt(kernel_id: KernelId) -> CallToolResult:
        """Interrupt the cell a kernel is running (like Ctrl-C: raises KeyboardInterrupt in it); variables survive."""
        kernel = pool.get(kernel_id)
        await kernel.manager.interrupt_kernel()
        return json_result({"kernel_id": kernel_id, "interrupted": True})

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False))
    async def kernel_shutdown(kernel_id: KernelId) -> CallToolResult:
        """Stop a kernel and free its memory; its variables are lost."""
        kernel = await pool.shutdown(kernel_id)
        return json_result({"kernel_id": kernel_id, "executions": kernel.executions, "stopped": True})
