"""What every operation shares: the channels, the workspace a call is about, and the call itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo_gateway.backends import Backends, call
from mnemo_gateway.errors import CallError
from mnemo_platform import current_call

T = TypeVar("T")


class OperationsBase:
    """The state every group of operations works with; each operation is exactly one gRPC call
    (plus the default-workspace registration)."""

    def __init__(self, backends: Backends, default_workspace: str) -> None:
        self.backends = backends
        self.default_workspace = default_workspace

    def workspace(self, *candidates: str | None) -> str:
        """The first workspace named, else the token's only workspace, else the default one."""
        for candidate in candidates:
            if candidate and candidate.strip():
                return candidate.strip()
        caller = current_call()
        if not caller.all_workspaces and len(caller.workspaces) == 1:
            return caller.workspaces[0]
        return self.default_workspace

    async def _call(self, method: Callable[[Any], Awaitable[T]], request: Any) -> T:
        """One call; the default workspace is registered on first use and the call retried once.

        Registering only when a call reports it missing (rather than before every first call)
        means a request refused for bad input leaves no trace, not even the default workspace.
        The reason tells a missing workspace from anything else NOT_FOUND (a memory, a token).
        """
        try:
            return await call(method, request)
        except CallError as exc:
            if (
                exc.reason != reasons_pb.ERROR_REASON_WORKSPACE_NOT_FOUND
                or getattr(request, "workspace", None) != self.default_workspace
            ):
                raise
            await call(self.backends.ingest.AddWorkspace, ingest_pb.AddWorkspaceRequest(name=self.default_workspace))
            return await call(method, request)
