"""One reader per coding agent, all behind the Reader protocol of mnemo_harvest.model."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from mnemo_harvest.model import Reader

if TYPE_CHECKING:
    # Only a hint: the settings import the readers' Limits from this package.
    from mnemo_harvest.settings import HarvestSettings


def build_readers(settings: HarvestSettings) -> dict[str, Reader]:
    """The enabled readers, each pointed at its configured (or the agent's default) root."""
    readers: dict[str, Reader] = {}
    limits = settings.limits
    for agent in settings.enabled_agents:
        if agent == "claude-code":
            from mnemo_harvest.readers.claude import ClaudeCodeReader

            readers[agent] = ClaudeCodeReader([Path(p) for p in settings.claude_roots()], limits)
        elif agent == "codex":
            from mnemo_harvest.readers.codex import CodexReader

            readers[agent] = CodexReader(Path(settings.codex_root()), limits)
        elif agent == "opencode":
            from mnemo_harvest.readers.opencode import OpenCodeReader

            # OpenCode's own override of its database path is honoured as OpenCode honours it.
            db = os.environ.get("OPENCODE_DB")
            readers[agent] = OpenCodeReader(Path(settings.opencode_root()), Path(db) if db else None)
        elif agent == "pi":
            from mnemo_harvest.readers.pi import PiReader

            readers[agent] = PiReader(Path(settings.pi_root()), limits)
    return readers


def reader_roots(agent: str, settings: HarvestSettings) -> list[str]:
    return {
        "claude-code": settings.claude_roots(),
        "codex": [settings.codex_root()],
        "opencode": [settings.opencode_root()],
        "pi": [settings.pi_root()],
    }[agent]
