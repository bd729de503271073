"""Prometheus metrics of the downstream servers: every request's outcome and latency, and each server's state.

One :class:`BackendMetrics` per hub, on a registry of its own (two hubs in one process never mix their numbers).
Supervisors count their requests through per-server children bound once (:meth:`BackendMetrics.server`), so a
request costs two clock reads, one counter increment and one histogram observation. The server states are read
from the pool when a scrape asks (:class:`PoolCollector`), so they are never stale and cost nothing between scrapes.
The HTTP app serves the registry at ``/metrics`` (``transports/metrics_http.py``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hanzo_hub.errors import BackendCrashed, BackendTimeout, BackendUnavailable

__all__ = ["NO_METRICS", "OUTCOMES", "BackendMetrics", "PoolCollector", "ServerMetrics", "outcome_of"]

OUTCOMES = ("ok", "error", "timeout", "crashed", "unavailable", "cancelled")
"""A request's outcome: answered, answered with a protocol error (or failed otherwise), no answer in time, the
connection ended under it, the server could not be started (or its circuit is open), or the caller gave up."""

T = TypeVar("T")

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


def outcome_of(exc: BaseException) -> str:
    """The outcome a request that raised ``exc`` counts as."""
    if isinstance(exc, BackendUnavailable):
        return "unavailable"
    if isinstance(exc, BackendTimeout | TimeoutError):
        return "timeout"
    if isinstance(exc, BackendCrashed):
        return "crashed"
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return "cancelled"
    return "error"


@dataclass(frozen=True)
class ServerMetrics:
    """The children of one server, bound once."""

    outcomes: Mapping[str, Any]
    seconds: Any

    def record(self, outcome: str, seconds: float) -> None:
        self.outcomes[outcome].inc()
        self.seconds.observe(seconds)

    def failed(self, exc: BaseException, seconds: float) -> None:
        self.record(outcome_of(exc), seconds)

    async def timed(self, request: Awaitable[T]) -> T:
        """Await one downstream ``request``, counting its outcome and latency."""
        began = time.perf_counter()
        try:
            result = await request
        except BaseException as exc:
            self.failed(exc, time.perf_counter() - began)
            raise
        self.record("ok", time.perf_counter() - began)
        return result


class _NoMetrics(ServerMetrics):
    def record(self, outcome: str, seconds: float) -> None:
        return None

    async def timed(self, request: Awaitable[T]) -> T:
        return await request


NO_METRICS: ServerMetrics = _NoMetrics({}, None)
"""What a supervisor records into when nobody collects (tests, the doctor)."""


class BackendMetrics:
    """The hub's registry and its downstream request metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._requests = Counter(
            "hanzo_hub_downstream_requests",
            "Requests the hub sent to downstream servers, by server and outcome.",
            ["server", "outcome"],
            registry=self.registry,
        )
        self._seconds = Histogram(
            "hanzo_hub_downstream_request_seconds",
            "Time from sending a request to a downstream server to its answer (or failure).",
            ["server"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def server(self, name: str) -> ServerMetrics:
        """The bound children of ``name`` (every outcome exists from the start, at 0)."""
        outcomes = {outcome: self._requests.labels(name, outcome) for outcome in OUTCOMES}
        return ServerMetrics(outcomes, self._seconds.labels(name))


class PoolCollector(Collector):
    """Each server's state at scrape time, from ``status()`` (``BackendPool.status``) and ``tools()`` (the number of
    tools the hub lists)."""

    def __init__(self, status: Callable[[], Mapping[str, Mapping[str, Any]]], tools: Callable[[], int]) -> None:
        self._status = status
        self._tools = tools

    def collect(self) -> Iterator[Metric]:
        status = self._status()
        up = GaugeMetricFamily("hanzo_hub_server_up", "1 while the server runs.", labels=["server"])
        state = GaugeMetricFamily(
            "hanzo_hub_server_state", "1 for the state the server is in.", labels=["server", "state"]
        )
        in_flight = GaugeMetricFamily(
            "hanzo_hub_server_in_flight", "Requests in flight, or waiting for the server to start.", labels=["server"]
        )
        failures = GaugeMetricFamily(
            "hanzo_hub_server_consecutive_failures", "Failed starts in a row.", labels=["server"]
        )
        circuit = GaugeMetricFamily("hanzo_hub_server_circuit_open", "1 while the breaker is open.", labels=["server"])
        starts = CounterMetricFamily("hanzo_hub_server_starts", "Times the server was started.", labels=["server"])
        for name, item in sorted(status.items()):
            up.add_metric([name], 1.0 if item["state"] == "running" else 0.0)
            state.add_metric([name, str(item["state"])], 1.0)
            in_flight.add_metric([name], float(item["in_flight"]))
            failures.add_metric([name], float(item["failures"]))
            circuit.add_metric([name], 1.0 if item["circuit_open"] else 0.0)
            starts.add_metric([name], float(item["starts"]))
        yield from (up, state, in_flight, failures, circuit, starts)
        yield GaugeMetricFamily("hanzo_hub_tools", "Tools the hub lists (every server).", value=float(self._tools()))
