"""A new note in one statement, linked to the audit chain's head as the ingest process remembers
it (writes.Writes._in_one_statement): when the chain has moved on, whether the statement can see it
(another writer committed before it began) or not (one committed while it waited for the chain's
lock), the statement fails whole and the write lands the long way; the chain never forks."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from mnemo.ingest.v1 import ingest_service_pb2 as pb
from mnemo_embed import HashEmbedder
from mnemo_ingest.steps import Steps
from mnemo_ingest.validation import check_write
from mnemo_ingest.writes import Writes
from mnemo_store import (
    AuditEvent,
    add_workspace,
    anchor_key_path,
    append_audit_events,
    configure_anchor_key,
    open_pool,
    verify_chains,
)
from mnemo_wire.trust import TrustSettings
from tests.helpers import Postgres, migrate


async def _setup(postgres: Postgres, prefix: str) -> tuple[asyncpg.Pool, Writes, str]:
    dsn = await postgres.create_database(prefix)
    embedder = HashEmbedder(16)
    await migrate(dsn, embedder)
    pool = await open_pool(dsn, 4, 4)  # all open from the start: _logging sees each
    async with pool.acquire() as conn:
        ws, _ = await add_workspace(conn, name="Chained Notes")
    return pool, Writes(pool, Steps(embedder, TrustSettings())), ws.id


def _logging(pool: asyncpg.Pool) -> list[str]:
    """The statements sent from now on, by any of the pool's connections."""
    sent: list[str] = []
    for holder in pool._holders:  # every connection the pool may hand out
        if holder._con is not None:
            holder._con.add_query_logger(lambda record: sent.append(" ".join(record.query.split())))
    return sent


async def _write(writes: Writes, workspace: str, content: str) -> None:
    request = pb.WriteMemoryRequest(workspace=workspace, content=content)
    written = await writes.write(workspace, check_write(request, 1 << 20))
    assert written.outcome == "created"


async def _state(pool: asyncpg.Pool, workspace: str) -> tuple[int, int, bool]:
    """(memories, write events, whether the chain verifies with no head followed twice)."""
    async with pool.acquire() as conn:
        memories = await conn.fetchval("SELECT count(*) FROM memories WHERE workspace_id = $1", workspace)
        events = await conn.fetchval(
            "SELECT count(*) FROM audit_events WHERE workspace_id = $1 AND action = 'write'", workspace
        )
        forks = await conn.fetchval(
            "SELECT count(*) FROM (SELECT prev_hash FROM audit_events WHERE workspace_id = $1 "
            "GROUP BY prev_hash HAVING count(*) > 1) AS f",
            workspace,
        )
        return memories, events, (await verify_chains(conn, workspace)).ok and forks == 0


async def _other_writer_appends(conn: asyncpg.Connection, workspace: str) -> None:
    """What another replica's correction does to the chain: an event appended under its lock."""
    await append_audit_events(conn, [AuditEvent(workspace, "restore", details={"by": "another replica"})])


async def test_a_chain_moved_by_another_writer_fails_the_statement_and_the_note_lands_the_long_way(
    postgres: Postgres,
) -> None:
    pool, writes, ws = await _setup(postgres, "chain_moved")
    try:
        await _write(writes, ws, "the first note reads the chain's head")
        await _write(writes, ws, "the second is one statement")
        sent = _logging(pool)
        async with pool.acquire() as conn, conn.transaction():
            await _other_writer_appends(conn, ws)
        sent.clear()
        await _write(writes, ws, "the third finds the head moved")
        guarded = [q for q in sent if "chain_guard" in q]
        # The one statement was tried, failed, and the note went in through the transaction.
        assert len(guarded) == 1 and sent[0] == guarded[0], sent
        assert "BEGIN;" in sent and "COMMIT;" in sent
        assert any(q.startswith("SELECT w, (SELECT hash FROM audit_events") for q in sent), sent
        assert await _state(pool, ws) == (3, 3, True)
        # The long way taught the process the head again: the next note is one statement.
        sent.clear()
        await _write(writes, ws, "the fourth is one statement again")
        assert len(sent) == 1 and "chain_guard" in sent[0], sent
        assert await _state(pool, ws) == (4, 4, True)
    finally:
        await pool.close()


