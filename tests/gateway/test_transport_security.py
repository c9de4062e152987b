"""The gateway checks Host and Origin (DNS-rebinding protection: the MCP SDK's transport security settings)
against loopback plus MNEMO_HTTP_ALLOWED_HOSTS on /mcp and REST alike, and answers in the one JSON error shape."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from mnemo_embed import HashEmbedder
from mnemo_server.stack import Stack
from tests.helpers import MCP_HEADERS, Postgres, start_stack

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}


@pytest.fixture(scope="module")
async def allowing(postgres: Postgres) -> AsyncIterator[Stack]:
    """A stack that also accepts the name mnemo.example (as behind a reverse proxy)."""
    stack = await start_stack(
        await postgres.create_database("transport"), HashEmbedder(64), MNEMO_HTTP_ALLOWED_HOSTS="mnemo.example"
    )
    yield stack
    await stack.stop()


async def initialize(stack: Stack, headers: dict[str, str], content: bytes | None = None) -> httpx.Response:
    async with httpx.AsyncClient(base_url=stack.base_url) as http:
        if content is not None:
            return await http.post("/mcp", content=content, headers={**MCP_HEADERS, **headers})
        return await http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **headers})


def assert_refused(response: httpx.Response, status: int, code: str, fragment: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code and fragment in error["message"], error
    # A refused Host or Origin has no finer reason than its code; a wrong Content-Type is bad input.
    assert error["reason"] == {"PERMISSION_DENIED": "UNSPECIFIED", "INVALID_ARGUMENT": "INVALID_ARGUMENT"}[code], error


@pytest.mark.parametrize(
    ("headers", "status", "fragment"),
    [
        ({"host": "evil.example"}, 421, "Host header is not allowed (DNS-rebinding protection): 'evil.example'"),
        ({"host": "evil.example:8420"}, 421, "'evil.example:8420'; add the name to MNEMO_HTTP_ALLOWED_HOSTS"),
        ({"host": "127.0.0.1.evil.example"}, 421, "Host header is not allowed"),
        ({"origin": "http://evil.example"}, 403, "Origin header is not allowed (DNS-rebinding protection)"),
        ({"origin": "https://127.0.0.1.evil.example:443"}, 403, "Origin header is not allowed"),
        ({"origin": "null"}, 403, "Origin header is not allowed"),
    ],
)
async def test_a_foreign_host_or_origin_is_refused_with_a_json_error(
    hash_stack: Stack, headers: dict[str, str], status: int, fragment: str
) -> None:
    assert_refused(await initialize(hash_stack, headers), status, "PERMISSION_DENIED", fragment)


@pytest.mark.parametrize(
    "headers",
    [{}, {"origin": "http://127.0.0.1:3000"}, {"origin": "http://localhost:5173"}, {"host": "localhost:8420"}],
)
async def test_loopback_hosts_and_origins_are_served(hash_stack: Stack, headers: dict[str, str]) -> None:
    # The positive control: the same request from loopback is answered.
    response = await initialize(hash_stack, headers)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["serverInfo"]["name"] == "mnemo"


async def test_a_non_json_content_type_is_a_json_400(hash_stack: Stack) -> None:
    response = await initialize(hash_stack, {"content-type": "text/plain"}, content=b"{}")
    assert_refused(response, 400, "INVALID_ARGUMENT", "Content-Type must be application/json")


async def test_the_allow_list_admits_a_configured_name(allowing: Stack) -> None:
    for headers in ({"host": "mnemo.example"}, {"host": "mnemo.example:443", "origin": "https://mnemo.example"}):
        response = await initialize(allowing, headers)
        assert response.status_code == 200, (headers, response.text)
    # Only that name: another is still refused on the same stack.
    assert_refused(await initialize(allowing, {"host": "other.example"}), 421, "PERMISSION_DENIED", "other.example")


@pytest.mark.parametrize("path", ["/api/v1/workspaces", "/api/v1/openapi.json", "/api/v1/docs"])
async def test_rest_checks_the_host_too(hash_stack: Stack, path: str) -> None:
    # In local mode there is no token: a page that rebinds its own name to 127.0.0.1 would read every memory.
    async with httpx.AsyncClient(base_url=hash_stack.base_url) as http:
        refused = await http.get(path, headers={"host": "evil.example:8420"})
        assert_refused(refused, 421, "PERMISSION_DENIED", "'evil.example:8420'")
        refused = await http.get(path, headers={"origin": "http://evil.example"})
        assert_refused(refused, 403, "PERMISSION_DENIED", "'http://evil.example'")
        assert (await http.get(path)).status_code == 200  # the positive control


async def test_health_readiness_and_metrics_answer_any_host(hash_stack: Stack) -> None:
    # Orchestrators probe, and Prometheus scrapes, by pod IP.
    async with httpx.AsyncClient(base_url=hash_stack.base_url) as http:
        response = await http.get("/healthz", headers={"host": "10.1.2.3:8420"})
        assert response.status_code == 200 and response.json() == {"status": "ok"}
        ready = await http.get("/readyz", headers={"host": "10.1.2.3:8420"})
        assert ready.status_code == 200 and ready.json()["status"] == "ok"
        scraped = await http.get("/metrics", headers={"host": "10.1.2.3:8420"})
        assert scraped.status_code == 200 and "mnemo_http_server_duration_seconds" in scraped.text
        # The positive control: any other path refuses that host.
        assert (await http.get("/api/v1/status", headers={"host": "10.1.2.3:8420"})).status_code == 421
