"""Every MNEMO_* setting, one frozen dataclass per concern; the README's table is built from these."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from mnemo_platform.settings import (
    SettingsError,
    one_of,
    parse_bool,
    parse_non_negative_float,
    parse_port,
    parse_positive_float,
    parse_positive_int,
    setting,
)

DEFAULT_HTTP_PORT = 8420
DEFAULT_INGEST_ADDR = "127.0.0.1:50051"
DEFAULT_SEARCH_ADDR = "127.0.0.1:50052"
DEFAULT_GATEWAY_GRPC_ADDR = "127.0.0.1:50053"
DEFAULT_HARVEST_ADDR = "127.0.0.1:50054"


def default_data_dir() -> str:
    return platformdirs.user_data_dir("mnemo", appauthor=False)


@dataclass(frozen=True)
class DatabaseSettings:
    """Where PostgreSQL is and how many connections each service keeps."""

    url: str = setting(
        "MNEMO_DATABASE_URL",
        "",
        "PostgreSQL (>= 15, with pgvector) to use. Empty: start the embedded PostgreSQL in `MNEMO_DATA_DIR`.",
        shown_default="(empty: embedded)",
    )
    data_dir: str = setting(
        "MNEMO_DATA_DIR",
        "",
        "Directory for the embedded PostgreSQL and other local state.",
        shown_default="platform user data dir, e.g. `~/.local/share/mnemo`",
    )
    pool_min: int = setting("MNEMO_DB_POOL_MIN", 1, "Connections each service opens at start.", parse_positive_int)
    pool_max: int = setting("MNEMO_DB_POOL_MAX", 10, "Most connections each service holds.", parse_positive_int)

    @property
    def resolved_data_dir(self) -> Path:
        return Path(self.data_dir or default_data_dir()).expanduser()

    def validate(self) -> None:
        if self.pool_min > self.pool_max:
            raise SettingsError(
                f"invalid configuration: MNEMO_DB_POOL_MIN ({self.pool_min}) exceeds "
                f"MNEMO_DB_POOL_MAX ({self.pool_max})"
            )


@dataclass(frozen=True)
class EmbeddingSettings:
    """Which embedding model turns text into vectors."""

    embedder: str = setting(
        "MNEMO_EMBEDDER",
        "local",
        "`local` (bundled all-MiniLM-L6-v2 via sentence-transformers, offline), `openai` (any "
        "OpenAI-compatible `/v1/embeddings` endpoint) or `hash` (deterministic, meaningless; tests).",
        one_of("local", "openai", "hash"),
    )
    model: str = setting(
        "MNEMO_EMBED_MODEL",
        "",
        "Model name sent to the `openai` endpoint; for `local`, a sentence-transformers model "
        "directory (empty: the bundled model).",
        shown_default="(bundled all-MiniLM-L6-v2)",
    )
    url: str = setting(
        "MNEMO_EMBED_URL",
        "",
        "Base URL of the OpenAI-compatible API (e.g. `http://localhost:11434/v1`); required for `openai`.",
    )
    api_key: str = setting("MNEMO_EMBED_API_KEY", "", "Bearer token for the `openai` endpoint, if it needs one.")
    dimension: int = setting(
        "MNEMO_EMBED_DIMENSION",
        0,
        "Vector dimension of the `openai` model (required for `openai`; `hash` defaults to 64).",
        int,
    )
    max_tokens: int = setting(
        "MNEMO_EMBED_MAX_TOKENS",
        512,
        "Context window of the `openai` model, in tokens; notes are chunked to fit it.",
        parse_positive_int,
    )
    batch_size: int = setting("MNEMO_EMBED_BATCH_SIZE", 32, "Chunks embedded per batch.", parse_positive_int)
    timeout_s: float = setting(
        "MNEMO_EMBED_TIMEOUT_S", 30.0, "Timeout of one `openai` embedding request.", parse_positive_float
    )

    def validate(self) -> None:
        problems = []
        if self.embedder == "openai":
            if not self.url:
                problems.append("MNEMO_EMBED_URL is required when MNEMO_EMBEDDER=openai")
            if not self.model:
                problems.append("MNEMO_EMBED_MODEL is required when MNEMO_EMBEDDER=openai")
            if self.dimension <= 0:
                problems.append("MNEMO_EMBED_DIMENSION is required when MNEMO_EMBEDDER=openai")
        if self.dimension < 0:
            problems.append(f"MNEMO_EMBED_DIMENSION must not be negative, got {self.dimension}")
        if problems:
            raise SettingsError("invalid configuration: " + "; ".join(problems))


@dataclass(frozen=True)
class IngestSettings:
    """Limits on writes and the embedding queue's workers."""

    max_content_bytes: int = setting(
        "MNEMO_MAX_CONTENT_BYTES", 1_048_576, "Largest note content accepted, in UTF-8 bytes.", parse_positive_int
    )
    embed_workers: int = setting(
        "MNEMO_EMBED_WORKERS", 1, "Embedding worker tasks per ingest process.", parse_positive_int
    )
    embed_rescan_s: float = setting(
        "MNEMO_EMBED_RESCAN_S",
        10.0,
        "Seconds between rescans of the queue for chunks a NOTIFY did not announce.",
        parse_positive_float,
    )
    embed_max_attempts: int = setting(
        "MNEMO_EMBED_MAX_ATTEMPTS", 5, "Attempts before a chunk is marked `failed`.", parse_positive_int
    )
    embed_backoff_s: float = setting(
        "MNEMO_EMBED_BACKOFF_S",
        2.0,
        "First retry delay of a failed chunk; doubles with each attempt.",
        parse_positive_float,
    )


