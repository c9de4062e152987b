"""Migrations: applied once under a lock, checksummed, and an edited one is refused by name."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from google.protobuf import timestamp_pb2
from pgvector import Vector
from pgvector.asyncpg import register_vector

from mnemo.common.v1 import common_pb2
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_embed import HashEmbedder
from mnemo_embed.settings import EmbeddingSettings
from mnemo_ingest import IngestApp
from mnemo_ingest.settings import IngestSettings
from mnemo_store import (
    GLOBAL_WORKSPACE,
    MigrationError,
    apply_migrations,
    embed_queue,
    load_migrations,
    open_pool,
    vector_graph,
)
from mnemo_store.embedding_space import EmbeddingSpaceMismatch, ensure_embedding_space
from mnemo_store.migrations import Migration
from mnemo_store.settings import DatabaseSettings
from tests.helpers import Clients, Postgres, embed_queued, eventually, ids, insert_note, lexical_statistics, start_stack


def _ts(value: datetime) -> timestamp_pb2.Timestamp:
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(value)
    return message


async def test_migrations_apply_once_even_when_started_concurrently(postgres: Postgres) -> None:
    dsn = await postgres.create_database()
    conns = [await asyncpg.connect(dsn) for _ in range(3)]
    try:
        applied = await asyncio.gather(*(apply_migrations(c) for c in conns))
        names = [m.name for m in load_migrations()]
        # Exactly one of the racers applied each migration; the others found it done.
        assert sorted(name for names_applied in applied for name in names_applied) == sorted(names)
        rows = await conns[0].fetch("SELECT name FROM schema_migrations ORDER BY version")
        assert [r["name"] for r in rows] == names
        assert await apply_migrations(conns[0]) == []
    finally:
        for conn in conns:
            await conn.close()


async def test_an_edited_applied_migration_is_refused_with_a_clear_error(postgres: Postgres) -> None:
    dsn = await postgres.create_database()
    conn = await asyncpg.connect(dsn)
    try:
        migrations = load_migrations()
        await apply_migrations(conn, migrations)
        edited = [replace(migrations[0], sql=migrations[0].sql + "\n-- an innocent-looking edit\n"), *migrations[1:]]
        with pytest.raises(MigrationError) as err:
            await apply_migrations(conn, edited)
        assert "0001_core.sql was edited after it was applied" in str(err.value)
        assert "new migration" in str(err.value)
        # Positive control: the original files are still accepted.
        assert await apply_migrations(conn, migrations) == []
    finally:
        await conn.close()


async def test_a_database_with_an_unknown_migration_is_refused(postgres: Postgres) -> None:
    dsn = await postgres.create_database()
    conn = await asyncpg.connect(dsn)
    try:
        migrations = load_migrations()
        await apply_migrations(conn, migrations)
        with pytest.raises(MigrationError, match="does not have"):
            await apply_migrations(conn, migrations[:-1] if len(migrations) > 1 else [])
    finally:
        await conn.close()


async def test_starting_against_another_embedding_space_is_a_clear_error(postgres: Postgres) -> None:
    dsn = await postgres.create_database()
    conn = await asyncpg.connect(dsn)
    try:
        await apply_migrations(conn)
        await ensure_embedding_space(conn, "hash-v1-64", 64)
        await ensure_embedding_space(conn, "hash-v1-64", 64)  # same space: fine
        with pytest.raises(EmbeddingSpaceMismatch) as err:
            await ensure_embedding_space(conn, "sentence-transformers/all-MiniLM-L6-v2", 384)
        message = str(err.value)
        assert "'hash-v1-64' (64 dimensions)" in message and "(384 dimensions)" in message
        assert "MNEMO_EMBEDDER" in message
    finally:
        await conn.close()
    # The same refusal stops a service at start-up, before it serves anything.
    app = IngestApp(
        dsn, "127.0.0.1:0", 0.1, DatabaseSettings(), EmbeddingSettings(), IngestSettings(), embedder=HashEmbedder(32)
    )
    with pytest.raises(EmbeddingSpaceMismatch, match="32 dimensions"):
        await app.start()
    assert app.server is None


async def test_the_skip_reason_migration_carries_over_the_reasons_written_as_message_prefixes(
    postgres: Postgres,
) -> None:
    dsn = await postgres.create_database()
    conn = await asyncpg.connect(dsn)
    try:
        migrations = load_migrations()
        upto = next(i for i, m in enumerate(migrations) if m.name == "0006_harvest_skip_reason.sql")
        await apply_migrations(conn, migrations[:upto])
        rows = [
            ("a", "skipped", "no-workspace: /work/x"),
            ("b", "skipped", "tombstoned: source was deleted"),
            ("c", "skipped", "self-capture: a session of Mnemo's own"),
            ("d", "failed", "ingest: UNAVAILABLE: down"),  # not skipped: no reason
            ("e", "skipped", "something else: unknown"),  # not a known reason: left empty, not guessed
        ]
        await conn.executemany(
            "INSERT INTO harvest_sources (agent, session_id, path, state, detail) VALUES ('codex', $1, '/p', $2, $3)",
            rows,
        )
        await apply_migrations(conn, migrations)
        got = await conn.fetch("SELECT session_id, skip_reason FROM harvest_sources ORDER BY session_id")
        assert [(r["session_id"], r["skip_reason"]) for r in got] == [
            ("a", "no-workspace"),
            ("b", "tombstoned"),
            ("c", "self-capture"),
            ("d", None),
            ("e", None),
        ]
    finally:
        await conn.close()


async def _old_memory(
    conn: asyncpg.Connection,
    embedder: HashEmbedder,
    texts: list[str],
    chunk_states: list[tuple[str, int, str | None]],
    status: str = "active",
    deleted: bool = False,
) -> uuid.UUID:
    """A memory as the schema before 0007 held it: one chunk per version, each with its queue
    state (embed_status, attempts, error) and, once embedded, its vector in chunks.embedding."""
    memory_id = uuid.uuid4()
    now = datetime.now(UTC)
    await conn.execute(
        "INSERT INTO memories (id, workspace_id, kind, title, author, provenance, version, content_hash, status, "
        "deleted_at, created_at) VALUES ($1, 'old', 'note', 'Old', 'test', 'agent', $2, 'h', $3, $4, $5)",
        memory_id,
        len(texts),
        status,
        now if deleted else None,
        now - timedelta(hours=3),
    )
    await conn.execute(
        "INSERT INTO memory_states (memory_id, workspace_id, status, principal, recorded_from) "
        "VALUES ($1, 'old', $2, 'test', $3)",
        memory_id,
        status,
        now - timedelta(hours=3),
    )
    for version, (text, (embed_status, attempts, error)) in enumerate(zip(texts, chunk_states, strict=True), 1):
        recorded_from = now - timedelta(hours=3 - version)
        recorded_to = recorded_from + timedelta(hours=1) if version < len(texts) else None
        await conn.execute(
            "INSERT INTO memory_versions (memory_id, version, workspace_id, title, content, content_hash, author, "
            "recorded_from, recorded_to) VALUES ($1, $2, 'old', 'Old', $3, 'h', 'test', $4, $5)",
            memory_id,
            version,
            text,
            recorded_from,
            recorded_to,
        )
        vector = (await embedder.embed([f"Old\n\n{text}"]))[0] if embed_status == "embedded" else None
        await conn.execute(
            "INSERT INTO chunks (memory_id, version, workspace_id, ordinal, context, text, embed_status, "
            "embed_model, embed_attempts, embed_error, embedded_at, embedding) "
            "VALUES ($1, $2, 'old', 0, 'Old', $3, $4, $5, $6, $7, $8, $9)",
            memory_id,
            version,
            text,
            embed_status,
            embedder.model if vector is not None else None,
            attempts,
            error,
            now if vector is not None else None,
            vector,
        )
    return memory_id


async def test_the_queue_and_vectors_migration_carries_over_every_chunk_its_vector_and_its_queue_state(
    postgres: Postgres,
) -> None:
    dsn = await postgres.create_database()
    embedder = HashEmbedder(64)
    embedder.start()
    conn = await asyncpg.connect(dsn)
    try:
        migrations = load_migrations()
        upto = next(i for i, m in enumerate(migrations) if m.name == "0007_embed_queue_and_vectors.sql")
        await apply_migrations(conn, migrations[:upto])
        # What ensure_embedding_space did before 0007: the vector column on chunks, and its index.
        await conn.execute("ALTER TABLE chunks ADD COLUMN embedding vector(64)")
        await conn.execute("CREATE INDEX chunks_embedding ON chunks USING hnsw (embedding vector_cosine_ops)")
        await conn.execute("INSERT INTO embedding_space (model, dimension) VALUES ($1, 64)", embedder.model)
        await register_vector(conn)
        await conn.execute("INSERT INTO workspaces (id, name) VALUES ('old', 'old')")
        done = ("embedded", 0, None)
        edited = await _old_memory(
            conn, embedder, ["the ferry leaves from pier quokka", "the ferry leaves from pier wombat"], [done, done]
        )
        superseded = await _old_memory(conn, embedder, ["the numbat ferry is cancelled"], [done], "superseded")
        deleted = await _old_memory(conn, embedder, ["the dingo ferry note was deleted"], [done], deleted=True)
        pending = await _old_memory(conn, embedder, ["the echidna ferry is still queued"], [("pending", 1, "slow")])
        failed = await _old_memory(conn, embedder, ["the platypus ferry never embeds"], [("failed", 5, "boom")])
        old_vectors = {
            (r["memory_id"], r["version"]): r["embedding"]
            for r in await conn.fetch("SELECT memory_id, version, embedding FROM chunks WHERE embedding IS NOT NULL")
        }
        assert len(old_vectors) == 4  # positive control: the old rows hold vectors to carry over
        await conn.execute("UPDATE memories SET tags = '{ferry,pier}' WHERE id = $1", edited)

        await apply_migrations(conn, migrations)

        chunks = {
            (r["memory_id"], r["version"]): r
            for r in await conn.fetch(
                "SELECT c.memory_id, c.version, c.indexed, q.attempts, q.error, q.failed, "
                "v.embedding, v.model, v.indexed AS vector_indexed, c.tags, v.tags AS vector_tags "
                "FROM chunks c LEFT JOIN embed_queue q ON q.chunk_id = c.id "
                "LEFT JOIN chunk_vectors v ON v.chunk_id = c.id"
            )
        }
        # Only chunks of a current version of a visible, undeleted memory are indexed.
        indexed = {key: row["indexed"] for key, row in chunks.items()}
        assert indexed == {
            (edited, 1): False,
            (edited, 2): True,
            (superseded, 1): False,
            (deleted, 1): False,
            (pending, 1): True,
            (failed, 1): True,
        }
        # Every vector moved over unchanged, with its model and the chunk's flag.
        for key, vector in old_vectors.items():
            row = chunks[key]
            assert row["embedding"] == vector and row["model"] == embedder.model
            assert row["vector_indexed"] is row["indexed"] and row["attempts"] is None
        # 0018 copied each memory's tags onto its chunks, every version's, and their vectors.
        assert {key: (row["tags"], row["vector_tags"]) for key, row in chunks.items()} == {
            (edited, 1): (["ferry", "pier"], ["ferry", "pier"]),
            (edited, 2): (["ferry", "pier"], ["ferry", "pier"]),
            (superseded, 1): ([], []),
            (deleted, 1): ([], []),
            (pending, 1): ([], None),
            (failed, 1): ([], None),
        }
        # 0022 gave the indexed chunks' tags rows of their own: not the old version's, though it has tags.
        tag_rows = await conn.fetch(
            "SELECT c.memory_id, c.version, k.tag FROM chunk_tags k JOIN chunks c ON c.id = k.chunk_id"
        )
        assert {tuple(r) for r in tag_rows} == {(edited, 2, "ferry"), (edited, 2, "pier")}
        # The queue keeps what was waiting, with its attempts and error.
        assert chunks[(pending, 1)]["embedding"] is None and chunks[(failed, 1)]["embedding"] is None
        assert (chunks[(pending, 1)]["attempts"], chunks[(pending, 1)]["error"], chunks[(pending, 1)]["failed"]) == (
            1,
            "slow",
            False,
        )
        assert (chunks[(failed, 1)]["attempts"], chunks[(failed, 1)]["error"], chunks[(failed, 1)]["failed"]) == (
            5,
            "boom",
            True,
        )
        columns = {
            r["column_name"]
            for r in await conn.fetch("SELECT column_name FROM information_schema.columns WHERE table_name = 'chunks'")
        }
        assert not columns & {"embedding", "embed_status", "embed_after", "embed_error", "embedded_at"}
        assert {"text", "tsv", "indexed"} <= columns
        # 0007 made the full-text index partial on `indexed`; 0008 replaced it with the BM25 postings.
        indexes = {r["indexname"] for r in await conn.fetch("SELECT indexname FROM pg_indexes")}
        assert "chunks_tsv" not in indexes and "lexical_postings_pkey" in indexes
    finally:
        await conn.close()

    # A stack on the migrated database builds the vector index and reads every mode from it.
    stack = await start_stack(dsn, embedder)
    clients = Clients(stack)
    try:
        conn = await asyncpg.connect(dsn)
        try:
            hnsw = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'chunk_vectors_embedding'")
        finally:
            await conn.close()
        assert "hnsw" in hnsw and hnsw.endswith("WHERE (indexed AND graphed)")
        semantic = await clients.find("old", "ferry pier wombat", mode="semantic")
        assert str(edited) in ids(semantic)
        assert str(superseded) not in ids(semantic) and str(deleted) not in ids(semantic)
        assert ids(await clients.find("old", "quokka", mode="lexical")) == []
        assert ids(await clients.find("old", "wombat", mode="lexical")) == [str(edited)]
        for mode in ("lexical", "semantic"):
            pier = await clients.find("old", "ferry", mode=mode, filter=common_pb2.MemoryFilter(tags=["pier"]))
            assert ids(pier) == [str(edited)], mode
            assert ids(await clients.find("old", "ferry", mode=mode, filter=common_pb2.MemoryFilter(tags=["x"]))) == []
        then = common_pb2.ReadOptions(as_of=_ts(datetime.now(UTC) - timedelta(minutes=90)))
        for mode in ("lexical", "semantic"):
            found = await clients.find("old", "pier quokka", mode=mode, options=then)
            assert ids(found)[0] == str(edited) and "quokka" in found.hits[0].snippet, mode
            history = common_pb2.ReadOptions(include_history=True)
            assert str(superseded) in ids(await clients.find("old", "numbat ferry", mode=mode, options=history)), mode
        # The pending chunk is embedded by the worker; the failed one stays failed, and says why.
        await clients.wait_embedded(str(pending), "old")
        status = await clients.search.GetStatus(search_pb.GetStatusRequest(workspace="old"))
        assert (status.chunks_pending, status.chunks_failed, status.chunks_embedded) == (0, 1, 5)
        assert status.last_error == "boom"
        # The count is of both kinds of vector, each read from its own partial index: those a
        # search may return and those of older versions and hidden memories, of which there are some.
        conn = await asyncpg.connect(dsn)
        try:
            kinds = await conn.fetchrow(
                "SELECT count(*) FILTER (WHERE indexed) AS shown, count(*) FILTER (WHERE NOT indexed) AS hidden "
                "FROM chunk_vectors WHERE workspace_id = 'old'"
            )
        finally:
            await conn.close()
        assert kinds["shown"] > 0 and kinds["hidden"] > 0 and kinds["shown"] + kinds["hidden"] == 5
    finally:
        await clients.close()
        await stack.stop()


_POSTINGS = """
SELECT p.chunk_id, t.lexeme, p.tf, p.len FROM lexical_postings p JOIN lexical_terms t ON t.id = p.term_id
ORDER BY 1, 2
"""


async def _migrated_up_to(postgres: Postgres, name: str) -> tuple[str, HashEmbedder, list[Migration], int]:
    """A new database migrated up to (not including) migration `name`, with its embedding space:
    its address, the embedder, every migration, and `name`'s index among them."""
    dsn = await postgres.create_database()
    embedder = HashEmbedder(64)
    embedder.start()
    migrations = load_migrations()
    upto = next(i for i, m in enumerate(migrations) if m.name == name)
    conn = await asyncpg.connect(dsn)
    try:
        await apply_migrations(conn, migrations[:upto])
        if name > "0024_vector_graph.sql":
            await ensure_embedding_space(conn, embedder.model, embedder.dimension)
        else:
            # What ensure_embedding_space did before 0024: the graph's index partial on `indexed` alone.
            await conn.execute(f"ALTER TABLE chunk_vectors ALTER COLUMN embedding TYPE vector({embedder.dimension})")
            await conn.execute(
                "CREATE INDEX chunk_vectors_embedding ON chunk_vectors USING hnsw (embedding vector_cosine_ops) "
                "WHERE indexed"
            )
            await conn.execute(
                "INSERT INTO embedding_space (model, dimension) VALUES ($1, $2)", embedder.model, embedder.dimension
            )
    finally:
        await conn.close()
    return dsn, embedder, migrations, upto


