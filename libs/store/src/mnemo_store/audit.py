"""The hash-chained, append-only audit log: appending inside the caller's transaction, and verifying."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import structlog

from mnemo_platform import current_call, current_trace_id

log = structlog.get_logger("mnemo.store")

GENESIS_HASH = "0" * 64


@dataclass
class _AnchorKey:
    """The key the chains' anchors are signed with, read from a file outside the database."""

    key: bytes | None = None
    path: str = ""


_anchor_key = _AnchorKey()


def configure_anchor_key(path: str | Path | None, create: bool = False) -> bool:
    """Reads the anchor key from `path` (none: anchors are neither written nor checked); with
    `create`, a missing file is made (32 random bytes, hex, mode 0600). Returns whether it was made.

    Only the service that writes (ingest) creates it: another one that found no file would sign
    with a key of its own and report every chain broken.
    """
    if not path:
        _anchor_key.key, _anchor_key.path = None, ""
        return False
    file = Path(path).expanduser()
    created = False
    if not file.exists() and create:
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process of this deployment made it first
        except OSError as exc:
            # A read-only file system, say: serve without anchors rather than not at all.
            log.warning("audit_anchor_key_unavailable", path=str(file), error=type(exc).__name__)
        else:
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(32) + "\n")
            created = True
    try:
        text = file.read_text().strip()
    except OSError:
        text = ""
    _anchor_key.key = text.encode() if text else None
    _anchor_key.path = str(file)
    return created


def anchor_key_path() -> str:
    """The anchor key file in use, or "" when chains are not anchored."""
    return _anchor_key.path if _anchor_key.key is not None else ""


def anchor_signature(workspace_id: str, events: int, head_hash: str) -> str:
    """HMAC-SHA256 of a chain's length and head under the anchor key."""
    assert _anchor_key.key is not None
    message = f"mnemo.audit.anchor\n{workspace_id}\n{events}\n{head_hash}".encode()
    return hmac.new(_anchor_key.key, message, hashlib.sha256).hexdigest()


def _anchor_holds(workspace_id: str, events: int, head_hash: str, signature: str) -> bool:
    return hmac.compare_digest(signature, anchor_signature(workspace_id, events, head_hash))


async def anchor_unanchored_chains(conn: asyncpg.Connection) -> int:
    """Anchors every chain that has none, at its current head: trust on first use, done once, when
    the key is first made (chains written before anchoring existed). Returns how many."""
    if _anchor_key.key is None:
        return 0
    rows = await conn.fetch(
        """
        SELECT e.workspace_id, count(*) AS events,
               (array_agg(e.hash ORDER BY e.id DESC))[1] AS head_hash
        FROM audit_events e
        WHERE NOT EXISTS (SELECT 1 FROM audit_anchors a WHERE a.workspace_id = e.workspace_id)
        GROUP BY e.workspace_id
        """
    )
    await conn.executemany(
        "INSERT INTO audit_anchors (workspace_id, events, head_hash, signature) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (workspace_id) DO NOTHING",
        [
            (ws, events, head, anchor_signature(ws, events, head))
            for ws, events, head in ((r["workspace_id"], r["events"], r["head_hash"]) for r in rows)
        ],
    )
    return len(rows)


@dataclass(frozen=True)
class AuditEvent:
    """One mutation as the audit log records it."""

    workspace_id: str
    action: str
    memory_id: str | None = None
    version: int | None = None
    before_hash: str | None = None
    after_hash: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _hashed_fields(row: Any) -> dict[str, Any]:
    """Exactly the fields the hash covers, from an event being written or a row being verified."""
    return {
        "workspace_id": row["workspace_id"],
        "action": row["action"],
        "memory_id": str(row["memory_id"]) if row["memory_id"] is not None else None,
        "version": row["version"],
        "before_hash": row["before_hash"],
        "after_hash": row["after_hash"],
        "details": row["details"],
        "at": row["at"].astimezone(UTC).isoformat(),
        "principal": row["principal"],
        "request_id": row["request_id"],
        "trace_id": row["trace_id"],
    }


