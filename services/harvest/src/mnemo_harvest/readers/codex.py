"""Reads Codex CLI rollouts (date tree, flat legacy layout, archive, .jsonl.zst) into Sessions."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import zstandard

from mnemo_harvest.model import Session, SourceRef, ToolCall, Turn, descendants
from mnemo_harvest.readers.fields import field_dict, field_str
from mnemo_harvest.readers.lines import MAX_ZSTD_WINDOW, Budget, Limits, SessionRefused, json_line, raw_lines, refusal
from mnemo_harvest.readers.stubs import one_line

AGENT = "codex"

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_TRAILING_UUID = re.compile(rf"({_UUID})\.jsonl(?:\.zst)?$")
_ANY_UUID = re.compile(_UUID)
# session_meta is the first line in every build; the bound only guards against odd files.
_META_SCAN_LINES = 50
_CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})
_SHELLS = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh", "/usr/bin/bash", "/usr/bin/zsh"})
# Context Codex injects as user-role ResponseItems; only used when a file has no user_message events.
_INJECTED = re.compile(
    r"^\s*(?:<(?:environment_context|user_instructions|permissions instructions|INSTRUCTIONS|user_shell_command"
    r"|turn_aborted|collaboration_mode|skill)\b|# AGENTS\.md instructions)"
)
_DATA_URL = re.compile(r"data:[\w.+-]+/[\w.+-]+(?:;[\w=.+-]+)*;base64,[A-Za-z0-9+/=]+")
_PATCH_FILE = re.compile(r"^\*\*\* (?:(?:Add|Update|Delete) File|Move to): (.+?)\s*$", re.MULTILINE)
_PATH_KEYS = ("path", "file_path", "filePath", "filename")


@dataclass(frozen=True)
class _Rollout:
    """One rollout file as discovery sees it: identity, lineage and on-disk stat."""

    thread_id: str
    path: Path
    parent_id: str | None
    mtime: float
    size: int


@dataclass
class _Record:
    line: int
    kind: str
    payload: dict[str, Any]
    timestamp: datetime | None

    @cached_property
    def replay_key(self) -> str:
        # Without the timestamp: a replay may be re-stamped when the child writes it.
        return json.dumps([self.kind, self.payload], sort_keys=True, separators=(",", ":"))


@dataclass
class _Parsed:
    path: str
    digest: str
    size: int
    records: list[_Record] = field(default_factory=list)
    malformed: list[tuple[str, int]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


class CodexReader:
    """Codex threads under `$CODEX_HOME`, keyed by thread id, with subagent rollouts attached to their parent.

    Message text has one source per role and file (Codex logs each message twice):
    - user turns come from `event_msg` `user_message`, which is exactly what the human typed; the
      `response_item` user messages also carry injected context (AGENTS.md, environment, IDE context)
      that is not always recognisable. Files without any `user_message` event (the legacy format,
      old builds) fall back to `response_item` user messages minus the known injected wrappers;
    - assistant turns come from `response_item` assistant messages, the model's own output in order
      with its tool calls; files without any fall back to `event_msg` `agent_message`.

    read() takes the thread family from the last discover() (so a tick does not rescan the tree once
    per read) and rescans only when the ref's file has moved; a child that appears after discover()
    is attached on the next pass, whose SourceRef size differs.
    """

    agent = AGENT

    def __init__(self, home: Path, limits: Limits | None = None) -> None:
        self.home = Path(home)
        self.limits = limits or Limits()
        self._meta_cache: dict[Path, tuple[int, int, _Rollout | None]] = {}
        self._threads: dict[str, _Rollout] | None = None

    # -- discovery ---------------------------------------------------------------------------------

    def discover(self) -> Iterator[SourceRef]:
        threads = self._threads = self._index()
        children = _children_by_parent(threads)
        for thread_id in sorted(threads):
            rollout = threads[thread_id]
            if rollout.parent_id is not None and rollout.parent_id in threads:
                continue
            family = [rollout, *(threads[c] for c in descendants(thread_id, children))]
            yield SourceRef(
                agent=AGENT,
                key=thread_id,
                path=str(rollout.path),
                mtime=max(r.mtime for r in family),
                size=sum(r.size for r in family),
            )

    def source_ref(self, path: Path) -> SourceRef:
        """A ref for one rollout file wherever it lives (outside the roots too); raises OSError if unreadable."""
        rollout = self._rollout(Path(path))
        if rollout is None:
            raise FileNotFoundError(f"no thread id in {path}")
        return SourceRef(
            agent=AGENT, key=rollout.thread_id, path=str(rollout.path), mtime=rollout.mtime, size=rollout.size
        )

    def _index(self) -> dict[str, _Rollout]:
        """Every thread under the roots; a plain rollout wins over its .zst twin, then the newest file."""
        best: dict[str, tuple[tuple[bool, float], _Rollout]] = {}
        seen: set[Path] = set()
        for path in self._candidate_files():
            seen.add(path)
            try:
                rollout = self._rollout(path)
            except OSError:
                continue  # vanished between listing and reading (archived, compressed)
            if rollout is None:
                continue
            rank = (path.name.endswith(".jsonl"), rollout.mtime)
            current = best.get(rollout.thread_id)
            if current is None or rank > current[0]:
                best[rollout.thread_id] = (rank, rollout)
        for stale in set(self._meta_cache) - seen:
            del self._meta_cache[stale]
        return {thread_id: rollout for thread_id, (_, rollout) in best.items()}

    def _candidate_files(self) -> Iterator[Path]:
        sessions = self.home / "sessions"
        if sessions.is_dir():
            for dirpath, dirnames, filenames in os.walk(sessions):
                dirnames.sort()
                for name in sorted(filenames):
                    if _is_rollout_name(name):
                        yield Path(dirpath) / name
        archived = self.home / "archived_sessions"
        if archived.is_dir():
            for path in sorted(archived.iterdir()):
                if _is_rollout_name(path.name) and path.is_file():
                    yield path

    def _rollout(self, path: Path) -> _Rollout | None:
        st = path.stat()
        cached = self._meta_cache.get(path)
        if cached is not None and cached[:2] == (st.st_mtime_ns, st.st_size):
            return cached[2]
        meta = _read_meta(path)
        name_id = _name_thread_id(path.name)
        meta_id = field_str(meta, "id", None)
        thread_id = meta_id or name_id
        rollout = None
        if thread_id:
            rollout = _Rollout(thread_id, path, _parent_of(meta), st.st_mtime, st.st_size)
        self._meta_cache[path] = (st.st_mtime_ns, st.st_size, rollout)
        return rollout

    # -- reading -----------------------------------------------------------------------------------

    def read(self, ref: SourceRef) -> Session:
        if self._threads is None:
            self._threads = self._index()
        threads = self._threads
        path = Path(ref.path)
        if not path.exists():
            # Archiving moves the file and compression renames it: find the thread again by id.
            threads = self._threads = self._index()
            moved = threads.get(ref.key)
            if moved is None:
                raise FileNotFoundError(f"codex thread {ref.key} is gone from {ref.path}")
            path = moved.path
        # One budget for the thread's family: the session cap covers the parent and its children.
        budget = Budget(self.limits)
        root = _parse(path, budget)
        session = _build(root, ref.key, exclude=None)
        own = threads.get(ref.key)
        parent_id = own.parent_id if own is not None else _parent_of(_meta_payload(root))
        if parent_id is not None and parent_id not in threads:
            session.parent_session_id = parent_id

        children = _children_by_parent(threads)
        parsed: dict[str, _Parsed] = {ref.key: root}
        for child_id in descendants(ref.key, children):
            child = threads[child_id]
            try:
                child_parsed = _parse(child.path, budget)
            except OSError:
                continue  # a child that vanished mid-read is picked up on the next pass
            parsed[child_id] = child_parsed
            parent = parsed.get(child.parent_id or "")
            exclude = Counter(r.replay_key for r in parent.records) if parent is not None else None
            child_session = _build(child_parsed, child_id, exclude=exclude)
            child_session.content_digest = child_parsed.digest
            child_session.size = child_parsed.size
            session.subagents.append(child_session)

        titles = self._titles()
        for s in (session, *session.subagents):
            s.title = titles.get(s.session_id)
        session.last_turn_closed = all(s.last_turn_closed for s in (session, *session.subagents))
        # The family's digest is over its files in this order, as when they were read whole.
        session.content_digest = budget.digest
        session.size = budget.read
        session.refused = budget.refused
        return session

    def _titles(self) -> dict[str, str]:
        """Thread names from session_index.jsonl: append-only, the newest line wins."""
        titles: dict[str, str] = {}
        index = self.home / "session_index.jsonl"
        # Its own budget: the index is Codex's, not a session's, but it is no more trusted.
        try:
            lines = list(raw_lines(index, Budget(self.limits)))
        except (OSError, SessionRefused):
            return titles
        for _, raw in lines:
            entry, _ = json_line(raw, self.limits) if raw is not None else (None, "")
            if not isinstance(entry, dict):
                continue
            thread_id, name = entry.get("id"), entry.get("thread_name")
            if isinstance(thread_id, str) and isinstance(name, str) and name.strip():
                titles[thread_id] = name
        return titles


# -- files ---------------------------------------------------------------------------------------


def _name_thread_id(name: str) -> str | None:
    """The uuid ending a rollout's name (or, for renamed copies such as excerpts, any uuid in it)."""
    trailing = _TRAILING_UUID.search(name)
    if trailing is not None:
        return trailing.group(1).lower()
    anywhere = _ANY_UUID.search(name)
    return anywhere.group(0).lower() if anywhere is not None else None


