"""The agent-notes benchmark runs the SciFact machinery on another collection: its committed files
load whole and judge only notes and questions they hold, its notes keep their kinds when written,
and its names (workspace, tag, source, results) are its own."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx

from bench.agent_notes import AGENT_NOTES
from bench.scifact import (
    SCIFACT,
    Document,
    Query,
    data_file,
    load_corpus,
    load_qrels,
    load_queries,
    memory_for_document,
    ndcg_per_type,
    parse_args,
    search_all,
    select,
    write_corpus,
)
from mnemo_server.stack import Stack
from mnemo_wire.export_format import KINDS

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / AGENT_NOTES.default_data


def test_the_committed_collection_loads_whole_and_judges_what_it_holds() -> None:
    corpus = load_corpus(data_file(DATA, "corpus", AGENT_NOTES.split))
    queries = load_queries(data_file(DATA, "queries", AGENT_NOTES.split))
    qrels = load_qrels(data_file(DATA, "qrels", AGENT_NOTES.split))
    assert (len(corpus), len(queries)) == (200, 100)
    # The counts a run checks its data against (as SciFact's are).
    assert AGENT_NOTES.expected == {
        "documents": len(corpus),
        "queries": len(queries),
        "judgements": sum(len(judged) for judged in qrels.values()),
    }
    # select() refuses judgements of documents the corpus lacks; every question is judged.
    selection = select(corpus, queries, qrels, None, None)
    assert len(selection.queries) == 100 and len(selection.documents) == 200
    assert all(max(judged.values()) == 2 for judged in qrels.values())
    assert {q.id for q in queries} == set(qrels)
    # Every note is a kind the write path takes, and all three the collection uses are there.
    assert {d.kind for d in corpus} == {"note", "decision", "lesson"} <= set(KINDS)
    assert all(d.title and d.text for d in corpus)
    types = [q.type for q in queries]
    assert {t: types.count(t) for t in set(types)} == {"lexical": 25, "semantic": 35, "mixed": 25, "specific": 15}


def test_figures_per_question_type_average_each_rankers_queries_of_that_type() -> None:
    queries = [Query("a", "x", "lexical"), Query("b", "y", "lexical"), Query("c", "z", "semantic")]
    per_query = {
        "a": {"bm25": 1.0, "hybrid": 0.5},
        "b": {"bm25": 0.0, "hybrid": 1.0},
        "c": {"bm25": 0.2, "hybrid": 0.6},
    }
    assert ndcg_per_type(queries, per_query) == {
        "lexical": {"queries": 2, "bm25": 0.5, "hybrid": 0.75},
        "semantic": {"queries": 1, "bm25": 0.2, "hybrid": 0.6},
    }
    # Control: queries without types (SciFact's) give no breakdown at all.
    assert ndcg_per_type([Query("a", "x"), Query("c", "z")], per_query) == {}


def test_a_note_is_written_with_its_kind_and_the_collections_names() -> None:
    item = memory_for_document(Document("n007", "Pin numpy", "We pin numpy<2.", "decision"), AGENT_NOTES)
    assert item["kind"] == "decision" and item["source_uri"] == "agent-notes:n007" and item["tags"] == ["agent-notes"]
    # Control: a document without a kind (SciFact's) leaves it to the write path's default.
    plain = memory_for_document(Document("4983", "Title", "Text."))
    assert "kind" not in plain and plain["source_uri"] == "scifact:4983" and plain["tags"] == ["scifact"]


def test_the_command_line_defaults_to_the_collections_own_data() -> None:
    cfg = parse_args([], AGENT_NOTES)
    assert cfg.collection is AGENT_NOTES and cfg.data == DATA.resolve()
    assert data_file(cfg.data, "qrels", AGENT_NOTES.split).name == "test.tsv"
    # Control: SciFact's defaults stay SciFact's.
    scifact = parse_args([])
    assert scifact.collection is SCIFACT and scifact.data.name == "scifact"


async def test_notes_written_in_a_batch_keep_their_kinds_and_are_found_over_mcp(hash_stack: Stack) -> None:
    documents = [
        Document(
            "n1", "Ruff replaces black", "Decision: ruff formats and lints; black and flake8 are gone.", "decision"
        ),
        Document(
            "n2", "Pool exhaustion", "asyncpg TooManyConnectionsError means LEDGER_DB_POOL_MAX is too high.", "lesson"
        ),
        Document("n3", "Staging reset", "The staging database is reset nightly at 02:00 UTC.", None),
    ]
    queries = [Query("q1", "TooManyConnectionsError LEDGER_DB_POOL_MAX"), Query("q2", "ruff black flake8")]
    workspace = f"agent-notes-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=hash_stack.base_url, timeout=60, trust_env=False) as client:
        ids, writes = await write_corpus(client, documents, workspace, AGENT_NOTES)
        assert sorted(ids.values()) == ["n1", "n2", "n3"] and writes["memories"] == 3
        stored = (await client.get("/api/v1/memories", params={"workspace": workspace, "page_size": 10})).json()
    kinds = {m["source_uri"]: m["kind"] for m in stored["memories"]}
    assert kinds == {"agent-notes:n1": "decision", "agent-notes:n2": "lesson", "agent-notes:n3": "note"}
    outcomes = await search_all(f"{hash_stack.base_url}/mcp", queries, ids, ["lexical"], False, workspace)
    lexical = {o.query.id: o for o in outcomes["lexical"]}
    assert lexical["q1"].ranked[0] == "n2" and lexical["q2"].ranked[0] == "n1"
