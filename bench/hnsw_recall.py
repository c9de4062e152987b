"""Recall of pgvector's HNSW index on the scale benchmark's copied vectors: a design experiment.

`bench/scale.py` embeds a base of notes with the model and gives every later note a copied vector
(`scale.copied_vectors`). Whether the semantic leg's recall at 1M is the engine's or an artefact of
how those copies are drawn, and what `m`, `ef_construction` and `ef_search` buy, is quicker to
see on the vectors alone than through the whole stack. This embeds the first `--base` notes of the
scale corpus and `--queries` of its real questions with the bundled model, then for each size,
copy scheme (`--parents`) and index definition (`--index`) loads the vectors into a bare table of
a throw-away PostgreSQL, builds the HNSW index as the engine defines it (cosine; no partial
predicate: every row is indexed), and asks each query at each `--ef-search` against numpy's exact
ten: recall@10, queries with all ten, lists shorter than ten, and how far the index's ten fall
below the exact ten in mean cosine (a miss among near-ties costs little; a list from the wrong
neighbourhood its whole difference; a row not returned counts as cosine 0). Query times are
in-database (one connection, this process), for comparing settings, not the leg's latency
(`bench/scale.py` measures that). Writes bench/results/hnsw_recall.json and prints a table.

    uv run python -m bench.hnsw_recall                                  # 100k and 1M, about 25 minutes
    uv run python -m bench.hnsw_recall --sizes 1000000 --parents 3 --index m=16,ef_construction=128
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import BenchError, embedded_postgres, git_info, machine_info, percentile, quiet_model_env
from bench.scale import (
    DEFAULT_PARENTS,
    LIMIT,
    LONG_S,
    Corpus,
    CorpusSpec,
    copied_vectors,
    list_recall,
    parse_sizes,
    real_queries,
    summarise_recall,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SIZES = (100_000, 1_000_000)
DEFAULT_BASE = 5_000
DEFAULT_INDEX = "m=16,ef_construction=64"  # pgvector's defaults, the engine's index (embedding_space.py)
NOISE = 0.5  # scale.py's default --noise
SEED = 20261201
COPY_ROWS = 50_000
PROGRESS_S = 15.0
# The build's memory: a 1M graph of 384 dimensions needs about 2 GB to be built in memory.
PG_SETTINGS = {"maintenance_work_mem": "3GB", "shared_buffers": "2GB"}


def parse_ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"every value must be at least 1: {text!r}")
    return values


def parse_index(text: str) -> str:
    """`m=16,ef_construction=64` → the index's WITH clause, each storage parameter checked."""
    pairs = [part.split("=", 1) for part in text.split(",")]
    if any(len(p) != 2 or p[0] not in ("m", "ef_construction") or not p[1].isdigit() for p in pairs):
        raise argparse.ArgumentTypeError(f"expected m=N,ef_construction=N: {text!r}")
    return ", ".join(f"{name} = {int(value)}" for name, value in pairs)


async def embed_base(base: int, queries: int) -> tuple[Any, Any, list[str]]:
    """The first `base` notes of the scale corpus (title and content) and `queries` real questions,
    embedded by the bundled model; unit rows."""
    import numpy as np

    from mnemo_embed.local import LocalEmbedder

    corpus = Corpus(CorpusSpec(SEED, DEFAULT_SIZES[0], 500, 0.01))
    texts = [f"{note['title']}\n{note['content']}" for note in map(corpus.note, range(base))]
    questions = [q["text"] for q in real_queries(corpus, queries, SEED)]
    embedder = LocalEmbedder()
    embedder.start()
    await embedder.wait_ready()
    vectors, last = [], time.perf_counter()
    for first in range(0, len(texts), 256):
        vectors += await embedder.embed(texts[first : first + 256])
        if time.perf_counter() - last > PROGRESS_S:
            last = time.perf_counter()
            print(f"  … {len(vectors):,} of {base:,} notes embedded", flush=True)
    asked = [await embedder.embed_query(q) for q in questions]

    def unit(rows: list[Any]) -> Any:
        array = np.stack(rows).astype(np.float32)
        return array / np.linalg.norm(array, axis=1, keepdims=True)

    return unit(vectors), unit(asked), questions


