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
    kept, used = [], 0
    for word in words:
        tokens = count(word)
        if used + tokens > budget:
            break
        kept.append(word)
        used += tokens
    return " ".join(kept)


def _pack(pieces: list[tuple[str, int]], budget: int, separator: str) -> list[tuple[str, int]]:
    """Greedily joins consecutive pieces while their summed token counts fit the budget.

    Token counts add up across whitespace (the tokenizers split on it first), so each piece is
    counted once and packing stays linear in the size of the note.
    """
    packed: list[tuple[str, int]] = []
    current: list[str] = []
    used = 0
    for piece, tokens in pieces:
        if current and used + tokens > budget:
            packed.append((separator.join(current), used))
            current, used = [], 0
        current.append(piece)
        used += tokens
    if current:
        packed.append((separator.join(current), used))
    return packed


def _fit(text: str, count: Callable[[str], int], budget: int) -> list[tuple[str, int]]:
    """Pieces of `text`, each within the budget: whole, else by sentence, word, then character."""
    text = text.strip()
    if not text:
        return []
    tokens = count(text)
    if tokens <= budget:
        return [(text, tokens)]
    sentences = _SENTENCE.split(text)
    if len(sentences) > 1:
        return _pack([piece for sentence in sentences for piece in _fit(sentence, count, budget)], budget, " ")
    words = text.split()
    if len(words) > 1:
        return _pack([piece for word in words for piece in _fit(word, count, budget)], budget, " ")
    # One enormous "word" (a hash, base64, minified code): halve by characters until it fits.
    half = max(1, len(text) // 2)
    return _fit(text[:half], count, budget) + _fit(text[half:], count, budget)


def chunk_text(title: str, content: str, count_tokens: Callable[[str], int], max_tokens: int) -> list[Chunk]:
    """Chunks that each fit the window with the title as context; nothing is truncated away."""
    context = title.strip()
    if count_tokens(context) > MAX_CONTEXT_TOKENS:
        context = _shorten(context, count_tokens, MAX_CONTEXT_TOKENS)
    budget = max(16, max_tokens - _RESERVED_TOKENS - count_tokens(context))
    pieces = [piece for paragraph in _PARAGRAPH.split(content) for piece in _fit(paragraph, count_tokens, budget)]
    chunks = [text for text, _ in _pack(pieces, budget, "\n\n")]
    if not chunks:
        chunks = [content.strip()]
    return [Chunk(ordinal=i, context=context, text=text) for i, text in enumerate(chunks)]
