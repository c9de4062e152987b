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