@dataclass(frozen=True)
class SearchSettings:
    """Ranking and limits of the read path."""

    default_limit: int = setting(
        "MNEMO_SEARCH_DEFAULT_LIMIT", 10, "Results when a search names no limit.", parse_positive_int
    )
    max_limit: int = setting(
        "MNEMO_SEARCH_MAX_LIMIT", 100, "Most results one search or list page returns.", parse_positive_int
    )
    candidates: int = setting(
        "MNEMO_SEARCH_CANDIDATES",
        30,
        "Candidates each leg contributes to fusion (30 measured best on LoCoMo; see bench/README.md).",
        parse_positive_int,
    )
    lexical_match_cap: int = setting(
        "MNEMO_LEXICAL_MATCH_CAP",
        5000,
        "Most full-text matches ranked per query (ranking cost grows with matches, not with the limit).",
        parse_positive_int,
    )
    rrf_k: float = setting(
        "MNEMO_RRF_K",
        10.0,
        "Reciprocal-rank-fusion constant k; smaller trusts each leg's top ranks more (10 measured best on LoCoMo).",
        parse_positive_float,
    )
    lexical_weight: float = setting(
        "MNEMO_LEXICAL_WEIGHT", 1.0, "Weight of the lexical leg in fusion.", parse_non_negative_float
    )
    semantic_weight: float = setting(
        "MNEMO_SEMANTIC_WEIGHT", 1.0, "Weight of the semantic leg in fusion.", parse_non_negative_float
    )
    recency_half_life_days: float = setting(
        "MNEMO_RECENCY_HALF_LIFE_DAYS",
        30.0,
        "Age at which the recency part of the score halves.",
        parse_positive_float,
    )
    recency_weight: float = setting(
        "MNEMO_RECENCY_WEIGHT",
        0.2,
        "Share of the score subject to recency decay (0 = no decay, 1 = all of it).",
        parse_non_negative_float,
    )
    hnsw_ef_search: int = setting(
        "MNEMO_HNSW_EF_SEARCH", 200, "pgvector `hnsw.ef_search` for the semantic leg.", parse_positive_int
    )
    query_timeout_s: float = setting(
        "MNEMO_SEARCH_LEG_TIMEOUT_S",
        5.0,
        "A leg that takes longer is abandoned and reported in `degraded`.",
        parse_positive_float,
    )

    def validate(self) -> None:
        if self.default_limit > self.max_limit:
            raise SettingsError("invalid configuration: MNEMO_SEARCH_DEFAULT_LIMIT exceeds MNEMO_SEARCH_MAX_LIMIT")
        if self.recency_weight > 1:
            raise SettingsError("invalid configuration: MNEMO_RECENCY_WEIGHT must be between 0 and 1")


STATUS_WEIGHTS = "confirmed=1.0,active=0.85,candidate=0.6,superseded=0.3,archived=0.3,contradicted=0.2,retracted=0.1"
PROVENANCE_WEIGHTS = (
    "human=1.0,agent=1.0,consolidated=0.95,harvested_summary=0.8,extracted=0.75,imported=0.75,harvested_transcript=0.6"
)


