"""The embedding queue: woken by NOTIFY, rescanned, leased between replicas, no lock while the model
runs, failures never lost."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import numpy as np
import pytest

from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_embed import HashEmbedder, OpenAIEmbedder
from mnemo_ingest.settings import IngestSettings
from mnemo_ingest.worker import EmbeddingWorkers
from mnemo_store import embed_queue, open_pool
from tests.helpers import Clients, GatedEmbedder, Postgres, eventually, ids, start_stack


async def test_a_write_is_embedded_promptly_after_notify(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    memory = await hash_clients.write(ws.id, "notify wakes the embedding worker")
    # The rescan interval in tests is 1 s; a NOTIFY-driven embed normally lands well before it.
    await hash_clients.wait_embedded(memory.id, ws.id, timeout=10)
    found = ids(await hash_clients.find(ws.id, "notify wakes the embedding worker", mode="semantic"))
    assert found[0] == memory.id


async def test_the_rescan_embeds_chunks_that_no_notify_announced(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    memory = await hash_clients.write(ws.id, "a memory whose chunk we re-queue by hand")
    await hash_clients.wait_embedded(memory.id, ws.id)
    conn = await asyncpg.connect(hash_clients.stack.dsn)
    try:
        # Back to pending without a NOTIFY: only the periodic rescan can find it.
        async with conn.transaction():
            await conn.execute("DELETE FROM chunk_vectors WHERE memory_id = $1", memory.id)
            await conn.execute(
                "INSERT INTO embed_queue (chunk_id) SELECT id FROM chunks WHERE memory_id = $1", memory.id
            )
        assert await conn.fetchval("SELECT count(*) FROM chunk_vectors WHERE memory_id = $1", memory.id) == 0

        async def embedded() -> bool:
            queued = await conn.fetchval(
                "SELECT count(*) FROM embed_queue q JOIN chunks c ON c.id = q.chunk_id WHERE c.memory_id = $1",
                memory.id,
            )
            vectors = await conn.fetchval("SELECT count(*) FROM chunk_vectors WHERE memory_id = $1", memory.id)
            return queued == 0 and vectors == 1

        await eventually(embedded, timeout=15)
    finally:
        await conn.close()


class CountingEmbedder(HashEmbedder):
    """The hash embedder, counting what it embeds (an external dependency's stand-in, not ours)."""

    def __init__(self) -> None:
        super().__init__(64)
        self.texts: list[str] = []

    async def embed(self, texts: list[str]) -> list[np.ndarray]:
        self.texts.extend(texts)
        await asyncio.sleep(0.01)  # let the replicas interleave
        return await super().embed(texts)


async def test_two_replicas_share_the_queue_and_embed_each_chunk_once(postgres: Postgres) -> None:
    dsn = await postgres.create_database()
    first_embedder = CountingEmbedder()
    # The stack's own worker is replica 1; a second EmbeddingWorkers on the same database is replica 2.
    stack = await start_stack(dsn, first_embedder)
    clients = Clients(stack)
    second_embedder = CountingEmbedder()
    second_embedder.start()
    pool = await open_pool(dsn)
    replica = EmbeddingWorkers(pool, dsn, second_embedder, IngestSettings(embed_workers=2, embed_rescan_s=1), 4)
    await replica.start()
    try:
        ws = await clients.workspace()
        memories = await asyncio.gather(*(clients.write(ws.id, f"queue item number {i} of many") for i in range(60)))
        for memory in memories:
            await clients.wait_embedded(memory.id, ws.id)
        embedded = first_embedder.texts + second_embedder.texts
        assert len(embedded) == 60 and len(set(embedded)) == 60
        assert first_embedder.texts and second_embedder.texts, "both replicas should have taken work"
    finally:
        await replica.stop()
        await pool.close()
        await clients.close()
        await stack.stop()


async def test_an_unreachable_embedder_leaves_chunks_waiting_never_failed(postgres: Postgres) -> None:
    dsn = await postgres.create_database()
    # Nothing listens on port 9: every call fails as an unreachable embedding endpoint would. That
    # says nothing about the chunk, so it counts no attempt however many tries fail (refused
    # inputs, which do count, are tests/faults/test_embedder_outage.py's).
    dead = OpenAIEmbedder(url="http://127.0.0.1:9/v1", model="dead-model", dimension=64, timeout_s=0.2)
    stack = await start_stack(
        dsn, dead, MNEMO_EMBED_MAX_ATTEMPTS="2", MNEMO_EMBED_BACKOFF_S="0.05", MNEMO_EMBED_OUTAGE_MAX_DELAY_S="0.2"
    )
    clients = Clients(stack)
    try:
        ws = await clients.workspace()
        memory = await clients.write(ws.id, "this chunk waits for the embedder")
        conn = await asyncpg.connect(dsn)
        try:
            query = (
                "SELECT q.attempts, q.failed, q.error, v.content FROM embed_queue q JOIN chunks c ON c.id = q.chunk_id "
                "JOIN memory_versions v ON v.memory_id = c.memory_id WHERE c.memory_id = $1"
            )

            async def tried() -> bool:
                return (await conn.fetchrow(query, memory.id))["error"] is not None

            await eventually(tried, timeout=30)
            # Long past two attempts' worth of backoff: still waiting, not given up on.
            await asyncio.sleep(2.0)
            row = await conn.fetchrow(query, memory.id)
        finally:
            await conn.close()
        assert (row["attempts"], row["failed"]) == (0, False)
        assert "127.0.0.1:9" in row["error"]
        # Never lost: the content is stored, lexical search finds it, status reports why it waits.
        assert row["content"] == "this chunk waits for the embedder"
        assert ids(await clients.find(ws.id, "waits for the embedder", mode="lexical")) == [memory.id]
        status = await clients.search.GetStatus(search_pb.GetStatusRequest(workspace=ws.id))
        assert (status.chunks_pending, status.chunks_failed, status.chunks_embedded) == (1, 0, 0)
        assert "127.0.0.1:9" in status.last_error
    finally:
        await clients.close()
        await stack.stop()


@pytest.mark.parametrize("mode", ["hybrid"])
async def test_with_the_embedder_down_hybrid_answers_from_lexical_and_says_so(postgres: Postgres, mode: str) -> None:
    dsn = await postgres.create_database()
    dead = OpenAIEmbedder(url="http://127.0.0.1:9/v1", model="dead-model", dimension=64, timeout_s=0.2)
    stack = await start_stack(dsn, dead)
    clients = Clients(stack)
    try:
        ws = await clients.workspace()
        memory = await clients.write(ws.id, "the lexical leg still answers when vectors cannot")
        response = await clients.find(ws.id, "lexical leg answers", mode=mode)
        assert ids(response) == [memory.id]
        assert len(response.degraded) == 1 and response.degraded[0].startswith("semantic:")
        assert "127.0.0.1:9" in response.degraded[0]
        lexical_only = await clients.find(ws.id, "lexical leg answers", mode="lexical")
        assert ids(lexical_only) == [memory.id] and list(lexical_only.degraded) == []
    finally:
        await clients.close()
        await stack.stop()


async def test_inference_holds_no_lock_and_the_next_batch_is_claimed_and_tokenised_meanwhile(
    postgres: Postgres,
) -> None:
    dsn = await postgres.create_database()
    gated = GatedEmbedder()
    stack = await start_stack(dsn, gated, MNEMO_EMBED_BATCH_SIZE="2")
    clients = Clients(stack)
    conn = await asyncpg.connect(dsn)
    try:
        ws = await clients.workspace()
        memories = [await clients.write(ws.id, f"a note the slow model is working on, number {i}") for i in range(5)]
        gated.loaded.set()
        await asyncio.wait_for(gated.started.wait(), timeout=15)

        async def claimed() -> int:
            return await conn.fetchval(
                "SELECT count(*) FROM embed_queue WHERE NOT failed AND embed_after > now() + interval '1 min'"
            )

        async def two_batches_claimed() -> bool:
            return await claimed() == 4

        # One batch in the model, the next already claimed: four chunks leased, the fifth waits.
        await eventually(two_batches_claimed, timeout=15)

        async def next_batch_handed_over() -> bool:
            return len(gated.entered) == 2

        # The next batch is already with the embedder (where the local model tokenises it, then
        # waits for the current batch's run), while the first is still held.
        await eventually(next_batch_handed_over, timeout=15)
        assert gated.entered == [2, 2]
        # No row lock and no open transaction while the model runs: another writer takes every row at once.
        async with conn.transaction():
            locked = await conn.fetch("SELECT id FROM chunks FOR UPDATE NOWAIT")
            queued = await conn.fetch("SELECT chunk_id FROM embed_queue FOR UPDATE NOWAIT")
        assert len(locked) == 5 and len(queued) == 5
        idle_in_tx = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND state LIKE 'idle in transaction%'"
        )
        assert idle_in_tx == 0
        # Positive control: opened, the gate lets every chunk through, and nothing stays leased.
        gated.gate.set()
        for memory in memories:
            await clients.wait_embedded(memory.id, ws.id)
        assert await claimed() == 0
    finally:
        gated.gate.set()
        await conn.close()
        await clients.close()
        await stack.stop()


