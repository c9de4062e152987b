"""Hybrid retrieval: a lexical and a semantic leg run concurrently, fail alone, and are fused."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field, replace

import asyncpg
import structlog

from mnemo_embed import Embedder, EmbedderUnavailable
from mnemo_platform.errors import describe_error
from mnemo_platform.telemetry import tracer
from mnemo_search.query import any_term_query, literal_terms, relaxed_terms
from mnemo_search.ranking import fuse_scores
from mnemo_search.settings import SearchSettings
from mnemo_store import MEMORY_COLUMNS, Params, Scope, build_scope, chunk_clauses, workspace_clause
from mnemo_wire import TrustSettings

log = structlog.get_logger("mnemo.search")

LEXICAL, SEMANTIC = "lexical", "semantic"
TS_CONFIG = "english"
SNIPPET_CHARS = 300


@dataclass(frozen=True)
class LegHit:
    memory_id: uuid.UUID
    chunk_id: int
    score: float
    rank: int


@dataclass
class LegResult:
    hits: list[LegHit] = field(default_factory=list)
    relaxed: bool = False


@dataclass(frozen=True)
class RankedHit:
    row: asyncpg.Record
    snippet: str
    score: float
    fused: float
    recency: float
    trust: float
    feedback: float
    lexical: LegHit | None
    semantic: LegHit | None


@dataclass
class SearchOutcome:
    hits: list[RankedHit]
    degraded: list[str]
    relaxed: bool


def _best_per_memory(rows: list[asyncpg.Record], limit: int) -> list[LegHit]:
    """Keeps each memory's best chunk, ranks by score (iterative index scans are not exactly ordered)."""
    best: dict[uuid.UUID, asyncpg.Record] = {}
    for row in rows:
        current = best.get(row["memory_id"])
        if current is None or row["score"] > current["score"]:
            best[row["memory_id"]] = row
    ordered = sorted(best.values(), key=lambda r: (-r["score"], r["chunk_id"]))[:limit]
    return [LegHit(r["memory_id"], r["chunk_id"], float(r["score"]), i) for i, r in enumerate(ordered, 1)]


# BM25's constants: term-frequency saturation and length normalisation. b is below the textbook
# 0.75: notes are short and their length says little about how much of them is on topic
# (measured on LoCoMo and SciFact, docs/lexical-bm25.md).
BM25_K1, BM25_B = 1.2, 0.3

# A lexical leg under a tag filter reads the tag's chunks instead of checking every posting
# against the filter when those chunks are at most this many times the postings (a chunk costs a
# read, as a posting's check does) and at most SCOPE_FIRST_MAX of them (lexical_query).
SCOPE_FIRST_RATIO = 1
SCOPE_FIRST_MAX = 50_000

# The lexical leg scores its candidates by probing each word's postings per candidate when the
# words hold more than this many postings per probe it would make, and by reading them all
# otherwise (lexical_query).
PROBE_RATIO = 10


def _bm25(tf: str, length: str) -> str:
    """One query word's BM25 contribution, given its weight row `w` and the statistics `s`:
    idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avglen)), the constant parts computed
    once in `s` and all of it in float8 (a bare 0.3 is numeric in SQL, and numeric arithmetic on
    every posting cost about a third of scoring 73,410 of them)."""
    return f"w.idf * {tf} * {BM25_K1 + 1!r}::float8 / ({tf} + s.base + s.slope * {length})"


def _tagged(source: str, bound: str) -> str:
    """Two WITH items: `tagged`, the first `bound` + 1 rows of `source` (a tag filter's chunks or
    vectors, below); and `small`, whether they are within `bound`. A leg reads from them when
    `small` and goes its usual way otherwise: only one way runs. They only find candidates: the
    scope, with the memory's own tags, still decides which of them a leg returns."""
    return f"""
        tagged AS MATERIALIZED ({source} LIMIT {bound} + 1),
        small AS MATERIALIZED (SELECT count(*) <= {bound} AS yes FROM tagged)"""


def _tag_copies(scope: Scope, params: Params, table: str, columns: str) -> str:
    """`columns` of the rows of `table` (chunks or chunk_vectors, aliased `t`) in the search
    indexes whose copy of their memory's tags holds the filter's, read through their own GIN index
    (sql/0018_chunk_tags.sql)."""
    tags = f"t.tags @> {params.bind(list(scope.tags))}::text[]"
    reach = workspace_clause(scope.reach, params, "t.workspace_id")  # TRUE when it reaches everywhere
    return f"SELECT {columns} FROM {table} t WHERE {tags} AND t.indexed AND {reach}"


def _tagged_chunk_ids(scope: Scope, params: Params) -> str:
    """The ids (`id`) of the chunks in the search indexes whose memory's tags hold the filter's.

    For one tag, its rows in chunk_tags (sql/0022_chunk_tag_rows.sql), read index-only: through
    the GIN index each id cost a read of its wide chunk row (13,144 ids of one tag at 100k notes:
    9 ms, against 1 ms from the key; the 1M run's 1 % tag: lexical p50 45.5 -> 34.0 ms through
    the gateway). For several, the GIN index, which intersects them: rows of their own would be
    read whole for every tag, a common one's too."""
    if len(set(scope.tags)) > 1:
        return _tag_copies(scope, params, "chunks", "t.id")
    tag = params.bind(scope.tags[0])
    reach = workspace_clause(scope.reach, params, "t.workspace_id")
    return f"SELECT t.chunk_id AS id FROM chunk_tags t WHERE t.tag = {tag} AND {reach}"


