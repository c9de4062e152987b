"""Only what a default read may return is in the search indexes: chunks of a memory's current
version, visible and not deleted. Versions, corrections, deletion and restore move chunks (and
their vectors) in and out; history and as-of reads still find what the indexes leave out; and a
worker storing a vector while a memory changes never leaves the vector's flag stale."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import asyncpg
from google.protobuf import timestamp_pb2
from pgvector import Vector

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo_embed import HashEmbedder
from mnemo_store import embed_queue
from mnemo_store import memories as db
from tests.helpers import Clients, Postgres, eventually, ids, insert_note, migrated_pool

Flags = dict[int, tuple[set[bool], set[bool]]]


async def index_flags(dsn: str, memory_id: str) -> Flags:
    """Per version of the memory: the `indexed` flags of its chunks and of their vectors."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT c.version, c.indexed, v.indexed AS vector_indexed "
            "FROM chunks c LEFT JOIN chunk_vectors v ON v.chunk_id = c.id WHERE c.memory_id = $1",
            uuid.UUID(memory_id),
        )
    finally:
        await conn.close()
    flags: Flags = {}
    for row in rows:
        chunks, vectors = flags.setdefault(row["version"], (set(), set()))
        chunks.add(row["indexed"])
        if row["vector_indexed"] is not None:
            vectors.add(row["vector_indexed"])
    return flags


IN, OUT = ({True}, {True}), ({False}, {False})


def ts(value: datetime) -> timestamp_pb2.Timestamp:
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(value)
    return message


async def _moment() -> datetime:
    # Recorded times are transaction start times: a clear gap on both sides.
    await asyncio.sleep(0.05)
    moment = datetime.now(UTC)
    await asyncio.sleep(0.05)
    return moment


async def test_a_new_version_takes_the_old_chunks_out_of_the_indexes_and_as_of_still_reads_them(
    hash_clients: Clients,
) -> None:
    ws = (await hash_clients.workspace()).id
    word = uuid.uuid4().hex[:6]
    old_word, new_word = f"quokka{word}", f"wombat{word}"
    memory = await hash_clients.write(ws, f"The {old_word} ferry leaves at nine.", title="Ferry")
    await hash_clients.wait_embedded(memory.id, ws)
    assert await index_flags(hash_clients.stack.dsn, memory.id) == {1: IN}
    before = await _moment()
    await hash_clients.ingest.UpdateMemory(
        ipb.UpdateMemoryRequest(workspace=ws, id=memory.id, content=f"The {new_word} ferry leaves at ten.")
    )
    await hash_clients.wait_embedded(memory.id, ws)
    # The old version's chunk and vector left the indexes; the new version's are in (the control).
    assert await index_flags(hash_clients.stack.dsn, memory.id) == {1: OUT, 2: IN}

    assert ids(await hash_clients.find(ws, new_word, mode="lexical")) == [memory.id]
    assert ids(await hash_clients.find(ws, old_word, mode="lexical")) == []
    semantic = await hash_clients.find(ws, f"{old_word} ferry", mode="semantic")
    assert ids(semantic) == [memory.id] and new_word in semantic.hits[0].snippet
    assert old_word not in semantic.hits[0].snippet

    then = common_pb2.ReadOptions(as_of=ts(before))
    assert ids(await hash_clients.find(ws, old_word, mode="lexical", options=then)) == [memory.id]
    assert ids(await hash_clients.find(ws, new_word, mode="lexical", options=then)) == []
    semantic_then = await hash_clients.find(ws, f"{old_word} ferry", mode="semantic", options=then)
    assert ids(semantic_then) == [memory.id] and old_word in semantic_then.hits[0].snippet


