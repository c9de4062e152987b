"""A database outage is UNAVAILABLE (503), never a crash, and Mnemo recovers when it returns."""

from __future__ import annotations

import asyncio

import asyncpg
import httpx

from mnemo_embed import HashEmbedder
from tests.helpers import eventually, scratch_dir, start_stack


async def test_database_outage_is_unavailable_and_recovers() -> None:
    from mnemo_store.embedded import open_server

    pgdata = scratch_dir("out-") / "pg"
    server = await asyncio.to_thread(open_server, pgdata, "stop")
    stack = await start_stack(server.get_uri(), HashEmbedder(64))
    try:
        async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
            written = await http.post("/api/v1/memories", json={"content": "the outage drill note"})
            assert written.status_code == 201
            assert (await http.get("/readyz")).status_code == 200  # the positive control for the 503 below

            await asyncio.to_thread(server.cleanup)  # PostgreSQL stops: every pooled connection dies
            search = await http.post("/api/v1/search", json={"query": "outage drill", "mode": "lexical"})
            assert search.status_code == 503, search.text
            assert search.json()["error"]["code"] == "UNAVAILABLE"
            assert "unavailable" in search.json()["error"]["message"]
            write = await http.post("/api/v1/memories", json={"content": "written during the outage"})
            assert write.status_code == 503 and write.json()["error"]["code"] == "UNAVAILABLE"
            assert (await http.get("/healthz")).status_code == 200  # the gateway itself is alive

            # Readiness follows the database: each service's check fails within its interval.
            async def unready() -> bool:
                response = await http.get("/readyz")
                return response.status_code == 503 and response.json()["down"] == ["ingest", "search"]

            await eventually(unready, timeout=15)
            assert (await http.get("/readyz")).json()["backends"]["ingest"] == "NOT_SERVING"
            # Readiness is a metric too (one process here, as under `mnemo up`: the gateway's /metrics has all).
            assert 'mnemo_service_ready{service="ingest"} 0.0' in (await http.get("/metrics")).text

            server = await asyncio.to_thread(open_server, pgdata, "stop")

            async def recovered() -> bool:
                response = await http.post("/api/v1/search", json={"query": "outage drill", "mode": "lexical"})
                return response.status_code == 200 and len(response.json()["results"]) == 1

            await eventually(recovered, timeout=30)

            async def ready() -> bool:
                return (await http.get("/readyz")).status_code == 200

            await eventually(ready, timeout=15)
            assert 'mnemo_service_ready{service="ingest"} 1.0' in (await http.get("/metrics")).text
            # Nothing written during the outage was half-stored.
            conn = await asyncpg.connect(server.get_uri())
            try:
                assert await conn.fetchval("SELECT count(*) FROM memories WHERE title LIKE 'written during%'") == 0
                assert await conn.fetchval("SELECT count(*) FROM memories") == 1
            finally:
                await conn.close()
    finally:
        await stack.stop()
        await asyncio.to_thread(server.cleanup)
