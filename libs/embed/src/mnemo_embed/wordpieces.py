"""A BERT tokenizer's word pieces, a word at a time from a cache.

`tokenizers` takes about 0.15 ms for a note of 100 word pieces on this machine, 0.12 ms of it in
its normaliser and pre-tokeniser, which track every character's place in the original text. Each
note pays it twice (its chunking on the write path, then the embedding worker), and beside the
model on two cores that was about a third of the server's own CPU time during a 10,000-note
import and its drain (py-spy, 2026-12-05). Both of BERT's steps work a character at a time and
split at whitespace, so a text's pieces are its words' pieces one after another, and a word seen
once need not be tokenised again:

- plain ASCII text (no control characters, no special token's text): BERT's normaliser only
  lowercases it, and its pre-tokeniser splits it at whitespace and around every punctuation mark
  (in ASCII every visible character that is not a letter or digit). A regular expression does
  both, and an unseen word goes straight to the WordPiece model.
- any other text is cut at its spaces, and an unseen piece goes to the whole tokenizer (a special
  token's text never holds a space, and a control character is dropped within its piece as
  within the text).

A tokenizer that is not a lowercasing BERT's is asked for every text whole.
tests/libs/test_wordpieces.py holds the paths to the tokenizer's own ids.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from itertools import chain
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

# After lowercasing: a run of letters and digits is a word; any other visible character is one.
_WORD = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")
# Control characters (tab, newline and carriage return aside), which the normaliser removes.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# Words a generation of the cache holds (two are kept: the words seen since the last turnover,
# and those seen before it, a word of which moves back to the new one when it is seen again).
# Hashes and identifiers never repeat; a language's words keep coming back. 100,000 random
# identifiers of 3-14 letters and digits (4-5 pieces each) held 42 MB, so at most about 21 MB.
CACHE_MOST = 25_000


def _bert_frame(config: dict[str, Any], token_id: Any) -> tuple[int, int] | None:
    """The ids put before and after a text ([CLS] and [SEP]) when `config` is a lowercasing BERT
    tokenizer that adds exactly those two; None for any other."""
    normalizer, pre = config.get("normalizer") or {}, config.get("pre_tokenizer") or {}
    bert = (
        normalizer.get("type") == "BertNormalizer"
        and normalizer.get("lowercase") is True
        and normalizer.get("clean_text") is True
        and pre.get("type") == "BertPreTokenizer"
        and (config.get("model") or {}).get("type") == "WordPiece"
    )
    post = config.get("post_processor") or {}
    if not bert:
        return None
    if post.get("type") == "BertProcessing":
        return int(post["cls"][1]), int(post["sep"][1])
    single = post.get("single") or []
    if post.get("type") != "TemplateProcessing" or len(single) != 3 or "Sequence" not in single[1]:
        return None
    first, last = (part.get("SpecialToken", {}).get("id") for part in (single[0], single[2]))
    if first is None or last is None or token_id(first) is None or token_id(last) is None:
        return None
    return int(token_id(first)), int(token_id(last))


class WordPieces:
    """The ids of a text, with or without the model's frame, as the tokenizer of `path` gives
    them. Thread-safe: its tokenizers are set up here and never changed, so concurrent encodes
    only borrow them (changing truncation or padding mid-encode fails with "Already borrowed")."""

    def __init__(self, path: Path, window: int) -> None:
        self._tokenizer = Tokenizer.from_file(str(path))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        # For texts the fast path leaves alone: the tokenizer's own truncation to the window.
        self._windowed = Tokenizer.from_file(str(path))
        self._windowed.enable_truncation(max_length=window)
        self._windowed.no_padding()
        self.window = window
        self.pad_id = int(self._tokenizer.token_to_id("[PAD]") or 0)
        self._frame = _bert_frame(json.loads(self._tokenizer.to_str()), self._tokenizer.token_to_id)
        # The tokenizer matches these in the raw text, before it normalises anything.
        self._specials = [token.content for token in self._tokenizer.get_added_tokens_decoder().values()]
        if any(" " in special for special in self._specials):
            self._frame = None  # cutting at spaces would cut one in two
        self._model = self._tokenizer.model
        self._young: dict[str, list[int]] = {}
        self._old: dict[str, list[int]] = {}

    @property
    def cached_words(self) -> int:
        """Words the cache holds, a word in both generations counted twice."""
        return len(self._young) + len(self._old)

    def _recall(self, word: str, tokenize: Callable[[str], list[int]]) -> list[int]:
        """A word not in the new generation: from the old one, else tokenised; into the new one.
        Each generation is swapped whole (one assignment each), so no lock is needed."""
        pieces = self._old.get(word) or tokenize(word)
        if len(self._young) >= CACHE_MOST:
            self._old, self._young = self._young, {}
        self._young[word] = pieces
        return pieces

    def _wordpiece(self, word: str) -> list[int]:
        # The word is what the normaliser and pre-tokeniser would have made it: straight to
        # WordPiece (a fifth of a whole encode's cost).
        return [token.id for token in self._model.tokenize(word)]

    def _encode(self, piece: str) -> list[int]:
        return list(self._tokenizer.encode(piece, add_special_tokens=False).ids)

    def _words(self, text: str) -> list[list[int]] | None:
        """Each word's pieces, in order; None when the tokenizer must see the text whole."""
        if self._frame is None:
            return None
        get, recall = self._young.get, self._recall
        if text.isascii() and _CONTROL.search(text) is None and not any(s in text for s in self._specials):
            return [get(w) or recall(w, self._wordpiece) for w in _WORD.findall(text.lower())]
        return [get(w) or recall(w, self._encode) for w in text.split(" ") if w]

    def ids(self, text: str) -> list[int]:
        """The text's word pieces, without [CLS] and [SEP], untruncated."""
        words = self._words(text)
        if words is None:
            return list(self._tokenizer.encode(text, add_special_tokens=False).ids)
        return list(chain.from_iterable(words))

    def count(self, text: str) -> int:
        words = self._words(text)
        if words is None:
            return len(self._tokenizer.encode(text, add_special_tokens=False).ids)
        return sum(map(len, words))

    def framed(self, text: str) -> list[int]:
        """What the model is given: [CLS], the word pieces cut to fit the window, [SEP]."""
        words = self._words(text)
        if words is None or self._frame is None:
            return list(self._windowed.encode(text).ids)
        first, last = self._frame
        return [first, *list(chain.from_iterable(words))[: self.window - 2], last]
