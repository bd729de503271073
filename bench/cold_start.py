"""Cold start: process spawn -> ``initialize`` -> answered ``tools/list`` through ``python -m hanzo_hub serve``.

A generated home holds snapshots of 300 servers with 3,000 tools in total: real tool definitions (name,
description, JSON-Schema ``inputSchema``) from the LiveMCPBench catalog in ``/work/shared/benchmarks`` (Apache-2.0),
ten per server, cycled; synthetic ones when the catalog is absent. Their commands do not exist: nothing may start,
and the benchmark checks that no server was launched (no stderr log appears under ``<home>/logs``).

Variants, each spawned fresh ``--runs`` times, interleaved, timed by the client from just before spawn:

- ``python -c pass``: the interpreter alone (spawn -> exit);
- ``fixture``: the bare MCP server ``python -m tests.fixtures.downstream``, the floor of interpreter + ``import mcp``;
- ``hub-empty``: the hub with no servers (the hub's own imports and set-up);
- ``hub-300``: the hub with the 300 snapshot servers (target: under 1.5 s);
- ``hub-300/sdk-auto`` and ``fixture/sdk-auto``: the same through the SDK ``Client(mode="auto")`` (probe, fallback,
  and parsing the 3,000 tools on the client side), as a real client sees it.

The raw variants use a pipe client that writes JSON-RPC lines (``initialize``, ``notifications/initialized``,
``tools/list``) so the client costs nothing measurable. Then the profile: ``python -X importtime`` of the hub
(top imports), and the hub's start-up steps in-process (settings, snapshot loading, ``tools/list`` serialization)
timed separately and under cProfile.

``.venv/bin/python bench/cold_start.py [--quick] [--runs N]``
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters, stdio_client
from mcp_types import methods as mcp_methods

from _common import (
    FIXTURE,
    PYTHON,
    REPO,
    LoadMeter,
    RawStdio,
    hub_args,
    machine_info,
    machine_line,
    md_table,
    percentile,
    ratio,
    write_config,
    write_results,
)
from hanzo_hub.backends.listing import Listing
from hanzo_hub.backends.snapshot import SnapshotStore
from hanzo_hub.config import MemorySettings, load_settings
from hanzo_hub.hub.core import Hub

NAME = "cold_start"
TARGET_S = 1.5
CATALOG = Path("/work/shared/benchmarks/tool-selection/livemcpbench/tool_catalog.jsonl")


# -- the generated home -------------------------------------------------------------------------------------------


def _catalog() -> tuple[list[dict[str, Any]], str]:
    if CATALOG.is_file():
        rows = [json.loads(line) for line in CATALOG.read_text(encoding="utf-8").splitlines() if line.strip()]
        return rows, f"LiveMCPBench tool_catalog.jsonl ({len(rows)} real tools)"
    rows = []
    for i in range(500):
        props = {
            f"param_{j}": {
                "type": ["string", "integer", "boolean"][j % 3],
                "description": f"Parameter {j} of tool {i}.",
            }
            for j in range(1 + i % 6)
        }
        schema = {"type": "object", "properties": props, "required": sorted(props)[:1]}
        rows.append(
            {"server": f"synthetic-{i // 10}", "name": f"tool_{i}", "description": f"Tool {i}.", "inputSchema": schema}
        )
    return rows, "synthetic tools (catalog not found)"


def generate_home(root: Path, servers: int, per_server: int) -> dict[str, Any]:
    """Write ``root/config.json`` and one snapshot per server; returns what was generated."""
    catalog, source = _catalog()
    store = SnapshotStore(root / "snapshots")
    entries: dict[str, Any] = {}
    total = 0
    schema_bytes = 0
    for i in range(servers):
        first = catalog[(i * per_server) % len(catalog)]
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", first["server"]).strip("-") + f"-{i:03d}"
        tools: list[types.Tool] = []
        seen: set[str] = set()
        k = 0
        while len(tools) < per_server:
            row = catalog[(i * per_server + k) % len(catalog)]
            k += 1
            tool_name = row["name"] if row["name"] not in seen else f"{row['name']}_{k}"
            seen.add(tool_name)
            schema = row.get("inputSchema") or {"type": "object"}
            schema_bytes += len(json.dumps(schema))
            tools.append(types.Tool(name=tool_name, description=row.get("description") or "", input_schema=schema))
        listing = Listing(
            tools=tuple(tools),
            server_info={"name": first["server"], "version": "1.0.0"},
            capabilities={"tools": {"listChanged": True}},
            source="live",
        )
        store.save(name, listing)
        total += len(tools)
        entries[name] = {"command": f"/nonexistent/bench/{name}", "args": ["--stdio"], "env": {"API_TOKEN": "unused"}}
    write_config(root / "config.json", entries, exposure={"mode": "all"})  # it measures listing every tool
    snap_bytes = sum(p.stat().st_size for p in (root / "snapshots").glob("*.json"))
    return {
        "servers": servers,
        "tools": total,
        "tool_source": source,
        "snapshot_bytes": snap_bytes,
        "input_schema_bytes": schema_bytes,
    }


# -- timing one start ---------------------------------------------------------------------------------------------


MEMORY_TOOLS = 7 if MemorySettings().enabled else 0
"""The hub's own memory server (on by default) lists its tools beside the configured ones."""