def event_hash(prev_hash: str, fields: dict[str, Any]) -> str:
    """sha256 over the previous hash and the event's canonical JSON: the chain's link."""
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256((prev_hash + canonical).encode()).hexdigest()


# Takes the lock that serialises appends to a workspace's chain until commit, so a chain never
# forks: {workspace} is an SQL expression of the workspace id. It is taken in a statement before
# the one reading the chain's head: a statement that waited for the lock would read the head from
# a snapshot taken before the holder committed. Statements taking several lock them in order, so
# two transactions cannot deadlock.
CHAIN_LOCK = "pg_advisory_xact_lock(hashtextextended('mnemo.audit:' || {workspace}, 0))"


async def _lock_chains(conn: asyncpg.Connection, workspace_ids: Sequence[str]) -> None:
    await conn.execute(
        f"SELECT {CHAIN_LOCK.format(workspace='w')} FROM (SELECT DISTINCT unnest($1::text[]) AS w ORDER BY 1) AS ws",
        list(workspace_ids),
    )


async def append_audit_event(conn: asyncpg.Connection, event: AuditEvent) -> str:
    """Appends the event in the current transaction and returns its hash."""
    return (await append_audit_events(conn, [event]))[0]


# An anchor row as read: (events, head_hash, signature).
Anchor = tuple[int, str, str]


@dataclass(frozen=True)
class ChainHead:
    """A chain's last link and its anchor row (None: no anchor) at some moment."""

    hash: str
    anchor: Anchor | None


class ChainHeads:
    """The heads of the chains this process last extended, so that a new note's event can be linked
    in the statement that writes the note (Append.guarded_ctes) instead of after a statement reading
    the head. Only a hint: that statement checks each head (and anchor) against the database and
    fails whole if one has moved (another replica, another path of this process wrote since), and
    the unique link index refuses an event after a head that already has one."""

    def __init__(self) -> None:
        self._heads: dict[str, ChainHead] = {}

    def known(self, workspace_ids: Sequence[str]) -> dict[str, ChainHead] | None:
        """Every one of these chains' heads, or None if one is not known."""
        heads = {w: self._heads.get(w) for w in workspace_ids}
        return None if any(h is None for h in heads.values()) else {w: h for w, h in heads.items() if h is not None}

    def remember(self, heads: dict[str, ChainHead]) -> None:
        self._heads.update(heads)

    def forget(self, workspace_ids: Sequence[str]) -> None:
        for w in workspace_ids:
            self._heads.pop(w, None)


