"""What a write costs PostgreSQL, statement by statement, as the README states it ("What a write
guarantees"): a new note is one statement, and no transaction around it, once its workspace id and
its audit chain's head are known to the ingest process; the first note of a chain in a process is
three statements between BEGIN and COMMIT."""

from __future__ import annotations

import asyncpg
import pytest

from mnemo.ingest.v1 import ingest_service_pb2 as pb
from mnemo_embed import HashEmbedder
from mnemo_ingest.steps import Steps
from mnemo_ingest.validation import check_write
from mnemo_ingest.writes import WRITE_SESSION, Writes
from mnemo_platform import AlreadyExists
from mnemo_store import WorkspaceRow, add_workspace, open_pool, verify_chains
from mnemo_wire.trust import TrustSettings
from tests.helpers import Clients, Postgres, migrate, start_stack


async def _counted(
    postgres: Postgres, prefix: str, *names: str
) -> tuple[asyncpg.Pool, Writes, list[WorkspaceRow], list[str]]:
    """A database with workspaces `names`, a pool of one connection whose statements are collected
    in the list returned, and the write side over it."""
    dsn = await postgres.create_database(prefix)
    embedder = HashEmbedder(16)
    await migrate(dsn, embedder)
    pool = await open_pool(dsn, 1, 1)
    sent: list[str] = []
    async with pool.acquire() as conn:
        workspaces = [(await add_workspace(conn, name=name))[0] for name in names]
        # The pool's one connection, whichever way it is taken.
        conn.add_query_logger(lambda record: sent.append(" ".join(record.query.split())))
    return pool, Writes(pool, Steps(embedder, TrustSettings())), workspaces, sent


async def test_a_new_note_costs_one_statement_once_its_workspace_and_chain_head_are_known(postgres: Postgres) -> None:
    pool, writes, (ws, other), sent = await _counted(postgres, "write_statements", "Counted Notes", "Other Notes")
    try:

        async def statements(ref: str, content: str) -> list[str]:
            sent.clear()
            await writes.write(ref, check_write(pb.WriteMemoryRequest(workspace=ref, content=content), 1 << 20))
            return list(sent)

        assert ws.id != ws.name  # (a name that is not also the id: the two are told apart below)
        await statements(ws.id, "a first note: type lookups and prepared statements happen once")
        by_id = await statements(ws.id, "a note in a workspace named by its id")
        assert len(by_id) == 1, by_id
        assert all(f"INSERT INTO {t}" in by_id[0] for t in ("memories", "chunks", "audit_events")), by_id
        assert "pg_notify" in by_id[0] and "chain_guard" in by_id[0]
        # A chain's first note in this process reads its head, in a transaction (after the lookup of
        # a workspace id not seen before).
        first = await statements(other.id, "the first note of another chain")
        assert [q.split()[0].rstrip(";") for q in first] == ["SELECT", "BEGIN", "WITH", "SELECT", "WITH", "COMMIT"]
        assert "FROM workspaces" in first[0] and "INSERT INTO chunks" in first[2] and "pg_notify" in first[2]
        assert "FROM audit_events" in first[3] and "INSERT INTO audit_events" in first[4]
        # A name is looked up on every write (a registration can change what it names): one more.
        by_name = await statements("Counted Notes", "a note in a workspace named by its name")
        assert len(by_name) == 2 and "FROM workspaces" in by_name[0], by_name
        # Positive control: every note is stored whole, chunks queued and audited.
        async with pool.acquire() as conn:
            counts = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM memories) AS memories, (SELECT count(*) FROM embed_queue) AS queued, "
                "(SELECT count(*) FROM audit_events WHERE action = 'write') AS audited"
            )
            assert (await verify_chains(conn)).ok
        assert dict(counts) == {"memories": 4, "queued": 4, "audited": 4}
    finally:
        await pool.close()


