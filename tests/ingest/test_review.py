"""Proposals over real gRPC: every kind accepted and reversed, decisions refused on bad input with
nothing applied, the proposals the services open themselves, and the queue's reads."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import struct_pb2

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from tests.helpers import Clients

pytestmark = pytest.mark.asyncio(loop_scope="session")

ACTIVE = common_pb2.MEMORY_STATUS_ACTIVE
CANDIDATE = common_pb2.MEMORY_STATUS_CANDIDATE
CONFIRMED = common_pb2.MEMORY_STATUS_CONFIRMED
SUPERSEDED = common_pb2.MEMORY_STATUS_SUPERSEDED
RETRACTED = common_pb2.MEMORY_STATUS_RETRACTED
APPLIED = common_pb2.PROPOSAL_STATE_APPLIED
REVERSED = common_pb2.PROPOSAL_STATE_REVERSED


def change(**fields: Any) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(fields)
    return message


async def propose(c: Clients, ws: str, kind: int, memory_ids: list[str], **fields: Any) -> common_pb2.Proposal:
    response = await c.ingest.ProposeChange(
        ingest_pb.ProposeChangeRequest(
            workspace=ws,
            kind=kind,
            memory_ids=memory_ids,
            reason=fields.pop("reason", "a reviewer should look"),
            source=fields.pop("source", common_pb2.PROPOSAL_SOURCE_HUMAN),
            **fields,
        )
    )
    return response.proposal


async def accept(c: Clients, ws: str, proposal_id: str) -> ingest_pb.AcceptProposalResponse:
    return await c.ingest.AcceptProposal(ingest_pb.AcceptProposalRequest(workspace=ws, id=proposal_id, reason="ok"))


async def reverse(c: Clients, ws: str, proposal_id: str) -> ingest_pb.ReverseProposalResponse:
    return await c.ingest.ReverseProposal(
        ingest_pb.ReverseProposalRequest(workspace=ws, id=proposal_id, reason="changed my mind")
    )


async def status(c: Clients, ws: str, memory_id: str) -> int:
    request = search_pb.GetHistoryRequest(workspace=ws, id=memory_id)
    return (await c.search.GetHistory(request)).memory.status


async def test_confirm_accept_and_reverse(hash_clients: Clients) -> None:
    c = hash_clients
    ws = (await c.workspace()).name
    memory = await c.write(ws, "we deploy on fridays never", status=CANDIDATE)
    proposal = await propose(c, ws, common_pb2.PROPOSAL_KIND_CONFIRM, [memory.id])
    assert proposal.state == common_pb2.PROPOSAL_STATE_OPEN and not proposal.stale
    accepted = await accept(c, ws, proposal.id)
    assert accepted.proposal.state == APPLIED
    assert [m.status for m in accepted.memories] == [CONFIRMED]
    assert await status(c, ws, memory.id) == CONFIRMED
    reversed_ = await reverse(c, ws, proposal.id)
    assert reversed_.proposal.state == REVERSED and reversed_.proposal.reverse_reason == "changed my mind"
    assert await status(c, ws, memory.id) == CANDIDATE
    history = await c.search.GetHistory(search_pb.GetHistoryRequest(workspace=ws, id=memory.id))
    assert [s.status for s in history.states] == [CANDIDATE, CONFIRMED, CANDIDATE]
    actions = [e.action for e in history.events]
    assert actions[-4:] == ["confirm", "accept", "revert", "reverse"], actions
