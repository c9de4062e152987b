"""Mnemo's read service: hybrid lexical + vector search, get, list, workspaces and status."""

from mnemo_search.app import SERVICE_NAME, SearchApp

__all__ = ["SERVICE_NAME", "SearchApp"]