def _statistics(scope: Scope, params: Params, words: str) -> str:
    """The CTEs every lexical statement starts with: the query's lexemes (`q`), their terms in the
    workspaces read (`every`) and those of the kinds read (`terms`: the postings a statement
    reads), those workspaces' sizes (`s`), and per lexeme (`w`) the postings of the kinds read
    (`df`) and the idf.

    A term is a lexeme in one workspace and one kind (sql/0019_lexical_kinds.sql). idf is per
    workspace, over every kind, summed over the workspaces the read reaches (a workspace and
    `global`): another workspace's vocabulary never weighs in, and a kind filter narrows what is
    read, never how it scores. A lexeme no indexed chunk holds has df 0. The idf counts memories
    (a term's `mdf` among the workspaces' `memories`, sql/0023_memory_df.sql): a long note's
    chunks are one document; `df` and `n`, in chunks, size what a statement reads.
    """
    kept = f"t.kind = ANY({params.bind(list(scope.kinds))}::text[])" if scope.kinds else "true"
    return f"""
        q AS (SELECT DISTINCT lexeme FROM unnest(to_tsvector('{TS_CONFIG}', {params.bind(words)}))),
        every AS (
            SELECT t.id, t.workspace_id, t.kind, t.lexeme, t.df, t.mdf, {kept} AS kept
            FROM lexical_terms t JOIN q USING (lexeme)
            WHERE t.df > 0 AND {workspace_clause(scope.reach, params, "t.workspace_id")}
        ),
        terms AS (SELECT id, workspace_id, kind, lexeme, df FROM every WHERE kept),
        s AS (
            SELECT n, docs, {BM25_K1 * (1 - BM25_B)!r}::float8 AS base, {BM25_K1 * BM25_B!r}::float8 / avglen AS slope
            FROM (
                SELECT coalesce(sum(chunks), 0)::float8 AS n, coalesce(sum(memories), 0)::float8 AS docs,
                       greatest(coalesce(sum(length), 0)::float8 / greatest(coalesce(sum(chunks), 0), 1), 1) AS avglen
                FROM lexical_sizes WHERE {workspace_clause(scope.reach, params, "workspace_id")}
            ) x
        ),
        w AS (
            SELECT q.lexeme, coalesce(d.df, 0) AS df,
                   -- ln(1 + (N - df + 0.5) / (df + 0.5)), which is this, in memories; N never below df
                   ln((greatest(s.docs, coalesce(d.every, 0)) + 1) / (coalesce(d.every, 0) + 0.5)) AS idf
            FROM q LEFT JOIN (
                SELECT lexeme, sum(df) FILTER (WHERE kept) AS df, sum(mdf) AS every FROM every GROUP BY lexeme
            ) d USING (lexeme), s
        )"""


