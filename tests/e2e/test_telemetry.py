"""Telemetry of real `mnemo serve` processes: OTLP traces and metrics over gRPC and HTTP, a caller's
trace continued through gateway → service → PostgreSQL, Prometheus /metrics, JSON logs with trace
ids, and the gateway's /readyz.

Ingest, search and the gateway run as separate processes, as in a cluster. Ingest exports over
OTLP/HTTP (`http/protobuf`), search and the gateway over OTLP/gRPC, each to a receiver running in
this test process, so one trace crossing all three proves both transports and the propagation.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1 import trace_pb2

from mnemo_embed import HashEmbedder
from tests.e2e.test_processes import Proc, clean_env, free_port, run_to_exit, running, wait_serving
from tests.helpers import Postgres, eventually, migrate, tool_json

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "observability.md"
DASHBOARD = ROOT / "deploy" / "observability" / "grafana-dashboard.json"
RULES = ROOT / "deploy" / "observability" / "prometheus-rules.yaml"
SERVER = trace_pb2.Span.SPAN_KIND_SERVER
CLIENT = trace_pb2.Span.SPAN_KIND_CLIENT


@dataclass(frozen=True, eq=False)
class Span:
    """A span as a receiver got it: which service sent it and over which transport."""

    service: str
    transport: str
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    attributes: dict[str, Any]


@dataclass
class Received:
    """Everything the receivers were sent: spans, and the names of the metrics, by transport."""

    spans: list[Span] = field(default_factory=list)
    metrics: dict[str, set[str]] = field(default_factory=lambda: {"grpc": set(), "http": set()})
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_spans(self, request: trace_service_pb2.ExportTraceServiceRequest, transport: str) -> None:
        with self.lock:
            for resource in request.resource_spans:
                service = next(
                    (a.value.string_value for a in resource.resource.attributes if a.key == "service.name"), ""
                )
                for scope in resource.scope_spans:
                    for s in scope.spans:
                        self.spans.append(
                            Span(
                                service,
                                transport,
                                s.trace_id.hex(),
                                s.span_id.hex(),
                                s.parent_span_id.hex(),
                                s.name,
                                s.kind,
                                {a.key: _value(a.value) for a in s.attributes},
                            )
                        )

    def add_metrics(self, request: metrics_service_pb2.ExportMetricsServiceRequest, transport: str) -> None:
        with self.lock:
            for resource in request.resource_metrics:
                for scope in resource.scope_metrics:
                    self.metrics[transport].update(m.name for m in scope.metrics)

    def trace(self, trace_id: str) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def all_spans(self) -> list[Span]:
        with self.lock:
            return list(self.spans)


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    async def Export(self, request: Any, context: Any) -> trace_service_pb2.ExportTraceServiceResponse:
        self.received.add_spans(request, "grpc")
        return trace_service_pb2.ExportTraceServiceResponse()


class _MetricsService(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    async def Export(self, request: Any, context: Any) -> metrics_service_pb2.ExportMetricsServiceResponse:
        self.received.add_metrics(request, "grpc")
        return metrics_service_pb2.ExportMetricsServiceResponse()


def _http_receiver(received: Received) -> ThreadingHTTPServer:
    """OTLP/HTTP (binary protobuf): POST /v1/traces and /v1/metrics, as the specification has them."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if self.path == "/v1/traces":
                received.add_spans(trace_service_pb2.ExportTraceServiceRequest.FromString(body), "http")
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            elif self.path == "/v1/metrics":
                received.add_metrics(metrics_service_pb2.ExportMetricsServiceRequest.FromString(body), "http")
                reply = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@dataclass
class Topology:
    """The three processes, where to reach them, and what the receivers got from them."""

    received: Received
    procs: dict[str, Proc]
    targets: dict[str, str]
    metrics_urls: dict[str, str]
    base_url: str


@pytest.fixture(scope="module")
def received() -> Iterator[Received]:
    yield Received()


