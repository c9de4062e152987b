"""Mnemo's PostgreSQL layer: pool, migrations, embedded server, the workspace wall, predicates, audit, and the
typed SQL of every table (memories, tombstones, import batches, the embedding queue and
export/restore as modules: `from mnemo_store import memories`, `imports`, `embed_queue`, `transfer`)."""

from mnemo_store.access import (
    EVERYWHERE,
    KnownIds,
    Reach,
    caller_reach,
    check_access,
    check_writer,
    reach_in,
    require_everywhere,
    resolve_for_read,
    resolve_for_write,
    resolve_registered,
    workspace_clause,
)
from mnemo_store.audit import (
    AuditEvent,
    ChainCheck,
    ChainHeads,
    anchor_key_path,
    append_audit_event,
    append_audit_events,
    chain_moved,
    configure_anchor_key,
    event_hash,
    prepare_append,
    verify_chains,
)
from mnemo_store.database import (
    check_server_version,
    close_pool,
    instrument_asyncpg,
    open_pool,
    renew_connections,
    unready_reason,
)
from mnemo_store.embedded import EmbeddedPostgres
from mnemo_store.embedding_space import (
    EmbeddingSpaceMismatch,
    ensure_embedding_space,
    read_embedding_space,
)
from mnemo_store.imports import find_batch
from mnemo_store.memories import CONTENT_JOIN, EMBED_CHANNEL, MEMORY_COLUMNS, ChunkRow
from mnemo_store.migrations import MigrationError, apply_migrations, load_migrations
from mnemo_store.params import Params
from mnemo_store.predicates import ALL_STATUSES, VISIBLE_STATUSES, Scope, Scoped, build_scope, chunk_clauses
from mnemo_store.proposals import NewProposal, open_proposal
from mnemo_store.settings import DatabaseSettings, default_data_dir
from mnemo_store.setup import migrate_database, prepare_database
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
    WorkspaceCache,
    WorkspaceRow,
    add_workspace,
    find_workspace,
    list_workspaces,
    normalize_root,
)

__all__ = [
    "ALL_STATUSES",
    "CONTENT_JOIN",
    "EMBED_CHANNEL",
    "EVERYWHERE",
    "GLOBAL_WORKSPACE",
    "MEMORY_COLUMNS",
    "VISIBLE_STATUSES",
    "AuditEvent",
    "ChainCheck",
    "ChainHeads",
    "ChunkRow",
    "DatabaseSettings",
    "EmbeddedPostgres",
    "EmbeddingSpaceMismatch",
    "KnownIds",
    "MigrationError",
    "NewProposal",
    "Params",
    "Reach",
    "Scope",
    "Scoped",
    "TokenRow",
    "WorkspaceCache",
    "WorkspaceRow",
    "add_workspace",
    "admin_token_exists",
    "anchor_key_path",
    "append_audit_event",
    "append_audit_events",
    "apply_migrations",
    "authenticate",
    "bootstrap_admin_token",
    "build_scope",
    "caller_reach",
    "chain_moved",
    "check_access",
    "check_server_version",
    "check_writer",
    "chunk_clauses",
    "close_pool",
    "configure_anchor_key",
    "create_token",
    "default_data_dir",
    "ensure_embedding_space",
    "event_hash",
    "find_batch",
    "find_workspace",
    "instrument_asyncpg",
    "list_tokens",
    "list_workspaces",
    "load_migrations",
    "migrate_database",
    "normalize_root",
    "open_pool",
    "open_proposal",
    "prepare_append",
    "prepare_database",
    "reach_in",
    "read_embedding_space",
    "renew_connections",
    "require_everywhere",
    "resolve_for_read",
    "resolve_for_write",
    "resolve_registered",
    "revoke_token",
    "unready_reason",
    "verify_chains",
    "workspace_clause",
]