async def test_a_stopping_worker_hands_its_claims_back(postgres: Postgres) -> None:
    dsn = await postgres.create_database()
    gated = GatedEmbedder()
    stack = await start_stack(dsn, gated, MNEMO_EMBED_BATCH_SIZE="2")
    clients = Clients(stack)
    conn = await asyncpg.connect(dsn)
    stopped = False
    try:
        ws = await clients.workspace()
        for i in range(3):
            await clients.write(ws.id, f"a note caught in flight at shutdown, number {i}")
        gated.loaded.set()
        await asyncio.wait_for(gated.started.wait(), timeout=15)

        async def leased() -> int:
            return await conn.fetchval("SELECT count(*) FROM embed_queue WHERE NOT failed AND embed_after > now()")

        async def all_leased() -> bool:
            return await leased() == 3

        await eventually(all_leased, timeout=15)
        await clients.close()
        await stack.stop()
        stopped = True
        # Due again at once, for whichever replica runs next, rather than when the lease ends.
        assert await leased() == 0
        assert await conn.fetchval("SELECT count(*) FROM embed_queue WHERE NOT failed") == 3
    finally:
        gated.gate.set()
        await conn.close()
        if not stopped:
            await clients.close()
            await stack.stop()


async def test_storing_a_vector_never_writes_the_chunk_row(postgres: Postgres) -> None:
    dsn = await postgres.create_database()
    gated = GatedEmbedder()
    stack = await start_stack(dsn, gated)
    clients = Clients(stack)
    conn = await asyncpg.connect(dsn)
    try:
        ws = await clients.workspace()
        memory = await clients.write(ws.id, "a note whose chunk row is written once, at insert")
        # The worker waits at the gate: this is the row as the write left it.
        row_version = "SELECT id, xmin::text AS xmin, ctid::text AS ctid FROM chunks WHERE memory_id = $1"
        inserted = await conn.fetchrow(row_version, uuid.UUID(memory.id))
        gated.loaded.set()
        gated.gate.set()
        await clients.wait_embedded(memory.id, ws.id)
        # Positive control: the vector is stored, and the queue row is gone.
        assert await conn.fetchval("SELECT count(*) FROM chunk_vectors WHERE chunk_id = $1", inserted["id"]) == 1
        assert await conn.fetchval("SELECT count(*) FROM embed_queue WHERE chunk_id = $1", inserted["id"]) == 0
        # The same row version: no UPDATE rewrote it (nor its full-text index entry).
        assert await conn.fetchrow(row_version, uuid.UUID(memory.id)) == inserted
        # Control for the check itself: a new version does write the old chunk's row (out of the
        # indexes), and the check sees it.
        await clients.ingest.UpdateMemory(
            ingest_pb.UpdateMemoryRequest(workspace=ws.id, id=memory.id, content="the second version")
        )
        rewritten = await conn.fetchrow(f"{row_version} AND id = $2", uuid.UUID(memory.id), inserted["id"])
        assert rewritten["xmin"] != inserted["xmin"]
    finally:
        gated.gate.set()
        await conn.close()
        await clients.close()
        await stack.stop()


