"""One function per operation: input model -> gRPC request -> JSON-ready dict. MCP and REST share them.

The operations are grouped by concern, one module each; `Operations` is all of them together.
"""

from __future__ import annotations

from mnemo_gateway.operations.admin import AdminOperations
from mnemo_gateway.operations.corrections import CorrectionOperations
from mnemo_gateway.operations.harvest import HarvestOperations
from mnemo_gateway.operations.imports import ImportOperations
from mnemo_gateway.operations.memories import MemoryOperations
from mnemo_gateway.operations.review import ReviewOperations
from mnemo_gateway.operations.transfer import TransferOperations


class Operations(
    MemoryOperations,
    CorrectionOperations,
    AdminOperations,
    HarvestOperations,
    TransferOperations,
    ImportOperations,
    ReviewOperations,
):
    """The gateway's operations; each is exactly one gRPC call (plus the default-workspace registration)."""


__all__ = ["Operations"]
