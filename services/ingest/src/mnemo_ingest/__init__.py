"""Mnemo's write service: notes, versions, workspaces, and the embedding queue's workers."""

from mnemo_ingest.app import SERVICE_NAME, IngestApp

__all__ = ["SERVICE_NAME", "IngestApp"]