@dataclass(frozen=True)
class Append:
    """Events made into chain links against known heads: the rows to insert, their hashes, the
    anchors' moves, and the heads the chains will have once they are in."""

    rows: list[dict[str, Any]]
    hashes: list[str]
    moved: list[tuple[str, int, str, str]]
    before: dict[str, ChainHead]
    after: dict[str, ChainHead]

    def statement(self) -> tuple[str, list[Any]]:
        """The statement inserting the links (and moving the anchors), with its values from $1."""
        sql, values = self._insert(1, guarded=False)
        if self.moved:
            # One statement with the anchors' move: a data-modifying WITH runs whether or not it is read.
            sql = f"WITH appended AS ({sql}) {self._anchor_upsert(1 + len(values))}"
            values += [list(column) for column in zip(*self.moved, strict=True)]
        return sql, values

    def guarded_ctes(self, first: int) -> tuple[str, list[Any]]:
        """WITH items (parameters from $first) that insert the links, and move the anchors, in a
        statement of their own writer's, checking first that each chain's head and anchor are still
        the ones they were made against: the statement fails (SQLSTATE HEAD_MOVED) if one is not."""
        workspaces = sorted(self.before)
        anchors = [self.before[w].anchor for w in workspaces]
        n = first
        # A chain matches when its last event is the head and its anchor row is the one read with
        # it (none if none was): the anchor is checked too, so that one changed behind this
        # process's back is left for `mnemo audit verify` to report, as the long way leaves it.
        head = "SELECT e.hash FROM audit_events e WHERE e.workspace_id = g.w ORDER BY e.id DESC LIMIT 1"
        anchor = "SELECT 1 FROM audit_anchors a WHERE a.workspace_id = g.w"
        same_anchor = "a.events = g.events AND a.head_hash = g.anchor_head AND a.signature = g.signature"
        guard = f"""
        chain_guard AS (
            SELECT bool_and(CASE WHEN coalesce(({head}), '{GENESIS_HASH}') = g.head
                                      AND CASE WHEN g.events IS NULL THEN NOT EXISTS ({anchor})
                                               ELSE EXISTS ({anchor} AND {same_anchor}) END
                                 THEN true ELSE audit_head_moved(g.w) END) AS ok
            FROM unnest(${n}::text[], ${n + 1}::text[], ${n + 2}::bigint[], ${n + 3}::text[], ${n + 4}::text[])
                 AS g(w, head, events, anchor_head, signature)
        )"""
        values: list[Any] = [
            workspaces,
            [self.before[w].hash for w in workspaces],
            [a[0] if a else None for a in anchors],
            [a[1] if a else None for a in anchors],
            [a[2] if a else None for a in anchors],
        ]
        insert, insert_values = self._insert(first + len(values), guarded=True)
        values += insert_values
        ctes = f"{guard}, appended AS ({insert})"
        if self.moved:
            ctes += f", anchored AS ({self._anchor_upsert(first + len(values))})"
            values += [list(column) for column in zip(*self.moved, strict=True)]
        return ctes, values

    def _insert(self, first: int, guarded: bool) -> tuple[str, list[Any]]:
        names = ", ".join(name for name, _ in _COLUMNS)
        arrays = ", ".join(f"${i}::{kind}[]" for i, (_, kind) in enumerate(_COLUMNS, first))
        where = "WHERE (SELECT ok FROM chain_guard) " if guarded else ""
        # Ids are taken in the order given (WITH ORDINALITY): a chain is walked by id.
        sql = (
            f"INSERT INTO audit_events ({names}) SELECT {names} FROM unnest({arrays}) WITH ORDINALITY "
            f"AS u({names}, n) {where}ORDER BY n"
        )
        return sql, [[row[name] for row in self.rows] for name, _ in _COLUMNS]

    @staticmethod
    def _anchor_upsert(first: int) -> str:
        n = first
        return (
            "INSERT INTO audit_anchors (workspace_id, events, head_hash, signature) "
            f"SELECT * FROM unnest(${n}::text[], ${n + 1}::bigint[], ${n + 2}::text[], ${n + 3}::text[]) "
            "ON CONFLICT (workspace_id) DO UPDATE SET events = EXCLUDED.events, head_hash = EXCLUDED.head_hash, "
            "signature = EXCLUDED.signature, updated_at = now()"
        )


# SQLSTATE of audit_head_moved() (sql/0021_audit_chain_links.sql): a guarded append found a head moved.
HEAD_MOVED = "MN001"
# The unique index that refuses a second event after one head.
CHAIN_LINK_INDEX = "audit_events_chain_link"

_COLUMNS = [
    ("at", "timestamptz"),
    ("principal", "text"),
    ("workspace_id", "text"),
    ("action", "text"),
    ("memory_id", "uuid"),
    ("version", "int"),
    ("before_hash", "text"),
    ("after_hash", "text"),
    ("request_id", "text"),
    ("trace_id", "text"),
    ("prev_hash", "text"),
    ("hash", "text"),
    ("details", "jsonb"),
]


def chain_moved(exc: BaseException) -> bool:
    """Whether a guarded append failed because a chain moved on (its head or anchor changed, or
    another event took the link): the write is to be made again the long way."""
    if isinstance(exc, asyncpg.UniqueViolationError):
        return exc.constraint_name == CHAIN_LINK_INDEX
    return isinstance(exc, asyncpg.PostgresError) and exc.sqlstate == HEAD_MOVED