Weights = tuple[tuple[str, float], ...]


def parse_weights(raw: str) -> Weights:
    """`name=weight,...` into sorted (name, weight) pairs; weights are non-negative numbers."""
    weights: dict[str, float] = {}
    for item in raw.split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"expected name=weight, got {item.strip()!r}")
        weight = float(value)
        if weight < 0:
            raise ValueError(f"weight of {name.strip()} must not be negative")
        weights[name.strip().lower()] = weight
    return tuple(sorted(weights.items()))


@dataclass(frozen=True)
class TrustSettings:
    """How far search trusts a memory, by status and by provenance (multiplied after fusion)."""

    status_weights: Weights = setting(
        "MNEMO_TRUST_STATUS_WEIGHTS",
        parse_weights(STATUS_WEIGHTS),
        "Weight per status (`status=weight,...`; unnamed statuses keep their default).",
        parse_weights,
        shown_default=f"`{STATUS_WEIGHTS}`",
    )
    provenance_weights: Weights = setting(
        "MNEMO_TRUST_PROVENANCE_WEIGHTS",
        parse_weights(PROVENANCE_WEIGHTS),
        "Weight per provenance (`provenance=weight,...`; unnamed ones keep their default).",
        parse_weights,
        shown_default=f"`{PROVENANCE_WEIGHTS}`",
    )

    suspicious_weight: float = setting(
        "MNEMO_TRUST_SUSPICIOUS_WEIGHT",
        0.5,
        "Own trust factor of a memory whose text tries to instruct the model (flagged `suspicious`).",
        parse_positive_float,
    )

    def validate(self) -> None:
        defaults_s, defaults_p = dict(parse_weights(STATUS_WEIGHTS)), dict(parse_weights(PROVENANCE_WEIGHTS))
        given_s, given_p = dict(self.status_weights), dict(self.provenance_weights)
        unknown = sorted(set(given_s) - set(defaults_s)) + sorted(set(given_p) - set(defaults_p))
        if unknown:
            raise SettingsError(f"invalid configuration: unknown trust weight names {', '.join(unknown)}")
        # Unnamed entries keep their defaults, so an operator can change one weight alone.
        object.__setattr__(self, "status_weights", tuple(sorted({**defaults_s, **given_s}.items())))
        object.__setattr__(self, "provenance_weights", tuple(sorted({**defaults_p, **given_p}.items())))

    def factor(self, status: str, provenance: str, own: float = 1.0) -> float:
        """The trust factor a search score is multiplied by: status x provenance x the memory's own."""
        return dict(self.status_weights).get(status, 1.0) * dict(self.provenance_weights).get(provenance, 1.0) * own


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

    @property
    def enabled_agents(self) -> list[str]:
        return [a.strip() for a in self.agents.split(",") if a.strip()]

    def validate(self) -> None:
        unknown = [a for a in self.enabled_agents if a not in ("claude-code", "codex", "opencode", "pi")]
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


@dataclass(frozen=True)
class ServiceAddresses:
    """Where each gRPC service listens (when run alone) and where clients reach it."""

    grpc_host: str = setting(
        "MNEMO_GRPC_HOST",
        "127.0.0.1",
        "Interface a service started by `mnemo serve` binds its gRPC port on (`0.0.0.0` in a pod).",
    )
    ingest: str = setting(
        "MNEMO_INGEST_ADDR",
        DEFAULT_INGEST_ADDR,
        "host:port of the ingest service. Under `mnemo up`, unset means any free loopback port.",
    )
    search: str = setting(
        "MNEMO_SEARCH_ADDR",
        DEFAULT_SEARCH_ADDR,
        "host:port of the search service. Under `mnemo up`, unset means any free loopback port.",
    )
    harvest: str = setting(
        "MNEMO_HARVEST_ADDR",
        DEFAULT_HARVEST_ADDR,
        "host:port of the harvest service. Under `mnemo up`, unset means any free loopback port.",
    )
    gateway_grpc: str = setting(
        "MNEMO_GATEWAY_GRPC_ADDR",
        DEFAULT_GATEWAY_GRPC_ADDR,
        "host:port of the gateway's gRPC health endpoint. Under `mnemo up`, unset means any free port.",
    )
    grace_s: float = setting(
        "MNEMO_GRPC_GRACE_S",
        5.0,
        "Grace period for in-flight RPCs on SIGTERM before the server stops.",
        parse_non_negative_float,
    )
    call_timeout_s: float = setting(
        "MNEMO_GRPC_TIMEOUT_S", 15.0, "Deadline of every gRPC call between services.", parse_positive_float
    )

    def listen(self, target: str) -> str:
        """What a service started alone binds: MNEMO_GRPC_HOST on the port of its own address."""
        return f"{self.grpc_host}:{target.rsplit(':', 1)[-1]}"