@pytest.mark.parametrize("anchored", [True, False], ids=["anchored", "unanchored"])
async def test_a_head_remembered_from_a_transaction_that_rolled_back_is_caught_by_the_statement(
    postgres: Postgres, anchored: bool
) -> None:
    pool, writes, ws = await _setup(postgres, "chain_rolled_back")
    key = anchor_key_path()
    # Without anchors the head alone tells the remembered chain from the real one.
    configure_anchor_key(key if anchored else None)
    try:
        assert bool(anchor_key_path()) == anchored
        await _write(writes, ws, "the first note reads the chain's head")
        # The long way remembers the head it made before its transaction commits; this one rolls back,
        # so no event follows the remembered head and only the statement's own check can see it is wrong.
        async with pool.acquire() as conn:
            tx = conn.transaction()
            await tx.start()
            await append_audit_events(conn, [AuditEvent(ws, "restore", details={"rolled": "back"})], known=writes.heads)
            await tx.rollback()
        sent = _logging(pool)
        await _write(writes, ws, "the second finds its head was never written")
        assert sum("chain_guard" in q for q in sent) == 1 and "BEGIN;" in sent, sent
        assert await _state(pool, ws) == (2, 2, True)
    finally:
        configure_anchor_key(key)
        await pool.close()


async def test_a_chain_moved_while_the_statement_waited_for_its_lock_is_not_forked(postgres: Postgres) -> None:
    pool, writes, ws = await _setup(postgres, "chain_race")
    try:
        await _write(writes, ws, "the first note reads the chain's head")
        await _write(writes, ws, "the second is one statement")
        other = await pool.acquire()
        sent = _logging(pool)
        try:
            # Another writer holds the chain's lock, its event appended after the remembered head.
            tx = other.transaction()
            await tx.start()
            await _other_writer_appends(other, ws)
            writing = asyncio.create_task(_write(writes, ws, "the third waits for the lock"))
            # The statement has begun (its snapshot taken, the other event not in it) and waits.
            for _ in range(200):
                waiting = await other.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory' AND pid <> pg_backend_pid()"
                )
                if waiting:
                    break
                await asyncio.sleep(0.02)
            assert waiting == 1 and not writing.done()
            await tx.commit()
            await asyncio.wait_for(writing, 30)
            guarded = [q for q in sent if "chain_guard" in q]
        finally:
            await pool.release(other)
        # Every note and event is there once, on one line of links: the link index refused the
        # statement's event after a head the other event already followed.
        assert await _state(pool, ws) == (3, 3, True)
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM audit_events WHERE workspace_id = $1", ws) == 4
        # It was the one statement that had to give way: it was tried, then the transaction wrote the note.
        assert sum("chain_guard" in q for q in sent) == 1 and "BEGIN;" in sent[sent.index(guarded[0]) :], sent
    finally:
        await pool.close()


async def test_concurrent_notes_of_one_process_take_turns_at_the_chain(postgres: Postgres) -> None:
    pool, writes, ws = await _setup(postgres, "chain_turns")
    try:
        await _write(writes, ws, "the first note reads the chain's head")
        sent = _logging(pool)
        await asyncio.gather(*(_write(writes, ws, f"concurrent note {i}") for i in range(12)))
        # None of them had to take the long way: each was its one statement.
        assert len([q for q in sent if "chain_guard" in q]) == 12 and "BEGIN;" not in sent, sent
        assert await _state(pool, ws) == (13, 13, True)
    finally:
        await pool.close()


async def test_an_anchor_changed_behind_the_process_s_back_is_left_for_verify_to_report(postgres: Postgres) -> None:
    pool, writes, ws = await _setup(postgres, "chain_anchor")
    try:
        assert anchor_key_path(), "the chains are anchored"
        await _write(writes, ws, "the first note reads the chain's head")
        await _write(writes, ws, "the second is one statement")
        # Positive control: the chain and its anchor verify before the anchor is tampered with.
        assert await _state(pool, ws) == (2, 2, True)
        async with pool.acquire() as conn:
            await conn.execute("UPDATE audit_anchors SET signature = repeat('0', 64) WHERE workspace_id = $1", ws)
        await _write(writes, ws, "the third must not sign over the damage")
        # The note is written, and the anchor keeps the damage for verify to see, as the long way
        # leaves an anchor it finds not signed by the key.
        async with pool.acquire() as conn:
            check = await verify_chains(conn, ws)
            assert await conn.fetchval("SELECT count(*) FROM memories WHERE workspace_id = $1", ws) == 3
        assert not check.ok and "not signed by the anchor key" in check.problem, check
    finally:
        await pool.close()
