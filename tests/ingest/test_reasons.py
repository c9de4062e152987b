"""Every refusal names its machine reason (ErrorInfo in the status details), over real gRPC.

Each case pairs the refused call with the same call done right, so a reason can only be found
because the service sent it for that refusal.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable

import grpc
import pytest

from mnemo.common.v1 import common_pb2
from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.ingest.v1 import ingest_service_pb2 as pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_platform import reason_name, reason_of
from mnemo_wire import ContentSettings
from tests.helpers import Clients


async def _refused(call: Awaitable[object]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value.code(), reason_name(reason_of(caught.value))


async def test_an_unknown_workspace_is_workspace_not_found(hash_clients: Clients) -> None:
    missing = f"nowhere-{uuid.uuid4().hex[:8]}"
    code, reason = await _refused(hash_clients.write(missing, "a note for a workspace that is not there"))
    assert (code, reason) == (grpc.StatusCode.NOT_FOUND, "WORKSPACE_NOT_FOUND")
    ws = await hash_clients.workspace(missing)
    assert (await hash_clients.write(ws.id, "a note for a workspace that is there")).version == 1


async def test_bad_input_is_invalid_argument_and_oversize_is_too_large(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    assert await _refused(hash_clients.write(ws.id, "   ")) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    huge = "x" * (ContentSettings().max_content_bytes + 1)  # the stack runs on the default limit
    assert await _refused(hash_clients.write(ws.id, huge)) == (grpc.StatusCode.INVALID_ARGUMENT, "TOO_LARGE")
    assert (await hash_clients.write(ws.id, "x" * 100)).version == 1


async def test_a_reused_idempotency_key_and_a_stale_version_are_named(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    first = await hash_clients.write(ws.id, "the first content under this key", idempotency_key="k-1")
    replay = await hash_clients.write(ws.id, "the first content under this key", idempotency_key="k-1")
    assert replay.id == first.id
    code, reason = await _refused(hash_clients.write(ws.id, "other content under the same key", idempotency_key="k-1"))
    assert (code, reason) == (grpc.StatusCode.ALREADY_EXISTS, "IDEMPOTENCY_KEY_REUSED")

    stale = pb.UpdateMemoryRequest(workspace=ws.id, id=first.id, content="edited", expected_version=2)
    code, reason = await _refused(hash_clients.ingest.UpdateMemory(stale))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "VERSION_CONFLICT")
    current = pb.UpdateMemoryRequest(workspace=ws.id, id=first.id, content="edited", expected_version=1)
    assert (await hash_clients.ingest.UpdateMemory(current)).memory.version == 2


async def test_a_superseded_memory_is_superseded_to_changes_and_plain_reads(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    old = await hash_clients.write(ws.id, "The build uses make.")
    pair = await hash_clients.ingest.SupersedeMemory(
        pb.SupersedeMemoryRequest(
            workspace=ws.id,
            id=old.id,
            successor=pb.WriteMemoryRequest(workspace=ws.id, content="The build uses just."),
            reason="switched build tools",
        )
    )
    retract_old = pb.RetractMemoryRequest(workspace=ws.id, id=old.id, reason="wrong")
    code, reason = await _refused(hash_clients.ingest.RetractMemory(retract_old))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SUPERSEDED")
    code, reason = await _refused(hash_clients.search.GetMemory(search_pb.GetMemoryRequest(workspace=ws.id, id=old.id)))
    assert (code, reason) == (grpc.StatusCode.NOT_FOUND, "SUPERSEDED")
    # The successor takes the change, and history still reads the old one.
    history = common_pb2.ReadOptions(include_history=True)
    read_old = search_pb.GetMemoryRequest(workspace=ws.id, id=old.id, options=history)
    assert (await hash_clients.search.GetMemory(read_old)).memory.id == old.id
    retracted = await hash_clients.ingest.RetractMemory(
        pb.RetractMemoryRequest(workspace=ws.id, id=pair.successor.id, reason="wrong too")
    )
    assert retracted.memory.status == common_pb2.MEMORY_STATUS_RETRACTED
    # A retracted memory is not superseded: its status forbids the change.
    again = pb.RetractMemoryRequest(workspace=ws.id, id=pair.successor.id, reason="twice")
    code, reason = await _refused(hash_clients.ingest.RetractMemory(again))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "STATUS_FORBIDS")


async def test_delete_tombstone_purge_each_name_their_reason(hash_clients: Clients) -> None:
    ws = await hash_clients.workspace()
    memory = await hash_clients.write(ws.id, "a note from a session", source_uri="test://session/reasons")
    await hash_clients.ingest.DeleteMemory(pb.DeleteMemoryRequest(workspace=ws.id, id=memory.id, reason="noise"))

    update = pb.UpdateMemoryRequest(workspace=ws.id, id=memory.id, content="edited")
    assert await _refused(hash_clients.ingest.UpdateMemory(update)) == (grpc.StatusCode.NOT_FOUND, "MEMORY_DELETED")
    rewrite = hash_clients.write(ws.id, "the session again", source_uri="test://session/reasons")
    assert await _refused(rewrite) == (grpc.StatusCode.FAILED_PRECONDITION, "TOMBSTONED")
    assert (await hash_clients.write(ws.id, "another session", source_uri="test://session/other")).version == 1

    unforced = pb.PurgeMemoryRequest(workspace=ws.id, id=memory.id, reason="gone")
    code, reason = await _refused(hash_clients.ingest.PurgeMemory(unforced))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "FORCE_REQUIRED")
    forced = pb.PurgeMemoryRequest(workspace=ws.id, id=memory.id, reason="gone", force=True)
    assert (await hash_clients.ingest.PurgeMemory(forced)).tombstone.source_uri == "test://session/reasons"
    assert await _refused(hash_clients.ingest.UpdateMemory(update)) == (grpc.StatusCode.NOT_FOUND, "PURGED")
    read = search_pb.GetMemoryRequest(workspace=ws.id, id=memory.id)
    assert await _refused(hash_clients.search.GetMemory(read)) == (grpc.StatusCode.NOT_FOUND, "PURGED")
    unknown = search_pb.GetMemoryRequest(workspace=ws.id, id=str(uuid.uuid4()))
    assert await _refused(hash_clients.search.GetMemory(unknown)) == (grpc.StatusCode.NOT_FOUND, "MEMORY_NOT_FOUND")


def test_every_reason_name_is_its_enum_value_without_the_prefix() -> None:
    names = [reason_name(v) for v in reasons_pb.ErrorReason.values()]
    assert names[:3] == ["UNSPECIFIED", "INVALID_ARGUMENT", "UNAUTHENTICATED"]
    assert all(not n.startswith("ERROR_REASON_") for n in names)
