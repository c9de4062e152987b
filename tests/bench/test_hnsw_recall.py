"""The HNSW recall experiment runs end to end at a tiny size on a real PostgreSQL: every size,
copy scheme, index and ef_search measured against the exact answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_recall_is_measured_for_every_scheme_index_and_ef_search(tmp_path: Path) -> None:
    args = ["--sizes", "300,900", "--base", "150", "--queries", "6", "--parents", "1,3", "--ef-search", "1,100"]
    indexes = ["--index", "m=4,ef_construction=8", "--index", "m=16,ef_construction=64"]
    done = subprocess.run(
        [sys.executable, "-m", "bench.hnsw_recall", "--out", str(tmp_path), *args, *indexes],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "hnsw_recall.json").read_text())
    results = report["results"]
    assert [(r["size"], r["parents"], r["index"]) for r in results] == [
        (size, parents, index)
        for size in (300, 900)
        for parents in (1, 3)
        for index in ("m = 4, ef_construction = 8", "m = 16, ef_construction = 64")
    ]
    for r in results:
        assert r["build_s"] >= 0 and r["index_bytes"] > 0 and 0 < r["exact_cosine_mean"] <= 1
        wide = r["ef_search"]["100"]
        if r["index"].startswith("m = 16"):
            # ef_search 100 on a dense graph of at most 900 vectors finds (nearly) the exact ten,
            # and always ten. The sparse graph (m 4) may not: pgvector draws each vector's levels
            # at random, unseeded, and a scan of a graph that came out in pieces returned nine once.
            assert wide["mean"] >= 0.9 and wide["cosine_shortfall_mean"] < 0.01
            assert wide["short_lists"] == 0
        for got in r["ef_search"].values():
            assert 0 <= got["lowest"] <= got["mean"] <= 1 and got["all_found"] <= 6 == got["queries"]
            assert 0 <= got["cosine_shortfall_mean"] <= got["cosine_shortfall_most"]
        assert 0 <= wide["short_lists"] <= wide["queries"]
        # The control: ef_search 1 returns one row, a tenth of the list at most.
        assert r["ef_search"]["1"]["mean"] <= 0.1 and r["ef_search"]["1"]["short_lists"] == 6
    assert "recall@10" in done.stdout


def test_bad_arguments_are_refused_with_a_message() -> None:
    for args, message in (
        (["--index", "m=16,efc=64"], "expected m=N,ef_construction=N"),
        (["--ef-search", "0"], "at least 1"),
        (["--sizes", "5000", "--base", "6000"], "at least --base"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "bench.hnsw_recall", *args], cwd=ROOT, capture_output=True, text=True, check=False
        )
        assert done.returncode == 2 and message in done.stderr, done.stderr