@pytest.fixture(scope="module")
async def topology(
    received: Received, postgres: Postgres, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Topology]:
    grpc_receiver = grpc.aio.server()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(received), grpc_receiver)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_MetricsService(received), grpc_receiver)
    grpc_port = grpc_receiver.add_insecure_port("127.0.0.1:0")
    await grpc_receiver.start()
    http_receiver = _http_receiver(received)
    threading.Thread(target=http_receiver.serve_forever, daemon=True).start()

    dsn = await postgres.create_database("telemetry")
    await migrate(dsn, HashEmbedder(64))  # so search need not wait for ingest's migration
    targets = {name: f"127.0.0.1:{free_port()}" for name in ("ingest", "search", "gateway", "harvest")}
    metrics_ports = {name: free_port() for name in ("ingest", "search", "gateway")}
    http_port = free_port()
    common = {
        "MNEMO_EMBEDDER": "hash",
        "MNEMO_LOG_FORMAT": "json",
        "MNEMO_GRPC_GRACE_S": "1",
        "MNEMO_EMBED_RESCAN_S": "1",
        "MNEMO_INGEST_ADDR": targets["ingest"],
        "MNEMO_SEARCH_ADDR": targets["search"],
        # Nothing listens there: the gateway reports harvest unreachable, and is ready without it.
        "MNEMO_HARVEST_ADDR": targets["harvest"],
        # Export within a moment rather than every 5 s (spans) and 60 s (metrics).
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
    }
    grpc_endpoint = f"http://127.0.0.1:{grpc_port}"
    envs = {
        "ingest": clean_env(
            **common,
            MNEMO_DATABASE_URL=dsn,
            MNEMO_METRICS_PORT=str(metrics_ports["ingest"]),
            OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{http_receiver.server_port}",
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        ),
        # The default protocol: gRPC.
        "search": clean_env(
            **common,
            MNEMO_DATABASE_URL=dsn,
            MNEMO_METRICS_PORT=str(metrics_ports["search"]),
            OTEL_EXPORTER_OTLP_ENDPOINT=grpc_endpoint,
        ),
        # The signal's own variable wins over the general one.
        "gateway": clean_env(
            **common,
            MNEMO_HTTP_PORT=str(http_port),
            MNEMO_GATEWAY_GRPC_ADDR=targets["gateway"],
            # A second listener, as the Kubernetes manifests give every pod alike.
            MNEMO_METRICS_PORT=str(metrics_ports["gateway"]),
            OTEL_EXPORTER_OTLP_ENDPOINT=grpc_endpoint,
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="grpc",
            OTEL_EXPORTER_OTLP_METRICS_PROTOCOL="grpc",
        ),
    }
    logs = tmp_path_factory.mktemp("telemetry")
    procs: dict[str, Proc] = {}
    try:
        async with (
            running(["serve", "ingest"], envs["ingest"], logs / "ingest") as ingest,
            running(["serve", "search"], envs["search"], logs / "search") as search,
            running(["serve", "gateway"], envs["gateway"], logs / "gateway") as gateway,
        ):
            procs = {"ingest": ingest, "search": search, "gateway": gateway}
            await asyncio.gather(*(wait_serving(procs[name], targets[name]) for name in procs))
            yield Topology(
                received,
                procs,
                targets,
                {name: f"http://127.0.0.1:{port}/metrics" for name, port in metrics_ports.items()},
                f"http://127.0.0.1:{http_port}",
            )
    finally:
        http_receiver.shutdown()
        http_receiver.server_close()
        await grpc_receiver.stop(None)


