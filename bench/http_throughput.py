"""HTTP throughput: ``hanzo-hub serve --http`` in front of one downstream vs that downstream served directly.

Servers (each a real subprocess, all running for the whole benchmark):

- ``direct``: the fixture served over streamable HTTP by the SDK (``bench/_http_direct.py``): the baseline;
- ``hub-stdio``: ``python -m hanzo_hub serve --http`` with the fixture as a stdio downstream in the handshake era
  (``"protocol": "legacy"``, as every cataloged third-party server speaks it), so calls take the ``tools/call`` fast
  path (``hanzo_hub.hub.fastcall``);
- ``hub-inproc``: the same hub with the fixture in-process (``"kind": "inproc"``), saving a process and a pipe hop
  (no fast path there: the typed relay).

Each comes in three configurations: ``default``, ``json`` (``http.json_response=true``, for the hub through
``HANZO_HUB_HTTP__JSON_RESPONSE``) and ``stateless`` (``http.stateless=true``). Load comes from
``bench/_loadgen.py``, a separate lean process (raw HTTP/1.1 keep-alive, one connection per client), in both wire
formats: ``legacy`` (``initialize`` once per client, then ``Mcp-Session-Id`` requests) and ``2026`` (self-contained
2026-07-28 requests). Closed loops of 8/16/32 clients measure capacity; an open loop at 500 calls/s (64
connections, latency from the scheduled send time) checks the target directly: >= 500 calls/s with p99 < 50 ms.

Cells run interleaved: for every (configuration, wire, load) the three servers take turns, in an order that rotates.
CPU of each server's process tree and of the generator is measured in every window, as is the machine's total.

``.venv/bin/python bench/http_throughput.py [--quick] [--duration S] [--client raw|httpx2]``
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import psutil

from _common import (
    PYTHON,
    REPO,
    LoadMeter,
    fixture_server,
    free_port,
    hub_args,
    machine_info,
    machine_line,
    md_table,
    percentile,
    ratio,
    summarize_profile,
    tree_cpu_seconds,
    write_config,
    write_results,
)

NAME = "http_throughput"
TARGET_RATE = 500
TARGET_P99_MS = 50.0
KNOBS = ("default", "json", "stateless")
KINDS = ("direct", "hub-stdio", "hub-inproc")


def _kinds(knob: str) -> tuple[str, ...]:
    return KINDS


@dataclass
class Server:
    """One server process under load."""

    kind: str
    knob: str
    port: int
    proc: subprocess.Popen[bytes]

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.knob}"


def _start(kind: str, knob: str, tmp: Path, log: Any, profile: Path | None = None) -> Server:
    port = free_port()
    env = dict(os.environ)
    if kind == "direct":
        argv = [PYTHON, "-m", "bench._http_direct", str(port)]
        argv += {"json": ["--json-response"], "stateless": ["--stateless"]}.get(knob, [])
    else:
        home = tmp / f"{kind}-{knob}"
        home.mkdir()
        if kind == "hub-stdio":
            entry = {**fixture_server(f"fx-{kind}-{knob}"), "protocol": "legacy"}
        else:
            entry = {"kind": "inproc", "target": "tests.fixtures.downstream:build"}
        config = write_config(home / "config.json", {"fx": entry})
        argv = [PYTHON, *hub_args(config, home, "--http", "--port", str(port), "--log-level", "WARNING")]
        if knob == "json":
            env["HANZO_HUB_HTTP__JSON_RESPONSE"] = "true"
        elif knob == "stateless":
            env["HANZO_HUB_HTTP__STATELESS"] = "true"
    if profile is not None:
        argv = [PYTHON, str(REPO / "bench" / "_profiled.py"), str(profile), "cpu", *argv[1:]]
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=log)
    return Server(kind, knob, port, proc)


def _probe(port: int) -> bool:
    """One self-contained 2026-07-28 ``tools/call``; true when it succeeds."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
    body["params"]["_meta"] = meta  # type: ignore[index]
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "echo",
    }
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/mcp", body=json.dumps(body), headers=headers)
        response = conn.getresponse()
        data = response.read()
    except OSError:
        return False
    finally:
        conn.close()
    return response.status == 200 and b'"isError":false' in data


