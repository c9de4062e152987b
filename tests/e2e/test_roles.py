"""The least role every RPC declares in its proto (`mnemo.common.v1.least_role`), checked against the running
services: a role below it is refused with PERMISSION_DENIED naming the role and the declared action, the role itself
gets past the check. The RPCs and their roles are read from the proto descriptors, so a new RPC is covered as soon as
it exists, and one without a declared role fails the suite."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import httpx
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor

from mnemo.common.v1 import options_pb2
from mnemo.harvest.v1 import harvest_service_pb2 as hpb
from mnemo.ingest.v1 import ingest_service_pb2 as ipb
from mnemo.search.v1 import search_service_pb2 as spb
from mnemo_embed import HashEmbedder
from mnemo_platform import enum_label
from mnemo_platform.context import ROLES, CallContext
from mnemo_server.stack import Stack
from tests.helpers import Postgres, start_stack

WORKSPACE = "roles"
FEEDBACK = "mnemo.ingest.v1.IngestService.RecordFeedback"


def methods() -> dict[str, MethodDescriptor]:
    return {
        method.full_name: method
        for module in (spb, ipb, hpb)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }


def least_role(method: MethodDescriptor) -> str:
    """The role the proto declares ("" when it declares none)."""
    options = method.GetOptions()
    if not options.HasExtension(options_pb2.least_role):
        return ""
    return enum_label(options_pb2.Role, options.Extensions[options_pb2.least_role])


def action(method: MethodDescriptor) -> str:
    return method.GetOptions().Extensions[options_pb2.action]


LEAST_ROLE = {name: least_role(method) for name, method in methods().items()}
# The lowest role (harvester): what it may call, it calls; every other RPC refuses it.
LOWEST = ROLES[0]
PRIVILEGED = sorted(name for name, role in LEAST_ROLE.items() if role != LOWEST)


@dataclass
class Roles:
    stack: Stack
    workspace_id: str
    memory_id: str

    def target(self, method: MethodDescriptor) -> str:
        services = {"SearchService": self.stack.search, "IngestService": self.stack.ingest}
        return services.get(method.containing_service.name, self.stack.harvest).target

    async def call(self, method: MethodDescriptor, role: str) -> tuple[grpc.StatusCode, str]:
        """Calls the RPC as a token of this role bound to the workspace, with a minimal request: status, details."""
        request = message_factory.GetMessageClass(method.input_type)()
        fields = request.DESCRIPTOR.fields_by_name
        if "workspace" in fields:
            request.workspace = WORKSPACE
        if "memory_id" in fields:
            request.memory_id = self.memory_id
        if method.full_name == FEEDBACK:
            # A whole vote, so the agent's call is seen to succeed, not only to pass the role check.
            request.id, request.vote = self.memory_id, ipb.FEEDBACK_VOTE_USEFUL
        caller = CallContext(f"{role}-bot", uuid.uuid4().hex, role, (self.workspace_id,), "")
        path = f"/{method.containing_service.full_name}/{method.name}"
        reply = message_factory.GetMessageClass(method.output_type)
        serialize, parse = type(request).SerializeToString, reply.FromString
        async with grpc.aio.insecure_channel(self.target(method)) as channel:
            try:
                if method.server_streaming:
                    stream = channel.unary_stream(path, request_serializer=serialize, response_deserializer=parse)
                    async for _ in stream(request, metadata=caller.metadata(), timeout=30):
                        pass
                else:
                    unary = channel.unary_unary(path, request_serializer=serialize, response_deserializer=parse)
                    await unary(request, metadata=caller.metadata(), timeout=30)
            except grpc.aio.AioRpcError as error:
                return error.code(), error.details() or ""
        return grpc.StatusCode.OK, ""


@pytest.fixture(scope="module")
async def roles(postgres: Postgres) -> AsyncIterator[Roles]:
    stack = await start_stack(await postgres.create_database("roles"), HashEmbedder(64), MNEMO_AUTH="on")
    admin = {"Authorization": f"Bearer {stack.bootstrap_token}"}
    async with httpx.AsyncClient(base_url=stack.base_url, headers=admin) as http:
        made = await http.post("/api/v1/workspaces", json={"name": WORKSPACE})
        assert made.status_code == 201, made.text
        written = await http.post("/api/v1/memories", json={"workspace": WORKSPACE, "content": "Roles are checked."})
        assert written.status_code == 201, written.text
    yield Roles(stack, made.json()["workspace"]["id"], written.json()["memory"]["id"])
    await stack.stop()


def test_every_rpc_declares_its_least_role_and_action() -> None:
    assert len(LEAST_ROLE) >= 27, sorted(LEAST_ROLE)  # positive control: the descriptors list the RPCs
    undeclared = sorted(name for name, role in LEAST_ROLE.items() if role not in ROLES)
    assert undeclared == [], "declare option (mnemo.common.v1.least_role) on these RPCs"
    wordless = sorted(name for name, method in methods().items() if not action(method))
    assert wordless == [], "declare option (mnemo.common.v1.action) on these RPCs"
    # Positive control: every role is some RPC's least, so the matrix below checks each level.
    assert set(LEAST_ROLE.values()) == set(ROLES)


@pytest.mark.parametrize("name", PRIVILEGED)
async def test_a_role_below_the_least_is_refused_naming_it(roles: Roles, name: str) -> None:
    method, least = methods()[name], LEAST_ROLE[name]
    below = ROLES[: ROLES.index(least)]
    assert LOWEST in below  # every privileged RPC refuses a harvester (and an agent, above agent level)
    for role in below:
        code, details = await roles.call(method, role)
        assert code == grpc.StatusCode.PERMISSION_DENIED, (name, role, code, details)
        assert f"{action(method)} needs the {least} role; this token is {role}" in details, details


@pytest.mark.parametrize("name", sorted(LEAST_ROLE))
async def test_the_least_role_gets_past_the_check(roles: Roles, name: str) -> None:
    # The positive control: the same minimal request at the declared role is refused for nothing about roles
    # (it may still be invalid or not found: the request is minimal). For an agent-level RPC this is the
    # agent allowed.
    code, details = await roles.call(methods()[name], LEAST_ROLE[name])
    assert code not in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INTERNAL), (code, details)
    # Authenticate judges the (empty) bearer token it was given; any other UNAUTHENTICATED is the principal's.
    assert code != grpc.StatusCode.UNAUTHENTICATED or "bearer token is unknown" in details, details


# The web UI's pages and the RPC each one reads first: a page needs exactly that RPC's least role, read from the
# same descriptors (the UI keeps no role table of its own either).
UI_PAGES = {
    "/ui/search": "mnemo.search.v1.SearchService.ListWorkspaces",
    "/ui/harvest": "mnemo.harvest.v1.HarvestService.Status",
    "/ui/tokens": "mnemo.search.v1.SearchService.ListTokens",
    "/ui/review": "mnemo.search.v1.SearchService.ListProposals",
}


async def test_ui_pages_hold_the_roles(roles: Roles) -> None:
    from tests.e2e.ui import UiClient

    # Positive control: every level above the harvester's is checked; a harvester has no page (each refuses it).
    assert {LEAST_ROLE[rpc] for rpc in UI_PAGES.values()} == set(ROLES) - {LOWEST}
    base = roles.stack.base_url
    tokens = {"admin": roles.stack.bootstrap_token}
    admin = {"Authorization": f"Bearer {roles.stack.bootstrap_token}"}
    async with httpx.AsyncClient(base_url=base, headers=admin) as http:
        for role in ("harvester", "agent", "reviewer"):
            body = {"principal": f"ui-{role}", "role": role, "workspaces": [roles.workspace_id]}
            made = await http.post("/api/v1/tokens", json=body)
            assert made.status_code == 201, made.text
            tokens[role] = made.json()["secret"]
    for role, token in tokens.items():
        client = UiClient(base)
        try:
            assert (await client.sign_in(token)).status_code == 303
            for page, rpc in UI_PAGES.items():
                least = LEAST_ROLE[rpc]
                answer = await client.get(page)
                if ROLES.index(role) < ROLES.index(least):
                    assert answer.status_code == 403, (role, page, answer.text[:500])
                    assert f"needs the {least} role; this token is {role}" in answer.text, answer.text[:1000]
                    assert "Traceback" not in answer.text
                else:
                    # The role itself gets the page.
                    assert answer.status_code == 200, (role, page, answer.status_code, answer.text[:500])
            # The navigation offers exactly the pages the role may open.
            nav = (await client.get("/ui/search")).text.split("</nav>", 1)[0]
            for page, rpc in UI_PAGES.items():
                allowed = ROLES.index(role) >= ROLES.index(LEAST_ROLE[rpc])
                assert (f'href="{page}?' in nav) == allowed, (role, page)
        finally:
            await client.close()


async def test_an_agent_votes_on_a_memory_of_its_workspace(roles: Roles) -> None:
    assert LEAST_ROLE[FEEDBACK] == "agent"
    code, details = await roles.call(methods()[FEEDBACK], "agent")
    assert code == grpc.StatusCode.OK, details