# The worker's statement before 0024, which names neither the kind (0020) nor `graphed` (0024): the
# worker of an earlier version, still running in a rolling upgrade's old pods, stores with it.
_STORE_BEFORE_0024 = """
INSERT INTO chunk_vectors (chunk_id, memory_id, version, workspace_id, indexed, tags, model, embedding)
SELECT c.id, c.memory_id, c.version, c.workspace_id, c.indexed, c.tags, $3, v.embedding
FROM unnest($1::bigint[], $2::vector[]) AS v(chunk_id, embedding) JOIN chunks c ON c.id = v.chunk_id
"""


async def _embed_before_0024(pool: asyncpg.Pool, embedder: HashEmbedder, count: int) -> list[int]:
    """Claims, embeds and stores `count` queued chunks as the worker before 0024 did; their ids."""
    claimed = await embed_queue.claim(pool, count, 300)
    assert len(claimed) == count
    vectors = await embedder.embed([r["text"] for r in claimed])
    ids_ = [r["id"] for r in claimed]
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("DELETE FROM embed_queue WHERE chunk_id = ANY($1::bigint[])", ids_)
        await conn.execute(_STORE_BEFORE_0024, ids_, [Vector(v) for v in vectors], embedder.model)
    return ids_


async def test_the_lexical_kinds_migration_posts_each_word_under_its_note_s_kind(postgres: Postgres) -> None:
    dsn, embedder, migrations, upto = await _migrated_up_to(postgres, "0019_lexical_kinds.sql")
    pool = await open_pool(dsn)
    try:
        notes = [await insert_note(pool, f"The ferry to pier {i} leaves at noon.") for i in range(2)]
        decided, _ = await insert_note(pool, "We decided the ferry leaves from pier one.", kind="decision")
        assert await pool.fetchval("SELECT lexical_post(1000)") == 3
        before = [tuple(r) for r in await pool.fetch(_POSTINGS)]
        # Positive control: before, a word is one term for both kinds.
        assert await pool.fetchval("SELECT df FROM lexical_terms WHERE lexeme = 'ferri'") == 3

        async with pool.acquire() as conn:
            assert await apply_migrations(conn, migrations[: upto + 1]) == ["0019_lexical_kinds.sql"]
        # The same postings, each now under its note's kind.
        assert [tuple(r) for r in await pool.fetch(_POSTINGS)] == before
        terms = {
            (r["lexeme"], r["kind"]): r["df"]
            for r in await pool.fetch("SELECT lexeme, kind, df FROM lexical_terms WHERE lexeme IN ('ferri', 'decid')")
        }
        assert terms == {("ferri", "note"): 2, ("ferri", "decision"): 1, ("decid", "decision"): 1}
        # The poster posts new notes under their kind too.
        later, _ = await insert_note(pool, "The ferry decision was made again.", kind="decision")
        assert await pool.fetchval("SELECT lexical_post(1000)") == 1
        assert await pool.fetchval("SELECT df FROM lexical_terms WHERE lexeme = 'ferri' AND kind = 'decision'") == 2
    finally:
        await pool.close()

    stack = await start_stack(dsn, embedder)
    clients = Clients(stack)
    try:
        decisions = common_pb2.MemoryFilter(kinds=[common_pb2.MEMORY_KIND_DECISION])
        found = await clients.find(GLOBAL_WORKSPACE, "ferry", mode="lexical", filter=decisions)
        assert set(ids(found)) == {str(decided), str(later)}
        # Positive control: unfiltered, the notes come back too.
        everything = await clients.find(GLOBAL_WORKSPACE, "ferry", mode="lexical")
        assert set(ids(everything)) == {str(decided), str(later)} | {str(n) for n, _ in notes}
    finally:
        await clients.close()
        await stack.stop()