def _wait_ready(server: Server, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.label} exited with {server.proc.returncode}")
        if _probe(server.port):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{server.label} did not answer within {timeout} s")


def _busy_seconds() -> float:
    t = psutil.cpu_times()
    return float(t.user + t.nice + t.system + t.irq + t.softirq + getattr(t, "steal", 0.0))


def run_cell(
    server: Server, wire: str, load: dict[str, Any], opts: argparse.Namespace, on_mark: Any = None
) -> dict[str, Any]:
    """Run the generator once against ``server``; CPU of the server tree and of the machine in its window."""
    argv = [PYTHON, str(REPO / "bench" / "_loadgen.py"), "--port", str(server.port), "--wire", wire]
    argv += ["--concurrency", str(load["concurrency"]), "--duration", str(opts.duration)]
    argv += ["--warmup", str(opts.warmup), "--client", opts.client, "--samples"]
    if load.get("rate"):
        argv += ["--rate", str(load["rate"])]
    gen = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert gen.stdout is not None
    marks: dict[str, tuple[float, float, float]] = {}
    result: dict[str, Any] | None = None
    for line in gen.stdout:
        line = line.strip()
        if line in ("WARM", "END"):
            marks[line] = (time.monotonic(), tree_cpu_seconds(server.proc.pid), _busy_seconds())
            if on_mark is not None:
                on_mark(line)
        elif line.startswith("{"):
            result = json.loads(line)
    gen.wait()
    if result is None or "WARM" not in marks or "END" not in marks:
        err = gen.stderr.read() if gen.stderr else ""
        raise RuntimeError(f"load generator failed against {server.label}: {err[-2000:]}")
    wall = marks["END"][0] - marks["WARM"][0]
    server_cpu = marks["END"][1] - marks["WARM"][1]
    busy = marks["END"][2] - marks["WARM"][2]
    calls = result["calls"] or 1
    result.update(
        server=server.kind,
        knob=server.knob,
        server_cpu_cores=round(server_cpu / wall, 3),
        server_cpu_us_per_call=round(server_cpu / calls * 1e6, 1),
        machine_busy_cores=round(busy / wall, 2),
        other_cpu_cores=round(max(busy - server_cpu - result["generator_cpu_s"], 0.0) / wall, 2),
    )
    return result


