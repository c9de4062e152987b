"""Harvest's writes to ingest under faults: candidate writes refused or lost are retried until they
land, exactly once; and harvest writes with a least-privilege principal, not as admin.

Harvest runs here as its own HarvestApp whose ingest is reached through a real gRPC proxy
(tests/faults/ingest_proxy.py) that refuses or loses the calls a drill names; search, ingest and
PostgreSQL are the real stack's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from mnemo.common.v1 import common_pb2
from mnemo.harvest.v1 import harvest_service_pb2 as hpb
from mnemo.harvest.v1 import harvest_service_pb2_grpc as hgrpc
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo.ingest.v1 import ingest_service_pb2_grpc as igrpc
from mnemo.search.v1 import search_service_pb2 as spb
from mnemo.search.v1 import search_service_pb2_grpc as sgrpc
from mnemo_embed import HashEmbedder
from mnemo_harvest.app import HarvestApp
from mnemo_harvest.settings import HarvestSettings, SummarizerSettings
from mnemo_platform import CallContext
from mnemo_platform.context import PRINCIPAL_KEY, SIGNATURE_KEY
from mnemo_server.stack import Stack
from tests.faults.ingest_proxy import Proxy
from tests.harvest.agents import conversation
from tests.helpers import Postgres, start_stack

CANDIDATE_KINDS = [common_pb2.MEMORY_KIND_DECISION, common_pb2.MEMORY_KIND_LESSON]


@dataclass
class Rig:
    """A stack, a proxy in front of its ingest, and a harvest service that writes through the proxy."""

    stack: Stack
    proxy: Proxy
    app: HarvestApp
    projects: Path
    channel: grpc.aio.Channel
    admin: list[tuple[str, str]]
    """admin is the metadata of the test's own calls (signed when auth is on)."""

    @property
    def harvest(self) -> hgrpc.HarvestServiceStub:
        return hgrpc.HarvestServiceStub(self.channel)

    async def run(self) -> dict[str, hpb.RunProgress]:
        stream = self.harvest.Run(hpb.RunRequest(), metadata=self.admin)
        return {p.session_id: p async for p in stream if not p.done}

    async def candidates(self, workspace: str) -> list[common_pb2.Memory]:
        async with grpc.aio.insecure_channel(self.stack.search.target) as channel:
            listed = await sgrpc.SearchServiceStub(channel).ListMemories(
                spb.ListMemoriesRequest(workspace=workspace, filter=common_pb2.MemoryFilter(kinds=CANDIDATE_KINDS)),
                metadata=self.admin,
            )
        return list(listed.memories)

    async def proposals(self, workspace: str) -> list[common_pb2.Proposal]:
        async with grpc.aio.insecure_channel(self.stack.search.target) as channel:
            listed = await sgrpc.SearchServiceStub(channel).ListProposals(
                spb.ListProposalsRequest(workspace=workspace), metadata=self.admin
            )
        return list(listed.proposals)

    async def source(self, session_id: str) -> hpb.Source:
        listed = await self.harvest.ListSources(hpb.ListSourcesRequest(), metadata=self.admin)
        (source,) = [s for s in listed.sources if s.session_id == session_id]
        return source

    async def workspace(self, root: str) -> str:
        async with grpc.aio.insecure_channel(self.stack.ingest.target) as channel:
            made = await igrpc.IngestServiceStub(channel).AddWorkspace(
                ipb.AddWorkspaceRequest(root_path=root), metadata=self.admin
            )
        return made.workspace.id


@pytest.fixture
async def rig(postgres: Postgres, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Rig]:
    auth = getattr(request, "param", "off")
    stack = await start_stack(
        await postgres.create_database("harvestwrites"),
        HashEmbedder(64),
        MNEMO_AUTH=auth,
        MNEMO_DATA_DIR=str(tmp_path / "data"),
    )
    proxy = await Proxy(stack.ingest.target).start()
    projects = tmp_path / "claude" / "projects"
    projects.mkdir(parents=True)
    settings = HarvestSettings(agents="claude-code", claude_dir=str(projects), idle_s=600.0, interval_s=3600.0)
    app = HarvestApp(
        stack.dsn,
        "127.0.0.1:0",
        1.0,
        stack.config.database,
        settings,
        SummarizerSettings(),
        ingest_target=proxy.target,
        search_target=stack.search.target,
        call_timeout_s=5.0,
    )
    await app.start()  # no after_start: no poller, the test's runs are the only ones
    channel = grpc.aio.insecure_channel(app.target)
    # The test's own calls, as the local admin (signed with the stack's secret when auth is on).
    admin = CallContext(principal="drill-admin").metadata()
    try:
        yield Rig(stack, proxy, app, projects, channel, admin)
    finally:
        await channel.close()
        await app.stop()
        await proxy.stop()
        await stack.stop()


