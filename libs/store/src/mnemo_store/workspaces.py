"""Workspaces: registering them and resolving an id, a name or a path to one."""

from __future__ import annotations

import hashlib
import posixpath
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from mnemo_platform import InvalidArgument

GLOBAL_WORKSPACE = "global"
_SLUG_INVALID = re.compile(r"[^a-z0-9._-]+")
_MAX_NAME = 100
_MAX_PATH = 4096


@dataclass(frozen=True)
class WorkspaceRow:
    id: str
    name: str
    root_path: str | None
    created_at: datetime


_COLUMNS = "id, name, root_path, created_at"


def _row(record: asyncpg.Record) -> WorkspaceRow:
    return WorkspaceRow(record["id"], record["name"], record["root_path"], record["created_at"])


def _check_text(value: str, field: str, limit: int) -> str:
    if "\x00" in value:
        raise InvalidArgument(f"{field} must not contain NUL bytes")
    if len(value) > limit:
        raise InvalidArgument(f"{field} is too long ({len(value)} characters; at most {limit})")
    return value


def normalize_root(path: str) -> str:
    """An absolute, normalised path without a trailing slash; relative paths are refused."""
    _check_text(path, "workspace path", _MAX_PATH)
    if not path.startswith("/"):
        raise InvalidArgument(
            f"workspace path {path!r} must be absolute (the server cannot know the caller's directory)"
        )
    return posixpath.normpath(path) if path != "/" else "/"


def _looks_like_path(ref: str) -> bool:
    return ref.startswith(("/", "~", "./", "../")) or ref in {".", ".."}


async def find_workspace(conn: asyncpg.Connection | asyncpg.Pool, ref: str) -> WorkspaceRow | None:
    """The workspace `ref` names: its id, its name, or a path at or under its root (longest wins); None if none.

    Whether the caller may use it is the access module's decision (mnemo_store.access), not this one's.
    """
    if not ref:
        raise InvalidArgument("workspace is required (an id, a name or a registered root path)")
    _check_text(ref, "workspace", _MAX_PATH)
    if _looks_like_path(ref):
        path = normalize_root(ref)
        record = await conn.fetchrow(
            f"""
            SELECT {_COLUMNS} FROM workspaces
            WHERE root_path IS NOT NULL
              AND ($1 = root_path OR starts_with($1, CASE WHEN root_path = '/' THEN '/' ELSE root_path || '/' END))
            ORDER BY length(root_path) DESC
            LIMIT 1
            """,
            path,
        )
    else:
        record = await conn.fetchrow(
            f"SELECT {_COLUMNS} FROM workspaces WHERE id = $1 OR name = $1 ORDER BY (id = $1) DESC LIMIT 1",
            ref,
        )
    return None if record is None else _row(record)


class WorkspaceCache:
    """What `find_workspace` found for a reference, kept for `ttl_s` seconds; never what it did not find.

    It caches what a reference names, never who may use it: the access check runs on every call
    (mnemo_store.access), so a hit cannot let a token reach a workspace it could not reach anyway.
    Mnemo never renames or deletes a workspace, so an id or a name always names the same row. A
    reference's meaning changes only when a workspace is registered: a new name or id is found at
    once (a miss is not kept), while a path under a newly registered root keeps resolving to the
    enclosing workspace for up to `ttl_s`; a read then sees that enclosing workspace (its own and
    `global` rows: every statement carries the resolved id), which the caller was checked for.
    """

    def __init__(self, ttl_s: float, max_entries: int = 1024, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.clock = clock
        self._entries: OrderedDict[str, tuple[float, WorkspaceRow]] = OrderedDict()

    async def find(self, conn: asyncpg.Connection | asyncpg.Pool, ref: str) -> WorkspaceRow | None:
        """`find_workspace(conn, ref)`, from the cache while its answer is fresh."""
        now = self.clock()
        entry = self._entries.get(ref)
        if entry is not None and entry[0] > now:
            self._entries.move_to_end(ref)
            return entry[1]
        row = await find_workspace(conn, ref)
        if row is None or self.ttl_s <= 0:
            self._entries.pop(ref, None)
            return row
        self._entries[ref] = (now + self.ttl_s, row)
        self._entries.move_to_end(ref)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return row


async def list_workspaces(conn: asyncpg.Connection | asyncpg.Pool, where: str, values: list[Any]) -> list[WorkspaceRow]:
    """The workspaces matching `where` (a condition on `id` from the access module), by name."""
    return [
        _row(r) for r in await conn.fetch(f"SELECT {_COLUMNS} FROM workspaces WHERE {where} ORDER BY name", *values)
    ]


def _slug(name: str) -> str:
    slug = _SLUG_INVALID.sub("-", name.strip().lower()).strip("-._")[:64]
    return slug or "workspace"


async def add_workspace(conn: asyncpg.Connection, root_path: str = "", name: str = "") -> tuple[WorkspaceRow, bool]:
    """Registers a workspace by root path or by name; returns it and whether it was new."""
    name = _check_text(name.strip(), "workspace name", _MAX_NAME)
    if root_path:
        root = normalize_root(root_path)
        existing = await conn.fetchrow(f"SELECT {_COLUMNS} FROM workspaces WHERE root_path = $1", root)
        if existing is not None:
            return _row(existing), False
        ws_id = hashlib.sha256(root.encode()).hexdigest()[:12]
        name = name or posixpath.basename(root) or "root"
    else:
        if not name:
            raise InvalidArgument("a workspace needs a root path or a name")
        existing = await conn.fetchrow(f"SELECT {_COLUMNS} FROM workspaces WHERE name = $1", name)
        if existing is not None:
            return _row(existing), False
        root = None
        ws_id = _slug(name)
        if await conn.fetchval("SELECT 1 FROM workspaces WHERE id = $1", ws_id):
            ws_id = f"{ws_id[:50]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    if await conn.fetchval("SELECT 1 FROM workspaces WHERE name = $1", name):
        # Two projects called `app` in different places: keep both, tell them apart by id.
        name = f"{name}-{ws_id[:6]}"
    record = await conn.fetchrow(
        f"""
        INSERT INTO workspaces (id, name, root_path) VALUES ($1, $2, $3)
        ON CONFLICT DO NOTHING
        RETURNING {_COLUMNS}
        """,
        ws_id,
        name,
        root,
    )
    if record is None:
        # Lost a race with an identical registration: theirs is ours.
        theirs = await find_workspace(conn, root or name)
        assert theirs is not None, "a conflicting registration is visible once its insert conflicts"
        return theirs, False
    return _row(record), True
