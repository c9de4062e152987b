"""The REST surface under /api/v1: each route is a thin call into Operations."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, StreamingResponse

from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo_gateway.operations import Operations
from mnemo_gateway.operations.imports import check_batch_id
from mnemo_gateway.schemas import (
    AS_OF_DOC,
    CONTEXT_BUDGET_DOC,
    CONTEXT_SINCE_DOC,
    CONTEXT_TASK_DOC,
    INCLUDE_HISTORY_DOC,
    VALID_AT_DOC,
    WORKSPACE_DOC,
    BatchInput,
    ConfirmInput,
    ConsolidateInput,
    ErrorBody,
    FeedbackInput,
    HarvestedCandidatesInput,
    HarvestedSessionInput,
    HarvestRunInput,
    ImportDecisionInput,
    ImportStartInput,
    Kind,
    ProposalDecisionInput,
    ProposalKind,
    ProposalState,
    ProposeInput,
    PurgeInput,
    ReasonInput,
    RescanInput,
    RestoreInput,
    RetryInput,
    SearchInput,
    SupersedeInput,
    TokenInput,
    UpdateInput,
    WorkspaceInput,
    WorkspaceOnlyInput,
    WriteInput,
)
from mnemo_platform import enum_label

# The write outcomes that stored something (201); the others found it stored already (200).
WROTE = frozenset(
    enum_label(ingest_pb.WriteOutcome, outcome)
    for outcome in (ingest_pb.WRITE_OUTCOME_CREATED, ingest_pb.WRITE_OUTCOME_NEW_VERSION)
)
WorkspaceParam = Annotated[str | None, Query(description=WORKSPACE_DOC)]
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"description": text, "model": ErrorBody}
    for code, text in {
        400: "Invalid input; the body says which field and why",
        404: "No such memory or workspace",
        409: "Conflict: idempotency key reused, version mismatch, a status forbidding the change, a tombstoned source",
        413: "Request body too large",
        503: "A Mnemo service is unavailable",
    }.items()
}


async def _ndjson(stream: AsyncIterator[Any], encode: Callable[[Any], str] = json.dumps) -> StreamingResponse:
    """One JSON line per streamed item (`encode` makes it text; the export's items are JSON already).
    The first item is awaited here, so an error before the stream starts (bad input, a service
    down, a caller not allowed) is a proper 4xx/5xx JSON response, not a broken stream."""
    try:
        first = await anext(stream)
    except StopAsyncIteration:
        first = None

    async def lines() -> AsyncIterator[bytes]:
        if first is not None:
            yield (encode(first) + "\n").encode()
        async for item in stream:
            yield (encode(item) + "\n").encode()

    return StreamingResponse(lines(), media_type="application/x-ndjson")


def build_router(operations: Operations) -> APIRouter:
    router = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES)

    @router.post("/memories", status_code=201, summary="Write a memory")
    async def write_memory(body: WriteInput) -> Any:
        result = await operations.write(body, None, provenance="human")
        return JSONResponse(result, status_code=201 if result["outcome"] in WROTE else 200)

    @router.post("/memories:batch", summary="Write many memories; each item answered in order")
    async def write_memories(body: BatchInput) -> dict[str, Any]:
        return await operations.write_many(body, provenance="human")

    @router.post("/imports", status_code=201, summary="Start an import batch (from another memory tool)")
    async def start_import(body: ImportStartInput) -> dict[str, Any]:
        return await operations.start_import(body)

    @router.post(
        "/imports/{batch_id}/memories:batch",
        summary="Write many memories into an import batch: labelled imported; candidates when the batch is staged",
    )
    async def write_imported(batch_id: str, body: BatchInput) -> dict[str, Any]:
        return await operations.write_many(body, provenance="imported", import_batch=check_batch_id(batch_id))

    @router.post("/imports/{batch_id}/accept", summary="Accept an import batch: candidates become active (reviewer)")
    async def accept_import(batch_id: str, body: ImportDecisionInput) -> dict[str, Any]:
        return await operations.accept_import(batch_id, body)

    @router.post("/imports/{batch_id}/rollback", summary="Roll back an import batch: erase its memories (reviewer)")
    async def rollback_import(batch_id: str, body: ImportDecisionInput) -> dict[str, Any]:
        return await operations.rollback_import(batch_id, body)

    @router.get("/proposals", summary="The review queue: proposals, newest first (reviewer)")
    async def list_proposals(
        workspace: Annotated[
            str | None, Query(description="One workspace; every workspace the token reaches when omitted.")
        ] = None,
        state: Annotated[ProposalState | None, Query(description="Only this state (open for the queue).")] = None,
        kind: Annotated[ProposalKind | None, Query(description="Only this kind.")] = None,
        memory_id: Annotated[str, Query(description="Only proposals touching this memory.")] = "",
        limit: Annotated[
            int, Query(ge=0, le=2**31 - 1, description="Proposals per page (default 50, at most 500).")
        ] = 0,
        page_token: Annotated[str, Query(description="next_page_token of the previous page.")] = "",
    ) -> dict[str, Any]:
        return await operations.list_proposals(workspace, state or "", kind or "", memory_id, limit, page_token)

    @router.get(
        "/proposals/{proposal_id}", summary="One proposal (stale computed now) and its memories as they are now"
    )
    async def get_proposal(
        proposal_id: str,
        workspace: Annotated[
            str | None, Query(description="The proposal's workspace; any the token reaches when omitted.")
        ] = None,
    ) -> dict[str, Any]:
        return await operations.get_proposal(proposal_id, workspace)

    @router.post("/proposals", status_code=201, summary="Propose a change for a reviewer to decide")
    async def propose(body: ProposeInput) -> Any:
        result = await operations.propose(body, None, source="human")
        return JSONResponse(result, status_code=201 if result["created"] else 200)

    @router.post("/proposals/{proposal_id}/accept", summary="Accept a proposal: apply its change atomically (reviewer)")
    async def accept_proposal(proposal_id: str, body: ProposalDecisionInput) -> dict[str, Any]:
        return await operations.accept_proposal(proposal_id, body)

    @router.post("/proposals/{proposal_id}/reject", summary="Reject a proposal, with a reason (reviewer)")
    async def reject_proposal(proposal_id: str, body: ProposalDecisionInput) -> dict[str, Any]:
        return await operations.reject_proposal(proposal_id, body)

    @router.post(
        "/proposals/{proposal_id}/reverse", summary="Reverse an applied proposal, as new audited events (reviewer)"
    )
    async def reverse_proposal(proposal_id: str, body: ProposalDecisionInput) -> dict[str, Any]:
        return await operations.reverse_proposal(proposal_id, body)

    @router.get("/memories", summary="List memories, most recently updated first")
    async def list_memories(
        workspace: WorkspaceParam = None,
        page_size: Annotated[
            int, Query(ge=0, le=2**31 - 1, description="Memories per page (default 10, at most 100).")
        ] = 0,
        page_token: Annotated[str, Query(description="next_page_token of the previous page.")] = "",
        kind: Annotated[list[Kind] | None, Query(description="Only these kinds.")] = None,
        tag: Annotated[list[str] | None, Query(description="Only memories with all these tags.")] = None,
        include_history: Annotated[bool, Query(description=INCLUDE_HISTORY_DOC)] = False,
        as_of: Annotated[datetime | None, Query(description=AS_OF_DOC)] = None,
        valid_at: Annotated[datetime | None, Query(description=VALID_AT_DOC)] = None,
    ) -> dict[str, Any]:
        return await operations.list(
            workspace, page_size, page_token, kind or [], tag or [], include_history, as_of, valid_at
        )

    @router.get("/memories/{memory_id}", summary="Get one memory with its content")
    async def get_memory(
        memory_id: str,
        workspace: WorkspaceParam = None,
        include_history: Annotated[bool, Query(description=INCLUDE_HISTORY_DOC)] = False,
        as_of: Annotated[datetime | None, Query(description=AS_OF_DOC)] = None,
        valid_at: Annotated[datetime | None, Query(description=VALID_AT_DOC)] = None,
    ) -> dict[str, Any]:
        return await operations.get(memory_id, workspace, None, include_history, as_of, valid_at)

    @router.get("/memories/{memory_id}/history", summary="A memory's versions, status changes and audit events")
    async def memory_history(
        memory_id: str,
        workspace: WorkspaceParam = None,
        page_size: Annotated[
            int,
            Query(
                ge=0,
                le=2**31 - 1,
                description="Versions per page (default 100, at most 1,000); a page also stops at 4 MiB of text.",
            ),
        ] = 0,
        page_token: Annotated[
            str, Query(description="next_page_token of the previous page; states and events come on the first.")
        ] = "",
    ) -> dict[str, Any]:
        return await operations.history(memory_id, workspace, None, page_size, page_token)

    @router.post("/memories/{memory_id}/supersede", summary="Replace a belief with a successor")
    async def supersede_memory(memory_id: str, body: SupersedeInput) -> Any:
        return JSONResponse(await operations.supersede(memory_id, body, None, provenance="human"), status_code=201)

    @router.post("/memories/{memory_id}/promote", summary="Share a belief with every workspace (reviewer)")
    async def promote_memory(memory_id: str, body: ReasonInput) -> dict[str, Any]:
        return await operations.promote(memory_id, body)

    @router.post("/memories/{memory_id}/retract", summary="Mark a belief wrong, with no successor")
    async def retract_memory(memory_id: str, body: ReasonInput) -> dict[str, Any]:
        return await operations.retract(memory_id, body, None)

    @router.post(
        "/memories/{memory_id}/feedback",
        summary="Vote on a memory: useful, not-useful, outdated or harmful (one vote per caller, the latest counts)",
    )
    async def memory_feedback(memory_id: str, body: FeedbackInput) -> dict[str, Any]:
        return await operations.feedback(memory_id, body, None)

    @router.post("/memories/{memory_id}/confirm", summary="Confirm an active or candidate memory")
    async def confirm_memory(memory_id: str, body: ConfirmInput) -> dict[str, Any]:
        return await operations.confirm(memory_id, body)

    @router.delete("/memories/{memory_id}", summary="Delete: hidden everywhere, restorable, source tombstoned")
    async def delete_memory(
        memory_id: str,
        reason: Annotated[str, Query(description="Why; kept in the tombstone and the audit log.")],
        workspace: WorkspaceParam = None,
    ) -> dict[str, Any]:
        return await operations.delete(memory_id, ReasonInput(reason=reason, workspace=workspace), None)

    @router.post("/memories/{memory_id}/restore", summary="Undo a deletion that was not purged")
    async def restore_memory(memory_id: str, body: WorkspaceOnlyInput) -> dict[str, Any]:
        return await operations.restore(memory_id, body)

    @router.post("/memories/{memory_id}/purge", summary="Erase content and versions for good (force=true)")
    async def purge_memory(memory_id: str, body: PurgeInput) -> dict[str, Any]:
        return await operations.purge(memory_id, body)

    @router.get("/audit", summary="The audit log, newest first")
    async def audit_log(
        workspace: WorkspaceParam = None,
        memory: Annotated[str, Query(description="Only this memory's events.")] = "",
        page_size: Annotated[int, Query(ge=0, le=2**31 - 1, description="Events per page (default 10).")] = 0,
        page_token: Annotated[str, Query(description="next_page_token of the previous page.")] = "",
    ) -> dict[str, Any]:
        return await operations.audit_log(workspace, memory, page_size, page_token)

    @router.get("/audit/verify", summary="Walk the hash chains; report the first broken link")
    async def audit_verify(
        workspace: Annotated[str | None, Query(description="One workspace's chain; every chain if omitted.")] = None,
    ) -> dict[str, Any]:
        return await operations.audit_verify(workspace)

    @router.patch("/memories/{memory_id}", summary="Update a memory (a new version; the old is kept)")
    async def update_memory(memory_id: str, body: UpdateInput) -> dict[str, Any]:
        return await operations.update(memory_id, body, None)

    @router.post("/search", summary="Hybrid, lexical or semantic search")
    async def search(body: SearchInput) -> dict[str, Any]:
        return await operations.search(body, None)

    @router.post("/harvest/run", summary="Harvest now; streams one JSON line per session, then the totals")
    async def harvest_run(body: HarvestRunInput) -> StreamingResponse:
        return await _ndjson(operations.harvest_run(body.agent, body.ignore_idle, body.session))

    @router.post("/redact/rescan", summary="Re-apply the redaction rules to stored memories; one JSON line per memory")
    async def redact_rescan(body: RescanInput) -> StreamingResponse:
        return await _ndjson(operations.redact_rescan(body.workspace, body.dry_run))

    @router.post(
        "/consolidate",
        summary="Look for near-duplicates inside each workspace and open merge proposals (reviewer); applies nothing",
    )
    async def consolidate(body: ConsolidateInput) -> dict[str, Any]:
        return await operations.consolidate(body)

    @router.get(
        "/export",
        summary="Export memories with their whole history (admin); NDJSON in the export format, header first",
    )
    async def export(
        workspace: Annotated[
            str | None, Query(description="One workspace (id, name or root path); every workspace when omitted.")
        ] = None,
    ) -> StreamingResponse:
        return await _ndjson(operations.export(workspace), encode=str)

    @router.post("/export:restore", summary="Write an export's records back (admin); each answered in order")
    async def restore_export(body: RestoreInput) -> dict[str, Any]:
        return await operations.restore_export(body)

    @router.get(
        "/harvest/placement",
        summary="The workspace a session's directory belongs to, among the caller's (a remote harvester's placement)",
    )
    async def harvest_place(
        path: Annotated[str, Query(max_length=4096, description="The session's recorded working directory.")],
    ) -> dict[str, Any]:
        return await operations.harvest_place(path)

    @router.post("/harvest/sessions", summary="Write one harvested session (a remote harvester; harvester role)")
    async def harvest_write_session(body: HarvestedSessionInput) -> Any:
        result = await operations.harvest_write_session(body)
        return JSONResponse(result, status_code=201 if result["outcome"] in WROTE else 200)

    @router.post(
        "/harvest/candidates", summary="Write a session's DECISION:/LESSON: lines as candidates (harvester role)"
    )
    async def harvest_write_candidates(body: HarvestedCandidatesInput) -> dict[str, Any]:
        return await operations.harvest_write_candidates(body)

    @router.get("/harvest/status", summary="Harvest status per agent: seen, harvested, skipped (why), failed")
    async def harvest_status() -> dict[str, Any]:
        return await operations.harvest_status()

    @router.get("/harvest/sources", summary="Sessions the harvester knows, most recently changed first")
    async def harvest_sources(
        agent: Annotated[str, Query(description="Only this agent's sessions.")] = "",
        state: Annotated[str, Query(description="Only sessions in this state.")] = "",
        page_size: Annotated[int, Query(ge=0, le=500, description="Sources per page (default 50).")] = 0,
        page_token: Annotated[str, Query(description="next_page_token of the previous page.")] = "",
    ) -> dict[str, Any]:
        return await operations.harvest_sources(agent, state, page_size, page_token)

    @router.post("/tokens", status_code=201, summary="Create a bearer token (admin); its secret is shown once")
    async def create_token(body: TokenInput) -> dict[str, Any]:
        return await operations.create_token(body)

    @router.get("/tokens", summary="List tokens (admin): public records, never secrets")
    async def list_tokens() -> dict[str, Any]:
        return await operations.list_tokens()

    @router.delete("/tokens/{token_id}", summary="Revoke a token (admin); effective at once")
    async def revoke_token(token_id: str) -> dict[str, Any]:
        return await operations.revoke_token(token_id)

    @router.get("/workspaces", summary="List workspaces")
    async def list_workspaces() -> dict[str, Any]:
        return await operations.list_workspaces()

    @router.post("/workspaces", status_code=201, summary="Register a workspace by root path or name")
    async def add_workspace(body: WorkspaceInput) -> Any:
        result = await operations.add_workspace(body)
        return JSONResponse(result, status_code=201 if result["created"] else 200)

    @router.get("/context", summary="The wake-up packet: a trust-labelled briefing within a token budget")
    async def context(
        workspace: WorkspaceParam = None,
        budget: Annotated[int | None, Query(description=CONTEXT_BUDGET_DOC)] = None,
        task: Annotated[str, Query(description=CONTEXT_TASK_DOC)] = "",
        since: Annotated[datetime | None, Query(description=CONTEXT_SINCE_DOC)] = None,
    ) -> dict[str, Any]:
        return await operations.context(workspace, None, budget, task, since)

    @router.post("/embeddings:retry", summary="Queue failed chunks for embedding again (admin)")
    async def retry_embeddings(body: RetryInput) -> dict[str, Any]:
        return await operations.retry_embeddings(body.workspace)

    @router.get("/status", summary="Counts, embedding queue and embedder state")
    async def status(workspace: WorkspaceParam = None) -> dict[str, Any]:
        return await operations.status(workspace)

    return router
