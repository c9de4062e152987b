"""`mnemo serve ingest` / `mnemo-ingest`: the ingest service alone, configured by environment."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from mnemo_ingest.app import IngestApp
from mnemo_platform import SettingsError, load
from mnemo_platform.config import DatabaseSettings, EmbeddingSettings, IngestSettings, ServiceAddresses, TrustSettings
from mnemo_platform.process import run_process


def build(environ: Mapping[str, str] | None = None) -> IngestApp:
    database = load(DatabaseSettings, environ)
    if not database.url:
        raise SettingsError(
            "MNEMO_DATABASE_URL is required for `mnemo serve ingest`; `mnemo up` starts an embedded PostgreSQL"
        )
    addresses = load(ServiceAddresses, environ)
    return IngestApp(
        dsn=database.url,
        address=addresses.listen(addresses.ingest),
        grace_s=addresses.grace_s,
        database=database,
        embedding=load(EmbeddingSettings, environ),
        settings=load(IngestSettings, environ),
        trust=load(TrustSettings, environ),
    )


def main() -> None:
    sys.exit(run_process("ingest", lambda: [build()]))
