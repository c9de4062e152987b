"""Fusion rescales each leg's scores to [0, 1] and adds them by weight (mnemo_search.ranking)."""

from __future__ import annotations

import pytest

from mnemo_search.ranking import fuse_scores


def test_each_leg_is_rescaled_and_the_legs_add_by_weight() -> None:
    fused = fuse_scores(
        {"lexical": [("a", 12.0), ("b", 7.0), ("c", 2.0)], "semantic": [("b", 0.9), ("d", 0.5)]},
        {"lexical": 1.0, "semantic": 2.0},
    )
    assert fused == pytest.approx({"a": 1.0, "b": 0.5 + 2.0, "c": 0.0, "d": 0.0})


def test_a_confident_leader_keeps_its_lead_where_ranks_would_tie() -> None:
    # The lexical leg's best is far ahead (a rare word matched); the semantic leg barely separates
    # its two. By rank each memory would get one first and one second place; by score "a" leads.
    fused = fuse_scores(
        {"lexical": [("a", 20.0), ("b", 1.0), ("z", 0.5)], "semantic": [("b", 0.61), ("a", 0.60), ("z", 0.1)]},
        {"lexical": 1.0, "semantic": 1.0},
    )
    assert max(fused, key=fused.__getitem__) == "a"
    assert fused["a"] > fused["b"] > fused["z"]


def test_equal_scores_and_empty_legs() -> None:
    assert fuse_scores({"lexical": [("a", 3.0), ("b", 3.0)], "semantic": []}, {"lexical": 0.5}) == {"a": 0.5, "b": 0.5}
    assert fuse_scores({"lexical": [], "semantic": []}, {}) == {}
