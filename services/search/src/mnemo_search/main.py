"""`mnemo serve search` / `mnemo-search`: the search service alone, configured by environment."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from mnemo_platform import SettingsError, load
from mnemo_platform.config import DatabaseSettings, EmbeddingSettings, SearchSettings, ServiceAddresses, TrustSettings
from mnemo_platform.process import run_process
from mnemo_search.app import SearchApp


def build(environ: Mapping[str, str] | None = None) -> SearchApp:
    database = load(DatabaseSettings, environ)
    if not database.url:
        raise SettingsError(
            "MNEMO_DATABASE_URL is required for `mnemo serve search`; `mnemo up` starts an embedded PostgreSQL"
        )
    addresses = load(ServiceAddresses, environ)
    return SearchApp(
        dsn=database.url,
        address=addresses.listen(addresses.search),
        grace_s=addresses.grace_s,
        database=database,
        embedding=load(EmbeddingSettings, environ),
        settings=load(SearchSettings, environ),
        trust=load(TrustSettings, environ),
    )


def main() -> None:
    sys.exit(run_process("search", lambda: [build()]))