def lexical_query(
    scope: Scope, words: str, any_words: str, limit: int, candidates: int | None, match_cap: int
) -> tuple[str, list[object]]:
    """The lexical leg's statement and its values: chunks scored by BM25 over `words`, best first.

    Each row also says how many of the query's lexemes the chunk holds (`matched`) and how many
    there are (`wanted`), and whether the chunks scored were all those in scope (`exhaustive`);
    when nothing matches, one row with no chunk says `wanted` and `exhaustive`.

    Candidates come from the postings of the rarest query lexemes, while their document
    frequencies add up to at most `candidates` (None: every posting of every lexeme), made up from
    the next lexeme's best postings when there are none or, under a filter, too few, and each is
    scored on every lexeme; chunks whose postings are not written yet (lexical_queue) are scored
    from their tsvector. History and as-of reads also read chunks the indexes leave out (not
    `indexed`): of those, the first `match_cap` the read may return that match any word
    (`any_words`, websearch_to_tsquery text) are scored from their tsvectors, with the same
    statistics. Under a tag filter whose chunks are few, they are the candidates instead, all of
    them (`exhaustive`: widening would find no more, as when the candidates were every posting).
    """
    params = Params()
    head = _statistics(scope, params, words)
    scoped = build_scope(scope, params, memory="m", chunk="c")
    any_query = f"websearch_to_tsquery('{TS_CONFIG}', {params.bind(any_words)})"
    budget = "" if candidates is None else params.bind(candidates)
    quad = params.bind(limit * 4)
    # Under a filter, candidates too few to fill the list make the leg widen (`cut` below): a
    # filter other than kind may leave out candidates after they are scored, so their postings
    # must come to four times the limit, the chunks the leg checks (`best` below); a kind filter's
    # postings are all its kind's, so the limit is enough. Unfiltered, the leg never widens and
    # returns the best of the rare words' chunks, however few: making them up from the next word
    # cost 27 of 100 queries at 1M notes about 40 ms each (lexical p50 13.5 -> 21.2 ms in-process).
    # It takes the next word's best only when there are no rare words: the rarest alone is over
    # the budget.
    # Whether a filter leaves out postings the terms read hold: a kind filter is the terms read
    # (each kind's words are its own terms), so under it alone nothing is left out.
    discarding = replace(scope, kinds=()).filtered
    # (Bound only for a statement with a budget: a value its text never names is an error.)
    short = "1"
    if scope.filtered and candidates is not None:
        short = quad if discarding else params.bind(limit)
    # Whether the predicate is checked only on the scored chunks best first, until enough pass
    # (`best` below, which every statement has), and not also on the candidates before scoring:
    # widened, where every posting is a candidate, and as of a time, where a check reads versions
    # and status spans and costs more than scoring (measured at 100k notes, the lexical statement as of half the
    # notes: p50 18.6 -> 7.0 ms, p95 206 -> 16 ms; the rarest word's best postings, when it alone
    # exceeds the budget, are then taken before the check, which changed 3 of 60 top-30 lists).
    lazy = candidates is None or scope.as_of is not None
    # Otherwise a filtered search keeps only the rare words' postings the filter keeps before
    # scoring them (at most `candidates` postings, two key lookups each): a selective filter then
    # pays those instead of a probe per query word. When the rarest word alone exceeds the budget,
    # its best postings are taken first and the filter checked on the scored chunks best first:
    # checking each of its postings (tens of thousands at 1M notes) cost more than the rest of the
    # statement (measured at 1M notes, kind filter: p50 37.6 -> 15.7 ms in-process; 8 of 60
    # top-30 lists changed, all still full). Under a kind filter alone there is nothing to check.
    kept = (
        f"JOIN chunks c ON c.id = p.chunk_id JOIN {scoped.source} ON m.id = c.memory_id WHERE {scoped.where}"
        if discarding and not lazy
        else ""
    )
    scope_first = ""
    if scope.tags and scope.as_of is None:
        # Under a filter, the postings found would each be checked against it. A tag filter's
        # chunks come from their own rows instead (_tagged_chunk_ids): when they are few
        # (below), the postings are matched against them in a hash, with no lookup per posting;
        # every indexed chunk in scope that holds a query word is then scored, so the leg need not
        # widen (`exhaustive`; the chunks the indexes leave out are scanned as always, below).
        # Measured at 100k notes: the widened statement p50 26 -> 6 ms; at 1M notes, finding a 1 %
        # tag's chunks through its memories cost 65 of the statement's 72 ms. Which side is
        # smaller is found by reading the tag's chunks up to the bound (`small`), and only one way
        # runs. The bound: at most SCOPE_FIRST_RATIO times the words' postings and
        # SCOPE_FIRST_MAX, and, when candidates are bounded, at most the chunks below which the
        # candidates would hold fewer than `limit` of the tag's in expectation (the leg would then
        # widen). Without a tag, finding the filter's memories would take a scan (a kind filter's
        # widened statement: 72 -> 100 ms), so the postings are scored and the filter checked best
        # first (below).
        expected = "" if candidates is None else f", (SELECT n FROM s) * {params.bind(limit)} / {budget}"
        bound = f"""floor(least(
            (SELECT coalesce(sum(df), 0) FROM w) * {SCOPE_FIRST_RATIO}, {SCOPE_FIRST_MAX}{expected}
        ))::bigint"""
        scope_first = f"""{_tagged(_tagged_chunk_ids(scope, params), bound)},
        scoped_postings AS (
            SELECT p.chunk_id, sum({_bm25("p.tf", "p.len")}) AS score, count(*) AS matched
            FROM terms t JOIN lexical_postings p ON p.term_id = t.id JOIN tagged k ON k.id = p.chunk_id
            JOIN w ON w.lexeme = t.lexeme CROSS JOIN s
            WHERE (SELECT yes FROM small)
            GROUP BY p.chunk_id
        ),"""
    gate = "NOT (SELECT yes FROM small)" if scope_first else "true"
    scoped_postings = " UNION ALL SELECT * FROM scoped_postings" if scope_first else ""
    unindexed = outside = ""
    if not scope.indexed_only:
        # History and as-of reads may return chunks the indexes leave out (an older version, a
        # retracted note): those are scanned, the indexed ones found through the postings as usual.
        unindexed = f""",
        unindexed AS (
            SELECT c.id, c.tsv FROM chunks c JOIN {scoped.source} ON m.id = c.memory_id
            WHERE NOT c.indexed AND c.tsv @@ {any_query} AND {scoped.where}
            LIMIT {params.bind(match_cap)}
        ),
        outside AS (
            SELECT c.id AS chunk_id, sum({_bm25("l.tf", "l.len")}) AS score, count(*) AS matched
            FROM unindexed c CROSS JOIN LATERAL lexical_counts(c.tsv) l JOIN w USING (lexeme) CROSS JOIN s
            GROUP BY c.id
        )"""
        outside = " UNION ALL SELECT * FROM outside"
    if candidates is None:
        # Widened: every posting of every word, so each chunk's postings are all read here and it is
        # scored in one pass. The filter is then checked best first, only until enough chunks pass
        # it (below), not for every posting before scoring. Measured at 100k notes, with the same
        # results: a kind filter's widened statement p50 100 -> 23 ms, an as-of one 253 -> 20 ms.
        posted = f"""
        posted AS (
            SELECT p.chunk_id, sum({_bm25("p.tf", "p.len")}) AS score, count(*) AS matched
            FROM terms t JOIN lexical_postings p ON p.term_id = t.id JOIN w ON w.lexeme = t.lexeme CROSS JOIN s
            WHERE {gate}
            GROUP BY p.chunk_id
        ),"""
    else:
        posted = f"""
        -- The rare words: the rarest while their postings add up to at most the budget; `held`,
        -- their postings, and `next`, the rarest word beyond them. Every query word past the
        -- budget makes the first of them `next`: a query of common words in a large workspace
        -- (its rarest word has tens of thousands of postings at 1M notes), or one very rare word
        -- beside common ones.
        ranked AS MATERIALIZED (SELECT lexeme, sum(df) OVER (ORDER BY df, lexeme) AS running FROM w WHERE df > 0),
        cut AS MATERIALIZED (
            SELECT held, next, fill, beyond = 0 OR (held < {short} AND beyond = 1 AND total - held <= fill) AS whole
            FROM (
                SELECT coalesce(max(running) FILTER (WHERE running <= {budget}), 0) AS held,
                       (SELECT lexeme FROM ranked WHERE running > {budget} ORDER BY running LIMIT 1) AS next,
                       count(*) FILTER (WHERE running > {budget}) AS beyond, coalesce(max(running), 0) AS total
                FROM ranked
            ) x, LATERAL (SELECT greatest({budget}, {quad}) - held AS fill) f
        ),
        candidates AS (
            SELECT p.chunk_id, t.workspace_id, t.kind
            FROM ranked r JOIN terms t USING (lexeme) JOIN lexical_postings p ON p.term_id = t.id
            {kept} {"AND" if kept else "WHERE"} r.running <= {budget} AND {gate}
            UNION
            (
                -- When the rare words hold too few postings (`short`), the leg would come back
                -- short, and under a filter widen to every posting of every word (at 1M notes,
                -- 0.3-0.6 s). The next word's best postings by its share of the score make the
                -- candidates up to the budget: not all of them, nor the first found. Each chunk
                -- is one posting of a word, so no sum. This reads all of that word's postings: at
                -- 1M notes about 30 ms for 73,410.
                SELECT p.chunk_id, t.workspace_id, t.kind
                FROM terms t JOIN lexical_postings p ON p.term_id = t.id JOIN w ON w.lexeme = t.lexeme
                CROSS JOIN s
                WHERE t.lexeme = (SELECT next FROM cut) AND (SELECT held FROM cut) < {short} AND {gate}
                ORDER BY {_bm25("p.tf", "p.len")} DESC, p.chunk_id
                LIMIT (SELECT fill FROM cut)
            )
        ),
        -- Each candidate is scored on every word one of two ways, chosen by how many postings
        -- the words hold against the probes the candidates would make (`probe`): with few
        -- postings, reading them all and matching them in a hash costs least; with many, each
        -- candidate probes each word's postings by key (LATERAL; OFFSET 0 keeps the planner from
        -- flattening it into the join), under its own workspace's and kind's term only. The
        -- reused generic plan cannot see which: it hashed all of them at 1M notes (320,916
        -- postings, 85 of a statement's 144 ms).
        probe AS MATERIALIZED (
            SELECT coalesce(sum(df), 0) > {PROBE_RATIO} * {budget} * count(*) AS yes FROM w WHERE df > 0
        ),
        posted AS (
            SELECT c.chunk_id, sum({_bm25("p.tf", "p.len")}) AS score, count(*) AS matched
            FROM candidates c CROSS JOIN LATERAL (
                SELECT t.lexeme, p.tf, p.len FROM terms t
                JOIN lexical_postings p ON p.term_id = t.id AND p.chunk_id = c.chunk_id
                WHERE t.workspace_id = c.workspace_id AND t.kind = c.kind
                OFFSET 0
            ) p
            JOIN w ON w.lexeme = p.lexeme CROSS JOIN s
            WHERE (SELECT yes FROM probe)
            GROUP BY c.chunk_id
            UNION ALL
            SELECT p.chunk_id, sum({_bm25("p.tf", "p.len")}) AS score, count(*) AS matched
            FROM candidates c CROSS JOIN terms t
            JOIN lexical_postings p ON p.term_id = t.id AND p.chunk_id = c.chunk_id
            JOIN w ON w.lexeme = t.lexeme CROSS JOIN s
            WHERE NOT (SELECT yes FROM probe)
            GROUP BY p.chunk_id
        ),"""
    chunk_scores = f"""{scope_first}{posted}
        queued AS (
            SELECT DISTINCT c.id, c.tsv FROM lexical_queue lq JOIN chunks c ON c.id = lq.chunk_id
            WHERE c.indexed AND {workspace_clause(scope.reach, params, "c.workspace_id")}
              AND c.tsv @@ {any_query}
              AND NOT EXISTS (SELECT 1 FROM lexical_posted lp WHERE lp.chunk_id = c.id)
        ),
        fresh AS (
            SELECT c.id AS chunk_id, sum({_bm25("l.tf", "l.len")}) AS score, count(*) AS matched
            FROM queued c CROSS JOIN LATERAL lexical_counts(c.tsv) l JOIN w USING (lexeme) CROSS JOIN s
            GROUP BY c.id
        ){unindexed},
        scored AS (SELECT * FROM posted UNION ALL SELECT * FROM fresh{outside}{scoped_postings})"""
    # Postings outlive a chunk's leaving the indexes until the poster runs: the predicate decides.
    # Each chunk in score order is checked against it by its own lookups (LATERAL), so the checks
    # stop once `limit * 4` have passed.
    best = f"""
        SELECT y.memory_id, x.chunk_id, x.score, x.matched
        FROM (SELECT * FROM scored ORDER BY score DESC, chunk_id) x
        CROSS JOIN LATERAL (
            SELECT c.memory_id FROM chunks c JOIN {scoped.source} ON m.id = c.memory_id
            WHERE c.id = x.chunk_id AND {scoped.where}
        ) y
        ORDER BY x.score DESC, x.chunk_id
        LIMIT {quad}"""
    # One row at least, so `wanted` comes back when nothing matched (memory_id NULL then).
    # Every chunk in scope holding a query word was scored when a small tag's chunks were read
    # first, or when the candidates were every posting of every word (`whole`: all the words
    # within the budget, or all but one whose postings the fill took whole): widening would read
    # the same postings again.
    exhaustive = "false" if candidates is None else "(SELECT whole FROM cut)"
    if scope_first:
        exhaustive += " OR (SELECT yes FROM small)"
    sql = f"""
        WITH {head},
        {chunk_scores}
        SELECT r.*, n.wanted, n.exhaustive FROM (SELECT count(*) AS wanted, {exhaustive} AS exhaustive FROM q) n
        LEFT JOIN LATERAL ({best}) r ON true
    """
    return sql, params.values


