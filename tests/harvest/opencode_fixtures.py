"""OpenCode data dirs built from the documented schema: opencode.db (generation C) and the storage/ tree (B).

No public OpenCode fixture exists, so the tests write both generations from one description
(docs/session-formats.md §4.2): the database stores `data` without the ids, the JSON tree repeats them.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROJECT_ID = "b1d2c3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0"
WORKTREE = "/home/dev/cli-tool"
PNG_DATA_URL = "data:image/png;base64," + "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk" * 4
T0 = 1_767_000_000_000  # ms, as OpenCode stores times

SESSION_DDL = """
CREATE TABLE session (
    id TEXT PRIMARY KEY, project_id TEXT NOT NULL REFERENCES project(id), workspace_id TEXT, parent_id TEXT,
    fork_session_id TEXT, fork_message_id TEXT, slug TEXT NOT NULL DEFAULT '', directory TEXT NOT NULL, path TEXT,
    title TEXT NOT NULL, version TEXT NOT NULL, share_url TEXT, summary_additions INTEGER, summary_deletions INTEGER,
    summary_files INTEGER, summary_diffs TEXT, metadata TEXT, cost REAL, tokens_input INTEGER, tokens_output INTEGER,
    tokens_reasoning INTEGER, tokens_cache_read INTEGER, tokens_cache_write INTEGER, revert TEXT, permission TEXT,
    agent TEXT, model TEXT, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, time_compacting INTEGER,
    time_archived INTEGER
)"""
# An early 1.x schema: no workspace_id, fork_*, agent or model columns (the reader selects defensively).
LEGACY_SESSION_DDL = """
CREATE TABLE session (
    id TEXT PRIMARY KEY, project_id TEXT NOT NULL REFERENCES project(id), parent_id TEXT, slug TEXT NOT NULL DEFAULT '',
    directory TEXT NOT NULL, title TEXT NOT NULL, version TEXT NOT NULL, share_url TEXT, revert TEXT, permission TEXT,
    time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, time_compacting INTEGER, time_archived INTEGER
)"""
OTHER_DDL = [
    """CREATE TABLE project (
        id TEXT PRIMARY KEY, worktree TEXT NOT NULL, vcs TEXT, name TEXT, icon_url TEXT, icon_color TEXT,
        time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, time_initialized INTEGER, sandboxes TEXT,
        commands TEXT
    )""",
    """CREATE TABLE message (
        id TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
        time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL
    )""",
    """CREATE TABLE part (
        id TEXT PRIMARY KEY, message_id TEXT NOT NULL REFERENCES message(id) ON DELETE CASCADE,
        session_id TEXT NOT NULL, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL
    )""",
    "CREATE INDEX message_session_idx ON message(session_id)",
    "CREATE INDEX part_message_idx ON part(message_id)",
    "CREATE TABLE todo (session_id TEXT, content TEXT, status TEXT, priority TEXT, position INTEGER, "
    "time_created INTEGER, time_updated INTEGER)",
    "CREATE TABLE permission (project_id TEXT PRIMARY KEY, data TEXT)",
    "CREATE TABLE session_share (session_id TEXT PRIMARY KEY, id TEXT, secret TEXT, url TEXT)",
]


@dataclass
class Part:
    id: str
    data: dict[str, Any]
    """data is the Part without its ids (type, text, state...)."""


@dataclass
class Message:
    id: str
    data: dict[str, Any]
    """data is the message Info without its ids (role, time, modelID...)."""
    parts: list[Part] = field(default_factory=list)

    @property
    def created(self) -> int:
        return int(self.data["time"]["created"])


@dataclass
class OcSession:
    id: str
    title: str
    created: int
    directory: str = WORKTREE
    parent_id: str | None = None
    messages: list[Message] = field(default_factory=list)

    @property
    def updated(self) -> int:
        times = [self.created] + [m.created for m in self.messages]
        return max(times) + 1_000


# -- building blocks -------------------------------------------------------------------------------


def text(pid: str, body: str, **extra: Any) -> Part:
    return Part(pid, {"type": "text", "text": body, **extra})


def tool(pid: str, name: str, args: dict[str, Any], *, status: str = "completed", output: str = "") -> Part:
    state: dict[str, Any] = {"status": status, "input": args}
    if status == "completed":
        state |= {"output": output, "title": name, "metadata": {}, "time": {"start": T0, "end": T0 + 5}}
    elif status == "running":
        state |= {"time": {"start": T0}}
    elif status == "pending":
        state |= {"raw": json.dumps(args)}
    return Part(pid, {"type": "tool", "callID": f"call_{pid}", "tool": name, "state": state})


def user(mid: str, at: int, *parts: Part) -> Message:
    data = {
        "role": "user",
        "time": {"created": at},
        "agent": "build",
        "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"},
    }
    return Message(mid, data, list(parts))


def assistant(mid: str, at: int, parent: str, *parts: Part, completed: bool = True) -> Message:
    times: dict[str, int] = {"created": at}
    if completed:
        times["completed"] = at + 4_000
    data: dict[str, Any] = {
        "role": "assistant",
        "time": times,
        "parentID": parent,
        "modelID": "claude-sonnet-4-5",
        "providerID": "anthropic",
        "mode": "build",
        "agent": "build",
        "path": {"cwd": WORKTREE, "root": WORKTREE},
        "cost": 0.0123,
        "tokens": {"input": 1200, "output": 300, "reasoning": 40, "cache": {"read": 0, "write": 0}},
    }
    if completed:
        data["finish"] = "stop"
    return Message(mid, data, list(parts))


# -- the corpus ------------------------------------------------------------------------------------


@dataclass
class Corpus:
    """Every session the tests use, by role."""

    root: OcSession
    child: OcSession
    unfinished: OcSession
    both_db: OcSession
    both_json: OcSession
    json_only: OcSession
    json_child: OcSession

    @property
    def in_db(self) -> list[OcSession]:
        return [self.root, self.child, self.unfinished, self.both_db]

    @property
    def in_json(self) -> list[OcSession]:
        return [self.both_json, self.json_only, self.json_child]


def corpus() -> Corpus:
    root = OcSession("ses_01root", "Add a --verbose flag", T0)
    root.messages = [
        user(
            "msg_01u1",
            T0 + 1_000,
            text("prt_01u1a", "Add a --verbose flag to the CLI."),
            text("prt_01u1b", "<system-reminder>SYNTHETIC_REMINDER_MUST_NOT_RENDER</system-reminder>", synthetic=True),
            Part("prt_01u1c", {"type": "file", "mime": "image/png", "filename": "shot.png", "url": PNG_DATA_URL}),
        ),
        assistant(
            "msg_01a1",
            T0 + 2_000,
            "msg_01u1",
            Part("prt_01a1a", {"type": "step-start", "snapshot": "4b825dc6"}),
            Part("prt_01a1b", {"type": "reasoning", "text": "REASONING_MUST_NOT_RENDER", "time": {"start": T0}}),
            text("prt_01a1c", "I'll look at the CLI entry point first."),
            tool(
                "prt_01a1d", "read", {"filePath": "/home/dev/cli-tool/src/cli.py"}, output="TOOL_OUTPUT_MUST_NOT_RENDER"
            ),
            tool("prt_01a1e", "bash", {"command": "git status", "description": "Shows status"}, output="On branch"),
            tool(
                "prt_01a1f",
                "task",
                {"description": "Find flag parsing", "prompt": "Where are flags parsed?", "subagent_type": "general"},
                output="Flag parsing is in src/cli.py.",
            ),
            Part("prt_01a1g", {"type": "step-finish", "reason": "tool-calls", "cost": 0.01, "tokens": {}}),
            Part("prt_01a1h", {"type": "snapshot", "snapshot": "4b825dc6"}),
            Part("prt_01a1i", {"type": "patch", "hash": "4b825dc6", "files": ["/home/dev/cli-tool/src/cli.py"]}),
        ),
        user("msg_01u2", T0 + 10_000, text("prt_01u2a", "Now run the tests.")),
        assistant(
            "msg_01a2",
            T0 + 11_000,
            "msg_01u2",
            tool(
                "prt_01a2a",
                "edit",
                {"filePath": "/home/dev/cli-tool/src/cli.py", "oldString": "a", "newString": "b"},
                output="Edit applied",
            ),
            tool("prt_01a2b", "bash", {"command": "uv run pytest -q"}, output="3 passed"),
            text("prt_01a2c", "Added the flag; the tests pass."),
        ),
    ]
    child = OcSession("ses_02child", "Find flag parsing (@general subagent)", T0 + 3_000, parent_id=root.id)
    child.messages = [
        user("msg_02u1", T0 + 3_100, text("prt_02u1a", "Where are flags parsed?")),
        assistant(
            "msg_02a1",
            T0 + 3_200,
            "msg_02u1",
            tool("prt_02a1a", "grep", {"pattern": "argparse", "path": "/home/dev/cli-tool/src"}, output="src/cli.py:3"),
            text("prt_02a1b", "Flag parsing is in src/cli.py."),
        ),
    ]
    unfinished = OcSession("ses_03open", "Deploy", T0 + 20_000)
    unfinished.messages = [
        user("msg_03u1", T0 + 20_100, text("prt_03u1a", "Deploy it to staging.")),
        assistant(
            "msg_03a1",
            T0 + 20_200,
            "msg_03u1",
            text("prt_03a1a", "Deploying now."),
            tool("prt_03a1b", "bash", {"command": "make deploy"}, status="running"),
            completed=False,
        ),
    ]
    both_db = OcSession("ses_04both", "Refactor config loading (database copy)", T0 + 30_000)
    both_db.messages = [
        user("msg_04u1", T0 + 30_100, text("prt_04u1a", "Refactor config loading.")),
        assistant("msg_04a1", T0 + 30_200, "msg_04u1", text("prt_04a1a", "Done, from the database.")),
    ]
    both_json = OcSession("ses_04both", "Refactor config loading (JSON copy)", T0 + 30_000)
    both_json.messages = [
        user("msg_04u1", T0 + 30_100, text("prt_04u1a", "Refactor config loading.")),
        assistant("msg_04a1", T0 + 30_200, "msg_04u1", text("prt_04a1a", "Done, from the JSON tree.")),
    ]
    json_only = OcSession("ses_05json", "New session - 2025-11-02T10:00:00.000Z", T0 - 90_000_000)
    json_only.messages = [
        user("msg_05u1", T0 - 89_000_000, text("prt_05u1a", "Explain the build system.")),
        assistant(
            "msg_05a1",
            T0 - 88_000_000,
            "msg_05u1",
            tool(
                "prt_05a1a",
                "apply_patch",
                {"patchText": "*** Begin Patch\n*** Update File: pyproject.toml\n@@\n-a\n+b\n*** End Patch"},
            ),
            text("prt_05a1b", "It builds with hatchling."),
        ),
    ]
    json_child = OcSession("ses_06jchild", "Child session - 2025-11-02T10:01:00.000Z", T0 - 88_500_000)
    json_child.parent_id = json_only.id
    json_child.messages = [
        user("msg_06u1", T0 - 88_400_000, text("prt_06u1a", "List the build backends.")),
        assistant("msg_06a1", T0 - 88_300_000, "msg_06u1", text("prt_06a1a", "Only hatchling.")),
    ]
    return Corpus(root, child, unfinished, both_db, both_json, json_only, json_child)


# -- generation C: the database --------------------------------------------------------------------


def create_db(path: Path, *, wal: bool = True, legacy_schema: bool = False) -> None:
    """An empty opencode.db with the project row, in WAL mode as OpenCode runs it."""
    conn = sqlite3.connect(path)
    try:
        if wal:
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(LEGACY_SESSION_DDL if legacy_schema else SESSION_DDL)
        for ddl in OTHER_DDL:
            conn.execute(ddl)
        conn.execute(
            "INSERT INTO project (id, worktree, vcs, name, time_created, time_updated) VALUES (?, ?, 'git', ?, ?, ?)",
            (PROJECT_ID, WORKTREE, "cli-tool", T0, T0),
        )
        conn.commit()
    finally:
        conn.close()


def insert_session(conn: sqlite3.Connection, session: OcSession) -> None:
    columns = {r[1] for r in conn.execute("PRAGMA table_info(session)")}
    row: dict[str, Any] = {
        "id": session.id,
        "project_id": PROJECT_ID,
        "parent_id": session.parent_id,
        "slug": session.id.removeprefix("ses_"),
        "directory": session.directory,
        "title": session.title,
        "version": "1.2.10",
        "time_created": session.created,
        "time_updated": session.updated,
    }
    if "model" in columns:
        row["model"] = json.dumps({"id": "claude-sonnet-4-5", "providerID": "anthropic"})
        row["agent"] = "build"
    conn.execute(
        f"INSERT INTO session ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
        tuple(row.values()),
    )
    for message in session.messages:
        insert_message(conn, session.id, message)


def insert_message(conn: sqlite3.Connection, session_id: str, message: Message) -> None:
    conn.execute(
        "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)",
        (message.id, session_id, message.created, message.created, json.dumps(message.data)),
    )
    for part in message.parts:
        conn.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?, ?)",
            (part.id, message.id, session_id, message.created, message.created, json.dumps(part.data)),
        )
    conn.execute(
        "UPDATE session SET time_updated = max(time_updated, ?) WHERE id = ?", (message.created + 1_000, session_id)
    )


def write_db(path: Path, sessions: list[OcSession], *, wal: bool = True, legacy_schema: bool = False) -> None:
    create_db(path, wal=wal, legacy_schema=legacy_schema)
    conn = sqlite3.connect(path)
    try:
        for session in sessions:
            insert_session(conn, session)
        conn.commit()
    finally:
        conn.close()


# -- generation B: the JSON tree -------------------------------------------------------------------


def write_json_tree(data_dir: Path, sessions: list[OcSession]) -> None:
    storage = data_dir / "storage"
    _dump(storage / "project" / f"{PROJECT_ID}.json", {"id": PROJECT_ID, "worktree": WORKTREE, "vcs": "git"})
    for session in sessions:
        info: dict[str, Any] = {
            "id": session.id,
            "version": "0.15.8",
            "projectID": PROJECT_ID,
            "directory": session.directory,
            "title": session.title,
            "time": {"created": session.created, "updated": session.updated},
        }
        if session.parent_id:
            info["parentID"] = session.parent_id
        _dump(storage / "session" / PROJECT_ID / f"{session.id}.json", info)
        for message in session.messages:
            _dump(
                storage / "message" / session.id / f"{message.id}.json",
                {"id": message.id, "sessionID": session.id, **message.data},
            )
            for part in message.parts:
                _dump(
                    storage / "part" / message.id / f"{part.id}.json",
                    {"id": part.id, "sessionID": session.id, "messageID": message.id, **part.data},
                )


def _dump(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2))


def build_data_dir(data_dir: Path, *, legacy_schema: bool = False) -> Corpus:
    """A data dir with both generations: opencode.db plus a storage/ tree (one session in both)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    sessions = corpus()
    write_db(data_dir / "opencode.db", sessions.in_db, legacy_schema=legacy_schema)
    write_json_tree(data_dir, sessions.in_json)
    return sessions
