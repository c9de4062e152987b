"""A deterministic, meaningless embedder (feature hashing of words) for fast tests."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from mnemo_embed.base import EmbedderBase

_WORD = re.compile(r"\w+")


class HashEmbedder(EmbedderBase):
    """Same text, same vector; shared words pull vectors together. No model, no meaning."""

    max_tokens = 256

    def __init__(self, dimension: int = 64) -> None:
        super().__init__()
        self.dimension = dimension
        self.model = f"hash-v1-{dimension}"

    def count_tokens(self, text: str) -> int:
        return len(_WORD.findall(text))

    async def embed(self, texts: list[str]) -> list[np.ndarray]:
        self._readiness.check()
        return [self._vector(t) for t in texts]

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dimension, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dimension
            vector[index] += 1.0 if digest[4] & 1 else -1.0
        norm = float(np.linalg.norm(vector))
        if norm == 0:
            vector[0] = 1.0
            return vector
        return vector / norm
