"""Request bodies of the gateway's operations; REST uses them as-is, MCP tools reuse their fields."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from mnemo.common.v1 import common_pb2, options_pb2
from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo.harvest.v1 import harvest_service_pb2 as harvest_pb
from mnemo.ingest.v1 import ingest_service_pb2 as ingest_pb
from mnemo.search.v1 import search_service_pb2 as search_pb
from mnemo_platform import enum_label, enum_labels, reason_name

# The labels each field accepts are the proto enums' (enum_labels), never a list of our own: a value
# added to a proto is accepted, validated and listed in the OpenAPI and MCP schemas with no change here.
KINDS = tuple(enum_labels(common_pb2.MemoryKind))
MODES = tuple(enum_labels(search_pb.SearchMode))
ROLES = tuple(enum_labels(options_pb2.Role))
AGENTS = ("", *enum_labels(harvest_pb.Agent))  # "" is every agent
VOTES = tuple(enum_labels(ingest_pb.FeedbackVote))
# What a caller may claim to be; the harvested and imported provenances are set by the services.
WRITER_PROVENANCES = tuple(
    enum_label(common_pb2.Provenance, v) for v in (common_pb2.PROVENANCE_AGENT, common_pb2.PROVENANCE_HUMAN)
)
REASONS = tuple(reason_name(value) for value in reasons_pb.ErrorReason.values())
# What a remote harvester sends (docs/harvest.md, "Remote harvest"): its sessions, and the candidates drawn from them.
HARVESTED_PROVENANCES = tuple(
    enum_label(common_pb2.Provenance, v)
    for v in (common_pb2.PROVENANCE_HARVESTED_SUMMARY, common_pb2.PROVENANCE_HARVESTED_TRANSCRIPT)
)
EXTRACTED_KINDS = tuple(
    enum_label(common_pb2.MemoryKind, v) for v in (common_pb2.MEMORY_KIND_DECISION, common_pb2.MEMORY_KIND_LESSON)
)
PROPOSAL_KINDS = tuple(enum_labels(common_pb2.ProposalKind))
PROPOSAL_STATES = tuple(enum_labels(common_pb2.ProposalState))
DEFAULT_KIND = enum_label(common_pb2.MemoryKind, common_pb2.MEMORY_KIND_NOTE)
DEFAULT_MODE = enum_label(search_pb.SearchMode, search_pb.SEARCH_MODE_HYBRID)

# A Literal of labels read at import time: pydantic validates it and lists the values as a JSON-schema
# enum, inline (MCP clients read that more readily than an Enum's $ref). mypy cannot evaluate a Literal
# built at run time, so it checks these as plain strings.
if TYPE_CHECKING:
    Kind = str
    Mode = str
    Role = str
    Agent = str
    Vote = str
    WriterProvenance = str
    HarvestedProvenance = str
    ExtractedKind = str
    Reason = str
    ProposalKind = str
    ProposalState = str
else:
    Kind = Literal[KINDS]
    Mode = Literal[MODES]
    Role = Literal[ROLES]
    Agent = Literal[AGENTS]
    Vote = Literal[VOTES]
    WriterProvenance = Literal[WRITER_PROVENANCES]
    HarvestedProvenance = Literal[HARVESTED_PROVENANCES]
    ExtractedKind = Literal[EXTRACTED_KINDS]
    Reason = Literal[REASONS]
    ProposalKind = Literal[PROPOSAL_KINDS]
    ProposalState = Literal[PROPOSAL_STATES]
WorkspaceRef = str | None


def one_of(labels: tuple[str, ...]) -> str:
    """("a", "b", "c") -> "a, b or c", for descriptions that name the allowed values."""
    named = [label for label in labels if label]
    return f"{', '.join(named[:-1])} or {named[-1]}" if len(named) > 1 else "".join(named)


# Deeper JSON than this cannot cross gRPC (protobuf's recursion limit is 100 for a Struct).
MAX_METADATA_DEPTH = 32


def _deeper_than(value: Any, limit: int) -> bool:
    # Iterative, and it stops at the limit: JSON decoders accept nesting far past Python's recursion limit.
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth == limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def _shallow(value: dict[str, Any]) -> dict[str, Any]:
    if _deeper_than(value, MAX_METADATA_DEPTH):
        raise ValueError(f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels")
    return value


# Free JSON kept beside a memory, bounded in depth so it can cross gRPC.
Metadata = Annotated[dict[str, Any], AfterValidator(_shallow)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


VALID_FROM_DOC = 'When the belief starts to hold in the world ("this holds from X"), if not from now.'
INCLUDE_HISTORY_DOC = (
    "Also return superseded, retracted, contradicted and archived memories, each labelled with its status."
)
AS_OF_DOC = "Answer from what was recorded at this time (ISO 8601): the versions and statuses as they were then."
VALID_AT_DOC = "Only beliefs that held in the world at this time (ISO 8601), by their valid_from/valid_to."

CONTEXT_BUDGET_DOC = (
    "Most tokens the packet may take, counted with the embedder's tokenizer (default 1500, "
    "MNEMO_CONTEXT_DEFAULT_TOKENS; at most MNEMO_CONTEXT_MAX_TOKENS, 16000)."
)
CONTEXT_TASK_DOC = "What the session is about to do, if known: adds the memories a search for it finds."
CONTEXT_SINCE_DOC = (
    "Where 'changed since the last session' starts (ISO 8601); by default the start of the newest "
    "harvested session of the workspace."
)

WORKSPACE_DOC = (
    "Workspace to use: its id, its name, or a path at or under its registered root. "
    "Defaults to the workspace in the MCP URL (?workspace=) or the server's default workspace."
)


class WriteInput(_Body):
    content: str = Field(description="The text to remember: self-contained, in full sentences.")
    title: str = Field("", description="A short heading; derived from the first line when empty.")
    kind: Kind = Field(DEFAULT_KIND, description=f"{one_of(KINDS)}.")
    tags: list[str] = Field(default_factory=list, description="Labels to filter on later.")
    metadata: Metadata = Field(default_factory=dict, description="Free structured data kept beside the memory.")
    source_uri: str = Field(
        "", description="Where the content came from; writing the same source again updates that memory."
    )
    idempotency_key: str = Field("", description="Makes a retried write return the original result.")
    provenance: WriterProvenance | None = Field(
        None, description="Who wrote it; MCP writes are `agent`, REST and CLI writes `human` by default."
    )
    valid_from: datetime | None = Field(None, description=VALID_FROM_DOC)
    valid_to: datetime | None = Field(None, description="When the belief stops holding in the world, if known.")
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)


# As ingest's MAX_BATCH: the gateway refuses a larger batch before it builds a single request.
MAX_BATCH_ITEMS = 1000


class BatchInput(_Body):
    items: list[dict[str, Any]] = Field(
        ...,
        max_length=MAX_BATCH_ITEMS,
        description=(
            f"Up to {MAX_BATCH_ITEMS} writes, each as the body of POST /memories. Each is checked and answered on its "
            "own, in order: a bad item is refused alone."
        ),
    )
    workspace: WorkspaceRef = Field(None, description="The workspace of every item that names none. " + WORKSPACE_DOC)


class ExportLine(_Body):
    line: int = Field(..., ge=1, le=2**62, description="The line's number in the export file, from 1.")
    record: str = Field(..., description="The line itself: one JSON record of the export format.")


class RestoreInput(_Body):
    header: str = Field(..., description="The export file's first line (its format, version and workspaces).")
    records: list[ExportLine] = Field(
        ...,
        max_length=MAX_BATCH_ITEMS,
        description=(
            f"Up to {MAX_BATCH_ITEMS} lines after the header, in file order; each is answered on its own, in order "
            "(docs/export-format.md)."
        ),
    )


class ImportStartInput(_Body):
    source: str = Field(
        ..., min_length=1, max_length=64, description="The tool the memories come from, e.g. mcp-memory-service."
    )
    origin: str = Field("", max_length=2048, description="What is read (a file or folder), for the reviewer.")
    staged: bool = Field(
        False, description="Put the batch in review: its memories start as candidates until accepted or rolled back."
    )
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)


class ImportDecisionInput(_Body):
    reason: str = Field("", description="Why (optional); kept in the audit log.")
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)


PROPOSAL_CHANGE_DOC = (
    "The kind's further fields (docs/review.md): supersede takes successor_id (or name [old, successor] in "
    "memory_ids); merge may take merged_text (and merged_title) to write one merged memory instead of keeping "
    "the first; accept_batch takes batch_id. The other kinds take none."
)
PROPOSAL_MEMORIES_DOC = (
    "The memories the change touches: one for confirm, retract, promote and restore; [old, successor] for "
    "supersede; 2 or more for merge, the one to keep first; none for accept_batch."
)


class ProposeInput(_Body):
    kind: ProposalKind = Field(..., description=f"What accepting would do: {one_of(PROPOSAL_KINDS)}.")
    memory_ids: list[str] = Field(default_factory=list, max_length=50, description=PROPOSAL_MEMORIES_DOC)
    reason: str = Field(..., description="Why; required. The reviewer reads it before deciding.")
    change: Metadata = Field(default_factory=dict, description=PROPOSAL_CHANGE_DOC)
    dedupe_key: str = Field(
        "", max_length=200, description="Makes a repeat answer the first proposal instead of opening a second."
    )
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)


class ProposalDecisionInput(_Body):
    reason: str = Field(
        "", description="Why; required to reject or reverse, optional to accept. Kept in the audit log."
    )
    workspace: WorkspaceRef = Field(
        None, description="The proposal's workspace; when omitted, any workspace the token reaches."
    )


class UpdateInput(_Body):
    content: str = Field(description="The new full text; the previous version stays in the history.")
    title: str | None = Field(None, description="A new title; unchanged when omitted.")
    tags: list[str] | None = Field(None, description="New tags replacing the old; unchanged when omitted.")
    metadata: Metadata | None = Field(None, description="New metadata replacing the old; unchanged when omitted.")
    expected_version: int = Field(
        0,
        ge=0,
        le=2**31 - 1,
        description="Refuse the update unless the memory is still at this version (0: don't check).",
    )
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)


class SearchInput(_Body):
    query: str = Field(description="What to look for, in plain words; taken literally (no operators).")
    mode: Mode = Field(DEFAULT_MODE, description="hybrid (default), lexical (exact words) or semantic (meaning).")
    limit: int = Field(0, ge=0, le=2**31 - 1, description="How many results (default 10, at most 100).")
    kinds: list[Kind] = Field(default_factory=list, description="Only these kinds.")
    tags: list[str] = Field(default_factory=list, description="Only memories carrying all of these tags.")
    created_after: datetime | None = Field(None, description="Only memories created at or after this time.")
    created_before: datetime | None = Field(None, description="Only memories created before this time.")
    updated_after: datetime | None = Field(None, description="Only memories updated at or after this time.")
    updated_before: datetime | None = Field(None, description="Only memories updated before this time.")
    explain: bool = Field(
        False, description="Include each leg's rank and score, the fusion, the recency and the trust factor."
    )
    include_history: bool = Field(False, description=INCLUDE_HISTORY_DOC)
    as_of: datetime | None = Field(None, description=AS_OF_DOC)
    valid_at: datetime | None = Field(None, description=VALID_AT_DOC)
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)


class SupersedeInput(_Body):
    content: str = Field(description="The belief that replaces the old one, in full.")
    title: str = Field("", description="A short heading; derived from the first line when empty.")
    kind: Kind | None = Field(None, description="The successor's kind; the old memory's when omitted.")
    tags: list[str] | None = Field(None, description="The successor's tags; the old memory's when omitted.")
    metadata: Metadata = Field(default_factory=dict, description="Free structured data for the successor.")
    source_uri: str = Field("", description="Where the successor came from, if anywhere.")
    valid_from: datetime | None = Field(
        None, description="When the new belief starts to hold; the old one's validity ends then (default: now)."
    )
    reason: str = Field("", description="Why the old belief no longer holds.")
    provenance: WriterProvenance | None = Field(None, description="Who writes the successor.")
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)


class ReasonInput(_Body):
    reason: str = Field(description="Why; kept in the memory's history and the audit log.")
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)


class FeedbackInput(_Body):
    vote: Vote = Field(
        description=(
            f"{one_of(VOTES)}: whether the memory helped. outdated and harmful also ask a reviewer to retract it "
            "(or, outdated with successor_id, to supersede it); one vote per caller and memory, the latest counts."
        )
    )
    note: str = Field("", description="Why, optionally (at most 2,000 characters); a proposal's reason.")
    successor_id: str = Field(
        "", description="With an outdated vote: the id of the memory that replaces this one (a supersede proposal)."
    )
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)


class ConfirmInput(_Body):
    reason: str = Field("", description="Why this memory is trusted (optional).")
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)


class WorkspaceOnlyInput(_Body):
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)


class PurgeInput(_Body):
    force: bool = Field(False, description="Must be true: a purge erases the content and every version for good.")
    reason: str = Field("", description="Why, when the memory was not deleted first; not kept after the purge.")
    workspace: WorkspaceRef = Field(None, description=WORKSPACE_DOC)


class HarvestRunInput(_Body):
    agent: Agent = Field("", description=f"One agent ({one_of(AGENTS)}); all when empty.")
    ignore_idle: bool = Field(False, description="Harvest sessions that changed within the idle window too.")
    session: str = Field(
        "",
        max_length=4096,
        description="Only this session, by the agent's session id or the absolute path of its file; harvested at "
        "once, whatever the idle window (404 SESSION_NOT_FOUND when no agent has it).",
    )


class HarvestedDerivation(_Body):
    source_fingerprint: str = Field(
        ..., min_length=1, max_length=200, description="`<size>:<sha256>` of the session as read: its version."
    )
    summarizer: str = Field("", max_length=200, description="The summarizer model; `transcript` when none.")
    prompt_version: str = Field("", max_length=100, description="The summarizer's prompt version; empty for none.")


class HarvestedSessionInput(_Body):
    workspace: str = Field(..., min_length=1, description="The workspace the session was placed in (its id).")
    title: str = Field("", description="The session's title.")
    content: str = Field(..., description="The summary or rendered transcript, redacted on the harvester's machine.")
    tags: list[str] = Field(default_factory=list, description="Labels, such as the agent's name.")
    metadata: Metadata = Field(default_factory=dict, description="The session's metadata (agent, cwd, outcome, …).")
    source_uri: str = Field(..., min_length=1, description="`<agent>://session/<id>`: the session's identity.")
    provenance: HarvestedProvenance = Field(..., description=f"{one_of(HARVESTED_PROVENANCES)}.")
    derivation: HarvestedDerivation = Field(..., description="Which version of the session this is derived from.")


class HarvestedCandidate(_Body):
    kind: ExtractedKind = Field(..., description=f"{one_of(EXTRACTED_KINDS)}.")
    title: str = Field("", description="A short heading; derived from the line when empty.")
    content: str = Field(..., description="The DECISION: or LESSON: line.")
    tags: list[str] = Field(default_factory=list, description="Labels.")
    metadata: Metadata = Field(default_factory=dict, description="Links to the session (session_memory_id, …).")
    source_uri: str = Field(..., min_length=1, description="`<session source>#<kind>-<hash>`: the line's identity.")
    idempotency_key: str = Field(..., min_length=1, description="Makes a retried write return the first.")


class HarvestedCandidatesInput(_Body):
    workspace: str = Field(..., min_length=1, description="The workspace of the session they were drawn from.")
    items: list[HarvestedCandidate] = Field(
        ..., max_length=MAX_BATCH_ITEMS, description="Each written as a candidate and answered on its own, in order."
    )


class TokenInput(_Body):
    principal: str = Field(..., description="Who holds the token: a user or agent name.")
    role: Role = Field(..., description=f"What it may do: {one_of(ROLES)}.")
    workspaces: list[str] = Field(
        ..., description="Workspaces (ids, names or root paths) it may touch; `*` (admins only) for every one."
    )
    label: str = Field("", description="A note: which machine or agent.")


class RescanInput(_Body):
    workspace: str | None = Field(None, description="One workspace (id, name or root path); every one when omitted.")
    dry_run: bool = Field(False, description="Report what would be redacted and change nothing.")


class RetryInput(_Body):
    workspace: str | None = Field(None, description="One workspace (id, name or root path); every one when omitted.")


class ConsolidateInput(_Body):
    workspace: str | None = Field(
        None, description="One workspace (id, name or root path); every workspace the token may write when omitted."
    )
    dry_run: bool = Field(False, description="Report what would be proposed and write nothing.")
    full: bool = Field(False, description="Compare every memory, not only those changed since the last pass.")


class WorkspaceInput(_Body):
    path: str = Field("", description="Absolute root directory of the project.")
    name: str = Field("", description="Display name (a named scope when no path is given).")


class ErrorDetail(BaseModel):
    code: str = Field(description="The gRPC status name: how a generic client should react (e.g. NOT_FOUND).")
    reason: Reason = Field(description="What exactly went wrong (an ErrorReason); UNSPECIFIED when nothing finer.")
    message: str = Field(description="For a person: what failed and, where it helps, what to do.")


class ErrorBody(BaseModel):
    """Every error response's body, REST or not."""

    error: ErrorDetail


def describe(model: type[BaseModel], field: str) -> str:
    """The documented description of one field, so MCP tools and REST say the same thing."""
    return model.model_fields[field].description or ""
