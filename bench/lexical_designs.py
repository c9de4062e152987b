"""Ways to score the lexical leg inside PostgreSQL, side by side on SciFact (train): a design experiment.

The search-engine issue asks for a lexical leg at BM25 quality, bounded, inside PostgreSQL. Before
building one into the services, this runs the candidate designs as bare SQL against a throw-away
PostgreSQL holding the 5,183 abstracts (title + ". " + text, one row each, PostgreSQL's `english`
text-search configuration), asks the 807 claims, and scores them beside a plain BM25 (bm25s, in
this process) in the same run:

- `today`: the service's current statement shape: every term (`websearch_to_tsquery` of quoted
  terms), else any term, the first MNEMO_LEXICAL_MATCH_CAP matches ranked by `ts_rank_cd`;
- `postings_exact`: BM25 over a postings table (lexeme, row, tf, row length; one index, read
  index-only), every posting of every query lexeme summed;
- `postings_capped_<cap>`: candidates are the postings of the rarest query lexemes (while their
  document frequencies add up to at most `cap`; the rarest always), each candidate then scored
  on every query lexeme by index probes;
- `tsvector_capped_<cap>`: the same candidates found through the GIN index, each scored from its
  own tsvector (tf = positions of the lexeme; no extra table).

BM25 here: idf = ln(1 + (N - df + 0.5) / (df + 0.5)), k1 = 1.2, b = 0.75, a row's length = its
lexemes' positions. Latencies are in-database (one connection, this process), not through the
gateway: they compare the designs, they are not the leg's latency. Writes
bench/results/lexical_designs.json and prints a table.

    uv run python -m bench.lexical_designs            # about 2 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

from bench.common import embedded_postgres, fmt, git_info, machine_info, percentile, quiet_model_env
from bench.scifact import (
    SCIFACT,
    Document,
    Qrels,
    Query,
    average,
    bm25_rankings,
    data_file,
    load_corpus,
    load_qrels,
    load_queries,
    query_metrics,
    summarise_bm25,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
K1, B = 1.2, 0.75
CAPS = (200, 1000)
TOP_K = 10

_SCHEMA = """
CREATE TABLE docs (id int PRIMARY KEY, ext text NOT NULL, body text NOT NULL, tsv tsvector, len int);
"""
# A row's length is its lexemes' positions; a posting is (lexeme, row, tf, row length).
_DERIVED = """
UPDATE docs SET tsv = to_tsvector('english', body);
UPDATE docs SET len = (SELECT coalesce(sum(coalesce(array_length(positions, 1), 1)), 0) FROM unnest(tsv));
CREATE INDEX docs_tsv ON docs USING gin (tsv);
CREATE TABLE postings AS
    SELECT u.lexeme, d.id AS doc, coalesce(array_length(u.positions, 1), 1)::int2 AS tf, d.len::int2 AS len
    FROM docs d, unnest(d.tsv) u;
CREATE INDEX postings_lexeme ON postings (lexeme, doc) INCLUDE (tf, len);
CREATE TABLE lexicon AS SELECT lexeme, count(*)::int AS df FROM postings GROUP BY lexeme;
CREATE UNIQUE INDEX lexicon_lexeme ON lexicon (lexeme);
"""


def _bm25(tf: str, length: str, avgdl: float) -> str:
    return f"q.idf * {tf} * {K1 + 1} / ({tf} + {K1} * ({1 - B} + {B} * {length} / {avgdl}))"


def _query_terms(n: int) -> str:
    """The query's distinct lexemes with df and idf, rarest first, and df summed in that order."""
    return f"""
        q AS MATERIALIZED (
            SELECT l.lexeme, l.df, ln(1 + ({n} - l.df + 0.5) / (l.df + 0.5))::float8 AS idf,
                   sum(l.df) OVER (ORDER BY l.df, l.lexeme) AS running,
                   row_number() OVER (ORDER BY l.df, l.lexeme) AS rarity
            FROM (SELECT DISTINCT lexeme FROM unnest(to_tsvector('english', $1))) t JOIN lexicon l USING (lexeme)
        )"""


