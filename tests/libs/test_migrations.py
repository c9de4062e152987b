"""Migrations: applied once under a lock, checksummed, and an edited one is refused by name."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import asyncpg
import pytest

from mnemo_embed import HashEmbedder
from mnemo_embed.settings import EmbeddingSettings
from mnemo_ingest import IngestApp
from mnemo_ingest.settings import IngestSettings
from mnemo_store import MigrationError, apply_migrations, load_migrations
from mnemo_store.embedding_space import EmbeddingSpaceMismatch, ensure_embedding_space
from mnemo_store.settings import DatabaseSettings
from tests.helpers import Postgres


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
