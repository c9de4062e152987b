"""Fusion and decay: reciprocal-rank fusion of the legs, then a recency factor."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from datetime import datetime
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


def recency_factor(updated_at: datetime, now: datetime, half_life_days: float, weight: float) -> float:
    """1 for a memory updated now, falling towards 1 - weight as it ages (halving every half-life)."""
    age_days = max(0.0, (now - updated_at).total_seconds() / 86400.0)
    return (1.0 - weight) + weight * math.pow(0.5, age_days / half_life_days)
