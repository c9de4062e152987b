"""A Session as memory: the rendered transcript, its metadata, and the DECISION:/LESSON: lines in it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mnemo_harvest.model import Session, Turn

# An explicit line an agent or a human wrote to be remembered: "DECISION: use X because Y".
_MARKED = re.compile(r"^\s*(?:[-*>]\s*)?\**(DECISION|LESSON)\**\s*:\s*(.+?)\s*$", re.MULTILINE)
# A session's outcome, as the wake-up packet shows it (a line; the packet cuts it further to fit).
MAX_OUTCOME_CHARS = 280
MAX_TITLE_CHARS = 120


@dataclass(frozen=True)
class Extracted:
    """A DECISION: or LESSON: line, to become its own candidate memory."""

    kind: str  # decision | lesson
    text: str
    role: str


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else "unknown"


def session_title(session: Session) -> str:
    """The agent's own title, else the first user prompt, on one line."""
    title = (session.title or session.first_prompt or f"{session.agent} session {session.session_id}").strip()
    title = " ".join(title.split())
    return title if len(title) <= MAX_TITLE_CHARS else title[: MAX_TITLE_CHARS - 1].rstrip() + "…"


def _render_turns(turns: list[Turn], lines: list[str]) -> None:
    for turn in turns:
        text = turn.text.strip()
        if not text and not turn.tool_calls:
            continue
        lines.append(f"### {'User' if turn.role == 'user' else 'Assistant'}")
        if text:
            lines.append(text)
        lines.extend(f"- tool: {call.summary}" for call in turn.tool_calls)
        lines.append("")


def header(session: Session) -> list[str]:
    files = session.files_touched
    shown = ", ".join(files[:20]) + (f" (+{len(files) - 20} more)" if len(files) > 20 else "")
    return [
        f"{session.agent} session {session.session_id}",
        f"Directory: {session.cwd or 'unknown'} · branch: {session.git_branch or 'unknown'} · "
        f"model: {session.model or 'unknown'}",
        f"From {_when(session.started_at)} to {_when(session.ended_at)} · "
        f"{sum(1 for t in session.turns if t.role == 'user')} prompts · {len(session.subagents)} subagents",
        f"Files touched: {shown or 'none recorded'}",
        "",
    ]


def render_transcript(session: Session, max_bytes: int) -> str:
    """User and assistant text with tool calls as one-line stubs; tool output was never kept.

    Past `max_bytes` the middle turns are left out with a marker saying how many: the memory stays
    storable and says what it lacks, rather than being refused or silently cut.
    """
    lines = header(session)
    _render_turns(session.turns, lines)
    for child in session.subagents:
        lines.append(f"## Subagent: {child.title or child.session_id}")
        _render_turns(child.turns, lines)
    text = "\n".join(lines).strip() + "\n"
    if len(text.encode()) <= max_bytes:
        return text
    head, tail = lines[: len(lines) // 3], lines[-len(lines) // 3 :]
    while len(("\n".join(head + tail)).encode()) > max_bytes - 200 and (len(head) > 5 or len(tail) > 1):
        if len(head) > len(tail):
            head = head[: max(5, len(head) * 3 // 4)]
        else:
            tail = tail[-max(1, len(tail) * 3 // 4) :]
    omitted = len(lines) - len(head) - len(tail)
    return "\n".join([*head, f"[… {omitted} transcript lines left out: the session exceeds the size limit …]", *tail])


def extract_marked(session: Session) -> list[Extracted]:
    """DECISION: and LESSON: lines from user and assistant text, each once, in order."""
    seen: dict[tuple[str, str], Extracted] = {}
    for owner in (session, *session.subagents):
        for turn in owner.turns:
            for match in _MARKED.finditer(turn.text):
                item = Extracted(match.group(1).lower(), match.group(2).strip(), turn.role)
                seen.setdefault((item.kind, item.text), item)
    return list(seen.values())


def session_outcome(session: Session, summary: str | None = None) -> str:
    """How the session ended, on one line, for the wake-up packet: a summary's first line (the
    summarizer answers "what was the goal, and was it reached?" first), else the assistant's last
    words. Both are part of the stored text, so the poisoning screen has read them."""
    if summary is not None:
        lines = [line.strip().lstrip("#*-0123456789. ").strip() for line in summary.splitlines()]
        text = next((line for line in lines if line), "")
    else:
        said = [turn.text for turn in session.turns if turn.role == "assistant" and turn.text.strip()]
        text = said[-1] if said else ""
    text = " ".join(text.split())
    return text if len(text) <= MAX_OUTCOME_CHARS else text[: MAX_OUTCOME_CHARS - 1].rstrip() + "…"


def session_metadata(session: Session) -> dict[str, Any]:
    return {
        "agent": session.agent,
        "session_id": session.session_id,
        "cwd": session.cwd,
        "model": session.model,
        "git_branch": session.git_branch,
        "started_at": session.started_at.isoformat() if session.started_at else None,
        "ended_at": session.ended_at.isoformat() if session.ended_at else None,
        "files_touched": session.files_touched[:200],
        "prompts": sum(1 for t in session.turns if t.role == "user"),
        "turns": len(session.turns),
        "subagents": [child.session_id for child in session.subagents],
        "source_path": session.source_path,
    }
