"""The review web UI at /ui: server-rendered pages over the same operations as REST and MCP."""

from __future__ import annotations

from mnemo_gateway.ui.routes import build_ui_router, static_files
from mnemo_gateway.ui.session import Sessions
from mnemo_gateway.ui.web import WebUI

__all__ = ["Sessions", "WebUI", "build_ui_router", "static_files"]
