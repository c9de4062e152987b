"""With nothing exporting spans (no OTLP endpoint, the default), OpenTelemetry's gRPC interceptors
step aside, yet a request's trace id still goes from the gateway through ingest and search, into
every log line of the request and into its audit event: the caller's when it sends a traceparent,
else the one the gateway starts."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from mnemo_embed import HashEmbedder
from tests.e2e.test_processes import Proc, clean_env, free_port, running, wait_serving
from tests.helpers import Postgres, migrate


@pytest.fixture(scope="module")
async def services(postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Any]]:
    """ingest, search and the gateway as separate processes, no OTEL_ variable set."""
    dsn = await postgres.create_database("trace_context")
    await migrate(dsn, HashEmbedder(64))
    targets = {name: f"127.0.0.1:{free_port()}" for name in ("ingest", "search", "gateway", "harvest")}
    http_port = free_port()
    common = {
        "MNEMO_EMBEDDER": "hash",
        "MNEMO_LOG_FORMAT": "json",
        "MNEMO_GRPC_GRACE_S": "1",
        "MNEMO_INGEST_ADDR": targets["ingest"],
        "MNEMO_SEARCH_ADDR": targets["search"],
        "MNEMO_HARVEST_ADDR": targets["harvest"],  # nothing there: the gateway is ready without it
    }
    logs = tmp_path_factory.mktemp("trace_context")
    async with (
        running(["serve", "ingest"], clean_env(**common, MNEMO_DATABASE_URL=dsn), logs / "ingest") as ingest,
        running(["serve", "search"], clean_env(**common, MNEMO_DATABASE_URL=dsn), logs / "search") as search,
        running(
            ["serve", "gateway"],
            clean_env(**common, MNEMO_HTTP_PORT=str(http_port), MNEMO_GATEWAY_GRPC_ADDR=targets["gateway"]),
            logs / "gateway",
        ) as gateway,
    ):
        procs = {"ingest": ingest, "search": search, "gateway": gateway}
        await asyncio.gather(*(wait_serving(procs[name], targets[name]) for name in procs))
        yield {"procs": procs, "base_url": f"http://127.0.0.1:{http_port}"}


def lines(proc: Proc, request_id: str) -> list[dict[str, Any]]:
    """The process's JSON log lines for one request."""
    found = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return [line for line in found if line.get("request_id") == request_id]


async def write(base_url: str, headers: dict[str, str]) -> tuple[str, str]:
    """A note written with `headers`: its request id and memory id."""
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.post(
            "/api/v1/memories", json={"content": f"traced note {secrets.token_hex(4)}"}, headers=headers
        )
    assert response.status_code == 201, response.text
    return response.headers["x-request-id"], response.json()["memory"]["id"]


async def audit_trace(base_url: str, memory_id: str) -> set[str]:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.get("/api/v1/audit", params={"memory": memory_id})
    assert response.status_code == 200, response.text
    return {event["trace_id"] for event in response.json()["events"]}


async def test_the_callers_trace_id_reaches_every_services_lines_and_the_audit_event(services: dict[str, Any]) -> None:
    procs, base_url = services["procs"], services["base_url"]
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    await write(base_url, {})  # the default workspace's first use: not this test's request
    request_id, memory_id = await write(base_url, {"traceparent": f"00-{trace_id}-{span_id}-01"})
    http_lines, ingest_lines = lines(procs["gateway"], request_id), lines(procs["ingest"], request_id)
    assert {line["event"] for line in http_lines} >= {"http_request"}
    assert {line["event"] for line in ingest_lines} >= {"rpc_completed", "memory_written"}
    assert {line.get("trace_id") for line in http_lines + ingest_lines} == {trace_id}
    assert await audit_trace(base_url, memory_id) == {trace_id}
    # The gateway's span is a child of the caller's: the same trace, a span id of its own.
    [request] = [line for line in http_lines if line["event"] == "http_request"]
    assert len(request["span_id"]) == 16 and request["span_id"] not in (span_id, "0" * 16)


async def test_without_a_traceparent_the_gateways_trace_id_is_carried(services: dict[str, Any]) -> None:
    procs, base_url = services["procs"], services["base_url"]
    request_id, memory_id = await write(base_url, {})
    [request] = [line for line in lines(procs["gateway"], request_id) if line["event"] == "http_request"]
    started = request.get("trace_id")
    assert started and len(started) == 32
    assert {line.get("trace_id") for line in lines(procs["ingest"], request_id)} == {started}
    assert await audit_trace(base_url, memory_id) == {started}
    # A second request starts a trace of its own: the trace id is not one fixed value.
    again, _ = await write(base_url, {})
    assert {line.get("trace_id") for line in lines(procs["ingest"], again)} - {started, None}


async def test_a_read_carries_the_callers_trace_id_to_search(services: dict[str, Any]) -> None:
    procs, base_url = services["procs"], services["base_url"]
    trace_id = secrets.token_hex(16)
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        response = await http.post(
            "/api/v1/search",
            json={"query": "traced note", "mode": "lexical"},
            headers={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-00"},
        )
    assert response.status_code == 200, response.text
    searched = lines(procs["search"], response.headers["x-request-id"])
    assert [line["method"] for line in searched if line["event"] == "rpc_completed"] == [
        "/mnemo.search.v1.SearchService/Search"
    ]
    assert {line.get("trace_id") for line in searched} == {trace_id}
