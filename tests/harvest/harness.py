"""A stack whose harvest service reads a fake Claude Code home, and the calls tests drive it with."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import grpc

from mnemo.common.v1 import common_pb2
from mnemo.harvest.v1 import harvest_service_pb2 as hpb
from mnemo.harvest.v1 import harvest_service_pb2_grpc as hgrpc
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo.search.v1 import search_service_pb2 as spb
from mnemo_embed import HashEmbedder
from mnemo_server.stack import Stack
from tests.helpers import Clients, Postgres, start_stack


class Harvest:
    """A stack whose harvest service reads a fake Claude Code home, with clients to drive it."""

    def __init__(self, stack: Stack, home: Path) -> None:
        self.stack = stack
        self.home = home
        self.clients = Clients(stack)
        self._channel = grpc.aio.insecure_channel(stack.harvest.target)
        self.harvest = hgrpc.HarvestServiceStub(self._channel)

    @property
    def projects(self) -> Path:
        return self.home / "projects"

    async def run(self, ignore_idle: bool = False) -> list[hpb.RunProgress]:
        return [p async for p in self.harvest.Run(hpb.RunRequest(ignore_idle=ignore_idle))]

    async def outcome(self, session_id: str, ignore_idle: bool = False) -> hpb.RunProgress:
        for progress in await self.run(ignore_idle):
            if progress.session_id == session_id:
                return progress
        raise AssertionError(f"session {session_id} was not seen by the run")

    async def sessions_in(self, workspace: str) -> list[common_pb2.Memory]:
        listed = await self.clients.search.ListMemories(
            spb.ListMemoriesRequest(
                workspace=workspace, filter=common_pb2.MemoryFilter(kinds=[common_pb2.MEMORY_KIND_SESSION])
            )
        )
        return list(listed.memories)

    async def session_in(self, workspace: str) -> common_pb2.Memory:
        """The workspace's only session memory, with its content."""
        (listed,) = await self.sessions_in(workspace)
        return (await self.clients.search.GetMemory(spb.GetMemoryRequest(workspace=workspace, id=listed.id))).memory

    async def close(self) -> None:
        await self._channel.close()
        await self.clients.close()


async def start_harvest(postgres: Postgres, tmp: Path, dsn: str = "", **env: str) -> Harvest:
    """A stack harvesting `tmp/claude`, on a new database unless `dsn` names one (a restart)."""
    home = tmp / "claude"
    (home / "projects").mkdir(parents=True, exist_ok=True)
    stack = await start_stack(
        dsn or await postgres.create_database("harvest"),
        HashEmbedder(64),
        MNEMO_HARVEST_AGENTS="claude-code",
        MNEMO_HARVEST_CLAUDE_DIR=str(home / "projects"),
        MNEMO_HARVEST_IDLE_S="600",
        MNEMO_HARVEST_INTERVAL_S="3600",
        MNEMO_DATA_DIR=str(tmp / "data"),
        **env,
    )
    harvest = Harvest(stack, home)
    # The poller's first tick starts with the stack; wait it out (runs are serialised), so the
    # tests' own runs see the sessions they write.
    await harvest.run()
    return harvest


async def register(h: Harvest, *roots: str) -> list[str]:
    out = []
    for root in roots:
        out.append((await h.clients.ingest.AddWorkspace(ipb.AddWorkspaceRequest(root_path=root))).workspace.id)
    return out


async def source_row(h: Harvest, session_id: str) -> asyncpg.Record:
    conn = await asyncpg.connect(h.stack.dsn)
    try:
        return await conn.fetchrow("SELECT * FROM harvest_sources WHERE session_id = $1", session_id)
    finally:
        await conn.close()
