"""The text detectors read: invisible characters dropped, look-alikes folded, lower case, with a map back to offsets."""

from __future__ import annotations

import functools
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass, field

# Characters that render as nothing. They are dropped from the view, so `ig\u200bnore` reads `ignore`.
ZERO_WIDTH = frozenset(
    "\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180e\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\u3164\ufeff\uffa0"
)
BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
VARIATION_SELECTORS = frozenset(chr(c) for c in range(0xFE00, 0xFE10))
INVISIBLE = ZERO_WIDTH | BIDI | VARIATION_SELECTORS
TAG_FIRST, TAG_LAST = 0xE0000, 0xE007F  # Unicode tag characters: invisible ASCII ("ASCII smuggling")
VS_SUPPLEMENT_FIRST, VS_SUPPLEMENT_LAST = 0xE0100, 0xE01EF

# Punctuation that NFKD leaves alone but that patterns treat as its ASCII twin.
_PUNCTUATION = {
    "\u2018": "'",
    "\u2019": "'",
    "\u201a": "'",
    "\u201b": "'",
    "\u2032": "'",
    "\u02bc": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u201e": '"',
    "\u2033": '"',
    "\u00ab": '"',
    "\u00bb": '"',
    "\u2010": "-",
    "\u2011": "-",
    "\u2012": "-",
    "\u2013": "-",
    "\u2014": "-",
    "\u2015": "-",
    "\u2212": "-",
    "\u3000": " ",
    "\uff5c": "|",
    "\u2502": "|",
    "\u2039": "<",
    "\u203a": ">",
    "\u2329": "<",
    "\u232a": ">",
    "\u3008": "<",
    "\u3009": ">",
    "\u27e8": "<",
    "\u27e9": ">",
    "\ufe64": "<",
    "\ufe65": ">",
}

# Cyrillic, Greek and Armenian letters that look like Latin ones (lower case, after NFKD). They are
# folded only next to a Latin letter, so Russian or Greek words stay what they are.
CONFUSABLES = {
    "а": "a",
    "в": "b",
    "е": "e",
    "к": "k",
    "м": "m",
    "н": "h",
    "о": "o",
    "р": "p",
    "с": "c",
    "т": "t",
    "у": "y",
    "х": "x",
    "і": "i",
    "ј": "j",
    "ѕ": "s",
    "ԁ": "d",
    "ԛ": "q",
    "ԝ": "w",
    "һ": "h",
    "ӏ": "l",
    "ɡ": "g",
    "ɑ": "a",
    "ı": "i",
    "ℓ": "l",
    "α": "a",
    "β": "b",
    "ε": "e",
    "ι": "i",
    "κ": "k",
    "ν": "v",
    "ο": "o",
    "ρ": "p",
    "τ": "t",
    "υ": "u",
    "χ": "x",
    "ϲ": "c",
    "ϳ": "j",
    "օ": "o",
    "ս": "u",
    "հ": "h",
    "ո": "n",
    "ց": "g",
    "ⅼ": "l",
}


# Every anchor word of every detector (scan.wordset registers them), so a view keeps only those it has.
ANCHOR_WORDS: set[bytes] = set()  # a set, not a frozenset: intersection() with a list is fastest
# Every byte that is not an ASCII letter or digit becomes a space (non-ASCII characters arrive as `?`).
_WORD_BYTES = bytes.maketrans(
    bytes(range(256)), bytes(c if chr(c).isascii() and chr(c).isalnum() else 32 for c in range(256))
)


@functools.lru_cache(maxsize=256)
def _needle(needle: str) -> tuple[bytes, tuple[bytes, ...]]:
    """`needle` as bytes, and its punctuation bytes (rare in prose, so their absence answers fast)."""
    encoded = needle.encode("ascii")
    return encoded, tuple({bytes((c,)) for c in encoded if not chr(c).isalnum()})


def is_tag(ch: str) -> bool:
    return TAG_FIRST <= ord(ch) <= TAG_LAST


