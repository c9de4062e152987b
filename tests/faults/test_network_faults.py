"""Drill 5: a fault proxy between the gateway and search, and between the services and PostgreSQL.

+200 ms of latency and 1% of chunks resetting their connection: every call ends within its
deadline (plus a little), most succeed. A statement whose caller's deadline passed is cancelled in
PostgreSQL, not left running. A 10 s blackhole (open connections die silently): calls fail within
their deadline during it, and keepalive notices the dead connection, so calls succeed again soon
after it ends; a channel without keepalive stays stuck on its dead connection (the control).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import asyncpg
import grpc
import httpx
import pytest
from pgvector.asyncpg import register_vector

from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.ingest.v1 import ingest_service_pb2_grpc as ingest_grpc
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo.search.v1 import search_service_pb2_grpc as search_grpc
from mnemo_embed import HashEmbedder
from mnemo_gateway import GatewayApp
from mnemo_ingest.app import SERVICE_NAME as INGEST_SERVICE
from mnemo_platform import current_call, grpc_server
from mnemo_platform.grpc_server import GrpcApp, Registration
from mnemo_search.app import SERVICE_NAME as SEARCH_SERVICE
from mnemo_server.stack import Stack, StackConfig
from mnemo_store import close_pool, open_pool, renew_connections
from tests.faults.proxy import FaultProxy
from tests.helpers import Postgres, eventually, health_is, stack_env

WORKSPACE = "faults-net"
DEADLINE_S = 3.0
# What "within the deadline" allows beyond it: the HTTP hop and the event loop of a shared machine.
SLACK_S = 1.0


@dataclass
class Net:
    stack: Stack
    gateway: GatewayApp
    search_proxy: FaultProxy
    db_proxy: FaultProxy
    direct_dsn: str


def socket_of(uri: str) -> str:
    """The Unix socket of the embedded PostgreSQL (its URI names the directory)."""
    directory = parse_qs(urlsplit(uri).query)["host"][0]
    return str(next(Path(directory).glob(".s.PGSQL.*")))


@pytest.fixture
async def net(postgres: Postgres) -> AsyncIterator[Net]:
    direct = await postgres.create_database("net")
    db_proxy = await FaultProxy(socket_of(postgres.uri)).start()
    database = urlsplit(direct).path
    via_proxy = f"postgresql://postgres@127.0.0.1:{db_proxy.port}{database}"
    config = StackConfig.from_env(stack_env(via_proxy, MNEMO_GRPC_TIMEOUT_S=str(DEADLINE_S)))
    stack = Stack(config, embedder=HashEmbedder(64))
    await stack.start()
    await stack.after_start()
    assert stack.search is not None and stack.ingest is not None
    search_proxy = await FaultProxy(stack.search.target).start()
    # A second gateway, reaching search only through the proxy.
    gateway = GatewayApp(config.gateway, "127.0.0.1:0", 1.0, stack.ingest.target, search_proxy.address, DEADLINE_S)
    await gateway.start()
    async with httpx.AsyncClient(base_url=gateway.base_url) as http:
        assert (await http.post("/api/v1/workspaces", json={"name": WORKSPACE})).status_code == 201
        for i in range(5):
            written = await http.post("/api/v1/memories", json={"workspace": WORKSPACE, "content": f"fact {i}"})
            assert written.status_code == 201, written.text
    yield Net(stack, gateway, search_proxy, db_proxy, direct)
    await gateway.stop()
    await stack.stop()
    await search_proxy.stop()
    await db_proxy.stop()


async def timed(http: httpx.AsyncClient, method: str, path: str, **kwargs: object) -> tuple[int, float]:
    started = time.perf_counter()
    answer = await http.request(method, path, **kwargs)  # type: ignore[arg-type]
    return answer.status_code, time.perf_counter() - started


async def answered_again(
    http: httpx.AsyncClient, ended: float, method: str, path: str, **kwargs: object
) -> float | None:
    """Once the fault `ended` (a monotonic time), how many seconds until the call answers 200
    (tried every 0.25 s for 30 s); None if it never does."""
    await asyncio.sleep(max(0.0, ended - time.monotonic()))
    while time.monotonic() - ended < 30:
        code, _ = await timed(http, method, path, **kwargs)
        if code == 200:
            return time.monotonic() - ended
        await asyncio.sleep(0.25)
    return None


async def test_latency_and_resets_keep_every_call_within_its_deadline(net: Net) -> None:
    async with httpx.AsyncClient(base_url=net.gateway.base_url, timeout=30) as http:
        # Gateway <-> search: +200 ms each way, 1% of chunks reset their connection. Each link's
        # count starts five chunks short of a reset, so the first falls among its first calls
        # whatever it carried before: a write is one statement now, and the database link's
        # twelve calls may carry fewer than the hundred chunks between two resets.
        net.search_proxy.chunks = 95
        net.search_proxy.latency_s, net.search_proxy.reset_fraction = 0.2, 0.01
        results = [
            await timed(http, "POST", "/api/v1/search", json={"workspace": WORKSPACE, "query": f"fact {i % 5}"})
            for i in range(30)
        ]
        net.search_proxy.latency_s = net.search_proxy.reset_fraction = 0.0
        # Services <-> PostgreSQL: the same, for writes (ingest) and reads (search).
        net.db_proxy.chunks = 95
        net.db_proxy.latency_s, net.db_proxy.reset_fraction = 0.2, 0.01
        writes = [
            await timed(
                http,
                "POST",
                "/api/v1/memories",
                json={"workspace": WORKSPACE, "content": f"slow {i}", "idempotency_key": f"net-{i}"},
            )
            for i in range(6)
        ]
        reads = [await timed(http, "GET", "/api/v1/memories", params={"workspace": WORKSPACE}) for _ in range(6)]
        net.db_proxy.latency_s = net.db_proxy.reset_fraction = 0.0

    for label, batch in (("gateway-search", results), ("db writes", writes), ("db reads", reads)):
        codes = [code for code, _ in batch]
        times = [t for _, t in batch]
        print(
            f"{label}: {codes.count(200) + codes.count(201)}/{len(batch)} ok, codes {sorted(set(codes))}, "
            f"median {statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms"
        )
        # Every call answers within its deadline: success, or 503/504, never a hang or a 500.
        assert max(times) < DEADLINE_S + SLACK_S, (label, times)
        assert set(codes) <= {200, 201, 503, 504}, (label, codes)
    # The latency is really in the path (the control), and most calls still succeed.
    assert statistics.median(t for _, t in results) > 0.4
    assert sum(code == 200 for code, _ in results) >= 24
    print(f"resets: search link {net.search_proxy.resets}, database link {net.db_proxy.resets}")
    assert net.search_proxy.resets >= 1 and net.db_proxy.resets >= 1  # the resets really happened


async def test_a_statement_is_cancelled_in_postgresql_when_its_deadline_passes(net: Net) -> None:
    assert net.stack.ingest is not None
    holder = await asyncpg.connect(net.direct_dsn)
    watcher = await asyncpg.connect(net.direct_dsn)

    async def waiting() -> int:
        return await watcher.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'mnemo' "
            "AND state = 'active' AND wait_event_type = 'Lock'"
        )

    channel = grpc.aio.insecure_channel(net.stack.ingest.target)
    try:
        # Hold the workspace's audit-chain lock: a write waits for it inside PostgreSQL.
        tx = holder.transaction()
        await tx.start()
        await holder.execute("SELECT pg_advisory_xact_lock(hashtextextended('mnemo.audit:' || $1, 0))", WORKSPACE)
        call = asyncio.ensure_future(
            ingest_grpc.IngestServiceStub(channel).WriteMemory(
                ingest_pb.WriteMemoryRequest(workspace=WORKSPACE, content=f"blocked {uuid.uuid4()}"),
                metadata=current_call().metadata(),
                timeout=1.0,
            )
        )
        await asyncio.sleep(0.6)
        assert await waiting() == 1  # the control: the statement is there, waiting, before the deadline
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await call
        assert failed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # Within half a second of the deadline nothing of that call is left running.
        deadline_passed = time.perf_counter()

        async def gone() -> bool:
            return not await waiting()

        await eventually(gone, timeout=5, interval=0.05)
        left = await waiting()
        print(f"statement gone {(time.perf_counter() - deadline_passed) * 1000:.0f} ms after the deadline")
        assert left == 0 and time.perf_counter() - deadline_passed < 0.5
        await tx.rollback()
        # Nothing was written by the cancelled call, and the next write goes through.
        assert not await watcher.fetchval("SELECT count(*) FROM memories WHERE content_hash IS NULL")
        written = await ingest_grpc.IngestServiceStub(channel).WriteMemory(
            ingest_pb.WriteMemoryRequest(workspace=WORKSPACE, content="after the lock"),
            metadata=current_call().metadata(),
            timeout=5.0,
        )
        assert written.memory.id
    finally:
        await channel.close()
        await holder.close()
        await watcher.close()


async def test_keepalive_detects_a_blackhole_and_calls_succeed_again(net: Net) -> None:
    assert net.stack.search is not None
    # The control: a channel without keepalive, connected through the same proxy before the blackhole.
    plain = grpc.aio.insecure_channel(net.search_proxy.address)
    stub = search_grpc.SearchServiceStub(plain)
    request = search_pb.ListWorkspacesRequest()
    await stub.ListWorkspaces(request, metadata=current_call().metadata(), timeout=5)
    async with httpx.AsyncClient(base_url=net.gateway.base_url, timeout=30) as http:
        params = {"workspace": WORKSPACE, "query": "fact 1"}
        assert (await http.post("/api/v1/search", json=params)).status_code == 200
        connects = net.search_proxy.upstream_connects

        net.search_proxy.blackhole(10.0)
        ended = time.monotonic() + 10.0
        during = [await timed(http, "POST", "/api/v1/search", json=params) for _ in range(2)]
        assert all(code == 504 and t < DEADLINE_S + SLACK_S for code, t in during), during

        recovered = await answered_again(http, ended, "POST", "/api/v1/search", json=params)
    print(f"search through the gateway answered again {recovered} s after the blackhole ended")
    assert recovered is not None and recovered < 10.0
    assert net.search_proxy.upstream_connects > connects  # a new connection, not the dead one
    # Without keepalive the old connection is still taken for alive: calls on it time out.
    with pytest.raises(grpc.aio.AioRpcError) as stuck:
        await stub.ListWorkspaces(request, metadata=current_call().metadata(), timeout=1)
    assert stuck.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    await plain.close()


async def test_a_blackhole_between_the_services_and_postgresql_is_noticed(net: Net) -> None:
    assert net.stack.ingest is not None and net.stack.search is not None
    services = {INGEST_SERVICE: net.stack.ingest.target, SEARCH_SERVICE: net.stack.search.target}
    probes = {name: grpc.aio.insecure_channel(target) for name, target in services.items()}
    # The control: a connection through the same proxy, opened before the blackhole and kept.
    kept = await asyncpg.connect(f"postgresql://postgres@127.0.0.1:{net.db_proxy.port}{urlsplit(net.direct_dsn).path}")
    params = {"workspace": WORKSPACE}
    try:
        async with httpx.AsyncClient(base_url=net.gateway.base_url, timeout=30) as http:
            assert (await http.get("/api/v1/memories", params=params)).status_code == 200
            connects = net.db_proxy.upstream_connects

            net.db_proxy.blackhole(10.0)
            ended = time.monotonic() + 10.0
            during: list[tuple[int, float]] = []
            while time.monotonic() < ended - DEADLINE_S - SLACK_S:
                during.append(await timed(http, "GET", "/api/v1/memories", params=params))
                key = f"hole-{len(during)}"
                write = {"workspace": WORKSPACE, "content": f"written in the hole {key}", "idempotency_key": key}
                during.append(await timed(http, "POST", "/api/v1/memories", json=write))
            # Readiness turns NOT_SERVING while the database does not answer; liveness stays.
            for name, channel in probes.items():
                assert await health_is(channel, name, "NOT_SERVING"), name
                assert await health_is(channel, "", "SERVING"), name
            recovered = await answered_again(http, ended, "GET", "/api/v1/memories", params=params)
            for name, channel in probes.items():
                await eventually(lambda c=channel, n=name: health_is(c, n, "SERVING"), timeout=10, interval=0.2)
            # No later call lands on a connection that died in the blackhole.
            after = []
            for i in range(10):
                after.append(await timed(http, "GET", "/api/v1/memories", params=params))
                write = {"workspace": WORKSPACE, "content": f"after the hole {i}", "idempotency_key": f"after-{i}"}
                after.append(await timed(http, "POST", "/api/v1/memories", json=write))
            stored = await kept_count(net.direct_dsn)
        print(
            f"during: {[code for code, _ in during]}, max {max(t for _, t in during):.2f} s; "
            f"recovered {recovered:.2f} s after the blackhole; after: {[code for code, _ in after]}"
            if recovered is not None
            else f"never recovered; during {during}"
        )
        assert during and all(code in (503, 504) and t < DEADLINE_S + SLACK_S for code, t in during), during
        assert recovered is not None and recovered < 5.0
        assert all(code in (200, 201) for code, _ in after), after
        assert net.db_proxy.upstream_connects > connects  # the services opened new connections
        assert stored == 10  # each write after the hole stored once
        # The kept connection really died in the blackhole: it does not answer now it is over.
        with pytest.raises(TimeoutError):
            await kept.fetchval("SELECT 1", timeout=1)
    finally:
        kept.terminate()
        for channel in probes.values():
            await channel.close()
    # The services stop in bounded time although connections of theirs died silently (a graceful
    # close on one never returns).
    started = time.monotonic()
    await net.gateway.stop()
    await net.stack.stop()
    print(f"stack stopped in {time.monotonic() - started:.1f} s")
    assert time.monotonic() - started < 60


async def kept_count(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        count: int = await conn.fetchval("SELECT count(*) FROM memories WHERE idempotency_key LIKE 'after-%'")
        return count
    finally:
        await conn.close()


# Where a write commits: a new note is one statement, committed on its own, once the ingest
# process knows its chain's head (the fixture's notes taught it); a note with a source goes the long
# way, BEGIN ... COMMIT. The fault strikes the message that commits, on either way.
@pytest.mark.parametrize(
    ("source_uri", "commit_message"),
    [("", b"the commit window"), ("file:///commit-window.md", b"COMMIT")],
    ids=["one-statement", "transaction"],
)
async def test_a_write_whose_commit_answer_is_lost_is_stored_once_when_retried_with_its_key(
    net: Net, source_uri: str, commit_message: bytes
) -> None:
    assert net.stack.ingest is not None
    channel = grpc.aio.insecure_channel(net.stack.ingest.target)
    stub = ingest_grpc.IngestServiceStub(channel)
    watcher = await asyncpg.connect(net.direct_dsn)

    def write(timeout: float) -> grpc.aio.UnaryUnaryCall:
        request = ingest_pb.WriteMemoryRequest(
            workspace=WORKSPACE, content="the commit window", idempotency_key="window", source_uri=source_uri
        )
        return stub.WriteMemory(request, metadata=current_call().metadata(), timeout=timeout)

    try:
        # Nothing else commits meanwhile: the fixture's notes are embedded, no write is under way.
        async def embedded() -> bool:
            return not await watcher.fetchval("SELECT count(*) FROM embed_queue")

        await eventually(embedded, timeout=30, interval=0.1)
        # The message that commits the write reaches PostgreSQL (the one statement's, carrying its
        # content; or COMMIT), and its answer is lost with the connection.
        net.db_proxy.die_after(commit_message)
        with pytest.raises(grpc.aio.AioRpcError) as lost:
            await write(timeout=2.0)
        assert net.db_proxy.died_after == 1  # the fault struck the commit, not something before it
        assert lost.value.code() in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)
        # It failed for the client, and yet it was stored: the window is real (the control) ...
        stored = "SELECT count(*) FROM memories WHERE workspace_id = $1 AND idempotency_key = 'window'"
        assert await watcher.fetchval(stored, WORKSPACE) == 1
        # ... and the client's retry with the same key stores nothing more: it is told it was done.
        retried = await write(timeout=10.0)
        print(f"first try: {lost.value.code().name}; retry: {ingest_pb.WriteOutcome.Name(retried.outcome)}")
        assert retried.outcome == ingest_pb.WRITE_OUTCOME_REPLAYED
        assert await watcher.fetchval(stored, WORKSPACE) == 1
        versions = "SELECT count(*) FROM memory_versions WHERE memory_id = $1"
        assert await watcher.fetchval(versions, uuid.UUID(retried.memory.id)) == 1
    finally:
        await watcher.close()
        await channel.close()


async def test_a_pooled_connection_is_ready_two_round_trips_after_it_connects(postgres: Postgres) -> None:
    """Across a slow link each round trip of a new connection's setup counts against the call that
    opened it (database._init_connection): counted here in the chunks the proxy carries, each round
    trip a message and its answer."""
    dsn = await postgres.create_database("setup")
    direct = await asyncpg.connect(dsn)
    await direct.execute("CREATE EXTENSION IF NOT EXISTS vector")
    await direct.close()
    proxy = await FaultProxy(socket_of(postgres.uri)).start()
    via_proxy = f"postgresql://postgres@127.0.0.1:{proxy.port}{urlsplit(dsn).path}"
    try:
        before = proxy.chunks
        bare = await asyncpg.connect(via_proxy)
        connecting = proxy.chunks - before
        before = proxy.chunks
        pool = await open_pool(via_proxy, 1, 1)
        pooled = proxy.chunks - before
        # Its codecs work: a vector goes in and comes back out.
        assert (await pool.fetchval("SELECT $1::vector", [1.0, 2.0])).to_list() == [1.0, 2.0]
        await close_pool(pool, timeout_s=1)
        assert pooled - connecting <= 4  # the vector type's lookup, prepared then run
        # The control: pgvector's own registration (three types), on the bare connection, costs more.
        before = proxy.chunks
        await register_vector(bare)
        assert proxy.chunks - before >= 12
        await bare.close()
    finally:
        await proxy.stop()


class _Probed(GrpcApp):
    """A service with no servicers whose readiness probe fails loudly (an answer naming why) or
    silently (no answer), and which counts the renewals its failures ask for."""

    name = "probed"

    def __init__(self) -> None:
        super().__init__("127.0.0.1:0", 1.0)
        self.silent, self.probes, self.renewed = False, 0, 0

    async def open(self) -> list[Registration]:
        return []

    async def unready_reason(self) -> str | None:
        self.probes += 1
        if self.silent:
            await asyncio.Event().wait()
        return "PostgreSQL does not answer: ConnectionDoesNotExistError"

    async def renew_connections(self) -> None:
        self.renewed += 1


async def test_only_a_silent_readiness_probe_renews_the_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe whose connection was reset lost that connection only; renewing the rest would make
    every call after it open one of its own. A probe that gets no answer may be on a dead path,
    where every connection looks open and answers nothing: that one renews them."""
    monkeypatch.setattr(grpc_server, "READINESS_INTERVAL_S", 0.05)
    monkeypatch.setattr(grpc_server, "READINESS_TIMEOUT_S", 0.2)
    app = _Probed()
    await app.start()
    try:

        async def probed(times: int) -> bool:
            return app.probes >= times

        await eventually(lambda: probed(5), timeout=30)
        assert app.renewed == 0  # five loud failures, no renewal
        app.silent = True
        probes = app.probes

        async def renewed() -> bool:
            return app.renewed >= 1

        await eventually(renewed, timeout=30)  # the control: silence renews
        assert app.probes > probes
    finally:
        await app.stop()
        await app.close()


