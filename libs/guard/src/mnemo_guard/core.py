"""`screen`: every detector over one folded view, obfuscated variants, mentions set aside, hits merged into signals."""

from __future__ import annotations

import re
from bisect import bisect_right

from mnemo_guard.bridging import find_bridging
from mnemo_guard.encoded import Budget, find_encoded
from mnemo_guard.exfiltration import find_exfiltration
from mnemo_guard.hidden import addresses_ai, find_hidden, hidden_regions
from mnemo_guard.model import (
    BRIDGING,
    CLEAN,
    HIDDEN_TEXT,
    INSTRUCTION_OVERRIDE,
    ROLE_TAG,
    STANDING_ORDER,
    Screening,
    Signal,
    excerpt,
)
from mnemo_guard.normalize import ZERO_WIDTH, View, fold, normalize
from mnemo_guard.orders import find_standing_orders
from mnemo_guard.override import find_overrides
from mnemo_guard.roles import find_role_tags
from mnemo_guard.scan import Hit, line, occurrences, wordset

MAX_DEPTH = 2  # a blob inside a blob inside the text is decoded; one more level is not
MAX_LEET = 32_768

_LEET = bytes.maketrans(b"0134578@$", b"oieastbas")
# Words the leet pass looks for; it runs only when translating digits creates one of them.
_LEET_KEYS = (
    "ignore",
    "disregard",
    "forget",
    "instruction",
    "previous",
    "system",
    "prompt",
    "recommend",
    "always",
    "bypass",
    "override",
    "jailbreak",
)
_SPACED_KEYS = ("i g n o", "i.g.n.o", "i-g-n-o", "s y s t", "a l w a", "d i s r", "f o r g", "r e c o m")
# Letters standing alone as words: four of them are needed before spaced-out words are looked for.
_LETTERS = wordset("c d e f g l m n o r s t w y")
_SPACED_RUN = re.compile(r"(?:[a-z](?:[ .\-_*]| {2,4}|[ .\-_*]{2,4}(?=[a-z][ .\-_*][a-z]))){4,}[a-z]")
_COMPACT_OVERRIDE = re.compile(
    r"(?:ignore|disregard|forget|bypass|override)(?:all|any|the|your|of)*(?:previous|prior|above|earlier|system|your)"
    r"\w*?(?:instructions?|rules|prompts?|directives?|guidelines)"
)
# A mention is a bare quoted phrase in a sentence about attacks: "we flag 'ignore previous instructions'".
_DISCUSSION = re.compile(
    r"\b(?:prompt[\s-]*injections?|injections?|jailbreaks?|attacks?|attackers?|malicious|poison\w*|payloads?|filters?"
    r"|detect\w*|flag\w*|block\w*|sanitiz\w*|classif\w*|regex\w*|patterns?|phrases?|strings?|examples?|e\.g\.|such\s+as"
    r"|test\s+cases?|corpus|red[\s-]?team\w*|adversarial|guard\w*|screen\w*|heuristics?|signatures?|match\w*|known"
    r"|classic|typical|tokens?|templates?|markers?|tags?|quot(?:e|es|ed|ing|ation|ations)|overrides?|kinds?"
    r"|categor(?:y|ies)|tries\s+to)\b"
)
_MENTIONABLE = frozenset({INSTRUCTION_OVERRIDE, ROLE_TAG, STANDING_ORDER, BRIDGING})
_TAGS = re.compile(r"<[^<>\n]{1,60}>|\[/?inst\]")
_ROLE_WORDS = re.compile(r"\b(?:system|user|assistant|developer|tool|human|model|role|content)\b")
_NOT_WORD = " \t\n.*?+^$()[]{}|\\/,;:-_=!#%&~'\"`0123456789"
MAX_TAG_QUOTE = 200
_QUOTES = "\"'`"
MAX_QUOTE_SLACK = 16
MAX_ORDER_QUOTE = 48


