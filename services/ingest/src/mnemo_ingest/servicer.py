"""IngestService: the gRPC adapter over the write side (request -> domain call -> response)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from mnemo.ingest.v1 import ingest_service_pb2 as pb
from mnemo.ingest.v1 import ingest_service_pb2_grpc as pb_grpc
from mnemo_embed import Embedder
from mnemo_ingest.activity import WriteActivity
from mnemo_ingest.admin import Admin
from mnemo_ingest.consolidate import Consolidator, Merge, Pass
from mnemo_ingest.corrections import Corrections
from mnemo_ingest.feedback import Feedback, check_note
from mnemo_ingest.imports import Decided, ImportBatches, parse_batch_id
from mnemo_ingest.rescan import Rescan, RescanSummary
from mnemo_ingest.restore import MAX_RECORDS, Restored, Restores, check_header
from mnemo_ingest.review import Decision, Review, check_proposal, parse_proposal_id
from mnemo_ingest.steps import Steps
from mnemo_ingest.validation import Draft, check_reason, check_write
from mnemo_ingest.writes import MAX_BATCH, Writes, Written, check_edit
from mnemo_platform import FailedPrecondition, InvalidArgument, MnemoError, Unauthenticated, enum_label, enum_value
from mnemo_store import authenticate
from mnemo_store import imports as imports_db
from mnemo_wire import (
    ContentSettings,
    TrustSettings,
    memory_message,
    parse_memory_id,
    proposal_message,
    timestamp,
    token_message,
    tombstone_message,
    workspace_message,
)


class IngestServicer(pb_grpc.IngestServiceServicer):
    def __init__(
        self,
        pool: asyncpg.Pool,
        embedder: Embedder,
        trust: TrustSettings | None = None,
        content: ContentSettings | None = None,
        activity: WriteActivity | None = None,
        consolidator: Consolidator | None = None,
        write_pool: asyncpg.Pool | None = None,
    ) -> None:
        self.activity = activity or WriteActivity()
        self.max_content_bytes = (content or ContentSettings()).max_content_bytes
        self.trust = trust or TrustSettings()
        steps = Steps(embedder, self.trust)
        # New memories' statements on their own pool, whose plans are reused (mnemo_ingest.writes.WRITE_SESSION).
        self.writes = Writes(write_pool or pool, steps)
        self.corrections = Corrections(pool, steps)
        self.admin = Admin(pool)
        self.imports = ImportBatches(pool, steps)
        self.pool = pool
        self.rescan = Rescan(pool, steps)
        self.restores = Restores(pool, steps)
        self.feedback = Feedback(pool)
        self.review = Review(pool, steps, self.corrections, self.imports, self.max_content_bytes)
        self.consolidator = consolidator

    def _memory(self, row: asyncpg.Record) -> Any:
        return memory_message(row, with_content=True, trust=self.trust)

    async def WriteMemory(self, request: pb.WriteMemoryRequest, context: Any) -> pb.WriteMemoryResponse:
        with self.activity.writing():
            written = await self.writes.write(request.workspace, check_write(request, self.max_content_bytes))
        return pb.WriteMemoryResponse(
            memory=self._memory(written.memory), outcome=enum_value(pb.WriteOutcome, written.outcome, "outcome")
        )

    async def WriteMemories(self, request: pb.WriteMemoriesRequest, context: Any) -> pb.WriteMemoriesResponse:
        if len(request.items) > MAX_BATCH:
            raise InvalidArgument(f"{len(request.items)} items in one call; at most {MAX_BATCH}")
        items: list[tuple[str, Draft | MnemoError]] = []
        with self.activity.writing(batch=True):
            for item in request.items:
                try:
                    items.append((item.workspace, check_write(item, self.max_content_bytes)))
                except MnemoError as exc:
                    items.append((item.workspace, exc))
            results = await self.writes.write_many(items)
        return pb.WriteMemoriesResponse(results=[self._result(r) for r in results])

    def _result(self, result: Written | MnemoError) -> pb.WriteResult:
        if isinstance(result, MnemoError):
            return pb.WriteResult(
                error=pb.ItemError(code=result.code.name, reason=result.reason, message=result.message)
            )
        outcome = enum_value(pb.WriteOutcome, result.outcome, "outcome")
        return pb.WriteResult(memory=self._memory(result.memory), outcome=outcome)

    async def RestoreMemories(self, request: pb.RestoreMemoriesRequest, context: Any) -> pb.RestoreMemoriesResponse:
        if len(request.records) > MAX_RECORDS:
            raise InvalidArgument(f"{len(request.records)} records in one call; at most {MAX_RECORDS}")
        header = check_header(request.header)
        with self.activity.writing(batch=True):
            results = await self.restores.restore(header, [(r.line, r.record) for r in request.records])
        return pb.RestoreMemoriesResponse(results=[_restored(r) for r in results])

    async def UpdateMemory(self, request: pb.UpdateMemoryRequest, context: Any) -> pb.UpdateMemoryResponse:
        memory_id = parse_memory_id(request.id)
        edit = check_edit(
            request.content,
            self.max_content_bytes,
            title=request.title if request.HasField("title") else None,
            tags=list(request.tags) if request.replace_tags else None,
            metadata=request.metadata if request.HasField("metadata") else None,
            expected_version=request.expected_version,
        )
        written = await self.writes.update(request.workspace, memory_id, edit)
        return pb.UpdateMemoryResponse(
            memory=self._memory(written.memory), outcome=enum_value(pb.WriteOutcome, written.outcome, "outcome")
        )

    async def AddWorkspace(self, request: pb.AddWorkspaceRequest, context: Any) -> pb.AddWorkspaceResponse:
        row, created = await self.admin.add_workspace(request.root_path, request.name)
        return pb.AddWorkspaceResponse(workspace=workspace_message(row), created=created)

    async def SupersedeMemory(self, request: pb.SupersedeMemoryRequest, context: Any) -> pb.SupersedeMemoryResponse:
        old_id = parse_memory_id(request.id)
        reason = check_reason(request.reason, required=False)
        if request.successor.import_batch:
            raise InvalidArgument("a successor cannot join an import batch; import it, then supersede")
        draft = check_write(request.successor, self.max_content_bytes)
        restated = (bool(request.successor.kind), bool(request.successor.tags))
        pair = await self.corrections.supersede(request.workspace, old_id, draft, reason, restated)
        return pb.SupersedeMemoryResponse(superseded=self._memory(pair.old), successor=self._memory(pair.new))

    async def PromoteMemory(self, request: pb.PromoteMemoryRequest, context: Any) -> pb.PromoteMemoryResponse:
        old_id = parse_memory_id(request.id)
        reason = check_reason(request.reason, required=True)
        assert reason is not None
        pair = await self.corrections.promote(request.workspace, old_id, reason)
        return pb.PromoteMemoryResponse(promoted=self._memory(pair.new), original=self._memory(pair.old))

    async def RetractMemory(self, request: pb.RetractMemoryRequest, context: Any) -> pb.RetractMemoryResponse:
        memory_id = parse_memory_id(request.id)
        reason = check_reason(request.reason, required=True)
        assert reason is not None
        return pb.RetractMemoryResponse(
            memory=self._memory(await self.corrections.retract(request.workspace, memory_id, reason))
        )

    async def ConfirmMemory(self, request: pb.ConfirmMemoryRequest, context: Any) -> pb.ConfirmMemoryResponse:
        memory_id = parse_memory_id(request.id)
        reason = check_reason(request.reason, required=False)
        row, changed = await self.corrections.confirm(request.workspace, memory_id, reason)
        outcome = pb.WRITE_OUTCOME_NEW_VERSION if changed else pb.WRITE_OUTCOME_UNCHANGED
        return pb.ConfirmMemoryResponse(memory=self._memory(row), outcome=outcome)

    async def DeleteMemory(self, request: pb.DeleteMemoryRequest, context: Any) -> pb.DeleteMemoryResponse:
        memory_id = parse_memory_id(request.id)
        reason = check_reason(request.reason, required=True)
        assert reason is not None
        tombstone = await self.corrections.delete(request.workspace, memory_id, reason)
        return pb.DeleteMemoryResponse(tombstone=tombstone_message(tombstone))

    async def RestoreMemory(self, request: pb.RestoreMemoryRequest, context: Any) -> pb.RestoreMemoryResponse:
        memory_id = parse_memory_id(request.id)
        return pb.RestoreMemoryResponse(
            memory=self._memory(await self.corrections.restore(request.workspace, memory_id))
        )

    async def PurgeMemory(self, request: pb.PurgeMemoryRequest, context: Any) -> pb.PurgeMemoryResponse:
        memory_id = parse_memory_id(request.id)
        reason = check_reason(request.reason, required=False)
        tombstone = await self.corrections.purge(request.workspace, memory_id, reason, request.force)
        return pb.PurgeMemoryResponse(tombstone=tombstone_message(tombstone))

    async def RetryEmbeddings(self, request: pb.RetryEmbeddingsRequest, context: Any) -> pb.RetryEmbeddingsResponse:
        return pb.RetryEmbeddingsResponse(requeued=await self.admin.retry_embeddings(request.workspace.strip()))

    async def RecordFeedback(self, request: pb.RecordFeedbackRequest, context: Any) -> pb.RecordFeedbackResponse:
        memory_id = parse_memory_id(request.id)
        vote = _vote(request.vote)
        note = check_note(request.note)
        successor_id = _successor_id(request.successor_id)
        if successor_id is not None and vote != "outdated":
            raise InvalidArgument(f"successor_id goes with an outdated vote only; this vote is {vote}")
        voted = await self.feedback.record(request.workspace, memory_id, vote, note, successor_id)
        row = voted.feedback
        return pb.RecordFeedbackResponse(
            feedback=pb.Feedback(
                memory_id=str(row["memory_id"]),
                workspace_id=row["workspace_id"],
                principal=row["principal"],
                vote=enum_value(pb.FeedbackVote, row["vote"], "vote"),
                note=row["note"],
                created_at=timestamp(row["created_at"]),
                updated_at=timestamp(row["updated_at"]),
            ),
            replaced=enum_value(pb.FeedbackVote, voted.replaced or "", "replaced"),
            feedback_factor=voted.factor,
            voters=voted.voters,
            memory=self._memory(voted.memory),
            proposal_id=str(voted.proposal["id"]) if voted.proposal is not None else "",
            proposal_created=voted.proposal_created,
            unchanged=voted.unchanged,
        )

    async def RescanRedactions(
        self, request: pb.RescanRedactionsRequest, context: Any
    ) -> AsyncIterator[pb.RescanProgress]:
        async for item in self.rescan.run(request.workspace, request.dry_run):
            if isinstance(item, RescanSummary):
                yield pb.RescanProgress(done=True, total=item.total, changed=item.changed, findings=dict(item.findings))
                continue
            index, total, one = item
            yield pb.RescanProgress(
                memory_id=str(one.memory_id),
                workspace_id=one.workspace_id,
                kinds=one.kinds,
                versions_scrubbed=one.versions_scrubbed,
                new_version=one.new_version,
                index=index,
                total=total,
            )

    async def Consolidate(self, request: pb.ConsolidateRequest, context: Any) -> pb.ConsolidateResponse:
        if self.consolidator is None:
            raise FailedPrecondition("this ingest process runs no consolidation")
        passes = await self.consolidator.run(request.workspace, request.dry_run, request.full)
        return pb.ConsolidateResponse(passes=[_pass(p) for p in passes])

    async def _batch(self, row: asyncpg.Record) -> pb.ImportBatch:
        message = pb.ImportBatch(
            id=str(row["id"]),
            workspace_id=row["workspace_id"],
            source=row["source"],
            origin=row["origin"],
            staged=row["staged"],
            state=row["state"],
            created_by=row["created_by"],
            decided_by=row["decided_by"] or "",
            memories=await imports_db.batch_counts(self.pool, row["id"]),
        )
        message.created_at.FromDatetime(row["created_at"])
        if row["decided_at"] is not None:
            message.decided_at.FromDatetime(row["decided_at"])
        return message

    async def StartImportBatch(self, request: pb.StartImportBatchRequest, context: Any) -> pb.StartImportBatchResponse:
        row = await self.imports.start(request.workspace, request.source, request.origin, request.staged)
        return pb.StartImportBatchResponse(batch=await self._batch(row))

    async def AcceptImportBatch(
        self, request: pb.AcceptImportBatchRequest, context: Any
    ) -> pb.AcceptImportBatchResponse:
        batch_id = parse_batch_id(request.id)
        reason = check_reason(request.reason, required=False)
        decided: Decided = await self.imports.accept(request.workspace, batch_id, reason)
        return pb.AcceptImportBatchResponse(
            batch=await self._batch(decided.batch), accepted=decided.changed, held=decided.held
        )

    async def RollbackImportBatch(
        self, request: pb.RollbackImportBatchRequest, context: Any
    ) -> pb.RollbackImportBatchResponse:
        batch_id = parse_batch_id(request.id)
        reason = check_reason(request.reason, required=False)
        decided = await self.imports.rollback(request.workspace, batch_id, reason)
        return pb.RollbackImportBatchResponse(batch=await self._batch(decided.batch), removed=decided.changed)

    async def ProposeChange(self, request: pb.ProposeChangeRequest, context: Any) -> pb.ProposeChangeResponse:
        asked = check_proposal(request, self.max_content_bytes)
        row, created = await self.review.propose(request.workspace, asked)
        return pb.ProposeChangeResponse(proposal=proposal_message(row), created=created)

    def _decided(self, decision: Decision) -> tuple[Any, list[Any]]:
        return proposal_message(decision.proposal), [self._memory(m) for m in decision.memories]

    async def AcceptProposal(self, request: pb.AcceptProposalRequest, context: Any) -> pb.AcceptProposalResponse:
        proposal_id = parse_proposal_id(request.id)
        reason = check_reason(request.reason, required=False)
        proposal, memories = self._decided(await self.review.accept(request.workspace, proposal_id, reason))
        return pb.AcceptProposalResponse(proposal=proposal, memories=memories)

    async def RejectProposal(self, request: pb.RejectProposalRequest, context: Any) -> pb.RejectProposalResponse:
        proposal_id = parse_proposal_id(request.id)
        reason = check_reason(request.reason, required=True)
        assert reason is not None
        row = await self.review.reject(request.workspace, proposal_id, reason)
        return pb.RejectProposalResponse(proposal=proposal_message(row))

    async def ReverseProposal(self, request: pb.ReverseProposalRequest, context: Any) -> pb.ReverseProposalResponse:
        proposal_id = parse_proposal_id(request.id)
        reason = check_reason(request.reason, required=True)
        assert reason is not None
        proposal, memories = self._decided(await self.review.reverse(request.workspace, proposal_id, reason))
        return pb.ReverseProposalResponse(proposal=proposal, memories=memories)

    async def CreateToken(self, request: pb.CreateTokenRequest, context: Any) -> pb.CreateTokenResponse:
        row, secret = await self.admin.create_token(
            request.principal, request.role, list(request.workspaces), request.label
        )
        return pb.CreateTokenResponse(token=token_message(row), secret=secret)

    async def RevokeToken(self, request: pb.RevokeTokenRequest, context: Any) -> pb.RevokeTokenResponse:
        return pb.RevokeTokenResponse(token=token_message(await self.admin.revoke_token(request.id)))

    async def Authenticate(self, request: pb.AuthenticateRequest, context: Any) -> pb.AuthenticateResponse:
        # The same lookup as search's, on the same table: a token revoked is refused by both at once.
        row = await authenticate(self.pool, request.token.strip())
        if row is None:
            raise Unauthenticated("the bearer token is unknown, malformed or revoked")
        return pb.AuthenticateResponse(token=token_message(row))


def _successor_id(value: str) -> uuid.UUID | None:
    if not value:
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        shown = value[:60] + ("…" if len(value) > 60 else "")
        raise InvalidArgument(f"successor_id {shown!r} is not a memory id (a uuid)") from None


def _vote(value: int) -> str:
    """The vote's label; a missing or unknown vote is refused naming the ones there are."""
    try:
        label = enum_label(pb.FeedbackVote, value)
    except ValueError:
        label = ""
    if not label:
        labels = ", ".join(enum_label(pb.FeedbackVote, v) for v in pb.FeedbackVote.values() if v)
        raise InvalidArgument(f"vote must be one of {labels}; got {value}" if value else f"vote is required: {labels}")
    return label


