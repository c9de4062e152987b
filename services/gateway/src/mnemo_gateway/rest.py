"""The REST surface under /api/v1: each route is a thin call into Operations."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from mnemo_gateway.operations import Operations
from mnemo_gateway.schemas import WORKSPACE_DOC, Kind, SearchInput, UpdateInput, WorkspaceInput, WriteInput

WorkspaceParam = Annotated[str | None, Query(description=WORKSPACE_DOC)]
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"description": text}
    for code, text in {
        400: "Invalid input; the body says which field and why",
        404: "No such memory or workspace",
        409: "Conflict (idempotency key reused, version mismatch)",
        413: "Request body too large",
        503: "A Mnemo service is unavailable",
    }.items()
}


def build_router(operations: Operations) -> APIRouter:
    router = APIRouter(prefix="/api/v1", responses=ERROR_RESPONSES)

    @router.post("/memories", status_code=201, summary="Write a memory")
    async def write_memory(body: WriteInput) -> Any:
        result = await operations.write(body, None, provenance="human")
        created = result["outcome"] in ("created", "new_version")
        return JSONResponse(result, status_code=201 if created else 200)

    @router.get("/memories", summary="List memories, most recently updated first")
    async def list_memories(
        workspace: WorkspaceParam = None,
        page_size: Annotated[
            int, Query(ge=0, le=2**31 - 1, description="Memories per page (default 10, at most 100).")
        ] = 0,
        page_token: Annotated[str, Query(description="next_page_token of the previous page.")] = "",
        kind: Annotated[list[Kind] | None, Query(description="Only these kinds.")] = None,
        tag: Annotated[list[str] | None, Query(description="Only memories with all these tags.")] = None,
    ) -> dict[str, Any]:
        return await operations.list(workspace, page_size, page_token, kind or [], tag or [])

    @router.get("/memories/{memory_id}", summary="Get one memory with its content")
    async def get_memory(memory_id: str, workspace: WorkspaceParam = None) -> dict[str, Any]:
        return await operations.get(memory_id, workspace, None)

    @router.patch("/memories/{memory_id}", summary="Update a memory (a new version; the old is kept)")
    async def update_memory(memory_id: str, body: UpdateInput) -> dict[str, Any]:
        return await operations.update(memory_id, body, None)

    @router.post("/search", summary="Hybrid, lexical or semantic search")
    async def search(body: SearchInput) -> dict[str, Any]:
        return await operations.search(body, None)

    @router.get("/workspaces", summary="List workspaces")
    async def list_workspaces() -> dict[str, Any]:
        return await operations.list_workspaces()

    @router.post("/workspaces", status_code=201, summary="Register a workspace by root path or name")
    async def add_workspace(body: WorkspaceInput) -> Any:
        result = await operations.add_workspace(body)
        return JSONResponse(result, status_code=201 if result["created"] else 200)

    @router.get("/status", summary="Counts, embedding queue and embedder state")
    async def status(workspace: WorkspaceParam = None) -> dict[str, Any]:
        return await operations.status(workspace)

    return router
