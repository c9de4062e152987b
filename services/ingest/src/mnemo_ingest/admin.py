"""Administration: registering workspaces, creating and revoking tokens, retrying failed embeddings."""

from __future__ import annotations

import asyncpg
import structlog

from mnemo_platform import ALL_WORKSPACES
from mnemo_store import (
    EMBED_CHANNEL,
    GLOBAL_WORKSPACE,
    AuditEvent,
    TokenRow,
    WorkspaceRow,
    add_workspace,
    append_audit_event,
    create_token,
    embed_queue,
    resolve_registered,
    revoke_token,
)

log = structlog.get_logger("mnemo.ingest")


class Admin:
    """The write side of workspaces and tokens, each change audited."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def add_workspace(self, root_path: str, name: str) -> tuple[WorkspaceRow, bool]:
        """Registers a workspace; returns it and whether it was new."""
        async with self.pool.acquire() as conn, conn.transaction():
            row, created = await add_workspace(conn, root_path, name)
            if created:
                await append_audit_event(conn, AuditEvent(row.id, "workspace_add"))
                log.info("workspace_added", workspace=row.id, name=row.name, root=row.root_path)
        return row, created

    async def create_token(self, principal: str, role: str, refs: list[str], label: str) -> tuple[TokenRow, str]:
        """A token bound to the workspaces `refs` name; returns it and its secret (shown once)."""
        async with self.pool.acquire() as conn, conn.transaction():
            # Names and paths become ids now: a token keeps its reach if a workspace is renamed.
            workspaces = [ref if ref == ALL_WORKSPACES else (await resolve_registered(conn, ref)).id for ref in refs]
            row, secret = await create_token(conn, principal, role, workspaces, label)
            await append_audit_event(
                conn,
                AuditEvent(
                    GLOBAL_WORKSPACE,
                    "token_create",
                    details={"token": row.id, "principal": row.principal, "role": row.role, "workspaces": workspaces},
                ),
            )
        log.info("token_created", token=row.id, principal=row.principal, role=row.role, workspaces=workspaces)
        return row, secret

    async def revoke_token(self, token_id: str) -> TokenRow:
        async with self.pool.acquire() as conn, conn.transaction():
            row = await revoke_token(conn, token_id.strip())
            await append_audit_event(
                conn,
                AuditEvent(GLOBAL_WORKSPACE, "token_revoke", details={"token": row.id, "principal": row.principal}),
            )
        log.info("token_revoked", token=row.id, principal=row.principal)
        return row

    async def retry_embeddings(self, ref: str) -> int:
        """Queues the failed chunks of workspace `ref` (every workspace when empty) again and wakes
        the embedding workers; returns how many."""
        workspaces = None
        if ref:
            async with self.pool.acquire() as conn:
                workspaces = [(await resolve_registered(conn, ref)).id]
        count = await embed_queue.requeue_failed(self.pool, workspaces)
        if count:
            await self.pool.execute(f"NOTIFY {EMBED_CHANNEL}")
        log.info("failed_embeddings_requeued", count=count, workspace=workspaces[0] if workspaces else "*")
        return count
