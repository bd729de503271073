"""Docker engine tools through the docker SDK: images, containers, import, run, logs, exec, stop, remove, inspect.

The daemon is ``DOCKER_HOST`` (default: the local socket). Nothing is pulled from a registry: images come from the
daemon or from a rootfs tarball imported with ``docker_import``. The SDK is blocking, so every call runs in a worker
thread with a deadline.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal, TypeVar

import anyio
import docker
import docker.errors
import requests.exceptions  # noqa: TID251 - the docker SDK's own transport raises these
from mcp.server import MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.devops._util import PURE, inside_workspace, off_loop

__all__ = ["register"]

T = TypeVar("T")
DOCKER_TIMEOUT = 30.0
LABEL = "dev.hanzo-hub.devops"
Ref = Annotated[str, Field(min_length=1, max_length=300, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/@-]*$",
                           description="container or image name or id")]  # fmt: skip
CHANGE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False)
DESTROY = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)


@functools.cache
def _client(base_url: str) -> docker.DockerClient:
    return docker.DockerClient(base_url=base_url, timeout=int(DOCKER_TIMEOUT))


def client() -> docker.DockerClient:
    """A client for ``DOCKER_HOST`` (cached per address)."""
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"  # noqa: TID251 - the daemon address
    return _client(host)


@contextlib.contextmanager
def docker_errors(what: str) -> Iterator[None]:
    """Docker SDK failures as ``ToolError`` messages."""
    try:
        yield
    except docker.errors.NotFound as exc:
        raise ToolError(f"{what}: not found ({exc.explanation or exc})") from exc
    except docker.errors.ImageNotFound as exc:
        raise ToolError(f"{what}: image not found; import one with docker_import (nothing is pulled)") from exc
    except docker.errors.APIError as exc:
        raise ToolError(f"{what}: {exc.explanation or exc}") from exc
    except (docker.errors.DockerException, requests.exceptions.ConnectionError) as exc:
        raise ToolError(f"{what}: no Docker daemon answers ({exc}); is dockerd running and DOCKER_HOST set?") from exc


async def _call(what: str, fn: Callable[[docker.DockerClient], T]) -> T:
    def work() -> T:
        with docker_errors(what):
            return fn(client())

    with anyio.fail_after(DOCKER_TIMEOUT * 2):
        return await off_loop(work)


def _container_row(c: Any) -> list[Any]:
    tags = c.image.tags if c.image is not None else []
    return [c.short_id, c.name, tags[0] if tags else c.attrs.get("Image", "")[:19], c.status,
            c.attrs.get("Created", "")[:19], c.attrs.get("State", {}).get("ExitCode")]  # fmt: skip


def _run(dc: docker.DockerClient, spec: dict[str, Any], wait: bool, timeout: float, remove: bool) -> dict[str, Any]:
    container = dc.containers.create(**spec)
    container.start()
    if not wait:
        return {"id": container.short_id, "name": container.name, "status": "running"}
    timed_out = False
    try:
        status = container.wait(timeout=timeout)
        exit_code = status.get("StatusCode")
    except requests.exceptions.ConnectionError:
        timed_out, exit_code = True, None
        container.kill()
    out = container.logs(stdout=True, stderr=False).decode(errors="replace")
    err = container.logs(stdout=False, stderr=True).decode(errors="replace")
    if remove:
        container.remove(force=True)
    return {"id": container.short_id, "name": container.name, "exit_code": exit_code, "timed_out": timed_out,
            "stdout": out[-50_000:], "stderr": err[-20_000:], "removed": remove}  # fmt: skip


def register(mcp: MCPServer) -> None:  # noqa: C901 - one nested function per tool
    """Add the Docker tools to ``mcp``."""

    @mcp.tool(annotations=PURE)
    async def docker_images() -> CallToolResult:
        """Images in the local Docker daemon: id, tags, size in MB and creation time. Use it before docker_run."""

        def collect(dc: docker.DockerClient) -> list[list[Any]]:
            return [[i.short_id, i.tags, round(i.attrs.get("Size", 0) / 1e6, 2), i.attrs.get("Created", "")[:19]]
                    for i in dc.images.list()]  # fmt: skip

        return table_result(["id", "tags", "size_mb", "created"], await _call("list images", collect), title="images")

    @mcp.tool(annotations=PURE)
    async def docker_containers(
        all_states: Annotated[bool, Field(description="include stopped containers")] = True,
        status: Annotated[Literal["created", "running", "paused", "exited", "dead"] | None, Field()] = None,
    ) -> CallToolResult:
        """Containers of the local daemon: id, name, image, status, creation time and exit code."""
        filters = {"status": status} if status else None

        def collect(dc: docker.DockerClient) -> list[list[Any]]:
            return [_container_row(c) for c in dc.containers.list(all=all_states, filters=filters)]

        rows = await _call("list containers", collect)
        return table_result(["id", "name", "image", "status", "created", "exit_code"], rows, title="containers")

    @mcp.tool(annotations=CHANGE)
    async def docker_import(
        path: Annotated[str, Field(min_length=1, description="rootfs tarball (.tar) in the workspace")],
        repository: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._/-]*$", max_length=200)],
        tag: Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")] = "latest",
    ) -> CallToolResult:
        """Create an image from a root filesystem tarball in the workspace (``docker import``), for offline
        machines where nothing can be pulled. Returns the new image id and tag.
        """
        tarball = inside_workspace(path)

        def work(dc: docker.DockerClient) -> dict[str, Any]:
            dc.api.import_image_from_file(str(tarball), repository=repository, tag=tag)
            image = dc.images.get(f"{repository}:{tag}")
            return {"id": image.short_id, "tags": image.tags, "size_bytes": image.attrs.get("Size")}

        return json_result(await _call(f"import {path}", work))

    @mcp.tool(annotations=CHANGE)
    async def docker_run(
        image: Ref,
        command: Annotated[list[Annotated[str, Field(max_length=10_000)]] | None, Field(max_length=200)] = None,
        name: Annotated[str | None, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")] = None,
        env: Annotated[dict[str, str] | None, Field(description="environment variables")] = None,
        wait: Annotated[bool, Field(description="wait for it to exit and return its output")] = True,
        timeout: Annotated[float, Field(gt=0, le=600, description="seconds to wait before killing it")] = 60,
        remove: Annotated[bool, Field(description="remove the container after it exited (wait=true only)")] = False,
        network: Literal["none", "bridge", "host"] = "none",
        memory_mb: Annotated[int, Field(ge=6, le=65536)] = 512,
        cpus: Annotated[float, Field(gt=0, le=64)] = 1.0,
    ) -> CallToolResult:
        """Run a container from a local image (never pulled) with memory/CPU limits and, by default, no network.
        With wait=true returns exit code, stdout and stderr (killed at timeout); with wait=false starts it in the
        background and returns its id (then docker_logs / docker_stop).
        """
        spec = {"image": image, "command": command, "name": name, "environment": env, "network_mode": network,
                "mem_limit": f"{memory_mb}m", "nano_cpus": int(cpus * 1e9), "labels": {LABEL: "1"},
                "security_opt": ["no-new-privileges"]}  # fmt: skip
        return json_result(await _call(f"run {image}", lambda dc: _run(dc, spec, wait, timeout, remove)))

    @mcp.tool(annotations=PURE)
    async def docker_logs(
        container: Ref,
        tail: Annotated[int, Field(ge=1, le=100_000, description="last N lines")] = 200,
        timestamps: bool = False,
    ) -> CallToolResult:
        """The last lines a container wrote to stdout and stderr (like ``docker logs --tail``)."""
        logs = await _call(f"logs of {container}", lambda dc: dc.containers.get(container).logs(
            tail=tail, timestamps=timestamps).decode(errors="replace"))  # fmt: skip
        return json_result({"container": container, "logs": logs[-100_000:]}, text=logs[-100_000:] or "(no output)")

    @mcp.tool(annotations=CHANGE)
    async def docker_exec(
        container: Ref,
        command: Annotated[list[Annotated[str, Field(max_length=10_000)]], Field(min_length=1, max_length=200)],
        workdir: Annotated[str | None, Field(pattern=r"^/", max_length=500)] = None,
    ) -> CallToolResult:
        """Run a command inside a running container (``docker exec``) and return its exit code and output."""

        def work(dc: docker.DockerClient) -> dict[str, Any]:
            code, output = dc.containers.get(container).exec_run(command, workdir=workdir, demux=True)
            out, err = output
            return {"exit_code": code, "stdout": (out or b"").decode(errors="replace")[-50_000:],
                    "stderr": (err or b"").decode(errors="replace")[-20_000:]}  # fmt: skip

        return json_result(await _call(f"exec in {container}", work))

    @mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True))
    async def docker_stop(
        container: Ref,
        timeout: Annotated[int, Field(ge=0, le=300, description="seconds of SIGTERM grace before SIGKILL")] = 10,
    ) -> CallToolResult:
        """Stop a running container (SIGTERM, then SIGKILL after the grace period). Returns its final status."""

        def work(dc: docker.DockerClient) -> dict[str, Any]:
            c = dc.containers.get(container)
            c.stop(timeout=timeout)
            c.reload()
            return {"container": c.name, "status": c.status, "exit_code": c.attrs["State"]["ExitCode"]}

        return json_result(await _call(f"stop {container}", work))

    @mcp.tool(annotations=DESTROY)
    async def docker_remove(
        target: Ref,
        kind: Literal["container", "image"] = "container",
        force: Annotated[bool, Field(description="kill a running container / untag an image in use")] = False,
    ) -> CallToolResult:
        """Remove a container or an image from the local daemon."""

        def work(dc: docker.DockerClient) -> dict[str, Any]:
            if kind == "container":
                dc.containers.get(target).remove(force=force)
            else:
                dc.images.remove(target, force=force)
            return {"removed": target, "kind": kind}

        return json_result(await _call(f"remove {kind} {target}", work))

    @mcp.tool(annotations=PURE)
    async def docker_inspect(target: Ref, kind: Literal["container", "image"] = "container") -> CallToolResult:
        """Low-level details of a container (state, exit code, command, env, mounts, network, limits) or an image
        (tags, layers, entrypoint, env, size) as JSON, like ``docker inspect``.
        """

        def work(dc: docker.DockerClient) -> dict[str, Any]:
            attrs: dict[str, Any] = (dc.containers.get(target) if kind == "container" else dc.images.get(target)).attrs
            return attrs

        return json_result(await _call(f"inspect {kind} {target}", work))