async def test_corrections_move_chunks_out_of_the_indexes_and_restore_brings_them_back(
    hash_clients: Clients,
) -> None:
    ws = (await hash_clients.workspace()).id
    word = f"numbat{uuid.uuid4().hex[:6]}"
    notes = {
        name: await hash_clients.write(ws, f"The {word} {name} note about the harbour.")
        for name in ("retracted", "superseded", "deleted", "confirmed")
    }
    for memory in notes.values():
        await hash_clients.wait_embedded(memory.id, ws)
        assert await index_flags(hash_clients.stack.dsn, memory.id) == {1: IN}

    await hash_clients.ingest.RetractMemory(
        ipb.RetractMemoryRequest(workspace=ws, id=notes["retracted"].id, reason="wrong")
    )
    successor = (
        await hash_clients.ingest.SupersedeMemory(
            ipb.SupersedeMemoryRequest(
                workspace=ws,
                id=notes["superseded"].id,
                reason="newer",
                successor=ipb.WriteMemoryRequest(content=f"The {word} successor note about the harbour."),
            )
        )
    ).successor
    await hash_clients.ingest.DeleteMemory(ipb.DeleteMemoryRequest(workspace=ws, id=notes["deleted"].id, reason="x"))
    await hash_clients.ingest.ConfirmMemory(ipb.ConfirmMemoryRequest(workspace=ws, id=notes["confirmed"].id))
    await hash_clients.wait_embedded(successor.id, ws)

    dsn = hash_clients.stack.dsn
    for name in ("retracted", "superseded", "deleted"):
        assert await index_flags(dsn, notes[name].id) == {1: OUT}, name
    # Controls: a status that stays visible keeps its chunks in, and the successor's are in.
    assert await index_flags(dsn, notes["confirmed"].id) == {1: IN}
    assert await index_flags(dsn, successor.id) == {1: IN}
    for mode in ("lexical", "semantic"):
        found = ids(await hash_clients.find(ws, f"{word} harbour", mode=mode))
        assert set(found) == {notes["confirmed"].id, successor.id}, mode
        history = common_pb2.ReadOptions(include_history=True)
        found = ids(await hash_clients.find(ws, f"{word} harbour", mode=mode, options=history))
        assert {notes["retracted"].id, notes["superseded"].id} <= set(found), mode
        assert notes["deleted"].id not in found, mode

    await hash_clients.ingest.RestoreMemory(ipb.RestoreMemoryRequest(workspace=ws, id=notes["deleted"].id))
    assert await index_flags(dsn, notes["deleted"].id) == {1: IN}
    for mode in ("lexical", "semantic"):
        assert notes["deleted"].id in ids(await hash_clients.find(ws, f"{word} harbour", mode=mode)), mode


# -- the worker and a changing memory, statement by statement, on the store's own functions ------


async def _flags(pool: asyncpg.Pool, memory_id: uuid.UUID) -> tuple[list[bool], list[bool]]:
    chunks = await pool.fetch("SELECT indexed FROM chunks WHERE memory_id = $1", memory_id)
    vectors = await pool.fetch("SELECT indexed FROM chunk_vectors WHERE memory_id = $1", memory_id)
    return [r["indexed"] for r in chunks], [r["indexed"] for r in vectors]


async def _change_while_a_worker_stores(
    pool: asyncpg.Pool,
    chunk_id: int,
    vector: object,
    model: str,
    change: Callable[[asyncpg.Connection], Awaitable[None]],
) -> None:
    """Runs `change` (a memory's reindexing write) while a worker holds the chunk's queue row: the
    worker has dequeued it and written the vector with the chunk's values as it read them, and not
    committed. Returns once the change waited for the worker's lock and committed after it."""
    worker = await pool.acquire()
    changing = None
    try:
        stored = worker.transaction()
        await stored.start()
        await worker.execute("DELETE FROM embed_queue WHERE chunk_id = $1", chunk_id)
        # The worker's own statement (embed_queue.store_vectors runs it after dequeuing).
        await worker.execute(embed_queue._STORE, [chunk_id], [Vector(vector)], model, False)

        async def run_change() -> None:
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute("SET LOCAL application_name = 'mnemo-test-change'")
                await change(conn)

        changing = asyncio.create_task(run_change())

        async def change_waits_for_the_worker() -> bool:
            return bool(
                await pool.fetchval(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE application_name = 'mnemo-test-change' AND wait_event_type = 'Lock'"
                )
            )

        await eventually(change_waits_for_the_worker, timeout=30)
        await stored.commit()
    finally:
        await pool.release(worker)
    await asyncio.wait_for(changing, timeout=30)


async def test_a_worker_storing_while_a_memory_changes_never_leaves_a_stale_flag(postgres: Postgres) -> None:
    embedder = HashEmbedder(64)
    embedder.start()
    pool = await migrated_pool(postgres, embedder)
    try:
        # 1. The change holds the queue row first: the worker skips it rather than wait, and
        #    stores it once the change committed, with the new flag.
        memory_id, chunk_ids = await insert_note(pool, "a note deleted while its vector is being stored")
        assert [r["id"] for r in await embed_queue.claim(pool, 10, 300)] == chunk_ids
        pairs = list(zip(chunk_ids, await embedder.embed(["a note"]), strict=True))
        async with pool.acquire() as conn:
            change = conn.transaction()
            await change.start()
            await db.mark_deleted(conn, memory_id, deleted=True)
            done = await asyncio.wait_for(embed_queue.store_vectors(pool, pairs, embedder.model), timeout=30)
            assert (done.stored, done.held) == (0, chunk_ids)
            assert await _flags(pool, memory_id) == ([True], [])  # the change is not committed yet
            await change.commit()
        assert await embed_queue.store_vectors(pool, pairs, embedder.model) == embed_queue.Stored(1, [])
        assert await _flags(pool, memory_id) == ([False], [False])
        assert await pool.fetchval("SELECT count(*) FROM embed_queue WHERE chunk_id = ANY($1)", chunk_ids) == 0
        # Control: restoring brings both flags back.
        async with pool.acquire() as conn, conn.transaction():
            await db.mark_deleted(conn, memory_id, deleted=False)
        assert await _flags(pool, memory_id) == ([True], [True])

        # 2. The worker holds the queue row first (dequeued, its vector written with the flag it
        #    read, not committed): the change waits for it, then brings that vector's flag in line.
        memory_id, chunk_ids = await insert_note(pool, "a note deleted just after its vector was stored")
        await _change_while_a_worker_stores(
            pool, chunk_ids[0], pairs[0][1], embedder.model, lambda conn: db.mark_deleted(conn, memory_id, deleted=True)
        )
        # The vector was written with the flag the worker read (true); the change corrected it.
        assert await _flags(pool, memory_id) == ([False], [False])
    finally:
        await pool.close()


