"""`mnemo serve harvest` / `mnemo-harvest`: the harvest service alone, configured by environment."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from mnemo_harvest.app import HarvestApp
from mnemo_platform import SettingsError, load
from mnemo_platform.config import (
    DatabaseSettings,
    HarvestSettings,
    IngestSettings,
    ServiceAddresses,
    SummarizerSettings,
)
from mnemo_platform.process import run_process


def build(environ: Mapping[str, str] | None = None) -> HarvestApp:
    database = load(DatabaseSettings, environ)
    if not database.url:
        raise SettingsError(
            "MNEMO_DATABASE_URL is required for `mnemo serve harvest`; `mnemo up` starts an embedded PostgreSQL"
        )
    addresses = load(ServiceAddresses, environ)
    return HarvestApp(
        dsn=database.url,
        address=addresses.listen(addresses.harvest),
        grace_s=addresses.grace_s,
        database=database,
        settings=load(HarvestSettings, environ),
        summarizer=load(SummarizerSettings, environ),
        ingest_target=addresses.ingest,
        search_target=addresses.search,
        call_timeout_s=addresses.call_timeout_s,
        max_content_bytes=load(IngestSettings, environ).max_content_bytes,
    )


def main() -> None:
    sys.exit(run_process("harvest", lambda: [build()]))
