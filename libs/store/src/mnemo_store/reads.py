"""The read side's SQL: every statement scoped by the one predicate builder or the access module's clause.

Search (the only reader) calls these; each takes a Scope or a Reach the access module produced, so
no read here can see past the caller's workspaces.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TypeAlias

import asyncpg

from mnemo_store.access import Reach, workspace_clause
from mnemo_store.memories import CONTENT_JOIN, MEMORY_COLUMNS
from mnemo_store.params import Params
from mnemo_store.predicates import Scope, build_scope

Reader: TypeAlias = asyncpg.Connection | asyncpg.Pool


async def read_memory(conn: Reader, scope: Scope, memory_id: uuid.UUID, with_content: bool) -> asyncpg.Record | None:
    """The memory as the scope sees it (its current or as-of version); None when the scope does not see it."""
    params = Params()
    wanted = params.bind(memory_id)
    scoped = build_scope(scope, params, memory="m")
    content = (", v.content", CONTENT_JOIN) if with_content else ("", "")
    return await conn.fetchrow(
        f"SELECT {MEMORY_COLUMNS}{content[0]} FROM {scoped.source} {content[1]} "
        f"WHERE m.id = {wanted} AND {scoped.where}",
        *params.values,
    )


async def memory_within(conn: Reader, reach: Reach, memory_id: uuid.UUID) -> asyncpg.Record | None:
    """The memory's row whatever its status, time or deletion, if it is within `reach` (to say why it is hidden)."""
    params = Params()
    wanted = params.bind(memory_id)
    return await conn.fetchrow(
        f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id = {wanted} "
        f"AND {workspace_clause(reach, params, 'm.workspace_id')}",
        *params.values,
    )


async def list_memories(
    conn: Reader, scope: Scope, limit: int, after: tuple[datetime, str] | None
) -> list[asyncpg.Record]:
    """Up to `limit` memories, most recently updated first, after the (updated_at, id) cursor if given."""
    params = Params()
    scoped = build_scope(scope, params, memory="m")
    cursor = ""
    if after is not None:
        cursor = f"AND (m.updated_at, m.id) < ({params.bind(after[0])}, {params.bind(after[1])}::uuid)"
    return await conn.fetch(
        f"""
        SELECT {MEMORY_COLUMNS} FROM {scoped.source}
        WHERE {scoped.where} {cursor}
        ORDER BY m.updated_at DESC, m.id DESC
        LIMIT {params.bind(limit)}
        """,
        *params.values,
    )


def _of_memory(params: Params, memory_id: uuid.UUID) -> str:
    # A memory's events include those of the memory that superseded it (they name it as successor).
    return f"(memory_id = {params.bind(memory_id)} OR details->>'successor' = {params.bind(str(memory_id))})"


async def audit_events(
    conn: Reader,
    reach: Reach,
    limit: int | None = None,
    memory_id: uuid.UUID | None = None,
    before: int | None = None,
    token_events: bool = True,
    newest_first: bool = True,
) -> list[asyncpg.Record]:
    """Audit events within `reach`, for one memory if given, below event id `before` if given; all if no limit."""
    params = Params()
    clauses = [workspace_clause(reach, params, "workspace_id")]
    if memory_id is not None:
        clauses.append(_of_memory(params, memory_id))
    if before is not None:
        clauses.append(f"id < {params.bind(before)}")
    if not token_events:
        # Token events live in global's chain and name other workspaces' principals and ids.
        clauses.append("action NOT LIKE 'token\\_%'")
    order = "DESC" if newest_first else "ASC"
    bounded = f"LIMIT {params.bind(limit)}" if limit is not None else ""
    return await conn.fetch(
        f"SELECT * FROM audit_events WHERE {' AND '.join(clauses)} ORDER BY id {order} {bounded}",
        *params.values,
    )


@dataclass(frozen=True)
class Counts:
    """What GetStatus reports of the memories and chunks within a reach."""

    memories: int
    pending: int
    embedded: int
    failed: int
    oldest_pending: datetime | None
    last_error: str
    lexical_pending: int
    graph_pending: int