def _is_rollout_name(name: str) -> bool:
    return name.startswith("rollout-") and (name.endswith(".jsonl") or name.endswith(".jsonl.zst"))


def _read_meta(path: Path) -> dict[str, Any]:
    """The session_meta payload (or legacy bare meta) from the head of a rollout, {} when there is none."""
    with path.open("rb") as raw:
        stream: Any = raw
        if path.name.endswith(".zst"):
            stream = io.BufferedReader(zstandard.ZstdDecompressor(max_window_size=MAX_ZSTD_WINDOW).stream_reader(raw))
        try:
            for number in range(_META_SCAN_LINES):
                line = stream.readline(Limits.max_line_bytes + 1)
                if not line:
                    break
                if len(line) > Limits.max_line_bytes:
                    return {}  # no meta line is this long
                obj, _ = json_line(line, Limits())
                if not isinstance(obj, dict):
                    continue
                if obj.get("type") == "session_meta" and isinstance(obj.get("payload"), dict):
                    return obj["payload"]
                if number == 0 and "payload" not in obj and "type" not in obj and "id" in obj:
                    return obj
        except zstandard.ZstdError:
            return {}
    return {}


def _parent_of(meta: dict[str, Any]) -> str | None:
    source = meta.get("source")
    subagent = source.get("subagent") if isinstance(source, dict) else None
    thread_spawn = subagent.get("thread_spawn") if isinstance(subagent, dict) else None
    if isinstance(thread_spawn, dict) and isinstance(thread_spawn.get("parent_thread_id"), str):
        return thread_spawn["parent_thread_id"]
    parent = meta.get("parent_thread_id")
    return parent if isinstance(parent, str) else None


