"""POST /api/v1/memories:batch through the real gateway: each item answered in order, a bad item
(bad JSON shape, bad content, unknown workspace) refused alone in the one error body."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from mnemo_server.stack import Stack
from tests.helpers import Clients, table_counts

API = "/api/v1"


@pytest.fixture(scope="module")
async def http(hash_stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=60) as client:
        yield client


async def test_each_item_is_answered_in_order_and_bad_ones_alone(
    http: httpx.AsyncClient, hash_clients: Clients, hash_stack: Stack
) -> None:
    ws = await hash_clients.workspace()
    items = [
        {"content": "The nightly backup runs at 02:00 UTC from cron on db-1.", "kind": "decision"},
        {"content": "a note of a kind no enum has", "kind": "recipe"},
        {"content": "   "},
        {"content": "a note for a workspace nobody registered", "workspace": f"nowhere-{uuid.uuid4().hex[:6]}"},
        {"content": "Backups are kept for 30 days in the cold bucket.", "tags": ["backup"]},
    ]
    before = await table_counts(hash_stack.dsn)
    response = await http.post(f"{API}/memories:batch", json={"workspace": ws.id, "items": items})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == len(items)
    errors = {i: (r["error"]["code"], r["error"]["reason"]) for i, r in enumerate(results) if "error" in r}
    assert errors == {
        1: ("INVALID_ARGUMENT", "INVALID_ARGUMENT"),
        2: ("INVALID_ARGUMENT", "INVALID_ARGUMENT"),
        3: ("NOT_FOUND", "WORKSPACE_NOT_FOUND"),
    }
    assert "kind" in results[1]["error"]["message"]
    written = [results[0], results[4]]
    assert [r["outcome"] for r in written] == ["created", "created"]
    assert [r["memory"]["kind"] for r in written] == ["decision", "note"]
    assert all(r["memory"]["workspace_id"] == ws.id for r in written)
    after = await table_counts(hash_stack.dsn)
    assert after["memories"] - before["memories"] == 2
    # Visible to search at once, like a single write.
    found = await http.post(
        f"{API}/search", json={"query": "nightly backup cron", "workspace": ws.id, "mode": "lexical"}
    )
    assert [r["id"] for r in found.json()["results"]][:1] == [results[0]["memory"]["id"]]


async def test_a_batch_over_the_limit_is_refused_whole(http: httpx.AsyncClient, hash_stack: Stack) -> None:
    before = await table_counts(hash_stack.dsn)
    items = [{"content": f"note {i}"} for i in range(1001)]
    refused = await http.post(f"{API}/memories:batch", json={"items": items})
    assert refused.status_code == 400 and refused.json()["error"]["reason"] == "INVALID_ARGUMENT"
    assert await table_counts(hash_stack.dsn) == before
    # Positive control: an empty batch is a valid, empty answer.
    empty = await http.post(f"{API}/memories:batch", json={"items": []})
    assert empty.status_code == 200 and empty.json() == {"results": []}