def lexical_statement(
    scope: Scope, terms: list[str], limit: int, candidates: int | None, settings: SearchSettings
) -> tuple[str, list[object]]:
    """lexical_query for the query's literal terms: its lexemes come from the terms and the words
    inside them (`title:foo` also counts `title` and `foo`), as the chunks index compound words."""
    return lexical_query(
        scope, " ".join(relaxed_terms(terms)), any_term_query(terms), limit, candidates, settings.lexical_match_cap
    )


def session_settings(settings: SearchSettings) -> dict[str, str]:
    """What every connection of the search pool starts with, so the semantic leg is one statement.

    HNSW applies WHERE after the index scan and `ef_search` caps what it returns: without an
    iterative scan a workspace-filtered query can silently come back short. Nothing else the
    search service runs uses the HNSW index, so the whole pool can carry them.
    """
    return {"hnsw.ef_search": str(settings.hnsw_ef_search), "hnsw.iterative_scan": "relaxed_order"}


# What every connection of the lexical leg's pool starts with. Planning the lexical statement (a
# dozen CTEs and joins) cost 2.5-4.5 ms, more than running it in a small workspace, and its plan
# does not turn on its values: the CTEs fix its shape, and its costs follow the postings it reads
# whatever the estimates. So each of its shapes is planned once per connection and reused (a
# prepared statement's generic plan; left to itself PostgreSQL planned every call). Measured at 100k
# notes: 10.2 -> 8.1 ms unfiltered, 2.9 -> 0.9 ms in a 500-note workspace (docs/lexical-bm25.md). The semantic
# statement keeps planning per call: a generic plan cannot see that a workspace is small, and
# walked the whole HNSW graph for it (9 -> 203 ms).
LEXICAL_SESSION = {"plan_cache_mode": "force_generic_plan"}


