"""Readers for the memory tools people leave: each turns the tool's own store into write bodies."""

from __future__ import annotations

from mnemo_cli.peers.base import PeerError, PeerRecord, Unreadable
from mnemo_cli.peers.basic_memory import read_basic_memory
from mnemo_cli.peers.claude_mem import read_claude_mem
from mnemo_cli.peers.mcp_memory_service import read_mcp_memory_service

# The tool names `mnemo import --from` takes, each with its reader.
READERS = {
    "mcp-memory-service": read_mcp_memory_service,
    "basic-memory": read_basic_memory,
    "claude-mem": read_claude_mem,
}

__all__ = ["READERS", "PeerError", "PeerRecord", "Unreadable"]
