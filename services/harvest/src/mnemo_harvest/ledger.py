"""A remote harvester's book of sessions: what harvest_sources holds in-cluster, kept in a file on the laptop.

Only the laptop knows its files' paths, sizes and mtimes, so their state stays with them; nothing about
them needs a server round trip or a server table a harvester token could write. It is a cache, not the
rule: ingest keeps idempotency and tombstones in the write's transaction, so a lost or deleted file
costs one re-read of every session (each answered `unchanged` or `tombstoned`), never a duplicate.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from mnemo.harvest.v1 import harvest_service_pb2 as pb
from mnemo_harvest.model import SourceRef
from mnemo_harvest.sources import Key, Record, Row, skip_label, state_label

log = structlog.get_logger("mnemo.harvest")

# The file's shape; a file of another version (or another gateway's) is started afresh.
VERSION = 1
_TIMES = ("mtime", "harvested_mtime", "harvested_at", "archived_at", "archive_evicted_at", "last_seen_at")


class FileSources:
    """The SourceBook of a remote harvester: one JSON file, rewritten whole (atomically) after each change."""

    def __init__(self, path: Path, gateway: str) -> None:
        self.path = path
        self.gateway = gateway
        self.rows: dict[Key, dict[str, Any]] = _load(path, gateway)
        self._lock = asyncio.Lock()

    async def known(self) -> dict[Key, Row]:
        return {key: dict(row) for key, row in self.rows.items()}

    async def owed_from_archive(self, derived_with: str, agent: str) -> list[Row]:
        harvested = state_label(pb.SOURCE_STATE_HARVESTED)
        return [
            dict(row)
            for row in self.rows.values()
            if row["state"] == harvested
            and row.get("archive_path")
            and row.get("harvested_mtime") is not None
            and (not row["final"] or row.get("derived_with") != derived_with)
            and (not agent or row["agent"] == agent)
        ]

    async def seen(self, ref: SourceRef) -> Row | None:
        key = (ref.agent, ref.key)
        row = self.rows.get(key) or _new_row(ref)
        row.update(path=ref.path, size=ref.size, mtime=datetime.fromtimestamp(ref.mtime, UTC))
        row["last_seen_at"] = datetime.now(UTC)
        self.rows[key] = row
        await self._save()
        return dict(row)

    async def record(self, ref: SourceRef, outcome: Record, **fields: Any) -> None:
        """As sources.record: the look's conclusion over the session's row; only the fields given change."""
        row = self.rows.get((ref.agent, ref.key))
        if row is None:
            return
        row.update(
            state=state_label(outcome.state),
            detail=outcome.detail,
            skip_reason=skip_label(outcome.skip) or None,
            final=fields.get("final", True),
        )
        row["attempts"] = row.get("attempts", 0) + 1 if fields.get("attempts") else 0
        for name in ("derived_with", "cwd", "workspace"):
            if fields.get(name) is not None:
                row["workspace_id" if name == "workspace" else name] = fields[name]
        if fields.get("fingerprint") is not None:
            row["content_hash"] = fields["fingerprint"]
        if fields.get("memory_id"):
            row["memory_id"] = fields["memory_id"]
        if fields.get("harvested") is not None:
            harvested, mtime = fields["harvested"]
            row.update(harvested_size=harvested.size, harvested_mtime=mtime, harvested_at=datetime.now(UTC))
        if fields.get("archive") is not None:
            row["archive_path"], row["archive_bytes"] = fields["archive"]
            row["archived_at"] = datetime.now(UTC)
        await self._save()

    async def archive_evicted(self, paths: list[str]) -> None:
        gone = set(paths)
        for row in self.rows.values():
            if row.get("archive_path") in gone:
                row.update(archive_path=None, archive_bytes=None, archive_evicted_at=datetime.now(UTC))
        await self._save()

    async def _save(self) -> None:
        async with self._lock:
            data = {"version": VERSION, "gateway": self.gateway, "sources": [_dumped(r) for r in self.rows.values()]}
            await asyncio.to_thread(_write, self.path, json.dumps(data))


def _new_row(ref: SourceRef) -> dict[str, Any]:
    return {
        "agent": ref.agent,
        "session_id": ref.key,
        "state": state_label(pb.SOURCE_STATE_IDLE),
        "detail": None,
        "skip_reason": None,
        "final": True,
        "attempts": 0,
        "memory_id": None,
        "workspace_id": None,
        "harvested_size": None,
        "harvested_mtime": None,
        "derived_with": None,
    }


def _dumped(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}


def _loaded(row: dict[str, Any]) -> dict[str, Any]:
    return {k: datetime.fromisoformat(v) if k in _TIMES and isinstance(v, str) else v for k, v in row.items()}


def _load(path: Path, gateway: str) -> dict[Key, dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        # A cache: starting afresh re-reads every session, and ingest answers each as already stored.
        log.warning("harvest_state_unreadable", path=str(path), error=str(exc))
        return {}
    if not isinstance(data, dict) or data.get("version") != VERSION or data.get("gateway") != gateway:
        log.info("harvest_state_started_afresh", path=str(path), gateway=gateway)
        return {}
    rows = [_loaded(r) for r in data.get("sources", []) if isinstance(r, dict)]
    return {(r["agent"], r["session_id"]): r for r in rows}


def _write(path: Path, text: str) -> None:
    """Atomically: a harvester killed mid-write leaves the previous file, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)
