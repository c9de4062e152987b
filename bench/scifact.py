"""SciFact retrieval benchmark: every abstract a memory, every claim an MCP search, scored per mode beside BM25.

The same machinery runs any collection in BEIR's format (corpus.jsonl, queries.jsonl, a qrels TSV)
that a `Collection` describes: bench/agent_notes.py runs the hand-written agent notes with it."""

from __future__ import annotations

import argparse
import asyncio
import csv
import hashlib
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.common import (
    DEFAULT_OUT,
    REPO_ROOT,
    BenchError,
    check,
    embedded_postgres,
    fmt,
    git_info,
    machine_info,
    mean,
    model_stack,
    mrr_at,
    ndcg_at,
    percentile,
    print_run_footer,
    quiet_model_env,
    recall_at,
    recorded_env,
    stack_env,
    wait_embedded,
)

MODES = ("lexical", "semantic", "hybrid")
TOP_K = 10
# The most results one search returns (MNEMO_SEARCH_MAX_LIMIT's default): recall is measured that deep.
DEEP_K = 100
BATCH_SIZE = 500
WARMUP_QUERIES = 3
EMBED_PROGRESS_S = 15.0
METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")
Qrels = dict[str, dict[str, int]]


@dataclass(frozen=True)
class Collection:
    """What one BEIR-format collection's run needs to know of it: its names (the workspace, the
    memories' tag and `source_uri` prefix, the results' file names), where its files are, what it
    should hold, what its documents and queries are called in the printout, and its targets."""

    name: str
    title: str
    split: str
    default_data: str
    results: str
    document_word: str
    query_word: str
    # The committed files' counts: other counts mean other data.
    expected: Mapping[str, int] | None = None
    # Figures quoted elsewhere (not measured here), printed beside the run's for comparison.
    quoted_ndcg10: Mapping[str, float] | None = None
    target_hybrid_ndcg10: float | None = None

    @property
    def source_prefix(self) -> str:
        return f"{self.name}:"


SCIFACT = Collection(
    name="scifact",
    title="SciFact",
    split="train",
    default_data="bench/data/scifact",
    results="scifact",
    document_word="abstract",
    query_word="claim",
    expected={"documents": 5183, "queries": 807, "judgements": 917},
    # nDCG@10 on SciFact through the MCP surface as quoted in the "search engine v2" issue.
    quoted_ndcg10={"lexical": 0.46, "semantic": 0.66, "hybrid": 0.65, "plain BM25": 0.66},
    target_hybrid_ndcg10=0.70,
)


# -- data -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str
    # The memory kind to write it as (a collection of agent notes has decisions and lessons);
    # None: the write path's default.
    kind: str | None = None


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    # The kind of question it is (`type` in the file), for figures per type; None: not given.
    type: str | None = None


@dataclass(frozen=True)
class Selection:
    """What one run writes and asks: its documents, its queries, and their judgements."""

    documents: list[Document]
    queries: list[Query]
    qrels: Qrels


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise BenchError(f"{path}:{number} is not valid JSON: {exc}") from None
    return rows


def load_corpus(path: Path) -> list[Document]:
    documents = [
        Document(str(row["_id"]), row.get("title", ""), row["text"], row.get("kind")) for row in read_jsonl(path)
    ]
    if len({d.id for d in documents}) != len(documents):
        raise BenchError(f"{path}: document ids are not unique")
    return documents


def load_queries(path: Path) -> list[Query]:
    return [Query(str(row["_id"]), row["text"], row.get("type")) for row in read_jsonl(path)]