def _children_by_parent(threads: dict[str, _Rollout]) -> dict[str, list[str]]:
    children: dict[str, list[str]] = {}
    for thread_id in sorted(threads):
        parent = threads[thread_id].parent_id
        if parent is not None and parent in threads and parent != thread_id:
            children.setdefault(parent, []).append(thread_id)
    return children


# -- parsing -------------------------------------------------------------------------------------


def _parse(path: Path, family: Budget) -> _Parsed:
    """One rollout streamed line by line, counted against its family's budget; its own digest kept."""
    own = Budget(family.limits)
    tee = _Tee(family, own)
    records: list[_Record] = []
    malformed: list[tuple[str, int]] = []
    skipped: Counter[str] = Counter()
    legacy_meta_possible = True
    number = 0
    truncated = False
    try:
        for number, raw in raw_lines(path, tee):
            if raw is None:
                family.refused.append(refusal(path, number, f"longer than {family.limits.max_line_bytes} bytes"))
                legacy_meta_possible = False
                continue
            if not raw.strip():
                continue
            obj, why = json_line(raw, family.limits)
            if why:
                family.refused.append(refusal(path, number, why))
                legacy_meta_possible = False
                continue
            if obj is None and raw.strip() != b"null":
                malformed.append((str(path), number))
                legacy_meta_possible = False
                continue
            if not isinstance(obj, dict):
                skipped["non_object_line"] += 1
                continue
            records.append(_record(number, obj, legacy_meta_possible))
            legacy_meta_possible = False
    except zstandard.ZstdError:
        truncated = True  # corrupt, or still being written: what came before the fault is kept
    parsed = _Parsed(str(path), own.digest, own.read, records, malformed, skipped)
    if truncated:
        parsed.malformed.append((parsed.path, number + 1))
    return parsed


class _Tee(Budget):
    """The family's budget, also counting one file's own digest and size."""

    def __init__(self, family: Budget, own: Budget) -> None:
        super().__init__(family.limits)
        self.family = family
        self.own = own

    def feed(self, chunk: bytes, path: Path) -> None:
        self.family.feed(chunk, path)
        self.own.hasher.update(chunk)
        self.own.read += len(chunk)