def traceparent() -> tuple[str, str, str]:
    """A caller's W3C traceparent (sampled), with its trace id and span id."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def one(spans: list[Span], **match: Any) -> Span:
    found = [s for s in spans if all(getattr(s, k) == v for k, v in match.items())]
    assert len(found) == 1, (match, describe(spans))
    return found[0]


def rpc(spans: list[Span], kind: int, method: str) -> Span:
    found = [s for s in spans if s.kind == kind and s.attributes.get("rpc.method") == method]
    assert len(found) == 1, (kind, method, describe(spans))
    return found[0]


def describe(spans: list[Span]) -> list[str]:
    return [f"{s.service}/{s.transport} {s.kind} {s.name} {s.span_id}<-{s.parent_id or 'ROOT'}" for s in spans]


def is_db(span: Span) -> bool:
    return "postgresql" in (span.attributes.get("db.system"), span.attributes.get("db.system.name"))


def chain(span: Span, spans: list[Span]) -> list[Span]:
    """`span`'s ancestors within `spans`, nearest first."""
    by_id = {s.span_id: s for s in spans}
    out = []
    while span.parent_id in by_id:
        span = by_id[span.parent_id]
        out.append(span)
    return out


async def spans_of(received: Received, trace_id: str, ready: Any) -> list[Span]:
    async def arrived() -> bool:
        return bool(ready(received.trace(trace_id)))

    await eventually(arrived, timeout=20)
    return received.trace(trace_id)


def complete(service: str, method: str) -> Any:
    """Whether a trace holds all its parts: the gateway's HTTP and client spans, the service's server
    span and a statement of the service (each process exports a span once it ends, in batches)."""

    def ready(spans: list[Span]) -> bool:
        kinds = {(s.service, s.kind, s.attributes.get("rpc.method")) for s in spans}
        clients = [
            s for s in spans if (s.service, s.kind, s.attributes.get("rpc.method")) == ("mnemo-gateway", CLIENT, method)
        ]
        return (
            bool(clients)
            and (f"mnemo-{service}", SERVER, method) in kinds
            # Every span between the gateway's HTTP span and its client span has arrived too: the
            # gateway exports them in batches, and on a busy machine the middle one came later.
            and any(any(a.service == "mnemo-gateway" and a.kind == SERVER for a in chain(c, spans)) for c in clients)
            and any(is_db(s) and s.service == f"mnemo-{service}" for s in spans)
        )

    return ready


def check_caller_to_database(spans: list[Span], caller_span: str, service: str, method: str, path: str) -> None:
    """caller → gateway HTTP span → gRPC client span → the service's server span → its SQL spans."""
    http = [
        s for s in spans if s.service == "mnemo-gateway" and s.kind == SERVER and s.attributes.get("url.path") == path
    ]
    assert http and all(s.parent_id == caller_span for s in http), describe(spans)
    client = rpc(spans, CLIENT, method)
    server = rpc(spans, SERVER, method)
    assert client.service == "mnemo-gateway" and server.service == f"mnemo-{service}", describe(spans)
    assert server.parent_id == client.span_id
    assert set(chain(client, spans)) & set(http), describe(spans)
    queries = [s for s in spans if is_db(s) and server in chain(s, spans)]
    assert queries, f"no SQL span under {service}/{method}: {describe(spans)}"
    assert all(s.service == f"mnemo-{service}" for s in queries)