def start_raw(argv: list[str], expect_tools: int | None) -> dict[str, float]:
    """Spawn, ``initialize``, ``tools/list`` over a raw pipe; seconds from spawn to each answer."""
    raw = RawStdio(argv)
    try:
        init_id = raw.send(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
        )
        assert init_id is not None
        raw.receive(init_id)
        t_init = time.perf_counter_ns()
        raw.send("notifications/initialized", notify=True)
        reply = raw.request("tools/list")
        t_list = time.perf_counter_ns()
    finally:
        raw.close(wait=30)
    tools = reply.get("result", {}).get("tools", [])
    if expect_tools is not None and len(tools) != expect_tools:
        raise RuntimeError(f"expected {expect_tools} tools, got {len(tools)}: {str(reply)[:300]}")
    return {"initialize_s": (t_init - raw.spawned_ns) / 1e9, "tools_list_s": (t_list - raw.spawned_ns) / 1e9}


def start_exit(argv: list[str]) -> dict[str, float]:
    t0 = time.perf_counter_ns()
    subprocess.run(argv, cwd=REPO, check=True)
    return {"tools_list_s": (time.perf_counter_ns() - t0) / 1e9}


async def _start_sdk(argv: list[str], expect_tools: int | None, devnull: Any) -> dict[str, float]:
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO))
    t0 = time.perf_counter_ns()
    async with Client(stdio_client(params, errlog=devnull), mode="auto") as client:
        t_init = time.perf_counter_ns()
        result = await client.list_tools()
        t_list = time.perf_counter_ns()
    if expect_tools is not None and len(result.tools) != expect_tools:
        raise RuntimeError(f"expected {expect_tools} tools, got {len(result.tools)}")
    return {"initialize_s": (t_init - t0) / 1e9, "tools_list_s": (t_list - t0) / 1e9}


def start_sdk(argv: list[str], expect_tools: int | None) -> dict[str, float]:
    with Path("/dev/null").open("w") as devnull:
        return anyio.run(_start_sdk, argv, expect_tools, devnull)


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median_s": round(statistics.median(ordered), 4),
        "p90_s": round(percentile(ordered, 90), 4),
        "min_s": round(ordered[0], 4),
        "max_s": round(ordered[-1], 4),
    }


# -- profiles ------------------------------------------------------------------------------------------------------


