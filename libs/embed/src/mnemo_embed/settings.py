"""Which embedding model turns text into vectors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import platformdirs

from mnemo_platform.settings import (
    SettingsError,
    one_of,
    parse_bool,
    parse_non_negative_int,
    parse_positive_float,
    parse_positive_int,
    setting,
)


def default_cache_dir() -> str:
    return platformdirs.user_cache_dir("mnemo", appauthor=False)


@dataclass(frozen=True)
class EmbeddingSettings:
    """Which embedding model turns text into vectors."""

    embedder: str = setting(
        "MNEMO_EMBEDDER",
        "local",
        "`local` (bundled all-MiniLM-L6-v2 on onnxruntime, offline), `openai` (any "
        "OpenAI-compatible `/v1/embeddings` endpoint) or `hash` (deterministic, meaningless; tests).",
        one_of("local", "openai", "hash"),
    )
    model: str = setting(
        "MNEMO_EMBED_MODEL",
        "",
        "Model name sent to the `openai` endpoint; for `local`, a sentence-transformers model "
        "directory (empty: the bundled model). A BERT with mean pooling runs on onnxruntime; any other "
        "needs the `torch` extra.",
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
    threads: int = setting(
        "MNEMO_EMBED_THREADS",
        0,
        "Lanes the `local` model computes batches on, one thread each, a run of texts on each at once "
        "(0: one per core); a query is embedded on one thread of its own.",
        parse_non_negative_int,
    )
    query_int8: bool = setting(
        "MNEMO_EMBED_QUERY_INT8",
        True,
        "Embed search queries with an int8 graph of the `local` model (built from the same weights): "
        "2-3x faster than the float graph on a query, retrieval figures within a few thousandths on "
        "LoCoMo and SciFact (README, How search ranks); notes are always embedded with the float graph. "
        "`false`: queries with the float graph too.",
        parse_bool,
    )
    cache_dir: str = setting(
        "MNEMO_EMBED_CACHE_DIR",
        "",
        "Where the `local` embedder caches the ONNX graphs it builds from the model's weights (about "
        "90 MB, and 58 MB for the queries' int8 graph; a start without them builds them again, a few "
        "tenths of a second).",
        shown_default="platform user cache dir, e.g. `~/.cache/mnemo`",
    )
    timeout_s: float = setting(
        "MNEMO_EMBED_TIMEOUT_S", 30.0, "Timeout of one `openai` embedding request.", parse_positive_float
    )

    @property
    def resolved_cache_dir(self) -> Path:
        return Path(self.cache_dir or default_cache_dir()).expanduser() / "onnx"

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