async def test_a_callers_trace_runs_through_gateway_and_ingest_to_postgres(topology: Topology) -> None:
    header, trace_id, caller_span = traceparent()
    async with httpx.AsyncClient(base_url=topology.base_url, timeout=30) as http:
        # The default workspace's first use registers it (a retried write): not this test's trace.
        assert (await http.post("/api/v1/memories", json={"content": "warm-up note"})).status_code == 201
        written = await http.post(
            "/api/v1/memories", json={"content": "Traces cross three processes."}, headers={"traceparent": header}
        )
    assert written.status_code == 201, written.text

    spans = await spans_of(topology.received, trace_id, complete("ingest", "WriteMemory"))
    check_caller_to_database(spans, caller_span, "ingest", "WriteMemory", "/api/v1/memories")
    # Ingest's spans came over OTLP/HTTP, the gateway's over OTLP/gRPC: each setting was honoured.
    assert {s.transport for s in spans if s.service == "mnemo-ingest"} == {"http"}
    assert {s.transport for s in spans if s.service == "mnemo-gateway"} == {"grpc"}
    # The gateway's span is named for its route template, not the raw path.
    assert one(spans, service="mnemo-gateway", kind=SERVER).name == "POST /api/v1/memories"

    # Logs are JSON lines carrying the current span's ids: the gateway's request line is its span's.
    gateway_span = one(spans, service="mnemo-gateway", kind=SERVER)
    lines = [json.loads(line) for line in topology.procs["gateway"].stdout.splitlines() if line.startswith("{")]
    requests = [line for line in lines if line.get("event") == "http_request" and line.get("trace_id") == trace_id]
    assert [(r["path"], r["span_id"]) for r in requests] == [("/api/v1/memories", gateway_span.span_id)]
    # And ingest's line for the call is in the same trace, with its own server span's id.
    ingest_span = rpc(spans, SERVER, "WriteMemory")
    calls = [json.loads(line) for line in topology.procs["ingest"].stdout.splitlines() if line.startswith("{")]
    completed = [c for c in calls if c.get("event") == "rpc_completed" and c.get("trace_id") == trace_id]
    assert [(c["method"], c["code"], c["span_id"]) for c in completed] == [
        ("/mnemo.ingest.v1.IngestService/WriteMemory", "OK", ingest_span.span_id)
    ]
    # Positive control: other requests' lines carry other trace ids.
    assert any(line.get("event") == "http_request" and line.get("trace_id") not in (None, trace_id) for line in lines)


async def test_a_caller_that_does_not_sample_is_followed_its_trace_id_kept_in_the_logs(topology: Topology) -> None:
    unsampled, skipped_id, _ = traceparent()
    unsampled = unsampled[:-2] + "00"
    sampled, kept_id, _ = traceparent()
    async with httpx.AsyncClient(base_url=topology.base_url, timeout=30) as http:
        for header in (unsampled, sampled):
            response = await http.post("/api/v1/search", json={"query": "sampling"}, headers={"traceparent": header})
            assert response.status_code == 200, response.text
    # The sampled request came second through the same exporters: once its spans are in, the
    # first request's would be too, had they been recorded.
    await spans_of(topology.received, kept_id, complete("search", "Search"))
    assert topology.received.trace(skipped_id) == []
    # Not recorded, yet the caller's trace id is what the gateway's and search's log lines carry.
    for service in ("gateway", "search"):
        lines = [json.loads(line) for line in topology.procs[service].stdout.splitlines() if line.startswith("{")]
        assert {line.get("trace_id") for line in lines} >= {skipped_id, kept_id}, service


async def test_an_mcp_call_continues_the_callers_trace_through_search(topology: Topology) -> None:
    header, trace_id, caller_span = traceparent()
    http = create_mcp_http_client(headers={"traceparent": header})
    async with Client(streamable_http_client(f"{topology.base_url}/mcp", http_client=http)) as client:
        found = tool_json(await client.call_tool("memory_search", {"query": "three processes", "mode": "lexical"}))
    assert isinstance(found["results"], list)
    spans = await spans_of(topology.received, trace_id, complete("search", "Search"))
    check_caller_to_database(spans, caller_span, "search", "Search", "/mcp")
    assert {s.transport for s in spans if s.service == "mnemo-search"} == {"grpc"}


