"""Vectors enter the HNSW graph after they are stored (sql/0024_vector_graph.sql): the grapher lets
them in once this process's model has no backlog, or the excess over MNEMO_VECTOR_GRAPH_BACKLOG
sooner; meanwhile every read path compares them exactly, within the caller's workspaces."""

from __future__ import annotations

import asyncio

import asyncpg

from mnemo.common.v1 import common_pb2
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_embed import HashEmbedder
from mnemo_ingest.graphing import LOOK_S
from mnemo_store import consolidation, vector_graph
from tests.helpers import Clients, GatedEmbedder, Postgres, embed_queued, eventually, ids, insert_note, start_stack


async def test_waiting_vectors_are_found_by_meaning_within_their_workspace_then_let_into_the_graph(
    postgres: Postgres,
) -> None:
    dsn = await postgres.create_database()
    stack = await start_stack(dsn, HashEmbedder(64))
    clients = Clients(stack)
    conn = await asyncpg.connect(dsn)
    try:
        await stack.ingest.grapher.stop()  # the vectors stay out of the graph until it starts again
        mine, other = await clients.workspace(), await clients.workspace()
        written = [
            await clients.write(mine.id, "the ferry to the island leaves from pier four at noon"),
            await clients.write(
                mine.id, "we decided the ferry timetable lives in the wiki", kind=common_pb2.MEMORY_KIND_DECISION
            ),
            await clients.write(other.id, "the ferry to the island leaves from pier four at noon"),
        ]
        for memory, ws in zip(written, (mine, mine, other), strict=True):
            await clients.wait_embedded(memory.id, ws.id)
        assert await vector_graph.waiting(conn) == 3
        status = await clients.search.GetStatus(search_pb.GetStatusRequest(workspace=mine.id))
        assert status.graph_pending == 2  # the caller's workspace (and global) only

        async def found(ws: str, **fields: object) -> list[str]:
            return ids(await clients.find(ws, "ferry to the island from pier four", mode="semantic", **fields))

        before = await found(mine.id)
        # Compared exactly, each workspace finds its own notes and never the other's.
        assert set(before) == {written[0].id, written[1].id}
        assert await found(other.id) == [written[2].id]
        decisions = common_pb2.MemoryFilter(kinds=[common_pb2.MEMORY_KIND_DECISION])
        assert await found(mine.id, filter=decisions) == [written[1].id]
        hybrid = ids(await clients.find(mine.id, "ferry to the island from pier four"))
        assert written[2].id not in hybrid and written[0].id in hybrid

        await stack.ingest.grapher.start()
        await eventually(lambda: _waiting_is(conn, 0))
        assert await conn.fetchval("SELECT count(*) FROM chunk_vectors WHERE graphed") == 3
        status = await clients.search.GetStatus(search_pb.GetStatusRequest(workspace=mine.id))
        assert status.graph_pending == 0
        # In the graph, the same answers.
        assert await found(mine.id) == before
        assert await found(other.id) == [written[2].id]
    finally:
        await conn.close()
        await clients.close()
        await stack.stop()


async def test_the_grapher_waits_while_the_model_embeds_and_lets_in_only_the_excess(postgres: Postgres) -> None:
    dsn = await postgres.create_database()
    gated = GatedEmbedder()
    stack = await start_stack(dsn, gated, MNEMO_VECTOR_GRAPH_BACKLOG="3")
    clients = Clients(stack)
    conn = await asyncpg.connect(dsn)
    pool = stack.ingest.pool
    try:
        ws = await clients.workspace()
        held = await clients.write(ws.id, "the note the slow model is working on")
        gated.loaded.set()
        await asyncio.wait_for(gated.started.wait(), timeout=15)  # this process's model is busy
        # Meanwhile another worker (another pod's) stores six vectors.
        others = [await clients.write(ws.id, f"a note another worker embeds, number {i}") for i in range(6)]
        another = HashEmbedder(64)
        another.start()
        await embed_queued(pool, another, 6, graph=False)
        # Only the three over the backlog allowed enter the graph while the model is busy ...
        await eventually(lambda: _waiting_is(conn, 3))
        await asyncio.sleep(2.5 * LOOK_S)
        assert await vector_graph.waiting(conn) == 3
        # ... and every stored vector is found meanwhile, waiting or not.
        found = ids(await clients.find(ws.id, "a note another worker embeds", mode="semantic", limit=10))
        assert set(found) == {m.id for m in others}

        gated.gate.set()  # the model's backlog ends: the rest go in
        await clients.wait_embedded(held.id, ws.id)
        await eventually(lambda: _waiting_is(conn, 0))
        assert await conn.fetchval("SELECT count(*) FROM chunk_vectors WHERE graphed") == 7
    finally:
        gated.gate.set()
        await conn.close()
        await clients.close()
        await stack.stop()


async def _waiting_is(conn: asyncpg.Connection, count: int) -> bool:
    return await vector_graph.waiting(conn) == count


async def test_consolidation_compares_waiting_vectors_with_those_in_the_graph(postgres: Postgres) -> None:
    dsn = await postgres.create_database()
    embedder = HashEmbedder(64)
    stack = await start_stack(dsn, embedder)
    pool = stack.ingest.pool
    try:
        await stack.ingest.grapher.stop()
        await stack.ingest.workers.stop()
        graphed, (graphed_chunk,) = await insert_note(pool, "the ferry to the island leaves from pier four at noon")
        await embed_queued(pool, embedder, 1)
        waiting, (waiting_chunk,) = await insert_note(pool, "the ferry to the island leaves from pier four at noon.")
        other, (other_chunk,) = await insert_note(pool, "the ferry to the island leaves from pier four at noon!")
        await embed_queued(pool, embedder, 2, graph=False)
        assert await vector_graph.waiting(pool) == 2
        async with pool.acquire() as conn, conn.transaction():
            pairs = await consolidation.nearest_neighbours(
                conn, "global", [graphed_chunk, waiting_chunk, other_chunk], k=5, min_cosine=0.5
            )
        found = {frozenset((p.a, p.b)) for p in pairs}
        # Each pair: one in the graph with one waiting, and both waiting.
        assert {frozenset((graphed, waiting)), frozenset((graphed, other)), frozenset((waiting, other))} <= found
    finally:
        await stack.stop()
