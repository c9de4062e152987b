"""Fake agent homes for harvest tests: real session formats, written into temporary directories."""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from mnemo_harvest.model import Session


def claude_dir_name(cwd: str) -> str:
    # Claude Code's own (lossy) encoding of the working directory; readers must not rely on it.
    return "".join(ch if ch.isalnum() else "-" for ch in cwd)


@dataclass
class ClaudeSession:
    """A Claude Code 2.x session file, built turn by turn."""

    root: Path
    cwd: str
    session_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    lines: list[dict] = field(default_factory=list)
    _parent: str | None = None

    @property
    def path(self) -> Path:
        return self.root / claude_dir_name(self.cwd) / f"{self.session_id}.jsonl"

    def _envelope(self, kind: str, message: dict) -> dict:
        line_id = str(uuid.uuid4())
        line = {
            "type": kind,
            "uuid": line_id,
            "parentUuid": self._parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": "2.1.173",
            "gitBranch": "main",
            "timestamp": "2026-11-20T10:00:00.000Z",
            "message": message,
        }
        self._parent = line_id
        return line

    def user(self, text: str) -> ClaudeSession:
        self.lines.append(self._envelope("user", {"role": "user", "content": [{"type": "text", "text": text}]}))
        return self

    def assistant(self, text: str, tool: tuple[str, dict] | None = None) -> ClaudeSession:
        content: list[dict] = [{"type": "text", "text": text}]
        if tool:
            content.append(
                {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:8]}", "name": tool[0], "input": tool[1]}
            )
        message = {
            "id": f"msg_{uuid.uuid4().hex[:10]}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": "end_turn",
            "content": content,
        }
        self.lines.append(self._envelope("assistant", message))
        return self

    def tool_result(self, output: str) -> ClaudeSession:
        last = self.lines[-1]["message"]["content"][-1]
        block = {"type": "tool_result", "tool_use_id": last["id"], "content": output}
        self.lines.append(self._envelope("user", {"role": "user", "content": [block]}))
        return self

    def write(self, age_s: float = 7200) -> ClaudeSession:
        """Writes the file and backdates it, so it counts as idle (unless age_s is 0)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        stamp = time.time() - age_s
        os.utime(self.path, (stamp, stamp))
        return self


def conversation(root: Path, cwd: str, topic: str) -> ClaudeSession:
    """A small, finished session about `topic` (a word used nowhere else)."""
    return (
        ClaudeSession(root, cwd)
        .user(f"Why does the {topic} job keep failing on Mondays?")
        .assistant(f"Let me look at the {topic} scheduler.", ("Bash", {"command": f"grep -rn {topic} jobs/"}))
        .tool_result(f"jobs/{topic}.py:12: cron = '0 0 * * 1'")
        .assistant(
            f"The {topic} job runs at midnight on Mondays, when the backup holds the lock.\n"
            f"DECISION: move the {topic} job to 02:00 so it never overlaps the backup.\n"
            f"LESSON: check the backup window before scheduling {topic} cron jobs."
        )
    )


# -- reading a parsed Session back ----------------------------------------------------------------


def roles(session: Session) -> tuple[int, int]:
    return (
        sum(t.role == "user" for t in session.turns),
        sum(t.role == "assistant" for t in session.turns),
    )


def stubs(session: Session) -> list[str]:
    return [call.summary for turn in session.turns for call in turn.tool_calls]


def all_text(session: Session) -> str:
    """Everything a Session carries as text, children included: what could reach memory."""
    parts = [session.title or ""]
    for turn in session.turns:
        parts.append(turn.text)
        parts += [f"{c.name} {c.summary} {' '.join(c.files)}" for c in turn.tool_calls]
    parts += [all_text(child) for child in session.subagents]
    return "\n".join(parts)
