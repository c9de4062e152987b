"""What every operation shares: the channels, the workspace a call is about, and the call itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo_gateway.backends import Backends, call
from mnemo_gateway.errors import CallError
from mnemo_platform import current_call

T = TypeVar("T")
log = structlog.get_logger("mnemo.gateway")


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
        """One call; a workspace registered on first use (see `registration`) is registered and the call retried once.

        Registering only when a call reports it missing (rather than before every first call)
        means a request refused for bad input leaves no trace, not even the default workspace; a
        call naming a memory in a project path not yet registered is refused as it is.
        The reason tells a missing workspace from anything else NOT_FOUND (a memory, a token).
        """
        try:
            return await call(method, request)
        except CallError as exc:
            registration = self.registration(getattr(request, "workspace", None))
            # A call about one memory (its id) names a workspace it expects to exist: a project
            # path is not registered for it, or a refused call (a memory not found) would leave a
            # workspace behind. The default workspace is registered whatever the call, once.
            names_a_memory = bool(getattr(request, "id", "") or getattr(request, "memory_id", ""))
            if (
                exc.reason != reasons_pb.ERROR_REASON_WORKSPACE_NOT_FOUND
                or registration is None
                or (names_a_memory and registration.root_path)
            ):
                raise
            await self.register(registration)
            return await call(method, request)

    def registration(self, workspace: str | None) -> ingest_pb.AddWorkspaceRequest | None:
        """How a workspace that a call found missing is registered on first use, if it is: the default one by
        name, and a project directory named by its absolute path (what `mnemo init` puts in an agent's MCP URL,
        and a hook's working directory). Ingest lets only an admin register, so with tokens on an agent's
        token is refused; in local mode the single user is admin."""
        if not workspace:
            return None
        if workspace == self.default_workspace:
            return ingest_pb.AddWorkspaceRequest(name=workspace)
        if workspace.startswith("/"):
            return ingest_pb.AddWorkspaceRequest(root_path=workspace)
        return None

    async def register(self, registration: ingest_pb.AddWorkspaceRequest) -> None:
        response = await call(self.backends.ingest.AddWorkspace, registration)
        if response.created:
            # Ingest audits the registration (workspace_add); this says why it happened.
            log.info(
                "workspace_registered_on_first_use",
                workspace=response.workspace.id,
                root=response.workspace.root_path,
                name=response.workspace.name,
                principal=current_call().principal,
            )