async def test_background_work_is_traced_in_root_spans_of_its_own(topology: Topology) -> None:
    async with httpx.AsyncClient(base_url=topology.base_url, timeout=30) as http:
        written = await http.post("/api/v1/memories", json={"content": f"to embed {uuid.uuid4().hex}"})
    assert written.status_code == 201, written.text

    def drains(spans: list[Span]) -> list[Span]:
        return [s for s in spans if s.name == "embed.drain" and (s.attributes.get("mnemo.chunks") or 0) > 0]

    async def embedded() -> bool:
        return bool(drains(topology.received.all_spans()))

    await eventually(embedded, timeout=20)
    drain = drains(topology.received.all_spans())[0]
    assert drain.parent_id == "" and drain.service == "mnemo-ingest"
    batch = await spans_of(topology.received, drain.trace_id, lambda got: any(is_db(s) for s in got))
    assert all(s.parent_id for s in batch if s is not drain)
    assert [s for s in batch if is_db(s) and drain in chain(s, batch)], describe(batch)
    # No statement from any service is a trace of its own (readiness probes and the queue sampler
    # record none); the positive control is every statement above, which has a parent.
    database = [s for s in topology.received.all_spans() if is_db(s)]
    assert database and not [s for s in database if not s.parent_id], describe([s for s in database if not s.parent_id])


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the series `name` with (at least) `labels` in Prometheus text, or None."""
    for line in text.splitlines():
        if not line.startswith((name + "{", name + " ")):
            continue
        series, _, value = line.rpartition(" ")
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', series))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(value)
    return None


async def scrape(url: str) -> str:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return response.text


async def test_metrics_are_scraped_from_every_process_and_count_what_was_served(topology: Topology) -> None:
    gateway_metrics = f"{topology.base_url}/metrics"
    writes = {"rpc_service": "mnemo.ingest.v1.IngestService", "rpc_method": "WriteMemory", "rpc_grpc_status_code": "OK"}
    created = {"http_route": "/api/v1/memories", "http_request_method": "POST", "http_response_status_code": "201"}
    async with httpx.AsyncClient(base_url=topology.base_url, timeout=30) as http:
        await http.post("/api/v1/memories", json={"content": "metrics warm-up"})
        before_rpc = sample(
            await scrape(topology.metrics_urls["ingest"]), "mnemo_rpc_server_duration_seconds_count", **writes
        )
        before_http = sample(await scrape(gateway_metrics), "mnemo_http_server_duration_seconds_count", **created)
        ids = []
        for i in range(3):
            response = await http.post("/api/v1/memories", json={"content": f"counted note {i} {uuid.uuid4().hex}"})
            assert response.status_code == 201, response.text
            ids.append(response.json()["memory"]["id"])
        assert (await http.get(f"/api/v1/memories/{ids[0]}")).status_code == 200
        assert (await http.get("/no/such/path")).status_code == 404

    ingest = await scrape(topology.metrics_urls["ingest"])
    gateway = await scrape(gateway_metrics)
    assert before_rpc is not None and before_http is not None
    assert sample(ingest, "mnemo_rpc_server_duration_seconds_count", **writes) == before_rpc + 3
    assert sample(gateway, "mnemo_http_server_duration_seconds_count", **created) == before_http + 3
    # Routes are labelled by template: the memory's id is in no label, the route that took it is.
    assert sample(gateway, "mnemo_http_server_duration_seconds_count", http_route="/api/v1/memories/{memory_id}")
    assert ids[0] not in gateway and "/no/such/path" not in gateway
    assert sample(gateway, "mnemo_http_server_duration_seconds_count", http_route="unmatched")
    assert sample(ingest, "mnemo_service_ready", service="ingest") == 1
    # Pools, per service.
    assert (sample(ingest, "mnemo_db_pool_connections", service="ingest", state="open") or 0) >= 1
    search = await scrape(topology.metrics_urls["search"])
    assert (sample(search, "mnemo_db_pool_connections", service="search", state="max") or 0) >= 1
    assert sample(search, "mnemo_rpc_server_duration_seconds_count", rpc_service="mnemo.search.v1.SearchService")

    # The embedding queue drains: the chunks are counted embedded, and nothing is left pending.
    async def drained() -> bool:
        text = await scrape(topology.metrics_urls["ingest"])
        return (
            (sample(text, "mnemo_embed_chunks_total", outcome="embedded") or 0) >= 4
            and sample(text, "mnemo_embed_queue_depth", state="pending") == 0
            and sample(text, "mnemo_embed_queue_oldest_age_seconds") == 0
        )

    await eventually(drained, timeout=20)

    # Metrics go over OTLP too: ingest's over HTTP, the others' over gRPC.
    async def exported() -> bool:
        got = topology.received.metrics
        return "mnemo.rpc.server.duration" in got["http"] and "mnemo.http.server.duration" in got["grpc"]

    await eventually(exported, timeout=20)

    # Every series the documentation, the dashboard and the alerts name is one these processes serve
    # (harvest's counter is checked by tests/harvest/test_surfaces.py: no harvest runs here).
    scraped = "\n".join([ingest, search, gateway])
    named = set()
    for path in (DOCS, DASHBOARD, RULES):
        named |= set(re.findall(r"\bmnemo_[a-z_]+[a-z](?![.\w])", path.read_text()))
    json.loads(DASHBOARD.read_text())
    assert "mnemo_embed_queue_oldest_age_seconds" in named and "mnemo_db_pool_connections" in named
    missing = {n for n in named if not re.search(rf"^(# TYPE )?{n}\b", scraped, re.MULTILINE)}
    assert missing == {"mnemo_harvest_sessions_total"}, missing


async def test_the_metrics_port_answers_only_get_metrics(topology: Topology) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.get(topology.metrics_urls["ingest"])).status_code == 200  # the positive control
        assert (await http.get(topology.metrics_urls["ingest"].replace("/metrics", "/other"))).status_code == 404
        assert (await http.post(topology.metrics_urls["ingest"])).status_code == 405
    # The gateway's own listener serves what its HTTP port's /metrics does.
    on_port = await scrape(topology.metrics_urls["gateway"])
    assert sample(on_port, "mnemo_http_server_duration_seconds_count", http_route="/api/v1/memories")
    assert sample(on_port, "mnemo_service_ready", service="gateway") == 1


async def test_readyz_names_the_backend_that_is_down_and_healthz_stays_up(topology: Topology) -> None:
    async with httpx.AsyncClient(base_url=topology.base_url, timeout=30) as http:
        ready = await http.get("/readyz")
        assert ready.status_code == 200, ready.text
        body = ready.json()
        assert body["status"] == "ok" and body["down"] == []
        assert body["backends"]["ingest"] == body["backends"]["search"] == "SERVING"
        # Harvest is reported, not required.
        assert body["backends"]["harvest"].startswith("unreachable")
        schema = (await http.get("/api/v1/openapi.json")).json()
        assert (
            "/healthz" not in schema["paths"] and "/readyz" not in schema["paths"] and "/metrics" not in schema["paths"]
        )
        assert "/api/v1/memories" in schema["paths"]  # the positive control

        search = topology.procs["search"]
        search.process.terminate()
        assert await asyncio.wait_for(search.process.wait(), timeout=15) == 0, search.output()
        down = await http.get("/readyz")
        assert down.status_code == 503, down.text
        assert down.json()["status"] == "unavailable" and down.json()["down"] == ["search"]
        assert down.json()["backends"]["search"].startswith("unreachable")
        assert down.json()["backends"]["ingest"] == "SERVING"
        assert (await http.get("/healthz")).status_code == 200


async def test_an_unknown_otlp_protocol_is_refused_in_one_line(tmp_path: Path) -> None:
    env = clean_env(
        MNEMO_EMBEDDER="hash",
        MNEMO_DATABASE_URL="postgresql://nobody@127.0.0.1:1/none",
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4317",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/json",
    )
    proc = await run_to_exit(["serve", "ingest"], env, tmp_path)
    assert proc.process.returncode == 2, proc.output()
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "OTEL_EXPORTER_OTLP_PROTOCOL='http/json'" in lines[0], proc.output()
    assert "grpc, http/protobuf" in lines[0] and "Traceback" not in proc.output()
