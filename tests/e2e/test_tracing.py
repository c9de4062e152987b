"""One trace spans gateway → service → database, for REST and for MCP, without user content in spans."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import httpx
import pytest
from mcp.client.client import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from mnemo_embed import HashEmbedder
from mnemo_platform.telemetry import configure_tracing
from mnemo_server.stack import Stack
from tests.helpers import Clients, Postgres, eventually, start_stack

INGEST = "mnemo.ingest.v1.IngestService"
SEARCH = "mnemo.search.v1.SearchService"


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    """Every finished span of this process, installed before this module's stack starts."""
    spans = InMemorySpanExporter()
    provider = configure_tracing("test", extra_processor=SimpleSpanProcessor(spans))
    # If anything had installed another global provider first, our exporter would see nothing.
    assert trace.get_tracer_provider() is provider
    yield spans
    # A processor cannot be removed from the provider: stop keeping the rest of the session's spans.
    spans.shutdown()


@pytest.fixture(scope="module")
async def traced_stack(exporter: InMemorySpanExporter, postgres: Postgres) -> AsyncIterator[Stack]:
    stack = await start_stack(await postgres.create_database("trace"), HashEmbedder(64))
    # Registered up front: the gateway's first use of the default workspace registers it and
    # retries (two WriteMemory calls), which is not the one-call trace these tests examine.
    clients = Clients(stack)
    await clients.workspace("default")
    await clients.close()
    yield stack
    await stack.stop()


def is_db(span: ReadableSpan) -> bool:
    attributes = span.attributes or {}
    return attributes.get("db.system") == "postgresql" or attributes.get("db.system.name") == "postgresql"


def rpc_span(spans: Sequence[ReadableSpan], kind: SpanKind, service: str, method: str) -> ReadableSpan:
    matches = [
        s
        for s in spans
        if s.kind == kind
        and (s.attributes or {}).get("rpc.service") == service
        and (s.attributes or {}).get("rpc.method") == method
    ]
    assert len(matches) == 1, (kind, service, method, describe(spans))
    return matches[0]


def describe(spans: Sequence[ReadableSpan]) -> list[str]:
    return [f"{s.kind.name} {s.name} trace={s.context.trace_id:032x}" for s in spans]


