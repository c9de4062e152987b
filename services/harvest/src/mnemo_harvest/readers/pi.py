"""pi reader: `<sessions>/--<enc-cwd>--/<ts>_<uuid>.jsonl` (format v1 to v3) becomes one Session.

How the format's quirks are handled (docs/session-formats.md §3):

- Identity: the header's `id` (the first `type:"session"` line, looked for in the first lines only,
  since forks may write a title line first), else the uuid in the file name. pi rewrites old files
  whole when it opens them, so nothing assumes growth: the digest always covers the whole file.
- Tree: from v2 on, entries carry `id`/`parentId`; the active branch is the walk up `parentId` from
  the last entry with an id, and abandoned branches are dropped. v1 files (no ids) are read in order.
- Messages: `user` → user turn; `assistant` → text and `toolCall` stubs (thinking and images
  dropped; an aborted reply with no content adds no turn); `toolResult` is never kept (the call's stub
  stands for it); `bashExecution` (the user's `!cmd`) → a user turn with no text and one
  `bash: <cmd>` stub, its output dropped. Other roles (custom, branchSummary, compactionSummary,
  hookMessage) are context, not conversation, and are counted as `message:<role>` in skipped_records.
- Compaction, branch summaries, custom entries, labels, thinking-level changes and unknown types
  are skipped and counted; `session_info.name` is the title; `model_change` is a fallback for the model.
- Model: the model that wrote most assistant messages with content, else the last `model_change`,
  else the v1 header's `modelId`.
- Forks: the header's `parentSession` / `branchedFrom` is not copied to `parent_session_id`, which
  means "a child whose root is missing"; a fork is a complete session of its own.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mnemo_harvest.model import Session, SourceRef, ToolCall, Turn
from mnemo_harvest.readers.fields import field_str
from mnemo_harvest.readers.lines import Budget, Limits, head_lines, json_line, raw_lines, refusal
from mnemo_harvest.readers.stubs import display_path, one_line, short_args

AGENT = "pi"
HEADER_SCAN_LINES = 5
_FILE_NAME_UUID_RE = re.compile(r"_([0-9a-fA-F-]{36})$")
_SEARCH_TOOLS = {"grep", "find", "ls"}
_FILE_KEYS = ("path", "file_path", "filePath")


class PiReader:
    """Reads pi sessions under one sessions directory (`~/.pi/agent/sessions` by default)."""

    agent = AGENT

    def __init__(self, sessions_dir: Path, limits: Limits | None = None) -> None:
        self.sessions_dir = Path(sessions_dir)
        self.limits = limits or Limits()

    def discover(self) -> Iterator[SourceRef]:
        try:
            folders = sorted(p for p in self.sessions_dir.iterdir() if p.is_dir())
        except OSError:
            return
        for folder in folders:
            try:
                files = sorted(p for p in folder.glob("*.jsonl") if p.is_file())
            except OSError:
                continue
            for path in files:
                try:
                    yield self.ref_for(path)
                except OSError:
                    continue  # vanished or unreadable between listing and reading its header

    def ref_for(self, path: Path) -> SourceRef:
        """A SourceRef for one session file, keyed by its header id (reads the first lines only)."""
        stat = path.stat()
        header = _read_header(path, self.limits)
        key = _header_id(header) or _file_name_id(path)
        return SourceRef(agent=AGENT, key=key, path=str(path), mtime=stat.st_mtime, size=stat.st_size)

    def read(self, ref: SourceRef) -> Session:
        path = Path(ref.path)
        session = Session(agent=AGENT, session_id=ref.key, source_path=str(path))
        budget = Budget(self.limits)
        header: dict[str, Any] = {}
        entries: list[dict[str, Any]] = []
        for number, raw in raw_lines(path, budget):
            if raw is None:
                budget.refused.append(refusal(path, number, f"longer than {self.limits.max_line_bytes} bytes"))
                continue
            if not raw.strip():
                continue
            value, why = json_line(raw, self.limits)
            if why:
                budget.refused.append(refusal(path, number, why))
            elif not isinstance(value, dict):
                session.malformed.append((str(path), number))
            elif value.get("type") == "session" and not header:
                header = value
            else:
                entries.append(value)
        session.content_digest, session.size, session.refused = budget.digest, budget.read, budget.refused
        session.session_id = _header_id(header) or ref.key
        session.cwd = field_str(header, "cwd", None)
        active = _active_branch(entries)
        _fill(session, header, entries, active)
        return session


# ------------------------------------------------------------------------------------------ header


def _read_header(path: Path, limits: Limits) -> dict[str, Any]:
    for value in head_lines(path, HEADER_SCAN_LINES, limits):
        if isinstance(value, dict) and value.get("type") == "session":
            return value
    return {}


def _header_id(header: dict[str, Any]) -> str | None:
    value = header.get("id")
    return value if isinstance(value, str) and value else None


def _file_name_id(path: Path) -> str:
    match = _FILE_NAME_UUID_RE.search(path.stem)
    return match.group(1) if match else path.stem


# -------------------------------------------------------------------------------------------- tree


def _active_branch(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries on the path from the last entry with an id up to the root, in file order."""
    by_id = {e["id"]: e for e in entries if isinstance(e.get("id"), str)}
    leaf = next((e for e in reversed(entries) if isinstance(e.get("id"), str)), None)
    if leaf is None:
        return entries  # v1: no tree, the file order is the conversation
    on_path: set[str] = set()
    node: dict[str, Any] | None = leaf
    while node is not None and node["id"] not in on_path:
        on_path.add(node["id"])
        parent = node.get("parentId")
        node = by_id.get(parent) if isinstance(parent, str) else None
    return [e for e in entries if e.get("id") in on_path]


