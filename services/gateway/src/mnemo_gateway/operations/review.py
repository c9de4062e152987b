"""Review: the proposals queue (list, one proposal), proposing a change, and deciding one (accept,
reject, reverse; reviewer or admin). docs/review.md is the model."""

from __future__ import annotations

import uuid
from typing import Any

from google.protobuf import json_format

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_gateway.errors import CallError
from mnemo_gateway.operations.base import OperationsBase
from mnemo_gateway.operations.convert import check_text, checked, iso, memory_json, struct
from mnemo_gateway.schemas import ProposalDecisionInput, ProposeInput
from mnemo_platform import enum_label, enum_value


def proposal_json(proposal: common_pb2.Proposal) -> dict[str, Any]:
    return {
        "id": proposal.id,
        "workspace_id": proposal.workspace_id,
        "kind": enum_label(common_pb2.ProposalKind, proposal.kind),
        "memory_ids": list(proposal.memory_ids),
        "change": json_format.MessageToDict(proposal.change),
        "reason": proposal.reason,
        "proposed_by": proposal.proposed_by,
        "source": enum_label(common_pb2.ProposalSource, proposal.source),
        "state": enum_label(common_pb2.ProposalState, proposal.state),
        "stale": proposal.stale,
        "created_at": iso(proposal.created_at),
        "decided_by": proposal.decided_by or None,
        "decided_at": iso(proposal.decided_at) or None,
        "decision_reason": proposal.decision_reason or None,
        "applied": json_format.MessageToDict(proposal.applied) if proposal.HasField("applied") else None,
        "reversed_by": proposal.reversed_by or None,
        "reversed_at": iso(proposal.reversed_at) or None,
        "reverse_reason": proposal.reverse_reason or None,
    }


def check_proposal_id(value: str) -> str:
    """A proposal id is a uuid; anything else is refused here, before a call is made."""
    check_text(value, "id")
    try:
        return str(uuid.UUID(value.strip()))
    except ValueError:
        raise CallError.invalid(f"proposal id {value.strip()[:60]!r} is not a uuid") from None


class ReviewOperations(OperationsBase):
    """Agents and automation propose; a reviewer or admin decides. A decision names the proposal's
    workspace or, without one, finds it among the workspaces the token reaches."""

    async def list_proposals(
        self,
        workspace: str | None,
        state: str,
        kind: str,
        memory_id: str,
        limit: int,
        page_token: str,
    ) -> dict[str, Any]:
        for value, name in ((workspace, "workspace"), (memory_id, "memory_id"), (page_token, "page_token")):
            check_text(value, name)
        request = search_pb.ListProposalsRequest(
            workspace=(workspace or "").strip(),
            state=enum_value(common_pb2.ProposalState, state, "state"),
            kind=enum_value(common_pb2.ProposalKind, kind, "kind"),
            memory_id=memory_id,
            limit=limit,
            page_token=page_token,
        )
        response = await self._call(self.backends.search.ListProposals, request)
        return {
            "proposals": [proposal_json(p) for p in response.proposals],
            "next_page_token": response.next_page_token,
        }

    async def get_proposal(self, proposal_id: str, workspace: str | None) -> dict[str, Any]:
        check_text(workspace, "workspace")
        request = search_pb.GetProposalRequest(workspace=(workspace or "").strip(), id=check_proposal_id(proposal_id))
        response = await self._call(self.backends.search.GetProposal, request)
        return {
            "proposal": proposal_json(response.proposal),
            "memories": [memory_json(m) for m in response.memories],
        }

    async def propose(self, args: ProposeInput, url_workspace: str | None, source: str) -> dict[str, Any]:
        checked(args)
        request = ingest_pb.ProposeChangeRequest(
            workspace=self.workspace(args.workspace, url_workspace),
            kind=enum_value(common_pb2.ProposalKind, args.kind, "kind"),
            memory_ids=args.memory_ids,
            change=struct(args.change),
            reason=args.reason,
            source=enum_value(common_pb2.ProposalSource, source, "source"),
            dedupe_key=args.dedupe_key,
        )
        response = await self._call(self.backends.ingest.ProposeChange, request)
        return {"proposal": proposal_json(response.proposal), "created": response.created}

    async def accept_proposal(self, proposal_id: str, args: ProposalDecisionInput) -> dict[str, Any]:
        request = _decision(ingest_pb.AcceptProposalRequest, proposal_id, args)
        response = await self._call(self.backends.ingest.AcceptProposal, request)
        return {
            "proposal": proposal_json(response.proposal),
            "memories": [memory_json(m, with_content=False) for m in response.memories],
        }

    async def reject_proposal(self, proposal_id: str, args: ProposalDecisionInput) -> dict[str, Any]:
        request = _decision(ingest_pb.RejectProposalRequest, proposal_id, args)
        response = await self._call(self.backends.ingest.RejectProposal, request)
        return {"proposal": proposal_json(response.proposal)}

    async def reverse_proposal(self, proposal_id: str, args: ProposalDecisionInput) -> dict[str, Any]:
        request = _decision(ingest_pb.ReverseProposalRequest, proposal_id, args)
        response = await self._call(self.backends.ingest.ReverseProposal, request)
        return {
            "proposal": proposal_json(response.proposal),
            "memories": [memory_json(m, with_content=False) for m in response.memories],
        }


def _decision(request_type: Any, proposal_id: str, args: ProposalDecisionInput) -> Any:
    """An accept, reject or reverse request: the same three fields, checked the same way."""
    checked(args)
    return request_type(workspace=(args.workspace or "").strip(), id=check_proposal_id(proposal_id), reason=args.reason)
