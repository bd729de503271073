"""Sandbox start latency per backend and per-call policy overhead.

Run: ``python bench/sandbox.py [--docker-host unix:///path/docker.sock] [--runs 20]``. Writes
``bench/results/sandbox.json`` and ``.md``. Start latency is a full ``run()`` of ``/usr/bin/true`` (spawn, limits,
wait, cleanup); the docker warm number is ``exec_run`` in a prewarmed container (prewarming is not timed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import anyio

from hanzo_hub.config import SandboxSettings
from hanzo_hub.errors import SandboxUnavailable
from hanzo_hub.sandbox import Grants, Limits, aload_sandbox
from hanzo_hub.sandbox.policy import PolicyEngine

RESULTS = Path(__file__).resolve().parent / "results"
TRUE = ["/usr/bin/true"]


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1e3, 3),
        "p90_ms": round(ordered[int(len(ordered) * 0.9) - 1] * 1e3, 3),
        "min_ms": round(ordered[0] * 1e3, 3),
        "n": len(ordered),
    }


async def _starts(kind: str, settings: SandboxSettings, runs: int, project: Path) -> dict[str, Any]:
    try:
        sandbox = await aload_sandbox(kind, settings)
    except SandboxUnavailable as exc:
        return {"skipped": str(exc)}
    limits, grants = Limits(memory_bytes=256 * 1024**2, pids=64, wall_seconds=10), Grants(writable=(project,))
    out: dict[str, Any] = {}
    try:
        await sandbox.run(TRUE, limits, grants)  # warm caches
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            result = await sandbox.run(TRUE, limits, grants)
            samples.append(time.perf_counter() - started)
            assert result.exit_code == 0, result
        out["cold"] = _summary(samples)
        if kind == "docker":
            warm = []
            for _ in range(runs):
                await sandbox.prewarm(limits, grants)  # type: ignore[attr-defined]
                started = time.perf_counter()
                result = await sandbox.run(TRUE, limits, grants)
                warm.append(time.perf_counter() - started)
                assert result.exit_code == 0, result
            out["warm_pool"] = _summary(warm)
    finally:
        await sandbox.aclose()
    return out


async def _policy(runs: int, project: Path) -> dict[str, Any]:
    engine = PolicyEngine(SandboxSettings(roots={"u": (project,)}, calls_per_session=10**9))
    cases = {
        "no_checked_args": ("s", "echo", {"text": "hi"}, {"properties": {"text": {"type": "string"}}}),
        "one_path": ("s", "read", {"path": "src/main.py"}, {"properties": {"path": {"type": "string"}}}),
        "one_ip_url": ("s", "fetch", {"url": "https://93.184.216.34/x"}, {"properties": {"url": {"format": "uri"}}}),
    }
    out: dict[str, Any] = {}
    for name, (server, tool, args, schema) in cases.items():
        samples = []
        for i in range(runs):
            started = time.perf_counter()
            decision = await engine.check_call("u", server, tool, args, schema, turn=str(i))
            samples.append(time.perf_counter() - started)
            assert decision.allowed, decision
        out[name] = _summary(samples)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docker-host")
    parser.add_argument("--runs", type=int, default=20)
    ns = parser.parse_args()
    project = Path("/tmp/hanzo-bench-project")
    await anyio.Path(project).mkdir(exist_ok=True)
    settings = SandboxSettings(docker_host=ns.docker_host)
    data: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "kernel": platform.release(),
            "cpus": len(os.sched_getaffinity(0)),
        },
        "start": {kind: await _starts(kind, settings, ns.runs, project) for kind in ("none", "bwrap", "docker")},
        "policy_check": await _policy(2000, project),
        "targets": {"bwrap_p50_ms": 50, "docker_warm_p50_ms": 100, "policy_p50_ms": 0.2},
    }
    await anyio.Path(RESULTS).mkdir(exist_ok=True)
    await anyio.Path(RESULTS / "sandbox.json").write_text(json.dumps(data, indent=2) + "\n")
    lines = ["# Sandbox benchmark", "", "| measurement | p50 ms | p90 ms | min ms | n |", "|---|---|---|---|---|"]
    for kind, modes in data["start"].items():
        if "skipped" in modes:
            lines.append(f"| start {kind} | skipped: {modes['skipped']} | | | |")
            continue
        for mode, s in modes.items():
            lines.append(f"| start {kind} ({mode}) | {s['p50_ms']} | {s['p90_ms']} | {s['min_ms']} | {s['n']} |")
    for name, s in data["policy_check"].items():
        lines.append(f"| policy check_call ({name}) | {s['p50_ms']} | {s['p90_ms']} | {s['min_ms']} | {s['n']} |")
    lines += ["", f"Targets: bwrap < 50 ms, docker warm < 100 ms, policy < 0.2 ms p50. Machine: {data['machine']}", ""]
    await anyio.Path(RESULTS / "sandbox.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    anyio.run(main)
