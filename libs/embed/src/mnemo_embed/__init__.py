"""Pluggable text embedders for Mnemo and the chunker that fits text to their window."""

from mnemo_embed.base import Embedder, EmbedderBase, EmbedderRejected, EmbedderUnavailable, Readiness
from mnemo_embed.chunking import Chunk, chunk_text
from mnemo_embed.factory import build_embedder
from mnemo_embed.hashing import HashEmbedder
from mnemo_embed.openai import OpenAIEmbedder

__all__ = [
    "Chunk",
    "Embedder",
    "EmbedderBase",
    "EmbedderRejected",
    "EmbedderUnavailable",
    "HashEmbedder",
    "OpenAIEmbedder",
    "Readiness",
    "build_embedder",
    "chunk_text",
]
