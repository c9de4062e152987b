"""Drill 6: a harvest run outlives the server's connection age, and a summarizer call that keeps
the stream silent for minutes does not get the connection closed for `too_many_pings`.

The production figures are minutes (connection age 300 s, a 150 s silent summarizer call, client
keepalive pings every 30 s); here every one of them is divided by 30, so the same situations arise
in seconds: a connection age of 1 s (a run of ~4 s outlives it four times), a silent call of 5 s
(150 s / 30), client pings every 1 s (30 s / 30) and a server that accepts one every 0.33 s (10 s /
30; gRPC's default it replaces, 300 s, becomes 10 s). The harvest service, its channel (the
gateway's `open_channel`), ingest, search and PostgreSQL are real; only the summarizer is a fake
HTTP model that answers slowly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from mnemo.harvest.v1 import harvest_service_pb2 as hpb
from mnemo.harvest.v1 import harvest_service_pb2_grpc as hgrpc
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo.ingest.v1 import ingest_service_pb2_grpc as igrpc
from mnemo_embed import HashEmbedder
from mnemo_harvest.app import HarvestApp
from mnemo_harvest.settings import HarvestSettings, SummarizerSettings
from mnemo_platform.channels import open_channel
from mnemo_platform.connections import KEEPALIVE_S, MIN_PING_S, ConnectionPolicy
from mnemo_server.stack import Stack
from tests.harvest.agents import conversation
from tests.harvest.fake_llm import FakeLLM, fake_llm
from tests.helpers import Postgres, start_stack

SCALE = 30
HARVEST = hpb.DESCRIPTOR.services_by_name["HarvestService"]
ROOT = "/work/streams-drill"


@pytest.fixture
async def stack(postgres: Postgres, tmp_path: Path) -> AsyncIterator[Stack]:
    stack = await start_stack(
        await postgres.create_database("streams"), HashEmbedder(64), MNEMO_DATA_DIR=str(tmp_path / "data")
    )
    try:
        async with grpc.aio.insecure_channel(stack.ingest.target) as channel:
            await igrpc.IngestServiceStub(channel).AddWorkspace(ipb.AddWorkspaceRequest(root_path=ROOT))
        yield stack
    finally:
        await stack.stop()


async def _run(
    stack: Stack, projects: Path, llm: FakeLLM, connection: ConnectionPolicy, keepalive_s: float
) -> list[hpb.RunProgress]:
    """One harvest run through a harvest service with `connection`, asked over a channel pinging every `keepalive_s`."""
    app = HarvestApp(
        stack.dsn,
        "127.0.0.1:0",
        1.0,
        stack.config.database,
        HarvestSettings(agents="claude-code", claude_dir=str(projects), idle_s=600.0, interval_s=3600.0),
        SummarizerSettings(url=llm.url, model="slow-model", timeout_s=60.0),
        ingest_target=stack.ingest.target,
        search_target=stack.search.target,
        call_timeout_s=10.0,
    )
    app.connection = connection
    await app.start()
    channel = open_channel(app.target, HARVEST, 10.0, method_timeouts={"Run": 120.0}, keepalive_s=keepalive_s)
    try:
        return [p async for p in hgrpc.HarvestServiceStub(channel).Run(hpb.RunRequest())]
    finally:
        await channel.close()
        await app.stop()


def _sessions(tmp_path: Path, topics: list[str]) -> Path:
    projects = tmp_path / "claude" / "projects"
    for topic in topics:
        conversation(projects, ROOT, topic).write()
    return projects


async def test_a_run_longer_than_the_connection_age_finishes(stack: Stack, tmp_path: Path) -> None:
    projects = _sessions(tmp_path, ["auk", "dunlin", "knot"])
    with fake_llm() as llm:
        llm.delay_s = 1.3  # three sessions: a run of ~4 s on a connection told to go away after 1 s
        progress = await _run(stack, projects, llm, ConnectionPolicy(max_age_s=1.0), KEEPALIVE_S / SCALE)
    done = progress[-1]
    assert done.done and (done.harvested, done.failed) == (3, 0)
    assert len(llm.requests) == 3


async def test_a_run_cut_at_the_old_grace_is_the_failure_this_drill_prevents(stack: Stack, tmp_path: Path) -> None:
    """Negative control of the drill above: with a grace after the connection age (the servers used to
    set 30 s after 300 s; 0.5 s after 1 s here) the same run is cut before it ends."""
    projects = _sessions(tmp_path, ["sanderling", "whimbrel", "godwit"])
    with fake_llm() as llm:
        llm.delay_s = 1.3
        with pytest.raises(grpc.aio.AioRpcError) as cut:
            await _run(stack, projects, llm, ConnectionPolicy(max_age_s=1.0, max_age_grace_s=0.5), KEEPALIVE_S / SCALE)
    assert cut.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_a_silent_summarizer_call_keeps_its_stream(stack: Stack, tmp_path: Path) -> None:
    projects = _sessions(tmp_path, ["turnstone"])
    with fake_llm() as llm:
        llm.delay_s = 150 / SCALE  # the stream carries nothing for 5 s while pings come every 1 s
        progress = await _run(
            stack, projects, llm, ConnectionPolicy(min_ping_s=MIN_PING_S / SCALE), KEEPALIVE_S / SCALE
        )
    done = progress[-1]
    assert done.done and (done.harvested, done.failed) == (1, 0)
    assert progress[0].detail == ""  # summarized, not a fallback transcript


def test_clients_ping_no_faster_than_servers_accept() -> None:
    """The alignment the drills above rely on, in the shipped figures."""
    assert KEEPALIVE_S >= 2 * MIN_PING_S
    assert ConnectionPolicy().max_age_grace_s == 0  # streams under way are never cut by age
