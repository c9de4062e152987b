"""Splitting notes at paragraph, then sentence, then word boundaries to fit the model's window."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_PARAGRAPH = re.compile(r"\n[ \t]*\n+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")
# Room for [CLS], [SEP], the newline between title and text, and tokenizer drift at joins.
_RESERVED_TOKENS = 6
# The title rides along with every chunk as context; past this it would crowd out the text.
MAX_CONTEXT_TOKENS = 48


@dataclass(frozen=True)
class Chunk:
    ordinal: int
    context: str
    text: str

    def embedding_input(self) -> str:
        """What the model sees: the memory's title as context, then the chunk."""
        return f"{self.context}\n{self.text}" if self.context else self.text


def _shorten(text: str, count: Callable[[str], int], budget: int) -> str:
    words = text.split()
    while words and count(" ".join(words)) > budget:
        words = words[: max(1, len(words) * 3 // 4)] if len(words) > 1 else []
    return " ".join(words)


def _split_oversized(text: str, count: Callable[[str], int], budget: int) -> list[str]:
    """Cuts one piece that exceeds the budget: sentences, then words, then characters."""
    sentences = _SENTENCE.split(text)
    if len(sentences) > 1:
        return [piece for s in sentences for piece in _fit(s, count, budget)]
    words = text.split()
    if len(words) > 1:
        pieces, current = [], []
        for word in words:
            if count(word) > budget:
                if current:
                    pieces.append(" ".join(current))
                    current = []
                pieces.extend(_split_oversized(word, count, budget))
                continue
            if current and count(" ".join([*current, word])) > budget:
                pieces.append(" ".join(current))
                current = []
            current.append(word)
        if current:
            pieces.append(" ".join(current))
        return pieces
    # One enormous "word" (a hash, base64, minified code): halve by characters until it fits.
    half = max(1, len(text) // 2)
    return _fit(text[:half], count, budget) + _fit(text[half:], count, budget)


def _fit(text: str, count: Callable[[str], int], budget: int) -> list[str]:
    text = text.strip()
    if not text:
        return []
    if count(text) <= budget:
        return [text]
    return _split_oversized(text, count, budget)


def chunk_text(title: str, content: str, count_tokens: Callable[[str], int], max_tokens: int) -> list[Chunk]:
    """Chunks that each fit the window with the title as context; nothing is truncated away."""
    context = title.strip()
    if count_tokens(context) > MAX_CONTEXT_TOKENS:
        context = _shorten(context, count_tokens, MAX_CONTEXT_TOKENS)
    budget = max(16, max_tokens - _RESERVED_TOKENS - count_tokens(context))
    pieces: list[tuple[str, int]] = []
    for paragraph in _PARAGRAPH.split(content):
        for piece in _fit(paragraph, count_tokens, budget):
            pieces.append((piece, count_tokens(piece)))
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for piece, tokens in pieces:
        # +1 for the separator between packed pieces.
        if current and used + 1 + tokens > budget:
            chunks.append("\n\n".join(current))
            current, used = [], 0
        current.append(piece)
        used += tokens + (1 if used else 0)
    if current:
        chunks.append("\n\n".join(current))
    if not chunks:
        chunks = [content.strip()]
    return [Chunk(ordinal=i, context=context, text=text) for i, text in enumerate(chunks)]
