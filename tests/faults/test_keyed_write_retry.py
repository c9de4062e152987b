"""The gateway repeats a keyed write whose answer it did not get (UNAVAILABLE), never an unkeyed one.

Real ingest and search, and the gateway's own Backends and Operations, with a forwarding gRPC proxy
in front of ingest (tests/faults/ingest_proxy.py) that loses the answers of the calls the test names
after ingest has committed them — what a killed ingest replica does to the write in flight.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest

from mnemo_embed import HashEmbedder
from mnemo_gateway.backends import Backends
from mnemo_gateway.errors import CallError
from mnemo_gateway.operations import Operations
from mnemo_gateway.schemas import WorkspaceInput, WriteInput
from mnemo_server.stack import Stack
from tests.faults.ingest_proxy import Proxy
from tests.helpers import Postgres, start_stack

WORKSPACE = "keyed-retry"


@dataclass
class Rig:
    stack: Stack
    proxy: Proxy
    operations: Operations

    async def stored(self, content: str) -> int:
        conn = await asyncpg.connect(self.stack.dsn)
        try:
            return int(await conn.fetchval("SELECT count(*) FROM memories WHERE title = $1", content))
        finally:
            await conn.close()

    async def write(self, content: str, key: str = "") -> dict[str, object]:
        args = WriteInput(content=content, idempotency_key=key)
        return await self.operations.write(args, WORKSPACE, "human")


@pytest.fixture
async def rig(postgres: Postgres) -> AsyncIterator[Rig]:
    stack = await start_stack(await postgres.create_database("keyedretry"), HashEmbedder(64))
    assert stack.ingest is not None and stack.search is not None
    proxy = await Proxy(stack.ingest.target).start()
    backends = Backends(proxy.target, stack.search.target, 5.0)
    operations = Operations(backends, WORKSPACE)
    await operations.add_workspace(WorkspaceInput(name=WORKSPACE))
    try:
        yield Rig(stack, proxy, operations)
    finally:
        await backends.close()
        await proxy.stop()
        await stack.stop()


async def test_a_keyed_write_whose_answer_was_lost_is_repeated_by_the_gateway_and_stored_once(rig: Rig) -> None:
    rig.proxy.calls.clear()
    rig.proxy.lose_next = {"WriteMemory": 1}
    written = await rig.write("the harbour opens at six", key="k-1")
    # Answered: the first try was committed and its answer lost, the repeat found it by its key.
    assert written["outcome"] == "replayed", written
    assert len(rig.proxy.called("WriteMemory")) == 2
    assert await rig.stored("the harbour opens at six") == 1


async def test_an_unkeyed_write_whose_answer_was_lost_is_not_repeated(rig: Rig) -> None:
    rig.proxy.calls.clear()
    rig.proxy.lose_next = {"WriteMemory": 1}
    with pytest.raises(CallError) as refused:
        await rig.write("the ferry leaves at nine")
    # Control beside the keyed test: the same loss, no key — answered 503 after one try, stored once.
    assert refused.value.http_status == 503
    assert len(rig.proxy.called("WriteMemory")) == 1
    assert await rig.stored("the ferry leaves at nine") == 1
