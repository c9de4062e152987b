"""What the lexical index needs beyond the text itself."""

from __future__ import annotations

import re

# A separator between two word characters marks a token PostgreSQL's parser keeps whole (paths,
# file names, e-mail addresses, hosts, dotted identifiers, versions). Hyphens are not here:
# the parser already indexes the parts of hyphenated words.
_INNER_SEPARATOR = re.compile(r"\w[./@:_\\]+\w")
_WORD = re.compile(r"[^\W_]+")


def compound_parts(text: str) -> str:
    """The words inside compound tokens, space-separated, each once, in order of appearance.

    Linear in the text: whitespace-split tokens are scanned once each (a single pattern over
    the whole text backtracks quadratically on a megabyte without separators).
    """
    parts: dict[str, None] = {}
    for token in text.split():
        if _INNER_SEPARATOR.search(token):
            for word in _WORD.findall(token):
                parts.setdefault(word, None)
    return " ".join(parts)