def load_qrels(path: Path) -> Qrels:
    """BEIR's qrels TSV, a header `query-id corpus-id score` and a judgement per row: query id ->
    corpus id -> graded relevance, as given."""
    qrels: Qrels = {}
    with path.open(encoding="utf-8", newline="") as lines:
        rows = csv.reader(lines, delimiter="\t")
        header = next(rows, None)
        if header != ["query-id", "corpus-id", "score"]:
            raise BenchError(f"{path}: header {header!r} is not query-id, corpus-id, score")
        for number, row in enumerate(rows, start=2):
            if not row:
                continue
            try:
                query_id, corpus_id, score = row
                grade = int(score)
            except ValueError:
                raise BenchError(f"{path}:{number}: {row!r} is not query-id, corpus-id, integer score") from None
            judgements = qrels.setdefault(query_id, {})
            if corpus_id in judgements:
                raise BenchError(f"{path}:{number}: query {query_id} judges document {corpus_id} twice")
            judgements[corpus_id] = grade
    return qrels


def select(
    corpus: Sequence[Document], queries: Sequence[Query], qrels: Qrels, n_queries: int | None, n_docs: int | None
) -> Selection:
    """The queries with at least one relevant document, the first n_queries of them in file order;
    the documents: all of the corpus, or with n_docs every document judged for a chosen query plus
    the first n_docs others in corpus order, so each chosen query keeps all its relevant documents."""
    judged = [q for q in queries if any(g > 0 for g in qrels.get(q.id, {}).values())]
    chosen = judged[:n_queries] if n_queries is not None else judged
    chosen_qrels = {q.id: qrels[q.id] for q in chosen}
    known = {d.id for d in corpus}
    missing = sorted({doc for judgements in chosen_qrels.values() for doc in judgements} - known)
    if missing:
        raise BenchError(f"the qrels judge {len(missing)} documents the corpus lacks, e.g. {missing[:5]}")
    if n_docs is None:
        documents = list(corpus)
    else:
        needed = {doc for judgements in chosen_qrels.values() for doc in judgements}
        documents, others = [], 0
        for document in corpus:
            if document.id in needed:
                documents.append(document)
            elif others < n_docs:
                documents.append(document)
                others += 1
    return Selection(documents, chosen, chosen_qrels)


def memory_for_document(document: Document, collection: Collection = SCIFACT) -> dict[str, Any]:
    """The batch item for one document: the representation under test, kept in one place. The
    title is the memory's title (Mnemo weights it above the body and embeds it as each chunk's
    context), the text its content, the kind the document's when it has one."""
    item = {
        "title": document.title,
        "content": document.text,
        "source_uri": collection.source_prefix + document.id,
        "tags": [collection.name],
        "metadata": {"corpus_id": document.id},
    }
    if document.kind is not None:
        item["kind"] = document.kind
    return item


def ranked_documents(hits: Sequence[Mapping[str, Any]], ids: Mapping[str, str]) -> list[str | None]:
    """Search hits as corpus ids in rank order, each document once, where it first appears (so a
    memory returned for two chunks counts once); a hit that is none of the benchmark's memories
    stays in the ranking as None."""
    seen: set[str] = set()
    ranked: list[str | None] = []
    for hit in hits:
        document = ids.get(hit["id"])
        if document is not None:
            if document in seen:
                continue
            seen.add(document)
        ranked.append(document)
    return ranked


# -- metrics ----------------------------------------------------------------------------------


def query_metrics(
    ranked: Sequence[str | None], deep: Sequence[str | None] | None, judged: Mapping[str, int]
) -> dict[str, float]:
    """One query's figures, BEIR's way: graded nDCG@10, and recall and MRR over the documents
    judged relevant (grade > 0); recall@100 from the deep ranking when there is one."""
    relevant = {doc for doc, grade in judged.items() if grade > 0}
    figures = {
        "ndcg@10": ndcg_at(ranked, judged, TOP_K),
        "recall@10": recall_at(ranked, relevant, TOP_K),
        "mrr@10": mrr_at(ranked, relevant, TOP_K),
    }
    if deep is not None:
        figures["recall@100"] = recall_at(deep, relevant, DEEP_K)
    return figures


