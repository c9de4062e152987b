"""Memory out and back in (docs/export-format.md): `mnemo export` of one instance, `mnemo import` into a
fresh one, and the second answers as the first did — searches in every mode, reads, history, as-of and
valid-at reads, tombstones — with its audit chain intact. Plus the refusals of bad files."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import pytest
from google.protobuf import json_format, timestamp_pb2

from mnemo.common.v1 import common_pb2
from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_embed import HashEmbedder
from mnemo_platform.reasons import reason_of
from mnemo_server.stack import Stack
from tests.helpers import Clients, Postgres, eventually, ids, mnemo, start_stack, table_counts, wait_posted


def _ts(value: datetime) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value)
    return ts


def _plain(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


async def _settled(clients: Clients, workspace: str, dsn: str) -> None:
    """Every chunk embedded and the lexical statistics posted: searches answer from everything."""

    async def embedded() -> bool:
        status = await clients.search.GetStatus(search_pb.GetStatusRequest(workspace=workspace))
        return status.chunks_pending == 0 and status.chunks_failed == 0 and status.chunks_embedded > 0

    await eventually(embedded, timeout=60)
    await wait_posted(dsn)


class Pair:
    """The exporting and the importing instance, each a whole stack on its own database."""

    def __init__(self, source: Stack, target: Stack, source_dsn: str, target_dsn: str) -> None:
        self.source, self.target = source, target
        self.source_dsn, self.target_dsn = source_dsn, target_dsn
        self.src, self.dst = Clients(source), Clients(target)


@pytest.fixture(scope="module")
async def pair(postgres: Postgres) -> AsyncIterator[Pair]:
    source_dsn = await postgres.create_database("export")
    target_dsn = await postgres.create_database("import")
    source = await start_stack(source_dsn, HashEmbedder(64))
    target = await start_stack(target_dsn, HashEmbedder(64))
    pair = Pair(source, target, source_dsn, target_dsn)
    try:
        yield pair
    finally:
        await pair.src.close()
        await pair.dst.close()
        await source.stop()
        await target.stop()


async def test_an_export_imported_into_a_fresh_instance_answers_as_the_original(pair: Pair, tmp_path: Path) -> None:
    src, dst = pair.src, pair.dst
    ws = (await src.workspace("round-trip")).id
    kept = await src.write(
        ws,
        "The deploy script pins terraform 1.5 because the state file format changed in 1.6.",
        kind=common_pb2.MEMORY_KIND_DECISION,
        tags=["deploy", "terraform"],
        metadata=json_format.ParseDict({"ticket": "OPS-17"}, ingest_pb.WriteMemoryRequest().metadata),
    )
    updated = await src.write(ws, "The cache layer runs on redis version six with lazy eviction.")
    superseded = await src.write(ws, "Sessions are stored in memcached behind the load balancer.")
    retracted = await src.write(ws, "The flaky upload test fails because of the network mock.")
    deleted = await src.write(
        ws, "Staging credentials rotate weekly through the vault agent.", source_uri="file:///notes/rotation.md"
    )
    purged = await src.write(
        ws, "Billing exports contain customer addresses and go to the finance bucket.", source_uri="file:///b.md"
    )
    moved = await src.write(
        ws,
        "The office moved to Berlin and the on-call rota follows Berlin time.",
        valid_from=_ts(datetime(2024, 1, 1, tzinfo=UTC)),
    )
    await src.ingest.UpdateMemory(
        ingest_pb.UpdateMemoryRequest(
            workspace=ws, id=updated.id, content="The cache layer runs on redis version seven with active eviction."
        )
    )
    successor = (
        await src.ingest.SupersedeMemory(
            ingest_pb.SupersedeMemoryRequest(
                workspace=ws,
                id=superseded.id,
                successor=ingest_pb.WriteMemoryRequest(content="Sessions are stored in redis since the migration."),
                reason="moved off memcached",
            )
        )
    ).successor
    await src.ingest.RetractMemory(ingest_pb.RetractMemoryRequest(workspace=ws, id=retracted.id, reason="wrong"))
    await src.ingest.DeleteMemory(ingest_pb.DeleteMemoryRequest(workspace=ws, id=deleted.id, reason="a secret"))
    await src.ingest.PurgeMemory(ingest_pb.PurgeMemoryRequest(workspace=ws, id=purged.id, reason="pii", force=True))
    await _settled(src, ws, pair.source_dsn)

    history = await src.search.GetHistory(search_pb.GetHistoryRequest(workspace=ws, id=updated.id))
    first = history.versions[0]
    # Just before the update: version 1 still recorded, every note written (they came first), none corrected.
    between = first.recorded_to.ToDatetime(UTC) - timedelta(microseconds=1)

    export = tmp_path / "mnemo.jsonl"
    code, out, err = await mnemo(pair.source, "export", "-w", ws, "-o", str(export))
    assert code == 0, err
    assert out == "" and "memories" in err
    lines = export.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "mnemo-export" and header["version"] == 1 and header["workspaces"] == [ws]
    types = [json.loads(line)["type"] for line in lines[1:]]
    assert types.count("memory") == 7 and types.count("tombstone") == 2 and types[-1] == "audit_head"
    # The purged memory left only its tombstone's key: no record holds its text.
    assert "finance bucket" not in export.read_text() and "file:///b.md" in export.read_text()
    assert "vault agent" in export.read_text()  # positive control: the deleted, restorable one travels

    code, out, err = await mnemo(pair.target, "import", str(export))
    assert code == 0, out + err
    assert f"{len(lines) - 1} records: {len(lines) - 1} restored, 0 already in, 0 refused" in out
    await _settled(dst, ws, pair.target_dsn)

    # Searches answer alike in every mode; hidden memories stay hidden while their neighbours are found.
    hidden = {superseded.id, retracted.id, deleted.id, purged.id}
    for query in ("terraform state format", "cache redis eviction", "sessions stored", "office Berlin"):
        for mode in ("lexical", "semantic", "hybrid"):
            want, got = ids(await src.find(ws, query, mode)), ids(await dst.find(ws, query, mode))
            assert got == want, (query, mode)
            assert got and not hidden & set(got), (query, mode)
    assert ids(await dst.find(ws, "sessions stored", "lexical"))[0] == successor.id
    assert kept.id in ids(await dst.find(ws, "terraform", "lexical"))
    history_on = common_pb2.ReadOptions(include_history=True)
    assert retracted.id not in ids(await dst.find(ws, "flaky upload", "lexical"))
    assert ids(await dst.find(ws, "flaky upload", "lexical", options=history_on)) == [retracted.id]

    # Reads: each memory as it is, and as it was recorded between the two versions.
    for memory in (kept, updated, successor, moved):
        request = search_pb.GetMemoryRequest(workspace=ws, id=memory.id)
        assert _plain(await dst.search.GetMemory(request)) == _plain(await src.search.GetMemory(request))
    as_of = common_pb2.ReadOptions(as_of=_ts(between))
    old = await dst.search.GetMemory(search_pb.GetMemoryRequest(workspace=ws, id=updated.id, options=as_of))
    assert "version six" in old.memory.content and old.memory.version == 1
    assert (
        ids(await dst.find(ws, "redis version six", "lexical", options=as_of))
        == ids(await src.find(ws, "redis version six", "lexical", options=as_of))
        == [updated.id]
    )
    assert ids(await dst.find(ws, "sessions memcached", "lexical", options=as_of)) == [superseded.id]
    # Valid time: the Berlin note did not hold in 2023, and does in 2025.
    for year, found in ((2023, False), (2025, True)):
        options = common_pb2.ReadOptions(valid_at=_ts(datetime(year, 6, 1, tzinfo=UTC)))
        got = ids(await dst.find(ws, "office Berlin", "lexical", options=options))
        assert got == ids(await src.find(ws, "office Berlin", "lexical", options=options))
        assert (moved.id in got) is found

    # History: every version and status span, with their recorded times, as exported.
    for memory in (updated, superseded, retracted, successor):
        request = search_pb.GetHistoryRequest(workspace=ws, id=memory.id)
        want, got = await src.search.GetHistory(request), await dst.search.GetHistory(request)
        assert [_plain(v) for v in got.versions] == [_plain(v) for v in want.versions]
        assert [_plain(s) for s in got.states] == [_plain(s) for s in want.states]
        assert _plain(got.memory) == _plain(want.memory)
    assert len((await dst.search.GetHistory(search_pb.GetHistoryRequest(workspace=ws, id=updated.id))).versions) == 2

    # The audit chains verify, every one, and hold an import event per memory and the exported head.
    check = await dst.search.VerifyAudit(search_pb.VerifyAuditRequest())
    assert check.ok and check.events_checked > 0, check.problem
    code, out, err = await mnemo(pair.target, "audit", "verify", "-w", ws)
    assert code == 0, out + err
    conn = await asyncpg.connect(pair.target_dsn)
    try:
        actions = [r["action"] for r in await conn.fetch("SELECT action FROM audit_events WHERE workspace_id = $1", ws)]
        head = await conn.fetchval(
            "SELECT details->'exported_head'->>'hash' FROM audit_events WHERE workspace_id = $1 AND action = $2",
            ws,
            "import_audit_head",
        )
    finally:
        await conn.close()
    assert actions.count("import") == 7 and actions.count("import_tombstone") == 2
    assert head == json.loads(lines[-1])["hash"]

    # A rerun finds everything in and writes nothing.
    before = await table_counts(pair.target_dsn)
    code, out, err = await mnemo(pair.target, "import", str(export))
    assert code == 0, out + err
    assert f"0 restored, {len(lines) - 1} already in, 0 refused" in out
    assert await table_counts(pair.target_dsn) == before

    # Tombstones hold: the purged source is refused; a new source is written (positive control).
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await dst.write(ws, "Billing exports again.", source_uri="file:///b.md")
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert reason_of(refused.value) == reasons_pb.ERROR_REASON_TOMBSTONED
    assert (await dst.write(ws, "Billing exports again.", source_uri="file:///c.md")).id
    # The deleted memory was exported with its standing tombstone: it can be restored here.
    assert deleted.id not in ids(await dst.find(ws, "vault agent credentials", "lexical"))
    await dst.ingest.RestoreMemory(ingest_pb.RestoreMemoryRequest(workspace=ws, id=deleted.id))
    assert deleted.id in ids(await dst.find(ws, "vault agent credentials", "lexical"))

    # Now that the workspace holds a memory no import wrote, a changed file is refused there.
    changed = [*lines]
    record = json.loads(changed[3])
    record["id"] = str(uuid.uuid4())
    changed[3] = json.dumps(record)
    (tmp_path / "changed.jsonl").write_text("\n".join(changed) + "\n")
    code, out, _ = await mnemo(pair.target, "import", str(tmp_path / "changed.jsonl"))
    assert code == 1
    assert "line 4: " in out and "already holds 1 memories that no import wrote" in out


def _memory(ws: str, memory_id: str, text: str) -> dict[str, Any]:
    import hashlib

    digest = hashlib.sha256(text.encode()).hexdigest()
    at = "2026-01-02T03:04:05.123456+00:00"
    return {
        "type": "memory", "id": memory_id, "workspace_id": ws, "kind": "note", "title": text[:20], "tags": [],
        "metadata": {}, "source_uri": None, "idempotency_key": None, "status": "active", "status_reason": None,
        "trust": 1.0, "suspicious": [], "author": "someone", "provenance": "agent", "version": 1,
        "content_hash": digest, "valid_from": None, "valid_to": None, "created_at": at, "updated_at": at,
        "superseded_by": None, "deleted_at": None,
        "versions": [
            {"version": 1, "title": text[:20], "content": text, "content_hash": digest, "author": "someone",
             "recorded_from": at, "recorded_to": None}
        ],
        "states": [
            {"status": "active", "reason": None, "principal": "someone", "superseded_by": None, "valid_from": None,
             "valid_to": None, "recorded_from": at, "recorded_to": None}
        ],
        "derivations": [],
    }  # fmt: skip


async def test_bad_lines_are_refused_by_line_and_leave_nothing(pair: Pair, tmp_path: Path) -> None:
    ws = f"bad-{uuid.uuid4().hex[:8]}"
    header = {"format": "mnemo-export", "version": 1, "exported_at": "2026-01-02T03:04:05+00:00", "workspaces": [ws]}
    good, damaged = str(uuid.uuid4()), str(uuid.uuid4())
    tampered = _memory(ws, damaged, "This text was changed after it was exported.")
    tampered["versions"][0]["content"] = "Something else entirely."
    lines = [
        json.dumps(header),
        json.dumps({"type": "workspace", "id": ws, "name": ws, "root_path": None, "created_at": header["exported_at"]}),
        '{"type": "memory", "id": ',
        json.dumps({"type": "comment", "text": "hello"}),
        json.dumps(tampered),
        json.dumps(_memory(ws, good, "A good note about the release checklist.")),
        json.dumps({**_memory(ws, str(uuid.uuid4()), "Trust given as a word."), "trust": "high"}),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = await mnemo(pair.target, "import", str(path))
    assert code == 1, err
    assert "line 3: not JSON" in out
    assert "line 4: unknown record type 'comment'" in out
    assert "line 5: memory record: version 1's content does not match its content_hash" in out
    assert "line 7: memory record: field 'trust' must be a number" in out
    assert "6 records: 2 restored, 0 already in, 4 refused" in out
    get = search_pb.GetMemoryRequest(workspace=ws, id=good)
    assert "release checklist" in (await pair.dst.search.GetMemory(get)).memory.content
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await pair.dst.search.GetMemory(search_pb.GetMemoryRequest(workspace=ws, id=damaged))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND

    # A version this Mnemo does not read is refused as a whole, naming line 1, and writes nothing.
    newer = [json.dumps({**header, "version": 2}), *lines[1:2]]
    newer[1] = newer[1].replace(ws, ws + "-v2")
    path.write_text("\n".join(newer) + "\n")
    before = await table_counts(pair.target_dsn)
    code, out, err = await mnemo(pair.target, "import", str(path))
    assert code == 1
    assert "INVALID_ARGUMENT" in err and "line 1: mnemo-export version 2 is not one this Mnemo reads" in err
    assert "Traceback" not in err
    assert await table_counts(pair.target_dsn) == before


async def test_export_of_every_workspace_and_its_refusals(pair: Pair) -> None:
    ws = (await pair.src.workspace()).id
    await pair.src.write(ws, "A note so the workspace has something to export.")
    code, out, err = await mnemo(pair.source, "export")
    assert code == 0, err
    header = json.loads(out.splitlines()[0])
    assert ws in header["workspaces"] and "global" in header["workspaces"] and header["scope"] == "*"
    code, out, err = await mnemo(pair.source, "export", "-w", "no-such-workspace")
    assert code == 1 and out == ""
    assert "NOT_FOUND" in err and "Traceback" not in err