async def test_the_vector_kinds_migration_copies_each_note_s_kind_onto_its_vectors(postgres: Postgres) -> None:
    dsn, embedder, migrations, upto = await _migrated_up_to(postgres, "0020_vector_kinds.sql")
    pool = await open_pool(dsn)
    try:
        noted, _ = await insert_note(pool, "The ferry to pier one leaves at noon.")
        decided, _ = await insert_note(pool, "We decided the ferry leaves from pier one.", kind="decision")
        # The vectors as the worker stores them (its statement names no kind, before 0020 or after).
        await _embed_before_0024(pool, embedder, 2)
        # Positive control: the index the migration drops is there before it.
        assert await pool.fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = 'chunk_vectors_embedding'") == 1

        async with pool.acquire() as conn:
            assert await apply_migrations(conn, migrations[: upto + 1]) == ["0020_vector_kinds.sql"]
        kinds = {r["memory_id"]: r["kind"] for r in await pool.fetch("SELECT memory_id, kind FROM chunk_vectors")}
        assert kinds == {noted: "note", decided: "decision"}
        assert await pool.fetchval("SELECT count(*) FROM pg_indexes WHERE indexname = 'chunk_vectors_embedding'") == 0
        # A vector stored after it by the same statement (the worker of the version before, in a
        # rolling upgrade's old pods, runs it too) takes its memory's kind from the database.
        during, (chunk_id,) = await insert_note(pool, "During the upgrade we decided on pier three.", kind="decision")
        await _embed_before_0024(pool, embedder, 1)
        assert await pool.fetchval("SELECT kind FROM chunk_vectors WHERE chunk_id = $1", chunk_id) == "decision"
    finally:
        await pool.close()

    # A stack on the migrated database builds the index again; a new note's vector takes its kind.
    stack = await start_stack(dsn, embedder)
    clients = Clients(stack)
    try:
        later = await clients.write(
            GLOBAL_WORKSPACE, "A later decision: the ferry leaves from pier two.", kind=common_pb2.MEMORY_KIND_DECISION
        )
        await clients.wait_embedded(later.id, GLOBAL_WORKSPACE)
        conn = await asyncpg.connect(dsn)
        try:
            hnsw = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'chunk_vectors_embedding'")
            assert await conn.fetchval("SELECT kind FROM chunk_vectors WHERE memory_id = $1", uuid.UUID(later.id)) == (
                "decision"
            )
        finally:
            await conn.close()
        assert "hnsw" in hnsw
        decisions = common_pb2.MemoryFilter(kinds=[common_pb2.MEMORY_KIND_DECISION])
        found = await clients.find(GLOBAL_WORKSPACE, "ferry pier", mode="semantic", filter=decisions)
        assert set(ids(found)) == {str(decided), str(during), later.id}
        # Positive control: unfiltered, the note comes back too.
        everything = await clients.find(GLOBAL_WORKSPACE, "ferry pier", mode="semantic")
        assert set(ids(everything)) == {str(noted), str(decided), str(during), later.id}
    finally:
        await clients.close()
        await stack.stop()