def statements(n: int, avgdl: float, match_cap: int) -> dict[str, tuple[str, bool]]:
    """Each design's statement (ranked `ext` ids for query $1) and whether it takes the service's
    quoted-terms text (True) or the raw claim (False)."""
    designs: dict[str, tuple[str, bool]] = {
        "today": (
            f"""
            WITH q AS (SELECT websearch_to_tsquery('english', $1) AS query),
            matches AS (
                SELECT d.ext, ts_rank_cd(d.tsv, q.query) AS score FROM q, docs d
                WHERE d.tsv @@ q.query LIMIT {match_cap}
            )
            SELECT ext FROM matches ORDER BY score DESC, ext LIMIT {TOP_K}""",
            True,
        ),
        "postings_exact": (
            f"""
            WITH {_query_terms(n)}
            SELECT d.ext FROM (
                SELECT p.doc, sum({_bm25("p.tf", "p.len", avgdl)}) AS score
                FROM q JOIN postings p ON p.lexeme = q.lexeme
                GROUP BY p.doc ORDER BY score DESC, p.doc LIMIT {TOP_K}
            ) s JOIN docs d ON d.id = s.doc ORDER BY s.score DESC, s.doc""",
            False,
        ),
    }
    for cap in CAPS:
        picked = f"q.running <= {cap} OR q.rarity = 1"
        designs[f"postings_capped_{cap}"] = (
            f"""
            WITH {_query_terms(n)},
            cand AS MATERIALIZED (SELECT DISTINCT p.doc FROM q JOIN postings p ON p.lexeme = q.lexeme WHERE {picked})
            SELECT d.ext FROM (
                SELECT cand.doc, sum({_bm25("p.tf", "p.len", avgdl)}) AS score
                FROM cand CROSS JOIN q JOIN postings p ON p.lexeme = q.lexeme AND p.doc = cand.doc
                GROUP BY cand.doc ORDER BY score DESC, cand.doc LIMIT {TOP_K}
            ) s JOIN docs d ON d.id = s.doc ORDER BY s.score DESC, s.doc""",
            False,
        )
        designs[f"tsvector_capped_{cap}"] = (
            f"""
            WITH {_query_terms(n)},
            cand AS (
                SELECT d.id, d.tsv, d.len FROM docs d
                WHERE d.tsv @@ (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery FROM q WHERE {picked})
            )
            SELECT d.ext FROM (
                SELECT cand.id, sum({_bm25("t.tf", "cand.len", avgdl)}) AS score
                FROM cand,
                     LATERAL (
                        SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf FROM unnest(cand.tsv) u
                     ) t
                     JOIN q ON q.lexeme = t.lexeme
                GROUP BY cand.id ORDER BY score DESC, cand.id LIMIT {TOP_K}
            ) s JOIN docs d ON d.id = s.id ORDER BY s.score DESC, s.id""",
            False,
        )
    return designs