# The semantic leg under a tag filter computes every distance of the tag's vectors instead of
# walking the HNSW graph when they are at most this many (semantic_query).
SEMANTIC_EXACT_MAX = 20_000

# The semantic leg asks for the `limit` memories' nearest chunks: the limit and a third more, for
# memories with more than one chunk near the query. Under a filter the HNSW scan walks until that
# many pass, so each extra row costs a stretch of the graph and a memory's check. At 1M notes
# (in-process, the same 100 real queries interleaved, warm), 90 rows (three per memory) against
# 40: under a kind filter (18 % of the notes) 9.1 -> 5.4 ms, as_of 8.7 -> 7.4, unfiltered 3.6 ->
# 3.1, a 1 % tag (compared exactly) 32.2 -> 32.0; the same top 30 memories for all 100 each time.
# When the chunks read held fewer memories than the limit (notes of many chunks near one query,
# a session's pieces), the leg asks again for SEMANTIC_WIDE_ROWS chunks per memory: before, three
# per memory was all it read, and such a leg came back short.
SEMANTIC_WIDE_ROWS = 10


def semantic_rows(limit: int) -> int:
    """The chunks the semantic leg first asks for, for `limit` memories."""
    return limit + (limit + 2) // 3  # a third more, rounded up


def semantic_query(
    scope: Scope, vector: object, limit: int, rows: int | None = None, waiting: bool = True
) -> tuple[str, list[object]]:
    """The semantic leg's statement and its values: the `rows` chunks (semantic_rows(limit) unless
    given) whose vectors are nearest `vector`.

    A default read reads only indexed vectors (the scope says so), which the partial HNSW index
    holds once the grapher has let them in; the few that wait for it are compared exactly, a part
    of the statement left out when `waiting` is false. Either way the statement says, in its own
    snapshot, whether any vector waits (nearest_chunks): left out wrongly, it is read again.
    History and as-of reads read the indexed vectors that way too, and scan only the vectors the
    index leaves out (older versions, hidden statuses), nearest first of each.
    Under a tag filter whose indexed vectors are at most SEMANTIC_EXACT_MAX, each of those is
    compared instead, and no index is walked.
    """
    params = Params()
    bound_vector = params.bind(vector)

    def checked() -> tuple[str, str]:
        """The vectors alone, each checked against its memory by its own lookups (the join and
        the vectors' conditions)."""
        memory = build_scope(scope, params, memory="m")
        joined = f"""CROSS JOIN LATERAL (
                SELECT 1 FROM {memory.source} WHERE m.id = v.memory_id AND m.version = v.version AND {memory.where}
                OFFSET 0
            ) checked"""
        return joined, " AND ".join(chunk_clauses(scope, params, "v")) or "true"

    if scope.as_of is None:
        scoped = build_scope(scope, params, memory="m", chunk="v")
        joined, vector_where = f"JOIN {scoped.source} ON m.id = v.memory_id", scoped.where
        # The vectors waiting for the graph are read the way as-of reads read theirs (below): a
        # join planned beside the graph's cost every search about 0.2-0.8 ms more at 100k notes,
        # with none waiting. Bound only when read: a value the statement does not use has no type.
        waiting_joined, waiting_where = checked() if waiting else ("", "")
    else:
        # As of a time a memory is three relations (the memory, its version then, its status
        # span then), and planning their join with the vectors cost 1.7 ms of a 4.7 ms statement
        # at 100k notes. Checked per vector by its own lookups instead (LATERAL; OFFSET 0 keeps it
        # from being flattened into the join), the vectors are planned alone: 0.4 ms, the
        # statement 3.7 ms, the same rows for 60 of 60 queries (in a 500-note workspace 5.3 and
        # 5.5 ms, the same rows too). Through the gateway, both in one stack, interleaved (150
        # queries): semantic p50 as of half the notes 15.7 -> 14.0 ms, hybrid 19.0 -> 18.5 (its
        # lexical leg takes about as long). The vectors are read nearest first either way.
        joined, vector_where = waiting_joined, waiting_where = checked()
    bound = params.bind(rows or semantic_rows(limit))
    head = gate = exact = ""
    if scope.tags:
        # The HNSW scan applies the filter to what it walks: a tag 1 % of the notes hold makes it
        # walk about a hundred times the graph it walks unfiltered for the same 30 chunks (129 of
        # the 172 ms of a hybrid search at 1M notes). The tag's vectors come from their own index
        # instead (sql/0018_chunk_tags.sql), up to the bound, their distances computed as they
        # are read: when they are within it (`small`) that is an exact answer, else the graph is
        # walked as usual; only one way runs. The scope is checked on the nearest first, by key,
        # until enough pass: OFFSET 0 keeps the check a lookup per row, in distance order. Pulled
        # up into the join, it was planned as a hash join that read the tag's memories in table
        # order and stopped at the limit, so the rows were the first found, not the nearest; the
        # ORDER BY keeps the answer right whatever the plan. (Found through the tag's memories and
        # each one's vectors by key, a 1 % tag at 1M notes cost 62 ms before the first distance.)
        memories = build_scope(scope, params, memory="m")
        head = "WITH " + _tagged(
            _tag_copies(
                scope,
                params,
                "chunk_vectors",
                f"t.memory_id, t.chunk_id, t.version, t.embedding <=> {bound_vector} AS distance",
            ),
            params.bind(SEMANTIC_EXACT_MAX),
        )
        gate = " AND NOT (SELECT yes FROM small)"
        exact = f"""
            SELECT x.memory_id, x.chunk_id, x.distance
            FROM (SELECT * FROM tagged WHERE (SELECT yes FROM small) ORDER BY distance, chunk_id) x
            CROSS JOIN LATERAL (
                SELECT 1 FROM {memories.source}
                WHERE m.id = x.memory_id AND m.version = x.version AND {memories.where}
                OFFSET 0
            ) y
            ORDER BY x.distance, x.chunk_id
            LIMIT {bound}"""

    # The vector's copy of its memory's kind (sql/0020_vector_kinds.sql): the HNSW scan drops the
    # other kinds itself, and only the vectors that pass cost a lookup of their memory.
    kinds = f" AND v.kind = ANY({params.bind(list(scope.kinds))}::text[])" if scope.kinds else ""

    def nearest(extra: str, waiting: bool = False) -> str:
        source, where = (waiting_joined, waiting_where) if waiting else (joined, vector_where)
        return f"""
            SELECT v.memory_id, v.chunk_id, v.embedding <=> {bound_vector} AS distance
            FROM chunk_vectors v {source}
            WHERE {where}{kinds}{extra}
            ORDER BY v.embedding <=> {bound_vector}
            LIMIT {bound}"""

    # The indexed vectors in the HNSW graph through its index, and those waiting for the grapher
    # (sql/0024_vector_graph.sql) each compared, through their own partial index: none most of the
    # time, up to MNEMO_VECTOR_GRAPH_BACKLOG while the model embeds an import.
    indexed = "" if scope.indexed_only else " AND v.indexed"
    parts = [nearest(f"{indexed} AND v.graphed{gate}")]
    if waiting:
        parts.append(nearest(f"{indexed} AND NOT v.graphed{gate}", waiting=True))
    if not scope.indexed_only:
        parts.append(nearest(" AND NOT v.indexed"))
    body = f"""
            SELECT * FROM ({" UNION ALL ".join(f"({part})" for part in parts)}) x
            ORDER BY distance
            LIMIT {bound}"""
    if exact:
        # The tag's indexed vectors, or the graph; the vectors the indexes leave out either way.
        body = f"SELECT * FROM (({exact}) UNION ALL ({body})) x ORDER BY distance LIMIT {bound}"
    # One more row, after the chunks: whether any vector waits for the graph, from their partial
    # index (an empty one, most of the time).
    sql = f"""{head}
        SELECT y.memory_id, y.chunk_id, 1 - y.distance AS score, NULL::boolean AS waiting FROM ({body}) y
        UNION ALL
        SELECT NULL, NULL, NULL, EXISTS (SELECT 1 FROM chunk_vectors WHERE indexed AND NOT graphed)"""
    return sql, params.values


