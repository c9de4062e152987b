"""What a write costs PostgreSQL, statement by statement, as the README states it ("What a write
guarantees"): a new note is three statements besides BEGIN and COMMIT once its workspace id is known."""

from __future__ import annotations

from mnemo.ingest.v1 import ingest_service_pb2 as pb
from mnemo_embed import HashEmbedder
from mnemo_ingest.steps import Steps
from mnemo_ingest.validation import check_write
from mnemo_ingest.writes import Writes
from mnemo_store import add_workspace, open_pool
from mnemo_wire.trust import TrustSettings
from tests.helpers import Postgres, migrate

TRANSACTION = ("BEGIN", "COMMIT")


async def test_a_new_note_costs_three_statements_once_its_workspace_is_known(postgres: Postgres) -> None:
    dsn = await postgres.create_database("write_statements")
    embedder = HashEmbedder(16)
    await migrate(dsn, embedder)
    pool = await open_pool(dsn, 1, 1)
    try:
        sent: list[str] = []
        async with pool.acquire() as conn:
            ws, _ = await add_workspace(conn, name="Counted Notes")
            # The pool's one connection, whichever way it is taken.
            conn.add_query_logger(lambda record: sent.append(" ".join(record.query.split())))
        writes = Writes(pool, Steps(embedder, TrustSettings()))

        async def statements(ref: str, content: str) -> list[str]:
            sent.clear()
            await writes.write(ref, check_write(pb.WriteMemoryRequest(workspace=ref, content=content), 1 << 20))
            return [q for q in sent if q.rstrip(";").upper() not in TRANSACTION]

        assert ws.id != ws.name  # (a name that is not also the id: the two are told apart below)
        await statements(ws.id, "a first note: type lookups and prepared statements happen once")
        by_id = await statements(ws.id, "a note in a workspace named by its id")
        assert [q.split()[0] for q in by_id] == ["WITH", "SELECT", "WITH"], by_id
        assert "INSERT INTO chunks" in by_id[0] and "pg_notify" in by_id[0]  # chunks and NOTIFY in the memory's
        assert "audit_events" in by_id[1] and "INSERT INTO audit_events" in by_id[2]
        # A name is looked up on every write (a registration can change what it names): one more.
        by_name = await statements("Counted Notes", "a note in a workspace named by its name")
        assert len(by_name) == 4 and "FROM workspaces" in by_name[0], by_name
        # Positive control: every note is stored whole, chunks queued and audited.
        async with pool.acquire() as conn:
            counts = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM memories) AS memories, (SELECT count(*) FROM embed_queue) AS queued, "
                "(SELECT count(*) FROM audit_events WHERE action = 'write') AS audited"
            )
        assert dict(counts) == {"memories": 3, "queued": 3, "audited": 3}
    finally:
        await pool.close()
