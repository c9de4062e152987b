"""`mnemo up` starts the gateway before the services behind it. A call in that window is refused,
and gRPC then waits out its reconnect backoff (up to 5 s) before dialling again; the stack connects
the gateway to every service before start() returns, so the first call after it is answered."""

from __future__ import annotations

import asyncio

import grpc
import httpx
import pytest

from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo_embed import HashEmbedder
from mnemo_gateway.backends import Backends, call
from mnemo_gateway.errors import CallError
from mnemo_server.stack import Stack, StackConfig
from tests.e2e.test_processes import free_port
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


async def test_connecting_leaves_a_keyed_write_already_retrying_on_a_refused_channel_to_end_as_unavailable() -> None:
    """connect() replaces a refused channel; a keyed write still retrying on the old one must end
    as UNAVAILABLE (a 503 its client retries), not be cancelled (a bare 500)."""
    nowhere = f"127.0.0.1:{free_port()}"
    backends = Backends(nowhere, nowhere, timeout_s=10)
    try:
        assert "ingest" in await backends.down()
        old = backends.keyed
        request = ingest_pb.WriteMemoryRequest(workspace="w", content="a note", idempotency_key="k-1")
        # The keyed channel retries WriteMemory on UNAVAILABLE with backoff, so the call stays in
        # flight for a while on a refused channel.
        writing = asyncio.create_task(call(backends.keyed.WriteMemory, request))
        await asyncio.sleep(0.05)
        assert not writing.done()
        assert await backends.connect(0.2) == ["ingest", "keyed", "search"]
        assert backends.keyed is not old  # control: the refused channel was replaced
        with pytest.raises(CallError) as failed:
            await writing
        assert failed.value.code == grpc.StatusCode.UNAVAILABLE, failed.value.message
    finally:
        await backends.close()
