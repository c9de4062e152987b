"""How a memory is labelled for a reader (status, provenance, kind, date), in every answer alike.

The gateway labels search results and reads with it and the search service labels the lines of the
wake-up packet, so an agent reads the same trust label wherever a memory reaches it.
"""

from __future__ import annotations

from mnemo.common.v1 import common_pb2
from mnemo_platform.enums import enum_label

# Text an agent did not write itself for this project: shown to the model as quoted data.
QUOTED_PROVENANCES = frozenset(
    enum_label(common_pb2.Provenance, value)
    for value in (
        common_pb2.PROVENANCE_HARVESTED_SUMMARY,
        common_pb2.PROVENANCE_HARVESTED_TRANSCRIPT,
        common_pb2.PROVENANCE_IMPORTED,
        common_pb2.PROVENANCE_EXTRACTED,
    )
)


def _day(memory: common_pb2.Memory) -> str:
    stamp = memory.updated_at
    return stamp.ToJsonString()[:10] if stamp.seconds or stamp.nanos else ""


def memory_label(memory: common_pb2.Memory, brief: bool = False) -> str:
    """What an agent reads first: status, how it was made and what it is, when, and (unless brief, as
    the wake-up packet has it, where every line is of one workspace or global) who wrote it, where."""
    status = enum_label(common_pb2.MemoryStatus, memory.status)
    provenance = enum_label(common_pb2.Provenance, memory.provenance).replace("_", " ")
    kind = enum_label(common_pb2.MemoryKind, memory.kind)
    # Shown first, so no reader takes flagged text at face value.
    flag = f"suspicious: {', '.join(memory.suspicious)} · " if memory.suspicious else ""
    who = "" if brief else f" · by {memory.author} in {memory.workspace_id}"
    return f"[{flag}{status} · {provenance} {kind} · {_day(memory)}{who}]"