def _merge(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One cell from its rounds: median calls/s, percentiles of all latencies pooled, mean CPU figures."""
    latencies = sorted(x for r in runs for x in r.pop("latencies_ms"))
    first = runs[0]

    def mean(key: str) -> float:
        return round(statistics.fmean(r[key] for r in runs), 3)

    return {
        "server": first["server"],
        "knob": first["knob"],
        "wire": first["wire"],
        "concurrency": first["concurrency"],
        "rate": first["rate"],
        "rounds": len(runs),
        "calls_per_s": round(statistics.median(r["calls_per_s"] for r in runs), 1),
        "calls_per_s_rounds": [r["calls_per_s"] for r in runs],
        "p50_ms": round(percentile(latencies, 50), 3) if latencies else None,
        "p90_ms": round(percentile(latencies, 90), 3) if latencies else None,
        "p99_ms": round(percentile(latencies, 99), 3) if latencies else None,
        "max_ms": latencies[-1] if latencies else None,
        "latency_samples": len(latencies),
        "errors": sum(r["errors"] for r in runs),
        "first_error": next((r["first_error"] for r in runs if r["first_error"]), None),
        "server_cpu_cores": mean("server_cpu_cores"),
        "server_cpu_us_per_call": mean("server_cpu_us_per_call"),
        "generator_cpu_cores": mean("generator_cpu_cores"),
        "generator_cpu_us_per_call": round(statistics.fmean(r["generator_cpu_us_per_call"] or 0 for r in runs), 1),
        "machine_busy_cores": mean("machine_busy_cores"),
        "other_cpu_cores": mean("other_cpu_cores"),
    }


def _loads(quick: bool) -> list[dict[str, Any]]:
    closed = [16] if quick else [8, 16, 32]
    return [{"concurrency": c} for c in closed] + [{"concurrency": 64, "rate": TARGET_RATE}]


def _load_label(load: dict[str, Any]) -> str:
    return f"open {load['rate']}/s" if load.get("rate") else f"closed c={load['concurrency']}"


def measure(opts: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    cells: list[dict[str, Any]] = []
    servers: dict[tuple[str, str], Server] = {}
    with (tmp / "servers.log").open("wb") as log:
        try:
            for knob in KNOBS:
                for kind in _kinds(knob):
                    servers[(kind, knob)] = _start(kind, knob, tmp, log)
            for server in servers.values():
                _wait_ready(server)
            plan = [(knob, wire, load) for knob in KNOBS for wire in ("legacy", "2026") for load in _loads(opts.quick)]
            turn = 0
            for i, (knob, wire, load) in enumerate(plan, 1):
                kinds = _kinds(knob)
                runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
                for _round in range(opts.rounds):
                    turn += 1
                    for kind in kinds[turn % len(kinds) :] + kinds[: turn % len(kinds)]:
                        runs[kind].append(run_cell(servers[(kind, knob)], wire, load, opts))
                cells.extend({"load": _load_label(load), **_merge(runs[kind])} for kind in kinds)
                print(f"  {i}/{len(plan)} {knob} {wire} {_load_label(load)}", file=sys.stderr)
        finally:
            _stop(list(servers.values()))
    return cells


def _stop(servers: list[Server]) -> None:
    for server in servers:
        server.proc.terminate()
    for server in servers:
        try:
            server.proc.wait(15)
        except subprocess.TimeoutExpired:
            server.proc.kill()


def _toggle_profiler(server: Server, mark: str) -> None:
    server.proc.send_signal(signal.SIGUSR1 if mark == "WARM" else signal.SIGUSR2)


def profile_servers(opts: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Each server kind (default configuration) under cProfile (main-thread CPU) while serving legacy c=16."""
    out: dict[str, Any] = {}
    with (tmp / "profile.log").open("wb") as log:
        for kind in KINDS:
            prof = tmp / f"{kind}.prof"
            server = _start(kind, "profile", tmp, log, profile=prof)
            try:
                _wait_ready(server)
                cell = run_cell(server, "legacy", {"concurrency": 16}, opts, partial(_toggle_profiler, server))
                deadline = time.monotonic() + 20
                while not prof.exists() and time.monotonic() < deadline:
                    time.sleep(0.1)
            finally:
                _stop([server])
            if prof.exists():
                out[kind] = {
                    "calls_per_s_under_profiler": cell["calls_per_s"],
                    **summarize_profile(prof, cell["calls"]),
                }
    return out


def _verdicts(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Per hub configuration and wire: whether the open-loop cell met the target; ratios to direct."""
    out: dict[str, Any] = {}
    by_key = {(c["server"], c["knob"], c["wire"], c["load"]): c for c in cells}
    for (kind, knob, wire, load), cell in by_key.items():
        base = by_key.get(("direct", knob, wire, load))
        if base is not None and kind != "direct":
            cell["ratio_calls_per_s_vs_direct"] = ratio(cell["calls_per_s"], base["calls_per_s"])
            if cell["p99_ms"] and base["p99_ms"]:
                cell["ratio_p99_vs_direct"] = ratio(cell["p99_ms"], base["p99_ms"])
        if load.startswith("open"):
            met = cell["calls_per_s"] >= TARGET_RATE * 0.98 and (cell["p99_ms"] or 1e9) < TARGET_P99_MS
            cell["target_met"] = met and cell["errors"] == 0
            out[f"{kind}/{knob}/{wire}"] = cell["target_met"]
    best = max((c for c in cells if c["server"] in ("hub-stdio", "hub-inproc")), key=lambda c: c["calls_per_s"])
    return {
        "open_loop_target_met": out,
        "best_hub_closed_loop": {k: best[k] for k in ("server", "knob", "wire", "load", "calls_per_s", "p99_ms")},
    }


def _markdown(data: dict[str, Any]) -> str:
    text = f"# http_throughput ({'quick' if data['quick'] else 'full'})\n\n" + machine_line(data["machine"])
    p = data["params"]
    text += (
        f"\n`tools/call echo` over streamable HTTP; each cell is {p['rounds']} interleaved rounds of "
        f"{p['duration_s']} s after {p['warmup_s']} s warm-up (calls/s: median of the rounds; latency "
        "percentiles: all calls pooled); "
        f"generator `{p['client']}` in its own process. Target: >= {TARGET_RATE} calls/s with p99 < "
        f"{TARGET_P99_MS:g} ms (the open-loop rows). Machine CPUs were busy {data['machine_load']['busy_cores']} "
        f"cores on average over the run, {data['machine_load']['other_cores']} of them outside this benchmark.\n\n"
    )
    rows = [
        [
            c["server"],
            c["knob"],
            c["wire"],
            c["load"],
            c["calls_per_s"],
            c["p50_ms"],
            c["p99_ms"],
            c.get("ratio_calls_per_s_vs_direct", "-"),
            c["server_cpu_cores"],
            c["generator_cpu_cores"],
            c["other_cpu_cores"],
            c["errors"],
            {True: "yes", False: "no"}.get(c.get("target_met"), ""),
        ]
        for c in data["cells"]
    ]
    text += md_table(
        [
            "server",
            "config",
            "wire",
            "load",
            "calls/s",
            "p50 ms",
            "p99 ms",
            "calls/s vs direct",
            "server CPU (cores)",
            "generator CPU (cores)",
            "other CPU (cores)",
            "errors",
            "target met",
        ],
        rows,
    )
    best = data["summary"]["best_hub_closed_loop"]
    text += (
        f"\nBest hub closed-loop cell: {best['server']}/{best['knob']}/{best['wire']} {best['load']}: "
        f"{best['calls_per_s']} calls/s, p99 {best['p99_ms']} ms.\n"
    )
    prof = data.get("profile") or {}
    if prof:
        text += "\n## Server main-thread CPU per call (cProfile, default configuration, legacy wire, c=16)\n\n"
        kinds = [k for k in KINDS if k in prof]
        packages = list(prof[kinds[-1]]["by_package_us_per_request"])[:12]
        text += md_table(
            ["package", *(f"{k} us/call" for k in kinds)],
            [[g, *(prof[k]["by_package_us_per_request"].get(g, 0) for k in kinds)] for g in packages]
            + [["(total busy)", *(prof[k]["busy_us_per_request"] for k in kinds)]],
        )
        for kind in kinds[1:]:
            text += f"\nTop self time in {kind}:\n\n"
            text += md_table(
                ["function", "calls/call", "self us/call"],
                [
                    [r["function"], r["calls_per_request"], r["self_us_per_request"]]
                    for r in prof[kind]["top_self_time"][:12]
                ],
            )
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one closed-loop concurrency, one 1.5 s round per cell")
    parser.add_argument("--duration", type=float, help="measured seconds per round (default 2, quick 1.5)")
    parser.add_argument("--warmup", type=float, help="warm-up seconds per round (default 0.5)")
    parser.add_argument("--rounds", type=int, help="interleaved rounds per cell (default 3, quick 1)")
    parser.add_argument("--client", choices=["raw", "httpx2"], default="raw", help="load generator HTTP stack")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile phase")
    opts = parser.parse_args()
    opts.duration = opts.duration or (1.5 if opts.quick else 2.0)
    opts.warmup = opts.warmup or 0.5
    opts.rounds = opts.rounds or (1 if opts.quick else 3)
    info = machine_info()
    meter = LoadMeter()
    with tempfile.TemporaryDirectory(prefix="hanzo-bench-") as tmp_name:
        cells = measure(opts, Path(tmp_name))
        load = meter.read()
        profile = None if opts.no_profile else profile_servers(opts, Path(tmp_name))
    summary = _verdicts(cells)
    data = {
        "benchmark": NAME,
        "quick": opts.quick,
        "machine": info,
        "machine_load": load,
        "params": {"duration_s": opts.duration, "warmup_s": opts.warmup, "rounds": opts.rounds, "client": opts.client},
        "target": {"calls_per_s_min": TARGET_RATE, "p99_ms_max": TARGET_P99_MS},
        "summary": summary,
        "cells": cells,
        "profile": profile,
    }
    _json, md = write_results(NAME, data, _markdown(data))
    print(md.read_text())


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
