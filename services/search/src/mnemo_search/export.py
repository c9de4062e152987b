"""Export (docs/export-format.md): whole workspaces as the export format's records, read from one snapshot.

Everything is read in one read-only REPEATABLE READ transaction, so the memories, tombstones and
audit heads of a file agree with each other however many writes land while it streams.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

import asyncpg
import structlog

from mnemo_store import transfer
from mnemo_wire import export_format as fmt

log = structlog.get_logger("mnemo.search")

# Memories read per statement: their histories come in three more, whatever the page holds.
PAGE = 200


async def export_records(pool: asyncpg.Pool, workspace_ids: Sequence[str] | None, scope: str) -> AsyncIterator[str]:
    """The export's lines, in file order: the header, the workspaces, then per workspace its memories
    (oldest first), its tombstones and its audit head. `workspace_ids` None exports every workspace."""
    memories = 0
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        workspaces = await transfer.workspaces_by_id(conn, workspace_ids)
        exported_at = await conn.fetchval("SELECT now()")
        yield fmt.dumps(fmt.header_record(exported_at or datetime.now(UTC), [w["id"] for w in workspaces], scope))
        for ws in workspaces:
            yield fmt.dumps(fmt.workspace_record(ws))
        for ws in workspaces:
            after = None
            while True:
                page = await transfer.memory_page(conn, ws["id"], after, PAGE)
                if not page:
                    break
                found = await transfer.histories(conn, [row["id"] for row in page])
                for row in page:
                    memory_id = row["id"]
                    yield fmt.dumps(
                        fmt.memory_record(
                            row,
                            found["versions"].get(memory_id, []),
                            found["states"].get(memory_id, []),
                            found["derivations"].get(memory_id, []),
                        )
                    )
                memories += len(page)
                after = (page[-1]["created_at"], page[-1]["id"])
            for stone in await transfer.tombstones_in(conn, ws["id"]):
                yield fmt.dumps(fmt.tombstone_record(stone))
            yield fmt.dumps(fmt.audit_head_record(ws["id"], await transfer.audit_head(conn, ws["id"])))
    log.info("memories_exported", workspaces=len(workspaces), memories=memories, scope=scope)
