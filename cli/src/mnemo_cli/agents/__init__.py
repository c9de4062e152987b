"""Wiring coding agents to Mnemo: their config files (`mnemo init`) and the hooks they call (`mnemo hook`).

Kept free of protobuf and gRPC: a hook starts with every agent session and must start fast.
"""

from __future__ import annotations

# The agents Mnemo wires and harvests: the labels of the harvest proto's Agent enum, written out
# here because the hook path must not load the generated code (a test keeps the two equal).
AGENTS = ("claude-code", "codex", "opencode", "pi")