@dataclass(frozen=True)
class GatewaySettings:
    """The public HTTP surface: MCP, REST and the CLI's endpoint."""

    host: str = setting("MNEMO_HTTP_HOST", "127.0.0.1", "Interface the gateway's HTTP server binds.")
    port: int = setting(
        "MNEMO_HTTP_PORT", DEFAULT_HTTP_PORT, "Port of the gateway's HTTP server; `0` picks a free port.", parse_port
    )
    default_workspace: str = setting(
        "MNEMO_DEFAULT_WORKSPACE",
        "default",
        "Workspace used when a request names none; registered on first use.",
    )
    max_body_bytes: int = setting(
        "MNEMO_HTTP_MAX_BODY_BYTES",
        4 * 1_048_576,
        "Largest MCP or REST request body accepted.",
        parse_positive_int,
    )
    allowed_hosts: str = setting(
        "MNEMO_HTTP_ALLOWED_HOSTS",
        "",
        "Comma-separated extra `Host` names the gateway answers to, on `/mcp` and REST alike (DNS-rebinding "
        "protection; loopback and a specific bind address are always allowed): the names clients use.",
    )


@dataclass(frozen=True)
class AuthSettings:
    """Who may call: bearer tokens bound to roles and workspaces, and the secret the services share."""

    mode: str = setting(
        "MNEMO_AUTH",
        "off",
        "`on`: every MCP and REST request needs a bearer token, and every gRPC call a signed principal. "
        "`off`: single-user local mode, allowed on loopback only.",
        one_of("on", "off"),
    )
    internal_secret: str = setting(
        "MNEMO_INTERNAL_SECRET",
        "",
        "Secret the services sign and check the caller's principal with; required with `MNEMO_AUTH=on` "
        "(`mnemo up` generates one for its own services).",
    )
    unsafe_no_auth: bool = setting(
        "MNEMO_UNSAFE_NO_AUTH",
        False,
        "Let the gateway listen on a non-loopback address with `MNEMO_AUTH=off` (logs a loud warning).",
        parse_bool,
    )
    rate_per_minute: int = setting(
        "MNEMO_RATE_LIMIT_PER_MIN",
        600,
        "Requests per minute each token may make (a token bucket; bursts up to this many); `429` beyond.",
        parse_positive_int,
    )

    @property
    def enabled(self) -> bool:
        return self.mode == "on"


@dataclass(frozen=True)
class ClientSettings:
    """How the `mnemo` CLI reaches the gateway."""

    url: str = setting(
        "MNEMO_URL",
        "",
        "Gateway base URL for CLI commands.",
        shown_default="`http://127.0.0.1:$MNEMO_HTTP_PORT`",
    )
    token: str = setting("MNEMO_TOKEN", "", "Bearer token the CLI sends (needed when the gateway has `MNEMO_AUTH=on`).")

    def resolved_url(self, gateway: GatewaySettings) -> str:
        return (self.url or f"http://127.0.0.1:{gateway.port}").rstrip("/")


@dataclass(frozen=True)
class LogSettings:
    """How services log."""

    level: str = setting("MNEMO_LOG_LEVEL", "info", "Log level.", one_of("debug", "info", "warning", "error"))
    format: str = setting(
        "MNEMO_LOG_FORMAT",
        "auto",
        "`json`, `console`, or `auto` (console on a terminal, JSON otherwise).",
        one_of("auto", "json", "console"),
    )


ALL_SETTINGS: tuple[type, ...] = (
    DatabaseSettings,
    EmbeddingSettings,
    IngestSettings,
    SearchSettings,
    TrustSettings,
    HarvestSettings,
    SummarizerSettings,
    ServiceAddresses,
    GatewaySettings,
    AuthSettings,
    ClientSettings,
    LogSettings,
)
