"""Request bodies of the gateway's operations; REST uses them as-is, MCP tools reuse their fields."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Kind = Literal["note", "decision", "lesson", "session", "import"]
Mode = Literal["hybrid", "lexical", "semantic"]
WorkspaceRef = str | None

# Deeper JSON than this cannot cross gRPC (protobuf's recursion limit is 100 for a Struct).
MAX_METADATA_DEPTH = 32


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


WORKSPACE_DOC = (
    "Workspace to use: its id, its name, or a path at or under its registered root. "
    "Defaults to the workspace in the MCP URL (?workspace=) or the server's default workspace."
)


class WriteInput(_Body):
    content: str = Field(description="The text to remember: self-contained, in full sentences.")
    title: str = Field("", description="A short heading; derived from the first line when empty.")
    kind: Kind = Field("note", description="note, decision, lesson, session or import.")
    tags: list[str] = Field(default_factory=list, description="Labels to filter on later.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free structured data kept beside the memory.")
    source_uri: str = Field(
        "", description="Where the content came from; writing the same source again updates that memory."
    )
    idempotency_key: str = Field("", description="Makes a retried write return the original result.")
    provenance: Literal["agent", "human"] | None = Field(
        None, description="Who wrote it; MCP writes are `agent`, REST and CLI writes `human` by default."
    )
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)

    @field_validator("metadata")
    @classmethod
    def _shallow(cls, value: dict[str, Any]) -> dict[str, Any]:
        if _depth(value) > MAX_METADATA_DEPTH:
            raise ValueError(f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels")
        return value


class UpdateInput(_Body):
    content: str = Field(description="The new full text; the previous version stays in the history.")
    title: str | None = Field(None, description="A new title; unchanged when omitted.")
    tags: list[str] | None = Field(None, description="New tags replacing the old; unchanged when omitted.")
    metadata: dict[str, Any] | None = Field(None, description="New metadata replacing the old; unchanged when omitted.")
    expected_version: int = Field(
        0,
        ge=0,
        le=2**31 - 1,
        description="Refuse the update unless the memory is still at this version (0: don't check).",
    )
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)

    @field_validator("metadata")
    @classmethod
    def _shallow(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and _depth(value) > MAX_METADATA_DEPTH:
            raise ValueError(f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels")
        return value


class SearchInput(_Body):
    query: str = Field(description="What to look for, in plain words; taken literally (no operators).")
    mode: Mode = Field("hybrid", description="hybrid (default), lexical (exact words) or semantic (meaning).")
    limit: int = Field(0, ge=0, le=2**31 - 1, description="How many results (default 10, at most 100).")
    kinds: list[Kind] = Field(default_factory=list, description="Only these kinds.")
    tags: list[str] = Field(default_factory=list, description="Only memories carrying all of these tags.")
    created_after: datetime | None = Field(None, description="Only memories created at or after this time.")
    created_before: datetime | None = Field(None, description="Only memories created before this time.")
    updated_after: datetime | None = Field(None, description="Only memories updated at or after this time.")
    updated_before: datetime | None = Field(None, description="Only memories updated before this time.")
    explain: bool = Field(False, description="Include each leg's rank and score, the fusion and the recency factor.")
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)


class WorkspaceInput(_Body):
    path: str = Field("", description="Absolute root directory of the project.")
    name: str = Field("", description="Display name (a named scope when no path is given).")


def describe(model: type[BaseModel], field: str) -> str:
    """The documented description of one field, so MCP tools and REST say the same thing."""
    return model.model_fields[field].description or ""