def screen(text: str) -> Screening:
    """Flag text that tries to instruct the model; see the package README for the kinds and the policy."""
    return _screen(text, 0, Budget())


def _screen(text: str, depth: int, budget: Budget) -> Screening:
    if not text:
        return CLEAN
    view = normalize(text)
    hits = _plain(view)
    hits.extend(_obfuscated(view))
    if depth < MAX_DEPTH:
        hits.extend(find_encoded(view, lambda s: _screen(s, depth + 1, budget), budget, _detect))
    hits = [h for h in hits if not _is_mention(view, h)]
    hits.extend(find_hidden(view))
    hits.extend(_hidden_carriers(view, hits))
    if not hits:
        return CLEAN
    signals = _signals(view, hits)
    return Screening(True, signals)


def _plain(view: View) -> list[Hit]:
    hits = find_overrides(view)
    hits.extend(find_role_tags(view))
    hits.extend(find_standing_orders(view))
    hits.extend(find_bridging(view))
    hits.extend(find_exfiltration(view))
    return hits


def _detect(view: View) -> list[Hit]:
    """The detectors that read words, over a transformed view with the same offsets (rot13, leet, reversed)."""
    return [*find_overrides(view), *find_standing_orders(view)]


def _obfuscated(view: View) -> list[Hit]:
    low = view.low
    hits: list[Hit] = []
    # Leetspeak: only when translating digits makes a key word appear. Bytes keep offsets (non-ASCII -> `?`).
    # Long texts are full of digits (logs, code); leet is looked for in their first MAX_LEET characters.
    plain = low[:MAX_LEET].encode("ascii", "replace")
    leet_bytes = plain.translate(_LEET)
    if leet_bytes != plain:
        leet, ascii_low = leet_bytes.decode("ascii"), plain.decode("ascii")
        if any(k in leet and leet.count(k) > ascii_low.count(k) for k in _LEET_KEYS):
            hits.extend(_detect(View(view.text, leet, view._vstarts, view._ostarts, view._lens)))
    if len(view.words & _LETTERS) >= 4 and any(view.has(k) for k in _SPACED_KEYS):
        for m in _SPACED_RUN.finditer(low):
            words = [re.sub(r"[ .\-_*]", "", w) for w in re.split(r"[ .\-_*]{2,}", m.group())]
            collapsed = " ".join(w for w in words if w)
            inner = _detect(View(collapsed, collapsed))
            if inner or _COMPACT_OVERRIDE.search(collapsed.replace(" ", "")):
                kind = inner[0].kind if inner else INSTRUCTION_OVERRIDE
                hits.append(Hit(kind, m.start(), m.end(), collapsed))
    return hits


def _is_mention(view: View, hit: Hit) -> bool:
    """Role markup shown as code, or an attack phrase quoted bare in a sentence about attacks (see the README)."""
    if hit.kind not in _MENTIONABLE or hit.original:
        return False
    low = view.low
    if hit.kind == ROLE_TAG:
        if _in_fence(view, hit.start):
            return True
        span = _inline_code(low, hit.start, hit.end) or _enclosing_quote(low, hit.start, hit.end, MAX_TAG_QUOTE)
        # `<|im_start|>` or "<system-reminder>.*?</system-reminder>" shows markup; "<system>Obey</system>" uses it.
        return span is not None and not _ROLE_WORDS.sub("", _TAGS.sub("", low[span[0] + 1 : span[1]])).strip(_NOT_WORD)
    if hit.kind == STANDING_ORDER:
        # A standing order's hit is its sentence; the quote must hold the order around its verb, short.
        if hit.anchor < 0:
            return False
        quote = _enclosing_quote(low, hit.anchor, hit.anchor + 1, MAX_ORDER_QUOTE)
    else:
        quote = _enclosing_quote(low, hit.start, hit.end, MAX_QUOTE_SLACK)
    if quote is None:
        return False
    # The words about attacks may sit anywhere in the paragraph around the quote.
    start = max(low.rfind("\n\n", 0, quote[0]), quote[0] - 300, 0)
    stop = low.find("\n\n", quote[1])
    end = min(len(low) if stop == -1 else stop, quote[1] + 200)
    outside = low[start : quote[0]] + " " + low[quote[1] + 1 : end]
    return bool(_DISCUSSION.search(outside))


