"""The search service's settings: ranking and limits of the read path."""

from __future__ import annotations

from dataclasses import dataclass

from mnemo_platform.settings import (
    SettingsError,
    parse_non_negative_float,
    parse_positive_float,
    parse_positive_int,
    setting,
)

HNSW_EF_SEARCH_MAX = 1000


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
        "Candidates each leg contributes to fusion (measured on LoCoMo and SciFact; docs/lexical-bm25.md).",
        parse_positive_int,
    )
    lexical_candidates: int = setting(
        "MNEMO_LEXICAL_CANDIDATES",
        1000,
        "Lexical candidates: postings of the rarest query words while their document frequencies add up"
        " to at most this, made up from the next word's best when there are none or, under a filter, too"
        " few; see docs/lexical-bm25.md.",
        parse_positive_int,
    )
    lexical_match_cap: int = setting(
        "MNEMO_LEXICAL_MATCH_CAP",
        5000,
        "History and as-of searches: most full-text matches scored per query among the chunks the indexes "
        "leave out (cost grows with matches).",
        parse_positive_int,
    )
    lexical_weight: float = setting(
        "MNEMO_LEXICAL_WEIGHT",
        1.0,
        "Weight of the lexical leg's rescaled score in fusion (equal weights measured best; docs/lexical-bm25.md).",
        parse_non_negative_float,
    )
    semantic_weight: float = setting(
        "MNEMO_SEMANTIC_WEIGHT",
        1.0,
        "Weight of the semantic leg's rescaled score in fusion.",
        parse_non_negative_float,
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
        "MNEMO_HNSW_EF_SEARCH",
        200,
        "pgvector `hnsw.ef_search` for the semantic leg (1 to 1000), set once per pooled connection.",
        parse_positive_int,
    )
    query_timeout_s: float = setting(
        "MNEMO_SEARCH_LEG_TIMEOUT_S",
        5.0,
        "A leg that takes longer is abandoned and reported in `degraded`.",
        parse_positive_float,
    )
    context_default_tokens: int = setting(
        "MNEMO_CONTEXT_DEFAULT_TOKENS",
        1500,
        "Token budget of a wake-up packet (memory_context) that names none, in the embedder's tokens.",
        parse_positive_int,
    )
    context_max_tokens: int = setting(
        "MNEMO_CONTEXT_MAX_TOKENS",
        16000,
        "Largest token budget a wake-up packet may ask for; a larger one is refused (INVALID_ARGUMENT).",
        parse_positive_int,
    )

    workspace_cache_s: float = setting(
        "MNEMO_WORKSPACE_CACHE_S",
        5.0,
        "Seconds a search process reuses a workspace reference it resolved (0: look it up on every read).",
        parse_non_negative_float,
    )

    def validate(self) -> None:
        if self.default_limit > self.max_limit:
            raise SettingsError("invalid configuration: MNEMO_SEARCH_DEFAULT_LIMIT exceeds MNEMO_SEARCH_MAX_LIMIT")
        if self.context_default_tokens > self.context_max_tokens:
            raise SettingsError("invalid configuration: MNEMO_CONTEXT_DEFAULT_TOKENS exceeds MNEMO_CONTEXT_MAX_TOKENS")
        if self.recency_weight > 1:
            raise SettingsError("invalid configuration: MNEMO_RECENCY_WEIGHT must be between 0 and 1")
        if self.hnsw_ef_search > HNSW_EF_SEARCH_MAX:
            # Given at connection start, an out-of-range value would not fail: pgvector would warn
            # and quietly scan with its default of 40.
            raise SettingsError(
                f"invalid configuration: MNEMO_HNSW_EF_SEARCH must be at most {HNSW_EF_SEARCH_MAX} (pgvector's limit)"
            )
