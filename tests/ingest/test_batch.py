"""WriteMemories over real gRPC: per-item results in order, a refused item refused alone with its
reason and leaving nothing, replays on a rerun, lexical visibility at commit."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import grpc
import pytest

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.ingest.v1 import ingest_service_pb2 as pb
from mnemo.search.v1 import search_service_pb2 as spb
from mnemo_ingest.writes import MAX_BATCH
from mnemo_store import EMBED_CHANNEL
from tests.helpers import Clients, eventually, ids, table_counts


def _item(ws: str, content: str, **fields: object) -> pb.WriteMemoryRequest:
    return pb.WriteMemoryRequest(workspace=ws, content=content, **fields)  # type: ignore[arg-type]


async def _counts_in(dsn: str, ws: str) -> tuple[int, int, int]:
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM memories WHERE workspace_id = $1) AS memories, "
            "(SELECT count(*) FROM chunks WHERE workspace_id = $1) AS chunks, "
            "(SELECT count(*) FROM audit_events WHERE workspace_id = $1) AS events",
            ws,
        )
        return row["memories"], row["chunks"], row["events"]
    finally:
        await conn.close()


async def test_each_item_is_answered_in_order_and_a_bad_one_is_refused_alone(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    gone = await hash_clients.write(ws.id, "a session that was deleted", source_uri="test://batch/gone")
    await hash_clients.ingest.DeleteMemory(pb.DeleteMemoryRequest(workspace=ws.id, id=gone.id, reason="noise"))
    before = await _counts_in(hash_clients.stack.dsn, ws.id)
    items = [
        _item(ws.id, "The deploy script lives in ops/deploy.sh and needs the VPN."),
        _item(ws.id, "   "),  # blank: refused by validation
        _item(f"nowhere-{uuid.uuid4().hex[:6]}", "a note for a workspace that is not registered"),
        _item(ws.id, "the deleted session again", source_uri="test://batch/gone"),  # tombstoned
        _item(ws.id, "Staging runs on the spare Hetzner box; prod is on AWS.", source_uri="test://batch/ops"),
        _item(ws.id, "Staging runs on the spare Hetzner box; prod is on AWS.", source_uri="test://batch/ops"),
    ]
    response = await hash_clients.ingest.WriteMemories(pb.WriteMemoriesRequest(items=items))
    results = list(response.results)
    assert len(results) == len(items)
    refused = [
        (i, r.error.code, reasons_pb.ErrorReason.Name(r.error.reason)) for i, r in enumerate(results) if r.error.code
    ]
    assert refused == [
        (1, "INVALID_ARGUMENT", "ERROR_REASON_INVALID_ARGUMENT"),
        (2, "NOT_FOUND", "ERROR_REASON_WORKSPACE_NOT_FOUND"),
        (3, "FAILED_PRECONDITION", "ERROR_REASON_TOMBSTONED"),
    ]
    assert all(not r.HasField("memory") for i, r in enumerate(results) if i in (1, 2, 3))
    # The good ones are written, in order; the same source twice is the same memory, unchanged.
    outcomes = [pb.WriteOutcome.Name(r.outcome) for r in results]
    assert [outcomes[i] for i in (0, 4, 5)] == [
        "WRITE_OUTCOME_CREATED",
        "WRITE_OUTCOME_CREATED",
        "WRITE_OUTCOME_UNCHANGED",
    ]
    assert results[4].memory.id == results[5].memory.id
    assert results[0].memory.content.startswith("The deploy script")
    # Nothing of a refused item is left: two memories, their chunks and two write events more.
    memories, chunks, events = await _counts_in(hash_clients.stack.dsn, ws.id)
    assert (memories - before[0], events - before[2]) == (2, 2) and chunks > before[1]
    # Visible to lexical search at commit.
    found = await hash_clients.find(ws.id, "deploy script VPN", mode="lexical")
    assert ids(found) == [results[0].memory.id]


async def test_a_rerun_with_idempotency_keys_replays_and_writes_nothing(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    items = [
        _item(ws.id, f"imported note number {i} about the build", idempotency_key=f"import-{i}") for i in range(20)
    ]
    first = await hash_clients.ingest.WriteMemories(pb.WriteMemoriesRequest(items=items))
    assert {pb.WriteOutcome.Name(r.outcome) for r in first.results} == {"WRITE_OUTCOME_CREATED"}
    counts = await table_counts(hash_clients.stack.dsn)
    again = await hash_clients.ingest.WriteMemories(pb.WriteMemoriesRequest(items=items))
    assert {pb.WriteOutcome.Name(r.outcome) for r in again.results} == {"WRITE_OUTCOME_REPLAYED"}
    assert [r.memory.id for r in again.results] == [r.memory.id for r in first.results]
    assert await table_counts(hash_clients.stack.dsn) == counts
    # A key reused with other content is refused alone; its neighbours still replay.
    changed = [*items[:1], _item(ws.id, "different content under a used key", idempotency_key="import-1")]
    mixed = await hash_clients.ingest.WriteMemories(pb.WriteMemoriesRequest(items=changed))
    assert pb.WriteOutcome.Name(mixed.results[0].outcome) == "WRITE_OUTCOME_REPLAYED"
    assert mixed.results[1].error.reason == reasons_pb.ERROR_REASON_IDEMPOTENCY_KEY_REUSED


async def test_too_many_items_refuse_the_call_and_write_nothing(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    counts = await table_counts(hash_clients.stack.dsn)
    items = [_item(ws.id, f"note {i}") for i in range(MAX_BATCH + 1)]
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await hash_clients.ingest.WriteMemories(pb.WriteMemoriesRequest(items=items))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"at most {MAX_BATCH}" in str(refused.value.details())
    assert await table_counts(hash_clients.stack.dsn) == counts
    # Positive control: the largest batch allowed is written whole.
    response = await hash_clients.ingest.WriteMemories(pb.WriteMemoriesRequest(items=items[:MAX_BATCH]))
    assert len(response.results) == MAX_BATCH and not any(r.error.code for r in response.results)
    assert (await table_counts(hash_clients.stack.dsn))["memories"] == counts["memories"] + MAX_BATCH


async def test_a_batch_wakes_the_embedding_workers_once(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    heard: list[str] = []
    conn = await asyncpg.connect(hash_clients.stack.dsn)
    try:
        await conn.add_listener(EMBED_CHANNEL, lambda *args: heard.append(args[-1]))
        items = [_item(ws.id, f"one of fifty notes written together, number {i}") for i in range(50)]
        await hash_clients.ingest.WriteMemories(pb.WriteMemoriesRequest(items=items))
        await hash_clients.write(ws.id, "a single write after the batch")
        await hash_clients.write(ws.id, "and another one")

        async def all_heard() -> bool:
            return len(heard) >= 3

        await eventually(all_heard, timeout=10)
        await asyncio.sleep(0.3)  # anything late would arrive now
        # One notification for the fifty (one transaction), one for each single write.
        assert len(heard) == 3
    finally:
        await conn.close()


async def _write_events(dsn: str, ws: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(
            "SELECT id, action, memory_id::text AS memory_id FROM audit_events WHERE workspace_id = $1 ORDER BY id", ws
        )
    finally:
        await conn.close()


async def test_new_memories_go_in_together_and_every_other_item_is_decided_alone(hash_clients: Clients) -> None:
    a, b = await hash_clients.workspace(), await hash_clients.workspace()
    old = await hash_clients.write(a.id, "an earlier note under a key", idempotency_key="k-old")
    source = await hash_clients.write(a.id, "the first version of a sourced note", source_uri="test://batch/src")
    before = {ws: len(await _write_events(hash_clients.stack.dsn, ws)) for ws in (a.id, b.id)}
    items = [
        _item(a.id, "Fresh note one: the cache lives in /var/cache/app."),
        _item(b.id, "Fresh note two, in the other workspace."),
        _item(a.id, "an earlier note under a key", idempotency_key="k-old"),  # replay of a stored key
        _item(a.id, "Fresh note three, keyed.", idempotency_key="k-new"),
        _item(a.id, "Fresh note three, keyed.", idempotency_key="k-new"),  # the same key again in the batch
        _item(a.id, "the second version of a sourced note", source_uri="test://batch/src"),
        _item(b.id, "Fresh note four: retries use exponential backoff."),
        _item(a.id, "other content under a key this batch used", idempotency_key="k-new"),
    ]
    response = await hash_clients.ingest.WriteMemories(pb.WriteMemoriesRequest(items=items))
    outcomes = [pb.WriteOutcome.Name(r.outcome).removeprefix("WRITE_OUTCOME_") for r in response.results]
    assert outcomes[:7] == ["CREATED", "CREATED", "REPLAYED", "CREATED", "REPLAYED", "NEW_VERSION", "CREATED"]
    assert response.results[7].error.reason == reasons_pb.ERROR_REASON_IDEMPOTENCY_KEY_REUSED
    assert not response.results[7].HasField("memory")
    assert response.results[2].memory.id == old.id
    assert response.results[4].memory.id == response.results[3].memory.id
    assert response.results[5].memory.id == source.id and response.results[5].memory.version == 2
    assert [r.memory.content for r in response.results[:2]] == [items[0].content, items[1].content]
    # Each chain holds exactly the batch's changes, the new memories' events in the batch's order,
    # and verifies.
    after = {ws: await _write_events(hash_clients.stack.dsn, ws) for ws in (a.id, b.id)}
    new_in_a = after[a.id][before[a.id] :]
    assert sorted(e["action"] for e in new_in_a) == ["update", "write", "write"]
    assert [e["memory_id"] for e in new_in_a if e["action"] == "write"] == [
        response.results[0].memory.id,
        response.results[3].memory.id,
    ]
    assert [e["memory_id"] for e in after[b.id][before[b.id] :]] == [
        response.results[1].memory.id,
        response.results[6].memory.id,
    ]
    for ws in (a.id, b.id):
        check = await hash_clients.search.VerifyAudit(spb.VerifyAuditRequest(workspace=ws))
        assert check.ok and check.events_checked == len(after[ws]), check.problem


async def test_concurrent_batches_with_the_same_keys_store_each_note_once(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    items = [_item(ws.id, f"imported note {i}: the port is {8000 + i}", idempotency_key=f"same-{i}") for i in range(30)]
    # Every call looks the keys up before any commits, so most must fall back to writing alone.
    responses = await asyncio.gather(
        *(hash_clients.ingest.WriteMemories(pb.WriteMemoriesRequest(items=items)) for _ in range(4))
    )
    created = 0
    for response in responses:
        assert not any(r.error.code for r in response.results)
        assert [r.memory.id for r in response.results] == [r.memory.id for r in responses[0].results]
        created += sum(r.outcome == pb.WRITE_OUTCOME_CREATED for r in response.results)
    assert created == len(items)
    memories, _, events = await _counts_in(hash_clients.stack.dsn, ws.id)
    assert (memories, events) == (len(items), len(items) + 1)  # and the workspace's own event
    check = await hash_clients.search.VerifyAudit(spb.VerifyAuditRequest(workspace=ws.id))
    assert check.ok, check.problem
