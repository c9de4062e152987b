"""`mnemo serve ingest` / `mnemo-ingest`: the ingest service alone, configured by environment."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from mnemo_embed.settings import EmbeddingSettings
from mnemo_ingest.app import IngestApp
from mnemo_ingest.settings import IngestSettings
from mnemo_platform import load_all
from mnemo_platform.config import ServiceAddresses
from mnemo_platform.process import run_process
from mnemo_store.settings import DatabaseSettings
from mnemo_wire import ContentSettings, TrustSettings


def build(environ: Mapping[str, str] | None = None) -> IngestApp:
    database, addresses, embedding, settings, trust, content = load_all(
        (DatabaseSettings, ServiceAddresses, EmbeddingSettings, IngestSettings, TrustSettings, ContentSettings), environ
    )
    return IngestApp(
        dsn=database.url_for("ingest"),
        address=addresses.listen(addresses.ingest),
        grace_s=addresses.grace_s,
        database=database,
        embedding=embedding,
        settings=settings,
        trust=trust,
        content=content,
    )


def main() -> None:
    sys.exit(run_process("ingest", lambda: [build()]))
