"""Corrections: supersede, retract, confirm, delete, promote, restore, purge; and what they leave behind
(a memory's history, the audit log and its hash chains)."""

from __future__ import annotations

from typing import Any

from mnemo.common.v1 import common_pb2
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_gateway.backends import call
from mnemo_gateway.operations.base import OperationsBase
from mnemo_gateway.operations.convert import (
    check_text,
    checked,
    event_json,
    iso,
    memory_json,
    plain,
    struct,
    timestamp,
    tombstone_json,
    written_json,
)
from mnemo_gateway.schemas import (
    ConfirmInput,
    FeedbackInput,
    PurgeInput,
    ReasonInput,
    SupersedeInput,
    WorkspaceOnlyInput,
)
from mnemo_platform import enum_label, enum_value


class CorrectionOperations(OperationsBase):
    """Each correction changes a memory's status (or erases it) and records who did it and why."""

    async def supersede(
        self, memory_id: str, args: SupersedeInput, url_workspace: str | None, provenance: str
    ) -> dict[str, Any]:
        checked(args)
        check_text(memory_id, "id")
        successor = ingest_pb.WriteMemoryRequest(
            kind=enum_value(common_pb2.MemoryKind, args.kind or "", "kind"),
            title=args.title,
            content=args.content,
            tags=args.tags or [],
            metadata=struct(args.metadata),
            source_uri=args.source_uri,
            provenance=enum_value(common_pb2.Provenance, args.provenance or provenance, "provenance"),
            valid_from=timestamp(args.valid_from),
        )
        request = ingest_pb.SupersedeMemoryRequest(
            workspace=self.workspace(args.workspace, url_workspace),
            id=memory_id,
            successor=successor,
            reason=args.reason,
        )
        response = await self._call(self.backends.ingest.SupersedeMemory, request)
        return {
            "superseded": memory_json(response.superseded, with_content=False),
            "successor": memory_json(response.successor, with_content=False),
        }

    async def retract(self, memory_id: str, args: ReasonInput, url_workspace: str | None) -> dict[str, Any]:
        checked(args)
        check_text(memory_id, "id")
        request = ingest_pb.RetractMemoryRequest(
            workspace=self.workspace(args.workspace, url_workspace), id=memory_id, reason=args.reason
        )
        response = await self._call(self.backends.ingest.RetractMemory, request)
        return {"memory": memory_json(response.memory, with_content=False)}

    async def confirm(self, memory_id: str, args: ConfirmInput) -> dict[str, Any]:
        checked(args)
        check_text(memory_id, "id")
        request = ingest_pb.ConfirmMemoryRequest(
            workspace=self.workspace(args.workspace), id=memory_id, reason=args.reason
        )
        response = await self._call(self.backends.ingest.ConfirmMemory, request)
        return written_json(response)

    async def delete(self, memory_id: str, args: ReasonInput, url_workspace: str | None) -> dict[str, Any]:
        checked(args)
        check_text(memory_id, "id")
        request = ingest_pb.DeleteMemoryRequest(
            workspace=self.workspace(args.workspace, url_workspace), id=memory_id, reason=args.reason
        )
        response = await self._call(self.backends.ingest.DeleteMemory, request)
        return {"tombstone": tombstone_json(response.tombstone)}

    async def promote(self, memory_id: str, args: ReasonInput) -> dict[str, Any]:
        checked(args)
        check_text(memory_id, "id")
        request = ingest_pb.PromoteMemoryRequest(
            workspace=self.workspace(args.workspace), id=memory_id, reason=args.reason
        )
        response = await self._call(self.backends.ingest.PromoteMemory, request)
        return {
            "promoted": memory_json(response.promoted, with_content=False),
            "original": memory_json(response.original, with_content=False),
        }

    async def restore(self, memory_id: str, args: WorkspaceOnlyInput) -> dict[str, Any]:
        checked(args)
        check_text(memory_id, "id")
        request = ingest_pb.RestoreMemoryRequest(workspace=self.workspace(args.workspace), id=memory_id)
        response = await self._call(self.backends.ingest.RestoreMemory, request)
        return {"memory": memory_json(response.memory, with_content=False)}

    async def purge(self, memory_id: str, args: PurgeInput) -> dict[str, Any]:
        checked(args)
        check_text(memory_id, "id")
        request = ingest_pb.PurgeMemoryRequest(
            workspace=self.workspace(args.workspace), id=memory_id, reason=args.reason, force=args.force
        )
        response = await self._call(self.backends.ingest.PurgeMemory, request)
        return {"tombstone": tombstone_json(response.tombstone)}

    async def feedback(self, memory_id: str, args: FeedbackInput, url_workspace: str | None) -> dict[str, Any]:
        """A vote on a memory; the memory's factor after it, and the proposal it opened or joined."""
        checked(args)
        check_text(memory_id, "id")
        request = ingest_pb.RecordFeedbackRequest(
            workspace=self.workspace(args.workspace, url_workspace),
            id=memory_id,
            vote=enum_value(ingest_pb.FeedbackVote, args.vote, "vote"),
            note=args.note,
            successor_id=args.successor_id,
        )
        response = await self._call(self.backends.ingest.RecordFeedback, request)
        vote = response.feedback
        return {
            "feedback": {
                "memory_id": vote.memory_id,
                "workspace_id": vote.workspace_id,
                "principal": vote.principal,
                "vote": enum_label(ingest_pb.FeedbackVote, vote.vote),
                "note": vote.note,
                "created_at": iso(vote.created_at),
                "updated_at": iso(vote.updated_at),
            },
            "replaced": enum_label(ingest_pb.FeedbackVote, response.replaced) or None,
            "unchanged": response.unchanged,
            "feedback_factor": round(response.feedback_factor, 4),
            "voters": response.voters,
            "memory": memory_json(response.memory, with_content=False),
            "proposal": {"id": response.proposal_id, "created": response.proposal_created}
            if response.proposal_id
            else None,
        }

    async def history(
        self,
        memory_id: str,
        workspace: str | None,
        url_workspace: str | None,
        page_size: int = 0,
        page_token: str = "",
    ) -> dict[str, Any]:
        for value, field in ((memory_id, "id"), (workspace, "workspace"), (page_token, "page_token")):
            check_text(value, field)
        request = search_pb.GetHistoryRequest(
            workspace=self.workspace(workspace, url_workspace), id=memory_id, page_size=page_size, page_token=page_token
        )
        response = await self._call(self.backends.search.GetHistory, request)
        return {
            "next_page_token": response.next_page_token,
            "memory": memory_json(response.memory, with_content=False),
            "versions": [
                {**plain(v), "recorded_from": iso(v.recorded_from), "recorded_to": iso(v.recorded_to)}
                for v in response.versions
            ],
            "states": [
                {
                    **plain(st),
                    "status": enum_label(common_pb2.MemoryStatus, st.status),
                    "valid_from": iso(st.valid_from),
                    "valid_to": iso(st.valid_to),
                    "recorded_from": iso(st.recorded_from),
                    "recorded_to": iso(st.recorded_to),
                }
                for st in response.states
            ],
            "events": [event_json(e) for e in response.events],
        }

    async def audit_log(self, workspace: str | None, memory_id: str, page_size: int, page_token: str) -> dict[str, Any]:
        for value, field in ((workspace, "workspace"), (memory_id, "memory"), (page_token, "page_token")):
            check_text(value, field)
        request = search_pb.ListAuditEventsRequest(
            workspace=self.workspace(workspace), memory_id=memory_id, page_size=page_size, page_token=page_token
        )
        response = await self._call(self.backends.search.ListAuditEvents, request)
        return {"events": [event_json(e) for e in response.events], "next_page_token": response.next_page_token}

    async def audit_verify(self, workspace: str | None) -> dict[str, Any]:
        check_text(workspace, "workspace")
        response = await call(self.backends.search.VerifyAudit, search_pb.VerifyAuditRequest(workspace=workspace or ""))
        data = plain(response)
        data["events_checked"] = response.events_checked
        data["broken_event_id"] = response.broken_event_id
        return data
