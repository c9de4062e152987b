"""The SciFact benchmark reads BEIR files as given, keeps every judged document in a reduced run,
maps hits back to abstracts once each, and its BM25 baseline stems; its writes and MCP searches
work against a real stack."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from bench.common import BenchError
from bench.scifact import (
    DEEP_K,
    Document,
    Query,
    bm25_rankings,
    load_corpus,
    load_qrels,
    load_queries,
    memory_for_document,
    query_metrics,
    ranked_documents,
    search_all,
    select,
    write_corpus,
)
from mnemo_server.stack import Stack

ROOT = Path(__file__).resolve().parents[2]
SCIFACT = ROOT / "bench" / "data" / "scifact"


def write_qrels(path: Path, rows: list[str], header: str = "query-id\tcorpus-id\tscore") -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def test_qrels_are_read_as_graded_judgements_per_query(tmp_path: Path) -> None:
    qrels = load_qrels(write_qrels(tmp_path / "q.tsv", ["1\t10\t1", "1\t11\t2", "2\t10\t0"]))
    assert qrels == {"1": {"10": 1, "11": 2}, "2": {"10": 0}}


@pytest.mark.parametrize(
    ("rows", "header", "message"),
    [
        (["1\t10\t1", "1\t10\t2"], "query-id\tcorpus-id\tscore", "twice"),
        (["1\t10\tyes"], "query-id\tcorpus-id\tscore", "integer score"),
        (["1\t10\t1"], "query\tdoc\tscore", "header"),
    ],
)
def test_malformed_qrels_are_refused(tmp_path: Path, rows: list[str], header: str, message: str) -> None:
    with pytest.raises(BenchError, match=message):
        load_qrels(write_qrels(tmp_path / "q.tsv", rows, header))


def test_the_committed_train_split_loads_whole() -> None:
    corpus = load_corpus(SCIFACT / "corpus.jsonl")
    queries = load_queries(SCIFACT / "queries.jsonl")
    qrels = load_qrels(SCIFACT / "qrels" / "train.tsv")
    assert (len(corpus), len(queries), sum(len(j) for j in qrels.values())) == (5183, 807, 917)
    selection = select(corpus, queries, qrels, None, None)
    assert len(selection.queries) == 807 and len(selection.documents) == 5183
    assert all(isinstance(d.id, str) and d.title and d.text for d in corpus[:50])


def test_a_reduced_run_keeps_every_document_judged_for_its_queries() -> None:
    corpus = [Document(str(i), f"title {i}", f"text {i}") for i in range(10)]
    queries = [Query("q0", "zero"), Query("q1", "one"), Query("q2", "two"), Query("q3", "three")]
    # q1 has no relevant document (grade 0), so it is not a query of the run.
    qrels = {"q0": {"8": 1}, "q1": {"3": 0}, "q2": {"9": 2, "1": 1}, "q3": {"5": 1}}
    selection = select(corpus, queries, qrels, n_queries=2, n_docs=2)
    assert [q.id for q in selection.queries] == ["q0", "q2"]
    assert [d.id for d in selection.documents] == ["0", "1", "2", "8", "9"]  # judged 1, 8, 9; others 0, 2
    assert selection.qrels == {"q0": {"8": 1}, "q2": {"9": 2, "1": 1}}
    # Positive control: with no limits, everything is kept but the unjudged query.
    whole = select(corpus, queries, qrels, None, None)
    assert len(whole.documents) == 10 and [q.id for q in whole.queries] == ["q0", "q2", "q3"]


def test_qrels_naming_a_document_the_corpus_lacks_are_refused() -> None:
    with pytest.raises(BenchError, match="lacks"):
        select([Document("1", "t", "x")], [Query("q", "x")], {"q": {"404": 1}}, None, None)


def test_hits_map_to_corpus_ids_once_each_in_rank_order() -> None:
    ids = {"m1": "d1", "m2": "d2", "m3": "d1"}
    hits = [{"id": "m2"}, {"id": "m1"}, {"id": "other"}, {"id": "m3"}, {"id": "m1"}]
    assert ranked_documents(hits, ids) == ["d2", "d1", None]


def test_query_metrics_use_the_deep_ranking_only_for_recall_at_100() -> None:
    top = ["x", "a"]
    deep = ["x", "a", *[f"n{i}" for i in range(50)], "b"]
    figures = query_metrics(top, deep, {"a": 1, "b": 1, "c": 0})
    assert figures["recall@10"] == 0.5 and figures["recall@100"] == 1.0 and figures["mrr@10"] == 0.5
    assert "recall@100" not in query_metrics(top, None, {"a": 1})


def test_a_memory_carries_its_corpus_id_and_the_title_apart_from_the_abstract() -> None:
    item = memory_for_document(Document("4983", "Microstructural development.", "Alterations of white matter."))
    assert item["title"] == "Microstructural development." and item["content"] == "Alterations of white matter."
    assert item["source_uri"] == "scifact:4983" and item["metadata"] == {"corpus_id": "4983"}


def test_the_bm25_baseline_stems_and_leaves_out_documents_without_a_shared_term() -> None:
    documents = [
        Document("run", "Running", "Mice running on wheels live longer."),
        Document("diet", "Diet", "A diet low in salt lowers blood pressure."),
        Document("sleep", "Sleep", "Sleep deprivation impairs memory."),
    ]
    queries = [Query("q", "a mouse runs"), Query("none", "quantum chromodynamics")]
    stemmed, settings = bm25_rankings(documents, queries, DEEP_K, stem=True)
    assert stemmed == {"q": ["run"], "none": []}
    assert settings["k1"] == 1.5 and settings["b"] == 0.75 and settings["method"] == "lucene"
    assert settings["stemmer"].startswith("Snowball english") and settings["depth"] == 3
    # Positive control: without the stemmer "runs" does not match "running", and nothing is found.
    plain, plain_settings = bm25_rankings(documents, queries, DEEP_K, stem=False)
    assert plain["q"] == [] and plain_settings["stemmer"] is None


async def test_abstracts_written_in_a_batch_are_found_over_mcp_as_corpus_ids(hash_stack: Stack) -> None:
    documents = [
        Document("101", "Aspirin and platelets", "Aspirin irreversibly inhibits cyclooxygenase in platelets."),
        Document("102", "Telomeres", "Telomere shortening limits the replicative lifespan of fibroblasts."),
        Document("103", "Gut microbiota", "Commensal bacteria train the mucosal immune system."),
    ]
    queries = [Query("q1", "aspirin platelets cyclooxygenase"), Query("q2", "telomere fibroblasts lifespan")]
    workspace = f"scifact-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=60, trust_env=False) as client:
        ids, writes = await write_corpus(client, documents, workspace)
        assert sorted(ids.values()) == ["101", "102", "103"] and writes["memories"] == 3
        stored = (await client.get("/api/v1/memories", params={"workspace": workspace, "page_size": 10})).json()
        assert {m["source_uri"] for m in stored["memories"]} == {"scifact:101", "scifact:102", "scifact:103"}
    outcomes = await search_all(f"{hash_stack.base_url}/mcp", queries, ids, ["lexical"], True, workspace)
    lexical = {o.query.id: o for o in outcomes["lexical"]}
    assert lexical["q1"].ranked[0] == "101" and lexical["q2"].ranked[0] == "102"
    assert lexical["q1"].deep is not None and lexical["q1"].deep[0] == "101"
    assert all(o.latency_s > 0 and o.degraded == [] for o in lexical.values())
    assert None not in lexical["q1"].ranked + lexical["q2"].ranked  # every hit is one of the abstracts