def _restored(result: Restored) -> pb.RestoreResult:
    """One record's answer; an error names the record's line, as every message about a file does."""
    answer = pb.RestoreResult(line=result.line, type=result.type, id=result.id)
    if result.error is not None:
        answer.error.CopyFrom(
            pb.ItemError(
                code=result.error.code.name,
                reason=result.error.reason,
                message=f"line {result.line}: {result.error.message}",
            )
        )
    elif result.outcome is not None:
        answer.outcome = enum_value(pb.RestoreOutcome, result.outcome, "outcome")
    return answer


def _pass(one: Pass) -> pb.ConsolidationPass:
    return pb.ConsolidationPass(
        workspace_id=one.workspace_id,
        compared=one.compared,
        pairs=one.pairs,
        merges=[_merge(m) for m in one.merges],
        full=one.full,
        dry_run=one.dry_run,
        seconds=one.seconds,
    )


def _merge(merge: Merge) -> pb.ConsolidationMerge:
    return pb.ConsolidationMerge(
        proposal_id=str(merge.proposal_id) if merge.proposal_id else "",
        created=merge.created,
        memory_ids=[str(i) for i in merge.memory_ids],
        reason=merge.reason,
        pairs=[pb.ConsolidationPair(a=str(p.a), b=str(p.b), cosine=p.cosine, jaccard=p.jaccard) for p in merge.pairs],
        merged_text=merge.change.get("merged_text", ""),
    )