async def run_designs(documents: list[Document], queries: list[Query], match_cap: int) -> dict[str, Any]:
    from mnemo_search.query import all_terms_query, any_term_query, literal_terms

    results: dict[str, Any] = {}
    with embedded_postgres() as dsn:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(_SCHEMA)
            await conn.executemany(
                "INSERT INTO docs (id, ext, body) VALUES ($1, $2, $3)",
                [(i, d.id, f"{d.title}. {d.text}") for i, d in enumerate(documents)],
            )
            started = time.perf_counter()
            await conn.execute(_DERIVED)
            await conn.execute("VACUUM ANALYZE")  # the visibility map, so the postings are read index-only
            built_s = time.perf_counter() - started
            n, avgdl, postings = await conn.fetchrow(
                "SELECT count(*), avg(len)::float8, (SELECT count(*) FROM postings) FROM docs"
            )
            sizes = await conn.fetchrow(
                "SELECT pg_total_relation_size('postings') AS postings, pg_total_relation_size('lexicon') AS lexicon, "
                "pg_relation_size('docs_tsv') AS gin, pg_total_relation_size('docs') AS docs"
            )
            results["_corpus"] = {
                "rows": n,
                "avg_length": avgdl,
                "postings": postings,
                "build_seconds": built_s,
                "bytes": dict(sizes),
            }
            for name, (sql, quoted) in statements(n, avgdl, match_cap).items():
                print(f"  {name} …", flush=True)
                rankings: dict[str, list[str]] = {}
                latencies: list[float] = []
                for query in queries:
                    began = time.perf_counter()
                    if quoted:  # every term, else any term: the service's two statements
                        terms = literal_terms(query.text)
                        rows = await conn.fetch(sql, all_terms_query(terms)) if terms else []
                        if not rows and terms:
                            rows = await conn.fetch(sql, any_term_query(terms))
                    else:
                        rows = await conn.fetch(sql, query.text)
                    latencies.append((time.perf_counter() - began) * 1000)
                    rankings[query.id] = [row["ext"] for row in rows]
                results[name] = {"rankings": rankings, "latencies_ms": latencies}
        finally:
            await conn.close()
    return results


def summarise(rankings: dict[str, list[str]], latencies: list[float], qrels: Qrels) -> dict[str, Any]:
    per_query = {qid: query_metrics(ranked, None, qrels[qid]) for qid, ranked in rankings.items()}
    return {
        "queries": len(per_query),
        **average(per_query),
        "latency_ms": {"p50": percentile(latencies, 50), "p95": percentile(latencies, 95)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lexical_designs", description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=0, help="only the first N judged claims (default: all)")
    parser.add_argument("--out", default="bench/results", help="results folder, relative to the repo root")
    args = parser.parse_args(argv)
    quiet_model_env()
    from mnemo_search.settings import SearchSettings

    data = REPO_ROOT / SCIFACT.default_data
    documents = load_corpus(data_file(data, "corpus"))
    qrels = load_qrels(data_file(data, "qrels"))
    queries = [q for q in load_queries(data_file(data, "queries")) if q.id in qrels]
    if args.queries:
        queries = queries[: args.queries]
    match_cap = SearchSettings().lexical_match_cap
    print(f"{len(documents)} abstracts, {len(queries)} claims; loading them into a throw-away PostgreSQL …")
    measured = asyncio.run(run_designs(documents, queries, match_cap))
    corpus = measured.pop("_corpus")
    bm25, settings = bm25_rankings(documents, queries, TOP_K)
    report = {
        "git": git_info(),
        "machine": machine_info(),
        "config": {"k1": K1, "b": B, "caps": list(CAPS), "today_match_cap": match_cap, "queries": len(queries)},
        "corpus": corpus,
        "bm25s": {**summarise_bm25(bm25, qrels), "settings": settings},
        "designs": {name: summarise(m["rankings"], m["latencies_ms"], qrels) for name, m in measured.items()},
    }
    out = REPO_ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "lexical_designs.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"\n{'design':24} {'nDCG@10':>8} {'R@10':>6} {'p50 ms':>7} {'p95 ms':>7}")
    print(f"{'bm25s (in process)':24} {fmt(report['bm25s']['ndcg@10']):>8} {fmt(report['bm25s']['recall@10']):>6}")
    for name, figures in report["designs"].items():
        lat = figures["latency_ms"]
        print(
            f"{name:24} {fmt(figures['ndcg@10']):>8} {fmt(figures['recall@10']):>6} {lat['p50']:7.1f} {lat['p95']:7.1f}"
        )
    print(f"\npostings: {corpus['postings']:,} rows, {corpus['bytes']['postings'] / 1e6:.1f} MB with their index")
    print(f"wrote {out / 'lexical_designs.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
