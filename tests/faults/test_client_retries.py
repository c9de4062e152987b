"""Clients retry safely: the CLI gives every write an idempotency key and retries it through a
PostgreSQL outage (503s) within its budget; a repeat with the same key answers the first write."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import httpx

from mnemo_embed import HashEmbedder
from mnemo_server.stack import Stack
from tests.helpers import mnemo, scratch_dir, start_stack


async def test_a_cli_write_during_a_database_outage_lands_once_when_it_returns() -> None:
    from mnemo_store.embedded import open_server

    pgdata = scratch_dir("retry-") / "pg"
    server = await asyncio.to_thread(open_server, pgdata, "stop")
    stack = await start_stack(server.get_uri(), HashEmbedder(64))
    try:
        async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
            assert (await http.post("/api/v1/workspaces", json={"name": "retry-drill"})).status_code in (200, 201)
            await asyncio.to_thread(server.cleanup)  # PostgreSQL stops
            # What a client without retries meets meanwhile: 503, nothing written.
            plain = await http.post("/api/v1/memories", json={"workspace": "retry-drill", "content": "no retry"})
            assert plain.status_code == 503

            text = f"written through an outage {uuid.uuid4().hex[:6]}"
            cli = asyncio.create_task(mnemo(stack, "write", text, "--workspace", "retry-drill"))
            await asyncio.sleep(3)
            assert not cli.done(), "the CLI should still be retrying while the database is down"
            server = await asyncio.to_thread(open_server, pgdata, "stop")
            code, out, err = await asyncio.wait_for(cli, timeout=60)
            assert code == 0, err
            assert out.startswith("created:"), out

            conn = await asyncpg.connect(server.get_uri())
            try:
                contents = await conn.fetch("SELECT content FROM memory_versions")
            finally:
                await conn.close()
            assert [r["content"] for r in contents] == [text]
    finally:
        await stack.stop()
        await asyncio.to_thread(server.cleanup)


async def test_a_repeated_key_answers_the_first_write(hash_stack: Stack) -> None:
    name = f"retry-key-{uuid.uuid4().hex[:8]}"
    code, _, err = await mnemo(hash_stack, "workspace", "add", "--name", name)
    assert code == 0, err
    key = f"k-{uuid.uuid4().hex}"
    first = await mnemo(hash_stack, "write", "keyed note", "--workspace", name, "--idempotency-key", key)
    again = await mnemo(hash_stack, "write", "keyed note", "--workspace", name, "--idempotency-key", key)
    assert first[0] == 0 and first[1].startswith("created:"), first
    assert again[0] == 0 and again[1].startswith("replayed:"), again
    assert first[1].split()[1] == again[1].split()[1]  # the same memory id
    # Positive control: without the key, a second run is a second write.
    other = await mnemo(hash_stack, "write", "keyed note", "--workspace", name)
    assert other[0] == 0 and other[1].startswith("created:") and other[1].split()[1] != first[1].split()[1]
