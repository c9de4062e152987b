"""OpenTelemetry metrics: the instruments Mnemo records, as Prometheus text at /metrics and over OTLP when configured.

Every instrument is declared here, so docs/observability.md has one place to match. They are
created on the API's global meter, which records nothing until `configure_metrics()` installs the
process's provider (idempotent: a service process, `mnemo up` and the tests all call it).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import structlog
from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from mnemo_platform.telemetry import otlp_protocol

log = structlog.get_logger("mnemo.metrics")

PROMETHEUS_CONTENT_TYPE = CONTENT_TYPE_LATEST

# Request latencies in seconds: from a cached lookup to a long import.
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

meter = metrics.get_meter("mnemo")

rpc_duration = meter.create_histogram(
    "mnemo.rpc.server.duration",
    unit="s",
    description="gRPC calls served, by rpc_service, rpc_method and rpc_grpc_status_code (the name: OK, UNAVAILABLE…)",
)
http_duration = meter.create_histogram(
    "mnemo.http.server.duration",
    unit="s",
    description="HTTP requests the gateway served, by http_route (the route template), "
    "http_request_method and http_response_status_code",
)
chunks_embedded = meter.create_counter(
    "mnemo.embed.chunks",
    unit="1",
    description="Chunks the embedding workers finished, by outcome: embedded (a vector stored) or error (an "
    "attempt failed; retried with backoff up to MNEMO_EMBED_MAX_ATTEMPTS)",
)
harvest_sessions = meter.create_counter(
    "mnemo.harvest.sessions",
    unit="1",
    description="Agent sessions harvest looked at, by outcome (the outcome a harvest run reports per session)",
)


@dataclass
class _Gauges:
    """The latest values of what is sampled rather than counted, read by the observable gauges."""

    queue: dict[str, float] = field(default_factory=dict)
    """queue holds `pending`, `failed` and `oldest_age_s` from the last sample of the embedding queue."""
    pools: dict[str, Any] = field(default_factory=dict)
    """pools maps a service's name to its asyncpg pool."""
    ready: dict[str, bool] = field(default_factory=dict)
    """ready maps a running service's name to its readiness (its database answers)."""


_gauges = _Gauges()


def _queue_depth(_: CallbackOptions) -> Iterable[Observation]:
    for state in ("pending", "failed"):
        if state in _gauges.queue:
            yield Observation(_gauges.queue[state], {"state": state})


def _queue_age(_: CallbackOptions) -> Iterable[Observation]:
    if "oldest_age_s" in _gauges.queue:
        yield Observation(_gauges.queue["oldest_age_s"])


def _pool_size(_: CallbackOptions) -> Iterable[Observation]:
    for service, pool in list(_gauges.pools.items()):
        yield Observation(pool.get_size(), {"service": service, "state": "open"})
        yield Observation(pool.get_size() - pool.get_idle_size(), {"service": service, "state": "in_use"})
        yield Observation(pool.get_max_size(), {"service": service, "state": "max"})


def _ready(_: CallbackOptions) -> Iterable[Observation]:
    for service, ready in list(_gauges.ready.items()):
        yield Observation(1 if ready else 0, {"service": service})


meter.create_observable_gauge(
    "mnemo.service.ready",
    [_ready],
    unit="1",
    description="1 while a service is ready (its gRPC readiness health is SERVING: its database answers), else 0",
)
meter.create_observable_gauge(
    "mnemo.embed.queue.depth",
    [_queue_depth],
    unit="1",
    description="Chunks in the embedding queue, by state: pending (waiting for a vector) or failed (given up on)",
)
meter.create_observable_gauge(
    "mnemo.embed.queue.oldest_age",
    [_queue_age],
    unit="s",
    description="Age of the oldest pending chunk in the embedding queue (0 when none waits)",
)
meter.create_observable_gauge(
    "mnemo.db.pool.connections",
    [_pool_size],
    unit="1",
    description="A service's PostgreSQL pool, by service and state: open, in_use (acquired) and max",
)


