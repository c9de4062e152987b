"""`mnemo serve search` / `mnemo-search`: the search service alone, configured by environment."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from mnemo_embed.settings import EmbeddingSettings
from mnemo_platform import load_all
from mnemo_platform.config import ServiceAddresses
from mnemo_platform.process import run_process
from mnemo_search.app import SearchApp
from mnemo_search.settings import SearchSettings
from mnemo_store.settings import DatabaseSettings
from mnemo_wire import TrustSettings


def build(environ: Mapping[str, str] | None = None) -> SearchApp:
    database, addresses, embedding, settings, trust = load_all(
        (DatabaseSettings, ServiceAddresses, EmbeddingSettings, SearchSettings, TrustSettings), environ
    )
    return SearchApp(
        dsn=database.url_for("search"),
        address=addresses.listen(addresses.search),
        grace_s=addresses.grace_s,
        database=database,
        embedding=embedding,
        settings=settings,
        trust=trust,
    )


def main() -> None:
    sys.exit(run_process("search", lambda: [build()]))