def counts_statement(reach: Reach) -> tuple[str, list[object]]:
    """count_within's one statement and its values. Each count is answered from an index alone
    (migration 0016): the visible memories from `memories_visible`, the vectors in two parts from
    their partial indexes; reading the tables grew with every row (90 ms at 100k notes, 21 now)."""
    params = Params()
    scoped = build_scope(Scope(reach=reach), params, memory="m")
    where_c = workspace_clause(reach, params, "c.workspace_id")
    where_v = workspace_clause(reach, params, "v.workspace_id")
    # Queued chunks are pending or failed; embedded ones are those with a vector.
    queued = f"embed_queue q JOIN chunks c ON c.id = q.chunk_id WHERE {where_c}"
    sql = f"""
        SELECT
          (SELECT count(*) FROM {scoped.source} WHERE {scoped.where}) AS memories,
          (SELECT count(*) FROM {queued} AND NOT q.failed) AS pending,
          (SELECT count(*) FROM chunk_vectors v WHERE {where_v} AND v.indexed)
            + (SELECT count(*) FROM chunk_vectors v WHERE {where_v} AND NOT v.indexed) AS embedded,
          (SELECT count(*) FROM {queued} AND q.failed) AS failed,
          (SELECT min(q.queued_at) FROM {queued} AND NOT q.failed) AS oldest,
          (SELECT q.error FROM {queued} AND q.error IS NOT NULL ORDER BY q.embed_after DESC LIMIT 1) AS last_error,
          (SELECT count(DISTINCT q.chunk_id) FROM lexical_queue q JOIN chunks c ON c.id = q.chunk_id
           WHERE {where_c}) AS lexical_pending,
          (SELECT count(*) FROM chunk_vectors v WHERE {where_v} AND v.indexed AND NOT v.graphed) AS graph_pending
        """
    return sql, params.values


async def count_within(conn: Reader, reach: Reach) -> Counts:
    """Visible memories and chunk embedding states within `reach`, as every other read counts them."""
    sql, values = counts_statement(reach)
    row = await conn.fetchrow(sql, *values)
    assert row is not None  # an aggregate always returns its one row
    return Counts(
        memories=row["memories"],
        pending=row["pending"],
        embedded=row["embedded"],
        failed=row["failed"],
        oldest_pending=row["oldest"],
        last_error=row["last_error"] or "",
        lexical_pending=row["lexical_pending"],
        graph_pending=row["graph_pending"],
    )


# -- the wake-up packet's reads (mnemo_search.context) ---------------------------------------------


async def recent_memories(
    conn: Reader, scope: Scope, limit: int, excerpt_chars: int, confirmed_first: bool = False
) -> list[asyncpg.Record]:
    """Up to `limit` memories the scope sees, most recently updated first (confirmed ones before the
    rest when asked), ties broken by id; each with the first `excerpt_chars` of its text (`excerpt`)."""
    params = Params()
    scoped = build_scope(scope, params, memory="m")
    confirmed = "(m.status = 'confirmed') DESC, " if confirmed_first else ""
    return await conn.fetch(
        f"""
        SELECT {MEMORY_COLUMNS}, left(v.content, {params.bind(excerpt_chars)}) AS excerpt
        FROM {scoped.source} {CONTENT_JOIN}
        WHERE {scoped.where}
        ORDER BY {confirmed}m.updated_at DESC, m.id
        LIMIT {params.bind(limit)}
        """,
        *params.values,
    )


async def changed_since(
    conn: Reader, scope: Scope, since: datetime | None, limit: int, excerpt_chars: int
) -> list[asyncpg.Record]:
    """Memories the scope sees whose current status span opened at or after `since` (any time when
    None), newest change first, ties broken by id; each with its change time (`changed_at`) and the
    first `excerpt_chars` of its text. The scope says which statuses count as a change."""
    params = Params()
    scoped = build_scope(scope, params, memory="m")
    after = f"AND s.recorded_from >= {params.bind(since)}" if since is not None else ""
    return await conn.fetch(
        f"""
        SELECT {MEMORY_COLUMNS}, s.recorded_from AS changed_at, left(v.content, {params.bind(excerpt_chars)}) AS excerpt
        FROM {scoped.source} {CONTENT_JOIN}
        JOIN memory_states s ON s.memory_id = m.id AND s.recorded_to IS NULL
        WHERE {scoped.where} {after}
        ORDER BY s.recorded_from DESC, m.id
        LIMIT {params.bind(limit)}
        """,
        *params.values,
    )


async def read_memories(conn: Reader, scope: Scope, memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, asyncpg.Record]:
    """Those of the memories the scope sees, by id (a successor the caller may read, say)."""
    if not memory_ids:
        return {}
    params = Params()
    wanted = params.bind(memory_ids)
    scoped = build_scope(scope, params, memory="m")
    rows = await conn.fetch(
        f"SELECT {MEMORY_COLUMNS} FROM {scoped.source} WHERE m.id = ANY({wanted}::uuid[]) AND {scoped.where}",
        *params.values,
    )
    return {row["id"]: row for row in rows}


async def count_memories(conn: Reader, scope: Scope) -> int:
    """How many memories the scope sees (the candidates awaiting review, say)."""
    params = Params()
    scoped = build_scope(scope, params, memory="m")
    return int(await conn.fetchval(f"SELECT count(*) FROM {scoped.source} WHERE {scoped.where}", *params.values))
