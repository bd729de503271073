"""Many live servers: how ``hanzo-hub serve`` behaves with 1 to 100 downstream stdio servers that all start.

Each server is the fixture ``python -m tests.fixtures.downstream ok sN`` (11 tools), with no snapshot, so the hub
discovers every one at start (``backends.start_concurrency`` at a time). The hub runs as a real subprocess over
stdio, driven by the SDK client. For each N and each running cap (``backends.max_running``: the default 32, and N
so that all stay up), in one run:

- ``discovery``: spawn -> ``tools/list`` holding all N x 11 tools;
- ``sequential``: 200 calls one after another, round robin over the servers still running, p50/p95, then 200 to one
  of them only (the hub's routing cost as N grows, apart from waking a different server process each call); the
  ratios are against N = 1, measured in the same run;
- ``burst``: 4 calls to every server at once; wall time, p50/p95, and server starts during the burst (from the
  hub's status resource): above the cap, servers stopped after discovery must start again, at most once each;
- memory: the hub process's RSS (its servers excluded) and the servers' total.

Results: ``bench/results/many_servers.{json,md}``. ``.venv/bin/python bench/many_servers.py [--sizes 1,10,50,100]``
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import psutil
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench._common import (
    PYTHON,
    REPO,
    find_descendant,
    fixture_server,
    hub_args,
    machine_info,
    machine_line,
    md_table,
    ratio,
    summarize_ns,
    write_config,
    write_results,
)

TOOLS_PER_SERVER = 11
SEQUENTIAL_CALLS = 200
BURST_PER_SERVER = 4
STATUS_URI = "hub://_hub/servers"
DEFAULT_CAP = 32


def _memory() -> dict[str, float]:
    pid = find_descendant("hanzo_hub")
    if pid is None:
        return {}
    hub = psutil.Process(pid)
    servers = 0.0
    for child in hub.children(recursive=True):
        try:
            servers += child.memory_info().rss
        except psutil.Error:
            continue
    return {"hub_rss_mb": round(hub.memory_info().rss / 2**20, 1), "servers_rss_mb": round(servers / 2**20, 1)}


async def _starts(client: Client) -> tuple[int, list[str]]:
    """(starts so far over all servers, the servers running now), from the hub's status resource."""
    result = await client.read_resource(STATUS_URI)
    (content,) = result.contents
    assert isinstance(content, types.TextResourceContents)
    servers: dict[str, Any] = json.loads(content.text)["servers"]
    running = sorted(name for name, s in servers.items() if s["state"] == "running")
    return sum(s["starts"] for s in servers.values()), running


async def _call(client: Client, server: str, samples: list[int], errors: list[str] | None = None) -> None:
    """One call; its time goes to ``samples``. A failure raises, or is recorded in ``errors`` (the burst's)."""
    start = time.perf_counter_ns()
    result = await client.call_tool(f"{server}__echo", {"text": "x"})
    samples.append(time.perf_counter_ns() - start)
    if result.is_error:
        text = " ".join(getattr(block, "text", "") for block in result.content)
        if errors is None:
            raise RuntimeError(f"{server}: {text}")
        errors.append(text)


async def run_one(n: int, cap: int, work: Path) -> dict[str, Any]:
    home = work / f"home-{n}-{cap}"
    servers = {f"s{i}": fixture_server(f"s{i}") for i in range(n)}
    backends = {"max_running": cap, "list_wait": 600, "idle_timeout": 3600}
    config = write_config(
        work / f"config-{n}-{cap}.json",
        servers,
        backends=backends,
        memory={"enabled": False},
        exposure={"prefix": True, "mode": "all"},  # it measures listing every tool
    )
    params = StdioServerParameters(command=PYTHON, args=hub_args(config, home), cwd=str(REPO))
    want = n * TOOLS_PER_SERVER
    spawned = time.perf_counter()
    async with Client(params, mode="legacy") as client:
        while True:
            tools = [t for t in (await client.list_tools()).tools if t.name.startswith("s")]
            if len(tools) >= want:
                break
            await anyio.sleep(0.1)
        discovery = time.perf_counter() - spawned
        memory = _memory()
        _, running = await _starts(client)
        live = running or ["s0"]
        sequential: list[int] = []
        for index in range(SEQUENTIAL_CALLS):
            await _call(client, live[index % len(live)], sequential)
        one: list[int] = []
        for _ in range(SEQUENTIAL_CALLS):
            await _call(client, live[0], one)
        before, _ = await _starts(client)
        burst: list[int] = []
        errors: list[str] = []
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for index in range(n * BURST_PER_SERVER):
                tg.start_soon(_call, client, f"s{index % n}", burst, errors)
        wall = time.perf_counter() - started
        after, _ = await _starts(client)
    return {
        "servers": n,
        "cap": cap,
        "discovery_s": round(discovery, 2),
        "running_after_discovery": len(running),
        "sequential": summarize_ns(sequential),
        "sequential_one_server": summarize_ns(one),
        "burst": {
            **summarize_ns(burst),
            "wall_s": round(wall, 2),
            "starts": after - before,
            "errors": len(errors),
            "first_errors": sorted(set(errors))[:3],
        },
        **memory,
    }


def report(runs: list[dict[str, Any]], info: dict[str, Any]) -> str:
    base = next((r["sequential_one_server"]["p50_ms"] for r in runs if r["servers"] == 1), float("nan"))
    rows = [
        [
            r["servers"],
            r["cap"],
            r["discovery_s"],
            r["running_after_discovery"],
            r["sequential"]["p50_ms"],
            r["sequential"]["p95_ms"],
            ratio(r["sequential"]["p50_ms"], base),
            r["sequential_one_server"]["p50_ms"],
            ratio(r["sequential_one_server"]["p50_ms"], base),
            r["burst"]["n"],
            r["burst"]["wall_s"],
            r["burst"]["p50_ms"],
            r["burst"]["p95_ms"],
            r["burst"]["starts"],
            r["burst"].get("errors", 0),
            r.get("hub_rss_mb", "-"),
            r.get("servers_rss_mb", "-"),
        ]
        for r in runs
    ]
    headers = [
        "servers",
        "cap",
        "discovery s",
        "running",
        "seq p50 ms",
        "seq p95 ms",
        "seq p50 vs 1 server",
        "one-server p50 ms",
        "one-server p50 vs 1 server",
        "burst calls",
        "burst wall s",
        "burst p50 ms",
        "burst p95 ms",
        "starts in burst",
        "burst errors",
        "hub RSS MB",
        "servers RSS MB",
    ]
    return (
        "# many_servers\n\n"
        + machine_line(info)
        + f"\nFixture servers ({TOOLS_PER_SERVER} tools each), no snapshots; the hub over stdio as a subprocess. "
        f"Sequential: {SEQUENTIAL_CALLS} calls round robin over the running servers, then as many to one of them; "
        f"ratios against the one-server run. Burst: {BURST_PER_SERVER} calls to every server at once; "
        "above the cap, the servers not running must start (at least servers - running starts).\n\n"
        + md_table(headers, rows)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,50,100", help="comma-separated server counts")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    info = machine_info()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="many-servers-") as tmp:
        for n in sizes:
            for cap in [DEFAULT_CAP] if n <= DEFAULT_CAP else [DEFAULT_CAP, n]:
                result = anyio.run(run_one, n, cap, Path(tmp))
                print(json.dumps(result), flush=True)
                runs.append(result)
    data = {"machine": info, "runs": runs}
    json_path, md_path = write_results("many_servers", data, report(runs, info))
    print(f"wrote {json_path} and {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