def _record(number: int, obj: dict[str, Any], first: bool) -> _Record:
    timestamp = _timestamp(obj.get("timestamp"))
    if "payload" in obj:
        payload = obj["payload"] if isinstance(obj["payload"], dict) else {"value": obj["payload"]}
        return _Record(number, str(obj.get("type")), payload, timestamp)
    # The pre-envelope format: a bare meta line, then bare ResponseItems and state lines.
    if "record_type" in obj:
        return _Record(number, str(obj["record_type"]), obj, timestamp)
    if first and "type" not in obj and "id" in obj:
        return _Record(number, "session_meta", obj, timestamp)
    if "type" in obj:
        return _Record(number, "response_item", obj, timestamp)
    return _Record(number, "untyped", obj, timestamp)


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _meta_payload(parsed: _Parsed) -> dict[str, Any]:
    return next((r.payload for r in parsed.records if r.kind == "session_meta"), {})


# -- building a Session --------------------------------------------------------------------------


def _build(parsed: _Parsed, thread_id: str, exclude: Counter[str] | None) -> Session:
    skipped: Counter[str] = Counter(parsed.skipped)
    records: list[_Record] = []
    meta: _Record | None = None
    for record in parsed.records:
        if record.kind == "session_meta" and meta is None:
            meta = record
            continue
        if exclude is not None and exclude[record.replay_key] > 0:
            # The child replays its parent's items; the parent already holds them.
            exclude[record.replay_key] -= 1
            skipped["replayed_from_parent"] += 1
            continue
        records.append(record)

    payload = meta.payload if meta is not None else {}
    session = Session(agent=AGENT, session_id=str(payload.get("id") or thread_id), source_path=parsed.path)
    session.malformed = list(parsed.malformed)
    session.cwd = field_str(payload, "cwd", None)
    git = payload.get("git")
    if isinstance(git, dict) and isinstance(git.get("branch"), str):
        session.git_branch = git["branch"]
    session.started_at = _timestamp(payload.get("timestamp")) or (meta.timestamp if meta else None)
    stamps = [r.timestamp for r in parsed.records if r.timestamp is not None]
    if session.started_at is None and stamps:
        session.started_at = min(stamps)
    session.ended_at = max(stamps) if stamps else session.started_at

    user_from_events = any(_is(r, "event_msg", "user_message") for r in records)
    assistant_from_items = any(
        _is(r, "response_item", "message") and r.payload.get("role") == "assistant" for r in records
    )
    task_open: bool | None = None
    pending: set[str] = set()

    def skip(name: str) -> None:
        skipped[name] += 1

    for record in records:
        kind, p = record.kind, record.payload
        sub = field_str(p, "type", None)
        if kind == "turn_context":
            if isinstance(p.get("model"), str):
                session.model = p["model"]
            if session.cwd is None and isinstance(p.get("cwd"), str):
                session.cwd = p["cwd"]
        elif kind == "response_item":
            if sub == "message":
                role = p.get("role")
                if role == "user" and not user_from_events:
                    text = _message_text(p.get("content"), drop_injected=True)
                    if text:
                        _add_turn(session, "user", text, record)
                        pending.clear()
                    else:
                        skip("response_item:message:injected")
                elif role == "assistant" and assistant_from_items:
                    text = _message_text(p.get("content"), drop_injected=False)
                    if text:
                        _add_turn(session, "assistant", text, record)
                else:
                    skip(f"response_item:message:{role}")
            elif sub in _CALL_TYPES:
                _attach(session, _tool_call(p), record)
                call_id = p.get("call_id") or p.get("id")
                if isinstance(call_id, str):
                    pending.add(call_id)
            elif sub == "web_search_call":
                _attach(session, _web_search(p), record)
            elif sub in _OUTPUT_TYPES:
                pending.discard(str(p.get("call_id")))
                skip(f"response_item:{sub}")
            else:
                skip(f"response_item:{sub}")
        elif kind == "event_msg":
            if sub == "user_message" and user_from_events:
                text = _scrub(field_str(p, "message"))
                if text.strip():
                    _add_turn(session, "user", text, record)
                    pending.clear()
            elif sub == "agent_message" and not assistant_from_items:
                text = _scrub(field_str(p, "message"))
                if text.strip():
                    _add_turn(session, "assistant", text, record)
            elif sub == "task_started":
                task_open = True
            elif sub in ("task_complete", "turn_aborted"):
                task_open = False
            else:
                skip(f"event_msg:{sub}")
        else:
            # compacted (its replacement_history repeats earlier lines), state, and types not known yet.
            skip(kind)

    session.last_turn_closed = not task_open if task_open is not None else not pending
    session.skipped_records = skipped
    return session