def is_variation_selector(ch: str) -> bool:
    return ch in VARIATION_SELECTORS or VS_SUPPLEMENT_FIRST <= ord(ch) <= VS_SUPPLEMENT_LAST


@functools.lru_cache(maxsize=8192)
def fold(ch: str) -> str:
    """The lower-case compatibility form of one non-ASCII character, accents dropped ('' if invisible)."""
    if ch in INVISIBLE or is_tag(ch) or is_variation_selector(ch):
        return ""
    if ch in _PUNCTUATION:
        return _PUNCTUATION[ch]
    decomposed = unicodedata.normalize("NFKD", ch)
    base = "".join(c for c in decomposed if not unicodedata.combining(c)) or ch
    base = "".join(_PUNCTUATION.get(c, c) for c in base)
    lower = base.lower()
    return lower if len(lower) == len(base) else base


def fold_pattern(pattern: str) -> str:
    """A regex source with its non-ASCII letters folded as `normalize` folds text, so both meet."""
    return "".join(c if c.isascii() else fold(c) for c in pattern)


@dataclass(slots=True)
class View:
    """`low` is the folded text; `origin` and `span` map offsets in it back to the original text.

    `removed` lists (offset, character) of every invisible character that was dropped, `smuggled`
    every run of tag characters as (start, end, decoded ASCII), `selectors` every run of variation
    selectors as (start, end, the bytes they encode). Views of transformed text (rot13, leetspeak)
    share the offset map of the view they come from.
    """

    text: str
    low: str
    _vstarts: list[int] = field(default_factory=list)
    _ostarts: list[int] = field(default_factory=list)
    _lens: list[int] = field(default_factory=list)
    removed: list[tuple[int, str]] = field(default_factory=list)
    smuggled: list[tuple[int, int, str]] = field(default_factory=list)
    selectors: list[tuple[int, int, bytes]] = field(default_factory=list)
    _words: set[bytes] | None = None
    _ascii: bytes | None = None
    positions: dict[bytes, list[int]] = field(default_factory=dict)
    """positions caches where each anchor word occurs in `ascii` (several detectors share words)."""
    scripts: dict[str, int] = field(default_factory=dict)
    """scripts counts the "cyrillic" and "cjk" letters of the text (their anchors are searched only when enough)."""
    fences: list[int] | None = None
    """fences caches the offsets of the code fences (``` and ~~~) once a role tag needs them."""

    @property
    def words(self) -> set[bytes]:
        """The anchor words (ANCHOR_WORDS, as bytes) that occur in `low` as whole ASCII words, computed once.

        Detectors test this small set instead of searching the text for each of their anchors.
        """
        if self._words is None:
            self._words = ANCHOR_WORDS.intersection(self.ascii.translate(_WORD_BYTES).split())
        return self._words

    def has(self, needle: str) -> bool:
        """Whether ASCII `needle` is in `low`.

        Its punctuation is looked for first, one byte at a time (memchr): a multi-character search of
        100 KB costs 50 to 100 µs, a missing single byte about one.
        """
        if len(self.low) < 4096:
            return needle in self.low
        encoded, symbols = _needle(needle)
        raw = self.ascii
        for symbol in symbols:
            if symbol not in raw:
                return False
        return encoded in raw

    @property
    def ascii(self) -> bytes:
        """`low` as bytes, `?` for each non-ASCII character: same offsets, and find() on it is fast."""
        if self._ascii is None:
            self._ascii = self.low.encode("ascii", "replace")
        return self._ascii

    def origin(self, v: int) -> int:
        """The offset in the original text of offset `v` in `low`."""
        if not self._vstarts:
            return v
        k = bisect_right(self._vstarts, v) - 1
        if k < 0:
            return v
        vstart, ostart, length = self._vstarts[k], self._ostarts[k], self._lens[k]
        return ostart if v < vstart + length else ostart + 1 + (v - vstart - length)

    def span(self, vstart: int, vend: int) -> tuple[int, int]:
        """The original (start, end) of `low[vstart:vend]`."""
        if not self._vstarts:
            return vstart, vend
        start = self.origin(vstart)
        end = self.origin(vend - 1) + 1 if vend > vstart else start
        return start, max(end, start)


