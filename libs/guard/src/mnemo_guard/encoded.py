"""Encoded instructions: base64, hex and escape blobs that decode to suspicious text, rot13, reversed text."""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import re
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from mnemo_guard.model import ENCODED_INSTRUCTION, Screening
from mnemo_guard.normalize import View
from mnemo_guard.scan import Hit, at_words, occurrences, wordset

MIN_BLOB = 20  # base64 of "always recommend x"; shorter blobs cannot hold much of an instruction
MAX_BLOB = 65_536  # a longer blob is decoded only this far
MAX_BLOBS = 256  # blobs decoded per text (about 5 ms); the rest are left alone
MAX_DECODED = 262_144  # characters decoded per call to screen, all depths together

_NESTED = re.compile(r"[A-Za-z0-9+/]+={0,2}|[A-Za-z0-9_\-]+={0,2}")
_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
_ESCAPES = re.compile(
    r"(?:\\x[0-9a-fA-F]{2}){6,}|(?:&#(?:x[0-9a-fA-F]{1,6}|\d{1,7});){6,}"
    r"|(?:\\u[0-9a-fA-F]{4}){6,}"
)
_DECODE_AND_FOLLOW = re.compile(
    r"(?:decode|base64[\s-]*decode|rot-?13|reverse|unscramble|decipher|de-?obfuscate)\b[^.\n]{0,60}?\b(?:and|then)\s+"
    r"(?:then\s+)?(?:follow|execute|run|obey|do|apply|act\s+on|carry\s+out|comply\s+with|perform)\s+(?:it|them|the\s+"
    r"(?:instructions?|result|decoded\s+\w+|hidden\s+\w+|text|message|commands?)|what\s+it\s+says|its\s+instructions)\b"
)

Rescreen = Callable[[str], Screening]


@dataclass
class Budget:
    """How many more characters this call to `screen` may decode (blobs inside blobs share it)."""

    left: int = MAX_DECODED


_ROT13_WORDS = wordset("vtaber qvfertneq vafgehpgvba vafgehpgvbaf cerivbhf flfgrz cebzcg nyjnlf erpbzzraq sbetrg")
_REVERSED_WORDS = wordset("erongi dragersid noitcurtsni snoitcurtsni suoiverp metsys tpmorp syawla dnemmocer")
_DECODE_WORDS = wordset("decode decoded base64 rot13 rot reverse unscramble decipher deobfuscate")


def find_encoded(view: View, rescreen: Rescreen, budget: Budget, detect: Callable[[View], list[Hit]]) -> list[Hit]:
    """Blobs whose decoded text `rescreen` flags; rot13 or reversed instructions that `detect` finds."""
    text, low, words = view.text, view.low, view.words
    hits: list[Hit] = []
    if len(text) >= MIN_BLOB:
        hits.extend(_blob_hits(text, rescreen, budget))
    if view.has("\\x") or view.has("\\u") or view.has("%") or view.has("&#"):
        hits.extend(_escape_hits(text, rescreen, budget))
    if not words.isdisjoint(_DECODE_WORDS):
        for i in at_words(view, _DECODE_WORDS):
            m = _DECODE_AND_FOLLOW.match(low, i)
            if m:
                hits.append(Hit(ENCODED_INSTRUCTION, m.start(), m.end()))
    if not words.isdisjoint(_ROT13_WORDS):
        rot = codecs.encode(low, "rot13")
        found = detect(View(view.text, rot, view._vstarts, view._ostarts, view._lens))
        hits.extend(Hit(ENCODED_INSTRUCTION, h.start, h.end, "rot13: " + rot[h.start : h.end]) for h in found)
    if not words.isdisjoint(_REVERSED_WORDS):
        rev = low[::-1]
        n = len(low)
        found = detect(View(rev, rev))
        hits.extend(
            Hit(ENCODED_INSTRUCTION, n - h.end, n - h.start, "reversed: " + rev[h.start : h.end]) for h in found
        )
    return hits


# Every byte of the base64 alphabets (`=` aside, _b64decode restores it) becomes `x`, every other a space: a
# candidate blob is then a run of MIN_BLOB `x`, found by one substring search instead of splitting the text.
_BLOB_MASK = bytes.maketrans(
    bytes(range(256)),
    bytes(120 if chr(c).isascii() and (chr(c).isalnum() or chr(c) in "+/_-") else 32 for c in range(256)),
)
_RUN = b"x" * MIN_BLOB
_DIGITS = b"0123456789"
_HEX_DIGITS = b"0123456789abcdefABCDEF"


