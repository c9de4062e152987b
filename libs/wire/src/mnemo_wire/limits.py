"""Limits of the write contract: what ingest accepts, and so what harvest must cut its writes to."""

from __future__ import annotations

from dataclasses import dataclass

from mnemo_platform.settings import parse_positive_int, setting


@dataclass(frozen=True)
class ContentSettings:
    """How large a memory's text may be."""

    max_content_bytes: int = setting(
        "MNEMO_MAX_CONTENT_BYTES", 1_048_576, "Largest note content accepted, in UTF-8 bytes.", parse_positive_int
    )
