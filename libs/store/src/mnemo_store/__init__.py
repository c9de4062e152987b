"""Mnemo's PostgreSQL layer: pool, migrations, embedded server, workspaces, predicates, audit."""

from mnemo_store.audit import AuditEvent, ChainCheck, append_audit_event, event_hash, verify_chains
from mnemo_store.database import check_server_version, instrument_asyncpg, open_pool
from mnemo_store.embedded import EmbeddedPostgres
from mnemo_store.embedding_space import (
    EmbeddingSpaceMismatch,
    ensure_embedding_space,
    read_embedding_space,
)
from mnemo_store.migrations import MigrationError, apply_migrations, load_migrations
from mnemo_store.predicates import ALL_STATUSES, VISIBLE_STATUSES, Params, Scope, Scoped, build_scope
from mnemo_store.rows import (
    CONTENT_JOIN,
    MEMORY_COLUMNS,
    from_timestamp,
    memory_message,
    parse_memory_id,
    struct,
    timestamp,
    token_message,
    workspace_message,
)
from mnemo_store.setup import prepare_database
from mnemo_store.tokens import (
    TokenRow,
    admin_token_exists,
    authenticate,
    bootstrap_admin_token,
    create_token,
    list_tokens,
    revoke_token,
)
from mnemo_store.workspaces import (
    GLOBAL_WORKSPACE,
    WorkspaceRow,
    add_workspace,
    normalize_root,
    resolve_workspace,
)

__all__ = [
    "ALL_STATUSES",
    "CONTENT_JOIN",
    "GLOBAL_WORKSPACE",
    "MEMORY_COLUMNS",
    "VISIBLE_STATUSES",
    "AuditEvent",
    "ChainCheck",
    "EmbeddedPostgres",
    "EmbeddingSpaceMismatch",
    "MigrationError",
    "Params",
    "Scope",
    "Scoped",
    "TokenRow",
    "WorkspaceRow",
    "add_workspace",
    "admin_token_exists",
    "append_audit_event",
    "apply_migrations",
    "authenticate",
    "bootstrap_admin_token",
    "build_scope",
    "check_server_version",
    "create_token",
    "ensure_embedding_space",
    "event_hash",
    "from_timestamp",
    "instrument_asyncpg",
    "list_tokens",
    "load_migrations",
    "memory_message",
    "normalize_root",
    "open_pool",
    "parse_memory_id",
    "prepare_database",
    "read_embedding_space",
    "resolve_workspace",
    "revoke_token",
    "struct",
    "timestamp",
    "token_message",
    "verify_chains",
    "workspace_message",
]