def _importtime(argv: list[str], log: Path) -> list[tuple[int, int, int, str]]:
    """``(self_us, cumulative_us, depth, module)`` for every import of one start (initialize + tools/list)."""
    with log.open("w") as err:
        raw = RawStdio([argv[0], "-X", "importtime", *argv[1:]], stderr=err)
        try:
            raw.initialize()
            raw.request("tools/list")
        finally:
            raw.close(wait=30)
    rows = []
    pattern = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")
    for line in log.read_text().splitlines():
        match = pattern.match(line)
        if match:
            rows.append((int(match[1]), int(match[2]), (len(match[3]) - 1) // 2, match[4]))
    return rows


def _importer(rows: list[tuple[int, int, int, str]], index: int) -> str | None:
    """The innermost ``hanzo_hub`` module whose import pulled in ``rows[index]`` (importtime lists children first)."""
    depth = rows[index][2]
    for _self, _cum, d, module in rows[index + 1 :]:
        if d < depth:
            if module.startswith("hanzo_hub"):
                return module
            depth = d
    return None


def import_profile(hub: list[str], fixture: list[str], tmp: Path, reps: int) -> dict[str, Any]:
    """``python -X importtime`` of hub and fixture starts (the least noisy of ``reps`` each): the costliest imports,
    and what only the hub imports (with the hub module that pulls each package in)."""

    def least_noisy(argv: list[str], name: str) -> list[tuple[int, int, int, str]]:
        runs = [_importtime(argv, tmp / f"importtime-{name}-{i}.log") for i in range(reps)]
        return min(runs, key=lambda rows: sum(r[0] for r in rows))

    rows = least_noisy(hub, "hub")
    base = least_noisy(fixture, "fixture")
    total_us = sum(r[0] for r in rows)

    def by_package(items: list[tuple[int, int, int, str]]) -> dict[str, int]:
        out: dict[str, int] = {}
        for self_us, _cum, _depth, module in items:
            top = module.split(".", 1)[0]
            out[top] = out.get(top, 0) + self_us
        return out

    hub_pkgs, base_pkgs = by_package(rows), by_package(base)
    only_hub = []
    for pkg, self_us in sorted(hub_pkgs.items(), key=lambda kv: -kv[1]):
        if pkg in base_pkgs or pkg.startswith("hanzo_hub"):
            continue
        first = next(i for i, r in enumerate(rows) if r[3].split(".", 1)[0] == pkg)
        top = max((i for i in range(first, len(rows)) if rows[i][3] == pkg), default=first)
        only_hub.append(
            {
                "package": pkg,
                "self_s": round(self_us / 1e6, 3),
                "cumulative_s": round(rows[top][1] / 1e6, 3),
                "imported_by": _importer(rows, top),
            }
        )
    roots = sorted((r for r in rows if r[2] == 0), key=lambda r: r[1], reverse=True)
    return {
        "modules_imported": len(rows),
        "fixture_modules_imported": len(base),
        "total_import_s": round(total_us / 1e6, 3),
        "fixture_total_import_s": round(sum(r[0] for r in base) / 1e6, 3),
        "by_top_level_package_s": {
            k: round(v / 1e6, 3) for k, v in sorted(hub_pkgs.items(), key=lambda kv: -kv[1])[:20]
        },
        "only_in_hub": only_hub[:20],
        "only_in_hub_self_s": round(sum(x["self_s"] for x in only_hub), 3),
        "top_root_imports_cumulative_s": [{"module": r[3], "cumulative_s": round(r[1] / 1e6, 3)} for r in roots[:15]],
        "top_self_s": [
            {"module": r[3], "self_s": round(r[0] / 1e6, 4)} for r in sorted(rows, key=lambda r: -r[0])[:15]
        ],
    }


async def _startup_steps(config: Path, home: Path) -> dict[str, float]:
    steps: dict[str, float] = {}

    def timed(name: str, fn: Any, *args: Any) -> Any:
        t0 = time.perf_counter_ns()
        value = fn(*args)
        steps[name] = (time.perf_counter_ns() - t0) / 1e9
        return value

    settings = timed("load_settings (300 servers)", lambda: load_settings(config, home=home))
    names = list(settings.servers)
    store = SnapshotStore(settings.snapshot_dir)
    listings = timed("SnapshotStore.load x300 (read + json + Tool validation)", lambda: [store.load(n) for n in names])
    timed("Listing.content_hash x300", lambda: [listing.content_hash() for listing in listings if listing])
    hub = timed("Hub(settings)", Hub, settings)
    t0 = time.perf_counter_ns()
    async with hub.run():
        steps["Hub.run enter (snapshots + registry + pool)"] = (time.perf_counter_ns() - t0) / 1e9
        tools = timed("registry.tools() first read (rebuild)", lambda: list(hub.registry.tools()))
        result = types.ListToolsResult(tools=tools)
        dumped = timed(
            "tools/list: handler result model_dump (SDK _dump_result)",
            lambda: result.model_dump(by_alias=True, mode="json", exclude_none=True),
        )
        shaped = timed(
            "tools/list: surface validate + dump (SDK serialize_server_result)",
            lambda: mcp_methods.serialize_server_result("tools/list", "2025-11-25", dumped),
        )
        timed("tools/list: JSON encoding of the wire dict", lambda: json.dumps(shaped))
        t1 = time.perf_counter_ns()
    steps["Hub.run exit"] = (time.perf_counter_ns() - t1) / 1e9
    return steps


def startup_profile(config: Path, home: Path, reps: int) -> dict[str, Any]:
    """The hub's start-up steps in this process: median seconds per step, then a cProfile of one pass."""
    runs = [anyio.run(_startup_steps, config, home) for _ in range(reps)]
    medians = {k: round(statistics.median(r[k] for r in runs), 4) for k in runs[0]}
    gc.disable()  # how much of each step is the cyclic garbage collector (full collections of a growing heap)
    try:
        no_gc = [anyio.run(_startup_steps, config, home) for _ in range(reps)]
    finally:
        gc.enable()
    no_gc_medians = {k: round(statistics.median(r[k] for r in no_gc), 4) for k in no_gc[0]}
    profiler = cProfile.Profile()
    profiler.enable()
    anyio.run(_startup_steps, config, home)
    profiler.disable()
    buf = io.StringIO()
    stats: Any = pstats.Stats(profiler, stream=buf)
    rows = []
    for func, (_cc, nc, tt, ct, _callers) in stats.stats.items():
        rows.append({"function": pstats.func_std_string(func), "calls": nc, "self_s": tt, "cumulative_s": ct})
    keep = [r for r in rows if "/hanzo_hub/" in r["function"] or "pydantic" in r["function"] or "json" in r["function"]]
    top_cum = sorted(keep, key=lambda r: -r["cumulative_s"])[:20]
    top_self = sorted(rows, key=lambda r: -r["self_s"])[:15]
    for row in (*top_cum, *top_self):
        row["self_s"] = round(row["self_s"], 4)
        row["cumulative_s"] = round(row["cumulative_s"], 4)
    return {
        "step_median_s": medians,
        "step_median_s_gc_disabled": no_gc_medians,
        "reps": reps,
        "cprofile_top_cumulative": top_cum,
        "cprofile_top_self": top_self,
    }


# -- main ------------------------------------------------------------------------------------------------------------


def _markdown(data: dict[str, Any]) -> str:
    gen = data["generated"]
    text = f"# cold_start ({'quick' if data['quick'] else 'full'})\n\n" + machine_line(data["machine"])
    text += (
        f"\nHome: {gen['servers']} snapshot servers, {gen['tools']} tools from {gen['tool_source']}; "
        f"{gen['snapshot_bytes'] / 1e6:.1f} MB of snapshots. {data['runs']} runs per variant, interleaved, "
        f"timed from spawn. Nothing was started: {data['nothing_started']}. Machine CPUs were busy "
        f"{data['machine_load']['busy_cores']} cores on average, {data['machine_load']['other_cores']} outside this "
        "benchmark.\n\n"
    )
    rows = []
    for label, v in data["variants"].items():
        lst, init = v["tools_list"], v.get("initialize")
        rows.append(
            [
                label,
                init["median_s"] if init else "-",
                lst["median_s"],
                lst["p90_s"],
                lst["min_s"],
                v.get("ratio_median_vs_fixture", "-"),
            ]
        )
    text += md_table(
        ["variant", "initialize answered, median s", "tools/list answered, median s", "p90 s", "min s", "vs fixture"],
        rows,
    )
    hub = data["variants"]["hub-300"]["tools_list"]
    text += f"\nTarget: hub-300 under {TARGET_S} s -> median {hub['median_s']} s, p90 {hub['p90_s']} s: "
    text += f"{'met' if data['target_met'] else 'NOT met'}.\n"
    imp = data["profile"]["imports"]
    text += f"\n## Imports (`-X importtime`, least noisy hub-300 start): {imp['modules_imported']} modules, "
    text += f"{imp['total_import_s']} s\n\n"
    text += (
        f"(the bare fixture server: {imp['fixture_modules_imported']} modules, {imp['fixture_total_import_s']} s)\n\n"
    )
    text += md_table(["top-level package", "self time s"], list(imp["by_top_level_package_s"].items())[:12])
    text += f"\nImported by the hub but not by the fixture ({imp['only_in_hub_self_s']} s self time in all):\n\n"
    text += md_table(
        ["package", "self s", "cumulative s", "pulled in by"],
        [[r["package"], r["self_s"], r["cumulative_s"], r["imported_by"]] for r in imp["only_in_hub"][:12]],
    )
    text += "\n" + md_table(
        ["root import", "cumulative s"],
        [[r["module"], r["cumulative_s"]] for r in imp["top_root_imports_cumulative_s"][:10]],
    )
    steps = data["profile"]["startup"]["step_median_s"]
    no_gc = data["profile"]["startup"]["step_median_s_gc_disabled"]
    text += "\n## Hub start-up steps in-process (median of "
    text += f"{data['profile']['startup']['reps']})\n\n"
    text += md_table(["step", "s", "s with gc disabled"], [[k, v, no_gc.get(k, "-")] for k, v in steps.items()])
    text += "\ncProfile of one pass (hanzo_hub, pydantic, json functions by cumulative time):\n\n"
    text += md_table(
        ["function", "calls", "cumulative s", "self s"],
        [
            [r["function"], r["calls"], r["cumulative_s"], r["self_s"]]
            for r in data["profile"]["startup"]["cprofile_top_cumulative"][:12]
        ],
    )
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 runs per variant, no SDK-client variants")
    parser.add_argument("--runs", type=int, help="runs per variant (default 10, quick 3)")
    parser.add_argument("--servers", type=int, default=300)
    parser.add_argument("--tools-per-server", type=int, default=10)
    opts = parser.parse_args()
    runs = opts.runs or (3 if opts.quick else 10)
    info = machine_info()
    with tempfile.TemporaryDirectory(prefix="hanzo-bench-") as tmp_name:
        tmp = Path(tmp_name)
        home, empty = tmp / "home", tmp / "empty"
        home.mkdir()
        empty.mkdir()
        generated = generate_home(home, opts.servers, opts.tools_per_server)
        write_config(empty / "config.json", {})
        hub300 = [PYTHON, *hub_args(home / "config.json", home, "--log-level", "WARNING")]
        hub0 = [PYTHON, *hub_args(empty / "config.json", empty, "--log-level", "WARNING")]
        fixture = [PYTHON, *FIXTURE, "fx-cold"]
        variants: dict[str, Any] = {
            "python -c pass": lambda: start_exit([PYTHON, "-c", "pass"]),
            "fixture": lambda: start_raw(fixture, None),
            "hub-empty": lambda: start_raw(hub0, MEMORY_TOOLS),
            "hub-300": lambda: start_raw(hub300, generated["tools"] + MEMORY_TOOLS),
        }
        if not opts.quick:
            variants["fixture/sdk-auto"] = lambda: start_sdk(fixture, None)
            variants["hub-300/sdk-auto"] = lambda: start_sdk(hub300, generated["tools"] + MEMORY_TOOLS)
        for fn in variants.values():  # warm the page cache and .pyc files once
            fn()
        results: dict[str, list[dict[str, float]]] = {k: [] for k in variants}
        meter = LoadMeter()
        for r in range(runs):
            labels = list(variants)
            labels = labels[r % len(labels) :] + labels[: r % len(labels)]
            for label in labels:
                results[label].append(variants[label]())
            print(f"  run {r + 1}/{runs}", file=sys.stderr)
        load = meter.read()
        logs = home / "logs"
        started = sorted(p.name for p in logs.iterdir()) if logs.exists() else []
        print("profiling imports and start-up steps", file=sys.stderr)
        profile = {
            "imports": import_profile(hub300, fixture, tmp, 1 if opts.quick else 3),
            "startup": startup_profile(home / "config.json", home, 5),
        }
    summary: dict[str, Any] = {}
    for label, samples in results.items():
        entry: dict[str, Any] = {"tools_list": _stats([s["tools_list_s"] for s in samples])}
        if "initialize_s" in samples[0]:
            entry["initialize"] = _stats([s["initialize_s"] for s in samples])
        entry["samples_s"] = [round(s["tools_list_s"], 4) for s in samples]
        summary[label] = entry
    base = summary["fixture"]["tools_list"]["median_s"]
    for label, entry in summary.items():
        if label.startswith("hub"):
            ref = summary["fixture/sdk-auto" if "sdk" in label else "fixture"]["tools_list"]["median_s"]
            entry["ratio_median_vs_fixture"] = ratio(entry["tools_list"]["median_s"], ref)
    summary["hub-300"]["added_over_hub_empty_s"] = round(
        summary["hub-300"]["tools_list"]["median_s"] - summary["hub-empty"]["tools_list"]["median_s"], 4
    )
    summary["hub-empty"]["added_over_fixture_s"] = round(summary["hub-empty"]["tools_list"]["median_s"] - base, 4)
    hub = summary["hub-300"]["tools_list"]
    data = {
        "benchmark": NAME,
        "quick": opts.quick,
        "machine": info,
        "machine_load": load,
        "runs": runs,
        "generated": generated,
        "nothing_started": not started,
        "servers_that_left_logs": started,
        "target": {"hub_300_tools_list_s_max": TARGET_S},
        "target_met": hub["median_s"] < TARGET_S and hub["p90_s"] < TARGET_S,
        "variants": summary,
        "profile": profile,
    }
    _json, md = write_results(NAME, data, _markdown(data))
    print(md.read_text())


if __name__ == "__main__":
    main()
