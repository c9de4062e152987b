"""Building the configured embedder; one instance per process, shared by its services."""

from __future__ import annotations

from mnemo_embed.base import Embedder
from mnemo_embed.settings import EmbeddingSettings

_instances: dict[EmbeddingSettings, Embedder] = {}


def build_embedder(settings: EmbeddingSettings) -> Embedder:
    """The embedder `settings` describe; under `mnemo up` ingest and search get the same one."""
    existing = _instances.get(settings)
    if existing is not None:
        return existing
    embedder: Embedder
    if settings.embedder == "local":
        from mnemo_embed.local import LocalEmbedder

        embedder = LocalEmbedder(
            settings.model,
            batch_size=settings.batch_size,
            threads=settings.threads,
            cache_dir=settings.resolved_cache_dir,
            query_int8=settings.query_int8,
        )
    elif settings.embedder == "openai":
        from mnemo_embed.openai import OpenAIEmbedder

        embedder = OpenAIEmbedder(
            url=settings.url,
            model=settings.model,
            dimension=settings.dimension,
            max_tokens=settings.max_tokens,
            api_key=settings.api_key,
            timeout_s=settings.timeout_s,
        )
    else:
        from mnemo_embed.hashing import HashEmbedder

        embedder = HashEmbedder(settings.dimension or 64)
    _instances[settings] = embedder
    return embedder
