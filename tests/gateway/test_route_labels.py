"""Requests are labelled with their route's template, looked up once per path and remembered: the
memo never answers one path with another's template, however often it fills and empties."""

from __future__ import annotations

import uuid

import httpx
import pytest

from mnemo_gateway import http as gateway_http
from mnemo_server.stack import Stack
from tests.e2e.test_telemetry import sample

DURATIONS = "mnemo_http_server_duration_seconds_count"


async def counts(http: httpx.AsyncClient) -> dict[tuple[str, str, str], float]:
    text = (await http.get("/metrics")).text
    routes = [
        ("/api/v1/memories/{memory_id}", "GET", "404"),
        ("/api/v1/memories", "POST", "201"),
        ("/api/v1/workspaces", "GET", "200"),
        ("unmatched", "GET", "404"),
    ]
    return {
        (route, method, status): sample(
            text, DURATIONS, http_route=route, http_request_method=method, http_response_status_code=status
        )
        or 0.0
        for route, method, status in routes
    }


async def test_each_path_gets_its_own_template_while_the_memo_fills_and_empties(
    hash_stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gateway_http, "ROUTE_MEMO", 2)
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=30) as http:
        before = await counts(http)
        for _ in range(2):  # the second time round, every path may be remembered (or emptied out)
            for _ in range(3):
                assert (await http.get(f"/api/v1/memories/{uuid.uuid4()}")).status_code == 404
            written = await http.post("/api/v1/memories", json={"content": f"labelled {uuid.uuid4()}"})
            assert written.status_code == 201
            assert (await http.get("/api/v1/workspaces")).status_code == 200
            assert (await http.get(f"/no/such/{uuid.uuid4()}")).status_code == 404
        after = await counts(http)
    grown = {key: after[key] - before[key] for key in after}
    assert grown == {
        ("/api/v1/memories/{memory_id}", "GET", "404"): 6,
        ("/api/v1/memories", "POST", "201"): 2,
        ("/api/v1/workspaces", "GET", "200"): 2,
        ("unmatched", "GET", "404"): 2,
    }
