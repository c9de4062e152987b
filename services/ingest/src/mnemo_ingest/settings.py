"""The ingest service's settings: limits on writes and the embedding queue's workers."""

from __future__ import annotations

from dataclasses import dataclass

from mnemo_platform.settings import parse_positive_float, parse_positive_int, setting


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
        "MNEMO_EMBED_MAX_ATTEMPTS", 5, "Attempts before a chunk is marked `failed`.", parse_positive_int
    )
    embed_backoff_s: float = setting(
        "MNEMO_EMBED_BACKOFF_S",
        2.0,
        "First retry delay of a failed chunk; doubles with each attempt.",
        parse_positive_float,
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
