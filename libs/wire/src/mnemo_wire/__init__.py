"""What ingest and search answer with: store rows as protobuf messages, trust weighting, and the write limits."""

from mnemo_wire.limits import ContentSettings
from mnemo_wire.messages import (
    audit_message,
    from_timestamp,
    memory_message,
    parse_memory_id,
    proposal_message,
    struct,
    timestamp,
    token_message,
    tombstone_message,
    workspace_message,
)
from mnemo_wire.trust import TrustSettings

__all__ = [
    "ContentSettings",
    "TrustSettings",
    "audit_message",
    "from_timestamp",
    "memory_message",
    "parse_memory_id",
    "proposal_message",
    "struct",
    "timestamp",
    "token_message",
    "tombstone_message",
    "workspace_message",
]