async def test_the_vector_graph_migration_keeps_stored_vectors_in_the_graph(postgres: Postgres) -> None:
    dsn, embedder, migrations, upto = await _migrated_up_to(postgres, "0024_vector_graph.sql")
    pool = await open_pool(dsn)
    try:
        before = [await insert_note(pool, f"The ferry to pier {i} leaves at noon.") for i in range(2)]
        await _embed_before_0024(pool, embedder, 2)
        hnsw = "SELECT indexdef FROM pg_indexes WHERE indexname = 'chunk_vectors_embedding'"
        assert (await pool.fetchval(hnsw)).endswith("WHERE indexed")  # positive control: the index as it was

        async with pool.acquire() as conn:
            assert await apply_migrations(conn, migrations[: upto + 1]) == ["0024_vector_graph.sql"]
        # The vectors stored before are in the graph; its index waits for the next start.
        assert await pool.fetchval("SELECT count(*) FROM chunk_vectors WHERE graphed") == 2
        assert await pool.fetchval(hnsw) is None
        # An old worker's statement, in a rolling upgrade, stores into the graph at once; the new
        # worker's leaves its vector waiting for the grapher.
        old_worker, (old_chunk,) = await insert_note(pool, "During the upgrade the ferry left from pier five.")
        await _embed_before_0024(pool, embedder, 1)
        new_worker, (new_chunk,) = await insert_note(pool, "After the upgrade the ferry left from pier six.")
        await embed_queued(pool, embedder, 1, graph=False)
        graphed = {r["chunk_id"]: r["graphed"] for r in await pool.fetch("SELECT chunk_id, graphed FROM chunk_vectors")}
        assert graphed[old_chunk] is True and graphed[new_chunk] is False
    finally:
        await pool.close()

    # A stack on the migrated database builds the index again, on the graphed vectors, and its
    # grapher lets the waiting one in; every note is found by meaning.
    stack = await start_stack(dsn, embedder)
    clients = Clients(stack)
    conn = await asyncpg.connect(dsn)
    try:
        assert (await conn.fetchval(hnsw)).endswith("WHERE (indexed AND graphed)")

        async def none_waiting() -> bool:
            return not await vector_graph.waiting(conn)

        await eventually(none_waiting)
        found = await clients.find(GLOBAL_WORKSPACE, "ferry pier", mode="semantic")
        assert set(ids(found)) == {str(m) for m, _ in before} | {str(old_worker), str(new_worker)}
    finally:
        await conn.close()
        await clients.close()
        await stack.stop()


