"""Reads OpenCode sessions from opencode.db (read-only, WAL-safe) and the older JSON storage/ tree."""

from __future__ import annotations

import functools
import json
import re
import sqlite3
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from mnemo_harvest.model import Session, SourceRef, ToolCall, Turn, descendants, digest
from mnemo_harvest.readers.fields import field_dict, field_str
from mnemo_harvest.readers.stubs import one_line

AGENT = "opencode"

# The connection waits this long on a lock itself; whole reads are then retried a few times.
_BUSY_TIMEOUT_S = 0.5
_BUSY_ATTEMPTS = 4
_BUSY_BACKOFF_S = 0.1
# OpenCode's placeholder titles carry no information; the first prompt is a better title.
_DEFAULT_TITLE = re.compile(r"^(?:New session|Child session) - \d{4}-\d{2}-\d{2}T")
_DATA_URL = re.compile(r"data:[\w.+-]+/[\w.+-]+(?:;[\w=.+-]+)*;base64,[A-Za-z0-9+/=]+")
_PATCH_FILE = re.compile(r"^\*\*\* (?:(?:Add|Update|Delete) File|Move to): (.+?)\s*$", re.MULTILINE)
_FILE_KEYS = ("filePath", "file_path")
_SUMMARY_KEYS = ("command", "filePath", "file_path", "pattern", "path", "url", "query", "description")
_SESSION_COLUMNS = ("id", "parent_id", "directory", "title", "time_created", "time_updated")
_IDS = frozenset({"id", "sessionID", "messageID"})

_T = TypeVar("_T")


@dataclass
class _SessionInfo:
    """A session row (or storage/session file) as discovery sees it."""

    id: str
    parent_id: str | None
    directory: str | None
    title: str | None
    time_created: int | None
    time_updated: int | None
    origin: str
    """origin is "db" or "json": which generation the session is read from."""
    path: Path
    """path is the database, or the storage/session/<project>/<id>.json file."""
    rows: int = 0
    """rows counts the session's message and part rows (or files)."""
    changed_ms: int = 0
    """changed_ms is the newest change seen: time_updated of the session, its messages and parts."""


@dataclass
class _Message:
    id: str
    data: dict[str, Any]
    parts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


@dataclass
class _Content:
    messages: list[_Message] = field(default_factory=list)
    canonical: list[Any] = field(default_factory=list)
    malformed: list[tuple[str, int]] = field(default_factory=list)
    rows: int = 0


