"""Isolation matrix: every read path, for every ordered pair of five workspaces, over REST, MCP and gRPC."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import httpx
import pytest
from google.protobuf import timestamp_pb2

from mnemo.common.v1 import common_pb2
from mnemo.harvest.v1 import harvest_service_pb2 as hpb
from mnemo.harvest.v1 import harvest_service_pb2_grpc as hgrpc
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo.ingest.v1 import ingest_service_pb2_grpc as igrpc
from mnemo.search.v1 import search_service_pb2 as spb
from mnemo.search.v1 import search_service_pb2_grpc as sgrpc
from mnemo_embed import HashEmbedder
from mnemo_platform import CallContext
from mnemo_server.stack import Stack
from tests.e2e.ui import UiClient
from tests.harvest.agents import conversation
from tests.helpers import Postgres, eventually, mcp_client, start_stack

N = 5
# Words used nowhere else: each workspace's text carries exactly one of them.
KEYWORDS = ("quokka", "narwhal", "axolotl", "pangolin", "okapi")
GLOBAL_KEYWORD = "heron"
MISSING_WORD = "zzyzx"
SHARED_TAG = "shared-tag"
# A session in a directory no workspace owns: only an admin may see it.
UNPLACED_CWD = "/iso/nowhere"
UNPLACED_TOPIC = "lemming"
PAST = "2020-06-01T00:00:00Z"
PAIRS = [(i, j) for i in range(N) for j in range(N) if i != j]
PAIR_IDS = [f"w{i}-reads-w{j}" for i, j in PAIRS]
CALLERS = list(range(N))
CALLER_IDS = [f"w{i}" for i in CALLERS]
MODES = ("hybrid", "lexical", "semantic")
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Walled:
    """One workspace's material and its agent's token."""

    index: int
    id: str
    name: str
    root: str
    keyword: str
    tag: str
    principal: str
    token: str
    token_id: str
    memory: dict[str, str] = field(default_factory=dict)
    """memory maps a role (note, decision, updated, superseded, successor, retracted, deleted) to its id."""
    session_id: str = ""
    reviewer: str = ""
    """reviewer is the secret of a reviewer token bound to this workspace alone."""
    proposal: str = ""
    """proposal is the id of a proposal its agent opened (to confirm its note)."""
    ids: set[str] = field(default_factory=set)
    """ids are every memory of the workspace, hidden and harvested ones included."""

    def content_markers(self) -> list[str]:
        """What must never reach another workspace, not even in an error message."""
        return [self.keyword, self.principal, self.token_id, self.session_id, self.proposal, *sorted(self.ids)]

    def identity_markers(self) -> list[str]:
        """The workspace's own names: absent from every other workspace's reads (a 403 may echo them)."""
        return [self.id, self.name, self.root]

    def refs(self, caller: Walled) -> list[str]:
        """Every way to name this workspace: id, name, root, a path under it, a `..` escape, padding."""
        return [
            self.id,
            self.name,
            self.root,
            f"{self.root}/src/app",
            f"{caller.root}/../{Path(self.root).name}",
            f"  {self.name} ",
        ]


@dataclass
class Matrix:
    stack: Stack
    http: httpx.AsyncClient
    admin: str
    search: sgrpc.SearchServiceStub
    harvest: hgrpc.HarvestServiceStub
    ingest: igrpc.IngestServiceStub
    walls: list[Walled] = field(default_factory=list)
    global_note: str = ""
    t_start: str = ""
    t_mid: str = ""
    t_end: str = ""
    unknown_id_answers: dict[int, dict[str, tuple[int, str, str]]] = field(default_factory=dict)

    async def rest(self, token: str, method: str, path: str, body: Any = None, params: Any = None) -> httpx.Response:
        return await self.http.request(
            method, path, json=body, params=params, headers={"Authorization": f"Bearer {token}"}
        )

    async def ok(self, token: str, method: str, path: str, body: Any = None, params: Any = None) -> Any:
        response = await self.rest(token, method, path, body, params)
        assert response.status_code in (200, 201), (method, path, response.text)
        return response.json()

    def assert_clean(self, caller: int, text: str, where: str, identity: bool = True) -> None:
        """No marker of any other workspace (or of the unplaced session) is in what `caller` got back."""
        markers = [UNPLACED_CWD, UNPLACED_TOPIC]
        for other in self.walls:
            if other.index != caller:
                markers += other.content_markers() + (other.identity_markers() if identity else [])
        leaked = [marker for marker in markers if marker and marker in text]
        assert not leaked, f"{where}: w{caller} got another workspace's {leaked}: {text[:2000]}"


def _now() -> str:
    return datetime.now(UTC).isoformat()


def agent_metadata(wall: Walled) -> list[tuple[str, str]]:
    """The signed principal the gateway forwards for this workspace's agent token."""
    ctx = CallContext(
        principal=wall.principal,
        request_id=uuid.uuid4().hex,
        role="agent",
        workspaces=(wall.id,),
        token_id=wall.token_id,
    )
    return ctx.metadata()


# -- the stack and its seed -------------------------------------------------------------------------
# Each workspace holds its own keyword, tags, a decision, an updated memory (two versions), a
# superseded, a retracted and a deleted one (a tombstone) and a harvested session, so that every
# read path has something of each workspace to leak; `global` holds one note every agent reads.
# For every ordered pair (caller, target), naming the target is refused, and the caller's own reads
# find its own material (the positive control) and never any of the target's. The read RPCs are
# enumerated from the proto descriptors, so a new read path without a case fails the suite.


async def _seed(m: Matrix, projects: Path) -> None:
    m.t_start = _now()
    for i, keyword in enumerate(KEYWORDS):
        name, root = f"iso-ws{i}", f"/iso/ws{i}"
        made = await m.ok(m.admin, "POST", "/api/v1/workspaces", {"path": root, "name": name})
        token = await m.ok(
            m.admin,
            "POST",
            "/api/v1/tokens",
            {"principal": f"agent-ws{i}", "role": "agent", "workspaces": [name]},
        )
        assert token["token"]["workspaces"] == [made["workspace"]["id"]]
        m.walls.append(
            Walled(
                index=i,
                id=made["workspace"]["id"],
                name=name,
                root=root,
                keyword=keyword,
                tag=f"tag-{keyword}",
                principal=f"agent-ws{i}",
                token=token["secret"],
                token_id=token["token"]["id"],
            )
        )
    shared = await m.ok(
        m.admin,
        "POST",
        "/api/v1/memories",
        {
            "workspace": "global",
            "content": f"Every project names its {GLOBAL_KEYWORD} queues by team.",
            "tags": [SHARED_TAG],
        },
    )
    m.global_note = shared["memory"]["id"]

    async def write(wall: Walled, role: str, content: str, **fields: Any) -> None:
        # Written by the workspace's own agent token, into its only workspace (no workspace named).
        written = await m.ok(wall.token, "POST", "/api/v1/memories", {"content": content, **fields})
        assert written["memory"]["workspace_id"] == wall.id
        wall.memory[role] = written["memory"]["id"]

    for w in m.walls:
        k = w.keyword
        await write(w, "note", f"The {k} service caches build artefacts in a {k} bucket.", tags=[w.tag, SHARED_TAG])
        await write(
            w,
            "decision",
            f"Decision: deploy {k} with blue-green releases.",
            kind="decision",
            tags=[w.tag, SHARED_TAG],
            valid_from="2020-01-01T00:00:00Z",
        )
        await write(w, "updated", f"{k} draft: the retry budget is three attempts.")
        await write(w, "superseded", f"{k} old belief: builds run on Jenkins.")
        await write(w, "retracted", f"{k} hunch: the flaky test is a race.")
        await write(w, "deleted", f"{k} note to forget at once.", source_uri=f"file:///iso/{k}/forget.md")
    for w in m.walls:
        reviewer = await m.ok(
            m.admin,
            "POST",
            "/api/v1/tokens",
            {"principal": f"reviewer-ws{w.index}", "role": "reviewer", "workspaces": [w.name]},
        )
        w.reviewer = reviewer["secret"]
        # The agent proposes in its only workspace (none named); only a reviewer decides. Over REST
        # the source is `human` whatever the token (MCP says `agent`).
        proposed = await m.ok(
            w.token,
            "POST",
            "/api/v1/proposals",
            {"kind": "confirm", "memory_ids": [w.memory["note"]], "reason": f"the {w.keyword} note checks out"},
        )
        assert proposed["proposal"]["workspace_id"] == w.id
        w.proposal = proposed["proposal"]["id"]
    await asyncio.sleep(0.05)
    m.t_mid = _now()
    await asyncio.sleep(0.05)
    for w in m.walls:
        k, mem = w.keyword, w.memory
        await m.ok(w.token, "PATCH", f"/api/v1/memories/{mem['updated']}", {"content": f"{k} final: five attempts."})
        replaced = await m.ok(
            w.token,
            "POST",
            f"/api/v1/memories/{mem['superseded']}/supersede",
            {"content": f"{k} new belief: builds run on GitHub Actions.", "reason": "migrated"},
        )
        mem["successor"] = replaced["successor"]["id"]
        await m.ok(w.token, "POST", f"/api/v1/memories/{mem['retracted']}/retract", {"reason": "disproved"})
        await m.ok(w.token, "DELETE", f"/api/v1/memories/{mem['deleted']}", params={"reason": "noise"})

    # One finished Claude Code session per workspace, about its own keyword, and one nobody owns.
    sessions = {w.index: conversation(projects, w.root, w.keyword).write() for w in m.walls}
    conversation(projects, UNPLACED_CWD, UNPLACED_TOPIC).write()
    run = await m.rest(m.admin, "POST", "/api/v1/harvest/run", {})
    assert run.status_code == 200, run.text
    outcomes = {line["session_id"]: line for line in map(json.loads, run.text.splitlines()) if not line.get("done")}
    for w in m.walls:
        w.session_id = sessions[w.index].session_id
        assert outcomes[w.session_id]["outcome"] == "harvested", outcomes

    async def embedded() -> bool:
        status = await m.ok(m.admin, "GET", "/api/v1/status")
        return status["chunks_pending"] == 0 and status["chunks_embedded"] > 0

    await eventually(embedded, timeout=60)
    for w in m.walls:
        listed = await m.ok(
            m.admin, "GET", "/api/v1/memories", params={"workspace": w.id, "include_history": "true", "page_size": 100}
        )
        w.ids = {item["id"] for item in listed["memories"]} | {w.memory["deleted"]}
        assert {item["workspace_id"] for item in listed["memories"]} == {w.id, "global"}
        w.ids.discard(m.global_note)
        w.memory["session"] = next(item["id"] for item in listed["memories"] if item["kind"] == "session")
        assert set(w.memory.values()) <= w.ids
    m.t_end = _now()