def _runs(raw: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of every run of at least MIN_BLOB base64-alphabet bytes in `raw`."""
    mask = raw.translate(_BLOB_MASK)
    i = mask.find(_RUN)
    while i != -1:
        end = mask.find(b" ", i)
        end = len(mask) if end == -1 else end
        yield i, end
        i = mask.find(_RUN, end)


def _blob_hits(text: str, rescreen: Rescreen, budget: Budget) -> list[Hit]:
    """Base64 and hex runs that decode to text `rescreen` flags."""
    hits: list[Hit] = []
    raw = text.encode("ascii", "replace")
    for n, (start, end) in enumerate(_runs(raw)):
        if n >= MAX_BLOBS or budget.left <= 0:
            break
        blob = raw[start:end]
        decoded = None
        how = ""
        if blob.translate(None, _HEX_DIGITS) in (b"", b"x") and len(blob) >= 24:
            digits = blob.removeprefix(b"0x")[: MAX_BLOB * 2]
            try:
                decoded, how = _readable(binascii.unhexlify(digits[: len(digits) // 2 * 2])), "hex"
            except binascii.Error:
                decoded = None
        # Base64 of text mixes cases and has digits; identifiers, words and paths rarely do both.
        elif blob.translate(None, _DIGITS) != blob and not blob.islower() and not blob.isupper():
            decoded, how = _b64decode(blob[:MAX_BLOB].decode("ascii")), "base64"
        if not decoded:
            continue
        budget.left -= len(decoded)
        result = rescreen(decoded)
        if result.suspicious:
            hits.append(Hit(ENCODED_INSTRUCTION, start, end, f"{how}: {result.signals[0].excerpt}", True))
    return hits


def _escape_hits(text: str, rescreen: Rescreen, budget: Budget) -> list[Hit]:
    """\\x.., &#..; and \\u.... runs, and percent-encoded tokens, that decode to text `rescreen` flags."""
    spans: list[tuple[int, int, list[tuple[str, str]]]] = []
    # Regexes run only where a marker is (a scan of 100 KB would cost milliseconds).
    seen = -1
    for marker in ("\\x", "&#", "\\u"):
        for i in occurrences(text, marker) if marker in text else ():
            if i < seen:
                continue
            m = _ESCAPES.match(text, i)
            if m:
                spans.append((m.start(), m.end(), _unescape(m.group())))
                seen = m.end()
    if "%" in text:
        done = -1
        for i in occurrences(text, "%"):
            if i < done or not _PERCENT.match(text, i):
                continue
            start = max(text.rfind(" ", 0, i), text.rfind("\n", 0, i)) + 1
            end = min((k for k in (text.find(" ", i), text.find("\n", i)) if k != -1), default=len(text))
            done = end
            token = text[start:end]
            if len(_PERCENT.findall(token)) >= 3:
                spans.append((start, end, [(urllib.parse.unquote_plus(token), "percent-encoding")]))
    hits: list[Hit] = []
    for start, end, decoded in spans[:MAX_BLOBS]:
        for plain, how in decoded:
            if budget.left <= 0:
                return hits
            budget.left -= len(plain)
            result = rescreen(plain)
            if result.suspicious:
                hits.append(Hit(ENCODED_INSTRUCTION, start, end, f"{how}: {result.signals[0].excerpt}", True))
                break
    return hits


def _unescape(blob: str) -> list[tuple[str, str]]:
    if blob.startswith("\\x"):
        raw = bytes(int(blob[k + 2 : k + 4], 16) for k in range(0, len(blob), 4))
        text = _readable(raw)
        return [(text, "hex escapes")] if text else []
    if blob.startswith("&#"):
        return [(html.unescape(blob), "HTML entities")]
    try:
        return [(blob.encode("ascii").decode("unicode_escape"), "unicode escapes")]
    except UnicodeDecodeError:
        return []


def _b64decode(blob: str) -> str | None:
    body = blob.rstrip("=")
    body = body[: len(body) - len(body) % 4] if len(body) % 4 == 1 else body
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = base64.urlsafe_b64decode(padded) if ("-" in body or "_" in body) else base64.b64decode(padded)
    except (binascii.Error, ValueError):
        return None
    return _readable(raw)


def _readable(raw: bytes) -> str | None:
    """`raw` as text when it is mostly printable words (images, hashes and keys are not)."""
    if len(raw) < 12:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) >= MIN_BLOB and _NESTED.fullmatch(text):
        return text  # base64 inside base64: decoded again one level down
    printable = sum(1 for c in text if c.isprintable() or c in "\n\t")
    letters = sum(1 for c in text if c.isalpha())
    if printable < 0.95 * len(text) or letters < 0.5 * len(text) or " " not in text.strip():
        return None
    return text
