"""Drill 4: SIGTERM to `mnemo serve ingest` with 50 writes in flight. Each completes or fails
UNAVAILABLE before any side effect: a write answered OK is stored, one answered UNAVAILABLE is not,
and no other code is seen.

The writes are held inside the server by a real lock on the memories table, so they are in flight
for certain when the signal lands: released within the grace, all 50 complete; held past it, all
50 are rolled back and answered UNAVAILABLE. Calls made after the signal are refused UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import asyncpg
import grpc
import httpx

from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.ingest.v1 import ingest_service_pb2_grpc as ingest_grpc
from mnemo_embed import HashEmbedder
from tests.e2e.test_processes import clean_env, free_port, running, wait_serving
from tests.helpers import Postgres, eventually, migrate

IN_FLIGHT = 50
GRACE_S = 3.0
LOCK_WAITERS = 1

WAITING_ON_LOCK = """
SELECT count(*) FROM pg_stat_activity
WHERE application_name = 'mnemo' AND datname = current_database() AND wait_event_type = 'Lock'
"""


async def _outcome(call: object) -> str:
    try:
        await call  # type: ignore[misc]
    except grpc.aio.AioRpcError as exc:
        return exc.code().name
    return "OK"


async def _drill(dsn: str, logs: Path, phase: str, release_after_s: float | None) -> dict[str, object]:
    """Starts ingest, holds IN_FLIGHT keyed writes on a lock, sends SIGTERM, releases the lock after
    `release_after_s` (None: only once the process has exited); returns what clients saw and what
    was stored."""
    target = f"127.0.0.1:{free_port()}"
    env = clean_env(
        MNEMO_EMBEDDER="hash",
        MNEMO_DATABASE_URL=dsn,
        MNEMO_INGEST_ADDR=target,
        MNEMO_GRPC_GRACE_S=str(GRACE_S),
    )
    locker = await asyncpg.connect(dsn)
    try:
        async with (
            running(["serve", "ingest"], env, logs / phase) as proc,
            grpc.aio.insecure_channel(target) as channel,
        ):
            await wait_serving(proc, target)
            stub = ingest_grpc.IngestServiceStub(channel)
            workspace = (await stub.AddWorkspace(ingest_pb.AddWorkspaceRequest(name=phase))).workspace.id

            def write(key: str) -> asyncio.Future[str]:
                request = ingest_pb.WriteMemoryRequest(workspace=workspace, content=f"note {key}", idempotency_key=key)
                return asyncio.ensure_future(_outcome(stub.WriteMemory(request, timeout=60)))

            lock = locker.transaction()
            await lock.start()
            await locker.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
            in_flight = {f"{phase}-{n}": write(f"{phase}-{n}") for n in range(IN_FLIGHT)}
            # The writes holding a pooled connection wait on the lock, the rest for a connection. That
            # all 50 were in the server before the signal, the first phase shows: they all complete,
            # while every call made after the signal is refused.
            await eventually(lambda: _waiting(locker, LOCK_WAITERS), timeout=20, interval=0.05)
            await asyncio.sleep(1.0)

            proc.process.send_signal(signal.SIGTERM)
            signalled = time.perf_counter()
            await asyncio.sleep(0.3)
            late = {f"{phase}-late-{n}": write(f"{phase}-late-{n}") for n in range(10)}
            if release_after_s is not None:
                await asyncio.sleep(max(0.0, release_after_s - (time.perf_counter() - signalled)))
                await lock.rollback()
            exit_code = await asyncio.wait_for(proc.process.wait(), timeout=GRACE_S + 20)
            exited_s = time.perf_counter() - signalled
            if release_after_s is None:
                await lock.rollback()
            seen = {key: await future for key, future in {**in_flight, **late}.items()}
            output = proc.output()
        rows = await locker.fetch("SELECT idempotency_key FROM memories WHERE workspace_id = $1", workspace)
    finally:
        await locker.close()
    return {
        "seen": seen,
        "stored": [r["idempotency_key"] for r in rows],
        "exit_code": exit_code,
        "exited_s": exited_s,
        "output": output,
    }


async def _waiting(conn: asyncpg.Connection, count: int) -> bool:
    return await conn.fetchval(WAITING_ON_LOCK) >= count


async def test_sigterm_with_50_writes_in_flight_completes_or_refuses_each_before_any_side_effect(
    postgres: Postgres, tmp_path: Path
) -> None:
    dsn = await postgres.create_database("sigterm")
    await migrate(dsn, HashEmbedder(64))

    # Released within the grace: every write in flight completes and is stored.
    drained = await _drill(dsn, tmp_path, "drained", release_after_s=1.0)
    seen, stored = drained["seen"], drained["stored"]
    assert isinstance(seen, dict) and isinstance(stored, list)
    in_flight = {k: v for k, v in seen.items() if "-late-" not in k}
    late = {k: v for k, v in seen.items() if "-late-" in k}
    assert set(in_flight.values()) == {"OK"}, drained["output"]
    assert set(late.values()) == {"UNAVAILABLE"}, (late, drained["output"])
    assert sorted(stored) == sorted(in_flight), drained["output"]
    assert drained["exit_code"] == 0, drained["output"]
    print(f"\ndrained: 50 completed, exited {drained['exited_s']:.2f} s after SIGTERM")

    # Held past the grace: every write in flight is rolled back and answered UNAVAILABLE.
    cut = await _drill(dsn, tmp_path, "cut", release_after_s=None)
    seen, stored = cut["seen"], cut["stored"]
    assert isinstance(seen, dict) and isinstance(stored, list)
    assert set(seen.values()) == {"UNAVAILABLE"}, (seen, cut["output"])
    assert stored == [], cut["output"]
    assert cut["exit_code"] == 0, cut["output"]
    assert "rpcs_cut_at_shutdown" in str(cut["output"])
    print(f"cut: 50 UNAVAILABLE, nothing stored, exited {cut['exited_s']:.2f} s after SIGTERM")


async def _gateway_drill(dsn: str, logs: Path, phase: str, release_after_s: float | None) -> dict[str, object]:
    """As `_drill`, through REST: `mnemo serve ingest` and `mnemo serve gateway`, SIGTERM to the
    gateway; the answers are HTTP statuses, or the name of the transport error."""
    ingest_target, gateway_target, http_port = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}", free_port()
    env = clean_env(
        MNEMO_EMBEDDER="hash",
        MNEMO_DATABASE_URL=dsn,
        MNEMO_INGEST_ADDR=ingest_target,
        MNEMO_GATEWAY_GRPC_ADDR=gateway_target,
        MNEMO_HTTP_PORT=str(http_port),
        MNEMO_GRPC_GRACE_S=str(GRACE_S),
    )
    base = f"http://127.0.0.1:{http_port}/api/v1"
    locker = await asyncpg.connect(dsn)
    try:
        async with (
            running(["serve", "ingest"], env, logs / f"{phase}-ingest") as ingest,
            running(["serve", "gateway"], env, logs / f"{phase}-gateway") as gateway,
            httpx.AsyncClient(base_url=base, timeout=60, limits=httpx.Limits(max_connections=100)) as http,
        ):
            await wait_serving(ingest, ingest_target)
            await wait_serving(gateway, gateway_target)
            assert (await http.post("/workspaces", json={"name": phase})).status_code == 201

            async def write(key: str) -> str:
                try:
                    response = await http.post(
                        "/memories", json={"workspace": phase, "content": f"note {key}", "idempotency_key": key}
                    )
                except httpx.TransportError as exc:
                    return type(exc).__name__
                return str(response.status_code)

            lock = locker.transaction()
            await lock.start()
            await locker.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
            in_flight = {f"{phase}-{n}": asyncio.ensure_future(write(f"{phase}-{n}")) for n in range(IN_FLIGHT)}
            await eventually(lambda: _waiting(locker, LOCK_WAITERS), timeout=20, interval=0.05)
            await asyncio.sleep(1.0)

            gateway.process.send_signal(signal.SIGTERM)
            signalled = time.perf_counter()
            if release_after_s is not None:
                await asyncio.sleep(release_after_s)
                await lock.rollback()
            exit_code = await asyncio.wait_for(gateway.process.wait(), timeout=GRACE_S + 20)
            exited_s = time.perf_counter() - signalled
            seen = {key: await future for key, future in in_flight.items()}
            if release_after_s is None:
                await lock.rollback()
                # Whatever ingest still ran would land now; give it the time to.
                await asyncio.sleep(2.0)
            output = gateway.output()
        rows = await locker.fetch(
            "SELECT m.idempotency_key FROM memories m JOIN workspaces w ON w.id = m.workspace_id WHERE w.name = $1",
            phase,
        )
    finally:
        await locker.close()
    return {
        "seen": seen,
        "stored": [r["idempotency_key"] for r in rows],
        "exit_code": exit_code,
        "exited_s": exited_s,
        "output": output,
    }


async def test_sigterm_to_the_gateway_with_50_rest_writes_in_flight_answers_each_or_503_with_nothing_stored(
    postgres: Postgres, tmp_path: Path
) -> None:
    dsn = await postgres.create_database("sigterm_gw")
    await migrate(dsn, HashEmbedder(64))

    # Released within the grace: every request in flight completes and is stored.
    drained = await _gateway_drill(dsn, tmp_path, "gw-drained", release_after_s=1.0)
    seen, stored = drained["seen"], drained["stored"]
    assert isinstance(seen, dict) and isinstance(stored, list)
    assert set(seen.values()) == {"201"}, (seen, drained["output"])
    assert sorted(stored) == sorted(seen), drained["output"]
    assert drained["exit_code"] == 0, drained["output"]
    print(f"\ngateway drained: 50 answered 201, exited {drained['exited_s']:.2f} s after SIGTERM")

    # Held past the grace: every request answered 503 (not a dropped connection), nothing stored.
    cut = await _gateway_drill(dsn, tmp_path, "gw-cut", release_after_s=None)
    seen, stored = cut["seen"], cut["stored"]
    assert isinstance(seen, dict) and isinstance(stored, list)
    assert set(seen.values()) == {"503"}, (seen, cut["output"])
    assert stored == [], cut["output"]
    assert cut["exit_code"] == 0, cut["output"]
    assert "http_requests_cut_at_shutdown" in str(cut["output"])
    print(f"gateway cut: 50 answered 503, nothing stored, exited {cut['exited_s']:.2f} s after SIGTERM")
