from __future__ import annotations
import asyncio
import httpx
from mcp.client.client import Client
from mnemo_cli.stack import Stack
from tests.helpers import Clients

API = "/api/v1"

async def test_probe(hash_stack: Stack, hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    def show(tag, r):
        print(f"\n== {tag}: {r.status_code} {r.text[:700]}")
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=30) as h:
        r = await h.post(f"{API}/memories", json={"workspace": ws, "content": "Office in Berlin.", "valid_from": "2020-01-01T00:00:00Z", "valid_to": "2021-01-01T00:00:00Z"}); show("write", r)
        a = r.json()["memory"]["id"]
        r = await h.get(f"{API}/memories/{a}", params={"workspace": ws, "valid_at": "2022-01-01T00:00:00Z"}); show("get valid_at outside", r)
        r = await h.get(f"{API}/memories/{a}", params={"workspace": ws, "valid_at": "2020-06-01T00:00:00Z"}); show("get valid_at inside", r)
        r = await h.get(f"{API}/memories/{a}/history", params={"workspace": ws}); show("hist", r)
        r = await h.post(f"{API}/memories/{a}/retract", json={"workspace": ws, "reason": "x" * 2001}); show("retract long", r)
        r = await h.delete(f"{API}/memories/{a}", params={"workspace": ws, "reason": "x" * 10000}); show("delete long", r)
        r = await h.delete(f"{API}/memories/{a}", params={"workspace": ws, "reason": "a\x00b"}); show("delete nul", r)
        r = await h.post(f"{API}/memories/not-a-uuid/retract", json={"workspace": ws, "reason": "x"}); show("retract bad id", r)
    async with Client(f"{hash_stack.base_url}/mcp?workspace={ws}") as c:
        r = await c.call_tool("memory_supersede", {"id": "nope", "content": "x"}); print("\n== ", r.is_error, r.content[0].text[:300])
        r = await c.call_tool("memory_history", {"id": ""}); print("\n== ", r.is_error, r.content[0].text[:300])
        r = await c.call_tool("memory_delete", {"id": a, "reason": "   "}); print("\n== ", r.is_error, r.content[0].text[:300])
        r = await c.call_tool("memory_search", {"query": "office", "valid_at": 5}); print("\n== ", r.is_error, r.content[0].text[:300])
        r = await c.call_tool("memory_get", {"id": a, "include_history": "maybe"}); print("\n== ", r.is_error, r.content[0].text[:300])
