"""Every settings class a Mnemo process may load, from the package that owns each (the README's table)."""

from __future__ import annotations

from mnemo_embed.settings import EmbeddingSettings
from mnemo_gateway.settings import GatewaySettings
from mnemo_harvest.settings import HarvestSettings, RemoteHarvestSettings, SummarizerSettings
from mnemo_ingest.settings import IngestSettings
from mnemo_platform.config import AuthSettings, LogSettings, ServiceAddresses, TelemetrySettings
from mnemo_search.settings import SearchSettings
from mnemo_store.settings import DatabaseSettings
from mnemo_wire import ContentSettings, TrustSettings

SERVER_SETTINGS: tuple[type, ...] = (
    DatabaseSettings,
    EmbeddingSettings,
    ContentSettings,
    IngestSettings,
    SearchSettings,
    TrustSettings,
    HarvestSettings,
    RemoteHarvestSettings,
    SummarizerSettings,
    ServiceAddresses,
    GatewaySettings,
    AuthSettings,
    TelemetrySettings,
    LogSettings,
)