def _is(record: _Record, kind: str, sub: str) -> bool:
    return record.kind == kind and record.payload.get("type") == sub


def _add_turn(session: Session, role: Literal["user", "assistant"], text: str, record: _Record) -> None:
    session.turns.append(Turn(role=role, text=text, timestamp=record.timestamp))


def _attach(session: Session, call: ToolCall, record: _Record) -> None:
    if not session.turns or session.turns[-1].role != "assistant":
        session.turns.append(Turn(role="assistant", text="", timestamp=record.timestamp))
    session.turns[-1].tool_calls.append(call)


def _message_text(content: Any, *, drop_injected: bool) -> str:
    """The text items of a message; images and injected context are dropped, data: URLs scrubbed."""
    if isinstance(content, str):
        items: list[Any] = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        items = content
    else:
        return ""
    texts = []
    for item in items:
        if not isinstance(item, dict) or item.get("type") not in ("input_text", "output_text", "text"):
            continue  # input_image and friends: never base64 in a transcript
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            continue
        if drop_injected and _INJECTED.match(text):
            continue
        texts.append(_scrub(text))
    return "\n\n".join(texts).strip()


def _scrub(text: str) -> str:
    return _DATA_URL.sub("[data URL removed]", text)


# -- tool call stubs -----------------------------------------------------------------------------


def _patch_files(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m.group(1) for m in _PATCH_FILE.finditer(text)))


def _command_text(command: Any) -> str:
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        if len(command) >= 3 and command[0] in _SHELLS and command[1] in ("-c", "-lc"):
            return command[2]
        return shlex.join(command)
    return command if isinstance(command, str) else json.dumps(command)


def _command_stub(name: str, command: str) -> ToolCall:
    files = _patch_files(command) if "*** Begin Patch" in command else ()
    if files:
        return ToolCall(name=name, summary=one_line("apply_patch " + ", ".join(files)), files=files)
    return ToolCall(name=name, summary=one_line(command))


def _tool_call(payload: dict[str, Any]) -> ToolCall:
    kind = payload.get("type")
    if kind == "local_shell_call":
        action = field_dict(payload, "action")
        return _command_stub("local_shell", _command_text(action.get("command", "")))
    name = field_str(payload, "name", str(kind))
    if kind == "custom_tool_call":
        body = field_str(payload, "input")
        files = _patch_files(body)
        if files:
            return ToolCall(name=name, summary=one_line(", ".join(files)), files=files)
        return ToolCall(name=name, summary=one_line(body.strip().splitlines()[0] if body.strip() else ""))
    arguments = payload.get("arguments")
    args = arguments
    if isinstance(arguments, str):
        # Arguments are JSON inside a string, under the same depth cap as a line.
        parsed, _ = json_line(arguments.encode(), Limits())
        if isinstance(parsed, dict):
            args = parsed  # otherwise not JSON (redacted, a truncated line, too deep): keep the text
    if not isinstance(args, dict):
        return ToolCall(name=name, summary=one_line(str(args or "")))
    command = args.get("cmd", args.get("command"))
    if command:
        return _command_stub(name, _command_text(command))
    if isinstance(args.get("input"), str) and "*** Begin Patch" in args["input"]:
        files = _patch_files(args["input"])
        return ToolCall(name=name, summary=one_line(", ".join(files)), files=files)
    return _generic_stub(name, args)


def _generic_stub(name: str, args: dict[str, Any]) -> ToolCall:
    files = tuple(args[k] for k in _PATH_KEYS if isinstance(args.get(k), str))
    if files:
        return ToolCall(name=name, summary=one_line(" ".join(files)), files=files)
    pairs = [f"{k}={v}" for k, v in args.items() if isinstance(v, str | int | float | bool)]
    return ToolCall(name=name, summary=one_line(" ".join(pairs) or json.dumps(args, sort_keys=True)))


def _web_search(payload: dict[str, Any]) -> ToolCall:
    action = field_dict(payload, "action")
    target = action.get("query") or action.get("url") or action.get("type") or ""
    return ToolCall(name="web_search", summary=one_line(str(target)))