@pytest.fixture(scope="module")
async def matrix(postgres: Postgres, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Matrix]:
    home = tmp_path_factory.mktemp("isolation")
    projects = home / "claude" / "projects"
    projects.mkdir(parents=True)
    stack = await start_stack(
        await postgres.create_database("isolation"),
        HashEmbedder(64),
        MNEMO_AUTH="on",
        MNEMO_RATE_LIMIT_PER_MIN="1000000",
        MNEMO_HARVEST_AGENTS="claude-code",
        MNEMO_HARVEST_CLAUDE_DIR=str(projects),
        MNEMO_HARVEST_IDLE_S="600",
        MNEMO_HARVEST_INTERVAL_S="3600",
        MNEMO_DATA_DIR=str(home / "data"),
    )
    search_channel = grpc.aio.insecure_channel(stack.search.target)
    harvest_channel = grpc.aio.insecure_channel(stack.harvest.target)
    ingest_channel = grpc.aio.insecure_channel(stack.ingest.target)
    try:
        async with httpx.AsyncClient(base_url=stack.base_url, timeout=60) as http:
            m = Matrix(
                stack,
                http,
                stack.bootstrap_token,
                sgrpc.SearchServiceStub(search_channel),
                hgrpc.HarvestServiceStub(harvest_channel),
                igrpc.IngestServiceStub(ingest_channel),
            )
            await _seed(m, projects)
            yield m
    finally:
        await search_channel.close()
        await harvest_channel.close()
        await ingest_channel.close()
        await stack.stop()


async def gather_all(calls: list[Callable[[], Awaitable[Any]]], width: int = 12) -> list[Any]:
    """Runs the calls a few at a time (the machine is small), results in the calls' order."""
    out: list[Any] = []
    for start in range(0, len(calls), width):
        out += await asyncio.gather(*(call() for call in calls[start : start + width]))
    return out