def nearest_chunks(rows: Sequence[asyncpg.Record]) -> tuple[list[asyncpg.Record], bool]:
    """The semantic statement's chunk rows, and whether any vector waited for the graph."""
    return [row for row in rows if row["memory_id"] is not None], bool(rows[-1]["waiting"])


@dataclass(frozen=True)
class Candidate:
    """A memory after fusion, with what each leg found of it."""

    memory_id: uuid.UUID
    fused: float
    lexical: LegHit | None
    semantic: LegHit | None


def ranked_query(
    scope: Scope, text: str, candidates: list[Candidate], limit: int, settings: SearchSettings, trust: TrustSettings
) -> tuple[str, list[object]]:
    """The statement after fusion and its values: the best `limit` candidates, rows and snippets.

    Each candidate's fused score is multiplied by a recency factor (1 for a memory updated now,
    falling towards 1 - MNEMO_RECENCY_WEIGHT, halving every half-life) and its trust factor
    (`TrustSettings.sql_factor`, the SQL form of `TrustSettings.factor`; the memory's own factor there is
    its screening factor times its feedback factor, docs/feedback.md). Ranking here rather than after the rows come
    back is what lets one statement do it all: a snippet (ts_headline, a fraction of a
    millisecond per chunk) is made only for the results returned, not for every candidate. The
    scope is applied again, so a memory changed since its leg read it is left out. A snippet is
    the lexical leg's best chunk with the words highlighted, else the semantic leg's chunk.
    """
    params = Params()
    chunks = [(c.lexical or c.semantic) for c in candidates]
    ids = params.bind([c.memory_id for c in candidates])
    fused = params.bind([c.fused for c in candidates])
    chunk_ids = params.bind([hit.chunk_id if hit else None for hit in chunks])
    highlighted = params.bind([c.lexical is not None for c in candidates])
    weight = params.bind(settings.recency_weight)
    half_life = params.bind(settings.recency_half_life_days)
    # The memory's own factor is its screening factor times its feedback factor (docs/feedback.md).
    trust_factor = trust.sql_factor(params.bind, "m.status", "m.provenance", "(m.trust * m.feedback_factor)")
    words = params.bind(any_term_query(literal_terms(text)))
    scoped = build_scope(scope, params, memory="m")
    sql = f"""
        WITH candidates AS (
            SELECT * FROM unnest({ids}::uuid[], {fused}::float8[], {chunk_ids}::bigint[], {highlighted}::boolean[])
                AS f(memory_id, fused, chunk_id, highlighted)
        ),
        scored AS (
            SELECT {MEMORY_COLUMNS}, f.fused, f.chunk_id AS snippet_chunk_id, f.highlighted,
                   (1 - {weight}::float8) + {weight}::float8 * power(
                       0.5, greatest(0, extract(epoch FROM now() - m.updated_at)::float8 / 86400) / {half_life}::float8
                   ) AS recency,
                   {trust_factor} AS trust_factor
            FROM candidates f JOIN {scoped.source} ON m.id = f.memory_id
            WHERE {scoped.where}
        ),
        top AS (
            SELECT *, fused * recency * trust_factor AS score FROM scored
            ORDER BY score DESC, id
            LIMIT {params.bind(limit)}
        )
        SELECT top.*,
               CASE WHEN top.highlighted
                    THEN ts_headline('{TS_CONFIG}', c.text, websearch_to_tsquery('{TS_CONFIG}', {words}),
                                     'MaxWords=40, MinWords=15, MaxFragments=2, StartSel=«, StopSel=»')
                    ELSE left(c.text, {SNIPPET_CHARS})
               END AS snippet
        FROM top LEFT JOIN chunks c ON c.id = top.snippet_chunk_id
        ORDER BY top.score DESC, top.id
    """
    return sql, params.values


