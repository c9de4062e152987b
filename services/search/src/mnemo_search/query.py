"""Turning user text into literal search terms: no operator in the text ever acts as one."""

from __future__ import annotations

import re

# Words, keeping inner hyphens and apostrophes (nano-brain, don't); everything else separates.
_TERM = re.compile(r"\w+(?:['’-]\w+)*")
# Beyond this many distinct terms a query is a pasted document; the rest add cost, not recall.
MAX_TERMS = 64


def literal_terms(text: str) -> list[str]:
    """Distinct terms in order of appearance, lower-cased.

    The terms are later joined and parsed by websearch_to_tsquery. Because a term contains
    only word characters (plus inner hyphens and apostrophes), quotes and a leading `-` never
    reach it; the one word websearch_to_tsquery would read as an operator, `or`, is dropped
    (it is an English stop word, so it would never match anyway).
    """
    seen: dict[str, None] = {}
    for match in _TERM.finditer(text.lower()):
        term = match.group(0)
        if term != "or" and term not in seen:
            seen[term] = None
            if len(seen) == MAX_TERMS:
                break
    return list(seen)


def all_terms_query(terms: list[str]) -> str:
    """websearch_to_tsquery text matching every term."""
    return " ".join(terms)


def any_term_query(terms: list[str]) -> str:
    """websearch_to_tsquery text matching any term: the relaxed form."""
    return " or ".join(terms)