def average(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Each figure's mean over the queries (a figure no query has is left out)."""
    return {
        name: mean([figures[name] for figures in per_query.values() if name in figures])
        for name in METRICS
        if any(name in figures for figures in per_query.values())
    }


@dataclass
class Outcome:
    """One query asked in one mode."""

    query: Query
    mode: str
    ranked: list[str | None]
    latency_s: float
    degraded: list[str]
    relaxed: bool
    deep: list[str | None] | None = None


def summarise_mode(outcomes: list[Outcome], qrels: Qrels) -> dict[str, Any]:
    per_query = {o.query.id: query_metrics(o.ranked, o.deep, qrels[o.query.id]) for o in outcomes}
    latencies_ms = [o.latency_s * 1000 for o in outcomes]
    return {
        "queries": len(outcomes),
        **average(per_query),
        "latency_ms": {
            "p50": percentile(latencies_ms, 50),
            "p95": percentile(latencies_ms, 95),
            "mean": mean(latencies_ms),
            "max": max(latencies_ms) if latencies_ms else float("nan"),
        },
        "degraded_responses": sum(1 for o in outcomes if o.degraded),
        "lexical_relaxed_responses": sum(1 for o in outcomes if o.relaxed),
        "short_result_lists": sum(1 for o in outcomes if len(o.ranked) < TOP_K),
        "foreign_hits": sum(1 for o in outcomes for doc in o.ranked if doc is None),
    }


# -- the BM25 baseline ------------------------------------------------------------------------


def bm25_rankings(
    documents: Sequence[Document], queries: Sequence[Query], k: int, stem: bool = True
) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """A plain BM25 (bm25s) over the same documents: query id -> corpus ids, best first, and the
    settings it ran with. Documents that share no term with the query (score 0) are left out."""
    import bm25s
    import Stemmer
    from bm25s.stopwords import STOPWORDS_EN

    stemmer = Stemmer.Stemmer("english") if stem else None
    started = time.perf_counter()
    corpus_tokens = bm25s.tokenize(
        [f"{d.title} {d.text}" for d in documents], stopwords="english", stemmer=stemmer, show_progress=False
    )
    retriever = bm25s.BM25()  # the library's defaults: Lucene's BM25, k1 1.5, b 0.75
    retriever.index(corpus_tokens, show_progress=False)
    indexed_s = time.perf_counter() - started
    query_tokens = bm25s.tokenize([q.text for q in queries], stopwords="english", stemmer=stemmer, show_progress=False)
    depth = min(k, len(documents))
    rows, scores = retriever.retrieve(query_tokens, k=depth, show_progress=False, n_threads=1)
    rankings = {
        query.id: [documents[int(i)].id for i, score in zip(row, row_scores, strict=True) if score > 0]
        for query, row, row_scores in zip(queries, rows, scores, strict=True)
    }
    settings = {
        "library": f"bm25s {bm25s.__version__}",
        "method": retriever.method,
        "k1": retriever.k1,
        "b": retriever.b,
        "idf": retriever.idf_method or retriever.method,
        "document_text": "title + ' ' + text",
        "tokenizer": "bm25s.tokenize: lower-cased, tokens r'(?u)\\b\\w\\w+\\b' (two or more word characters)",
        "stopwords": f"bm25s English list ({len(STOPWORDS_EN)} words)",
        "stemmer": f"Snowball english (PyStemmer {version('PyStemmer')})" if stem else None,
        "zero_score_documents": "left out of the ranking",
        "depth": depth,
    }
    timings = {"index_seconds": indexed_s, "all_queries_seconds": time.perf_counter() - started - indexed_s}
    return rankings, settings | {"timings_in_process": timings}


def summarise_bm25(rankings: Mapping[str, list[str]], qrels: Qrels) -> dict[str, Any]:
    """BM25's figures; its recall@100 comes free, so it is there even when Mnemo's is not measured."""
    per_query = {qid: query_metrics(ranked[:TOP_K], ranked, qrels[qid]) for qid, ranked in rankings.items()}
    return {"queries": len(per_query), **average(per_query)}


# -- the run ----------------------------------------------------------------------------------


@dataclass
class RunConfig:
    data: Path
    queries: int | None
    docs: int | None
    modes: tuple[str, ...]
    deep: bool
    out: Path
    log_level: str
    collection: Collection = SCIFACT


async def write_corpus(
    client: Any, documents: Sequence[Document], workspace: str = SCIFACT.name, collection: Collection = SCIFACT
) -> tuple[dict[str, str], dict[str, Any]]:
    """Every document through `POST /api/v1/memories:batch` into one new workspace, then waits
    for its embeddings: memory id -> corpus id, and the timings."""
    check(await client.post("/api/v1/workspaces", json={"name": workspace}), "register workspace")
    ids: dict[str, str] = {}
    started = time.perf_counter()
    for start in range(0, len(documents), BATCH_SIZE):
        batch = documents[start : start + BATCH_SIZE]
        items = [memory_for_document(d, collection) for d in batch]
        body = check(
            await client.post("/api/v1/memories:batch", json={"workspace": workspace, "items": items}), "batch write"
        )
        for document, result in zip(batch, body["results"], strict=True):
            if result.get("outcome") != "created":
                raise BenchError(f"write of document {document.id} gave {json.dumps(result)[:300]}")
            ids[result["memory"]["id"]] = document.id
        done = start + len(batch)
        print(f"  {done}/{len(documents)} written ({done / (time.perf_counter() - started):.0f}/s)", flush=True)
    written_s = time.perf_counter() - started
    print(f"  written in {written_s:.1f} s; waiting for embeddings (minutes for the whole corpus)", flush=True)
    status = await wait_embedded(client, workspace, every_s=EMBED_PROGRESS_S)
    embedded_s = time.perf_counter() - started
    if int(status["memories"]) != len(documents):
        raise BenchError(f"status reports {status['memories']} memories; {len(documents)} were written")
    timings = {
        "memories": len(documents),
        "chunks": int(status["chunks_embedded"]),
        "batch_size": BATCH_SIZE,
        "write_seconds": written_s,
        "memories_per_s_committed": len(documents) / written_s,
        "seconds_to_all_embedded": embedded_s,
        "memories_per_s_embedded": len(documents) / embedded_s,
        "embedding_lag_after_last_write_s": embedded_s - written_s,
    }
    return ids, timings


async def search_all(
    mcp_url: str,
    queries: Sequence[Query],
    ids: Mapping[str, str],
    modes: Sequence[str],
    deep: bool,
    workspace: str = SCIFACT.name,
) -> dict[str, list[Outcome]]:
    """Every query in every mode through the MCP tool `memory_search` (the official client over
    streamable HTTP), top 10, timed; with `deep`, once more at limit 100 for recall@100, not timed.
    The modes of one query run back to back, so any drift in machine load hits all alike."""
    from mcp.client.client import Client
    from mcp.types import TextContent

    async with Client(mcp_url) as mcp:

        async def search(query: Query, mode: str, limit: int) -> tuple[dict[str, Any], float]:
            arguments = {"query": query.text, "mode": mode, "limit": limit, "workspace": workspace}
            t0 = time.perf_counter()
            result = await mcp.call_tool("memory_search", arguments)
            latency = time.perf_counter() - t0
            text = "".join(part.text for part in result.content if isinstance(part, TextContent))
            if result.is_error:
                raise BenchError(f"{mode} search of query {query.id} failed: {text[:500]}")
            return json.loads(text), latency

        # The first queries pay for cold caches and lazy initialisation; they are not measured.
        for query in queries[:WARMUP_QUERIES]:
            for mode in modes:
                await search(query, mode, TOP_K)

        outcomes: dict[str, list[Outcome]] = {mode: [] for mode in modes}
        started = time.perf_counter()
        for done, query in enumerate(queries, start=1):
            for mode in modes:
                body, latency = await search(query, mode, TOP_K)
                ranked = ranked_documents(body["results"], ids)
                outcomes[mode].append(Outcome(query, mode, ranked, latency, body["degraded"], body["lexical_relaxed"]))
            if deep:
                for mode in modes:
                    body, _ = await search(query, mode, DEEP_K)
                    outcomes[mode][-1].deep = ranked_documents(body["results"], ids)
            if done % 50 == 0 or done == len(queries):
                elapsed = time.perf_counter() - started
                left = elapsed / done * (len(queries) - done)
                print(f"  {done}/{len(queries)} queries ({done / elapsed:.1f}/s, about {left:.0f} s left)", flush=True)
    return outcomes


async def run_benchmark(cfg: RunConfig, selection: Selection, dsn: str) -> dict[str, Any]:
    import httpx

    c = cfg.collection
    env = stack_env(dsn)
    async with model_stack(env) as (stack, embedder, load_s):
        async with httpx.AsyncClient(base_url=stack.base_url, timeout=300.0, trust_env=False) as client:
            words = f"{c.document_word}s"
            print(f"Writing {len(selection.documents)} {words} in batches of {BATCH_SIZE} …", flush=True)
            ids, writes = await write_corpus(client, selection.documents, c.name, c)
            print(
                f"  {writes['memories_per_s_committed']:.1f} memories/s committed, "
                f"{writes['memories_per_s_embedded']:.1f} memories/s fully embedded ({writes['chunks']} chunks)",
                flush=True,
            )
        searches = len(cfg.modes) * (2 if cfg.deep else 1)
        print(
            f"Searching {len(selection.queries)} {c.query_word}s x {searches} searches over MCP "
            f"({', '.join(cfg.modes)}; top {TOP_K}{f', then top {DEEP_K}' if cfg.deep else ''}) …",
            flush=True,
        )
        outcomes = await search_all(f"{stack.base_url}/mcp", selection.queries, ids, cfg.modes, cfg.deep, c.name)
    return {
        "model_load_seconds": load_s,
        "writes": writes,
        "outcomes": outcomes,
        "stack_env": recorded_env(env),
        "embedding_model": embedder.model,
    }


# -- reporting --------------------------------------------------------------------------------


def build_report(
    cfg: RunConfig,
    selection: Selection,
    full: dict[str, int],
    run: dict[str, Any],
    baselines: dict[str, tuple[dict[str, list[str]], dict[str, Any]]],
    duration_s: float,
) -> dict[str, Any]:
    modes = {mode: summarise_mode(run["outcomes"][mode], selection.qrels) for mode in cfg.modes}
    bm25 = {
        name: {"settings": settings, **summarise_bm25(rankings, selection.qrels)}
        for name, (rankings, settings) in baselines.items()
    }
    per_query: dict[str, dict[str, float]] = {
        q.id: {name: ndcg_at(rankings[q.id], selection.qrels[q.id], TOP_K) for name, (rankings, _) in baselines.items()}
        for q in selection.queries
    }
    for mode in cfg.modes:
        for o in run["outcomes"][mode]:
            per_query[o.query.id][mode] = ndcg_at(o.ranked, selection.qrels[o.query.id], TOP_K)
    c = cfg.collection
    verdicts: dict[str, bool] = {}
    if "lexical" in modes:
        verdicts["lexical_ndcg@10_at_least_bm25"] = modes["lexical"]["ndcg@10"] >= bm25["bm25"]["ndcg@10"]
    if "hybrid" in modes:
        if c.target_hybrid_ndcg10 is not None:
            floor = c.target_hybrid_ndcg10
            verdicts[f"hybrid_ndcg@10_at_least_{floor:.2f}"] = modes["hybrid"]["ndcg@10"] >= floor
        legs = [modes[m]["ndcg@10"] for m in ("lexical", "semantic") if m in modes]
        if len(legs) == 2:
            verdicts["hybrid_ndcg@10_above_both_legs"] = modes["hybrid"]["ndcg@10"] > max(legs)
    files = {name: data_file(cfg.data, name, c.split) for name in ("corpus", "queries", "qrels")}
    per_type = ndcg_per_type(selection.queries, per_query)
    target: dict[str, Any] = {"lexical_ndcg@10": "at least baselines.bm25's"}
    if c.target_hybrid_ndcg10 is not None:
        target["hybrid_ndcg@10"] = c.target_hybrid_ndcg10
    return {
        "benchmark": f"{c.name}-retrieval",
        "collection": {"name": c.name, "title": c.title, "documents": c.document_word, "queries": c.query_word},
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": {},
        "machine": machine_info(),
        "config": {
            "data": str(cfg.data),
            "split": c.split,
            "data_sha256": {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in files.items()},
            "queries_limit": cfg.queries,
            "docs_limit": cfg.docs,
            "modes": list(cfg.modes),
            "top_k": TOP_K,
            "recall_depth": DEEP_K if cfg.deep else None,
            "batch_size": BATCH_SIZE,
            "warmup_queries": WARMUP_QUERIES,
            "search_surface": "MCP tool memory_search, official mcp client over streamable HTTP, one call at a time",
            "embedding_model": run["embedding_model"],
            "stack_env": run["stack_env"],
            "representation": f"one memory per {c.document_word}: title = document title, content = document text, "
            f"kind = the document's (when given), source_uri '{c.source_prefix}<corpus id>', tags [{c.name}], "
            "metadata {corpus_id}; one workspace",
        },
        "dataset": {
            "documents": len(selection.documents),
            "queries": len(selection.queries),
            "judgements": sum(len(j) for j in selection.qrels.values()),
            "relevant_per_query": mean([sum(1 for g in j.values() if g > 0) for j in selection.qrels.values()]),
            "in_files": full,
            "whole_split": cfg.queries is None and cfg.docs is None,
        },
        "model_load_seconds": run["model_load_seconds"],
        "writes": run["writes"],
        "modes": modes,
        "baselines": bm25,
        "issue_ndcg@10": dict(c.quoted_ndcg10 or {}),
        "target": target,
        "verdicts": verdicts,
        "per_query_ndcg@10": per_query,
        **({"per_type_ndcg@10": per_type} if per_type else {}),
        "duration_s": duration_s,
    }


def ndcg_per_type(queries: Sequence[Query], per_query: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """Each ranker's mean nDCG@10 over the queries of each type, with their count: empty when the
    queries have no types."""
    types = sorted({q.type for q in queries if q.type is not None})
    figures: dict[str, Any] = {}
    for kind in types:
        chosen = [per_query[q.id] for q in queries if q.type == kind]
        rankers = chosen[0].keys()
        figures[kind] = {"queries": len(chosen), **{r: mean([f[r] for f in chosen]) for r in rankers}}
    return figures


def print_report(report: dict[str, Any]) -> None:
    modes, baselines, data = report["modes"], report["baselines"], report["dataset"]
    c, split = report["collection"], report["config"]["split"]
    line = "-" * 78
    print()
    print(f"{c['title']} retrieval benchmark ({split} split; {c['queries']}s searched over MCP)")
    print(line)
    print(f"documents: {data['documents']}  {c['queries']}s: {data['queries']}  judgements: {data['judgements']}")
    print(f"{'ranker':<17}{'nDCG@10':>9}{'R@10':>8}{'R@100':>8}{'MRR@10':>8}{'p50 ms':>9}{'p95 ms':>9}")
    rows = [(name, b, None) for name, b in baselines.items()] + [(m, f, f["latency_ms"]) for m, f in modes.items()]
    for name, m, latency in rows:
        p50 = fmt(latency["p50"], 1) if latency else "-"
        p95 = fmt(latency["p95"], 1) if latency else "-"
        print(
            f"{name:<17}{fmt(m['ndcg@10']):>9}{fmt(m['recall@10']):>8}{fmt(m.get('recall@100')):>8}"
            f"{fmt(m['mrr@10']):>8}{p50:>9}{p95:>9}"
        )
    if "per_type_ndcg@10" in report:
        rankers = [*baselines, *modes]
        print(f"nDCG@10 by {c['queries']} type")
        print(f"{'':<17}" + "".join(f"{r:>17}" for r in rankers))
        for kind, figures in report["per_type_ndcg@10"].items():
            label = f"{kind} ({figures['queries']})"
            print(f"{label:<17}" + "".join(f"{fmt(figures[r]):>17}" for r in rankers))
    for name, b in baselines.items():
        settings = b["settings"]
        print(
            f"{name}: {settings['library']}, {settings['method']} k1={settings['k1']} b={settings['b']}, "
            f"{settings['stopwords']}, stemmer {settings['stemmer']}"
        )
    writes = report["writes"]
    print(
        f"writes: {writes['memories']} memories, {writes['memories_per_s_committed']:.1f}/s committed, "
        f"all embedded after {writes['seconds_to_all_embedded']:.0f} s ({writes['chunks']} chunks)"
    )
    if report["issue_ndcg@10"]:
        issue = ", ".join(f"{k} {v:g}" for k, v in report["issue_ndcg@10"].items())
        print(f"nDCG@10 quoted in the issue (not measured here): {issue}")
    for name, met in report["verdicts"].items():
        print(f"  target {name}: {'met' if met else 'NOT met'}")
    if not data["whole_split"]:
        print("  (a reduced run: a smaller corpus is easier; compare only runs with the same --queries and --docs)")
    print(line)
    notes = []
    for mode, m in modes.items():
        if m["degraded_responses"]:
            notes.append(f"{mode}: {m['degraded_responses']} degraded responses")
        if m["foreign_hits"]:
            notes.append(f"{mode}: {m['foreign_hits']} hits that are not {c['documents']}s")
    if notes:
        print("WARNING: " + "; ".join(notes))
    print(f"search latency: client-observed wall time of each MCP tool call (top {TOP_K}), one at a time")
    print_run_footer(report)


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rankers = {**report["baselines"], **report["modes"]}
    labels = {"ndcg@10": "nDCG@10", "recall@10": "R@10", "recall@100": "R@100", "mrr@10": "MRR@10"}
    fig, ax = plt.subplots(figsize=(10, 5))
    width = 0.8 / len(rankers)
    for i, (name, figures) in enumerate(rankers.items()):
        xs = [j + (i - (len(rankers) - 1) / 2) * width for j in range(len(METRICS))]
        bars = ax.bar(xs, [figures.get(m, float("nan")) for m in METRICS], width, label=name)
        ax.bar_label(bars, fmt="%.3f", fontsize=7, padding=2)
    if "hybrid_ndcg@10" in report["target"]:
        target = report["target"]["hybrid_ndcg@10"]
        ax.axhline(target, color="tab:red", linestyle="-", linewidth=1, label="target hybrid nDCG@10")
    ax.set_xticks(range(len(METRICS)), [labels[m] for m in METRICS])
    ax.set_ylim(0, 1.15)
    data, c = report["dataset"], report["collection"]
    ax.set_title(
        f"{c['title']} {report['config']['split']}: {data['queries']} {c['queries']}s "
        f"over {data['documents']} {c['documents']}s"
    )
    ax.legend(fontsize=8, loc="upper center", ncol=len(rankers) + 1)
    latency = ", ".join(f"{m} p50 {f['latency_ms']['p50']:.0f} ms" for m, f in report["modes"].items())
    commit = (report["git"]["commit"] or "")[:12]
    fig.suptitle(f"Mnemo {commit}  ·  MCP search {latency}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- entry point ------------------------------------------------------------------------------


def data_file(root: Path, name: str, split: str = SCIFACT.split) -> Path:
    return {
        "corpus": root / "corpus.jsonl",
        "queries": root / "queries.jsonl",
        "qrels": root / "qrels" / f"{split}.tsv",
    }[name]


def parse_args(argv: list[str], collection: Collection = SCIFACT) -> RunConfig:
    c = collection
    parser = argparse.ArgumentParser(
        prog=f"mnemo bench {c.results}",
        description=f"Document retrieval on {c.title} ({c.split}) through a whole in-process Mnemo (MCP), beside BM25.",
    )
    parser.add_argument(
        "--data", default=c.default_data, help=f"BEIR folder; relative paths are from the repo root ({c.default_data})"
    )
    parser.add_argument(
        "--queries", type=int, default=None, metavar="N", help=f"only the first N judged {c.query_word}s"
    )
    parser.add_argument(
        "--docs",
        type=int,
        default=None,
        metavar="N",
        help=f"only the {c.document_word}s judged for the chosen {c.query_word}s plus the first N others "
        "(default: the whole corpus)",
    )
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="search modes (default: all)")
    parser.add_argument(
        "--no-deep",
        action="store_true",
        help=f"skip the second search per {c.query_word} at limit {DEEP_K} (no recall@100)",
    )
    parser.add_argument(
        "--out", default=DEFAULT_OUT, help=f"results directory; relative paths are from the repo root ({DEFAULT_OUT})"
    )
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    if args.queries is not None and args.queries < 1:
        parser.error("--queries must be at least 1")
    if args.docs is not None and args.docs < 0:
        parser.error("--docs must not be negative")
    return RunConfig(
        data=(REPO_ROOT / args.data).resolve(),  # an absolute --data stays as given
        queries=args.queries,
        docs=args.docs,
        modes=tuple(m for m in MODES if m in args.modes),
        deep=not args.no_deep,
        out=(REPO_ROOT / args.out).resolve(),
        log_level=args.log_level,
        collection=c,
    )


def main(argv: list[str] | None = None, collection: Collection = SCIFACT) -> int:
    c = collection
    cfg = parse_args(sys.argv[1:] if argv is None else list(argv), c)
    started = time.perf_counter()
    files = {name: data_file(cfg.data, name, c.split) for name in ("corpus", "queries", "qrels")}
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        print(
            f"{c.results}: data not found: {', '.join(missing)}\n  pass --data DIR (see {c.default_data}/README.md)",
            file=sys.stderr,
        )
        return 2
    quiet_model_env()
    # Other work on a small machine skews every timing: record how busy it was before we started.
    load_before = os.getloadavg()
    git = git_info()
    try:
        corpus = load_corpus(files["corpus"])
        queries = load_queries(files["queries"])
        qrels = load_qrels(files["qrels"])
        full = {"documents": len(corpus), "queries": len(queries), "judgements": sum(len(j) for j in qrels.values())}
        if c.expected is not None and cfg.data == (REPO_ROOT / c.default_data).resolve():
            verdict = "as expected" if full == c.expected else f"UNEXPECTED (committed data: {c.expected})"
            print(f"{c.title} files: {full}: {verdict}", flush=True)
        selection = select(corpus, queries, qrels, cfg.queries, cfg.docs)
        if not selection.queries:
            raise BenchError(f"no judged {c.query_word}s to ask")
        print(
            f"Run: {len(selection.documents)} {c.document_word}s, {len(selection.queries)} {c.query_word}s", flush=True
        )

        print(f"BM25 baselines (bm25s) over the same {c.document_word}s …", flush=True)
        # Stemmed, as Mnemo's full-text index is: the floor its lexical leg is held to. Without the
        # stemmer (bm25s's default tokenizing) for reference: the issue's "plain BM25" figure.
        baselines = {
            "bm25": bm25_rankings(selection.documents, selection.queries, DEEP_K, stem=True),
            "bm25_no_stemmer": bm25_rankings(selection.documents, selection.queries, DEEP_K, stem=False),
        }

        from mnemo_platform import configure_logging

        configure_logging(cfg.log_level, "auto")
        print("Starting embedded PostgreSQL …", flush=True)
        with embedded_postgres() as dsn:
            run = asyncio.run(run_benchmark(cfg, selection, dsn))
        report = build_report(cfg, selection, full, run, baselines, time.perf_counter() - started)
        report["git"] = git
        report["machine"]["load_average_before"] = [round(x, 2) for x in load_before]
        report["machine"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]

        cfg.out.mkdir(parents=True, exist_ok=True)
        results, picture = cfg.out / f"{c.results}.json", cfg.out / f"{c.results}.png"
        results.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        plot(report, picture)
        print_report(report)
        print(f"results: {results}, {picture}")
    except BenchError as exc:
        print(f"{c.results}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{c.results}: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
