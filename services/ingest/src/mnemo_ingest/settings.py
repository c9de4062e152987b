"""The ingest service's settings: limits on writes and the embedding queue's workers."""

from __future__ import annotations

from dataclasses import dataclass

from mnemo_platform.settings import (
    SettingsError,
    parse_bool,
    parse_non_negative_float,
    parse_non_negative_int,
    parse_positive_float,
    parse_positive_int,
    setting,
)


def parse_fraction(raw: str) -> float:
    value = float(raw)
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be between 0 and 1")
    return value


@dataclass(frozen=True)
class IngestSettings:
    """Limits on writes, the embedding queue's workers and the consolidation job."""

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
        "MNEMO_EMBED_MAX_ATTEMPTS",
        5,
        "Attempts before a chunk the embedder refuses is marked `failed` (an embedder outage never counts).",
        parse_positive_int,
    )
    embed_backoff_s: float = setting(
        "MNEMO_EMBED_BACKOFF_S",
        2.0,
        "First retry delay of a refused chunk, and of the first try after the embedder became "
        "unavailable; doubles with each attempt.",
        parse_positive_float,
    )
    embed_outage_max_delay_s: float = setting(
        "MNEMO_EMBED_OUTAGE_MAX_DELAY_S",
        30.0,
        "Longest wait between tries while the embedder is unavailable: the most its recovery goes unnoticed.",
        parse_positive_float,
    )
    embed_lease_s: float = setting(
        "MNEMO_EMBED_LEASE_S",
        300.0,
        "How long a worker's claim on a batch of chunks lasts; chunks claimed by a worker that was killed "
        "are embedded once it ends. Longer than the slowest batch takes to embed.",
        parse_positive_float,
    )
    embed_failed_retry_s: float = setting(
        "MNEMO_EMBED_FAILED_RETRY_S",
        3600.0,
        "Seconds after which `failed` chunks are queued again by themselves (0: never; "
        "`mnemo embed retry` queues them at once).",
        parse_non_negative_float,
    )
    lexical_post_batch: int = setting(
        "MNEMO_LEXICAL_POST_BATCH",
        2000,
        "Queued chunks the lexical poster brings into the BM25 statistics per transaction.",
        parse_positive_int,
    )
    lexical_post_idle_s: float = setting(
        "MNEMO_LEXICAL_POST_IDLE_S",
        1.0,
        "Seconds the lexical poster waits before looking at an empty queue again.",
        parse_positive_float,
    )
    vector_graph_batch: int = setting(
        "MNEMO_VECTOR_GRAPH_BATCH",
        128,
        "Stored vectors the grapher lets into the HNSW graph per transaction (docs/architecture.md).",
        parse_positive_int,
    )
    vector_graph_backlog: int = setting(
        "MNEMO_VECTOR_GRAPH_BACKLOG",
        20000,
        "Stored vectors that may wait for the HNSW graph while the model embeds a backlog, compared "
        "exactly by searches meanwhile (0: each enters the graph as soon as it can).",
        parse_non_negative_int,
    )
    consolidate_interval_s: float = setting(
        "MNEMO_CONSOLIDATE_INTERVAL_S",
        3600.0,
        "Seconds between the consolidation job's passes over changed memories (0 turns the job off; "
        "`mnemo consolidate --now` still runs); docs/consolidation.md.",
        parse_non_negative_float,
    )
    consolidate_min_cosine: float = setting(
        "MNEMO_CONSOLIDATE_MIN_COSINE",
        0.85,
        "Least cosine similarity of two memories' embeddings for a merge proposal (measured: bench/README.md).",
        parse_fraction,
    )
    consolidate_min_jaccard: float = setting(
        "MNEMO_CONSOLIDATE_MIN_JACCARD",
        0.4,
        "Least Jaccard overlap of two memories' word sets for a merge proposal, besides the cosine.",
        parse_fraction,
    )
    consolidate_numbers_must_agree: bool = setting(
        "MNEMO_CONSOLIDATE_NUMBERS_MUST_AGREE",
        True,
        "Propose a merge only when both texts state the same numbers (a version, port or limit that "
        "differs makes a different fact).",
        parse_bool,
    )
    consolidate_neighbours: int = setting(
        "MNEMO_CONSOLIDATE_NEIGHBOURS",
        10,
        "Nearest neighbours (HNSW) each changed memory is compared with.",
        parse_positive_int,
    )
    consolidate_llm_url: str = setting(
        "MNEMO_CONSOLIDATE_LLM_URL",
        "",
        "Base URL of an OpenAI-compatible chat API that drafts a merge's text (`change.merged_text`); "
        "empty: a merge keeps the best-trusted memory.",
    )
    consolidate_llm_model: str = setting("MNEMO_CONSOLIDATE_LLM_MODEL", "", "Chat model that drafts merged text.")
    consolidate_llm_api_key: str = setting(
        "MNEMO_CONSOLIDATE_LLM_API_KEY", "", "Bearer token for the drafting endpoint, if it needs one."
    )
    consolidate_llm_timeout_s: float = setting(
        "MNEMO_CONSOLIDATE_LLM_TIMEOUT_S", 60.0, "Timeout of one drafting request.", parse_positive_float
    )

    def validate(self) -> None:
        if self.consolidate_llm_url and not self.consolidate_llm_model:
            raise SettingsError(
                "invalid configuration: MNEMO_CONSOLIDATE_LLM_MODEL is required with MNEMO_CONSOLIDATE_LLM_URL"
            )
