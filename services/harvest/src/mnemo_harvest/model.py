"""What a reader turns a coding-agent session into: one agent-neutral Session."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from mnemo.harvest.v1 import harvest_service_pb2 as pb
from mnemo_platform import enum_labels

# The agents harvest knows: the labels of the Agent enum ("claude-code", "codex", ...).
AGENTS = tuple(enum_labels(pb.Agent))


@dataclass(frozen=True)
class ToolCall:
    """A tool call, kept as a one-line stub: the tool's output never enters memory."""

    name: str
    """name is the tool's name as the agent recorded it (Bash, exec_command, read, mcp__x__y...)."""
    summary: str
    """summary is one line: the command run, the file edited, the pattern searched; at most ~200 chars."""
    files: tuple[str, ...] = ()
    """files are paths the call read or changed, when the input names them."""


@dataclass
class Turn:
    """One message of the conversation, as the transcript shows it."""

    role: Literal["user", "assistant"]
    text: str
    """text is what the human typed or the model wrote: no tool output, no base64, no thinking."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    timestamp: datetime | None = None


@dataclass
class Session:
    """A coding-agent session, agent-neutral, with its subagents attached."""

    agent: str
    """agent is one of AGENTS."""
    session_id: str
    """session_id is the agent's own id (Claude sessionId, Codex thread id, OpenCode ses_..., pi header id)."""
    source_path: str
    """source_path is the file (or database) the session was read from, for messages and archive."""
    cwd: str | None = None
    """cwd is the working directory the agent recorded (never the lossy directory name)."""
    title: str | None = None
    """title is the agent's own title (summary, custom title) if it has one."""
    model: str | None = None
    git_branch: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    turns: list[Turn] = field(default_factory=list)
    subagents: list[Session] = field(default_factory=list)
    """subagents are child sessions (Claude subagent files and sidechains, Codex child rollouts,
    OpenCode child sessions) attached to their root."""
    parent_session_id: str | None = None
    """parent_session_id is set on a child whose root was not found (it is then harvested alone)."""
    last_turn_closed: bool = True
    """last_turn_closed is False when the last turn is mid-flight (a pending tool call, no end_turn)."""
    skipped_records: Counter[str] = field(default_factory=Counter)
    """skipped_records counts records of unknown or ignored types, by type."""
    malformed: list[tuple[str, int]] = field(default_factory=list)
    """malformed lists (file, 1-based line) of lines that were not valid JSON and were skipped."""
    refused: list[str] = field(default_factory=list)
    """refused names lines refused as hostile (`file:line: longer than … bytes`, `nested deeper than …`)."""
    content_digest: str = ""
    """content_digest identifies the content read: the same session content gives the same digest."""
    size: int = 0
    """size is the number of bytes (or rows) of source the digest covers."""

    @property
    def files_touched(self) -> list[str]:
        seen: dict[str, None] = {}
        for session in (self, *self.subagents):
            for turn in session.turns:
                for call in turn.tool_calls:
                    for path in call.files:
                        seen.setdefault(path, None)
        return list(seen)

    @property
    def first_prompt(self) -> str:
        return next((t.text for t in self.turns if t.role == "user" and t.text.strip()), "")

    @property
    def fingerprint(self) -> str:
        """The source version: `<size>:<digest>`, so a grown session has a new fingerprint."""
        return f"{self.size}:{self.content_digest}"


@dataclass(frozen=True)
class SourceRef:
    """A session found on disk, before it is read: enough to decide whether to read it."""

    agent: str
    key: str
    """key is the session's identity (its id), stable across renames, archiving and compression."""
    path: str
    mtime: float
    """mtime is when the session last changed (file mtime, or the session row's time_updated)."""
    size: int
    """size is the source's size in bytes (or a row count for databases)."""


class Reader(Protocol):
    """One per agent: finds sessions under its roots and reads one into a Session."""

    agent: str

    def discover(self) -> Iterator[SourceRef]:
        """Every root session under the reader's roots. Subagent-only sources are not listed:
        read() attaches them to their root. Missing roots yield nothing; they are not errors."""
        ...

    def read(self, ref: SourceRef) -> Session:
        """The whole session. Never raises for bad content: malformed lines are skipped and listed
        in Session.malformed, unknown record types counted in Session.skipped_records. Raises
        OSError only when the source cannot be read at all (vanished, permission denied), and
        SessionRefused (mnemo_harvest.readers.lines) when it is over the session cap; a line over
        the line or depth cap is left out and listed in Session.refused."""
        ...


def digest(*parts: bytes) -> str:
    """sha256 of the parts, hex: the digest readers use for Session.content_digest."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
    return h.hexdigest()


def descendants(root: str, children: dict[str, list[str]]) -> list[str]:
    """Children, grandchildren... of `root`, breadth first, siblings in the order `children` lists
    them (each reader sorts them stably, since content digests depend on the order)."""
    order: list[str] = []
    seen = {root}
    frontier = [root]
    while frontier:
        nxt: list[str] = []
        for node in frontier:
            for child in children.get(node, []):
                if child not in seen:
                    seen.add(child)
                    order.append(child)
                    nxt.append(child)
        frontier = nxt
    return order
