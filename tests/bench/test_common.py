"""The shared ranking metrics give the figures worked out by hand, graded and binary."""

from __future__ import annotations

import math

import pytest

from bench.common import mrr_at, ndcg_at, percentile, recall_at


def test_graded_ndcg_matches_a_hand_computed_example() -> None:
    gains = {"a": 2, "b": 1, "c": 1, "z": 0}
    ranked = ["x", "b", "a", None, "z"]
    # DCG: b at rank 2, a at rank 3 -> 1/log2(3) + 2/log2(4) = 0.630930 + 1.0
    # ideal: a, b, c -> 2/log2(2) + 1/log2(3) + 1/log2(4) = 2.0 + 0.630930 + 0.5
    assert ndcg_at(ranked, gains, 10) == pytest.approx(1.630930 / 3.130930, abs=1e-6)
    assert ndcg_at(["a", "b", "c"], gains, 10) == pytest.approx(1.0)  # positive control: the ideal order
    assert ndcg_at(["x", "y"], gains, 10) == 0.0


def test_ndcg_counts_only_the_top_k_and_its_ideal_is_cut_at_k() -> None:
    gains = dict.fromkeys("abc", 1)
    # Only rank 1 counts at k=1, and the ideal holds one document, not three.
    assert ndcg_at(["a", "b", "c"], gains, 1) == 1.0
    assert ndcg_at(["x", "a"], gains, 1) == 0.0
    # Binary, two relevant: hits at ranks 1 and 3 -> (1 + 1/log2(4)) / (1 + 1/log2(3)).
    assert ndcg_at(["a", "x", "b"], dict.fromkeys("ab", 1), 10) == pytest.approx(1.5 / (1 + 1 / math.log2(3)))


def test_recall_and_mrr_at_k() -> None:
    relevant = {"a", "b"}
    assert recall_at(["x", "a", "y", "b"], relevant, 2) == 0.5
    assert recall_at(["x", "a", "y", "b"], relevant, 4) == 1.0
    assert mrr_at(["x", "y", "a"], relevant, 10) == pytest.approx(1 / 3)
    assert mrr_at(["x", "y", "a"], relevant, 2) == 0.0
    assert mrr_at(["b"], relevant, 10) == 1.0


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([5.0], 95) == 5.0
    assert math.isnan(percentile([], 50))