async def test_candidates_refused_by_ingest_are_retried_until_they_land_once(rig: Rig) -> None:
    ws = await rig.workspace("/work/retry-refused")
    session = conversation(rig.projects, "/work/retry-refused", "guillemot").write()
    rig.proxy.refuse = {"WriteMemories"}

    first = (await rig.run())[session.session_id]
    # The session itself is written (the control), its candidates are not, and it is not final.
    assert first.outcome == "harvested" and first.memory_id
    assert "2 candidate writes failed (UNAVAILABLE); retried next run" in first.detail
    assert await rig.candidates(ws) == []
    source = await rig.source(session.session_id)
    assert source.state == "harvested" and "retried next run" in source.detail

    # Still refused: tried again (not skipped as unchanged), still nothing written, nothing doubled.
    second = (await rig.run())[session.session_id]
    assert "retried next run" in second.detail and len(rig.proxy.called("WriteMemories")) == 2
    assert await rig.candidates(ws) == []

    rig.proxy.refuse = set()
    third = (await rig.run())[session.session_id]
    assert third.outcome == "unchanged" and third.memory_id == first.memory_id and "failed" not in third.detail
    landed = await rig.candidates(ws)
    assert sorted(m.kind for m in landed) == sorted(CANDIDATE_KINDS)
    assert all(m.status == common_pb2.MEMORY_STATUS_CANDIDATE for m in landed)
    assert all(dict(m.metadata)["session_memory_id"] == first.memory_id for m in landed)
    # Each opened its review proposal, once.
    proposed = [p for p in await rig.proposals(ws) if p.source == common_pb2.PROPOSAL_SOURCE_HARVEST]
    assert sorted(m for p in proposed for m in p.memory_ids) == sorted(m.id for m in landed)
    assert (await rig.source(session.session_id)).detail == "version 1"

    # Final now: the next run does not write again.
    calls = len(rig.proxy.called("WriteMemories"))
    assert (await rig.run())[session.session_id].outcome == "unchanged"
    assert len(rig.proxy.called("WriteMemories")) == calls
    assert len(await rig.candidates(ws)) == 2


async def test_candidates_whose_answer_was_lost_are_written_once(rig: Rig) -> None:
    """Ingest stored the candidates but harvest never heard: the retry carries the same idempotency
    keys, so it replays them instead of writing them twice."""
    ws = await rig.workspace("/work/retry-lost")
    session = conversation(rig.projects, "/work/retry-lost", "razorbill").write()
    rig.proxy.lose = {"WriteMemories"}
    first = (await rig.run())[session.session_id]
    assert "2 candidate writes failed (UNAVAILABLE); retried next run" in first.detail
    stored = await rig.candidates(ws)
    assert len(stored) == 2  # they did land: only the answer was lost

    rig.proxy.lose = set()
    second = (await rig.run())[session.session_id]
    assert "failed" not in second.detail
    assert sorted(m.id for m in await rig.candidates(ws)) == sorted(m.id for m in stored)
    assert len([p for p in await rig.proposals(ws) if p.source == common_pb2.PROPOSAL_SOURCE_HARVEST]) == 2
    assert len(rig.proxy.called("WriteMemories")) == 2


@pytest.mark.parametrize("rig", ["on"], indirect=True)
async def test_harvest_writes_as_a_harvester_bound_to_the_session_workspace(rig: Rig) -> None:
    """With auth on, the principal harvest signs its writes with is a harvester bound to the one
    workspace the session went to: replayed, it cannot purge, mint tokens, write elsewhere or
    write anything but a harvested session."""
    ws = await rig.workspace("/work/least-privilege")
    other = await rig.workspace("/work/elsewhere")
    session = conversation(rig.projects, "/work/least-privilege", "shearwater").write()

    # Positive control: the harvest itself works, session and candidates.
    harvested = (await rig.run())[session.session_id]
    assert harvested.outcome == "harvested" and "failed" not in harvested.detail
    assert len(await rig.candidates(ws)) == 2

    (sent,) = rig.proxy.called("WriteMemory")
    principal = json.loads(sent[PRINCIPAL_KEY])
    assert (principal["p"], principal["r"], principal["w"]) == ("harvest", "harvester", [ws])
    replayed = [(PRINCIPAL_KEY, sent[PRINCIPAL_KEY]), (SIGNATURE_KEY, sent[SIGNATURE_KEY])]
    harvested_shape: dict[str, Any] = {
        "kind": common_pb2.MEMORY_KIND_SESSION,
        "provenance": common_pb2.PROVENANCE_HARVESTED_TRANSCRIPT,
        "source_uri": "claude-code://session/replayed",
        "derivation": ipb.Derivation(source_fingerprint="1:replayed"),
    }
    async with grpc.aio.insecure_channel(rig.stack.ingest.target) as channel:
        ingest = igrpc.IngestServiceStub(channel)
        refused = {
            "PurgeMemory": ingest.PurgeMemory(
                ipb.PurgeMemoryRequest(workspace=ws, id=harvested.memory_id, reason="drill"), metadata=replayed
            ),
            "CreateToken": ingest.CreateToken(
                ipb.CreateTokenRequest(principal="mallory", role="admin"), metadata=replayed
            ),
            "WriteMemory elsewhere": ingest.WriteMemory(
                ipb.WriteMemoryRequest(workspace=other, content="not harvest's to write", **harvested_shape),
                metadata=replayed,
            ),
            "WriteMemory of a note": ingest.WriteMemory(
                ipb.WriteMemoryRequest(workspace=ws, content="a note is not harvest's to write"), metadata=replayed
            ),
        }
        for name, call in refused.items():
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call
            assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED, name
        # Controls: the same principal may write a harvested session in its own workspace, and an admin may purge.
        own = await ingest.WriteMemory(
            ipb.WriteMemoryRequest(workspace=ws, content="harvest's own workspace takes this", **harvested_shape),
            metadata=replayed,
        )
        assert own.memory.workspace_id == ws
        await ingest.PurgeMemory(
            ipb.PurgeMemoryRequest(workspace=ws, id=own.memory.id, reason="drill control", force=True),
            metadata=rig.admin,
        )
    # Nothing harvest sent ingest was signed as admin, nor as an agent.
    assert all(json.loads(m[PRINCIPAL_KEY])["r"] == "harvester" for _, m in rig.proxy.calls)