def normalize(text: str) -> View:
    """Fold `text` for matching: ASCII text is only lowered; other text is folded character by character."""
    if text.isascii():
        return View(text, text.lower())
    view = View(text, "")
    pieces: list[str] = []
    vpos = 0
    pos = 0
    # One byte per character, `?` for every non-ASCII one: bytes.find jumps from run to run in C.
    marked = text.encode("ascii", "replace")
    n = len(text)
    i = marked.find(b"?")
    while i != -1:
        if text[i] == "?":
            i = marked.find(b"?", i + 1)
            continue
        j = i + 1
        while j < n and not text[j].isascii():
            j += 1
        pieces.append(text[pos:i])
        vpos += i - pos
        vpos = _fold_run(text, i, j, view, pieces, vpos)
        pos = j
        i = marked.find(b"?", j)
    pieces.append(text[pos:])
    folded = "".join(pieces)
    low = folded.lower()
    if len(low) != len(folded):  # a character whose lower case is longer; keep offsets exact
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in folded)
    view.low = low
    return view


def _fold_run(text: str, i: int, j: int, view: View, pieces: list[str], vpos: int) -> int:
    """Fold the non-ASCII run text[i:j] into `pieces`, recording edits; returns the new view offset."""
    latin_before = i > 0 and text[i - 1].isalpha()
    latin_after = j < len(text) and text[j].isalpha()
    # Look-alikes are folded only in the letters that touch a Latin letter: `\u0456gnore`, `ign\u043ere`.
    first_gap = next((k for k in range(i, j) if not (text[k].isalpha() or fold(text[k]) == "")), j)
    last_gap = next((k for k in range(j - 1, i - 1, -1) if not (text[k].isalpha() or fold(text[k]) == "")), i - 1)
    tag_start = -1
    tags: list[str] = []
    sel_start = -1
    selected: list[int] = []
    for k in range(i, j):
        ch = text[k]
        code = ord(ch)
        if 0x0400 <= code <= 0x04FF:
            view.scripts["cyrillic"] = view.scripts.get("cyrillic", 0) + 1
        elif 0x3040 <= code <= 0x9FFF or 0xAC00 <= code <= 0xD7AF or 0x1100 <= code <= 0x11FF:
            view.scripts["cjk"] = view.scripts.get("cjk", 0) + 1
        rep = fold(ch)
        if rep in CONFUSABLES and ((latin_before and k < first_gap) or (latin_after and k > last_gap)):
            rep = CONFUSABLES[rep]
        if is_tag(ch):
            if tag_start < 0:
                tag_start = k
            tags.append(chr(ord(ch) - TAG_FIRST))
        elif tag_start >= 0:
            view.smuggled.append((tag_start, k, "".join(tags)))
            tag_start, tags = -1, []
        if is_variation_selector(ch):
            if sel_start < 0:
                sel_start = k
            code = ord(ch)
            selected.append(code - 0xFE00 if code < 0xFE10 else code - VS_SUPPLEMENT_FIRST + 16)
        elif sel_start >= 0:
            view.selectors.append((sel_start, k, bytes(selected)))
            sel_start, selected = -1, []
        if rep == ch:
            pieces.append(ch)
            vpos += 1
            continue
        if rep == "" and not is_tag(ch) and not is_variation_selector(ch):
            view.removed.append((k, ch))
        view._vstarts.append(vpos)
        view._ostarts.append(k)
        view._lens.append(len(rep))
        pieces.append(rep)
        vpos += len(rep)
    if tag_start >= 0:
        view.smuggled.append((tag_start, j, "".join(tags)))
    if sel_start >= 0:
        view.selectors.append((sel_start, j, bytes(selected)))
    return vpos