class SearchEngine:
    def __init__(
        self,
        pool: asyncpg.Pool,
        embedder: Embedder,
        settings: SearchSettings,
        trust: TrustSettings,
        lexical_pool: asyncpg.Pool | None = None,
    ) -> None:
        self.pool = pool
        # The lexical statements' own connections (LEXICAL_SESSION); the pool when not given.
        self.lexical_pool = lexical_pool or pool
        self.embedder = embedder
        self.settings = settings
        self.trust = trust
        # Whether the last semantic statement found vectors waiting for the graph: the next one
        # scans them only then (_nearest). True until a statement has said.
        self.graph_waiting = True

    # -- legs -------------------------------------------------------------------------------

    async def _lexical_match(
        self, scope: Scope, terms: list[str], limit: int, candidates: int | None
    ) -> tuple[list[LegHit], bool, bool]:
        """The leg's best chunks, whether it relaxed (the query has words and no chunk found
        holds every one of them), and whether every chunk in scope holding a query word was
        scored (a small tag's chunks, read first), so widening would find no more."""
        sql, values = lexical_statement(scope, terms, limit, candidates, self.settings)
        rows = await self.lexical_pool.fetch(sql, *values)
        found = [row for row in rows if row["memory_id"] is not None]
        relaxed = rows[0]["wanted"] > 0 and not any(row["matched"] >= row["wanted"] for row in found)
        return _best_per_memory(found, limit), relaxed, rows[0]["exhaustive"]

    async def lexical_leg(self, scope: Scope, text: str, limit: int) -> LegResult:
        terms = literal_terms(text)
        if not terms:
            return LegResult()
        with tracer.start_as_current_span("mnemo.search.lexical"):
            hits, relaxed, exhaustive = await self._lexical_match(scope, terms, limit, self.settings.lexical_candidates)
            if len(hits) < limit and scope.filtered and not exhaustive:
                # The rarest words' postings held too few notes the filter keeps: widen to every
                # posting of every word, so a selective filter does not come back short.
                with tracer.start_as_current_span("mnemo.search.lexical_widened"):
                    hits, relaxed, _ = await self._lexical_match(scope, terms, limit, None)
            return LegResult(hits, relaxed=relaxed)

    async def semantic_leg(self, scope: Scope, text: str, limit: int, needed: int) -> LegResult:
        """The `limit` memories nearest `text`; it reads further only when the first read held
        fewer than `needed` (the results asked for, at most `limit`)."""
        with tracer.start_as_current_span("mnemo.search.semantic"):
            vector = await self.embedder.embed_query(text)
            # One statement (two when it widens), no transaction: the pool's connections carry the
            # HNSW settings (session_settings).
            asked = semantic_rows(limit)
            rows = await self._nearest(scope, vector, limit, asked)
            hits = _best_per_memory(rows, limit)
            if len(hits) < needed and len(rows) == asked:
                # The nearest chunks came from too few memories to fill the results: read further
                # (SEMANTIC_WIDE_ROWS). Fewer than `limit` but enough to fill them is kept: fusion
                # gets a few candidates less (its top ones are exact either way), where reading
                # again whenever fewer than `limit` cost most SciFact claims a second statement
                # (p50 through MCP: semantic 27.3 -> 24.2 ms, hybrid 30.7 -> 27.2 ms; nDCG@10 the
                # same, 2 of 400 hybrid rankings changed).
                with tracer.start_as_current_span("mnemo.search.semantic_widened"):
                    hits = _best_per_memory(
                        await self._nearest(scope, vector, limit, limit * SEMANTIC_WIDE_ROWS), limit
                    )
            return LegResult(hits)

    async def _nearest(self, scope: Scope, vector: object, limit: int, rows: int) -> list[asyncpg.Record]:
        """The semantic statement's chunks. Its scan of the vectors waiting for the graph is
        planned at every call, even when none wait (0.1-0.2 ms of PostgreSQL's planning at 100k
        notes, bench/README.md), so it is left out while the last statement found none waiting;
        when this one finds some, it may have missed them, and is sent again with the scan. Told
        by the statement's own snapshot, not by a notification that may arrive after a search
        that should read a vector just stored."""
        scanned = self.graph_waiting
        sql, values = semantic_query(scope, vector, limit, rows, scanned)
        chunks, self.graph_waiting = nearest_chunks(await self.pool.fetch(sql, *values))
        if self.graph_waiting and not scanned:
            sql, values = semantic_query(scope, vector, limit, rows, True)
            chunks, self.graph_waiting = nearest_chunks(await self.pool.fetch(sql, *values))
        return chunks

    # -- the search ---------------------------------------------------------------------------

    async def _run_leg(self, name: str, leg: Awaitable[LegResult], degraded: list[str]) -> LegResult | None:
        """Runs a leg with a timeout; a failure is reported in `degraded`, never raised."""
        try:
            return await asyncio.wait_for(leg, timeout=self.settings.query_timeout_s)
        except EmbedderUnavailable as exc:
            degraded.append(f"{name}: {exc}")
        except TimeoutError:
            degraded.append(f"{name}: timed out after {self.settings.query_timeout_s:g} s")
        except (asyncpg.PostgresError, OSError) as exc:
            log.warning("search_leg_failed", leg=name, error=describe_error(exc))
            degraded.append(f"{name}: {describe_error(exc)}")
        return None

    async def search(self, scope: Scope, text: str, mode: str, limit: int) -> SearchOutcome:
        if not text.strip():
            return SearchOutcome([], [], False)
        depth = max(limit, self.settings.candidates)
        degraded: list[str] = []
        legs: dict[str, asyncio.Future[LegResult | None]] = {}
        if mode in ("hybrid", LEXICAL):
            legs[LEXICAL] = asyncio.ensure_future(
                self._run_leg(LEXICAL, self.lexical_leg(scope, text, depth), degraded)
            )
        if mode in ("hybrid", SEMANTIC):
            legs[SEMANTIC] = asyncio.ensure_future(
                self._run_leg(SEMANTIC, self.semantic_leg(scope, text, depth, limit), degraded)
            )
        results = dict(zip(legs, await asyncio.gather(*legs.values()), strict=True))
        answered = {name: result for name, result in results.items() if result is not None}
        relaxed = bool(answered.get(LEXICAL) and answered[LEXICAL].relaxed)
        if not answered:
            return SearchOutcome([], degraded, relaxed)
        by_leg = {name: {h.memory_id: h for h in result.hits} for name, result in answered.items()}
        fused = fuse_scores(
            {name: [(h.memory_id, h.score) for h in result.hits] for name, result in answered.items()},
            {LEXICAL: self.settings.lexical_weight, SEMANTIC: self.settings.semantic_weight},
        )
        if not fused:
            return SearchOutcome([], degraded, relaxed)
        lexical_hits, semantic_hits = by_leg.get(LEXICAL, {}), by_leg.get(SEMANTIC, {})
        candidates = [
            Candidate(memory_id, fused_score, lexical_hits.get(memory_id), semantic_hits.get(memory_id))
            for memory_id, fused_score in fused.items()
        ]
        sql, values = ranked_query(scope, text, candidates, limit, self.settings, self.trust)
        rows = await self.pool.fetch(sql, *values)
        hits = [
            RankedHit(
                row=row,
                snippet=row["snippet"] or "",
                score=row["score"],
                fused=row["fused"],
                recency=row["recency"],
                trust=row["trust_factor"],
                feedback=row["feedback_factor"],
                lexical=lexical_hits.get(row["id"]),
                semantic=semantic_hits.get(row["id"]),
            )
            for row in rows
        ]
        return SearchOutcome(hits, degraded, relaxed)
