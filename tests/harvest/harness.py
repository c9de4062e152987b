"""A stack whose harvest service reads a fake Claude Code home, and the calls tests drive it with; or, remote, a
stack with auth on whose harvest service is off, and a harvester in this process (the laptop) that reads the
home and writes through the gateway over HTTP with a harvester token."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import httpx

from mnemo.common.v1 import common_pb2
from mnemo.harvest.v1 import harvest_service_pb2 as hpb
from mnemo.harvest.v1 import harvest_service_pb2_grpc as hgrpc
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo.ingest.v1 import ingest_service_pb2_grpc as ingest_grpc
from mnemo.search.v1 import search_service_pb2 as spb
from mnemo.search.v1 import search_service_pb2_grpc as search_grpc
from mnemo_embed import HashEmbedder
from mnemo_harvest.remote import RemoteHarvester, build_remote
from mnemo_platform import CallContext
from mnemo_server.stack import Stack
from tests.helpers import Clients, Postgres, start_stack

# The two places a harvester runs; tests parametrized over both run unchanged on each.
IN_CLUSTER, REMOTE = "in-cluster", "remote"


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

    remote = False

    async def run(self, ignore_idle: bool = False) -> list[hpb.RunProgress]:
        return [p async for p in self.harvest.Run(hpb.RunRequest(ignore_idle=ignore_idle))]

    async def registered(self, workspaces: list[str]) -> None:
        """Workspaces were registered (a remote harvester's token is bound to them)."""

    async def restart(self) -> Harvest:
        """The harvest service stopped and started again, on the same database."""
        await self.stack.harvest.stop()
        await self.stack.harvest.start()
        await self.close()
        return Harvest(self.stack, self.home)

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


class _Signed(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """Signs every call as an admin: with auth on, a service answers only a principal the gateway would send."""

    def _signed(self, details: Any) -> Any:
        admin = CallContext(principal="test-admin", request_id="", role="admin", workspaces=("*",))
        return details._replace(metadata=[*(details.metadata or ()), *admin.metadata()])

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._signed(details), request)

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._signed(details), request)


class AdminClients(Clients):
    """The raw gRPC surface of a stack with auth on, as an admin (the tests' view of what was stored)."""

    def __init__(self, stack: Stack) -> None:
        assert stack.ingest is not None and stack.search is not None
        self.stack = stack
        self._channels = [
            grpc.aio.insecure_channel(stack.ingest.target, interceptors=[_Signed()]),
            grpc.aio.insecure_channel(stack.search.target, interceptors=[_Signed()]),
        ]
        self.ingest = ingest_grpc.IngestServiceStub(self._channels[0])
        self.search = search_grpc.SearchServiceStub(self._channels[1])


class RemoteHarvest(Harvest):
    """The laptop's harvester, writing through the stack's gateway with a harvester token bound to the
    workspaces registered so far (made anew at each registration, as an operator would)."""

    remote = True

    def __init__(self, stack: Stack, home: Path, env: Mapping[str, str]) -> None:
        self.stack = stack
        self.home = home
        self.env = dict(env)
        self.clients = AdminClients(stack)
        self.workspaces: list[str] = []
        self.harvester: RemoteHarvester | None = None
        self.token = ""
        self.sent: list[str] = []

    async def registered(self, workspaces: list[str]) -> None:
        self.workspaces += workspaces
        self.token = await create_token(self.stack, "harvester", self.workspaces, "laptop-harvester")
        if self.harvester is not None:
            await self.harvester.aclose()
        # The state file and the archive stay on the laptop (its data dir), between tokens and restarts.
        self.harvester = build_remote(self.stack.base_url, self.token, self.env)
        self.harvester.gateway.http.event_hooks["request"].append(self._record)

    async def _record(self, request: httpx.Request) -> None:
        """What crosses the network from the laptop (a secret must not)."""
        self.sent.append(request.url.query.decode() + "\n" + request.content.decode())

    async def restart(self) -> Harvest:
        """The laptop's harvester started again: a new process, reading the same state file."""
        await self.registered([])
        return self

    async def run(self, ignore_idle: bool = False) -> list[hpb.RunProgress]:
        if self.harvester is None:
            await self.registered([])
        assert self.harvester is not None
        return [p async for p in self.harvester.run(ignore_idle=ignore_idle)]

    async def close(self) -> None:
        if self.harvester is not None:
            await self.harvester.aclose()
        await self.clients.close()


async def create_token(stack: Stack, role: str, workspaces: list[str], principal: str) -> str:
    """A token made over REST with the stack's bootstrap admin token."""
    admin = {"Authorization": f"Bearer {stack.bootstrap_token}"}
    async with httpx.AsyncClient(base_url=stack.base_url, headers=admin) as http:
        body = {"principal": principal, "role": role, "workspaces": workspaces or ["global"]}
        made = await http.post("/api/v1/tokens", json=body)
        assert made.status_code == 201, made.text
        return str(made.json()["secret"])


async def start_harvest(postgres: Postgres, tmp: Path, dsn: str = "", where: str = IN_CLUSTER, **env: str) -> Harvest:
    """A stack harvesting `tmp/claude`, on a new database unless `dsn` names one (a restart); `where` is
    REMOTE for the laptop's harvester through the gateway (auth on), whose data dir is `tmp/data`."""
    home = tmp / "claude"
    (home / "projects").mkdir(parents=True, exist_ok=True)
    if where == REMOTE:
        laptop = {
            "MNEMO_HARVEST_AGENTS": "claude-code",
            "MNEMO_HARVEST_CLAUDE_DIR": str(home / "projects"),
            "MNEMO_HARVEST_IDLE_S": "600",
            "MNEMO_DATA_DIR": str(tmp / "data"),
            **env,
        }
        stack = await start_stack(
            dsn or await postgres.create_database("harvest"),
            HashEmbedder(64),
            MNEMO_AUTH="on",
            MNEMO_DATA_DIR=str(tmp / "server"),
        )
        return RemoteHarvest(stack, home, laptop)
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
    await h.registered(out)
    return out


async def source_row(h: Harvest, session_id: str) -> Mapping[str, Any]:
    """What the harvester knows of a session: harvest_sources in-cluster, the laptop's state file remote."""
    if isinstance(h, RemoteHarvest):
        assert h.harvester is not None
        known = await h.harvester.engine.book.known()
        (row,) = [row for (_, key), row in known.items() if key == session_id]
        return row
    conn = await asyncpg.connect(h.stack.dsn)
    try:
        return await conn.fetchrow("SELECT * FROM harvest_sources WHERE session_id = $1", session_id)
    finally:
        await conn.close()