# -- the tags' copies on chunks and vectors (sql/0018_chunk_tags.sql) ----------------------------


async def tag_copies(pool_or_dsn: asyncpg.Pool | str, memory_id: uuid.UUID | str) -> dict[int, set[tuple[str, ...]]]:
    """Per version of the memory: the tags its chunks and their vectors carry."""
    sql = (
        "SELECT c.version, c.tags, v.tags AS vector_tags "
        "FROM chunks c LEFT JOIN chunk_vectors v ON v.chunk_id = c.id WHERE c.memory_id = $1"
    )
    if isinstance(pool_or_dsn, str):
        conn = await asyncpg.connect(pool_or_dsn)
        try:
            rows = await conn.fetch(sql, uuid.UUID(str(memory_id)))
        finally:
            await conn.close()
    else:
        rows = await pool_or_dsn.fetch(sql, uuid.UUID(str(memory_id)))
    copies: dict[int, set[tuple[str, ...]]] = {}
    for row in rows:
        copies.setdefault(row["version"], set()).add(tuple(row["tags"]))
        if row["vector_tags"] is not None:
            copies[row["version"]].add(tuple(row["vector_tags"]))
    return copies


async def test_a_memory_s_tags_follow_onto_its_chunks_and_vectors_and_a_tag_filter_reads_them(
    hash_clients: Clients,
) -> None:
    ws = (await hash_clients.workspace()).id
    word = f"bandicoot{uuid.uuid4().hex[:6]}"
    dawn = await hash_clients.write(ws, f"The {word} crossing at dawn.", tags=["dawn", "ferry"])
    dusk = await hash_clients.write(ws, f"The {word} crossing at dusk.", tags=["dusk"])
    for memory in (dawn, dusk):
        await hash_clients.wait_embedded(memory.id, ws)
    dsn = hash_clients.stack.dsn
    assert await tag_copies(dsn, dawn.id) == {1: {("dawn", "ferry")}}
    assert await tag_copies(dsn, dusk.id) == {1: {("dusk",)}}

    async def tagged(tag: str, mode: str) -> set[str]:
        return set(ids(await hash_clients.find(ws, word, mode=mode, filter=common_pb2.MemoryFilter(tags=[tag]))))

    for mode in ("lexical", "semantic", "hybrid"):
        assert await tagged("dawn", mode) == {dawn.id}, mode
        assert await tagged("dusk", mode) == {dusk.id}, mode

    # New tags, same text: a new version, whose chunks and vector carry them; so do the old
    # version's, since a tag filter reads the current tags at any time.
    await hash_clients.ingest.UpdateMemory(
        ipb.UpdateMemoryRequest(
            workspace=ws, id=dawn.id, content=f"The {word} crossing at dawn.", tags=["dusk"], replace_tags=True
        )
    )
    await hash_clients.wait_embedded(dawn.id, ws)
    assert await tag_copies(dsn, dawn.id) == {1: {("dusk",)}, 2: {("dusk",)}}
    for mode in ("lexical", "semantic", "hybrid"):
        assert await tagged("dawn", mode) == set(), mode
        assert await tagged("dusk", mode) == {dawn.id, dusk.id}, mode  # the control


async def test_tags_rewritten_in_place_reach_every_chunk_and_the_vector_a_worker_is_storing(
    postgres: Postgres,
) -> None:
    """Redaction rewrites a memory's tags in place (memories.rewrite_fields): its chunks take them,
    and so does a vector a worker wrote with the old ones and had not committed."""
    embedder = HashEmbedder(64)
    embedder.start()
    pool = await migrated_pool(postgres, embedder)
    try:
        memory_id, chunk_ids = await insert_note(pool, "a note whose tag held a secret", tags=["sk-live-1234"])
        vector = (await embedder.embed(["a note"]))[0]
        await _change_while_a_worker_stores(
            pool,
            chunk_ids[0],
            vector,
            embedder.model,
            lambda conn: db.rewrite_fields(conn, memory_id, "Note", ["[redacted]"], {}, None, None, None),
        )
        assert await tag_copies(pool, memory_id) == {1: {("[redacted]",)}}
        # Control: the flag was not touched, the vector is in the indexes.
        assert await _flags(pool, memory_id) == ([True], [True])
    finally:
        await pool.close()