def observe_pool(service: str, pool: Any) -> None:
    """Reports `pool`'s size and use as `service`'s (replacing a pool it had, as a restarted app's)."""
    _gauges.pools[service] = pool


def set_ready(service: str, ready: bool | None) -> None:
    """Reports `service`'s readiness; None when it stops (its series goes away)."""
    if ready is None:
        _gauges.ready.pop(service, None)
    else:
        _gauges.ready[service] = ready


def forget_pool(service: str, pool: Any) -> None:
    if _gauges.pools.get(service) is pool:
        del _gauges.pools[service]


def set_queue(pending: int, failed: int, oldest_age_s: float) -> None:
    """The embedding queue as last sampled (mnemo_ingest's worker samples it every few seconds)."""
    _gauges.queue.update(pending=float(pending), failed=float(failed), oldest_age_s=oldest_age_s)


_registry = CollectorRegistry(auto_describe=True)
_provider: MeterProvider | None = None


def metric_exporter() -> Any:
    """The OTLP metric exporter the environment asks for (OTEL_EXPORTER_OTLP_[METRICS_]PROTOCOL), or None."""
    protocol = otlp_protocol("METRICS")
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter

        return GrpcMetricExporter()
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter

        return HttpMetricExporter()
    return None


def configure_metrics(service_name: str = "mnemo") -> MeterProvider:
    """Installs the process's meter provider once: a Prometheus reader (for /metrics) and, when an
    OTLP endpoint is set, a periodic OTLP export (every OTEL_METRIC_EXPORT_INTERVAL ms, 60 s)."""
    global _provider
    if _provider is None:
        readers: list[MetricReader] = [PrometheusMetricReader(scope_info_enabled=False, registry=_registry)]
        exporter = metric_exporter()
        if exporter is not None:
            readers.append(PeriodicExportingMetricReader(exporter))
        resource = Resource.create(
            {"service.name": os.environ.get("OTEL_SERVICE_NAME", service_name), "service.namespace": "mnemo"}
        )
        _provider = MeterProvider(
            resource=resource,
            metric_readers=readers,
            views=[
                View(
                    instrument_name="mnemo.*.duration",
                    aggregation=ExplicitBucketHistogramAggregation(LATENCY_BUCKETS_S),
                )
            ],
        )
        metrics.set_meter_provider(_provider)
    return _provider


def shutdown_metrics() -> None:
    """Exports what the OTLP reader holds; called at shutdown."""
    if _provider is not None:
        _provider.force_flush(timeout_millis=5000)


def prometheus_text() -> bytes:
    """Every metric of this process in Prometheus' text format (what GET /metrics answers)."""
    configure_metrics()
    return bytes(generate_latest(_registry))


class MetricsServer:
    """A plain HTTP listener answering GET /metrics, for a gRPC service (MNEMO_METRICS_PORT).

    asyncio streams rather than another web framework: it answers one path, to a scraper."""

    name = "metrics"

    def __init__(self, host: str, port: int, render: Callable[[], bytes] = prometheus_text) -> None:
        self.host = host
        self.port = port
        self.render = render
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        configure_metrics()
        try:
            self._server = await asyncio.start_server(self._answer, self.host, self.port)
        except OSError as exc:
            raise OSError(f"metrics: cannot listen on {self.host}:{self.port} (MNEMO_METRICS_PORT): {exc}") from exc
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics_listening", address=f"{self.host}:{self.port}", path="/metrics")

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            method, _, rest = request.decode("latin-1").partition(" ")
            path = rest.split(" ", 1)[0].split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                status, body, kind = "405 Method Not Allowed", b"only GET /metrics\n", "text/plain"
            elif path != "/metrics":
                status, body, kind = "404 Not Found", b"only GET /metrics\n", "text/plain"
            else:
                status, body, kind = "200 OK", await asyncio.to_thread(self.render), PROMETHEUS_CONTENT_TYPE
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode("latin-1") + (body if method != "HEAD" else b""))
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # a scraper that went away or sent nonsense: nothing to answer
        finally:
            writer.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