# ------------------------------------------------------------------------------------------ fill


def _fill(session: Session, header: dict[str, Any], entries: list[dict[str, Any]], active: list[Any]) -> None:
    stamps = [t for t in (_timestamp(e.get("timestamp")) for e in [header, *entries]) if t is not None]
    if stamps:
        session.started_at, session.ended_at = min(stamps), max(stamps)
    models: Counter[str] = Counter()
    last_model_change: str | None = None
    last_message: dict[str, Any] | None = None
    last_assistant: dict[str, Any] | None = None
    for entry in active:
        kind = field_str(entry, "type", "<none>")
        if kind == "session_info":
            name = entry.get("name")
            if isinstance(name, str) and name.strip():
                session.title = name.strip()
            continue
        if kind == "model_change":
            if isinstance(entry.get("modelId"), str):
                last_model_change = entry["modelId"]
            continue
        if kind != "message" or not isinstance(entry.get("message"), dict):
            session.skipped_records[str(kind)] += 1
            continue
        message = entry["message"]
        role = message.get("role")
        stamp = _timestamp(entry.get("timestamp")) or _millis(message.get("timestamp"))
        if role == "user":
            last_message = message
            text = _text(message.get("content"))
            if text:
                session.turns.append(Turn(role="user", text=text, timestamp=stamp))
        elif role == "assistant":
            last_message = last_assistant = message
            turn = _assistant_turn(message, session.cwd, stamp)
            if turn is not None:
                session.turns.append(turn)
                if isinstance(message.get("model"), str) and message["model"]:
                    models[message["model"]] += 1
        elif role == "toolResult":
            last_message = message
        elif role == "bashExecution" and isinstance(message.get("command"), str):
            call = ToolCall(name="bash", summary=one_line(f"bash: {message['command']}"))
            session.turns.append(Turn(role="user", text="", tool_calls=[call], timestamp=stamp))
        else:
            session.skipped_records[f"message:{role if isinstance(role, str) else '<none>'}"] += 1
    header_model = field_str(header, "modelId", None)
    session.model = (models.most_common(1)[0][0] if models else None) or last_model_change or header_model
    session.last_turn_closed = _closed(last_message, last_assistant)


def _closed(last_message: dict[str, Any] | None, last_assistant: dict[str, Any] | None) -> bool:
    """Open while a tool call or a prompt awaits the model; a user's own `!cmd` owes nothing."""
    if last_message is None:
        return True
    if last_message.get("role") in ("user", "toolResult"):
        return False
    return last_assistant is None or last_assistant.get("stopReason") != "toolUse"


def _assistant_turn(message: dict[str, Any], cwd: str | None, stamp: datetime | None) -> Turn | None:
    texts: list[str] = []
    calls: list[ToolCall] = []
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"].strip():
            texts.append(block["text"].strip())
        elif block.get("type") == "toolCall":
            calls.append(tool_stub(str(block.get("name") or "?"), block.get("arguments"), cwd))
    if isinstance(content, str) and content.strip():
        texts.append(content.strip())
    if not texts and not calls:
        return None
    return Turn(role="assistant", text="\n\n".join(texts), tool_calls=calls, timestamp=stamp)


def _text(content: Any) -> str:
    """The text of a user message: a string, or its text blocks (images dropped)."""
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    parts = [
        b["text"].strip()
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) and b["text"].strip()
    ]
    return "\n\n".join(parts)


# ------------------------------------------------------------------------------------------- stubs


def tool_stub(name: str, args: Any, cwd: str | None) -> ToolCall:
    """A pi toolCall as one line: `bash: npm test`, `read: src/main.ts`, `grep: "x" in src`."""
    args = args if isinstance(args, dict) else {}

    def arg(key: str) -> str:
        return field_str(args, key)

    files = tuple(
        args[k]
        for k in _FILE_KEYS
        if isinstance(args.get(k), str) and args[k].strip() not in ("", ".") and name not in _SEARCH_TOOLS
    )
    if name == "bash" and arg("command"):
        detail = arg("command")
    elif name in _SEARCH_TOOLS:
        pattern = f'"{arg("pattern")}"' if name == "grep" and arg("pattern") else arg("pattern")
        where = display_path(arg("path"), cwd) if arg("path") else ""
        detail = " in ".join(p for p in (pattern, where) if p) or short_args(args)
    elif files:
        detail = display_path(files[0], cwd)
    elif key := next((k for k in ("command", "url", "query", "pattern", "description") if arg(k)), None):
        detail = arg(key)
    else:
        detail = short_args(args)
    return ToolCall(name=name, summary=one_line(f"{name}: {detail}"), files=files)


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _millis(value: Any) -> datetime | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
