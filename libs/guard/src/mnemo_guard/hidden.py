"""Hidden text: invisible characters inside words, smuggled tag characters, bidi overrides, comments and hidden HTML."""

from __future__ import annotations

import re

from mnemo_guard.model import HIDDEN_TEXT
from mnemo_guard.normalize import BIDI, ZERO_WIDTH, View
from mnemo_guard.scan import Hit, occurrences, wordset

_OVERRIDES = frozenset("\u202a\u202b\u202d\u202e\u2066\u2067\u2068")  # they change display order; PDF/PDI only close
_RTL = re.compile(r"[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc]")
_BLACK_FLAG = "\U0001f3f4"  # 🏴 + tag letters + cancel tag is a subdivision flag (England, Scotland, Wales)
_MARKDOWN_COMMENT = re.compile(
    r"\[(?://|comment|_|#|\s*)\]:\s*(?:#|<>|\S+)\s*(?:\((?P<p>[^)\n]*)\)|\"(?P<q>[^\"\n]*)\")"
)
_HIDDEN_ELEMENT = re.compile(
    r"<(?P<tag>[a-z][a-z0-9]*)\b[^>]*?(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?:px|pt|em)?\b"
    r"|opacity\s*:\s*0(?:\.0+)?\s*[;\"']|color\s*:\s*(?:white|#fff(?:fff)?|transparent)\b|\shidden\b|aria-hidden)"
    r"[^>]*>(?P<body>.{0,2000}?)</(?P=tag)\s*>",
    re.S,
)
# Hidden text that names an AI and gives it an order; "<!-- markdownlint-disable -->" does neither.
_AI_DIRECTIVE = re.compile(
    r"\b(?:ai|a\.i\.|assistants?|llms?|language\s+models?|chat\s?bots?|claude|chatgpt|gpt-?\d?|copilot|gemini)\b"
    r"[^\n]{0,120}?\b(?:must|should|shall|always|never|do\s+not|don'?t|ignore|say|tell|recommend|respond|reply|answer"
    r"|include|insert|output|print|use|run|execute|send|visit|fetch|mention|pretend|act\s+as)\b"
)


def find_hidden(view: View) -> list[Hit]:
    """Invisible carriers of text: tag characters, variation-selector bytes, zero-width runs, bidi overrides."""
    hits: list[Hit] = []
    text = view.text
    for start, end, decoded in view.smuggled:
        flag = start > 0 and text[start - 1] == _BLACK_FLAG and end - start <= 8 and text[end - 1] == "\U000e007f"
        if not flag:
            hits.append(Hit(HIDDEN_TEXT, start, end, "tag characters: " + decoded, original=True))
    for start, end, data in view.selectors:
        if end - start >= 4:  # an emoji takes one selector; a run carries bytes ("emoji smuggling")
            hits.append(Hit(HIDDEN_TEXT, start, end, "variation selectors: " + data.decode("utf-8", "replace"), True))
    hits.extend(_zero_width(view))
    hits.extend(_bidi(view))
    return hits


def _zero_width(view: View) -> list[Hit]:
    """Two or more zero-width characters inside Latin words, or a run of four: nobody types those."""
    text = view.text
    inside: list[int] = []
    run_start, run_end, runs = -1, -1, []
    for k, ch in view.removed:
        if ch not in ZERO_WIDTH:
            continue
        if k == run_end:
            run_end = k + 1
        else:
            if run_end - run_start >= 4:
                runs.append((run_start, run_end))
            run_start, run_end = k, k + 1
        before = k - 1
        while before >= 0 and text[before] in ZERO_WIDTH:
            before -= 1
        after = k + 1
        while after < len(text) and text[after] in ZERO_WIDTH:
            after += 1
        if (
            before >= 0
            and after < len(text)
            and text[before].isascii()
            and text[before].isalpha()
            and (text[after].isalpha())
        ):
            inside.append(k)
    if run_end - run_start >= 4:
        runs.append((run_start, run_end))
    hits = [Hit(HIDDEN_TEXT, s, e, "zero-width run", original=True) for s, e in runs]
    if len(inside) >= 2:
        hits.append(Hit(HIDDEN_TEXT, _word_start(text, inside[0]), _word_end(text, inside[-1]), original=True))
    return hits


def _bidi(view: View) -> list[Hit]:
    text = view.text
    hits: list[Hit] = []
    for k, ch in view.removed:
        if ch in _OVERRIDES and ch in BIDI and not _RTL.search(text, max(0, k - 40), k + 40):
            close = min((i for i in (text.find("\u202c", k), text.find("\u2069", k)) if i != -1), default=-1)
            end = close + 1 if close != -1 and close - k <= 400 else min(len(text), k + 40)
            hits.append(Hit(HIDDEN_TEXT, k, end, "bidi override: " + text[k + 1 : end][::-1], original=True))
    return hits


_CSS = wordset("display visibility size opacity hidden color")


def hidden_regions(view: View) -> list[tuple[int, int, int, int]]:
    """(start, end, body_start, body_end) in the view of HTML comments, Markdown comments and CSS-hidden elements."""
    low = view.low
    regions: list[tuple[int, int, int, int]] = []
    if view.has("<!--"):
        for i in occurrences(low, "<!--"):
            close = low.find("-->", i + 4)
            end = len(low) if close == -1 else close + 3
            regions.append((i, end, i + 4, end - 3 if close != -1 else end))
    if view.has("]:"):
        for i in occurrences(low, "["):
            m = _MARKDOWN_COMMENT.match(low, i)
            if m:
                body = "p" if m.group("p") is not None else "q"
                regions.append((m.start(), m.end(), m.start(body), m.end(body)))
    if view.has("<") and not view.words.isdisjoint(_CSS):
        for i in occurrences(low, "<"):
            m = _HIDDEN_ELEMENT.match(low, i)
            if m:
                regions.append((m.start(), m.end(), m.start("body"), m.end("body")))
    return regions


def addresses_ai(low: str, start: int, end: int) -> bool:
    """Whether hidden text low[start:end] speaks to an AI or gives it an order."""
    return bool(_AI_DIRECTIVE.search(low, start, end))


def _word_start(text: str, k: int) -> int:
    while k > 0 and (text[k - 1].isalnum() or text[k - 1] in ZERO_WIDTH):
        k -= 1
    return k


def _word_end(text: str, k: int) -> int:
    while k < len(text) and (text[k].isalnum() or text[k] in ZERO_WIDTH):
        k += 1
    return k
