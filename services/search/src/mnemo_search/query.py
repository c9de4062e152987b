"""Turning user text into literal search terms: no operator in the text ever acts as one."""

from __future__ import annotations

import re

# Whitespace-separated pieces, without double quotes: each becomes one quoted phrase below.
_PIECE = re.compile(r'[^\s"]+')
_WORDLIKE = re.compile(r"\w")
_WORD = re.compile(r"\w+")
# Beyond this many distinct terms a query is a pasted document; the rest add cost, not recall.
MAX_TERMS = 64


def literal_terms(text: str) -> list[str]:
    """Distinct whitespace-separated terms in order of appearance, lower-cased, quotes removed.

    Each term is later wrapped in double quotes for websearch_to_tsquery, which reads quoted
    text as a phrase and interprets nothing inside it: `or`, a leading `-`, `&`, `|`, `!`
    and `<->` are just text. PostgreSQL's own parser then splits the phrase, so copied
    tokens such as `docs/release.md`, `ops@example.com` or `1.85.3` match as they were indexed.
    """
    seen: dict[str, None] = {}
    for match in _PIECE.finditer(text.lower()):
        term = match.group(0)
        if _WORDLIKE.search(term) and term not in seen:
            seen[term] = None
            if len(seen) == MAX_TERMS:
                break
    return list(seen)


def all_terms_query(terms: list[str]) -> str:
    """websearch_to_tsquery text matching every term."""
    return " ".join(f'"{term}"' for term in terms)


def relaxed_terms(terms: list[str]) -> list[str]:
    """The terms and the words inside them (`title:foo` -> `title:foo`, `title`, `foo`).

    A term that PostgreSQL reads as a phrase of several words (`title:foo` is `titl <-> foo`)
    must be able to relax to its words, or a note holding only one of them is never found.
    """
    pieces: dict[str, None] = {}
    for term in terms:
        pieces[term] = None
        for word in _WORD.findall(term):
            pieces.setdefault(word, None)
    return list(pieces)


def any_term_query(terms: list[str]) -> str:
    """websearch_to_tsquery text matching any term or any word inside one: the relaxed form."""
    return " or ".join(f'"{term}"' for term in relaxed_terms(terms))