async def _one_embedded(clients: Clients, workspace: str) -> None:
    """Waits until the workspace's one chunk has its vector and nothing is pending."""

    async def embedded() -> bool:
        status = await clients.search.GetStatus(search_pb.GetStatusRequest(workspace=workspace))
        return status.chunks_embedded == 1 and status.chunks_pending == 0

    await eventually(embedded, timeout=30, interval=0.2)


async def _ours(pool: asyncpg.Pool, dsn: str) -> bool:
    """Whether `pool` is the test's own stack's (on the database of `dsn`): a patched claim is seen
    by every stack alive in the process (the suite's shared ones too), whose claims must go
    through untouched."""
    database = dsn.partition("?")[0].rsplit("/", 1)[1]
    return bool(await pool.fetchval("SELECT current_database() = $1", database))


async def test_a_claim_whose_answer_is_lost_is_handed_back_by_its_lease(
    postgres: Postgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection can end after the server ran a claim and before its answer came back (a fault
    drill's pg_terminate_backend storm did so): the worker cannot name the chunks it leased, so it
    hands them back by the claim's lease at its next drain, where they sat leased, unseen, for the
    whole lease (300 s)."""
    lost: list[uuid.UUID | None] = []
    real_claim = embed_queue.claim

    async def answer_lost_once(
        pool: asyncpg.Pool, limit: int, lease_s: float, lease: uuid.UUID | None = None
    ) -> list[asyncpg.Record]:
        rows = await real_claim(pool, limit, lease_s, lease)
        if rows and not lost and await _ours(pool, dsn):
            lost.append(lease)
            raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")
        return rows

    dsn = await postgres.create_database()
    monkeypatch.setattr(embed_queue, "claim", answer_lost_once)
    stack = await start_stack(dsn, HashEmbedder(64))
    clients = Clients(stack)
    conn = await asyncpg.connect(dsn)
    try:
        ws = await clients.workspace()
        await clients.write(ws.id, "a note whose first claim never answered")

        async def claim_lost() -> bool:
            return bool(lost)

        await eventually(claim_lost, timeout=15)
        # The lost claim ran and leased the chunk under its token (the fault is real: rows came back).
        assert lost[0] is not None

        await _one_embedded(clients, ws.id)
        status = await clients.search.GetStatus(search_pb.GetStatusRequest(workspace=ws.id))
        assert status.chunks_failed == 0 and len(lost) == 1
        assert await conn.fetchval("SELECT count(*) FROM embed_queue") == 0
    finally:
        await conn.close()
        await clients.close()
        await stack.stop()


@pytest.mark.parametrize(
    ("fails_after_s", "embedded_before"),
    [(0.05, 0), (1.0, 1)],
    ids=["while-the-batch-waits-for-writes-to-pause", "after-the-model-finished-the-batch"],
)
async def test_a_batch_whose_next_claim_fails_is_handed_back_at_once(
    postgres: Postgres, monkeypatch: pytest.MonkeyPatch, fails_after_s: float, embedded_before: int
) -> None:
    """While the model runs on one batch the worker claims the next. If that claim fails (the
    database going away), the batch is abandoned and must be handed back, not left leased for the
    whole lease (300 s; a fault drill waited out its 60 s for three such chunks): both while the
    batch still waits for the process's writes to pause (mnemo_ingest.activity, 0.25 s after the
    last write) and once the model has finished it (its vectors are never stored)."""
    embedder = GatedEmbedder()  # opened at once: it only counts the batches it is handed
    embedder.loaded.set()
    embedder.gate.set()
    failing: list[bool] = []
    seen_at_failure: list[int] = []
    answered_rows: list[bool] = [False]
    real_claim = embed_queue.claim

    async def next_claim_fails_once(
        pool: asyncpg.Pool, limit: int, lease_s: float, lease: uuid.UUID | None = None
    ) -> list[asyncpg.Record]:
        if not await _ours(pool, dsn):
            return await real_claim(pool, limit, lease_s, lease)
        if answered_rows[-1] and not failing:
            # The claim of the next batch, made while the first is being embedded (taken at once:
            # another worker's claim may come in during the sleep).
            failing.append(True)
            await asyncio.sleep(fails_after_s)
            seen_at_failure.append(len(embedder.entered))
            raise asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation")
        rows = await real_claim(pool, limit, lease_s, lease)
        answered_rows.append(bool(rows))
        return rows

    dsn = await postgres.create_database()
    monkeypatch.setattr(embed_queue, "claim", next_claim_fails_once)
    stack = await start_stack(dsn, embedder)
    clients = Clients(stack)
    conn = await asyncpg.connect(dsn)
    try:
        ws = await clients.workspace()
        await clients.write(ws.id, "a note whose batch was abandoned when the next claim failed")
        # Within 30 s, where the lease is 300 s: handed back, claimed again, stored.
        await _one_embedded(clients, ws.id)
        # Control: the claim failed after one that leased the chunk, at the moment meant (before
        # the model ran, or after).
        assert seen_at_failure == [embedded_before], (seen_at_failure, answered_rows)
        assert answered_rows.count(True) >= 2, answered_rows
        assert await conn.fetchval("SELECT count(*) FROM embed_queue") == 0
    finally:
        await conn.close()
        await clients.close()
        await stack.stop()


async def test_a_store_cut_by_the_database_counts_no_attempt(
    postgres: Postgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store the database cut short (a restart, a terminated connection) says nothing about the
    chunks: the batch goes back without an attempt counted. Counted, a storm of terminations in the
    database drill could fail a chunk for good (5 attempts) with nothing wrong with it."""
    seen_attempts: list[int] = []
    real_store = embed_queue.store_vectors

    async def cut_once(pool: asyncpg.Pool, pairs: Any, model: str) -> Any:
        if not seen_attempts:
            seen_attempts.append(-1)
            raise asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command")
        seen_attempts.append(await pool.fetchval("SELECT max(attempts) FROM embed_queue"))
        return await real_store(pool, pairs, model)

    monkeypatch.setattr(embed_queue, "store_vectors", cut_once)
    dsn = await postgres.create_database()
    stack = await start_stack(dsn, HashEmbedder(64))
    clients = Clients(stack)
    try:
        ws = await clients.workspace()
        await clients.write(ws.id, "a note whose first store the database cut short")

        await _one_embedded(clients, ws.id)
        # The cut happened (the first call), and the retry found the chunk with no attempt counted.
        assert seen_attempts[0] == -1 and seen_attempts[1] == 0
        status = await clients.search.GetStatus(search_pb.GetStatusRequest(workspace=ws.id))
        assert status.chunks_failed == 0
    finally:
        await clients.close()
        await stack.stop()
