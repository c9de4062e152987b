"""The scale benchmark runs end to end at a tiny size on a real stack: every cell measured, plans
and the span tree recorded, copied vectors left as the worker leaves them; it refuses a busy machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.common import cpu_use, machine_busy
from bench.scale import (
    BIG_WORKSPACE,
    FILTERS,
    MODES,
    RARE_TAG,
    SMALL_WORKSPACE,
    Corpus,
    CorpusSpec,
    copied_vectors,
    list_recall,
    nearest_memories,
    parse_args,
    summarise_recall,
)

ROOT = Path(__file__).resolve().parents[2]
SIZES = (800, 1600)
QUERIES = 4


def run_scale(out: Path, *extra: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.scale", "--out", str(out), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("scale")
    done = run_scale(
        out,
        "--sizes",
        ",".join(map(str, SIZES)),
        "--base",
        "100",
        "--small-workspace",
        "50",
        "--queries",
        str(QUERIES),
        "--as-of-queries",
        "2",
        "--warmup",
        "1",
        # Other tests and benchmarks share the machine: measure anyway, the figures are not judged here.
        "--force",
        "--busy-sample-s",
        "0.5",
        "--pg-setting",
        "shared_buffers=128MB",
        "--pg-setting",
        "maintenance_work_mem=128MB",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (out / "scale.png").stat().st_size > 10_000
    return json.loads((out / "scale.json").read_text())


def test_every_cell_is_measured_at_every_size_with_full_lists(report: dict[str, Any]) -> None:
    assert [s["notes"] for s in report["sizes"]] == list(SIZES)
    for size in report["sizes"]:
        assert sum(size["composition"].values()) == size["notes"]
        assert set(size["composition"]) >= {"agent", "locomo", "scifact"}
        counts = size["scope_counts"]
        assert counts["none"] + 50 == size["notes"]  # the small workspace's notes are not in the big one
        assert counts["workspace"] == 50
        assert 0 < counts["tag"] < counts["kind"] < counts["none"]
        assert 0 < counts["as_of"] < counts["none"]
        for mode in MODES:
            for f in FILTERS:
                cell = size["cells"][mode][f]
                assert cell["queries"] == (2 if f == "as_of" else QUERIES)
                assert 0 < cell["p50_ms"] <= cell["p95_ms"] <= cell["p99_ms"] <= cell["max_ms"]
                assert cell["degraded"] == cell["errors"] == 0
                if mode == "lexical":
                    assert cell["expected_results"] is None and cell["short_lists"] is None
                else:
                    # Every memory in scope is reachable by the semantic leg: a full list each time.
                    assert cell["expected_results"] == min(10, counts[f])
                    assert cell["short_lists"] == 0 and cell["results_min"] == cell["expected_results"]
    assert report["targets"] == []  # judged only at 100k and 1M
    assert report["machine"]["cpu_use_before"]["seconds"] == 0.5


def test_the_semantic_leg_is_checked_against_an_exact_search_under_each_filter(report: dict[str, Any]) -> None:
    for size in report["sizes"]:
        recall = size["semantic_recall_at_10"]
        assert set(recall) == set(FILTERS)
        for f, got in recall.items():
            assert got["queries"] == (2 if f == "as_of" else QUERIES)
            # A few thousand vectors: the graph walk finds (nearly) what comparing them all finds.
            assert 0.9 <= got["mean"] <= 1.0 and got["lowest"] <= got["mean"]
            # Never above the exact ten: what they miss, they miss for something farther.
            assert 0 <= got["cosine_shortfall_mean"] <= got["cosine_shortfall_most"] < 0.05
            assert 0 < got["exact_cosine_mean"] <= 1
            assert got["walks_hnsw"]["exact"] is False
        # The control: here the engine's as-of statement walks the graph (a few thousand vectors
        # are otherwise compared in full by the planner's choice), the exact one never does.
        assert recall["as_of"]["walks_hnsw"]["engine"] is True


def test_the_nearest_memories_are_counted_once_each_nearest_first() -> None:
    rows = [
        {"memory_id": "b", "score": 0.7},
        {"memory_id": "a", "score": 0.9},
        {"memory_id": "b", "score": 0.95},
        {"memory_id": "c", "score": 0.2},
        {"memory_id": "a", "score": 0.1},
    ]
    assert nearest_memories(rows, 10) == [("b", 0.95), ("a", 0.9), ("c", 0.2)]
    assert nearest_memories(rows, 2) == [("b", 0.95), ("a", 0.9)]


def test_a_found_list_is_scored_against_the_exact_one() -> None:
    exact = [("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6)]
    # The control: the exact list itself.
    assert list_recall(exact, exact) == (1.0, 0.0)
    # A near-tie swapped in costs little cosine; a row not found counts as cosine 0.
    recall, shortfall = list_recall([("a", 0.9), ("b", 0.8), ("c", 0.7), ("x", 0.59)], exact)
    assert recall == 0.75 and shortfall == pytest.approx(0.01 / 4)
    recall, shortfall = list_recall([("b", 0.8)], exact)
    assert recall == 0.25 and shortfall == pytest.approx((3.0 - 0.8) / 4)
    summary = summarise_recall([1.0, 0.75, 0.25], [0.0, 0.0025, 0.55])
    assert summary == {
        "queries": 3,
        "mean": 0.6667,
        "lowest": 0.25,
        "all_found": 1,
        "cosine_shortfall_mean": 0.1842,
        "cosine_shortfall_most": 0.55,
    }
    assert summarise_recall([], [])["mean"] is None


def test_copied_vectors_mixed_from_several_base_vectors_are_not_islands() -> None:
    base = np.random.default_rng(1).standard_normal((50, 384)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)

    def copies(parents: int) -> tuple[Any, Any]:
        vectors, main = copied_vectors(np.random.default_rng(2), base, 5000, 0.5, parents)
        assert vectors.shape == (5000, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
        return vectors, main

    def sibling_only_share(vectors: Any, main: Any) -> float:
        """The share of copies whose 16 nearest copies (an HNSW node's links) all share its main parent."""
        similar = vectors @ vectors.T
        np.fill_diagonal(similar, -2)
        nearest = np.argpartition(-similar, 16, axis=1)[:, :16]
        return float((main[nearest] == main[:, None]).all(axis=1).mean())

    one, one_main = copies(1)
    # The control: noisy copies of one vector each (cosine about 1 / sqrt(1 + 0.5²)) are islands.
    assert 0.88 < float((one * base[one_main]).sum(axis=1).mean()) < 0.91
    assert sibling_only_share(one, one_main) == 1.0
    three, three_main = copies(3)
    # Nearer their heaviest parent than to another base vector, but linked beyond its copies.
    cosine = three @ base.T
    assert (cosine.argmax(axis=1) == three_main).mean() > 0.95
    assert sibling_only_share(three, three_main) < 0.8


def test_vectors_beyond_the_base_are_copies_stored_as_the_worker_stores_them(report: dict[str, Any]) -> None:
    first, second = (s["step"] for s in report["sizes"])
    # The base was embedded by the model, the rest copied; the second size only copied.
    assert first["embedded_chunks"] > 0 and first["copied_chunks"] > 0
    assert second["embedded_chunks"] == 0 and second["copied_chunks"] > 0
    # Mixes of three (the default): nearest their heaviest parent, farther than a copy of one.
    assert 0.6 < first["copy_cosine_to_source"] < 0.85
    assert first["hnsw_build_s"] is not None
    for size in report["sizes"]:
        state = size["vector_state"]
        assert state["queue_rows"] == state["chunks_without_vector"] == state["indexed_mismatch"] == 0
        assert state["vectors"] == state["chunks"] and state["memories"] == size["notes"]
        assert size["relation_bytes"]["chunk_vectors_embedding"] > 0
        assert size["step"]["prewarmed_blocks"]["chunk_vectors_embedding"] > 0
        # The lexical leg's postings too: the index it reads them from (docs/lexical-bm25.md).
        assert size["relation_bytes"]["lexical_postings_pkey"] > 0
        assert size["step"]["prewarmed_blocks"]["lexical_postings_pkey"] > 0
    assert report["vectors"]["embedded_base_notes"] == 100
    assert report["postgres"]["shared_buffers"] == "128MB"


def test_each_legs_plan_is_saved_for_each_filter(report: dict[str, Any]) -> None:
    explain = report["sizes"][-1]["explain"]
    assert explain["query"]
    for f in FILTERS:
        plans = explain["plans"][f]
        for leg in ("lexical", "semantic"):
            assert "Execution Time" in plans[leg] and "Buffers" in plans[leg], (f, leg)
        assert "[query vector]" in plans["semantic"]
    # Each plan is of its own filter's statement: an as-of read goes through the versions' history.
    assert "memory_versions" in explain["plans"]["as_of"]["semantic"]
    assert "memory_versions" not in explain["plans"]["none"]["semantic"]
    assert "scale-small" in explain["plans"]["workspace"]["semantic"]


def test_one_hybrid_search_is_broken_down_by_span(report: dict[str, Any]) -> None:
    tree = report["span_breakdown"]["tree"]

    def names(node: dict[str, Any]) -> list[str]:
        return [node["name"], *(n for child in node.get("children", []) for n in names(child))]

    found = names(tree)
    assert tree["name"] == "POST /api/v1/search" and tree["kind"] == "SERVER"
    assert {"mnemo.search.lexical", "mnemo.search.semantic"} <= set(found)
    assert sum("SearchService/Search" in n for n in found) == 2  # the gateway's call and the service's answer
    assert tree["duration_ms"] >= max(c["duration_ms"] for c in tree["children"])


def test_a_busy_machine_is_refused_unless_forced(tmp_path: Path) -> None:
    refused = run_scale(
        tmp_path, "--sizes", "800", "--small-workspace", "50", "--max-busy", "0", "--busy-sample-s", "0.2", timeout=60
    )
    assert refused.returncode == 3 and "busy" in refused.stderr
    assert not (tmp_path / "scale.json").exists()
    # The same threshold, judged directly: anything at or above 0 is busy; an idle threshold of 1.0 never is.
    use = cpu_use(0.2)
    assert 0.0 <= use["busy"] <= 1.0 and 0.0 <= use["steal"] <= 1.0
    assert machine_busy(use, 0.0) and not machine_busy({**use, "steal": 0.0}, 1.01)


def test_the_corpus_is_the_same_for_the_same_seed_and_places_notes_as_asked() -> None:
    spec = CorpusSpec(seed=7, first_size=2000, small_notes=40, tag_share=0.05)
    corpus, again = Corpus(spec), Corpus(spec)
    notes = [corpus.note(i) for i in range(3000)]
    assert notes == [again.note(i) for i in range(3000)]
    other = Corpus(CorpusSpec(8, 2000, 40, 0.05))
    assert notes != [other.note(i) for i in range(3000)]
    workspaces = [n["workspace"] for n in notes]
    assert workspaces.count(SMALL_WORKSPACE) == 40 and set(workspaces) == {BIG_WORKSPACE, SMALL_WORKSPACE}
    assert all(w == BIG_WORKSPACE for w in workspaces[2000:])  # later growth stays in the big workspace
    tagged = sum(RARE_TAG in n["tags"] for n in notes)
    assert 0.02 * 3000 < tagged < 0.08 * 3000
    kinds = {n["kind"] for n in notes}
    assert {"note", "decision", "lesson", "import"} <= kinds
    assert len({n["idempotency_key"] for n in notes}) == 3000
    assert corpus.composition(3000) == {
        source: sum(corpus.source_of(i) == source for i in range(3000)) for source in corpus.composition(3000)
    }


def test_the_as_of_cells_time_the_other_cells_queries_unless_told() -> None:
    # The same sample in every cell: the as-of cells once timed the first 50 of 200, a sample of their own.
    assert parse_args([]).as_of_queries == 200
    assert parse_args(["--queries", "80"]).as_of_queries == 80
    assert parse_args(["--queries", "80", "--as-of-queries", "20"]).as_of_queries == 20  # the control
    assert parse_args(["--queries", "80", "--as-of-queries", "500"]).as_of_queries == 80