async def test_renewing_a_pool_replaces_connections_that_died_silently(postgres: Postgres) -> None:
    dsn = await postgres.create_database("renew")
    proxy = await FaultProxy(socket_of(postgres.uri)).start()
    via_proxy = f"postgresql://postgres@127.0.0.1:{proxy.port}{urlsplit(dsn).path}"
    renewed, kept = await open_pool(via_proxy, 1, 1), await open_pool(via_proxy, 1, 1)
    try:
        assert await renewed.fetchval("SELECT 1") == 1 and await kept.fetchval("SELECT 1") == 1
        # Each pool's one idle connection dies silently; connections made after the blackhole pass.
        proxy.blackhole(0.5)
        await asyncio.sleep(0.6)
        await renew_connections(renewed)
        assert await renewed.fetchval("SELECT 1", timeout=5) == 1  # a new connection answers
        # The control: the pool that was not renewed still hands out its dead connection, and the
        # statement on it waits (a timeout would wait too: asyncpg's cancel goes to the dead server).
        control = asyncio.ensure_future(kept.fetchval("SELECT 1"))
        done, _ = await asyncio.wait({control}, timeout=1)
        assert not done
        kept.terminate()
        with contextlib.suppress(asyncpg.InterfaceError, asyncpg.PostgresConnectionError, asyncio.CancelledError):
            await control
    finally:
        await close_pool(renewed, timeout_s=1)
        await close_pool(kept, timeout_s=1)
        await proxy.stop()
