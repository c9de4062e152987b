"""Fusion of the legs (recency and trust then apply in `engine.ranked_query`).

Each leg's scores are rescaled to [0, 1] over the candidates it returned (its best is 1, its last
0), and a memory's fused score is the weighted sum over the legs that found it. Measured on
LoCoMo and SciFact against reciprocal-rank fusion (docs/lexical-bm25.md, "Tuning"): rank fusion throws
away how far ahead a leg's best match is, which is exactly what tells a confident BM25 hit (a
rare identifier matched) from a list of weak partial matches.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

Item = TypeVar("Item", bound=Hashable)


def fuse_scores(legs: Mapping[str, Sequence[tuple[Item, float]]], weights: Mapping[str, float]) -> dict[Item, float]:
    """Min-max fusion: each leg adds weight * (score - its lowest) / (its highest - its lowest)
    for every item it returned (the weight when all its scores are equal)."""
    fused: dict[Item, float] = {}
    for leg, scored in legs.items():
        if not scored:
            continue
        weight = weights.get(leg, 1.0)
        scores = [score for _, score in scored]
        low, high = min(scores), max(scores)
        for item, score in scored:
            share = (score - low) / (high - low) if high > low else 1.0
            fused[item] = fused.get(item, 0.0) + weight * share
    return fused
