"""Administration: who a token is, workspaces, tokens, the redaction rescan, failed embeddings and
consolidation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import grpc
import structlog

from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_gateway.backends import LONG_RUN_TIMEOUT_S, call, streamed
from mnemo_gateway.errors import CallError
from mnemo_gateway.operations.base import OperationsBase
from mnemo_gateway.operations.convert import check_text, checked, plain, token_json, workspace_json
from mnemo_gateway.schemas import ConsolidateInput, TokenInput, WorkspaceInput
from mnemo_platform import CallContext

log = structlog.get_logger("mnemo.gateway")

# How long authentication waits for search before asking ingest: every request waits this long
# while search is stalled (one that refuses connections fails at once).
AUTH_FIRST_TRY_S = 2.0
# Search gave no answer: the token was not judged, so ask ingest.
_NO_ANSWER = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


class AdminOperations(OperationsBase):
    """Calls about the installation rather than one memory; the services check the caller's role."""

    async def authenticate(self, token: str, request_id: str) -> CallContext:
        """The principal a bearer token stands for; UNAUTHENTICATED when it is not a live token."""
        check_text(token, "token")
        try:
            if self.backends.search_failing():
                # Skip the retries a call would spend on a channel known to be down.
                raise CallError(grpc.StatusCode.UNAVAILABLE, "search is unreachable", 0)
            record = (
                await call(
                    partial(self.backends.search.Authenticate, timeout=AUTH_FIRST_TRY_S),
                    search_pb.AuthenticateRequest(token=token),
                )
            ).token
        except CallError as exc:
            if exc.code not in _NO_ANSWER:
                raise
            # Search is down or stalled: ingest reads the same tokens table, so a revoked token is
            # refused there just the same, and writes go on without search.
            log.warning("authenticated_through_ingest", search_error=exc.code.name)
            record = (await call(self.backends.ingest.Authenticate, ingest_pb.AuthenticateRequest(token=token))).token
        return CallContext(
            principal=record.principal,
            request_id=request_id,
            role=record.role,
            workspaces=tuple(record.workspaces),
            token_id=record.id,
        )

    async def add_workspace(self, args: WorkspaceInput) -> dict[str, Any]:
        checked(args)
        response = await call(
            self.backends.ingest.AddWorkspace, ingest_pb.AddWorkspaceRequest(root_path=args.path, name=args.name)
        )
        return {"workspace": workspace_json(response.workspace), "created": response.created}

    async def list_workspaces(self) -> dict[str, Any]:
        response = await call(self.backends.search.ListWorkspaces, search_pb.ListWorkspacesRequest())
        return {"workspaces": [workspace_json(ws) for ws in response.workspaces]}

    async def create_token(self, args: TokenInput) -> dict[str, Any]:
        checked(args)
        response = await call(
            self.backends.ingest.CreateToken,
            ingest_pb.CreateTokenRequest(
                principal=args.principal, role=args.role, workspaces=args.workspaces, label=args.label
            ),
        )
        return {"token": token_json(response.token), "secret": response.secret}

    async def list_tokens(self) -> dict[str, Any]:
        response = await call(self.backends.search.ListTokens, search_pb.ListTokensRequest())
        return {"tokens": [token_json(t) for t in response.tokens]}

    async def revoke_token(self, token_id: str) -> dict[str, Any]:
        check_text(token_id, "id")
        response = await call(self.backends.ingest.RevokeToken, ingest_pb.RevokeTokenRequest(id=token_id))
        return {"token": token_json(response.token)}

    async def redact_rescan(self, workspace: str | None, dry_run: bool) -> AsyncIterator[dict[str, Any]]:
        """Streams one JSON object per memory scanned, then the totals (done=true)."""
        check_text(workspace, "workspace")
        request = ingest_pb.RescanRedactionsRequest(workspace=workspace or "", dry_run=dry_run)
        async for message in streamed(self.backends.ingest.RescanRedactions(request)):
            yield plain(message)

    async def retry_embeddings(self, workspace: str | None) -> dict[str, Any]:
        """Queues failed chunks again: {"requeued": n}."""
        check_text(workspace, "workspace")
        request = ingest_pb.RetryEmbeddingsRequest(workspace=workspace or "")
        response = await call(self.backends.ingest.RetryEmbeddings, request)
        return {"requeued": response.requeued}

    async def consolidate(self, args: ConsolidateInput) -> dict[str, Any]:
        """Looks for near-duplicates and opens merge proposals; one pass per workspace."""
        checked(args)
        check_text(args.workspace, "workspace")
        request = ingest_pb.ConsolidateRequest(workspace=args.workspace or "", dry_run=args.dry_run, full=args.full)
        # A unary call gets the channel's default deadline unless it asks for one; a full pass over a
        # large workspace takes minutes (the channel's service config allows it the long one).
        response = await call(partial(self.backends.ingest.Consolidate, timeout=LONG_RUN_TIMEOUT_S), request)
        return {"passes": [plain(p) for p in response.passes]}
