"""A server runs at most MNEMO_GRPC_MAX_CONCURRENT_RPCS calls at once: a burst beyond it is refused
at once with UNAVAILABLE (the gateway's 503), before anything is written, while the calls within
it complete. The calls are held inside the server by a real lock on the memories table."""

from __future__ import annotations

import asyncio

import asyncpg
import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo_embed import HashEmbedder
from tests.helpers import Clients, Postgres, eventually, start_stack

LIMIT = 4
BURST = 12

WAITING_ON_LOCK = """
SELECT count(*) FROM pg_stat_activity
WHERE application_name = 'mnemo' AND datname = current_database() AND wait_event_type = 'Lock'
"""


async def test_a_burst_beyond_the_limit_is_refused_unavailable_and_the_calls_within_it_succeed(
    postgres: Postgres,
) -> None:
    dsn = await postgres.create_database("limit")
    stack = await start_stack(dsn, HashEmbedder(64), MNEMO_GRPC_MAX_CONCURRENT_RPCS=str(LIMIT))
    clients = Clients(stack)
    locker = await asyncpg.connect(dsn)
    held: list[asyncio.Future[object]] = []
    try:
        ws = (await clients.workspace("limit-drill")).id

        def write(n: int) -> asyncio.Future[object]:
            request = ingest_pb.WriteMemoryRequest(workspace=ws, content=f"held note {n}", idempotency_key=f"held-{n}")
            return asyncio.ensure_future(clients.ingest.WriteMemory(request, timeout=30))

        # The limit's worth of writes, each stuck on the lock inside the server.
        lock = locker.transaction()
        await lock.start()
        await locker.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
        held = [write(n) for n in range(LIMIT)]
        admission = stack.ingest.server.admission  # type: ignore[union-attr]
        await eventually(lambda: _admitted(admission, LIMIT), timeout=15, interval=0.05)
        assert await locker.fetchval(WAITING_ON_LOCK) >= 1  # they are held by the lock, in the server

        # The burst beyond it: every call refused at once, naming the limit.
        refusals = await asyncio.gather(*(write(n) for n in range(LIMIT, LIMIT + BURST)), return_exceptions=True)
        assert all(isinstance(r, grpc.aio.AioRpcError) for r in refusals), refusals
        errors = [r for r in refusals if isinstance(r, grpc.aio.AioRpcError)]
        assert {e.code() for e in errors} == {grpc.StatusCode.UNAVAILABLE}
        assert all("MNEMO_GRPC_MAX_CONCURRENT_RPCS" in (e.details() or "") for e in errors), errors[0].details()
        # Through the gateway the same refusal is a 503, which clients retry.
        async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
            response = await http.post("/api/v1/memories", json={"workspace": "limit-drill", "content": "via REST"})
        assert response.status_code == 503, response.text
        # Health is neither counted nor refused: probes still get the server's own answer.
        async with grpc.aio.insecure_channel(stack.ingest.target) as channel:  # type: ignore[union-attr]
            probe = health_pb2_grpc.HealthStub(channel)
            health = await probe.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        assert all(not task.done() for task in held)

        await lock.rollback()
        # The calls within the limit complete (the positive control) ...
        done = await asyncio.wait_for(asyncio.gather(*held), timeout=30)
        assert len(done) == LIMIT
        # ... and once they have, the server takes calls again.
        after = await clients.write(ws, "after the burst")
        assert after.id

        stored = await locker.fetch(
            "SELECT v.content FROM memory_versions v JOIN memories m ON m.id = v.memory_id WHERE m.workspace_id = $1",
            ws,
        )
        # Nothing refused was written; everything admitted was.
        expected = [*(f"held note {n}" for n in range(LIMIT)), "after the burst"]
        assert sorted(r["content"] for r in stored) == sorted(expected)
    finally:
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        await locker.close()
        await clients.close()
        await stack.stop()


async def _admitted(admission: object, count: int) -> bool:
    return admission.active == count  # type: ignore[attr-defined, no-any-return]


HTTP_LIMIT = 3


async def test_the_gateway_refuses_requests_beyond_its_http_limit_and_answers_probes(postgres: Postgres) -> None:
    dsn = await postgres.create_database("http_limit")
    stack = await start_stack(dsn, HashEmbedder(64), MNEMO_HTTP_MAX_CONCURRENT_REQUESTS=str(HTTP_LIMIT))
    assert stack.gateway is not None
    draining = stack.gateway._draining  # the gateway's count of requests waiting for an answer
    locker = await asyncpg.connect(dsn)
    http = httpx.AsyncClient(base_url=stack.base_url, timeout=30)
    held: list[asyncio.Future[httpx.Response]] = []
    try:
        created = await http.post("/api/v1/workspaces", json={"name": "http-limit"})
        assert created.status_code == 201, created.text

        def write(n: int) -> asyncio.Future[httpx.Response]:
            note = {"workspace": "http-limit", "content": f"held request {n}", "idempotency_key": f"req-{n}"}
            return asyncio.ensure_future(http.post("/api/v1/memories", json=note))

        lock = locker.transaction()
        await lock.start()
        await locker.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
        held = [write(n) for n in range(HTTP_LIMIT)]

        async def all_waiting() -> bool:
            return draining is not None and draining.waiting == HTTP_LIMIT

        await eventually(all_waiting, timeout=15, interval=0.05)
        # One more is refused at once, in the one JSON error shape, naming the setting.
        refused = await http.post("/api/v1/memories", json={"workspace": "http-limit", "content": "one too many"})
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "1"
        assert "MNEMO_HTTP_MAX_CONCURRENT_REQUESTS" in refused.json()["error"]["message"], refused.json()
        # Probes are never refused: liveness and scrapes still answer.
        assert (await http.get("/healthz")).status_code == 200
        assert (await http.get("/metrics")).status_code == 200
        assert all(not task.done() for task in held)

        await lock.rollback()
        # The requests within the limit complete (the positive control), and new ones are taken again.
        answers = await asyncio.wait_for(asyncio.gather(*held), timeout=30)
        assert [a.status_code for a in answers] == [201] * HTTP_LIMIT
        after = await http.post("/api/v1/memories", json={"workspace": "http-limit", "content": "after the limit"})
        assert after.status_code == 201, after.text
        assert draining is not None and draining.waiting == 0
        stored = await locker.fetch(
            "SELECT v.content FROM memory_versions v JOIN memories m ON m.id = v.memory_id "
            "WHERE m.workspace_id = (SELECT id FROM workspaces WHERE name = 'http-limit')"
        )
        expected = [*(f"held request {n}" for n in range(HTTP_LIMIT)), "after the limit"]
        assert sorted(r["content"] for r in stored) == sorted(expected)  # nothing refused was written
    finally:
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)
        await http.aclose()
        await locker.close()
        await stack.stop()
