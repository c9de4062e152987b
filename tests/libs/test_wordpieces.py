"""WordPieces gives the bundled tokenizer's own ids, on its fast path and off it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from mnemo_embed import wordpieces
from mnemo_embed.local import bundled_model_dir
from mnemo_embed.wordpieces import WordPieces

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = bundled_model_dir() / "tokenizer.json"
WINDOW = 256

# What an agent's notes hold, and what BERT's normaliser and pre-tokeniser treat specially:
# punctuation of every kind, control characters (dropped, joining what is either side), the
# special tokens' own text (matched before anything else, case and all), words past WordPiece's
# 100 characters, digits, upper case, tabs and carriage returns.
_PARTS = [
    *"the deploy pipeline runs migrations before traffic shifts Kubernetes OAuth2 refactor".split(),  # noqa: SIM905
    *"mnemo_ingest.worker pg_stat_statements src/app/main.py --dry-run 0x1f3a e2e v1.2.3 k8s".split(),  # noqa: SIM905
    *"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\n\n",
    "\x00",
    "\x07",
    "\x0b",
    "\x0c",
    "\x1f",
    "\x7f",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "[PAD]",
    "[UNK]",
    "[cls]",
    "[mask",
    "a" * 101,
    "Z" * 100,
    "9" * 150,
    "unbelievablyinterchangeable",
    "ERR_CONNECTION_REFUSED",
]
# Beyond ASCII: accents precomposed and combining, CJK (a word per character), typographic
# punctuation, spaces and joiners that are not " ", emoji, a letter that lowercases to two.
_WIDE = ["café", "e\u0301", "\u0301", "naïve", "中文", "—", "“quoted”", "…"]
_WIDE += ["\u00a0", "\u3000", "\u200b", "\ufffd", "🚀", "İ", "ß"]


def _fuzz(count: int, seed: int, parts: list[str] = _PARTS) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        chosen = rng.choices(parts, k=rng.randint(0, 40))
        texts.append("".join(p if rng.random() < 0.5 else " " + p for p in chosen))
    return texts


def _corpora() -> list[str]:
    """Real text from the repository: SciFact abstracts, LoCoMo turns, session fixtures' lines."""
    scifact = [json.loads(line) for line in (ROOT / "bench/data/scifact/corpus.jsonl").open()][:300]
    texts = [doc["title"] + "\n" + doc["text"] for doc in scifact]
    locomo = json.loads((ROOT / "bench/data/locomo/locomo-dev.json").read_text())
    conversation = locomo[0]["conversation"]
    sessions = [turns for key, turns in conversation.items() if key.startswith("session_") and isinstance(turns, list)]
    texts += [turn["text"] for turns in sessions for turn in turns][:300]
    for path in sorted((ROOT / "tests/fixtures/sessions").rglob("*.jsonl"))[:6]:
        texts += path.read_text(errors="replace").splitlines()[:50]
    return texts


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    plain = Tokenizer.from_file(str(TOKENIZER))
    plain.no_truncation()
    plain.no_padding()
    return plain


@pytest.fixture(scope="module")
def windowed() -> Tokenizer:
    framed = Tokenizer.from_file(str(TOKENIZER))
    framed.enable_truncation(max_length=WINDOW)
    framed.no_padding()
    return framed


def _agrees(pieces: WordPieces, tokenizer: Tokenizer, windowed: Tokenizer, texts: list[str]) -> None:
    for text in texts:
        assert pieces.ids(text) == tokenizer.encode(text, add_special_tokens=False).ids, repr(text)
        assert pieces.count(text) == len(tokenizer.encode(text, add_special_tokens=False).ids), repr(text)
        assert pieces.framed(text) == windowed.encode(text).ids, repr(text)