def prepare_append(events: Sequence[AuditEvent], heads: dict[str, ChainHead]) -> Append:
    """The events as links of chains whose heads are `heads` (every event's workspace among them)."""
    call = current_call()
    trace_id = current_trace_id()
    tips = {w: h.hash for w, h in heads.items()}
    rows: list[dict[str, Any]] = []
    for event in events:
        row: dict[str, Any] = {
            "workspace_id": event.workspace_id,
            "action": event.action,
            "memory_id": event.memory_id,
            "version": event.version,
            "before_hash": event.before_hash,
            "after_hash": event.after_hash,
            "details": event.details,
            # Microseconds, as PostgreSQL stores them: the hash must survive the round trip.
            "at": datetime.now(UTC),
            "principal": call.principal,
            "request_id": call.request_id,
            "trace_id": trace_id,
        }
        prev_hash = tips[event.workspace_id]
        row["prev_hash"] = prev_hash
        row["hash"] = tips[event.workspace_id] = event_hash(prev_hash, _hashed_fields(row))
        rows.append(row)
    anchors = {w: h.anchor for w, h in heads.items()}
    moved = _advanced_anchors(anchors, rows) if _anchor_key.key is not None else []
    after_anchors = dict(anchors) | {ws: (events, head, signature) for ws, events, head, signature in moved}
    return Append(
        rows=rows,
        hashes=[row["hash"] for row in rows],
        moved=moved,
        before=dict(heads),
        after={w: ChainHead(tips[w], after_anchors[w]) for w in heads},
    )


async def append_audit_events(
    conn: asyncpg.Connection, events: Sequence[AuditEvent], locked: bool = False, known: ChainHeads | None = None
) -> list[str]:
    """Appends the events, in order, in the current transaction and returns their hashes: the
    chains are extended once (one lock, one head read, one multi-row insert), however many events.

    `locked` says an earlier statement of this transaction took the chains' locks (CHAIN_LOCK).
    `known` learns the heads the chains will have (a hint: the transaction may yet roll back).
    """
    if not events:
        return []
    workspaces = sorted({e.workspace_id for e in events})
    if not locked:
        await _lock_chains(conn, workspaces)
    head_rows = await conn.fetch(
        "SELECT w, (SELECT hash FROM audit_events WHERE workspace_id = w ORDER BY id DESC LIMIT 1) AS hash, "
        "a.events, a.head_hash, a.signature "
        "FROM unnest($1::text[]) AS w LEFT JOIN audit_anchors a ON a.workspace_id = w",
        workspaces,
    )
    append = prepare_append(
        events,
        {
            r["w"]: ChainHead(
                r["hash"] or GENESIS_HASH,
                (r["events"], r["head_hash"], r["signature"]) if r["events"] is not None else None,
            )
            for r in head_rows
        },
    )
    sql, values = append.statement()
    await conn.execute(sql, *values)
    if known is not None:
        known.remember(append.after)
    return append.hashes


def _advanced_anchors(anchors: dict[str, Anchor | None], rows: list[dict[str, Any]]) -> list[tuple[str, int, str, str]]:
    """Each chain's signed anchor moved to its new head (workspace, events, head, signature), to be
    written in the appending statement.

    An anchor is advanced only from the head it signs: a chain found cut short or rewritten (its
    head not the anchored one, or the anchor not signed by the key) keeps its anchor, so the damage
    stays visible to `mnemo audit verify` instead of being signed over by the next write. A chain
    with events but no anchor gets none here (one is made only when the key is made).
    """
    added: dict[str, int] = {}
    heads: dict[str, str] = {}
    for row in rows:
        added[row["workspace_id"]] = added.get(row["workspace_id"], 0) + 1
        heads[row["workspace_id"]] = row["hash"]
    updates: list[tuple[str, int, str, str]] = []
    for ws, count in added.items():
        anchor = anchors[ws]
        first_head = rows[next(i for i, r in enumerate(rows) if r["workspace_id"] == ws)]["prev_hash"]
        if anchor is None:
            if first_head != GENESIS_HASH:
                log.warning("audit_chain_unanchored", workspace=ws)
                continue
            events = count
        elif anchor[1] != first_head or not _anchor_holds(ws, *anchor):
            log.error("audit_anchor_mismatch", workspace=ws, anchored_events=anchor[0])
            continue
        else:
            events = anchor[0] + count
        updates.append((ws, events, heads[ws], anchor_signature(ws, events, heads[ws])))
    return updates


