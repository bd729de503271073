"""Proxy overhead: the same ``tools/call`` (``echo``) over stdio, directly to the fixture server vs through the hub.

Every target is a real subprocess reached with the SDK ``Client`` over stdio, in ``legacy`` (2025-11-25 handshake)
and ``auto`` (2026-07-28 probe) mode:

- ``direct``: ``python -m tests.fixtures.downstream`` (the baseline);
- ``hub``: ``python -m hanzo_hub serve --config`` with that one downstream (spawned by the hub over stdio) in the
  handshake era (``"protocol": "legacy"``), as every cataloged third-party server speaks it: handshake-era calls take
  the raw ``tools/call`` fast path (``hanzo_hub.hub.fastcall``), stateless-era clients go through the era bridge;
- ``hub-2026``: the same hub with the downstream in ``auto`` mode (it speaks the stateless era: its calls take the
  fast path with the era's ``_meta`` stamped on each request, as the hub's own first-party servers do);
- ``hub-inproc``: the same hub with the fixture in-process (``"kind": "inproc"``): no second process or pipe;
- ``min-proxy``: ``bench/_min_proxy.py``, a bare low-level ``Server`` that forwards to one ``Client``: the floor of
  any proxy built on the SDK objects, to separate the SDK's per-hop cost from the hub's own;
- ``pipe-relay``: ``bench/_pipe_relay.py``, which copies lines between its stdio and the child unparsed: the floor
  of any stdio proxy at all (one more process, two more pipe hops).

All targets are open at once and measured in interleaved blocks (the order rotates every round), so drift in the
noisy machine hits them alike. CPU seconds of each target's process tree and of the client are sampled around its
blocks. A final phase runs the hub under ``cProfile`` (driven by a raw JSON-RPC pipe client) and reports where its
time goes. Target: hub/direct p50 <= 1.3.

``.venv/bin/python bench/proxy_overhead.py [--quick] [--calls N] [--no-profile]``
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters, stdio_client

from _common import (
    FIXTURE,
    PYTHON,
    REPO,
    LoadMeter,
    RawStdio,
    find_descendant,
    fixture_server,
    hub_args,
    machine_info,
    machine_line,
    md_table,
    ratio,
    summarize_ns,
    summarize_profile,
    tree_cpu_seconds,
    write_config,
    write_results,
)

NAME = "proxy_overhead"
TARGET_RATIO = 1.3
ARGS = {"text": "hello, hub"}


@dataclass
class Target:
    """One client connection under test and what it measured."""

    label: str
    kind: str
    mode: str
    argv: list[str]
    marker: str
    client: Client | None = None
    pid: int | None = None
    samples: list[int] = field(default_factory=list)
    server_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    errors: int = 0


def _targets(tmp: Path) -> list[Target]:
    targets = []
    for mode in ("legacy", "auto"):
        name = f"fx-direct-{mode}"
        targets.append(Target(f"direct/{mode}", "direct", mode, [PYTHON, *FIXTURE, name], name))
    for kind, protocol in (("hub", "legacy"), ("hub-2026", "auto")):
        for mode in ("legacy", "auto"):
            home = tmp / f"{kind}-{mode}"
            home.mkdir()
            entry = {**fixture_server(f"fx-{kind}-{mode}"), "protocol": protocol}
            config = write_config(home / "config.json", {"fx": entry})
            argv = [PYTHON, *hub_args(config, home, "--log-level", "WARNING")]
            targets.append(Target(f"{kind}/{mode}", kind, mode, argv, str(config)))
    for mode in ("legacy", "auto"):
        home = tmp / f"hub-inproc-{mode}"
        home.mkdir()
        config = write_config(
            home / "config.json", {"fx": {"kind": "inproc", "target": "tests.fixtures.downstream:build"}}
        )
        argv = [PYTHON, *hub_args(config, home, "--log-level", "WARNING")]
        targets.append(Target(f"hub-inproc/{mode}", "hub-inproc", mode, argv, str(config)))
    for mode in ("legacy", "auto"):
        name = f"fx-min-{mode}"
        argv = [PYTHON, str(REPO / "bench" / "_min_proxy.py"), PYTHON, *FIXTURE, name]
        targets.append(Target(f"min-proxy/{mode}", "min-proxy", mode, argv, name))
    for mode in ("legacy", "auto"):
        name = f"fx-relay-{mode}"
        argv = [PYTHON, str(REPO / "bench" / "_pipe_relay.py"), PYTHON, *FIXTURE, name]
        targets.append(Target(f"pipe-relay/{mode}", "pipe-relay", mode, argv, name))
    return targets


async def _call(target: Target) -> None:
    assert target.client is not None
    result = await target.client.call_tool("echo", ARGS)
    if result.is_error:
        raise RuntimeError(f"{target.label}: error result {result.content}")


async def _ready(target: Target, deadline_s: float = 60.0) -> None:
    """Call until the first success: a hub without a snapshot may not list the tool for its first seconds."""
    start = time.monotonic()
    while True:
        try:
            await _call(target)
            return
        except Exception:
            if time.monotonic() - start > deadline_s:
                raise
            await anyio.sleep(0.2)


async def _block(target: Target, calls: int) -> None:
    server_before = tree_cpu_seconds(target.pid) if target.pid else 0.0
    client_before = time.process_time()
    samples = target.samples
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        try:
            await _call(target)
        except Exception:
            target.errors += 1
            continue
        samples.append(time.perf_counter_ns() - t0)
    target.client_cpu_s += time.process_time() - client_before
    if target.pid:
        target.server_cpu_s += tree_cpu_seconds(target.pid) - server_before


async def measure(targets: list[Target], calls: int, block: int, warmup: int, log: Any) -> None:
    async with contextlib.AsyncExitStack() as stack:
        for target in targets:
            params = StdioServerParameters(command=target.argv[0], args=target.argv[1:], cwd=str(REPO))
            target.client = await stack.enter_async_context(Client(stdio_client(params, errlog=log), mode=target.mode))
            target.pid = find_descendant(target.marker)
        for target in targets:
            await _ready(target)
            for _ in range(warmup):
                await _call(target)
        rounds = -(-calls // block)
        for r in range(rounds):
            order = targets[r % len(targets) :] + targets[: r % len(targets)]
            for target in order:
                await _block(target, min(block, calls - r * block))
            if r % 5 == 4:
                print(f"  round {r + 1}/{rounds}", file=sys.stderr)


def profile_target(tmp: Path, kind: str, clock: str, calls: int) -> dict[str, Any]:
    """Profile ``kind`` (``hub`` or ``direct``) in steady state over ``calls`` echo calls from a pipe client."""
    out = tmp / f"{kind}-{clock}.prof"
    wrapper = [PYTHON, str(REPO / "bench" / "_profiled.py"), str(out), clock]
    if kind == "hub":
        home = tmp / f"hub-profile-{clock}"
        home.mkdir()
        config = write_config(home / "config.json", {"fx": {**fixture_server("fx-hub-profile"), "protocol": "legacy"}})
        argv = [*wrapper, *hub_args(config, home, "--log-level", "WARNING")]
    else:
        argv = [*wrapper, *FIXTURE, "fx-direct-profile"]
    raw = RawStdio(argv)
    try:
        raw.initialize()
        start = time.monotonic()
        while True:  # a hub without a snapshot may not list the tool yet (see bench/README.md)
            reply = raw.request("tools/call", {"name": "echo", "arguments": ARGS})
            if "result" in reply and not reply["result"].get("isError"):
                break
            if time.monotonic() - start > 60:
                raise RuntimeError(f"{kind} never answered echo: {reply}")
            time.sleep(0.2)
        for _ in range(100):
            raw.request("tools/call", {"name": "echo", "arguments": ARGS})
        raw.proc.send_signal(signal.SIGUSR1)
        for _ in range(5):  # wake the loop so the handler has run before timing starts
            raw.request("tools/call", {"name": "echo", "arguments": ARGS})
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            raw.request("tools/call", {"name": "echo", "arguments": ARGS})
        per_call_ms = (time.perf_counter_ns() - t0) / calls / 1e6
        raw.proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + 30
        while not out.exists() and time.monotonic() < deadline:
            raw.request("tools/call", {"name": "echo", "arguments": ARGS})
            time.sleep(0.05)
    finally:
        raw.close(wait=30)
    if not out.exists():
        return {"error": "no profile written"}
    return {"clock": clock, "ms_per_call_under_profiler": round(per_call_ms, 3), **summarize_profile(out, calls)}


def _summary(targets: list[Target]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in targets:
        n = len(t.samples)
        out[t.label] = {
            "kind": t.kind,
            "mode": t.mode,
            "latency": summarize_ns(t.samples),
            "errors": t.errors,
            "server_cpu_ms_per_call": round(t.server_cpu_s / n * 1e3, 3) if n else None,
            "client_cpu_ms_per_call": round(t.client_cpu_s / n * 1e3, 3) if n else None,
        }
    for mode in ("legacy", "auto"):
        direct = out[f"direct/{mode}"]["latency"]
        for kind in ("hub", "hub-2026", "hub-inproc", "min-proxy", "pipe-relay"):
            entry = out[f"{kind}/{mode}"]
            entry["ratio_p50_vs_direct"] = ratio(entry["latency"]["p50_ms"], direct["p50_ms"])
            entry["ratio_p95_vs_direct"] = ratio(entry["latency"]["p95_ms"], direct["p95_ms"])
            entry["ratio_p99_vs_direct"] = ratio(entry["latency"]["p99_ms"], direct["p99_ms"])
            entry["added_p50_ms"] = round(entry["latency"]["p50_ms"] - direct["p50_ms"], 4)
    return out


def _markdown(data: dict[str, Any]) -> str:
    rows = []
    for label, r in data["targets"].items():
        lat = r["latency"]
        rows.append(
            [
                label,
                lat["n"],
                lat["p50_ms"],
                lat["p95_ms"],
                lat["p99_ms"],
                r.get("ratio_p50_vs_direct", "1 (baseline)"),
                r["server_cpu_ms_per_call"],
                r["client_cpu_ms_per_call"],
                r["errors"],
            ]
        )
    text = f"# proxy_overhead ({'quick' if data['quick'] else 'full'})\n\n" + machine_line(data["machine"]) + "\n"
    load = data["machine_load_during_measurement"]
    text += "`tools/call echo` over stdio with the SDK `Client`; interleaved blocks of "
    text += f"{data['params']['block']} calls. During the measurement the machine's CPUs were busy "
    text += f"{load['busy_cores']} cores on average, {load['other_cores']} of them by processes outside this "
    text += "benchmark.\n\n"
    text += md_table(
        [
            "target",
            "calls",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "p50 / direct",
            "server CPU ms/call",
            "client CPU ms/call",
            "errors",
        ],
        rows,
    )
    text += f"\nTarget hub/direct p50 <= {TARGET_RATIO}: "
    verdicts = [f"{m}: {data['targets'][f'hub/{m}']['ratio_p50_vs_direct']}" for m in ("legacy", "auto")]
    text += ", ".join(verdicts) + f" -> {'met' if data['target_met'] else 'NOT met'}. "
    modern = [f"{m}: {data['targets'][f'hub-2026/{m}']['ratio_p50_vs_direct']}" for m in ("legacy", "auto")]
    text += "With a stateless-era (2026-07-28) downstream, hub-2026/direct p50: " + ", ".join(modern) + ".\n"
    prof = data.get("profile") or {}
    hub, direct = prof.get("hub/cpu", {}), prof.get("direct/cpu", {})
    if "busy_us_per_request" in hub:
        text += f"\n## Where the CPU goes (cProfile, main thread CPU time, steady state, {hub['requests']} calls)\n\n"
        text += (
            f"Main-thread CPU per request: hub {hub['busy_us_per_request']} us, direct server "
            f"{direct.get('busy_us_per_request')} us (cProfile inflates both; compare them, not the absolutes).\n\n"
        )
        groups = list(hub["by_package_us_per_request"])[:12]
        text += md_table(
            ["package", "hub CPU us/request", "direct CPU us/request"],
            [
                [g, hub["by_package_us_per_request"][g], direct.get("by_package_us_per_request", {}).get(g, 0)]
                for g in groups
            ],
        )
        text += "\nTop self CPU time in the hub:\n\n"
        text += md_table(
            ["function", "calls/request", "self us/request"],
            [[r["function"], r["calls_per_request"], r["self_us_per_request"]] for r in hub["top_self_time"][:15]],
        )
        text += "\nhanzo_hub functions (cumulative):\n\n"
        text += md_table(
            ["function", "calls/request", "cum us/request"],
            [[r["function"], r["calls_per_request"], r["cum_us_per_request"]] for r in hub["hanzo_hub_functions"][:8]],
        )
    wall = prof.get("hub/wall", {})
    if "busy_us_per_request" in wall:
        text += "\n## The hub by wall clock (where its main thread waits or loses the CPU)\n\n"
        text += md_table(
            ["function", "calls/request", "self us/request (wall)"],
            [[r["function"], r["calls_per_request"], r["self_us_per_request"]] for r in wall["top_self_time"][:8]],
        )
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 calls per target, short profile")
    parser.add_argument("--calls", type=int, help="measured calls per target (default 2000, quick 200)")
    parser.add_argument("--block", type=int, default=100, help="calls per interleaved block")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile phase")
    opts = parser.parse_args()
    calls = opts.calls or (200 if opts.quick else 2000)
    warmup = 20 if opts.quick else 100
    info = machine_info()
    with tempfile.TemporaryDirectory(prefix="hanzo-bench-") as tmp_name:
        tmp = Path(tmp_name)
        targets = _targets(tmp)
        with (tmp / "servers.log").open("w") as log:
            print(f"measuring {len(targets)} targets x {calls} calls", file=sys.stderr)
            meter = LoadMeter()
            anyio.run(measure, targets, calls, opts.block, warmup, log)
            load = meter.read()
        profile = None
        if not opts.no_profile:
            print("profiling the hub and the direct server", file=sys.stderr)
            n = 300 if opts.quick else 3000
            runs = [("hub", "cpu"), ("direct", "cpu")] + ([] if opts.quick else [("hub", "wall")])
            profile = {f"{kind}/{clock}": profile_target(tmp, kind, clock, n) for kind, clock in runs}
    summary = _summary(targets)
    met = all(summary[f"hub/{m}"]["ratio_p50_vs_direct"] <= TARGET_RATIO for m in ("legacy", "auto"))
    data = {
        "benchmark": NAME,
        "quick": opts.quick,
        "machine": info,
        "params": {"calls_per_target": calls, "block": opts.block, "warmup": warmup, "arguments": ARGS},
        "target": {"hub_over_direct_p50_max": TARGET_RATIO},
        "target_met": met,
        "machine_load_during_measurement": load,
        "targets": summary,
        "profile": profile,
    }
    _json, md = write_results(NAME, data, _markdown(data))
    print(md.read_text())


if __name__ == "__main__":
    main()
