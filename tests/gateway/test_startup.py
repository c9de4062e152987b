"""`mnemo up` starts the gateway before the services behind it. A call in that window is refused,
and gRPC then waits out its reconnect backoff (up to 5 s) before dialling again; the stack connects
the gateway to every service before start() returns, so the first call after it is answered."""

from __future__ import annotations

import asyncio

import httpx

from mnemo_embed import HashEmbedder
from mnemo_server.stack import Stack, StackConfig
from tests.helpers import Postgres, stack_env

API = "/api/v1"


async def test_a_write_right_after_start_succeeds_though_the_gateway_was_refused_while_starting(
    postgres: Postgres,
) -> None:
    stack = Stack(StackConfig.from_env(stack_env(await postgres.create_database())), embedder=HashEmbedder(64))
    starting = asyncio.create_task(stack.start())
    refused: list[list[str]] = []
    try:
        # Ask the gateway's channels for the services' health from the moment it exists until the
        # stack has started, as an agent's status call in that window does.
        while not starting.done():
            backends = stack.gateway.backends if stack.gateway is not None else None
            if backends is not None:
                down = await backends.down()
                if "ingest" in down:
                    refused.append(down)
            await asyncio.sleep(0.01)
        await starting
        # Control: the window was exercised (ingest refused the gateway at least once), so the
        # channel went through a refused connection and its backoff.
        assert refused, "no call reached the start-up window: nothing was refused"

        async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
            # Each service answers its health check at once (a check is never retried).
            status = await http.get(f"{API}/status")
            assert status.status_code == 200, status.text
            assert status.json()["services_down"] == [], status.json()
            # A write without an idempotency key: never retried by the channel, so it fails if the
            # channel is still waiting to reconnect (a retried call could ride the backoff out).
            written = await http.post(f"{API}/memories", json={"content": "Written the moment start() returned."})
            assert written.status_code == 201, written.text
            found = await http.post(f"{API}/search", json={"query": "moment returned", "mode": "lexical"})
            assert found.status_code == 200, found.text
            assert [hit["id"] for hit in found.json()["results"]] == [written.json()["memory"]["id"]], found.json()
    finally:
        if not starting.done():
            starting.cancel()
        await stack.stop()
