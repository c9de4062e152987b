"""Corrections that every read path honours: negative evals, each beside its positive control."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
import grpc
import pytest
from google.protobuf import timestamp_pb2

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo.search.v1 import search_service_pb2 as spb
from mnemo_embed import HashEmbedder
from mnemo_server.stack import Stack
from tests.helpers import Clients, Postgres, ids, start_stack, wait_posted

MODES = ["hybrid", "lexical", "semantic"]


def ts(value: datetime) -> timestamp_pb2.Timestamp:
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(value)
    return message


def history(**fields: object) -> common_pb2.ReadOptions:
    return common_pb2.ReadOptions(**fields)


@dataclass
class Case:
    """One workspace where `old` was corrected and `control` is what must still be found."""

    ws: str
    token: str
    old: str
    control: str
    before: datetime


async def _two_notes(c: Clients, *, sibling: bool) -> tuple[str, str, str, str]:
    ws = (await c.workspace()).id
    token = f"kiwi{uuid.uuid4().hex[:6]}"
    old = await c.write(ws, f"The deploy target for {token} is the blue cluster in zone one.", title="Deploy target")
    control = ""
    if sibling:
        control = (await c.write(ws, f"The rollback runbook for {token} lives beside the deploy target.")).id
        await c.wait_embedded(control, ws)
    await c.wait_embedded(old.id, ws)
    return ws, token, old.id, control


async def _settle() -> datetime:
    # A clear gap on both sides of "before": recorded times are transaction start times.
    await asyncio.sleep(0.05)
    moment = datetime.now(UTC)
    await asyncio.sleep(0.05)
    return moment


@pytest.fixture(scope="module")
async def superseded(hash_clients: Clients) -> Case:
    ws, token, old, _ = await _two_notes(hash_clients, sibling=False)
    before = await _settle()
    response = await hash_clients.ingest.SupersedeMemory(
        ipb.SupersedeMemoryRequest(
            workspace=ws,
            id=old,
            reason="moved to green",
            successor=ipb.WriteMemoryRequest(
                content=f"The deploy target for {token} is the green cluster in zone two."
            ),
        )
    )
    await hash_clients.wait_embedded(response.successor.id, ws)
    return Case(ws, token, old, response.successor.id, before)


@pytest.fixture(scope="module")
async def retracted(hash_clients: Clients) -> Case:
    ws, token, old, sibling = await _two_notes(hash_clients, sibling=True)
    before = await _settle()
    await hash_clients.ingest.RetractMemory(ipb.RetractMemoryRequest(workspace=ws, id=old, reason="wrong cluster"))
    return Case(ws, token, old, sibling, before)


@pytest.fixture(scope="module")
async def deleted(hash_clients: Clients) -> Case:
    ws, token, old, sibling = await _two_notes(hash_clients, sibling=True)
    before = await _settle()
    await hash_clients.ingest.DeleteMemory(ipb.DeleteMemoryRequest(workspace=ws, id=old, reason="contained a secret"))
    return Case(ws, token, old, sibling, before)


CORRECTIONS = ["superseded", "retracted", "deleted"]


@pytest.fixture(params=CORRECTIONS)
def case(request: pytest.FixtureRequest) -> Case:
    return request.getfixturevalue(request.param)


@pytest.mark.parametrize("mode", MODES)
async def test_the_old_value_is_found_by_no_search_mode_and_the_control_is(
    hash_clients: Clients, case: Case, mode: str
) -> None:
    found = ids(await hash_clients.find(case.ws, f"deploy target {case.token} cluster", mode=mode))
    assert case.control in found
    assert case.old not in found


@pytest.mark.parametrize("mode", ["hybrid", "lexical"])
async def test_the_old_value_is_not_found_by_the_relaxed_lexical_leg(
    hash_clients: Clients, case: Case, mode: str
) -> None:
    # No memory has "quokkaunseen": the AND form finds nothing and the leg relaxes to any word.
    response = await hash_clients.find(case.ws, f"{case.token} quokkaunseen", mode=mode)
    assert response.lexical_relaxed
    assert case.control in ids(response)
    assert case.old not in ids(response)


async def test_get_and_list_do_not_return_the_old_value(hash_clients: Clients, case: Case) -> None:
    own = await hash_clients.search.GetMemory(spb.GetMemoryRequest(workspace=case.ws, id=case.control))
    assert own.memory.id == case.control
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.search.GetMemory(spb.GetMemoryRequest(workspace=case.ws, id=case.old))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    listed = [
        m.id for m in (await hash_clients.search.ListMemories(spb.ListMemoriesRequest(workspace=case.ws))).memories
    ]
    assert case.control in listed and case.old not in listed


async def test_the_wake_up_packet_shows_the_old_value_only_as_a_change_and_the_control_as_current(
    hash_clients: Clients, case: Case
) -> None:
    for task in ("", f"deploy target {case.token} cluster"):
        packet = await hash_clients.search.GetContext(
            spb.GetContextRequest(workspace=case.ws, task=task, since=ts(case.before))
        )
        current = {i.memory.id for p in packet.sections if p.section != spb.CONTEXT_SECTION_CHANGED for i in p.items}
        changed = {i.memory.id: i for p in packet.sections if p.section == spb.CONTEXT_SECTION_CHANGED for i in p.items}
        assert case.control in current
        assert case.old not in current
        if case.old in changed:  # superseded or retracted: reported as what it is
            item = changed[case.old]
            assert item.memory.status in (common_pb2.MEMORY_STATUS_SUPERSEDED, common_pb2.MEMORY_STATUS_RETRACTED)
            assert (", superseded by " in item.line) == (item.memory.status == common_pb2.MEMORY_STATUS_SUPERSEDED)
            if item.HasField("successor"):
                assert item.successor.id == case.control
        else:  # deleted: nowhere at all, not even as a change
            assert "was deleted" not in packet.text and case.old not in packet.text
            assert await _deleted(hash_clients, case)


async def _deleted(c: Clients, case: Case) -> bool:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await c.search.GetMemory(spb.GetMemoryRequest(workspace=case.ws, id=case.old))
    return "was deleted" in (err.value.details() or "")


@pytest.mark.parametrize("name", ["superseded", "retracted"])
async def test_as_of_before_the_correction_reads_the_old_value(
    hash_clients: Clients, request: pytest.FixtureRequest, name: str
) -> None:
    case: Case = request.getfixturevalue(name)
    then = history(as_of=ts(case.before))
    got = await hash_clients.search.GetMemory(spb.GetMemoryRequest(workspace=case.ws, id=case.old, options=then))
    assert "blue cluster" in got.memory.content and got.memory.status == common_pb2.MEMORY_STATUS_ACTIVE
    for mode in MODES:
        found = ids(await hash_clients.find(case.ws, f"deploy target {case.token}", mode=mode, options=then))
        assert case.old in found, mode
        # The successor did not exist yet then.
        if name == "superseded":
            assert case.control not in found, mode
    listed = await hash_clients.search.ListMemories(spb.ListMemoriesRequest(workspace=case.ws, options=then))
    assert case.old in [m.id for m in listed.memories]
    # Positive control for the as-of relation itself: now, the old value is gone.
    assert case.old not in ids(await hash_clients.find(case.ws, f"deploy target {case.token}", mode="lexical"))


async def test_deleted_content_is_gone_even_as_of_before_the_deletion(hash_clients: Clients, deleted: Case) -> None:
    then = history(as_of=ts(deleted.before), include_history=True)
    for mode in MODES:
        found = ids(await hash_clients.find(deleted.ws, f"deploy target {deleted.token}", mode=mode, options=then))
        assert deleted.old not in found and deleted.control in found, mode
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.search.GetMemory(spb.GetMemoryRequest(workspace=deleted.ws, id=deleted.old, options=then))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and "deleted" in err.value.details()


async def test_superseded_and_retracted_are_found_with_history_and_deleted_is_not(
    hash_clients: Clients, superseded: Case, retracted: Case, deleted: Case
) -> None:
    everything = history(include_history=True)
    for case, status in (
        (superseded, common_pb2.MEMORY_STATUS_SUPERSEDED),
        (retracted, common_pb2.MEMORY_STATUS_RETRACTED),
    ):
        for mode in MODES:
            response = await hash_clients.find(case.ws, f"deploy target {case.token}", mode=mode, options=everything)
            statuses = {hit.memory.id: hit.memory.status for hit in response.hits}
            assert statuses.get(case.old) == status, (mode, case)
    for mode in MODES:
        response = await hash_clients.find(deleted.ws, f"deploy target {deleted.token}", mode=mode, options=everything)
        assert deleted.old not in ids(response) and deleted.control in ids(response)
    superseded_now = await hash_clients.search.GetMemory(
        spb.GetMemoryRequest(workspace=superseded.ws, id=superseded.old, options=everything)
    )
    assert superseded_now.memory.superseded_by == superseded.control
    assert superseded_now.memory.HasField("valid_to")


async def test_get_says_why_a_corrected_memory_is_not_returned(
    hash_clients: Clients, superseded: Case, retracted: Case, deleted: Case
) -> None:
    for case, fragment in (
        (superseded, f"is superseded by {superseded.control}; pass include_history"),
        (retracted, "is retracted; pass include_history"),
        (deleted, "was deleted; restore it"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await hash_clients.search.GetMemory(spb.GetMemoryRequest(workspace=case.ws, id=case.old))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND and fragment in err.value.details()


async def test_history_lists_versions_and_status_changes_in_order(hash_clients: Clients, superseded: Case) -> None:
    response = await hash_clients.search.GetHistory(spb.GetHistoryRequest(workspace=superseded.ws, id=superseded.old))
    assert [v.version for v in response.versions] == [1]
    assert [s.status for s in response.states] == [common_pb2.MEMORY_STATUS_ACTIVE, common_pb2.MEMORY_STATUS_SUPERSEDED]
    assert response.states[0].HasField("recorded_to") and not response.states[1].HasField("recorded_to")
    assert response.states[1].superseded_by == superseded.control and response.states[1].reason == "moved to green"
    assert [e.action for e in response.events] == ["write", "supersede"]
    successor = await hash_clients.search.GetHistory(
        spb.GetHistoryRequest(workspace=superseded.ws, id=superseded.control)
    )
    # The successor's creation is the supersede event (one event per mutation), found from either side.
    assert [e.action for e in successor.events] == ["supersede"]


async def test_valid_at_selects_beliefs_by_world_time(hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    token = f"fig{uuid.uuid4().hex[:6]}"
    since_2020 = datetime(2020, 1, 1, tzinfo=UTC)
    switch = datetime(2024, 6, 1, tzinfo=UTC)
    old = await hash_clients.write(ws, f"The {token} service runs on Python 3.8.", valid_from=ts(since_2020))
    response = await hash_clients.ingest.SupersedeMemory(
        ipb.SupersedeMemoryRequest(
            workspace=ws,
            id=old.id,
            successor=ipb.WriteMemoryRequest(
                content=f"The {token} service runs on Python 3.12.", valid_from=ts(switch)
            ),
        )
    )
    new = response.successor.id
    assert response.superseded.valid_to.ToDatetime(tzinfo=UTC) == switch
    everything = common_pb2.ReadOptions(include_history=True, valid_at=ts(datetime(2022, 1, 1, tzinfo=UTC)))
    for mode in ("hybrid", "lexical"):
        in_2022 = ids(await hash_clients.find(ws, f"{token} service python", mode=mode, options=everything))
        assert in_2022 == [old.id], mode
        now = common_pb2.ReadOptions(include_history=True, valid_at=ts(datetime(2025, 1, 1, tzinfo=UTC)))
        in_2025 = ids(await hash_clients.find(ws, f"{token} service python", mode=mode, options=now))
        assert in_2025 == [new], mode
        before_anything = common_pb2.ReadOptions(include_history=True, valid_at=ts(datetime(2019, 1, 1, tzinfo=UTC)))
        assert ids(await hash_clients.find(ws, f"{token} service python", mode=mode, options=before_anything)) == []


async def test_restore_brings_a_deleted_memory_back_everywhere(hash_clients: Clients) -> None:
    ws, token, old, sibling = await _two_notes(hash_clients, sibling=True)
    await hash_clients.ingest.DeleteMemory(ipb.DeleteMemoryRequest(workspace=ws, id=old, reason="oops"))
    assert old not in ids(await hash_clients.find(ws, f"deploy target {token}", mode="lexical"))
    restored = await hash_clients.ingest.RestoreMemory(ipb.RestoreMemoryRequest(workspace=ws, id=old))
    assert restored.memory.status == common_pb2.MEMORY_STATUS_ACTIVE
    for mode in MODES:
        found = ids(await hash_clients.find(ws, f"deploy target {token}", mode=mode))
        assert old in found and sibling in found, mode
    relaxed = await hash_clients.find(ws, f"{token} quokkaunseen", mode="lexical")
    assert relaxed.lexical_relaxed and old in ids(relaxed)
    got = await hash_clients.search.GetMemory(spb.GetMemoryRequest(workspace=ws, id=old))
    assert "blue cluster" in got.memory.content
    listed = await hash_clients.search.ListMemories(spb.ListMemoriesRequest(workspace=ws))
    assert old in [m.id for m in listed.memories]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.ingest.RestoreMemory(ipb.RestoreMemoryRequest(workspace=ws, id=old))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "not deleted" in err.value.details()


async def _tables_holding(dsn: str, needle: str) -> dict[str, int]:
    conn = await asyncpg.connect(dsn)
    try:
        tables = [
            r["table_name"]
            for r in await conn.fetch(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
            )
        ]
        found = {}
        for table in tables:
            count = await conn.fetchval(f'SELECT count(*) FROM "{table}" t WHERE t::text LIKE $1', f"%{needle}%")
            if count:
                found[table] = count
        return found
    finally:
        await conn.close()


async def test_purge_leaves_no_content_in_any_table_but_keeps_the_tombstone(hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    secret = f"hunter{uuid.uuid4().hex[:10]}"
    memory = await hash_clients.write(
        ws,
        f"The staging password is {secret}; rotate it monthly.",
        title=f"Staging {secret}",
        tags=[secret],
        source_uri=f"file:///notes/{secret}.md",
    )
    await hash_clients.ingest.UpdateMemory(
        ipb.UpdateMemoryRequest(workspace=ws, id=memory.id, content=f"The staging password is {secret}!")
    )
    await hash_clients.wait_embedded(memory.id, ws)
    keeper = await hash_clients.write(ws, "An unrelated note stays.")
    await wait_posted(hash_clients.stack.dsn)
    # Positive control: the scan finds the content while it exists, in several tables (the lexical
    # statistics hold its words once posted).
    before = await _tables_holding(hash_clients.stack.dsn, secret)
    assert {"memories", "memory_versions", "chunks", "lexical_terms"} <= set(before)

    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.ingest.PurgeMemory(ipb.PurgeMemoryRequest(workspace=ws, id=memory.id, reason=secret))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "force" in err.value.details()
    assert await _tables_holding(hash_clients.stack.dsn, secret) == before

    purged = await hash_clients.ingest.PurgeMemory(
        ipb.PurgeMemoryRequest(workspace=ws, id=memory.id, reason=f"leaked {secret}", force=True)
    )
    assert purged.tombstone.purged_at.seconds > 0 and purged.tombstone.reason == ""
    # The source URI names the secret here, and it is the tombstone key: it stays, deliberately.
    assert await _tables_holding(hash_clients.stack.dsn, secret) == {"tombstones": 1}
    conn = await asyncpg.connect(hash_clients.stack.dsn)
    try:
        stone = await conn.fetchrow("SELECT * FROM tombstones WHERE memory_id = $1", uuid.UUID(memory.id))
        assert stone["snapshot"] is None and stone["reason"] is None and stone["source_uri"].endswith(f"{secret}.md")
        for table in ("memories", "memory_versions", "memory_states", "chunks"):
            column = "id" if table == "memories" else "memory_id"
            assert await conn.fetchval(f"SELECT count(*) FROM {table} WHERE {column} = $1", uuid.UUID(memory.id)) == 0
    finally:
        await conn.close()
    assert keeper.id in ids(await hash_clients.find(ws, "unrelated note", mode="lexical"))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.search.GetMemory(spb.GetMemoryRequest(workspace=ws, id=memory.id))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and "purged" in err.value.details()
    # The source stays dead: a re-write is refused, and says why.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.write(ws, "the same file again", source_uri=f"file:///notes/{secret}.md")
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "purged" in err.value.details()
    other = await hash_clients.write(ws, "another file is fine", source_uri=f"file:///notes/other-{secret[:4]}.md")
    assert other.version == 1


async def test_a_deleted_source_refuses_writes_until_restored(hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    uri = f"session://claude/{uuid.uuid4()}"
    memory = await hash_clients.write(ws, "session transcript v1", source_uri=uri)
    await hash_clients.ingest.DeleteMemory(ipb.DeleteMemoryRequest(workspace=ws, id=memory.id, reason="noise"))
    for content in ("session transcript v1", "session transcript v2, grown"):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await hash_clients.write(ws, content, source_uri=uri)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert f"restore memory {memory.id}" in err.value.details()
    await hash_clients.ingest.RestoreMemory(ipb.RestoreMemoryRequest(workspace=ws, id=memory.id))
    again = await hash_clients.ingest.WriteMemory(
        ipb.WriteMemoryRequest(workspace=ws, content="session transcript v2, grown", source_uri=uri)
    )
    assert again.outcome == ipb.WRITE_OUTCOME_NEW_VERSION and again.memory.id == memory.id


async def test_naming_a_missing_or_foreign_memory_is_not_found_never_a_no_op(hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    other = (await hash_clients.workspace()).id
    foreign = await hash_clients.write(other, "belongs to the other workspace")
    calls = {
        "supersede": lambda i: hash_clients.ingest.SupersedeMemory(
            ipb.SupersedeMemoryRequest(workspace=ws, id=i, successor=ipb.WriteMemoryRequest(content="new"))
        ),
        "retract": lambda i: hash_clients.ingest.RetractMemory(
            ipb.RetractMemoryRequest(workspace=ws, id=i, reason="r")
        ),
        "confirm": lambda i: hash_clients.ingest.ConfirmMemory(ipb.ConfirmMemoryRequest(workspace=ws, id=i)),
        "delete": lambda i: hash_clients.ingest.DeleteMemory(ipb.DeleteMemoryRequest(workspace=ws, id=i, reason="r")),
        "restore": lambda i: hash_clients.ingest.RestoreMemory(ipb.RestoreMemoryRequest(workspace=ws, id=i)),
        "purge": lambda i: hash_clients.ingest.PurgeMemory(ipb.PurgeMemoryRequest(workspace=ws, id=i, force=True)),
        "history": lambda i: hash_clients.search.GetHistory(spb.GetHistoryRequest(workspace=ws, id=i)),
    }
    for name, call in calls.items():
        for memory_id in (str(uuid.uuid4()), foreign.id):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call(memory_id)
            assert err.value.code() == grpc.StatusCode.NOT_FOUND, name
            assert memory_id in err.value.details(), name
    # Positive control: the foreign memory is intact and readable in its own workspace.
    got = await hash_clients.search.GetMemory(spb.GetMemoryRequest(workspace=other, id=foreign.id))
    assert got.memory.status == common_pb2.MEMORY_STATUS_ACTIVE


async def test_corrections_refuse_memories_in_the_wrong_state(hash_clients: Clients, superseded: Case) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.ingest.SupersedeMemory(
            ipb.SupersedeMemoryRequest(
                workspace=superseded.ws, id=superseded.old, successor=ipb.WriteMemoryRequest(content="third")
            )
        )
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert f"superseded by {superseded.control}" in err.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await hash_clients.ingest.RetractMemory(
            ipb.RetractMemoryRequest(workspace=superseded.ws, id=superseded.control, reason="")
        )
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "reason is required" in err.value.details()


async def test_confirmed_outranks_active_which_outranks_a_transcript(hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    text = "Use the mango build cache for incremental builds."
    transcript = await hash_clients.write(ws, text, provenance=common_pb2.PROVENANCE_HARVESTED_TRANSCRIPT)
    active = await hash_clients.write(ws, text, provenance=common_pb2.PROVENANCE_AGENT)
    confirmed = await hash_clients.write(ws, text, provenance=common_pb2.PROVENANCE_HUMAN)
    response = await hash_clients.ingest.ConfirmMemory(ipb.ConfirmMemoryRequest(workspace=ws, id=confirmed.id))
    assert response.memory.status == common_pb2.MEMORY_STATUS_CONFIRMED
    for memory in (transcript, active, confirmed):
        await hash_clients.wait_embedded(memory.id, ws)
    for mode in MODES:
        result = await hash_clients.find(ws, "mango build cache", mode=mode, explain=True)
        assert ids(result) == [confirmed.id, active.id, transcript.id], mode
        factors = [hit.explanation.trust_factor for hit in result.hits]
        assert factors == sorted(factors, reverse=True) and factors[0] > factors[1] > factors[2]
        assert [hit.memory.trust for hit in result.hits] == pytest.approx(factors)


async def test_every_mutation_appends_exactly_one_audit_event(hash_clients: Clients) -> None:
    ws = (await hash_clients.workspace()).id
    c = hash_clients

    async def events() -> list[str]:
        page = await c.search.ListAuditEvents(spb.ListAuditEventsRequest(workspace=ws, page_size=100))
        return [e.action for e in reversed(page.events)]

    expected = ["workspace_add"]
    note = await c.write(ws, "audit me")
    expected.append("write")
    assert await events() == expected
    await c.ingest.UpdateMemory(ipb.UpdateMemoryRequest(workspace=ws, id=note.id, content="audit me, v2"))
    expected.append("update")
    await c.ingest.ConfirmMemory(ipb.ConfirmMemoryRequest(workspace=ws, id=note.id))
    expected.append("confirm")
    await c.ingest.ConfirmMemory(ipb.ConfirmMemoryRequest(workspace=ws, id=note.id))  # a no-op: no event
    successor = (
        await c.ingest.SupersedeMemory(
            ipb.SupersedeMemoryRequest(workspace=ws, id=note.id, successor=ipb.WriteMemoryRequest(content="audit v3"))
        )
    ).successor
    expected.append("supersede")
    await c.ingest.RetractMemory(ipb.RetractMemoryRequest(workspace=ws, id=successor.id, reason="wrong"))
    expected.append("retract")
    await c.ingest.DeleteMemory(ipb.DeleteMemoryRequest(workspace=ws, id=successor.id, reason="gone"))
    expected.append("delete")
    await c.ingest.RestoreMemory(ipb.RestoreMemoryRequest(workspace=ws, id=successor.id))
    expected.append("restore")
    await c.ingest.PurgeMemory(ipb.PurgeMemoryRequest(workspace=ws, id=successor.id, force=True))
    expected.append("purge")
    assert await events() == expected
    check = await c.search.VerifyAudit(spb.VerifyAuditRequest(workspace=ws))
    assert check.ok and check.events_checked == len(expected)


@pytest.fixture
async def own_stack(postgres: Postgres) -> Stack:
    stack = await start_stack(await postgres.create_database("audit"), HashEmbedder(64))
    yield stack
    await stack.stop()


async def test_tampering_with_the_audit_log_is_detected(own_stack: Stack) -> None:
    c = Clients(own_stack)
    try:
        ws = (await c.workspace()).id
        for i in range(4):
            await c.write(ws, f"note {i} for the chain")
        check = await c.search.VerifyAudit(spb.VerifyAuditRequest())
        assert check.ok and check.events_checked == 5
        conn = await asyncpg.connect(own_stack.dsn)
        try:
            target = await conn.fetchval("SELECT id FROM audit_events WHERE workspace_id = $1 ORDER BY id OFFSET 2", ws)
            # The trigger refuses even this superuser until it is switched off: tampering takes intent.
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute("UPDATE audit_events SET principal = 'mallory' WHERE id = $1", target)
            await conn.execute("ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only")
            await conn.execute("UPDATE audit_events SET principal = 'mallory' WHERE id = $1", target)
            await conn.execute("ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only")
            check = await c.search.VerifyAudit(spb.VerifyAuditRequest(workspace=ws))
            assert not check.ok and check.broken_event_id == target and check.broken_workspace_id == ws
            assert "changed after it was written" in check.problem
            # Removing an event instead breaks the link of the one after it.
            await conn.execute("ALTER TABLE audit_events DISABLE TRIGGER audit_events_append_only")
            await conn.execute("UPDATE audit_events SET principal = 'local' WHERE id = $1", target)
            last = await conn.fetchval("SELECT max(id) FROM audit_events WHERE workspace_id = $1", ws)
            await conn.execute("DELETE FROM audit_events WHERE id = $1", last - 1)
            await conn.execute("ALTER TABLE audit_events ENABLE TRIGGER audit_events_append_only")
            check = await c.search.VerifyAudit(spb.VerifyAuditRequest())
            assert not check.ok and check.broken_event_id == last and "removed or reordered" in check.problem
        finally:
            await conn.close()
    finally:
        await c.close()
