"""The harvest service's settings: which sessions are read, when, what is kept, and the summarizer."""

from __future__ import annotations

import os
from dataclasses import dataclass

from mnemo_harvest.model import AGENTS
from mnemo_harvest.readers.lines import Limits
from mnemo_platform.settings import (
    SettingsError,
    parse_bool,
    parse_non_negative_float,
    parse_positive_float,
    parse_positive_int,
    setting,
)


def _home_dir(env: str, default: str, *suffix: str) -> str:
    """An agent's default directory: its own environment override, else its documented default."""
    base = os.environ.get(env) or os.path.expanduser(default)
    return os.path.join(base, *suffix)


@dataclass(frozen=True)
class HarvestSettings:
    """Which coding-agent sessions are read, when, and what is kept."""

    agents: str = setting(
        "MNEMO_HARVEST_AGENTS",
        "claude-code,codex,opencode,pi",
        "Comma-separated readers to run (`claude-code`, `codex`, `opencode`, `pi`); empty turns harvest off.",
    )
    interval_s: float = setting(
        "MNEMO_HARVEST_INTERVAL_S", 120.0, "Seconds between harvest runs.", parse_positive_float
    )
    idle_s: float = setting(
        "MNEMO_HARVEST_IDLE_S",
        600.0,
        "A session is harvested only after it has not changed for this long.",
        parse_non_negative_float,
    )
    auto_register: bool = setting(
        "MNEMO_HARVEST_AUTO_REGISTER",
        False,
        "Register a workspace for a session's directory when none matches (otherwise the session is skipped "
        "and listed by `mnemo harvest status`).",
        parse_bool,
    )
    claude_dir: str = setting(
        "MNEMO_HARVEST_CLAUDE_DIR",
        "",
        "Claude Code projects directory(ies), comma-separated.",
        shown_default="`${CLAUDE_CONFIG_DIR:-~/.claude}/projects`",
    )
    codex_home: str = setting(
        "MNEMO_HARVEST_CODEX_HOME", "", "Codex home directory.", shown_default="`${CODEX_HOME:-~/.codex}`"
    )
    opencode_dir: str = setting(
        "MNEMO_HARVEST_OPENCODE_DIR",
        "",
        "OpenCode data directory (holding `opencode.db` and `storage/`).",
        shown_default="`${XDG_DATA_HOME:-~/.local/share}/opencode`",
    )
    pi_dir: str = setting(
        "MNEMO_HARVEST_PI_DIR",
        "",
        "pi sessions directory.",
        shown_default="`${PI_CODING_AGENT_DIR:-~/.pi/agent}/sessions`",
    )
    archive: bool = setting(
        "MNEMO_HARVEST_ARCHIVE",
        True,
        "Keep a compressed, redacted copy of each harvested session in the data directory, so it can be "
        "re-derived after the agent deletes it.",
        parse_bool,
    )
    archive_max_bytes: int = setting(
        "MNEMO_ARCHIVE_MAX_BYTES",
        1 << 30,
        "Largest total size of the archive; oldest copies are evicted.",
        parse_positive_int,
    )
    archive_retention_days: float = setting(
        "MNEMO_ARCHIVE_RETENTION_DAYS", 365.0, "Archived copies older than this are evicted.", parse_positive_float
    )
    min_free_disk_bytes: int = setting(
        "MNEMO_MIN_FREE_DISK_BYTES",
        512 * 1024 * 1024,
        "Harvest pauses its writes (with a logged warning) while the data directory's disk has less free space.",
        parse_positive_int,
    )

    max_session_bytes: int = setting(
        "MNEMO_HARVEST_MAX_SESSION_BYTES",
        256 << 20,
        "A session whose files hold more bytes than this (decompressed, for `.zst`) is skipped as too large, "
        "unread; files are read as a stream, never whole.",
        parse_positive_int,
    )
    max_line_bytes: int = setting(
        "MNEMO_HARVEST_MAX_LINE_BYTES",
        8 << 20,
        "A session file's JSON line longer than this is left out of the session (and named in its status).",
        parse_positive_int,
    )

    @property
    def limits(self) -> Limits:
        """The caps the readers apply to session files; nesting deeper than 200 levels is refused per line."""
        return Limits(self.max_session_bytes, self.max_line_bytes)

    @property
    def enabled_agents(self) -> list[str]:
        return [a.strip() for a in self.agents.split(",") if a.strip()]

    def validate(self) -> None:
        unknown = [a for a in self.enabled_agents if a not in AGENTS]
        if unknown:
            raise SettingsError(f"invalid configuration: MNEMO_HARVEST_AGENTS names unknown agents {unknown}")

    def claude_roots(self) -> list[str]:
        raw = self.claude_dir or _home_dir("CLAUDE_CONFIG_DIR", "~/.claude", "projects")
        return [os.path.expanduser(p.strip()) for p in raw.split(",") if p.strip()]

    def codex_root(self) -> str:
        return os.path.expanduser(self.codex_home) if self.codex_home else _home_dir("CODEX_HOME", "~/.codex")

    def opencode_root(self) -> str:
        if self.opencode_dir:
            return os.path.expanduser(self.opencode_dir)
        return _home_dir("XDG_DATA_HOME", "~/.local/share", "opencode")

    def pi_root(self) -> str:
        return (
            os.path.expanduser(self.pi_dir)
            if self.pi_dir
            else _home_dir("PI_CODING_AGENT_DIR", "~/.pi/agent", "sessions")
        )


@dataclass(frozen=True)
class RemoteHarvestSettings:
    """A harvester on a laptop that writes through the gateway (docs/harvest.md, "Remote harvest")."""

    url: str = setting(
        "MNEMO_HARVEST_REMOTE_URL",
        "",
        "The gateway a remote harvester writes through (`mnemo serve harvest --remote URL`), with a harvester "
        "token in `MNEMO_TOKEN`; empty runs harvest in-cluster, beside the database.",
    )
    state_file: str = setting(
        "MNEMO_HARVEST_STATE_FILE",
        "",
        "Where a remote harvester keeps what it knows of each session (a cache: ingest keeps idempotency and "
        "tombstones).",
        shown_default="`<data dir>/harvest-remote.json`",
    )
    timeout_s: float = setting(
        "MNEMO_HARVEST_REMOTE_TIMEOUT_S",
        60.0,
        "Timeout of one request a remote harvester makes to the gateway.",
        parse_positive_float,
    )


@dataclass(frozen=True)
class SummarizerSettings:
    """The optional LLM that summarises harvested sessions (otherwise a transcript is kept)."""

    url: str = setting(
        "MNEMO_SUMMARIZER_URL",
        "",
        "Base URL of an OpenAI-compatible chat API (e.g. `http://localhost:11434/v1`); empty keeps transcripts.",
    )
    model: str = setting("MNEMO_SUMMARIZER_MODEL", "", "Chat model that writes the summaries.")
    api_key: str = setting("MNEMO_SUMMARIZER_API_KEY", "", "Bearer token for the summarizer, if it needs one.")
    timeout_s: float = setting(
        "MNEMO_SUMMARIZER_TIMEOUT_S", 120.0, "Timeout of one summarization request.", parse_positive_float
    )

    def validate(self) -> None:
        if self.url and not self.model:
            raise SettingsError("invalid configuration: MNEMO_SUMMARIZER_MODEL is required with MNEMO_SUMMARIZER_URL")