class OpenCodeReader:
    """OpenCode sessions keyed by `ses_…` id, child (task) sessions attached to their root.

    The database is read first, then the JSON tree; a session in both is read from the database.
    SourceRef.size and Session.size count message and part rows (files in the JSON tree), not bytes;
    SourceRef.mtime is the newest time_updated of the session family and its rows (file mtimes for
    the JSON tree), in seconds.

    read() takes the family (root and child sessions) from the last discover(), so a tick does not
    list every session once per read; each member's row and content are read fresh. A child that
    appears after discover() is attached on the next pass, whose SourceRef size differs.
    """

    agent = AGENT

    def __init__(self, data_dir: Path, db_path: Path | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.db_path = Path(db_path) if db_path is not None else None
        self._last: tuple[dict[str, _SessionInfo], list[OSError]] | None = None

    # -- discovery ---------------------------------------------------------------------------------

    def discover(self) -> Iterator[SourceRef]:
        sessions, _ = self._refresh()
        children = _children_by_parent(sessions)
        for info in sorted(sessions.values(), key=_order):
            if info.parent_id is not None and info.parent_id in sessions:
                continue
            family = [info, *(sessions[c] for c in descendants(info.id, children))]
            yield SourceRef(
                agent=AGENT,
                key=info.id,
                path=str(info.path),
                mtime=max(s.changed_ms for s in family) / 1000,
                size=sum(s.rows for s in family),
            )

    def _databases(self) -> list[Path]:
        if self.db_path is not None:
            return [self.db_path] if self.db_path.is_file() else []
        found = [self.data_dir / "opencode.db", *sorted(self.data_dir.glob("opencode-*.db"))]
        return [p for p in found if p.is_file()]

    def _refresh(self) -> tuple[dict[str, _SessionInfo], list[OSError]]:
        self._last = self._index()
        return self._last

    def _index(self) -> tuple[dict[str, _SessionInfo], list[OSError]]:
        """Every session: databases first, then the JSON tree for ids no database has.

        While a database cannot be read (locked past the retries, corrupt), the JSON tree is not
        listed either: its copies may be older than the database's, and reading them would make a
        session's content flip between versions. The errors are returned for read() to raise.
        """
        sessions: dict[str, _SessionInfo] = {}
        errors: list[OSError] = []
        for db in self._databases():
            try:
                rows = _with_db(db, functools.partial(_db_sessions, path=db))
            except sqlite3.Error as exc:
                errors.append(OSError(f"cannot read {db}: {exc}"))
                continue
            for info in rows:
                sessions.setdefault(info.id, info)
        if not errors:
            for info in _json_sessions(self.data_dir / "storage"):
                sessions.setdefault(info.id, info)
        return sessions, errors

    # -- reading -----------------------------------------------------------------------------------

    def read(self, ref: SourceRef) -> Session:
        sessions, errors = self._last if self._last is not None else self._refresh()
        if errors or ref.key not in sessions:
            sessions, errors = self._refresh()
        if errors:
            raise errors[0]
        root = sessions.get(ref.key)
        if root is None:
            raise FileNotFoundError(f"opencode session {ref.key} is gone from {ref.path}")
        children = _children_by_parent(sessions)
        built: list[tuple[Session, bytes, int]] = []
        for listed in [root, *(sessions[c] for c in descendants(root.id, children))]:
            loaded = self._load(listed)
            if loaded is None:
                if listed is root:
                    raise FileNotFoundError(f"opencode session {ref.key} is gone from {ref.path}")
                continue  # a child deleted since discover()
            info, content = loaded
            built.append((_build(info, content), _canonical_bytes(info, content), content.rows))

        session = built[0][0]
        if root.parent_id is not None and root.parent_id not in sessions:
            session.parent_session_id = root.parent_id
        session.subagents = [s for s, _, _ in built[1:]]
        session.last_turn_closed = all(s.last_turn_closed for s, _, _ in built)
        session.content_digest = digest(*(canonical for _, canonical, _ in built))
        session.size = sum(rows for _, _, rows in built)
        return session

    def _load(self, listed: _SessionInfo) -> tuple[_SessionInfo, _Content] | None:
        """The session's current row and content, or None when it has been deleted."""
        if listed.origin == "json":
            info = _json_info(listed.path)
            return (info, _json_content(self.data_dir / "storage", info.id)) if info is not None else None
        try:
            return _with_db(listed.path, lambda conn: _db_session(conn, listed.path, listed.id))
        except sqlite3.Error as exc:
            raise OSError(f"cannot read {listed.path}: {exc}") from exc


# -- the database (generation C) -------------------------------------------------------------------


def _with_db(path: Path, work: Callable[[sqlite3.Connection], _T]) -> _T:
    """Runs `work` in one read transaction on a read-only connection, retrying briefly on SQLITE_BUSY.

    Never copies the file: a copy without its -wal would miss committed rows.
    """
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    for attempt in range(_BUSY_ATTEMPTS):
        conn = sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("PRAGMA query_only = ON")
            conn.execute("BEGIN")
            return work(conn)
        except sqlite3.OperationalError as exc:
            message = str(exc).lower()
            if attempt + 1 < _BUSY_ATTEMPTS and ("locked" in message or "busy" in message):
                time.sleep(_BUSY_BACKOFF_S * 2**attempt)
                continue
            raise
        finally:
            conn.close()
    raise AssertionError("unreachable")


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _select_sessions(conn: sqlite3.Connection, path: Path, session_id: str | None = None) -> list[_SessionInfo]:
    have = _columns(conn, "session")
    if "id" not in have:
        return []  # not a generation-C database (or a V2-only one)
    select = ", ".join(c if c in have else f"NULL AS {c}" for c in _SESSION_COLUMNS)
    where, params = ("WHERE id = ?", (session_id,)) if session_id is not None else ("", ())
    infos = []
    for sid, parent, directory, title, created, updated in conn.execute(
        f"SELECT {select} FROM session {where}", params
    ):
        if isinstance(sid, str):
            infos.append(
                _SessionInfo(
                    id=sid,
                    parent_id=parent or None,
                    directory=directory,
                    title=title,
                    time_created=_int(created),
                    time_updated=_int(updated),
                    origin="db",
                    path=path,
                )
            )
    return infos


def _db_sessions(conn: sqlite3.Connection, path: Path) -> list[_SessionInfo]:
    infos = _select_sessions(conn, path)
    counts: Counter[str] = Counter()
    newest: dict[str, int] = {}
    for table in ("message", "part"):
        cols = _columns(conn, table)
        if "session_id" in cols:
            source, key = table, "session_id"
        elif table == "part" and "message_id" in cols:
            source, key = "part JOIN message ON part.message_id = message.id", "message.session_id"
        else:
            continue
        updated = f"max({table}.time_updated)" if "time_updated" in cols else "0"
        for sid, n, changed in conn.execute(f"SELECT {key}, count(*), {updated} FROM {source} GROUP BY {key}"):
            counts[sid] += n
            newest[sid] = max(newest.get(sid, 0), _int(changed) or 0)
    for info in infos:
        info.rows = counts[info.id]
        info.changed_ms = max(info.time_updated or 0, newest.get(info.id, 0))
    return infos


def _db_session(conn: sqlite3.Connection, path: Path, session_id: str) -> tuple[_SessionInfo, _Content] | None:
    found = _select_sessions(conn, path, session_id)
    return (found[0], _db_content(conn, session_id, path)) if found else None


def _db_content(conn: sqlite3.Connection, session_id: str, path: Path) -> _Content:
    content = _Content()
    message_cols = _columns(conn, "message")
    order = "time_created, id" if "time_created" in message_cols else "id"
    by_id: dict[str, _Message] = {}
    for mid, raw in conn.execute(f"SELECT id, data FROM message WHERE session_id = ? ORDER BY {order}", (session_id,)):
        data = _loads_row(raw, f"{path}:message/{mid}", content)
        message = _Message(mid, data)
        by_id[mid] = message
        content.messages.append(message)
        content.canonical.append(["message", mid, _without_ids(data) if data else raw])
    part_rows = conn.execute(
        "SELECT part.id, part.message_id, part.data FROM part JOIN message ON part.message_id = message.id "
        "WHERE message.session_id = ? ORDER BY part.message_id, part.id",
        (session_id,),
    )
    for pid, mid, raw in part_rows:
        data = _loads_row(raw, f"{path}:part/{pid}", content)
        by_id[mid].parts.append((pid, data))
        content.canonical.append(["part", mid, pid, _without_ids(data) if data else raw])
    content.rows = len(content.canonical)
    return content


def _loads_row(raw: Any, where: str, content: _Content) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (TypeError, ValueError, RecursionError):
        content.malformed.append((where, 1))
        return {}
    return data if isinstance(data, dict) else {}


# -- the JSON tree (generation B) ------------------------------------------------------------------


def _json_sessions(storage: Path) -> Iterator[_SessionInfo]:
    session_dir = storage / "session"
    if not session_dir.is_dir():
        return
    for path in sorted(session_dir.glob("*/*.json")):
        info = _json_info(path)
        if info is None:
            continue
        info.changed_ms = info.time_updated or 0
        for file in _session_files(storage, info.id):
            info.rows += 1
            try:
                info.changed_ms = max(info.changed_ms, int(file.stat().st_mtime * 1000))
            except OSError:
                continue
        yield info


def _json_info(path: Path) -> _SessionInfo | None:
    data = _load_json(path)
    if not isinstance(data.get("id"), str):
        return None
    times = field_dict(data, "time")
    return _SessionInfo(
        id=data["id"],
        parent_id=data.get("parentID") or None,
        directory=data.get("directory"),
        title=data.get("title"),
        time_created=_int(times.get("created")),
        time_updated=_int(times.get("updated")),
        origin="json",
        path=path,
    )


def _session_files(storage: Path, session_id: str) -> Iterator[Path]:
    for message in sorted((storage / "message" / session_id).glob("*.json")):
        yield message
        yield from sorted((storage / "part" / message.stem).glob("*.json"))


def _json_content(storage: Path, session_id: str) -> _Content:
    content = _Content()
    messages: list[tuple[int, str, _Message]] = []
    for path in sorted((storage / "message" / session_id).glob("*.json")):
        data = _load_json(path, content)
        mid = field_str(data, "id", path.stem)
        times = field_dict(data, "time")
        message = _Message(mid, data)
        for part_path in sorted((storage / "part" / path.stem).glob("*.json")):
            part = _load_json(part_path, content)
            message.parts.append((field_str(part, "id", part_path.stem), part))
        messages.append((_int(times.get("created")) or 0, mid, message))
    for _, mid, message in sorted(messages, key=lambda m: (m[0], m[1])):
        content.messages.append(message)
        content.canonical.append(["message", mid, _without_ids(message.data)])
    for message in sorted(content.messages, key=lambda m: m.id):
        for pid, data in sorted(message.parts, key=lambda p: p[0]):
            content.canonical.append(["part", message.id, pid, _without_ids(data)])
    content.rows = len(content.canonical)
    return content


def _load_json(path: Path, content: _Content | None = None) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except OSError:
        return {}  # deleted by a revert between listing and reading
    except RecursionError:
        if content is not None:
            content.malformed.append((str(path), 1))
        return {}
    except ValueError as exc:
        if content is not None:
            content.malformed.append((str(path), getattr(exc, "lineno", 1)))
        return {}
    return data if isinstance(data, dict) else {}


# -- shared helpers --------------------------------------------------------------------------------


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return int(value)
    return None


def _without_ids(data: dict[str, Any]) -> dict[str, Any]:
    # The database stores data minus the ids; the JSON tree repeats them. Both canonicalise alike.
    return {k: v for k, v in data.items() if k not in _IDS}


def _canonical_bytes(info: _SessionInfo, content: _Content) -> bytes:
    head = ["session", info.id, info.parent_id, info.directory, info.title]
    return json.dumps([head, *content.canonical], sort_keys=True, separators=(",", ":"), default=str).encode()


def _order(info: _SessionInfo) -> tuple[int, str]:
    return (info.time_created or 0, info.id)


def _children_by_parent(sessions: dict[str, _SessionInfo]) -> dict[str, list[str]]:
    children: dict[str, list[str]] = {}
    for info in sorted(sessions.values(), key=_order):
        if info.parent_id is not None and info.parent_id in sessions and info.parent_id != info.id:
            children.setdefault(info.parent_id, []).append(info.id)
    return children


def _datetime(ms: int | None) -> datetime | None:
    return datetime.fromtimestamp(ms / 1000, tz=UTC) if ms is not None else None


# -- building a Session --------------------------------------------------------------------------


def _build(info: _SessionInfo, content: _Content) -> Session:
    session = Session(agent=AGENT, session_id=info.id, source_path=str(info.path))
    session.cwd = info.directory
    session.title = info.title if info.title and not _DEFAULT_TITLE.match(info.title) else None
    session.started_at = _datetime(info.time_created)
    session.ended_at = _datetime(info.time_updated)
    session.malformed = list(content.malformed)
    session.content_digest = digest(_canonical_bytes(info, content))
    session.size = content.rows
    skipped: Counter[str] = Counter()
    last_assistant_completed = True
    tool_in_flight = False

    for message in content.messages:
        data = message.data
        role = data.get("role")
        times = field_dict(data, "time")
        stamp = _datetime(_int(times.get("created")))
        if role == "user":
            texts = []
            for _, part in message.parts:
                kind = part.get("type")
                if kind == "text" and not part.get("synthetic") and not part.get("ignored"):
                    texts.append(_scrub(str(part.get("text") or "")))
                else:
                    skipped[f"part:{kind}" + (":synthetic" if kind == "text" else "")] += 1
            text = "\n\n".join(t for t in texts if t.strip()).strip()
            if text:
                session.turns.append(Turn(role="user", text=text, timestamp=stamp))
        elif role == "assistant":
            last_assistant_completed = times.get("completed") is not None
            model, provider = data.get("modelID"), data.get("providerID")
            if isinstance(model, str):
                session.model = f"{provider}/{model}" if isinstance(provider, str) else model
            if data.get("summary") is True:
                skipped["message:compaction_summary"] += 1  # it restates earlier turns
                continue
            texts, calls = [], []
            for _, part in message.parts:
                kind = part.get("type")
                if kind == "text" and not part.get("ignored"):
                    texts.append(_scrub(str(part.get("text") or "")))
                elif kind == "tool":
                    state = field_dict(part, "state")
                    tool_in_flight |= state.get("status") in ("pending", "running")
                    calls.append(_tool_call(part, state))
                else:
                    skipped[f"part:{kind}"] += 1
            text = "\n\n".join(t for t in texts if t.strip()).strip()
            if text or calls:
                session.turns.append(Turn(role="assistant", text=text, tool_calls=calls, timestamp=stamp))
        else:
            skipped[f"message:{role}"] += 1

    session.last_turn_closed = last_assistant_completed and not tool_in_flight
    session.skipped_records = skipped
    return session


def _scrub(text: str) -> str:
    return _DATA_URL.sub("[data URL removed]", text)


def _tool_call(part: dict[str, Any], state: dict[str, Any]) -> ToolCall:
    """A stub from the tool's input; state.output, metadata and attachments are never read."""
    name = str(part.get("tool") or "tool")
    args = field_dict(state, "input")
    files = [args[k] for k in _FILE_KEYS if isinstance(args.get(k), str)]
    patch = next((v for k, v in args.items() if k in ("patchText", "patch", "input") and isinstance(v, str)), "")
    files += [m.group(1) for m in _PATCH_FILE.finditer(patch)]
    files = list(dict.fromkeys(files))
    summary = next((args[k] for k in _SUMMARY_KEYS if isinstance(args.get(k), str) and args[k]), None)
    if summary is None and files:
        summary = ", ".join(files)
    if summary is None:
        pairs = [f"{k}={v}" for k, v in args.items() if isinstance(v, str | int | float | bool)]
        summary = " ".join(pairs) or (json.dumps(args, sort_keys=True) if args else "")
    return ToolCall(name=name, summary=one_line(summary), files=tuple(files))