def _error(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()
    return response.status_code, body["error"]["code"], body["error"]["message"]


def _tool_error(result: Any) -> str:
    """A failed tool call's message, without the MCP server's "Error executing tool x: " prefix."""
    assert result.is_error, result.content[0].text[:500]
    return re.sub(r"^Error executing tool \w+: ", "", result.content[0].text)


def _tool_json(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


# -- which read paths exist, and the cases that cover each --------------------------------------------

SEARCH = "mnemo.search.v1.SearchService"
HARVEST = "mnemo.harvest.v1.HarvestService"
INGEST = "mnemo.ingest.v1.IngestService"
PROTO_MODULES = (spb, ipb, hpb)
# Every RPC of these services reads (SearchService) or reads unless listed in NOT_READS.
READ_SERVICES = {SEARCH, HARVEST}
NOT_READS = {f"{HARVEST}.Run": "admin only: starts a harvest of every agent session on the machine"}
# In any other service (ingest writes), a method named like a read is a read and needs a case.
READ_VERBS = re.compile(r"^(Get|List|Search|Status|Verify|Resolve|Read|Find|Export|Describe|Count|Watch|Authenticate)")

READ_RPC_CASES: dict[str, tuple[str, ...]] = {
    f"{SEARCH}.Search": (
        "test_search_matrix",
        "test_search_filter_product",
        "test_naming_another_workspace_is_refused",
        "test_mcp_walls",
        "test_grpc_walls",
        "test_global_is_readable_not_writable",
        "test_ui_walls",
    ),
    f"{SEARCH}.GetContext": (
        "test_context_matrix",
        "test_naming_another_workspace_is_refused",
        "test_mcp_walls",
        "test_grpc_walls",
    ),
    f"{SEARCH}.GetMemory": (
        "test_foreign_ids_through_own_workspace",
        "test_naming_another_workspace_is_refused",
        "test_own_history_and_as_of",
        "test_mcp_walls",
        "test_grpc_walls",
        "test_ui_walls",
    ),
    f"{SEARCH}.ListMemories": ("test_list_matrix", "test_naming_another_workspace_is_refused", "test_grpc_walls"),
    f"{SEARCH}.ListWorkspaces": ("test_workspaces_and_status", "test_grpc_walls", "test_ui_walls"),
    # No route of its own: the gateway and the harvester resolve through it.
    f"{SEARCH}.ResolveWorkspace": ("test_grpc_walls",),
    f"{SEARCH}.GetStatus": (
        "test_workspaces_and_status",
        "test_naming_another_workspace_is_refused",
        "test_mcp_walls",
        "test_grpc_walls",
    ),
    f"{SEARCH}.GetHistory": (
        "test_own_history_and_as_of",
        "test_foreign_ids_through_own_workspace",
        "test_naming_another_workspace_is_refused",
        "test_mcp_walls",
        "test_grpc_walls",
        "test_ui_walls",
    ),
    f"{SEARCH}.ListAuditEvents": (
        "test_own_audit_log",
        "test_global_audit_chain_names_no_other_workspace",
        "test_foreign_ids_through_own_workspace",
        "test_naming_another_workspace_is_refused",
        "test_grpc_walls",
        "test_ui_walls",
    ),
    f"{SEARCH}.VerifyAudit": ("test_own_audit_log", "test_naming_another_workspace_is_refused", "test_grpc_walls"),
    f"{SEARCH}.Authenticate": (
        "test_token_rpcs_are_admin_only",
        "test_unknown_or_malformed_tokens_are_unauthenticated",
        "test_a_revoked_token_reads_nothing",
        "test_grpc_walls",
    ),
    f"{SEARCH}.ListTokens": ("test_token_rpcs_are_admin_only", "test_grpc_walls", "test_ui_walls"),
    f"{SEARCH}.ExportMemories": ("test_token_rpcs_are_admin_only", "test_grpc_walls"),
    f"{SEARCH}.ListProposals": ("test_proposal_walls", "test_grpc_walls", "test_ui_walls"),
    f"{SEARCH}.GetProposal": ("test_proposal_walls", "test_grpc_walls", "test_ui_walls"),
    # The gateway's fallback when search does not answer (tests/faults/test_search_down_auth.py).
    f"{INGEST}.Authenticate": ("test_grpc_walls",),
    f"{HARVEST}.Status": ("test_harvest_status_and_sources", "test_mcp_walls", "test_grpc_walls", "test_ui_walls"),
    f"{HARVEST}.ListSources": ("test_harvest_status_and_sources", "test_grpc_walls", "test_ui_walls"),
}

# How each read RPC answers an agent: refuses another workspace's name (scoped), filters its
# answer to the token's workspaces (filtered), or refuses every agent (admin).
GRPC_KINDS = {
    f"{SEARCH}.Search": "scoped",
    f"{SEARCH}.GetContext": "scoped",
    f"{SEARCH}.GetMemory": "scoped",
    f"{SEARCH}.ListMemories": "scoped",
    f"{SEARCH}.ListWorkspaces": "filtered",
    f"{SEARCH}.ResolveWorkspace": "scoped",
    f"{SEARCH}.GetStatus": "scoped",
    f"{SEARCH}.GetHistory": "scoped",
    f"{SEARCH}.ListAuditEvents": "scoped",
    f"{SEARCH}.VerifyAudit": "scoped",
    f"{SEARCH}.Authenticate": "admin",
    f"{INGEST}.Authenticate": "admin",
    f"{SEARCH}.ListTokens": "admin",
    f"{SEARCH}.ExportMemories": "admin",
    # Reviewer and up: an agent is refused whatever it names; test_proposal_walls holds reviewers to the wall.
    f"{SEARCH}.ListProposals": "admin",
    f"{SEARCH}.GetProposal": "admin",
    f"{HARVEST}.Status": "filtered",
    f"{HARVEST}.ListSources": "filtered",
}

# Every REST read route (the GETs, and search) and the MCP read tools, each exercised below.
REST_READS = {
    "POST /api/v1/search",
    "GET /api/v1/memories",
    "GET /api/v1/memories/{memory_id}",
    "GET /api/v1/memories/{memory_id}/history",
    "GET /api/v1/audit",
    "GET /api/v1/audit/verify",
    "GET /api/v1/status",
    "GET /api/v1/workspaces",
    "GET /api/v1/harvest/status",
    "GET /api/v1/harvest/sources",
    "GET /api/v1/harvest/placement",
    "GET /api/v1/tokens",
    "GET /api/v1/context",
    "GET /api/v1/export",
    "GET /api/v1/proposals",
    "GET /api/v1/proposals/{proposal_id}",
}
MCP_READS = {
    "memory_search",
    "memory_get",
    "memory_history",
    "memory_status",
    "memory_harvest_status",
    "memory_context",
}
MCP_READ_NAME = re.compile(r"(search|get|history|status|list|find|read|audit|context)")


def read_rpcs() -> set[str]:
    """The read RPCs, as the generated descriptors declare them."""
    reads = set()
    for module in PROTO_MODULES:
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                if method.full_name in NOT_READS:
                    continue
                if service.full_name in READ_SERVICES or READ_VERBS.match(method.name):
                    reads.add(method.full_name)
    return reads


async def test_every_read_path_has_cases(matrix: Matrix) -> None:
    assert read_rpcs() == set(READ_RPC_CASES) == set(GRPC_KINDS)
    for rpc, cases in READ_RPC_CASES.items():
        for case in cases:
            assert case.startswith("test_") and callable(globals().get(case)), (rpc, case)
    # Every service a .proto declares is among the descriptors enumerated above.
    declared = {
        f"mnemo.{path.parts[-3]}.v1.{name}"
        for path in (ROOT / "protos" / "mnemo").rglob("*.proto")
        for name in re.findall(r"^service (\w+)", path.read_text(), re.MULTILINE)
    }
    assert declared == {s.full_name for module in PROTO_MODULES for s in module.DESCRIPTOR.services_by_name.values()}
    # Every REST GET (and search) is a case; so is every MCP tool named like a read.
    openapi = (await matrix.http.get("/api/v1/openapi.json")).json()
    routes = {
        f"{verb.upper()} {path}"
        for path, operations in openapi["paths"].items()
        for verb in operations
        if verb == "get" or path == "/api/v1/search"
    }
    assert routes == REST_READS
    async with mcp_client(matrix.stack, token=matrix.walls[0].token) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
    assert {t for t in tools if MCP_READ_NAME.search(t)} == MCP_READS
    # Positive control: the enumeration sees the RPCs it should.
    assert f"{SEARCH}.Search" in read_rpcs() and f"{HARVEST}.Run" not in read_rpcs()


# -- gRPC: every read RPC, exactly as the gateway would call it for an agent token --------------------


def _grpc_probes(m: Matrix, wall: Walled) -> dict[str, tuple[Callable[..., Any], Any, Callable[[Any], bool]]]:
    """Each read RPC's call naming `wall`, and what its answer holds when `wall` is the caller's own."""
    s, h = m.search, m.harvest
    ws, mem = wall.id, wall.memory
    claude = lambda r: next(a for a in r.agents if a.agent == "claude-code")  # noqa: E731
    return {
        f"{SEARCH}.Search": (
            s.Search,
            spb.SearchRequest(workspace=ws, query=wall.keyword, limit=100),
            lambda r: mem["decision"] in {hit.memory.id for hit in r.hits},
        ),
        f"{SEARCH}.GetContext": (
            s.GetContext,
            spb.GetContextRequest(workspace=ws, task=wall.keyword),
            lambda r: {mem["decision"], mem["session"]} <= {i.memory.id for p in r.sections for i in p.items},
        ),
        f"{SEARCH}.GetMemory": (
            s.GetMemory,
            spb.GetMemoryRequest(workspace=ws, id=mem["note"]),
            lambda r: wall.keyword in r.memory.content,
        ),
        f"{SEARCH}.ListMemories": (
            s.ListMemories,
            spb.ListMemoriesRequest(workspace=ws, page_size=100),
            lambda r: mem["decision"] in {x.id for x in r.memories},
        ),
        f"{SEARCH}.ListWorkspaces": (
            s.ListWorkspaces,
            spb.ListWorkspacesRequest(),
            lambda r: {w.id for w in r.workspaces} == {ws, "global"},
        ),
        f"{SEARCH}.ResolveWorkspace": (
            s.ResolveWorkspace,
            spb.ResolveWorkspaceRequest(workspace=f"{wall.root}/src"),
            lambda r: r.workspace.id == ws,
        ),
        f"{SEARCH}.GetStatus": (
            s.GetStatus,
            spb.GetStatusRequest(workspace=ws),
            lambda r: r.workspace.id == ws and r.memories > 0,
        ),
        f"{SEARCH}.GetHistory": (
            s.GetHistory,
            spb.GetHistoryRequest(workspace=ws, id=mem["updated"]),
            lambda r: [v.version for v in r.versions] == [1, 2],
        ),
        f"{SEARCH}.ListAuditEvents": (
            s.ListAuditEvents,
            spb.ListAuditEventsRequest(workspace=ws, page_size=100),
            lambda r: bool(r.events) and {e.workspace_id for e in r.events} == {ws},
        ),
        f"{SEARCH}.VerifyAudit": (
            s.VerifyAudit,
            spb.VerifyAuditRequest(workspace=ws),
            lambda r: r.ok and r.workspaces_checked == 1,
        ),
        f"{SEARCH}.Authenticate": (s.Authenticate, spb.AuthenticateRequest(token=wall.token), lambda r: False),
        f"{SEARCH}.ListTokens": (s.ListTokens, spb.ListTokensRequest(), lambda r: False),
        f"{INGEST}.Authenticate": (
            m.ingest.Authenticate,
            ipb.AuthenticateRequest(token=wall.token),
            lambda r: False,
        ),
        # A streaming RPC: the probe reads the whole stream, where the refusal comes.
        f"{SEARCH}.ExportMemories": (_exported(s), spb.ExportMemoriesRequest(workspace=ws), lambda r: False),
        f"{SEARCH}.ListProposals": (s.ListProposals, spb.ListProposalsRequest(workspace=ws), lambda r: False),
        f"{SEARCH}.GetProposal": (
            s.GetProposal,
            spb.GetProposalRequest(workspace=ws, id=wall.proposal),
            lambda r: False,
        ),
        f"{HARVEST}.Status": (
            h.Status,
            hpb.StatusRequest(),
            lambda r: claude(r).sources_seen == 1 and claude(r).harvested == 1 and not r.unregistered,
        ),
        f"{HARVEST}.ListSources": (
            h.ListSources,
            hpb.ListSourcesRequest(page_size=500),
            lambda r: [x.session_id for x in r.sources] == [wall.session_id],
        ),
    }


def _exported(search: Any) -> Any:
    """ExportMemories as a unary call: its records, read to the end (a refusal comes with the first read)."""

    async def call(request: spb.ExportMemoriesRequest, metadata: Any = None) -> list[Any]:
        return [record async for record in search.ExportMemories(request, metadata=metadata)]

    return call


@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
async def test_grpc_walls(matrix: Matrix, pair: tuple[int, int]) -> None:
    m = matrix
    caller, target = m.walls[pair[0]], m.walls[pair[1]]
    foreign, own = _grpc_probes(m, target), _grpc_probes(m, caller)
    assert set(foreign) == set(GRPC_KINDS)
    for rpc, kind in GRPC_KINDS.items():
        for probe, mine in ((foreign[rpc], False), (own[rpc], True)):
            method, request, holds = probe
            if kind == "filtered":  # nothing to name: whoever is asked about, the answer is the caller's
                holds = own[rpc][2]
            where = f"{rpc} naming {'its own' if mine else f'w{target.index}'} workspace"
            if kind == "admin" or (kind == "scoped" and not mine):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await method(request, metadata=agent_metadata(caller))
                assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED, where
                m.assert_clean(caller.index, refused.value.details() or "", where, identity=False)
                continue
            response = await method(request, metadata=agent_metadata(caller))
            m.assert_clean(caller.index, str(response), where)
            assert holds(response), where  # positive control: the caller's own material is there


# -- REST: naming another workspace, by every kind of reference, on every read route ------------------


def _naming_calls(m: Matrix, target: Walled, refs: list[str]) -> list[tuple[str, str, Any, Any]]:
    """Every read route naming `target`: every reference form on search, the first two on list and get,
    the first on the rest (the gRPC walls name each RPC's workspace by id too)."""
    mem = target.memory
    q = {"workspace": refs[0]}
    calls: list[tuple[str, str, Any, Any]] = [
        *(("POST", "/api/v1/search", {"query": target.keyword, "mode": "hybrid", "workspace": r}, None) for r in refs),
        *(("GET", "/api/v1/memories", None, {"workspace": r}) for r in refs[:2]),
        *(("GET", f"/api/v1/memories/{mem['note']}", None, {"workspace": r}) for r in refs[:2]),
        *(("POST", "/api/v1/search", {"query": target.keyword, "mode": mode, **q}, None) for mode in MODES[1:]),
    ]
    everything = {
        "query": f"{target.keyword} {MISSING_WORD}",
        "kinds": ["decision"],
        "tags": [target.tag],
        "include_history": True,
        "as_of": m.t_end,
        "valid_at": PAST,
    }
    return [
        *calls,
        ("POST", "/api/v1/search", {**everything, **q}, None),
        ("GET", "/api/v1/memories", None, {**q, "include_history": "true", "as_of": m.t_mid, "tag": target.tag}),
        ("GET", f"/api/v1/memories/{mem['superseded']}", None, {**q, "include_history": "true", "as_of": m.t_mid}),
        ("GET", f"/api/v1/memories/{mem['updated']}/history", None, q),
        ("GET", "/api/v1/audit", None, q),
        ("GET", "/api/v1/audit", None, {**q, "memory": mem["deleted"]}),
        ("GET", "/api/v1/audit/verify", None, q),
        ("GET", "/api/v1/status", None, q),
        *(("GET", "/api/v1/context", None, {"workspace": r}) for r in refs),
        ("GET", "/api/v1/context", None, {**q, "task": target.keyword, "budget": 16000, "since": PAST}),
    ]


@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
async def test_naming_another_workspace_is_refused(matrix: Matrix, pair: tuple[int, int]) -> None:
    m = matrix
    caller, target = m.walls[pair[0]], m.walls[pair[1]]
    refused = _naming_calls(m, target, target.refs(caller))
    # Positive control: naming its own workspace (by a path under its root), the caller reads its own.
    own = [
        ("POST", "/api/v1/search", {"query": caller.keyword, "workspace": f"{caller.root}/src"}, None),
        ("GET", f"/api/v1/memories/{caller.memory['note']}", None, {"workspace": f"{caller.root}/src"}),
        ("GET", f"/api/v1/memories/{caller.memory['updated']}/history", None, {"workspace": caller.root}),
        ("GET", "/api/v1/context", None, {"workspace": f"{caller.root}/src", "task": caller.keyword}),
    ]
    answers = await gather_all([lambda c=c: m.rest(caller.token, *c) for c in refused + own])
    for call, response in zip(refused, answers, strict=False):
        status, code, message = _error(response)
        assert (status, code) == (403, "PERMISSION_DENIED"), (call, response.text)
        m.assert_clean(caller.index, message, f"{call}", identity=False)
    found, note, history, packet = (r.json() for r in answers[len(refused) :])
    assert caller.memory["decision"] in {r["id"] for r in found["results"]}
    assert caller.keyword in note["content"] and len(history["versions"]) == 2
    assert caller.memory["decision"] in _packet_ids(packet)
    m.assert_clean(caller.index, json.dumps([found, note, history, packet]), "own reads")


# -- REST: another workspace's memory ids, asked for through the caller's own workspace ---------------

FOREIGN_ROLES = ("note", "superseded", "deleted", "session")


def _id_reads(memory_id: str) -> list[tuple[str, str, Any, Any]]:
    return [
        ("GET", f"/api/v1/memories/{memory_id}", None, None),
        ("GET", f"/api/v1/memories/{memory_id}", None, {"include_history": "true", "as_of": PAST}),
        ("GET", f"/api/v1/memories/{memory_id}/history", None, None),
        ("GET", "/api/v1/audit", None, {"memory": memory_id}),
    ]


def _id_writes(memory_id: str) -> list[tuple[str, str, Any, Any]]:
    return [
        ("PATCH", f"/api/v1/memories/{memory_id}", {"content": "overwritten from elsewhere"}, None),
        ("POST", f"/api/v1/memories/{memory_id}/supersede", {"content": "superseded from elsewhere"}, None),
        ("DELETE", f"/api/v1/memories/{memory_id}", None, {"reason": "deleted from elsewhere"}),
        ("POST", f"/api/v1/memories/{memory_id}/feedback", {"vote": "harmful", "note": "voted from elsewhere"}, None),
    ]


def _route_key(call: tuple[str, str, Any, Any], memory_id: str) -> str:
    return f"{call[0]} {call[1]} {call[3]}".replace(memory_id, "<id>")


async def _unknown_id_answers(m: Matrix, caller: Walled) -> dict[str, tuple[int, str, str]]:
    """What each id route answers the caller for an id that never existed (computed once per caller)."""
    if caller.index not in m.unknown_id_answers:
        unknown = str(uuid.uuid4())
        calls = _id_reads(unknown) + _id_writes(unknown)
        answers = await gather_all([lambda c=c: m.rest(caller.token, *c) for c in calls])
        m.unknown_id_answers[caller.index] = {
            _route_key(call, unknown): (_error(r)[0], _error(r)[1], _error(r)[2].replace(unknown, "<id>"))
            for call, r in zip(calls, answers, strict=True)
        }
        assert {a[0] for a in m.unknown_id_answers[caller.index].values()} == {404}
    return m.unknown_id_answers[caller.index]


@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
async def test_foreign_ids_through_own_workspace(matrix: Matrix, pair: tuple[int, int]) -> None:
    """Another workspace's ids, live, hidden, tombstoned or harvested, read (or changed) as the caller's
    own: the answer is the one a random id gets, word for word, so it tells nothing about them."""
    m = matrix
    caller, target = m.walls[pair[0]], m.walls[pair[1]]
    calls = [(target.memory[role], c) for role in FOREIGN_ROLES for c in _id_reads(target.memory[role])]
    calls += [(target.memory["note"], c) for c in _id_writes(target.memory["note"])]
    # Naming the target instead is refused before anything is looked up, writes included.
    named = [
        (method, path, {**body, "workspace": target.name} if body else None, {**(params or {}), "workspace": target.id})
        for method, path, body, params in _id_writes(target.memory["note"])
    ]
    baseline = await _unknown_id_answers(m, caller)
    answers = await gather_all(
        [lambda c=c: m.rest(caller.token, *c[1]) for c in calls] + [lambda c=c: m.rest(caller.token, *c) for c in named]
    )
    for (memory_id, call), response in zip(calls, answers, strict=False):
        status, code, message = _error(response)
        assert (status, code, message.replace(memory_id, "<id>")) == baseline[_route_key(call, memory_id)], call
        m.assert_clean(caller.index, message.replace(memory_id, ""), f"{call}")
    for call, response in zip(named, answers[len(calls) :], strict=True):
        assert _error(response)[:2] == (403, "PERMISSION_DENIED"), call
    # Positive control: the target's memories are untouched, and its own agent still reads them.
    note = await m.ok(target.token, "GET", f"/api/v1/memories/{target.memory['note']}")
    assert (note["version"], note["status"]) == (1, "active") and target.keyword in note["content"]
    gone = await m.rest(target.token, "GET", f"/api/v1/memories/{target.memory['deleted']}")
    assert "was deleted" in _error(gone)[2]  # its own agent is told why; nobody else is


# -- search: every mode and filter, over REST and as the gateway calls gRPC, never reaches elsewhere ---

FILTERS = list(
    itertools.product(
        ((), ("decision",)),  # kinds
        ("none", "shared", "foreign"),  # tags
        (False, True),  # include_history
        (False, True),  # as_of, between the first versions and the corrections
        (False, True),  # valid_at, in the past
    )
)


def _filter_fields(m: Matrix, caller: Walled, combo: tuple[Any, ...]) -> dict[str, Any]:
    kinds, tags, history, as_of, valid_at = combo
    fields: dict[str, Any] = {"kinds": list(kinds), "include_history": history}
    if tags != "none":
        fields["tags"] = [SHARED_TAG if tags == "shared" else m.walls[(caller.index + 1) % N].tag]
    if as_of:
        fields["as_of"] = m.t_mid
    if valid_at:
        fields["valid_at"] = PAST
    return fields


def _expect_own(caller: Walled, combo: tuple[Any, ...], items: list[dict[str, Any]]) -> None:
    """What the caller must find of its own under these filters: its decision qualifies for all of them
    but a foreign tag; unfiltered, the history and as-of reads show exactly their own memories."""
    kinds, tags, history, as_of, valid_at = combo
    mem = caller.memory
    found = {item["id"]: item for item in items}
    assert {item["workspace_id"] for item in items} <= {caller.id, "global"}
    assert mem["deleted"] not in found  # a tombstone is on no read path
    if tags == "foreign":
        assert items == []
        return
    assert mem["decision"] in found
    if kinds or tags != "none" or valid_at:
        return
    if as_of:  # as recorded then: the draft, and the superseded and retracted memories still active
        assert {mem["updated"], mem["superseded"], mem["retracted"]} <= set(found)
        assert found[mem["updated"]]["version"] == 1 and mem["successor"] not in found
    else:
        assert found[mem["updated"]]["version"] == 2 and mem["successor"] in found
        hidden = {mem["superseded"], mem["retracted"]}
        assert hidden <= set(found) if history else not hidden & set(found)


PLAIN = ((), "none", False, False, False)
# Every value of every filter, each with every mode, over REST; the full product runs over gRPC below.
COVERING = [
    PLAIN,
    ((), "none", True, False, False),
    ((), "none", False, True, False),
    ((), "none", True, True, False),
    ((), "foreign", False, False, False),
    (("decision",), "none", False, False, True),
    (("decision",), "shared", True, True, True),
]


def _search_cases(m: Matrix, caller: Walled, combos: list[tuple[Any, ...]]) -> list[tuple[str, dict[str, Any], Any]]:
    """(label, search fields, check) for each mode: the filter combinations, queried with every keyword at
    once (nothing holds them all, so the lexical leg relaxes to any word), then single keywords."""
    everything = " ".join(KEYWORDS)
    cases: list[tuple[str, dict[str, Any], Any]] = []
    for mode in MODES:
        relaxes = mode != "semantic"
        for combo in combos:
            fields = {"query": everything, "mode": mode, "limit": 100, **_filter_fields(m, caller, combo)}
            cases.append((f"{mode} {combo}", fields, (combo, relaxes)))
        window = {"created_after": m.t_start, "created_before": m.t_end}
        window |= {"updated_after": m.t_start, "updated_before": m.t_end}
        cases += [
            (f"{mode} window", {"query": everything, "mode": mode, "limit": 100, **window}, (PLAIN, relaxes)),
            (f"{mode} before", {"query": everything, "mode": mode, "created_before": m.t_start}, "empty"),
            (f"{mode} own keyword", {"query": caller.keyword, "mode": mode, "limit": 100}, (PLAIN, False)),
            (
                f"{mode} own word and a missing one",
                {"query": f"{caller.keyword} {MISSING_WORD}", "mode": mode, "limit": 100},
                (PLAIN, relaxes),
            ),
        ]
        for other in m.walls:
            if other is not caller:
                for query in (other.keyword, f"{other.keyword} {MISSING_WORD}"):
                    # Lexically nothing may match; semantically the nearest are the caller's own.
                    expected = "empty" if mode == "lexical" else "clean"
                    cases.append((f"{mode} {query!r}", {"query": query, "mode": mode, "limit": 100}, expected))
    return cases


def _check_search(
    m: Matrix, caller: Walled, where: str, expected: Any, items: list[dict[str, Any]], relaxed: bool
) -> None:
    try:
        assert {item["workspace_id"] for item in items} <= {caller.id, "global"}
        if expected == "empty":
            assert items == []
        elif expected != "clean":
            combo, relaxes = expected
            _expect_own(caller, combo, items)
            assert relaxed is relaxes
    except AssertionError as exc:
        raise AssertionError(f"{where}: {exc}") from exc


@pytest.mark.parametrize("caller_index", CALLERS, ids=CALLER_IDS)
async def test_search_matrix(matrix: Matrix, caller_index: int) -> None:
    """Over REST: every mode, every filter value, the relaxed leg, every other workspace's keyword."""
    m = matrix
    caller = m.walls[caller_index]
    cases = _search_cases(m, caller, COVERING)
    answers = await gather_all([lambda c=c: m.rest(caller.token, "POST", "/api/v1/search", c[1]) for c in cases])
    for (where, _, expected), response in zip(cases, answers, strict=True):
        assert response.status_code == 200, (where, response.text)
        m.assert_clean(caller.index, response.text, where)
        body = response.json()
        assert body["workspace"]["id"] == caller.id and body["scope"] == f"{caller.id} + global", where
        _check_search(m, caller, where, expected, body["results"], body["lexical_relaxed"])
    # The relaxed leg with a global word: global is found, the other workspace is not.
    query = {"query": f"{m.walls[caller_index - 1].keyword} {GLOBAL_KEYWORD}", "mode": "lexical"}
    relaxed = await m.ok(caller.token, "POST", "/api/v1/search", query)
    assert [r["id"] for r in relaxed["results"]] == [m.global_note] and relaxed["lexical_relaxed"]


def _timestamp(value: str | None) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(datetime.fromisoformat(value.replace("Z", "+00:00")))
    return stamp


def _search_request(caller: Walled, fields: dict[str, Any]) -> spb.SearchRequest:
    """The SearchRequest the gateway builds from these REST fields for this caller."""
    return spb.SearchRequest(
        workspace=caller.name,
        query=fields["query"],
        mode=spb.SearchMode.Value(f"SEARCH_MODE_{fields['mode'].upper()}"),
        limit=fields.get("limit", 0),
        filter=common_pb2.MemoryFilter(
            kinds=[common_pb2.MemoryKind.Value(f"MEMORY_KIND_{k.upper()}") for k in fields.get("kinds", [])],
            tags=fields.get("tags", []),
            created_after=_timestamp(fields.get("created_after")),
            created_before=_timestamp(fields.get("created_before")),
            updated_after=_timestamp(fields.get("updated_after")),
            updated_before=_timestamp(fields.get("updated_before")),
        ),
        options=common_pb2.ReadOptions(
            include_history=fields.get("include_history", False),
            as_of=_timestamp(fields.get("as_of")),
            valid_at=_timestamp(fields.get("valid_at")),
        ),
    )


@pytest.mark.parametrize("caller_index", CALLERS, ids=CALLER_IDS)
async def test_search_filter_product(matrix: Matrix, caller_index: int) -> None:
    """Every mode x every combination of kinds, tags, include_history, as_of and valid_at, called as the
    gateway calls SearchService for this agent's token."""
    m = matrix
    caller = m.walls[caller_index]
    cases = _search_cases(m, caller, FILTERS)
    answers = await gather_all(
        [lambda c=c: m.search.Search(_search_request(caller, c[1]), metadata=agent_metadata(caller)) for c in cases]
    )
    for (where, _, expected), response in zip(cases, answers, strict=True):
        m.assert_clean(caller.index, str(response), where)
        items = [
            {"id": h.memory.id, "workspace_id": h.memory.workspace_id, "version": h.memory.version}
            for h in response.hits
        ]
        _check_search(m, caller, where, expected, items, response.lexical_relaxed)


# -- REST: the caller's own lists, every filter, every page -------------------------------------------


@pytest.mark.parametrize("caller_index", CALLERS, ids=CALLER_IDS)
async def test_list_matrix(matrix: Matrix, caller_index: int) -> None:
    m = matrix
    caller = m.walls[caller_index]
    params_list = []
    for combo in FILTERS:
        fields = _filter_fields(m, caller, combo)
        params: dict[str, Any] = {"page_size": 100, "include_history": str(fields["include_history"]).lower()}
        params |= {"kind": fields["kinds"], "tag": fields.get("tags", [])}
        params |= {key: fields[key] for key in ("as_of", "valid_at") if key in fields}
        params_list.append((combo, params))
    answers = await gather_all(
        [lambda p=p: m.rest(caller.token, "GET", "/api/v1/memories", params=p[1]) for p in params_list]
    )
    for (combo, _), response in zip(params_list, answers, strict=True):
        assert response.status_code == 200, (combo, response.text)
        m.assert_clean(caller.index, response.text, f"list {combo}")
        try:
            _expect_own(caller, combo, response.json()["memories"])
        except AssertionError as exc:
            raise AssertionError(f"list {combo}: {exc}") from exc
    # Page by page: the pages add up to the single page, and none holds anything else.
    whole = await m.ok(caller.token, "GET", "/api/v1/memories", params={"page_size": 100, "include_history": "true"})
    paged: list[str] = []
    token = ""
    while True:
        page = await m.rest(
            caller.token,
            "GET",
            "/api/v1/memories",
            params={"page_size": 3, "include_history": "true", "page_token": token},
        )
        m.assert_clean(caller.index, page.text, "list page")
        paged += [item["id"] for item in page.json()["memories"]]
        token = page.json()["next_page_token"]
        if not token:
            break
    assert paged == [item["id"] for item in whole["memories"]] and caller.memory["decision"] in paged
    # A hand-made cursor pointing at another workspace's memory moves the page, never the wall.
    other = m.walls[(caller_index + 1) % N]
    raw = json.dumps({"u": "2999-01-01T00:00:00+00:00", "i": other.memory["note"]}).encode()
    crafted = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    forged = await m.rest(caller.token, "GET", "/api/v1/memories", params={"page_size": 100, "page_token": crafted})
    assert forged.status_code == 200, forged.text
    m.assert_clean(caller.index, forged.text, "list with a forged cursor")
    assert caller.memory["decision"] in {item["id"] for item in forged.json()["memories"]}


# -- REST: the caller's own history, as-of reads, audit log, status, workspaces, harvest ---------------


@pytest.mark.parametrize("caller_index", CALLERS, ids=CALLER_IDS)
async def test_own_history_and_as_of(matrix: Matrix, caller_index: int) -> None:
    m = matrix
    caller = m.walls[caller_index]
    mem = caller.memory
    updated = await m.ok(caller.token, "GET", f"/api/v1/memories/{mem['updated']}/history")
    assert [v["version"] for v in updated["versions"]] == [1, 2]
    assert "draft" in updated["versions"][0]["content"] and "final" in updated["versions"][1]["content"]
    assert {e["workspace_id"] for e in updated["events"]} == {caller.id}
    superseded = await m.ok(caller.token, "GET", f"/api/v1/memories/{mem['superseded']}/history")
    assert superseded["states"][-1]["superseded_by"] == mem["successor"]
    then = await m.ok(caller.token, "GET", f"/api/v1/memories/{mem['updated']}", params={"as_of": m.t_mid})
    assert then["version"] == 1 and "draft" in then["content"]
    was_active = await m.ok(caller.token, "GET", f"/api/v1/memories/{mem['retracted']}", params={"as_of": m.t_mid})
    assert was_active["status"] == "active"
    hidden = await m.rest(caller.token, "GET", f"/api/v1/memories/{mem['superseded']}")
    assert _error(hidden)[0] == 404 and "superseded" in _error(hidden)[2]  # its own agent is told why
    shown = await m.ok(caller.token, "GET", f"/api/v1/memories/{mem['superseded']}", params={"include_history": "true"})
    assert shown["status"] == "superseded"
    session = await m.ok(caller.token, "GET", f"/api/v1/memories/{mem['session']}")
    assert caller.keyword in session["content"] and session["provenance"] == "harvested_transcript"
    for where, body in (
        ("history", updated),
        ("history", superseded),
        ("as_of", then),
        ("as_of", was_active),
        ("history", shown),
        ("session", session),
    ):
        m.assert_clean(caller.index, json.dumps(body), where)


@pytest.mark.parametrize("caller_index", CALLERS, ids=CALLER_IDS)
async def test_own_audit_log(matrix: Matrix, caller_index: int) -> None:
    m = matrix
    caller = m.walls[caller_index]
    log = await m.ok(caller.token, "GET", "/api/v1/audit", params={"page_size": 100})
    events = log["events"]
    assert {e["workspace_id"] for e in events} == {caller.id}
    assert {"workspace_add", "write", "update", "supersede", "retract", "delete"} <= {e["action"] for e in events}
    assert caller.principal in {e["principal"] for e in events}
    m.assert_clean(caller.index, json.dumps(log), "audit")
    one = await m.ok(caller.token, "GET", "/api/v1/audit", params={"memory": caller.memory["updated"]})
    assert [e["action"] for e in one["events"]] == ["update", "write"]
    verified = await m.ok(caller.token, "GET", "/api/v1/audit/verify", params={"workspace": caller.name})
    assert verified["ok"] and verified["workspaces_checked"] == 1
    shared = await m.ok(caller.token, "GET", "/api/v1/audit/verify", params={"workspace": "global"})
    assert shared["ok"] and shared["workspaces_checked"] == 1
    # Verifying every chain is an admin's: an agent must name one of its own.
    every = await m.rest(caller.token, "GET", "/api/v1/audit/verify")
    assert _error(every)[:2] == (403, "PERMISSION_DENIED")
    m.assert_clean(caller.index, every.text + json.dumps([verified, shared]), "audit verify")
    assert (await m.ok(m.admin, "GET", "/api/v1/audit/verify"))["workspaces_checked"] >= N + 1


@pytest.mark.parametrize("caller_index", CALLERS, ids=CALLER_IDS)
async def test_global_audit_chain_names_no_other_workspace(matrix: Matrix, caller_index: int) -> None:
    m = matrix
    caller = m.walls[caller_index]
    log = await m.ok(caller.token, "GET", "/api/v1/audit", params={"workspace": "global", "page_size": 100})
    # Positive control: the global note's write is there for everyone to read.
    assert m.global_note in {e["memory_id"] for e in log["events"]}
    m.assert_clean(caller.index, json.dumps(log), "global audit")


@pytest.mark.parametrize("caller_index", CALLERS, ids=CALLER_IDS)
async def test_workspaces_and_status(matrix: Matrix, caller_index: int) -> None:
    m = matrix
    caller = m.walls[caller_index]
    listed = await m.ok(caller.token, "GET", "/api/v1/workspaces")
    assert {w["id"] for w in listed["workspaces"]} == {caller.id, "global"}
    mine = await m.ok(caller.token, "GET", "/api/v1/status")
    named = await m.ok(caller.token, "GET", "/api/v1/status", params={"workspace": caller.root})
    truth = await m.ok(m.admin, "GET", "/api/v1/status", params={"workspace": caller.id})
    total = await m.ok(m.admin, "GET", "/api/v1/status")
    shared = await m.ok(caller.token, "GET", "/api/v1/status", params={"workspace": "global"})
    assert shared["memories"] == 1
    # Status counts what every other read sees: the token's own workspace and global (never
    # another's); the admin's total holds the other four as well.
    own = mine["memories"] - shared["memories"]
    assert mine["memories"] == named["memories"] == truth["memories"] and own > 0
    assert mine["chunks_embedded"] == truth["chunks_embedded"] < total["chunks_embedded"]
    assert total["memories"] - shared["memories"] > own * (N - 1)
    m.assert_clean(caller.index, json.dumps([listed, mine, named, shared]), "workspaces and status")


@pytest.mark.parametrize("caller_index", CALLERS, ids=CALLER_IDS)
async def test_harvest_status_and_sources(matrix: Matrix, caller_index: int) -> None:
    m = matrix
    caller = m.walls[caller_index]
    status = await m.ok(caller.token, "GET", "/api/v1/harvest/status")
    claude = next(a for a in status["agents"] if a["agent"] == "claude-code")
    assert (claude["sources_seen"], claude["harvested"], claude["skipped"]) == (1, 1, {})
    assert status["unregistered"] == [] and claude["failures"] == []
    sources = await m.ok(caller.token, "GET", "/api/v1/harvest/sources", params={"page_size": 500})
    assert [(s["session_id"], s["workspace_id"]) for s in sources["sources"]] == [(caller.session_id, caller.id)]
    for params in ({"state": "skipped"}, {"state": "harvested", "agent": "claude-code"}, {"page_token": "1"}):
        more = await m.ok(caller.token, "GET", "/api/v1/harvest/sources", params=params)
        assert {s["session_id"] for s in more["sources"]} <= {caller.session_id}, params
        m.assert_clean(caller.index, json.dumps(more), f"harvest sources {params}")
    m.assert_clean(caller.index, json.dumps([status, sources]), "harvest")
    # Placement (a remote harvester's look-up) finds the caller's own directory, and no one else's: another
    # workspace's root is refused in the words an unregistered directory gets; the admin places each.
    placed = await m.ok(caller.token, "GET", "/api/v1/harvest/placement", params={"path": f"{caller.root}/src"})
    assert placed["workspace"]["id"] == caller.id
    unregistered = await m.rest(caller.token, "GET", "/api/v1/harvest/placement", params={"path": "/nowhere/at/all"})
    for other in m.walls:
        if other.index == caller.index:
            continue
        answer = await m.rest(caller.token, "GET", "/api/v1/harvest/placement", params={"path": other.root})
        assert answer.status_code == unregistered.status_code == 403, answer.text
        words = answer.json()["error"]["message"].replace(other.root, "P")
        assert words == unregistered.json()["error"]["message"].replace("/nowhere/at/all", "P")
        m.assert_clean(caller.index, answer.text.replace(other.root, "P"), "harvest placement")
        admin = await m.ok(m.admin, "GET", "/api/v1/harvest/placement", params={"path": other.root})
        assert admin["workspace"]["id"] == other.id
    # Positive control: the admin sees all five sessions and the unplaced one.
    everything = await m.ok(m.admin, "GET", "/api/v1/harvest/status")
    assert next(a for a in everything["agents"] if a["agent"] == "claude-code")["sources_seen"] == N + 1
    assert everything["unregistered"] == [UNPLACED_CWD]
    # The archive's size: a caller learns its own sessions' copies, the admin the machine's.
    conn = await asyncpg.connect(m.stack.dsn)
    try:
        own = await conn.fetchval("SELECT sum(archive_bytes) FROM harvest_sources WHERE workspace_id = $1", caller.id)
    finally:
        await conn.close()
    assert own > 0 and int(status["archive_bytes"]) == own < int(everything["archive_bytes"])


# -- global: read by every agent, written by none -------------------------------------------------------


@pytest.mark.parametrize("caller_index", CALLERS, ids=CALLER_IDS)
async def test_global_is_readable_not_writable(matrix: Matrix, caller_index: int) -> None:
    m = matrix
    caller = m.walls[caller_index]
    found = await m.ok(caller.token, "POST", "/api/v1/search", {"query": GLOBAL_KEYWORD, "mode": "lexical"})
    assert [r["id"] for r in found["results"]] == [m.global_note]
    only = await m.ok(caller.token, "POST", "/api/v1/search", {"query": GLOBAL_KEYWORD, "workspace": "global"})
    assert [r["id"] for r in only["results"]] == [m.global_note] and only["scope"] == "global"
    note = await m.ok(caller.token, "GET", f"/api/v1/memories/{m.global_note}")
    assert GLOBAL_KEYWORD in note["content"]
    listed = await m.ok(caller.token, "GET", "/api/v1/memories", params={"workspace": "global", "page_size": 100})
    assert [item["id"] for item in listed["memories"]] == [m.global_note]
    history = await m.ok(caller.token, "GET", f"/api/v1/memories/{m.global_note}/history")
    m.assert_clean(caller.index, json.dumps([found, only, note, listed, history]), "global reads")
    g = {"workspace": "global"}
    for method, path, body, params in (
        ("POST", "/api/v1/memories", {"content": f"{caller.keyword} into global", **g}, None),
        ("PATCH", f"/api/v1/memories/{m.global_note}", {"content": "rewritten by an agent", **g}, None),
        ("POST", f"/api/v1/memories/{m.global_note}/supersede", {"content": "replaced by an agent", **g}, None),
        ("POST", f"/api/v1/memories/{m.global_note}/retract", {"reason": "an agent disagrees", **g}, None),
        ("POST", f"/api/v1/memories/{m.global_note}/confirm", g, None),
        ("DELETE", f"/api/v1/memories/{m.global_note}", None, {"reason": "an agent wants it gone", **g}),
        ("POST", "/api/v1/proposals", {"kind": "retract", "memory_ids": [m.global_note], "reason": "x", **g}, None),
    ):
        refused = await m.rest(caller.token, method, path, body, params)
        assert _error(refused)[:2] == (403, "PERMISSION_DENIED"), (method, path, refused.text)
    # Through its own workspace the global note is not the agent's to change either.
    sideways = await m.rest(caller.token, "PATCH", f"/api/v1/memories/{m.global_note}", {"content": "sideways"})
    assert _error(sideways)[0] == 404 and "global" in _error(sideways)[2]
    unchanged = await m.ok(m.admin, "GET", f"/api/v1/memories/{m.global_note}")
    assert (unchanged["version"], unchanged["status"], unchanged["content"]) == (1, "active", note["content"])
    # A vote is the one thing an agent adds to a global memory: cast from its own workspace and audited
    # there, so global's chain, which every workspace reads, still names no other workspace.
    voted = await m.ok(
        caller.token, "POST", f"/api/v1/memories/{m.global_note}/feedback", {"vote": "useful", "note": caller.keyword}
    )
    assert voted["feedback"]["workspace_id"] == caller.id and voted["memory"]["workspace_id"] == "global"
    from_global = await m.rest(
        caller.token, "POST", f"/api/v1/memories/{m.global_note}/feedback", {"vote": "useful", **g}
    )
    assert _error(from_global)[:2] == (403, "PERMISSION_DENIED")
    chain = await m.ok(caller.token, "GET", "/api/v1/audit", params={"workspace": "global", "page_size": 100})
    assert m.global_note in {e["memory_id"] for e in chain["events"]}
    m.assert_clean(caller.index, json.dumps(chain), "global audit after votes")


# -- tokens: unknown, malformed and revoked ones read nothing; token RPCs are an admin's --------------


def _read_routes(m: Matrix) -> list[tuple[str, str, Any, Any]]:
    """One request per REST read route (REST_READS), as a token for w0 would send it."""
    w = m.walls[0]
    mid = w.memory["note"]
    routes = [
        ("POST", "/api/v1/search", {"query": w.keyword}, None),
        ("GET", "/api/v1/memories", None, None),
        ("GET", f"/api/v1/memories/{mid}", None, None),
        ("GET", f"/api/v1/memories/{mid}/history", None, None),
        ("GET", "/api/v1/audit", None, None),
        ("GET", "/api/v1/audit/verify", None, {"workspace": w.id}),
        ("GET", "/api/v1/status", None, None),
        ("GET", "/api/v1/workspaces", None, None),
        ("GET", "/api/v1/harvest/status", None, None),
        ("GET", "/api/v1/harvest/sources", None, None),
        ("GET", "/api/v1/harvest/placement", None, {"path": w.root}),
        ("GET", "/api/v1/tokens", None, None),
        ("GET", "/api/v1/context", None, None),
        ("GET", "/api/v1/export", None, None),
        ("GET", "/api/v1/proposals", None, None),
        ("GET", f"/api/v1/proposals/{w.proposal}", None, None),
    ]
    shapes = {
        f"{method} {re.sub(r'[0-9a-f-]{36}', '{proposal_id}' if 'proposals' in path else '{memory_id}', path)}"
        for method, path, _, _ in routes
    }
    assert shapes == REST_READS
    return routes


async def _assert_unauthenticated(m: Matrix, headers: dict[str, str], where: str) -> None:
    for method, path, body, params in _read_routes(m):
        response = await m.http.request(method, path, json=body, params=params, headers=headers)
        assert response.status_code == 401, (where, method, path, response.text)
        assert response.json()["error"]["code"] == "UNAUTHENTICATED"
        assert response.headers["www-authenticate"].startswith("Bearer")
        m.assert_clean(-1, response.text, f"{where} {path}")
    mcp = await m.http.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={**headers, "Accept": "application/json, text/event-stream"},
    )
    assert mcp.status_code == 401, (where, mcp.text)


async def test_unknown_or_malformed_tokens_are_unauthenticated(matrix: Matrix) -> None:
    m = matrix
    real = m.walls[0].token
    token_id = real.split("_")[1]
    for bad in (
        "nonsense",
        "mnemo_",
        f"mnemo_{token_id}",
        f"mnemo_{token_id}_",
        "mnemo_aaaaaaaaaaaa_" + "x" * 43,
        real[:-1] + ("A" if real[-1] != "A" else "B"),
        f"mnemo_{m.walls[1].token_id}_{real.split('_', 2)[2]}",  # one token's secret under another's id
        real + "x",
    ):
        await _assert_unauthenticated(m, {"Authorization": f"Bearer {bad}"}, bad)
    await _assert_unauthenticated(m, {}, "no header")
    await _assert_unauthenticated(m, {"Authorization": f"Basic {real}"}, "not a bearer")
    # Positive control: the real token reads every route but the admin's token list.
    for method, path, body, params in _read_routes(m):
        response = await m.rest(real, method, path, body, params)
        above_agent = path in ("/api/v1/tokens", "/api/v1/export") or path.startswith("/api/v1/proposals")
        assert response.status_code == (403 if above_agent else 200), (path, response.text)
        if path.startswith("/api/v1/proposals"):  # the queue is a reviewer's: w0's reviewer reads it
            assert (await m.rest(m.walls[0].reviewer, method, path, body, params)).status_code == 200, path


async def test_a_revoked_token_reads_nothing(matrix: Matrix) -> None:
    m = matrix
    w = m.walls[0]
    made = await m.ok(
        m.admin, "POST", "/api/v1/tokens", {"principal": "short-lived", "role": "agent", "workspaces": [w.id]}
    )
    secret = made["secret"]
    found = await m.ok(secret, "POST", "/api/v1/search", {"query": w.keyword})
    assert w.memory["decision"] in {r["id"] for r in found["results"]}  # positive control: it worked
    revoked = await m.ok(m.admin, "DELETE", f"/api/v1/tokens/{made['token']['id']}")
    assert revoked["token"]["revoked_at"]
    await _assert_unauthenticated(m, {"Authorization": f"Bearer {secret}"}, "revoked")
    # Revoking one token leaves the workspace's other token working.
    assert (await m.rest(w.token, "GET", "/api/v1/workspaces")).status_code == 200


@pytest.mark.parametrize("caller_index", CALLERS, ids=CALLER_IDS)
async def test_token_rpcs_are_admin_only(matrix: Matrix, caller_index: int) -> None:
    m = matrix
    caller = m.walls[caller_index]
    listed = await m.rest(caller.token, "GET", "/api/v1/tokens")
    assert _error(listed)[:2] == (403, "PERMISSION_DENIED")
    made = await m.rest(
        caller.token, "POST", "/api/v1/tokens", {"principal": "x", "role": "agent", "workspaces": [caller.id]}
    )
    assert _error(made)[:2] == (403, "PERMISSION_DENIED")
    revoke = await m.rest(caller.token, "DELETE", f"/api/v1/tokens/{m.walls[(caller_index + 1) % N].token_id}")
    assert _error(revoke)[:2] == (403, "PERMISSION_DENIED")
    exported = await m.rest(caller.token, "GET", "/api/v1/export", None, {"workspace": caller.id})
    assert _error(exported)[:2] == (403, "PERMISSION_DENIED")
    m.assert_clean(caller.index, listed.text + made.text + revoke.text + exported.text, "tokens", identity=False)
    # Positive control: the admin lists them, secrets never included; the admin exports the caller's workspace.
    tokens = (await m.ok(m.admin, "GET", "/api/v1/tokens"))["tokens"]
    assert caller.token_id in {t["id"] for t in tokens} and all("secret" not in t for t in tokens)
    export = await m.rest(m.admin, "GET", "/api/v1/export", None, {"workspace": caller.id})
    assert export.status_code == 200 and caller.keyword in export.text


# -- proposals: a reviewer bound to one workspace sees and decides only its own ------------------------


def _decisions(proposal_id: str, workspace: str | None) -> list[tuple[str, str, Any, Any]]:
    body = {"reason": "deciding from elsewhere", **({"workspace": workspace} if workspace else {})}
    return [
        ("GET", f"/api/v1/proposals/{proposal_id}", None, {"workspace": workspace} if workspace else None),
        *(("POST", f"/api/v1/proposals/{proposal_id}/{verb}", body, None) for verb in ("accept", "reject", "reverse")),
    ]


@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
async def test_proposal_walls(matrix: Matrix, pair: tuple[int, int]) -> None:
    """Another workspace's proposal, asked for or decided through the caller's own workspace (or none),
    is answered word for word as an unknown id; naming that workspace is refused; nothing is decided."""
    m = matrix
    caller, target = m.walls[pair[0]], m.walls[pair[1]]
    unknown = str(uuid.uuid4())
    for workspace in (caller.name, None):
        baseline = await gather_all([lambda c=c: m.rest(caller.reviewer, *c) for c in _decisions(unknown, workspace)])
        foreign = await gather_all(
            [lambda c=c: m.rest(caller.reviewer, *c) for c in _decisions(target.proposal, workspace)]
        )
        for want, got in zip(baseline, foreign, strict=True):
            expected = (_error(want)[0], _error(want)[1], _error(want)[2].replace(unknown, "<id>"))
            assert expected[0] == 404, want.text
            assert (_error(got)[0], _error(got)[1], _error(got)[2].replace(target.proposal, "<id>")) == expected
            m.assert_clean(caller.index, _error(got)[2].replace(target.proposal, ""), "foreign proposal")
    named = [("GET", "/api/v1/proposals", None, {"workspace": ref}) for ref in target.refs(caller)[:3]] + [
        ("POST", f"/api/v1/proposals/{target.proposal}/accept", {"workspace": target.name}, None)
    ]
    answers = await gather_all([lambda c=c: m.rest(caller.reviewer, *c) for c in named])
    for call, response in zip(named, answers, strict=True):
        assert _error(response)[:2] == (403, "PERMISSION_DENIED"), (call, response.text)
    # Over gRPC as the gateway calls it for the reviewer: the same unknown-id answer.
    reviewer = CallContext(f"reviewer-ws{caller.index}", uuid.uuid4().hex, "reviewer", (caller.id,), "").metadata()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await m.search.GetProposal(spb.GetProposalRequest(id=target.proposal), metadata=reviewer)
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    # An agent sees no queue at all, its own included.
    assert _error(await m.rest(caller.token, "GET", "/api/v1/proposals"))[:2] == (403, "PERMISSION_DENIED")
    # Positive controls: the reviewer lists and reads its own workspace's proposals, none of the target's;
    # the target's proposal is still open, as its own reviewer sees.
    listed = await m.ok(caller.reviewer, "GET", "/api/v1/proposals")
    assert caller.proposal in {p["id"] for p in listed["proposals"]}
    assert {p["workspace_id"] for p in listed["proposals"]} <= {caller.id, "global"}
    # The agent's (over REST, a human's source) and the session's DECISION/LESSON lines.
    assert {p["source"] for p in listed["proposals"]} == {"human", "harvest"}
    own = await m.ok(caller.reviewer, "GET", f"/api/v1/proposals/{caller.proposal}")
    assert own["memories"][0]["id"] == caller.memory["note"] and caller.keyword in own["memories"][0]["content"]
    m.assert_clean(caller.index, json.dumps([listed, own]), "own proposals")
    theirs = await m.ok(target.reviewer, "GET", f"/api/v1/proposals/{target.proposal}")
    assert theirs["proposal"]["state"] == "open"


# -- MCP: the tools an agent has, with its token, for every other workspace ---------------------------


@pytest.mark.parametrize("caller_index", CALLERS, ids=CALLER_IDS)
async def test_mcp_walls(matrix: Matrix, caller_index: int) -> None:
    """Per caller, one MCP session for its own token (and one per target naming the target in the URL):
    every read tool naming another workspace is refused; its own reads find its own material only."""
    m = matrix
    caller = m.walls[caller_index]
    async with mcp_client(m.stack, token=caller.token) as client:
        call = client.call_tool
        # Positive controls first: the agent's own workspace, by default.
        found = _tool_json(await call("memory_search", {"query": caller.keyword, "limit": 100}))
        assert caller.memory["decision"] in {r["id"] for r in found["results"]}
        relaxed = _tool_json(
            await call("memory_search", {"query": f"{caller.keyword} {MISSING_WORD}", "mode": "lexical"})
        )
        assert relaxed["lexical_relaxed"] and caller.memory["decision"] in {r["id"] for r in relaxed["results"]}
        shared = _tool_json(await call("memory_search", {"query": GLOBAL_KEYWORD, "mode": "lexical"}))
        assert [r["id"] for r in shared["results"]] == [m.global_note]
        then = _tool_json(
            await call("memory_get", {"id": caller.memory["updated"], "as_of": m.t_mid, "include_history": True})
        )
        assert then["version"] == 1
        history = _tool_json(await call("memory_history", {"id": caller.memory["updated"]}))
        assert len(history["versions"]) == 2
        status = _tool_json(await call("memory_status", {}))
        assert status["memories"] > 0
        packet = _tool_json(await call("memory_context", {"task": caller.keyword}))
        assert {caller.memory["decision"], caller.memory["session"]} <= _packet_ids(packet)
        harvest = _tool_json(await call("memory_harvest_status", {}))
        claude = next(a for a in harvest["agents"] if a["agent"] == "claude-code")
        assert claude["sources_seen"] == 1 and harvest["unregistered"] == []
        m.assert_clean(
            caller.index, json.dumps([found, relaxed, shared, then, history, status, harvest, packet]), "mcp own"
        )
        refused_global = _tool_error(await call("memory_write", {"content": "into global", "workspace": "global"}))
        assert refused_global.startswith("PERMISSION_DENIED")
        refused: list[tuple[str, dict[str, Any]]] = []
        unknown: list[tuple[str, str]] = []
        searched: list[Walled] = []
        for target in m.walls:
            if target is caller:
                continue
            mem = target.memory
            refs = target.refs(caller)
            refused += [
                *(
                    ("memory_search", {"query": target.keyword, "workspace": ref})
                    for ref in (refs[0], refs[1], refs[4])
                ),
                *(
                    ("memory_search", {"query": target.keyword, "mode": mode, "workspace": target.id})
                    for mode in MODES[1:]
                ),
                (
                    "memory_search",
                    {
                        "query": target.keyword,
                        "workspace": target.name,
                        "kinds": ["decision"],
                        "tags": [target.tag],
                        "include_history": True,
                        "as_of": m.t_mid,
                        "valid_at": PAST,
                    },
                ),
                ("memory_get", {"id": mem["superseded"], "workspace": target.root, "include_history": True}),
                ("memory_history", {"id": mem["updated"], "workspace": target.name}),
                ("memory_status", {"workspace": refs[3]}),
                *(("memory_context", {"workspace": ref}) for ref in (refs[0], refs[2], refs[5])),
                ("memory_context", {"workspace": target.name, "task": target.keyword, "budget": 16000}),
                ("memory_write", {"content": "sneaky", "workspace": target.id}),
                ("memory_feedback", {"id": mem["note"], "vote": "harmful", "workspace": target.name}),
                (
                    "memory_propose",
                    {"kind": "retract", "memory_ids": [mem["note"]], "reason": "sneaky", "workspace": target.name},
                ),
            ]
            # Through its own workspace: the target's ids are unknown, its keyword finds nothing of it.
            unknown += [("memory_get", mem["note"]), ("memory_get", mem["deleted"]), ("memory_history", mem["updated"])]
            searched.append(target)
        texts = await gather_all([lambda c=c: call(c[0], c[1]) for c in refused])
        for (tool, args), result in zip(refused, texts, strict=True):
            text = _tool_error(result)
            assert text.startswith("PERMISSION_DENIED"), (tool, args, text)
            m.assert_clean(caller.index, text, f"mcp {tool} {args}", identity=False)
        proposals = [(m.walls[i].memory["note"]) for i in range(N) if i != caller.index]
        texts = await gather_all(
            [
                lambda i=i: call("memory_propose", {"kind": "retract", "memory_ids": [i], "reason": "x"})
                for i in proposals
            ]
        )
        for memory_id, result in zip(proposals, texts, strict=True):
            expected = f"NOT_FOUND: memory {memory_id} not found in workspace {caller.name!r}"
            assert _tool_error(result) == f"{expected} (reason: MEMORY_NOT_FOUND)", _tool_error(result)
        texts = await gather_all([lambda c=c: call(c[0], {"id": c[1]}) for c in unknown])
        for (_, memory_id), result in zip(unknown, texts, strict=True):
            text = _tool_error(result)
            expected = f"NOT_FOUND: memory {memory_id} not found in workspace {caller.name!r}"
            assert text == f"{expected} (reason: MEMORY_NOT_FOUND)", text
        # A vote on another workspace's memory, through the caller's own: the same answer as an unknown id.
        for target in searched:
            voted = _tool_error(await call("memory_feedback", {"id": target.memory["note"], "vote": "harmful"}))
            expected = f"NOT_FOUND: memory {target.memory['note']} not found in workspace {caller.name!r}"
            assert voted == f"{expected} (reason: MEMORY_NOT_FOUND)", voted
        results = await gather_all(
            [
                lambda t=t: call("memory_search", {"query": f"{t.keyword} {caller.keyword}", "limit": 100})
                for t in searched
            ]
        )
        for target, result in zip(searched, results, strict=True):
            own = _tool_json(result)
            assert caller.memory["decision"] in {r["id"] for r in own["results"]} and own["lexical_relaxed"]
            m.assert_clean(caller.index, json.dumps(own), f"mcp search for w{target.index}'s keyword")
    # The workspace in the MCP URL is checked like any other.
    for target in m.walls:
        if target is caller:
            continue
        async with mcp_client(m.stack, workspace=target.root, token=caller.token) as client:
            calls = (
                ("memory_search", {"query": target.keyword}),
                ("memory_get", {"id": target.memory["note"]}),
                ("memory_history", {"id": target.memory["updated"]}),
                ("memory_status", {}),
                ("memory_context", {"task": target.keyword}),
                ("memory_write", {"content": "sneaky"}),
            )
            texts = await asyncio.gather(*(client.call_tool(tool, args) for tool, args in calls))
            for (tool, _), result in zip(calls, texts, strict=True):
                text = _tool_error(result)
                assert text.startswith("PERMISSION_DENIED"), (tool, text)
                m.assert_clean(caller.index, text, f"mcp url {tool}", identity=False)


# -- the wake-up packet: each caller's own briefing, nothing of anyone else's ---------------------------


def _packet_ids(packet: dict[str, Any], section: str | None = None) -> set[str]:
    return {item["id"] for part in packet["sections"] if section in (None, part["section"]) for item in part["items"]}


@pytest.mark.parametrize("caller_index", CALLERS, ids=CALLER_IDS)
async def test_context_matrix(matrix: Matrix, caller_index: int) -> None:
    """Over REST with the caller's token: its packet, with every other workspace's keyword as the task
    and every budget size, holds its own material (the positive control) and nothing of another's;
    corrected memories are never current in it and the deleted one is nowhere."""
    m = matrix
    caller = m.walls[caller_index]
    mem = caller.memory
    others = " ".join(w.keyword for w in m.walls if w is not caller)
    packets = [
        await m.ok(caller.token, "GET", "/api/v1/context", params=params)
        for params in (
            {},
            {"task": others},
            {"task": f"{others} {caller.keyword}", "budget": 16000},
            {"task": GLOBAL_KEYWORD, "budget": 120},
            {"since": m.t_start, "budget": 4000},
        )
    ]
    for packet in packets:
        assert packet["workspace"]["id"] == caller.id and packet["tokens"] <= packet["budget"]
        shown = _packet_ids(packet)
        current = shown - _packet_ids(packet, "changed")
        assert {item["workspace_id"] for p in packet["sections"] for item in p["items"]} <= {caller.id, "global"}
        assert mem["deleted"] not in shown
        assert not {mem["superseded"], mem["retracted"]} & current
        m.assert_clean(caller.index, json.dumps(packet), f"context {packet['budget']}")
    whole, focused, everything, small, since = packets
    # Positive controls: its decision, the successor, its session and the global note are there, and the
    # harvested DECISION and LESSON lines wait in its review queue.
    assert {mem["decision"], mem["successor"], mem["session"]} <= _packet_ids(whole)
    assert m.global_note in _packet_ids(whole, "global")
    assert whole["candidates"] == 2
    # A task naming every other workspace's keyword finds only the caller's own (or global) memories.
    assert _packet_ids(focused, "task") <= caller.ids | {m.global_note}
    assert _packet_ids(everything, "task") and _packet_ids(everything, "task") <= caller.ids | {m.global_note}
    assert small["tokens"] <= 120
    assert {mem["superseded"], mem["retracted"]} <= _packet_ids(since, "changed")
    superseded = next(i for p in since["sections"] for i in p["items"] if i["id"] == mem["superseded"])
    assert superseded["successor"]["id"] == mem["successor"]


# -- the web UI: the same walls through its pages, signed in as the caller's agent token ---------------------

# Every page the UI serves, and what covers it here: the read pages in test_ui_walls (the review queue with each
# workspace's reviewer token: an agent is refused it whatever it names, tests/e2e/test_roles.py); the sign-in page
# is open (it reads nothing).
UI_PAGES = {
    "/ui/review": "test_ui_walls",
    "/ui/review/{proposal_id}": "test_ui_walls",
    "/ui": "redirect",
    "/ui/": "redirect",
    "/ui/login": "open",
    "/ui/search": "test_ui_walls",
    "/ui/memories/{memory_id}": "test_ui_walls",
    "/ui/harvest": "test_ui_walls",
    "/ui/tokens": "test_ui_walls",
}


def ui_pages() -> set[str]:
    """The GET pages the UI router serves (its POSTs are the forms on these pages)."""
    from mnemo_gateway.ui import Sessions, WebUI, build_ui_router

    router = build_ui_router(WebUI(None, Sessions("", 60), True))  # type: ignore[arg-type]  # routes only
    return {route.path for route in router.routes if "GET" in getattr(route, "methods", ())}


@pytest.mark.parametrize("pair", PAIRS, ids=PAIR_IDS)
async def test_ui_walls(matrix: Matrix, pair: tuple[int, int]) -> None:
    """Signed in to the UI with its agent token, the caller cannot search the target's workspace, open its memory
    pages (named by workspace, or as its own), or see it in the switcher, harvest or token pages; it sees its own."""
    m = matrix
    caller, target = m.walls[pair[0]], m.walls[pair[1]]
    assert ui_pages() == set(UI_PAGES)
    client = UiClient(m.stack.base_url)
    try:
        assert (await client.sign_in(caller.token)).status_code == 303
        mem = target.memory
        named: list[tuple[str, dict[str, str]]] = [
            *(("/ui/search", {"q": target.keyword, "workspace": ref}) for ref in target.refs(caller)),
            (
                "/ui/search",
                {
                    "q": target.keyword,
                    "workspace": target.id,
                    "include_history": "on",
                    "explain": "on",
                    "as_of": m.t_end,
                },
            ),
            ("/ui/search", {"q": target.keyword, "workspace": target.name, "kind": "decision", "tags": target.tag}),
            (f"/ui/memories/{mem['note']}", {"workspace": target.id}),
            (f"/ui/memories/{mem['updated']}", {"workspace": target.name, "as_of": m.t_mid}),
            (f"/ui/memories/{mem['superseded']}", {"workspace": target.root}),
        ]
        for path, params in named:
            page = await client.get(path, **params)
            assert page.status_code == 403, (path, params, page.text[:800])
            assert page.headers["content-type"].startswith("text/html")
            m.assert_clean(caller.index, page.text, f"UI {path} {params}", identity=False)
        # The target's ids through the caller's own workspace: not found, as any unknown id.
        for role in FOREIGN_ROLES:
            page = await client.get(f"/ui/memories/{mem[role]}")
            assert page.status_code == 404, (role, page.text[:800])
            m.assert_clean(caller.index, page.text.replace(mem[role], ""), f"UI foreign {role}")
        tokens = await client.get("/ui/tokens")
        assert tokens.status_code == 403 and "needs the admin role" in tokens.text
        m.assert_clean(caller.index, tokens.text, "UI tokens", identity=False)
        # Positive control: its own search, memory page (history, audit, as-of) and harvest page, and nothing else's.
        own = caller.memory
        found = await client.get("/ui/search", q=caller.keyword)
        assert found.status_code == 200 and f'data-id="{own["decision"]}"' in found.text
        page = await client.get(f"/ui/memories/{own['updated']}", as_of=m.t_mid)
        assert page.status_code == 200, page.text[:800]
        assert f"{caller.keyword} final" in page.text and f"{caller.keyword} draft" in page.text
        assert page.text.count('class="tl-version"') == 2 and "update" in page.text
        harvest = await client.get("/ui/harvest")
        assert harvest.status_code == 200 and caller.session_id in harvest.text
        for text, where in ((found.text, "UI own search"), (page.text, "UI own memory"), (harvest.text, "UI harvest")):
            m.assert_clean(caller.index, text, where)
    finally:
        await client.close()
    await _ui_review_walls(m, caller, target)


async def _ui_review_walls(m: Matrix, caller: Walled, target: Walled) -> None:
    """The caller's reviewer, in the UI: the target's queue is refused by any name, its proposal is unknown
    through the caller's own workspace (and cannot be decided); its own queue and proposal are there."""
    client = UiClient(m.stack.base_url)
    try:
        assert (await client.sign_in(caller.reviewer)).status_code == 303
        for ref in target.refs(caller)[:3]:
            page = await client.get("/ui/review", workspace=ref)
            assert page.status_code == 403, (ref, page.text[:800])
            m.assert_clean(caller.index, page.text, f"UI review of {ref}", identity=False)
        named = await client.get(f"/ui/review/{target.proposal}", workspace=target.id)
        assert named.status_code == 403
        for workspace in ({}, {"workspace": caller.id}):
            page = await client.get(f"/ui/review/{target.proposal}", **workspace)
            assert page.status_code == 404, (workspace, page.text[:800])
            m.assert_clean(caller.index, page.text.replace(target.proposal, ""), "UI foreign proposal")
        accept = {"workspace": caller.id, "csrf": client.csrf, "reason": "deciding from elsewhere"}
        decided = await client.post(f"/ui/review/{target.proposal}/accept", accept)
        assert decided.status_code == 404, decided.text[:800]
        bulk = await client.post("/ui/review/bulk/reject", {**accept, "id": target.proposal})
        assert bulk.status_code == 200 and "Decided 0 of 1" in bulk.text
        m.assert_clean(caller.index, bulk.text.replace(target.proposal, ""), "UI bulk on a foreign proposal")
        # Positive controls: its own queue and proposal; the target's proposal is still open for its own reviewer.
        queue = await client.get("/ui/review")
        assert queue.status_code == 200 and f'data-proposal="{caller.proposal}"' in queue.text
        own = await client.get(f"/ui/review/{caller.proposal}")
        assert own.status_code == 200 and caller.memory["note"] in own.text
        for text, where in ((queue.text, "UI own queue"), (own.text, "UI own proposal")):
            m.assert_clean(caller.index, text, where)
        theirs = await m.ok(target.reviewer, "GET", f"/api/v1/proposals/{target.proposal}")
        assert theirs["proposal"]["state"] == "open"
    finally:
        await client.close()