async def measure(
    dsn: str, base: Any, queries: Any, size: int, parents: int, index: str, ef_searches: tuple[int, ...]
) -> dict[str, Any]:
    import asyncpg
    import numpy as np
    from pgvector.asyncpg import register_vector

    if size < len(base):
        raise BenchError(f"size {size:,} is below the base of {len(base):,}")
    copies, _ = copied_vectors(np.random.default_rng(SEED + size), base, size - len(base), NOISE, parents)
    vectors = np.concatenate([base, copies])
    exact_scores = queries @ vectors.T
    exact = np.argpartition(-exact_scores, LIMIT, axis=1)[:, :LIMIT]
    conn = await asyncpg.connect(dsn)
    try:
        await register_vector(conn)
        await conn.execute("DROP TABLE IF EXISTS v; CREATE TABLE v (id int, embedding vector(384))")
        started = time.perf_counter()
        for first in range(0, size, COPY_ROWS):
            rows = [(i, vectors[i]) for i in range(first, min(size, first + COPY_ROWS))]
            await conn.copy_records_to_table("v", records=rows, columns=["id", "embedding"])
        load_s = time.perf_counter() - started
        print(f"  {size:,} vectors loaded in {load_s:.0f} s; building the index ({index}) …", flush=True)
        started = time.perf_counter()
        await conn.execute(f"CREATE INDEX ON v USING hnsw (embedding vector_cosine_ops) WITH ({index})", timeout=LONG_S)
        build_s = time.perf_counter() - started
        index_bytes = await conn.fetchval("SELECT pg_relation_size('v_embedding_idx')")
        # What is measured is the index: a small table would otherwise be read in full.
        await conn.execute("SET enable_seqscan = off")
        walks = any(
            "v_embedding_idx" in r[0]
            for r in await conn.fetch("EXPLAIN SELECT id FROM v ORDER BY embedding <=> $1 LIMIT 10", queries[0])
        )
        if not walks:
            raise BenchError("the plan does not walk the HNSW index")
        by_ef: dict[str, Any] = {}
        for ef in ef_searches:
            await conn.execute(f"SET hnsw.ef_search = {ef}")
            recalls, shortfalls, times, short_lists = [], [], [], 0
            for q, vector in enumerate(queries):
                started = time.perf_counter()
                rows = await conn.fetch(f"SELECT id FROM v ORDER BY embedding <=> $1 LIMIT {LIMIT}", vector)
                times.append((time.perf_counter() - started) * 1000)
                found = [(r["id"], float(exact_scores[q, r["id"]])) for r in rows]
                # ef_search caps the rows an index scan returns: a row short counts as cosine 0.
                got, short = list_recall(found, [(int(i), float(exact_scores[q, i])) for i in exact[q]])
                recalls.append(got)
                shortfalls.append(short)
                short_lists += len(found) < LIMIT
            by_ef[str(ef)] = {
                **summarise_recall(recalls, shortfalls),
                "short_lists": short_lists,
                "query_ms": {"p50": round(percentile(times, 50), 2), "p95": round(percentile(times, 95), 2)},
            }
    finally:
        await conn.close()
    return {
        "size": size,
        "parents": parents,
        "index": index,
        "load_s": round(load_s, 1),
        "build_s": round(build_s, 1),
        "index_bytes": index_bytes,
        "exact_cosine_mean": round(float(np.take_along_axis(exact_scores, exact, axis=1).mean()), 4),
        "ef_search": by_ef,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    print(f"Embedding {args.base:,} notes and {args.queries} questions with the bundled model …", flush=True)
    base, queries, questions = await embed_base(args.base, args.queries)
    import asyncpg

    results = []
    with embedded_postgres(PG_SETTINGS) as dsn:
        conn = await asyncpg.connect(dsn)
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        await conn.close()
        for size in args.sizes:
            for parents in args.parents:
                for index in args.index:
                    print(f"\n== {size:,} vectors, {parents} parent(s), {index} ==", flush=True)
                    results.append(await measure(dsn, base, queries, size, parents, index, args.ef_search))
                    print_result(results[-1])
    return {
        "git": git_info(),
        "machine": machine_info(),
        "config": {
            "base": args.base,
            "queries": len(questions),
            "noise": NOISE,
            "seed": SEED,
            "postgres": PG_SETTINGS,
            "examples": questions[:5],
        },
        "results": results,
    }


def print_result(result: dict[str, Any]) -> None:
    print(f"  built in {result['build_s']:.0f} s ({result['index_bytes'] / 1e6:.0f} MB)")
    print(f"  {'ef_search':>9} {'recall@10':>9} {'lowest':>6} {'all 10':>6} {'short':>6} {'most':>6} {'p50 ms':>7}")
    for ef, got in result["ef_search"].items():
        print(
            f"  {ef:>9} {got['mean']:9.3f} {got['lowest']:6.1f} {got['all_found']:6d} "
            f"{got['cosine_shortfall_mean']:6.3f} {got['cosine_shortfall_most']:6.3f} {got['query_ms']['p50']:7.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hnsw_recall", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=DEFAULT_SIZES, help="vector counts (100000,1000000)")
    parser.add_argument("--base", type=int, default=DEFAULT_BASE, help=f"notes embedded ({DEFAULT_BASE:,})")
    parser.add_argument(
        "--parents", type=parse_ints, default=(1, DEFAULT_PARENTS), help="copy schemes: base vectors mixed (1,3)"
    )
    parser.add_argument(
        "--index",
        type=parse_index,
        action="append",
        help=f"HNSW storage parameters, repeatable (default {DEFAULT_INDEX})",
    )
    parser.add_argument("--ef-search", type=parse_ints, default=(40, 200, 800), help="hnsw.ef_search (40,200,800)")
    parser.add_argument("--queries", type=int, default=60, help="real questions asked (60)")
    parser.add_argument("--out", default="bench/results", help="results folder, relative to the repo root")
    args = parser.parse_args(argv)
    args.index = args.index or [parse_index(DEFAULT_INDEX)]
    if args.base < 1 or args.queries < 1:
        parser.error("--base and --queries must be at least 1")
    if min(args.sizes) < max(args.base, LIMIT + 1):
        parser.error(f"every size must be at least --base and more than {LIMIT}")
    quiet_model_env()
    try:
        report = asyncio.run(run(args))
    except BenchError as exc:
        print(f"hnsw_recall: {exc}", file=sys.stderr)
        return 1
    out = REPO_ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "hnsw_recall.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"wrote {out / 'hnsw_recall.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
