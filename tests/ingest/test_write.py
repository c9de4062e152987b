"""The write path over real gRPC: one transaction per write, clear errors, nothing partial."""

from __future__ import annotations

import asyncpg
import grpc
import pytest
from google.protobuf import struct_pb2

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from tests.helpers import Clients, ids, table_counts


async def test_write_returns_the_stored_memory_and_lexical_search_sees_it_at_once(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    memory = await hash_clients.write(
        ws.id,
        "The release checklist lives in docs/release.md and must be followed for every tag.",
        title="Release checklist",
        tags=["release", "process"],
        kind=common_pb2.MEMORY_KIND_DECISION,
    )
    assert memory.version == 1
    assert memory.workspace_id == ws.id
    assert memory.kind == common_pb2.MEMORY_KIND_DECISION
    assert memory.status == common_pb2.MEMORY_STATUS_ACTIVE
    assert memory.provenance == common_pb2.PROVENANCE_AGENT
    assert list(memory.tags) == ["release", "process"]
    found = await hash_clients.find(ws.id, "release checklist", mode="lexical")
    assert ids(found) == [memory.id]


async def test_title_is_derived_from_the_first_line_when_missing(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    memory = await hash_clients.write(ws.id, "\n\n  Flaky test: test_sync times out under load.\nMore detail here.")
    assert memory.title == "Flaky test: test_sync times out under load."


async def test_every_write_appends_one_chained_audit_event_in_its_transaction(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    first = await hash_clients.write(ws.id, "first note for the audit chain")
    second = await hash_clients.write(ws.id, "second note for the audit chain")
    conn = await asyncpg.connect(hash_clients.stack.dsn)
    try:
        rows = await conn.fetch(
            "SELECT action, memory_id::text, version, after_hash, prev_hash, hash FROM audit_events "
            "WHERE workspace_id = $1 ORDER BY id",
            ws.id,
        )
        assert [r["action"] for r in rows] == ["workspace_add", "write", "write"]
        assert [r["memory_id"] for r in rows[1:]] == [first.id, second.id]
        assert rows[2]["after_hash"] == second.content_hash
        # Each event links to the previous one's hash: a chain per workspace.
        assert rows[0]["prev_hash"] == "0" * 64
        assert rows[1]["prev_hash"] == rows[0]["hash"] and rows[2]["prev_hash"] == rows[1]["hash"]
        # The log is append-only, enforced by the database itself.
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await conn.execute("UPDATE audit_events SET action = 'x' WHERE hash = $1", rows[1]["hash"])
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await conn.execute("DELETE FROM audit_events WHERE hash = $1", rows[1]["hash"])
        assert await conn.fetchval("SELECT count(*) FROM audit_events WHERE workspace_id = $1", ws.id) == 3
    finally:
        await conn.close()


async def test_same_idempotency_key_returns_the_original_and_writes_nothing(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    request = pb.WriteMemoryRequest(workspace=ws.id, content="idempotent note about caching", idempotency_key="k-1")
    first = await hash_clients.ingest.WriteMemory(request)
    before = await table_counts(hash_clients.stack.dsn)
    again = await hash_clients.ingest.WriteMemory(request)
    assert first.outcome == pb.WRITE_OUTCOME_CREATED
    assert again.outcome == pb.WRITE_OUTCOME_REPLAYED
    assert again.memory.id == first.memory.id
    assert await table_counts(hash_clients.stack.dsn) == before
    # The same key with other content is refused rather than silently dropping that content.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.ingest.WriteMemory(
            pb.WriteMemoryRequest(workspace=ws.id, content="different content", idempotency_key="k-1")
        )
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert "k-1" in err.value.details()
    assert await table_counts(hash_clients.stack.dsn) == before


async def test_same_source_uri_is_a_no_op_when_identical_and_a_new_version_otherwise(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    write = hash_clients.ingest.WriteMemory
    first = await write(pb.WriteMemoryRequest(workspace=ws.id, content="v1 of the doc", source_uri="file:///doc.md"))
    before = await table_counts(hash_clients.stack.dsn)
    same = await write(pb.WriteMemoryRequest(workspace=ws.id, content="v1 of the doc", source_uri="file:///doc.md"))
    assert same.outcome == pb.WRITE_OUTCOME_UNCHANGED and same.memory.id == first.memory.id
    assert await table_counts(hash_clients.stack.dsn) == before
    changed = await write(pb.WriteMemoryRequest(workspace=ws.id, content="v2 of the doc", source_uri="file:///doc.md"))
    assert changed.outcome == pb.WRITE_OUTCOME_NEW_VERSION
    assert changed.memory.id == first.memory.id and changed.memory.version == 2
    found = await hash_clients.find(ws.id, "v2 doc", mode="lexical")
    assert ids(found) == [first.memory.id]


async def test_update_keeps_the_old_version_and_search_finds_only_the_new_text(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    memory = await hash_clients.write(ws.id, "Deploys go through the blue cluster.", title="Deploy target")
    updated = await hash_clients.ingest.UpdateMemory(
        pb.UpdateMemoryRequest(workspace=ws.id, id=memory.id, content="Deploys go through the green cluster.")
    )
    assert updated.outcome == pb.WRITE_OUTCOME_NEW_VERSION and updated.memory.version == 2
    got = await hash_clients.search.GetMemory(search_pb.GetMemoryRequest(workspace=ws.id, id=memory.id))
    assert got.memory.content == "Deploys go through the green cluster."
    assert ids(await hash_clients.find(ws.id, "green cluster", mode="lexical")) == [memory.id]
    assert ids(await hash_clients.find(ws.id, "blue", mode="lexical")) == []
    conn = await asyncpg.connect(hash_clients.stack.dsn)
    try:
        versions = await conn.fetch(
            "SELECT version, content, recorded_to IS NOT NULL AS closed FROM memory_versions "
            "WHERE memory_id = $1 ORDER BY version",
            memory.id,
        )
    finally:
        await conn.close()
    assert [(v["version"], v["content"], v["closed"]) for v in versions] == [
        (1, "Deploys go through the blue cluster.", True),
        (2, "Deploys go through the green cluster.", False),
    ]
    # An update with nothing new writes nothing.
    same = await hash_clients.ingest.UpdateMemory(
        pb.UpdateMemoryRequest(workspace=ws.id, id=memory.id, content="Deploys go through the green cluster.")
    )
    assert same.outcome == pb.WRITE_OUTCOME_UNCHANGED and same.memory.version == 2


async def test_update_with_a_stale_expected_version_is_refused(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    memory = await hash_clients.write(ws.id, "original")
    await hash_clients.ingest.UpdateMemory(pb.UpdateMemoryRequest(workspace=ws.id, id=memory.id, content="second"))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.ingest.UpdateMemory(
            pb.UpdateMemoryRequest(workspace=ws.id, id=memory.id, content="third", expected_version=1)
        )
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "version 2" in err.value.details()


BAD_WRITES = [
    (dict(content=""), grpc.StatusCode.INVALID_ARGUMENT, "content is required"),
    (dict(content="   \n\t "), grpc.StatusCode.INVALID_ARGUMENT, "content is required"),
    (dict(content="a\x00b"), grpc.StatusCode.INVALID_ARGUMENT, "NUL"),
    (dict(content="x" * (1_048_576 + 1)), grpc.StatusCode.INVALID_ARGUMENT, "limit is 1048576"),
    (dict(content="ok", title="t\x00"), grpc.StatusCode.INVALID_ARGUMENT, "title contains NUL"),
    (dict(content="ok", title="t" * 501), grpc.StatusCode.INVALID_ARGUMENT, "at most 500"),
    (dict(content="ok", tags=[""]), grpc.StatusCode.INVALID_ARGUMENT, "tags must not be blank"),
    (dict(content="ok", tags=["t"] * 0 + [f"t{i}" for i in range(40)]), grpc.StatusCode.INVALID_ARGUMENT, "at most 32"),
    (dict(content="ok", kind=99), grpc.StatusCode.INVALID_ARGUMENT, "kind 99"),
    (dict(content="ok", source_uri="s\x00"), grpc.StatusCode.INVALID_ARGUMENT, "source_uri contains NUL"),
]


@pytest.mark.parametrize(("fields", "code", "message"), BAD_WRITES, ids=[m for _, _, m in BAD_WRITES])
async def test_bad_writes_get_a_clear_error_and_write_nothing(
    hash_clients: Clients, fields: dict, code: grpc.StatusCode, message: str
) -> None:
    ws = await hash_clients.workspace()
    before = await table_counts(hash_clients.stack.dsn)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.ingest.WriteMemory(pb.WriteMemoryRequest(workspace=ws.id, **fields))
    assert err.value.code() == code
    assert message in err.value.details()
    assert await table_counts(hash_clients.stack.dsn) == before
    # Positive control: the same workspace accepts a good write.
    assert (await hash_clients.write(ws.id, "a good note")).version == 1


async def test_metadata_with_nul_is_refused_and_ordinary_metadata_is_kept(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    bad = struct_pb2.Struct()
    bad.update({"k": "v\x00"})
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.ingest.WriteMemory(pb.WriteMemoryRequest(workspace=ws.id, content="x", metadata=bad))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "metadata" in err.value.details()
    good = struct_pb2.Struct()
    good.update({"ticket": "OPS-12", "nested": {"n": 3}})
    memory = await hash_clients.write(ws.id, "with metadata", metadata=good)
    assert dict(memory.metadata)["ticket"] == "OPS-12"


async def test_unknown_workspace_is_not_found_and_says_how_to_register(hash_clients: Clients) -> None:
    before = await table_counts(hash_clients.stack.dsn)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.ingest.WriteMemory(pb.WriteMemoryRequest(workspace="no-such-ws", content="x"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert "mnemo workspace add" in err.value.details()
    assert await table_counts(hash_clients.stack.dsn) == before


async def test_a_workspace_is_named_by_id_name_or_root_path(hash_clients: Clients) -> None:
    response = await hash_clients.ingest.AddWorkspace(pb.AddWorkspaceRequest(root_path="/srv/projects/atlas/"))
    ws = response.workspace
    assert response.created and ws.root_path == "/srv/projects/atlas" and ws.name == "atlas"
    again = await hash_clients.ingest.AddWorkspace(pb.AddWorkspaceRequest(root_path="/srv/projects/atlas"))
    assert not again.created and again.workspace.id == ws.id
    for ref in (ws.id, "atlas", "/srv/projects/atlas", "/srv/projects/atlas/src/deep"):
        resolved = await hash_clients.search.ResolveWorkspace(search_pb.ResolveWorkspaceRequest(workspace=ref))
        assert resolved.workspace.id == ws.id, ref
    # A sibling path that merely shares the prefix is not inside the root.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.search.ResolveWorkspace(search_pb.ResolveWorkspaceRequest(workspace="/srv/projects/atlas2"))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.ingest.AddWorkspace(pb.AddWorkspaceRequest(root_path="relative/path"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "absolute" in err.value.details()
