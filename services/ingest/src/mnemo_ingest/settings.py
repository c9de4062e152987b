"""The ingest service's settings: limits on writes and the embedding queue's workers."""

from __future__ import annotations

from dataclasses import dataclass

from mnemo_platform.settings import parse_non_negative_float, parse_positive_float, parse_positive_int, setting


@dataclass(frozen=True)
class IngestSettings:
    """Limits on writes and the embedding queue's workers."""

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
