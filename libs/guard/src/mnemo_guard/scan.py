"""What detectors share: the hit they report, anchored search, and sentence bounds."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import AnyStr

from mnemo_guard.normalize import ANCHOR_WORDS, View, fold_pattern


@dataclass(frozen=True, slots=True)
class Hit:
    """A detector's finding, in offsets of the folded view (or of the original text when `original`).

    `note` is the readable text to show when the span itself is not it (decoded, smuggled).
    """

    kind: str
    start: int
    end: int
    note: str = ""
    original: bool = False
    anchor: int = -1
    """anchor is where the order's verb is, when the hit spans a whole sentence (standing orders)."""


def compile_folded(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """Compile a pattern written in plain (accented, any script) text against the folded view."""
    return re.compile(fold_pattern(pattern), flags)


def occurrences(low: AnyStr, needle: AnyStr, start: int = 0) -> Iterator[int]:
    """Every offset of `needle` in `low` (str.find runs in C; a regex scan would cost 20x more)."""
    i = low.find(needle, start)
    while i != -1:
        yield i
        i = low.find(needle, i + 1)


_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_UNDERSCORE = ord("_")


def at_words(view: View, words: frozenset[bytes] | set[bytes], identifiers: bool = False) -> list[int]:
    """Sorted offsets in `view.low` where one of `words` is a whole word.

    `user` in `user_message` is part of an identifier and does not count, unless `identifiers` (for
    phrases an attacker may write with underscores: `ignore_all_previous_instructions`).
    """
    raw = view.ascii
    size = len(raw)
    found: list[int] = []
    for word in view.words & words:
        n = len(word)
        positions = view.positions.get(word)
        if positions is None:
            positions = view.positions[word] = list(occurrences(raw, word))
        for i in positions:
            before = raw[i - 1] if i else 32
            after = raw[i + n] if i + n < size else 32
            if not (before in _ALNUM or after in _ALNUM or (not identifiers and _UNDERSCORE in (before, after))):
                found.append(i)
    found.sort()
    return found


def wordset(*groups: str) -> frozenset[bytes]:
    """Anchor words, given as space-separated strings; registered so that views keep them."""
    words = frozenset(w.encode() for g in groups for w in g.split())
    ANCHOR_WORDS.update(words)
    return words


def anywhere(low: str, needles: Iterable[str]) -> list[int]:
    """Sorted offsets of any of `needles`, word boundary or not (Chinese and Japanese have none)."""
    found: set[int] = set()
    for needle in needles:
        if needle in low:
            found.update(occurrences(low, needle))
    return sorted(found)


_SENTENCE_ENDS = ("\n", ". ", "! ", "? ", ".\t", "; ")
MAX_SENTENCE = 400


def sentence(low: str, i: int, j: int | None = None) -> tuple[int, int]:
    """The bounds of the sentence around low[i:j], at most MAX_SENTENCE characters either side."""
    j = i if j is None else j
    lo = max(0, i - MAX_SENTENCE)
    hi = min(len(low), j + MAX_SENTENCE)
    # Search a copy of the neighbourhood: bounded find() on a long non-ASCII string is much slower.
    before, after = low[lo:i], low[j:hi]
    start = lo
    for sep in _SENTENCE_ENDS:
        k = before.rfind(sep)
        if k != -1 and lo + k + len(sep) > start:
            start = lo + k + len(sep)
    end = hi
    for sep in _SENTENCE_ENDS:
        k = after.find(sep)
        if k != -1 and j + k + 1 < end:
            end = j + k + 1
    return start, end


def line(low: str, i: int) -> tuple[int, int]:
    """The bounds of the line holding offset i."""
    start = low.rfind("\n", 0, i) + 1
    end = low.find("\n", i)
    return start, len(low) if end == -1 else end