def ancestors(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[ReadableSpan]:
    chain = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        chain.append(span)
    return chain


def every_attribute_value(span: ReadableSpan) -> list[str]:
    values = [str(v) for v in (span.attributes or {}).values()]
    for event in span.events:
        values += [str(v) for v in (event.attributes or {}).values()]
    return values


async def http_server_span(exporter: InMemorySpanExporter, path: str, request_id: str | None = None) -> ReadableSpan:
    """The gateway's span for the request; it ends just after the response is sent, so wait for it."""

    def matching() -> list[ReadableSpan]:
        return [
            s
            for s in exporter.get_finished_spans()
            if s.kind == SpanKind.SERVER
            and (s.attributes or {}).get("url.path") == path
            and (request_id is None or (s.attributes or {}).get("mnemo.request_id") == request_id)
        ]

    async def present() -> bool:
        return bool(matching())

    await eventually(present, timeout=10)
    return matching()[-1]


def check_one_trace(
    exporter: InMemorySpanExporter, http: ReadableSpan, service: str, method: str, secret: str
) -> list[ReadableSpan]:
    """HTTP server span → gRPC client span → gRPC server span → SQL spans, all in one trace."""
    trace_id = http.context.trace_id
    spans = [s for s in exporter.get_finished_spans() if s.context.trace_id == trace_id]
    by_id = {s.context.span_id: s for s in spans}

    client = rpc_span(spans, SpanKind.CLIENT, service, method)
    server = rpc_span(spans, SpanKind.SERVER, service, method)
    # The server span is the remote child of the client span; both hang under the HTTP span.
    assert server.parent is not None and server.parent.span_id == client.context.span_id
    assert http in ancestors(client, by_id), describe(spans)

    queries = [s for s in spans if is_db(s) and server in ancestors(s, by_id)]
    assert queries, f"no asyncpg span under {service}/{method}: {describe(spans)}"
    # Positive control for the check below: SQL spans do carry the statement (with $n placeholders).
    assert all((s.attributes or {}).get("db.statement") or (s.attributes or {}).get("db.query.text") for s in queries)
    for span in queries:
        assert "db.statement.parameters" not in (span.attributes or {}), span.attributes
    # No span of the trace carries the user's text in any attribute or event.
    for span in spans:
        assert not [v for v in every_attribute_value(span) if secret in v], (span.name, span.attributes)
    return spans


async def test_a_rest_write_is_one_trace_from_http_through_ingest_to_postgres(
    traced_stack: Stack, exporter: InMemorySpanExporter
) -> None:
    secret = f"marmalade-{uuid.uuid4().hex[:10]}"
    request_id = f"trace-test-{uuid.uuid4().hex[:8]}"
    exporter.clear()
    async with httpx.AsyncClient(base_url=traced_stack.base_url) as http:
        response = await http.post(
            "/api/v1/memories",
            json={"content": f"The release train leaves on Thursdays ({secret}).", "title": "Release cadence"},
            headers={"x-request-id": request_id},
        )
    assert response.status_code == 201, response.text
    assert response.headers["x-request-id"] == request_id

    server_span = await http_server_span(exporter, "/api/v1/memories", request_id)
    assert server_span.attributes["http.response.status_code"] == 201  # type: ignore[index]
    spans = check_one_trace(exporter, server_span, INGEST, "WriteMemory", secret)
    print(f"\nREST write: {len(spans)} spans in trace {server_span.context.trace_id:032x}")

    # Positive control for "no user content in spans": the text really went through and was stored.
    async with httpx.AsyncClient(base_url=traced_stack.base_url) as http:
        found = await http.post("/api/v1/search", json={"query": secret, "mode": "lexical"})
    assert [hit["id"] for hit in found.json()["results"]] == [response.json()["memory"]["id"]]


async def test_an_mcp_search_is_one_trace_from_http_through_search_to_postgres(
    traced_stack: Stack, exporter: InMemorySpanExporter
) -> None:
    secret = f"quince-{uuid.uuid4().hex[:10]}"
    async with httpx.AsyncClient(base_url=traced_stack.base_url) as http:
        written = await http.post("/api/v1/memories", json={"content": f"Deploys need the {secret} flag set."})
    assert written.status_code == 201, written.text

    async with Client(f"{traced_stack.base_url}/mcp", mode="legacy") as client:
        exporter.clear()
        result = await client.call_tool("memory_search", {"query": secret, "mode": "lexical"})
    assert not result.is_error, result.content
    payload: dict[str, Any] = json.loads(result.content[0].text)
    assert [hit["id"] for hit in payload["results"]] == [written.json()["memory"]["id"]]

    async def search_served() -> bool:
        return any(
            s.kind == SpanKind.SERVER and (s.attributes or {}).get("rpc.method") == "Search"
            for s in exporter.get_finished_spans()
        )

    await eventually(search_served, timeout=10)
    search_server = next(
        s
        for s in exporter.get_finished_spans()
        if s.kind == SpanKind.SERVER and (s.attributes or {}).get("rpc.method") == "Search"
    )
    # The HTTP span of the tools/call POST: the one /mcp server span in the Search call's trace.
    await http_server_span(exporter, "/mcp")
    mcp_spans = [
        s
        for s in exporter.get_finished_spans()
        if s.kind == SpanKind.SERVER
        and (s.attributes or {}).get("url.path") == "/mcp"
        and s.context.trace_id == search_server.context.trace_id
    ]
    assert len(mcp_spans) == 1, describe(exporter.get_finished_spans())
    spans = check_one_trace(exporter, mcp_spans[0], SEARCH, "Search", secret)
    print(f"\nMCP search: {len(spans)} spans in trace {mcp_spans[0].context.trace_id:032x}")