_TERM_COUNTS = "SELECT lexeme, df, mdf FROM lexical_terms"
_SIZES = "SELECT chunks, memories FROM lexical_sizes WHERE workspace_id = $1"


async def test_the_memory_df_migration_counts_each_word_s_memories(postgres: Postgres) -> None:
    dsn, _, migrations, upto = await _migrated_up_to(postgres, "0023_memory_df.sql")
    pool = await open_pool(dsn)
    try:
        # Three chunks of one note (its title, "Note", in each) and one of another.
        await insert_note(pool, "The ferry leaves at noon.", more=["The ferry is late.", "Buses run all night."])
        await insert_note(pool, "A ferry sank.")
        assert await pool.fetchval("SELECT lexical_post(1000)") == 4
        # Positive control: before, a word's document frequency counts chunks.
        assert await pool.fetchval("SELECT df FROM lexical_terms WHERE lexeme = 'ferri'") == 3

        async with pool.acquire() as conn:
            assert await apply_migrations(conn, migrations[: upto + 1]) == ["0023_memory_df.sql"]
        counts = {r["lexeme"]: (r["df"], r["mdf"]) for r in await pool.fetch(_TERM_COUNTS)}
        assert counts["ferri"] == (3, 2) and counts["note"] == (4, 2) and counts["night"] == (1, 1)
        sizes = await pool.fetchrow(_SIZES, GLOBAL_WORKSPACE)
        assert tuple(sizes) == (4, 2)
        async with pool.acquire() as conn:
            recount, maintained = await lexical_statistics(conn)
        assert maintained == recount
    finally:
        await pool.close()


