"""Fusion: reciprocal-rank fusion of the legs (recency and trust then apply in `engine.ranked_query`)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

Item = TypeVar("Item", bound=Hashable)


def fuse_rankings(rankings: Mapping[str, Sequence[Item]], weights: Mapping[str, float], k: float) -> dict[Item, float]:
    """Reciprocal-rank fusion: each leg adds weight / (k + rank) for every item it ranked."""
    fused: dict[Item, float] = {}
    for leg, items in rankings.items():
        weight = weights.get(leg, 1.0)
        for rank, item in enumerate(items, start=1):
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return fused
