"""Mnemo's public surface: MCP over streamable HTTP and REST, translated into gRPC calls."""

from mnemo_gateway.app import GatewayApp

__all__ = ["GatewayApp"]