async def test_a_memory_counts_once_for_a_word_whichever_passes_post_its_chunks(postgres: Postgres) -> None:
    """The poster counts a memory for a word while any of its posted chunks holds it, when its
    chunks enter and leave one pass at a time (a small batch, or a version's chunks entering
    before the last one's leave)."""
    dsn, _, migrations, _ = await _migrated_up_to(postgres, "0023_memory_df.sql")
    pool = await open_pool(dsn)
    try:
        async with pool.acquire() as conn:
            await apply_migrations(conn, migrations)

        async def one_at_a_time() -> dict[str, tuple[int, int]]:
            """Posts the queue one chunk a pass; the statistics then equal a recount. Each word's
            (chunks, memories)."""
            while await pool.fetchval("SELECT lexical_post(1)"):
                pass
            async with pool.acquire() as conn:
                recount, maintained = await lexical_statistics(conn)
            assert maintained == recount
            return {r["lexeme"]: (r["df"], r["mdf"]) for r in await pool.fetch(_TERM_COUNTS)}

        _, (first, second, third) = await insert_note(
            pool, "The ferry leaves at noon.", more=["The ferry is late.", "Buses run all night."]
        )
        await insert_note(pool, "A ferry sank.")
        assert (await one_at_a_time())["ferri"] == (3, 2)

        async def indexed(chunk: int, flag: bool) -> None:
            await pool.execute("UPDATE chunks SET indexed = $2 WHERE id = $1", chunk, flag)

        # One chunk holding the word leaves: the note still holds it in the other.
        await indexed(first, False)
        assert (await one_at_a_time())["ferri"] == (2, 2)
        # The other leaves too: the note no longer counts for the word, still for the workspace.
        await indexed(second, False)
        counts = await one_at_a_time()
        assert counts["ferri"] == (1, 1) and counts["night"] == (1, 1)
        assert (await pool.fetchrow(_SIZES, GLOBAL_WORKSPACE))["memories"] == 2
        # A chunk entering beside one already posted (another pass's): counted once.
        await indexed(first, True)
        await indexed(second, True)
        assert (await one_at_a_time())["ferri"] == (3, 2)
        # Every chunk of the note gone: it leaves the workspace's count.
        for chunk in (first, second, third):
            await indexed(chunk, False)
        counts = await one_at_a_time()
        assert counts["ferri"] == (1, 1) and "night" not in counts
        assert (await pool.fetchrow(_SIZES, GLOBAL_WORKSPACE))["memories"] == 1
    finally:
        await pool.close()
