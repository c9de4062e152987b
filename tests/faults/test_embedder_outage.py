"""Drill 3: the embedder goes away for three minutes under writes, and refuses one bad input.

Nothing is lost: an outage, however long, leaves every chunk pending (never `failed`) and the
workers pick up where they stopped once the endpoint answers; an input the endpoint refuses fails
alone, not its batch of 32; failed chunks are queued again by `mnemo embed retry` and, after
MNEMO_EMBED_FAILED_RETRY_S, by themselves; no transaction is open while the workers wait on the
model. The endpoint is a real HTTP server (tests/faults/fake_embedder.py) behind the real
OpenAI-compatible client; the settings are the defaults (2 s backoff, 5 attempts: before this
drill, chunks were `failed` for good about 30 s into an outage).
"""

from __future__ import annotations

import asyncio
import time

import asyncpg

from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_embed import OpenAIEmbedder
from tests.faults.fake_embedder import DIMENSION, FakeEmbeddings, fake_embeddings
from tests.helpers import Clients, Postgres, eventually, ids, mnemo, start_stack

OUTAGE_S = 180.0
WRITES = 200
# Idle-in-transaction sessions of the database, other than the checker's own.
IDLE_IN_TRANSACTION = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()
"""


def endpoint(fake: FakeEmbeddings) -> OpenAIEmbedder:
    return OpenAIEmbedder(url=fake.url, model="fake-embed", dimension=DIMENSION, timeout_s=5.0)


async def status(clients: Clients, workspace: str) -> search_pb.GetStatusResponse:
    return await clients.search.GetStatus(search_pb.GetStatusRequest(workspace=workspace))


async def test_a_three_minute_outage_under_writes_loses_nothing_and_fails_nothing(postgres: Postgres) -> None:
    dsn = await postgres.create_database()
    with fake_embeddings() as fake:
        stack = await start_stack(dsn, endpoint(fake))
        clients = Clients(stack)
        conn = await asyncpg.connect(dsn)
        try:
            ws = (await clients.workspace()).id
            before = await clients.write(ws, "written while the embedder answers")
            await clients.wait_embedded(before.id, ws)  # positive control: the pipeline embeds

            fake.down = True
            went_down = time.monotonic()
            # Half the writes at once, the rest spread over the outage.
            first = await asyncio.gather(
                *(clients.write(ws, f"outage note {i} about subject {i * 7919 % 1000}") for i in range(WRITES // 2))
            )
            written = [m.id for m in first]
            spread = (OUTAGE_S - 30) / (WRITES - len(written))
            checks = 0
            while len(written) < WRITES:
                i = len(written)
                written.append((await clients.write(ws, f"outage note {i} about subject {i * 7919 % 1000}")).id)
                await asyncio.sleep(spread)
                if i % 20 == 0:
                    # Not one chunk given up on, and no session waits inside a transaction.
                    assert (await status(clients, ws)).chunks_failed == 0
                    assert await conn.fetchval(IDLE_IN_TRANSACTION) == 0
                    checks += 1
            await asyncio.sleep(max(0.0, OUTAGE_S - (time.monotonic() - went_down)))
            during = await status(clients, ws)
            assert during.chunks_failed == 0
            assert during.chunks_pending == WRITES, "every note written during the outage waits"
            assert fake.dropped > 0, "the workers kept trying the endpoint during the outage"
            assert "fake" in during.last_error or fake.url.split("/v1")[0] in during.last_error
            assert checks >= 5

            fake.down = False
            recovered = time.monotonic()

            async def drained() -> bool:
                now = await status(clients, ws)
                return now.chunks_pending == 0 and now.chunks_embedded == WRITES + 1

            await eventually(drained, timeout=120, interval=1.0)
            drain_s = time.monotonic() - recovered
            after = await status(clients, ws)
            assert after.chunks_failed == 0
            # Every acknowledged note is stored and found by meaning, the last one written included.
            assert after.memories == WRITES + 1
            found = await clients.find(ws, f"outage note {WRITES - 1} about subject {(WRITES - 1) * 7919 % 1000}")
            assert ids(found)[0] == written[-1]
            # The recovery is noticed within the longest wait between tries, plus the drain itself.
            assert drain_s < 30 + 60, f"drained {drain_s:.0f} s after the endpoint came back"
        finally:
            await conn.close()
            await clients.close()
            await stack.stop()


async def test_the_idle_in_transaction_check_sees_an_open_transaction(postgres: Postgres) -> None:
    """The positive control of the check above: a session left inside a transaction is counted."""
    dsn = await postgres.create_database()
    holder, checker = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        assert await checker.fetchval(IDLE_IN_TRANSACTION) == 0
        transaction = holder.transaction()
        await transaction.start()
        await holder.execute("SELECT 1")
        assert await checker.fetchval(IDLE_IN_TRANSACTION) == 1
        await transaction.rollback()
    finally:
        await holder.close()
        await checker.close()


async def test_one_refused_input_fails_alone_and_embed_retry_requeues_it(postgres: Postgres) -> None:
    dsn = await postgres.create_database()
    with fake_embeddings() as fake:
        fake.poison = "POISON-PILL"
        stack = await start_stack(dsn, endpoint(fake), MNEMO_EMBED_BACKOFF_S="0.1", MNEMO_EMBED_MAX_ATTEMPTS="3")
        clients = Clients(stack)
        try:
            ws = (await clients.workspace()).id
            items = [ingest_pb.WriteMemoryRequest(workspace=ws, content=f"good note number {i}") for i in range(31)]
            items.insert(17, ingest_pb.WriteMemoryRequest(workspace=ws, content="a POISON-PILL the endpoint refuses"))
            await clients.ingest.WriteMemories(ingest_pb.WriteMemoriesRequest(items=items))

            async def settled() -> bool:
                now = await status(clients, ws)
                return now.chunks_pending == 0 and now.chunks_embedded + now.chunks_failed == 32

            await eventually(settled, timeout=60, interval=0.2)
            now = await status(clients, ws)
            assert (now.chunks_embedded, now.chunks_failed) == (31, 1)
            assert "refused the input: HTTP 400" in now.last_error
            assert fake.refused >= 1 + 3, "the batch was refused, then the culprit alone on each attempt"
            assert 32 not in fake.batch_sizes and max(fake.batch_sizes) <= 31

            fake.poison = None  # the endpoint fixed: only a retry brings the chunk back
            code, out, err = await mnemo(stack, "embed", "retry", "--workspace", ws)
            assert code == 0, err
            assert "1 failed chunk" in out
            await eventually(lambda: _all_embedded(clients, ws, 32), timeout=30, interval=0.2)
            # A second retry finds nothing to do.
            code, out, _ = await mnemo(stack, "embed", "retry", "--workspace", ws)
            assert code == 0 and "no failed chunks" in out
        finally:
            await clients.close()
            await stack.stop()


async def test_failed_chunks_are_requeued_by_themselves(postgres: Postgres) -> None:
    dsn = await postgres.create_database()
    with fake_embeddings() as fake:
        fake.poison = "POISON-PILL"
        stack = await start_stack(
            dsn,
            endpoint(fake),
            MNEMO_EMBED_BACKOFF_S="0.1",
            MNEMO_EMBED_MAX_ATTEMPTS="2",
            MNEMO_EMBED_FAILED_RETRY_S="3",
        )
        clients = Clients(stack)
        try:
            ws = (await clients.workspace()).id
            good = await clients.write(ws, "a note the endpoint takes")
            await clients.write(ws, "a POISON-PILL note, refused until the endpoint is fixed")
            await clients.wait_embedded(good.id, ws)  # positive control

            async def failed() -> bool:
                return (await status(clients, ws)).chunks_failed == 1

            await eventually(failed, timeout=30, interval=0.2)
            fake.poison = None
            await eventually(lambda: _all_embedded(clients, ws, 2), timeout=30, interval=0.5)
        finally:
            await clients.close()
            await stack.stop()


async def _all_embedded(clients: Clients, workspace: str, count: int) -> bool:
    now = await status(clients, workspace)
    return now.chunks_failed == 0 and now.chunks_pending == 0 and now.chunks_embedded == count
