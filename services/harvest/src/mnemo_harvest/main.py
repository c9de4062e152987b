"""`mnemo serve harvest` / `mnemo-harvest`: the harvest service alone, configured by environment."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from mnemo_harvest.app import HarvestApp
from mnemo_harvest.settings import HarvestSettings, RemoteHarvestSettings, SummarizerSettings
from mnemo_platform import load, load_all
from mnemo_platform.config import ServiceAddresses
from mnemo_platform.process import run_process
from mnemo_store.settings import DatabaseSettings
from mnemo_wire import ContentSettings


def build(environ: Mapping[str, str] | None = None) -> HarvestApp:
    database, addresses, settings, summarizer, content = load_all(
        (DatabaseSettings, ServiceAddresses, HarvestSettings, SummarizerSettings, ContentSettings), environ
    )
    return HarvestApp(
        dsn=database.url_for("harvest"),
        address=addresses.listen(addresses.harvest),
        grace_s=addresses.grace_s,
        database=database,
        settings=settings,
        summarizer=summarizer,
        ingest_target=addresses.ingest,
        search_target=addresses.search,
        call_timeout_s=addresses.call_timeout_s,
        max_content_bytes=content.max_content_bytes,
    )


def remote_url(given: str = "", environ: Mapping[str, str] | None = None) -> str:
    """The gateway a remote harvester writes through: `given` (`--remote`), else MNEMO_HARVEST_REMOTE_URL."""
    return given or load(RemoteHarvestSettings, environ).url


def main() -> None:
    if remote_url():
        # The token is the CLI's (MNEMO_TOKEN): a remote harvester is a client of the gateway.
        raise SystemExit("MNEMO_HARVEST_REMOTE_URL is set: run the remote harvester with `mnemo serve harvest`")
    sys.exit(run_process("harvest", lambda: [build()]))