@dataclass(frozen=True)
class ChainCheck:
    """The result of walking hash chains: how much was checked and the first broken link."""

    events_checked: int
    workspaces_checked: int
    broken_event_id: int | None = None
    broken_workspace_id: str | None = None
    problem: str = ""
    anchored: bool = False
    """anchored says the chains' heads were checked against their signed anchors (a key is configured)."""

    @property
    def ok(self) -> bool:
        return not self.problem


async def verify_chains(conn: asyncpg.Connection, workspace_id: str | None = None) -> ChainCheck:
    """Recomputes every event's hash and link, in order, per workspace; stops at the first break."""
    checked = 0
    anchored = _anchor_key.key is not None
    workspaces = (
        [workspace_id]
        if workspace_id is not None
        else [
            r["workspace_id"]
            for r in await conn.fetch(
                "SELECT DISTINCT workspace_id FROM audit_events UNION SELECT workspace_id FROM audit_anchors"
            )
        ]
    )
    for ws in sorted(workspaces):
        expected_prev = GENESIS_HASH
        length = 0
        last_id: int | None = None
        # A cursor keeps memory flat however long the chain is.
        async with conn.transaction():
            async for row in conn.cursor("SELECT * FROM audit_events WHERE workspace_id = $1 ORDER BY id", ws):
                checked += 1
                if row["prev_hash"] != expected_prev:
                    return ChainCheck(
                        checked,
                        len(workspaces),
                        row["id"],
                        ws,
                        anchored=anchored,
                        problem=f"event {row['id']} links to {row['prev_hash'][:12]}…, but the event before it "
                        f"has hash {expected_prev[:12]}… (an event was removed or reordered)",
                    )
                recomputed = event_hash(row["prev_hash"], _hashed_fields(row))
                if recomputed != row["hash"]:
                    return ChainCheck(
                        checked,
                        len(workspaces),
                        row["id"],
                        ws,
                        anchored=anchored,
                        problem=f"event {row['id']} ({row['action']}) does not match its hash: "
                        "its recorded fields were changed after it was written",
                    )
                expected_prev = row["hash"]
                length += 1
                last_id = row["id"]
        if anchored:
            problem = _anchor_problem(
                await conn.fetchrow("SELECT * FROM audit_anchors WHERE workspace_id = $1", ws), length, expected_prev
            )
            if problem:
                return ChainCheck(checked, len(workspaces), last_id or 0, ws, problem, anchored=True)
    return ChainCheck(checked, len(workspaces), anchored=anchored)


def _anchor_problem(anchor: Any, length: int, head: str) -> str:
    """What does not hold between a chain (its length and head) and its signed anchor, or ""."""
    if anchor is None:
        return f"the chain holds {length} events but has no anchor (its anchor was deleted)" if length else ""
    if not _anchor_holds(anchor["workspace_id"], anchor["events"], anchor["head_hash"], anchor["signature"]):
        return "the chain's anchor is not signed by the anchor key: it was rewritten in the database"
    if anchor["events"] != length or anchor["head_hash"] != head:
        cut = "events were removed from its end" if length < anchor["events"] else "its events were replaced"
        return (
            f"the chain holds {length} events ending in {head[:12]}…, but its signed anchor says "
            f"{anchor['events']} ending in {anchor['head_hash'][:12]}…: {cut}"
        )
    return ""