def test_ascii_text_of_every_awkward_kind_gets_the_tokenizers_ids(tokenizer: Tokenizer, windowed: Tokenizer) -> None:
    pieces = WordPieces(TOKENIZER, WINDOW)
    texts = _fuzz(3000, seed=7)
    # The same texts again: the second time every word comes from the cache.
    _agrees(pieces, tokenizer, windowed, texts + texts)
    # The fast path was taken (words were cached), and the texts cover what it must get right.
    assert pieces.cached_words > 50
    for awkward in ("\x0b", "[CLS]", "a" * 101, "_", "\r"):
        assert any(awkward in text for text in texts)


def test_real_notes_turns_and_sessions_get_the_tokenizers_ids(tokenizer: Tokenizer, windowed: Tokenizer) -> None:
    pieces = WordPieces(TOKENIZER, WINDOW)
    texts = _corpora()
    assert len(texts) > 600
    _agrees(pieces, tokenizer, windowed, texts)
    assert pieces.cached_words > 1000
    # Some are cut to the window, and framed by [CLS] and [SEP].
    assert any(len(pieces.framed(text)) == WINDOW for text in texts)


def test_text_beyond_ascii_gets_the_tokenizers_ids_a_space_separated_piece_at_a_time(
    tokenizer: Tokenizer, windowed: Tokenizer
) -> None:
    pieces = WordPieces(TOKENIZER, WINDOW)
    texts = _fuzz(3000, seed=5, parts=_PARTS + _WIDE)
    _agrees(pieces, tokenizer, windowed, texts + texts)
    assert sum(not text.isascii() for text in texts) > 2000
    # Cut at its one space, each piece cached: the tokenizer saw the halves, not the text.
    fresh = WordPieces(TOKENIZER, WINDOW)
    _agrees(fresh, tokenizer, windowed, ["中文的笔记 café—naïve"])
    assert fresh.cached_words == 2


def test_a_tokenizer_that_is_not_bert_s_is_always_asked(
    tmp_path: Path, tokenizer: Tokenizer, windowed: Tokenizer
) -> None:
    config = json.loads(TOKENIZER.read_text())
    config["normalizer"]["lowercase"] = False  # case now matters: the fast path's lowercasing would be wrong
    cased = tmp_path / "tokenizer.json"
    cased.write_text(json.dumps(config))
    pieces = WordPieces(cased, WINDOW)
    reference = Tokenizer.from_file(str(cased))
    reference.no_padding()
    reference.no_truncation()
    text = "Deploy the OAuth2 Refactor"
    assert pieces.ids(text) == reference.encode(text, add_special_tokens=False).ids
    assert pieces.ids(text) != tokenizer.encode(text, add_special_tokens=False).ids  # differs from lowercased
    assert pieces.cached_words == 0
    # Positive control: the bundled one caches the same text.
    bundled = WordPieces(TOKENIZER, WINDOW)
    _agrees(bundled, tokenizer, windowed, [text])
    assert bundled.cached_words == 4


def test_the_cache_starts_again_past_its_bound(
    monkeypatch: pytest.MonkeyPatch, tokenizer: Tokenizer, windowed: Tokenizer
) -> None:
    monkeypatch.setattr(wordpieces, "CACHE_MOST", 20)
    pieces = WordPieces(TOKENIZER, WINDOW)
    texts = _fuzz(300, seed=11)
    _agrees(pieces, tokenizer, windowed, texts)
    assert 0 < pieces.cached_words <= 40  # two generations


def test_a_bert_tokenizer_framed_by_bert_processing_takes_the_fast_path_too(tmp_path: Path) -> None:
    config = json.loads(TOKENIZER.read_text())
    config["post_processor"] = {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]}
    config["padding"] = config["truncation"] = None
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(config))
    plain, framed = Tokenizer.from_file(str(path)), Tokenizer.from_file(str(path))
    framed.enable_truncation(max_length=WINDOW)
    pieces = WordPieces(path, WINDOW)
    _agrees(pieces, plain, framed, _fuzz(200, seed=3) + _corpora()[:50])
    assert pieces.cached_words > 50
