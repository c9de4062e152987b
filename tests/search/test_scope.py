"""The one predicate builder: every filter and the workspace wall hold on every leg and relaxation."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import grpc
import pytest
from google.protobuf import timestamp_pb2

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as pb
from mnemo_store import VISIBLE_STATUSES, Params, Reach, Scope, build_scope
from tests.helpers import Clients, ids

# Every way a query reaches the database: each leg, and the lexical leg's OR relaxation.
# The relaxed case asks for a word no note has, so the AND form finds nothing and relaxes.
LEGS = [
    ("hybrid", "zebra migration plan", False),
    ("lexical", "zebra migration plan", False),
    ("semantic", "zebra migration plan", False),
    ("lexical", "zebra quokkaunseen", True),
    ("hybrid", "zebra quokkaunseen", True),
]
LEG_IDS = ["hybrid", "lexical", "semantic", "relaxed-lexical", "relaxed-hybrid"]


def _ts(value: datetime) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value)
    return ts


@pytest.fixture(scope="module")
async def scoped(hash_clients: Clients) -> dict:
    """Two notes with the same text that differ in kind, tags and time; and a second workspace."""
    ws = await hash_clients.workspace()
    other = await hash_clients.workspace()
    text = "The zebra migration plan moves the data in three steps."
    first = await hash_clients.write(ws.id, text, kind=common_pb2.MEMORY_KIND_DECISION, tags=["alpha", "shared"])
    await asyncio.sleep(0.05)
    between = datetime.now(UTC)
    await asyncio.sleep(0.05)
    second = await hash_clients.write(ws.id, text, kind=common_pb2.MEMORY_KIND_NOTE, tags=["beta", "shared"])
    await asyncio.sleep(0.05)
    updated_between = datetime.now(UTC)
    await asyncio.sleep(0.05)
    # Updating the first makes it the most recently updated, though it was created first.
    await hash_clients.ingest.UpdateMemory(
        ingest_pb.UpdateMemoryRequest(workspace=ws.id, id=first.id, content=text + " Revised.")
    )
    foreign = await hash_clients.write(other.id, text, kind=common_pb2.MEMORY_KIND_DECISION, tags=["alpha"])
    for memory, workspace in ((first, ws), (second, ws), (foreign, other)):
        await hash_clients.wait_embedded(memory.id, workspace.id)
    return {
        "ws": ws,
        "other": other,
        "first": first.id,
        "second": second.id,
        "foreign": foreign.id,
        "created_between": between,
        "updated_between": updated_between,
    }


FILTERS = {
    "kind=decision": (lambda s: common_pb2.MemoryFilter(kinds=[common_pb2.MEMORY_KIND_DECISION]), "first"),
    "kind=note": (lambda s: common_pb2.MemoryFilter(kinds=[common_pb2.MEMORY_KIND_NOTE]), "second"),
    "tag=alpha": (lambda s: common_pb2.MemoryFilter(tags=["alpha"]), "first"),
    "tags=beta+shared": (lambda s: common_pb2.MemoryFilter(tags=["beta", "shared"]), "second"),
    "created_before": (lambda s: common_pb2.MemoryFilter(created_before=_ts(s["created_between"])), "first"),
    "created_after": (lambda s: common_pb2.MemoryFilter(created_after=_ts(s["created_between"])), "second"),
    "updated_after": (lambda s: common_pb2.MemoryFilter(updated_after=_ts(s["updated_between"])), "first"),
    "updated_before": (lambda s: common_pb2.MemoryFilter(updated_before=_ts(s["updated_between"])), "second"),
}


@pytest.mark.parametrize(("mode", "query", "relaxed"), LEGS, ids=LEG_IDS)
@pytest.mark.parametrize("name", list(FILTERS))
async def test_each_filter_holds_on_every_leg(
    hash_clients: Clients, scoped: dict, mode: str, query: str, relaxed: bool, name: str
) -> None:
    build, expected = FILTERS[name]
    response = await hash_clients.find(scoped["ws"].id, query, mode=mode, filter=build(scoped))
    assert response.lexical_relaxed == (relaxed and mode != "semantic")
    found = ids(response)
    # Positive control: the memory the filter admits is found by this leg...
    assert scoped[expected] in found
    # ...and the one it excludes, and the other workspace's twin, never are.
    excluded = {"first": "second", "second": "first"}[expected]
    assert scoped[excluded] not in found
    assert scoped["foreign"] not in found


@pytest.mark.parametrize(("mode", "query", "relaxed"), LEGS, ids=LEG_IDS)
async def test_the_workspace_wall_holds_on_every_leg(
    hash_clients: Clients, scoped: dict, mode: str, query: str, relaxed: bool
) -> None:
    mine = ids(await hash_clients.find(scoped["ws"].id, query, mode=mode))
    theirs = ids(await hash_clients.find(scoped["other"].id, query, mode=mode))
    assert {scoped["first"], scoped["second"]} <= set(mine)
    assert scoped["foreign"] not in mine
    assert theirs == [scoped["foreign"]]


async def test_get_is_walled_by_workspace(hash_clients: Clients, scoped: dict) -> None:
    own = await hash_clients.search.GetMemory(pb.GetMemoryRequest(workspace=scoped["ws"].id, id=scoped["first"]))
    assert own.memory.id == scoped["first"] and "Revised" in own.memory.content
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.search.GetMemory(pb.GetMemoryRequest(workspace=scoped["ws"].id, id=scoped["foreign"]))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


async def test_list_is_walled_by_workspace_and_pages_recent_first(hash_clients: Clients, scoped: dict) -> None:
    seen: list[str] = []
    token = ""
    while True:
        page = await hash_clients.search.ListMemories(
            pb.ListMemoriesRequest(workspace=scoped["ws"].id, page_size=1, page_token=token)
        )
        seen += [m.id for m in page.memories]
        token = page.next_page_token
        if not token:
            break
    # The first memory was updated last, so it leads; nothing from the other workspace appears.
    assert seen[:2] == [scoped["first"], scoped["second"]]
    assert scoped["foreign"] not in seen
    theirs = await hash_clients.search.ListMemories(pb.ListMemoriesRequest(workspace=scoped["other"].id))
    assert [m.id for m in theirs.memories] == [scoped["foreign"]]


async def test_list_applies_the_filter(hash_clients: Clients, scoped: dict) -> None:
    decisions = await hash_clients.search.ListMemories(
        pb.ListMemoriesRequest(
            workspace=scoped["ws"].id, filter=common_pb2.MemoryFilter(kinds=[common_pb2.MEMORY_KIND_DECISION])
        )
    )
    assert [m.id for m in decisions.memories] == [scoped["first"]]


async def test_global_memories_are_read_by_every_workspace(hash_clients: Clients, scoped: dict) -> None:
    # A word no other test uses: the global scope is shared by every workspace of the session.
    note = await hash_clients.write("global", "Always use the okapiconvention for user-wide settings.")
    try:
        for workspace in (scoped["ws"].id, scoped["other"].id):
            found = ids(await hash_clients.find(workspace, "okapiconvention", mode="lexical"))
            assert note.id in found
        other_found = ids(await hash_clients.find(scoped["other"].id, "zebra", mode="lexical"))
        assert scoped["first"] not in other_found and scoped["foreign"] in other_found
    finally:
        # Global is read by every workspace of the session: leave nothing in it for other tests to count.
        await hash_clients.ingest.PurgeMemory(
            ingest_pb.PurgeMemoryRequest(workspace="global", id=note.id, reason="test cleanup", force=True)
        )


async def test_limits_are_bounded_and_negative_ones_refused(hash_clients: Clients, scoped: dict) -> None:
    response = await hash_clients.find(scoped["ws"].id, "zebra", mode="lexical", limit=10_000)
    assert len(response.hits) == 2
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.find(scoped["ws"].id, "zebra", mode="lexical", limit=-1)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "limit" in err.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.search.ListMemories(pb.ListMemoriesRequest(workspace=scoped["ws"].id, page_token="junk"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "page_token" in err.value.details()


async def test_explain_breaks_the_score_down(hash_clients: Clients, scoped: dict) -> None:
    response = await hash_clients.find(scoped["ws"].id, "zebra migration plan", mode="hybrid", explain=True)
    top = response.hits[0]
    assert top.explanation.lexical.rank >= 1 and top.explanation.semantic.rank >= 1
    assert top.explanation.semantic.score > 0
    assert 0 < top.explanation.recency_factor <= 1
    # An active agent note: the status weight (0.85) times the provenance weight (1.0).
    assert top.explanation.trust_factor == pytest.approx(0.85)
    assert top.score == pytest.approx(
        top.explanation.fused_score * top.explanation.recency_factor * top.explanation.trust_factor
    )
    plain = await hash_clients.find(scoped["ws"].id, "zebra migration plan", mode="hybrid")
    assert not plain.hits[0].HasField("explanation")


def test_only_statuses_narrows_what_a_read_sees_and_never_widens_it() -> None:
    reach = Reach(("ws",))
    assert Scope(reach=reach, only_statuses=("candidate",)).statuses == ("candidate",)
    # A hidden status asked for without include_history stays hidden: nothing is read.
    assert Scope(reach=reach, only_statuses=("superseded",)).statuses == ()
    assert Scope(reach=reach, include_history=True, only_statuses=("superseded",)).statuses == ("superseded",)
    params = Params()
    where = build_scope(Scope(reach=reach, only_statuses=("retracted",)), params).where
    assert "m.deleted_at IS NULL" in where and [] in params.values
    # Positive control: without it, a read sees the visible statuses.
    assert Scope(reach=reach).statuses == VISIBLE_STATUSES