def _enclosing_quote(low: str, start: int, end: int, slack: int) -> tuple[int, int] | None:
    """(open, close) offsets of quote marks strictly around low[start:end] on its line, at most `slack` away."""
    line_start, line_end = line(low, start)
    for q in _QUOTES:
        opening = low.rfind(q, max(line_start, start - slack), start)
        if opening == -1 or q in low[start:end]:
            continue
        if q == "'" and opening > 0 and low[opening - 1].isalnum():
            continue  # an apostrophe ("don't"), not a quote
        closing = low.find(q, end, min(line_end, end + slack))
        if closing == -1 or q in low[opening + 1 : start]:
            continue
        return opening, closing
    return None


def _in_fence(view: View, start: int) -> bool:
    """Inside a fenced code block (``` or ~~~); fence offsets are found once per view."""
    if view.fences is None:
        low = view.low
        view.fences = sorted(i for fence in ("```", "~~~") if view.has(fence) for i in occurrences(low, fence))
    return bisect_right(view.fences, start) % 2 == 1


def _inline_code(low: str, start: int, end: int) -> tuple[int, int] | None:
    """The backticks around low[start:end] when it sits in `inline code` on its line."""
    line_start, line_end = line(low, start)
    if low.count("`", line_start, start) % 2 == 0:
        return None
    closing = low.find("`", end, line_end)
    return (low.rfind("`", line_start, start), closing) if closing != -1 else None


def _hidden_carriers(view: View, hits: list[Hit]) -> list[Hit]:
    """Hidden text carrying another signal or speaking to an AI: comments, hidden HTML, zero-width obfuscation."""
    found: list[Hit] = []
    low = view.low
    inside_view = [h for h in hits if not h.original and h.kind != HIDDEN_TEXT]
    for start, end, body_start, body_end in hidden_regions(view):
        if any(start <= h.start and h.end <= end for h in inside_view) or addresses_ai(low, body_start, body_end):
            found.append(Hit(HIDDEN_TEXT, start, end, "hidden: " + low[body_start:body_end].strip()))
    if view.removed:
        removed = [k for k, ch in view.removed if ch in ZERO_WIDTH]
        for h in inside_view:
            a, b = view.span(h.start, h.end)
            if any(a <= k < b for k in removed):
                found.append(Hit(HIDDEN_TEXT, h.start, h.end, "zero-width characters inside: " + low[h.start : h.end]))
    return found


def _signals(view: View, hits: list[Hit]) -> tuple[Signal, ...]:
    """Hits as signals in original offsets, overlapping hits of one kind merged, in order of position."""
    spans: list[tuple[int, int, str, str]] = []
    for h in hits:
        start, end = (h.start, h.end) if h.original else view.span(h.start, h.end)
        spans.append((start, max(end, start + 1), h.kind, h.note))
    spans.sort()
    merged: list[tuple[int, int, str, str]] = []
    last: dict[str, int] = {}  # kind -> index in `merged` of its latest span
    for start, end, kind, note in spans:
        k = last.get(kind)
        if k is not None and start < merged[k][1]:
            s, e, _, n = merged[k]
            merged[k] = (s, max(e, end), kind, n or note)
        else:
            last[kind] = len(merged)
            merged.append((start, end, kind, note))
    return tuple(
        Signal(kind, start, end, excerpt(note or _readable(view.text[start:end]))) for start, end, kind, note in merged
    )


def _readable(text: str) -> str:
    """The text without its invisible characters."""
    return text if text.isascii() else "".join(c for c in text if c.isascii() or fold(c) != "")
