"""Chunking fits the model's window with the title as context, and loses no text."""

from __future__ import annotations

import random
import re

import pytest

from mnemo_embed import chunk_text
from mnemo_embed.local import LocalEmbedder


@pytest.fixture(scope="module")
def model() -> LocalEmbedder:
    # Reads the bundled tokenizer and config only; no session is built.
    return LocalEmbedder()


def _words(text: str) -> list[str]:
    return re.findall(r"\S+", text)


def _long_note(seed: int) -> str:
    rng = random.Random(seed)
    vocabulary = "the deploy pipeline runs migrations before traffic shifts to new pods safely".split()  # noqa: SIM905
    paragraphs = []
    for _ in range(12):
        sentences = [" ".join(rng.choices(vocabulary, k=rng.randint(5, 40))) + "." for _ in range(rng.randint(1, 9))]
        paragraphs.append(" ".join(sentences))
    # One paragraph with no sentence breaks at all, and one giant unbroken token (a hash, base64...).
    paragraphs.append(" ".join(rng.choices(vocabulary, k=600)))
    paragraphs.append("x" * 5000)
    return "\n\n".join(paragraphs)


def test_the_bundled_model_reports_its_window_and_dimension(model: LocalEmbedder) -> None:
    assert model.dimension == 384
    assert model.max_tokens == 256
    assert model.model == "sentence-transformers/all-MiniLM-L6-v2"


@pytest.mark.parametrize("seed", range(5))
def test_every_chunk_fits_the_window_and_no_text_is_lost(model: LocalEmbedder, seed: int) -> None:
    content = _long_note(seed)
    title = "Deploy pipeline notes"
    chunks = chunk_text(title, content, model.count_tokens, model.max_tokens)
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.context == title
        # +2 for [CLS] and [SEP], which the model adds around what it is given.
        assert model.count_tokens(chunk.embedding_input()) + 2 <= model.max_tokens
    rejoined = "".join("".join(_words(c.text)) for c in chunks)
    assert rejoined == "".join(_words(content))


def test_a_short_note_is_one_chunk_and_a_huge_title_is_shortened_as_context(model: LocalEmbedder) -> None:
    chunks = chunk_text("A title", "One short paragraph.", model.count_tokens, model.max_tokens)
    assert [(c.ordinal, c.text) for c in chunks] == [(0, "One short paragraph.")]
    huge_title = " ".join(["word"] * 400)
    chunks = chunk_text(huge_title, "body text", model.count_tokens, model.max_tokens)
    assert model.count_tokens(chunks[0].context) <= 48
    assert chunks[0].text == "body text"