async def test_a_note_with_a_new_key_is_one_statement_and_a_repeat_is_answered_the_long_way(
    postgres: Postgres,
) -> None:
    pool, writes, (ws,), sent = await _counted(postgres, "keyed_statements", "Keyed Notes")
    try:

        async def write(content: str, key: str) -> tuple[str, list[str]]:
            sent.clear()
            request = pb.WriteMemoryRequest(workspace=ws.id, content=content, idempotency_key=key)
            written = await writes.write(ws.id, check_write(request, 1 << 20))
            return written.outcome, list(sent)

        await write("the chain's first note in this process", "key-0")
        outcome, new_key = await write("a note with a key never used", "key-1")
        assert outcome == "created" and len(new_key) == 1 and "chain_guard" in new_key[0], new_key
        # A retry of it: the statement fails on the key's unique index, and the long way, which
        # looks the key up, answers it as a replay of the first.
        outcome, repeat = await write("a note with a key never used", "key-1")
        assert outcome == "replayed", outcome
        assert "chain_guard" in repeat[0] and "BEGIN;" in repeat[1:], repeat
        # (as a batch, not item by item in savepoints, as a batch that failed otherwise is rerun)
        assert not any(q.startswith("SAVEPOINT") for q in repeat), repeat
        # The same key with other content is refused, and writes nothing.
        with pytest.raises(AlreadyExists):
            await write("other content under the same key", "key-1")
        async with pool.acquire() as conn:
            counts = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM memories) AS memories, "
                "(SELECT count(*) FROM audit_events WHERE action = 'write') AS audited"
            )
            assert (await verify_chains(conn)).ok
        # Positive control beside the refusals: the two keyed notes, each once.
        assert dict(counts) == {"memories": 2, "audited": 2}
    finally:
        await pool.close()


async def test_a_new_note_s_statement_is_planned_once_per_connection_of_the_write_pool(postgres: Postgres) -> None:
    """The write path's pool reuses the statement's plan (mnemo_ingest.writes.WRITE_SESSION);
    left to itself PostgreSQL planned it at every call."""
    dsn = await postgres.create_database("write_plans")
    embedder = HashEmbedder(16)
    await migrate(dsn, embedder)

    async def plans(session: dict[str, str]) -> tuple[int, int]:
        """(generic, custom) plans of the new-note statement after eight writes on one connection."""
        pool = await open_pool(dsn, 1, 1, session)
        try:
            async with pool.acquire() as conn:
                ws = (await add_workspace(conn, name=f"plans {len(session)}"))[0]
            writes = Writes(pool, Steps(embedder, TrustSettings()))
            for i in range(8):
                request = pb.WriteMemoryRequest(workspace=ws.id, content=f"note {i} of the plan count")
                await writes.write(ws.id, check_write(request, 1 << 20))
            row = await pool.fetchrow(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement LIKE '%INSERT INTO memories%' ORDER BY generic_plans + custom_plans DESC LIMIT 1"
            )
            return row["generic_plans"], row["custom_plans"]
        finally:
            await pool.close()

    generic, custom = await plans(WRITE_SESSION)
    assert custom == 0 and generic >= 7, (generic, custom)
    # Control: the same writes on a connection that plans as PostgreSQL chooses.
    generic, custom = await plans({})
    assert custom >= 7, (generic, custom)


async def test_the_ingest_service_writes_new_notes_on_its_write_pool(postgres: Postgres) -> None:
    dsn = await postgres.create_database("write_pool")
    stack = await start_stack(dsn, HashEmbedder(16))
    clients = Clients(stack)
    watcher = await asyncpg.connect(dsn)
    try:
        ws = await clients.workspace()
        for i in range(3):
            await clients.write(ws.id, f"note {i} written through the service")
        writers = {
            r["pid"]
            for r in await watcher.fetch(
                "SELECT pid FROM pg_stat_activity WHERE query LIKE '%INSERT INTO memories%' AND pid <> pg_backend_pid()"
            )
        }
        async with stack.ingest.write_pool.acquire() as conn:
            assert await conn.fetchval("SHOW plan_cache_mode") == "force_generic_plan"
            assert await conn.fetchval("SELECT pg_backend_pid()") in writers
        # Control: the service's other pool plans per call, and did not write the notes.
        async with stack.ingest.pool.acquire() as conn:
            assert await conn.fetchval("SHOW plan_cache_mode") == "auto"
            assert await conn.fetchval("SELECT pg_backend_pid()") not in writers
    finally:
        await watcher.close()
        await clients.close()
        await stack.stop()
