import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from mnemo.common.v1 import common_pb2 as _common_pb2
from mnemo.common.v1 import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_UNSPECIFIED: _ClassVar[SearchMode]
    SEARCH_MODE_HYBRID: _ClassVar[SearchMode]
    SEARCH_MODE_LEXICAL: _ClassVar[SearchMode]
    SEARCH_MODE_SEMANTIC: _ClassVar[SearchMode]

class ContextSection(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONTEXT_SECTION_UNSPECIFIED: _ClassVar[ContextSection]
    CONTEXT_SECTION_TASK: _ClassVar[ContextSection]
    CONTEXT_SECTION_CHANGED: _ClassVar[ContextSection]
    CONTEXT_SECTION_DECISIONS: _ClassVar[ContextSection]
    CONTEXT_SECTION_GLOBAL: _ClassVar[ContextSection]
    CONTEXT_SECTION_LESSONS: _ClassVar[ContextSection]
    CONTEXT_SECTION_SESSIONS: _ClassVar[ContextSection]
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_HYBRID: SearchMode
SEARCH_MODE_LEXICAL: SearchMode
SEARCH_MODE_SEMANTIC: SearchMode
CONTEXT_SECTION_UNSPECIFIED: ContextSection
CONTEXT_SECTION_TASK: ContextSection
CONTEXT_SECTION_CHANGED: ContextSection
CONTEXT_SECTION_DECISIONS: ContextSection
CONTEXT_SECTION_GLOBAL: ContextSection
CONTEXT_SECTION_LESSONS: ContextSection
CONTEXT_SECTION_SESSIONS: ContextSection

class SearchRequest(_message.Message):
    __slots__ = ("workspace", "query", "mode", "limit", "filter", "explain", "options")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    EXPLAIN_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    query: str
    mode: SearchMode
    limit: int
    filter: _common_pb2.MemoryFilter
    explain: bool
    options: _common_pb2.ReadOptions
    def __init__(self, workspace: _Optional[str] = ..., query: _Optional[str] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., limit: _Optional[int] = ..., filter: _Optional[_Union[_common_pb2.MemoryFilter, _Mapping]] = ..., explain: _Optional[bool] = ..., options: _Optional[_Union[_common_pb2.ReadOptions, _Mapping]] = ...) -> None: ...

class LegExplanation(_message.Message):
    __slots__ = ("rank", "score")
    RANK_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    rank: int
    score: float
    def __init__(self, rank: _Optional[int] = ..., score: _Optional[float] = ...) -> None: ...

class Explanation(_message.Message):
    __slots__ = ("lexical", "semantic", "fused_score", "recency_factor", "lexical_relaxed", "trust_factor", "feedback_factor")
    LEXICAL_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_FIELD_NUMBER: _ClassVar[int]
    FUSED_SCORE_FIELD_NUMBER: _ClassVar[int]
    RECENCY_FACTOR_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_RELAXED_FIELD_NUMBER: _ClassVar[int]
    TRUST_FACTOR_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FACTOR_FIELD_NUMBER: _ClassVar[int]
    lexical: LegExplanation
    semantic: LegExplanation
    fused_score: float
    recency_factor: float
    lexical_relaxed: bool
    trust_factor: float
    feedback_factor: float
    def __init__(self, lexical: _Optional[_Union[LegExplanation, _Mapping]] = ..., semantic: _Optional[_Union[LegExplanation, _Mapping]] = ..., fused_score: _Optional[float] = ..., recency_factor: _Optional[float] = ..., lexical_relaxed: _Optional[bool] = ..., trust_factor: _Optional[float] = ..., feedback_factor: _Optional[float] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("memory", "snippet", "score", "explanation")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    memory: _common_pb2.Memory
    snippet: str
    score: float
    explanation: Explanation
    def __init__(self, memory: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ..., snippet: _Optional[str] = ..., score: _Optional[float] = ..., explanation: _Optional[_Union[Explanation, _Mapping]] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "degraded", "lexical_relaxed", "workspace", "scope")
    HITS_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_RELAXED_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    degraded: _containers.RepeatedScalarFieldContainer[str]
    lexical_relaxed: bool
    workspace: _common_pb2.Workspace
    scope: str
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., degraded: _Optional[_Iterable[str]] = ..., lexical_relaxed: _Optional[bool] = ..., workspace: _Optional[_Union[_common_pb2.Workspace, _Mapping]] = ..., scope: _Optional[str] = ...) -> None: ...

class GetMemoryRequest(_message.Message):
    __slots__ = ("workspace", "id", "options")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    options: _common_pb2.ReadOptions
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., options: _Optional[_Union[_common_pb2.ReadOptions, _Mapping]] = ...) -> None: ...

class GetMemoryResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _common_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ...) -> None: ...

class ListMemoriesRequest(_message.Message):
    __slots__ = ("workspace", "page_size", "page_token", "filter", "options")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    page_size: int
    page_token: str
    filter: _common_pb2.MemoryFilter
    options: _common_pb2.ReadOptions
    def __init__(self, workspace: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., filter: _Optional[_Union[_common_pb2.MemoryFilter, _Mapping]] = ..., options: _Optional[_Union[_common_pb2.ReadOptions, _Mapping]] = ...) -> None: ...

class ListMemoriesResponse(_message.Message):
    __slots__ = ("memories", "next_page_token")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_common_pb2.Memory]
    next_page_token: str
    def __init__(self, memories: _Optional[_Iterable[_Union[_common_pb2.Memory, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListWorkspacesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListWorkspacesResponse(_message.Message):
    __slots__ = ("workspaces",)
    WORKSPACES_FIELD_NUMBER: _ClassVar[int]
    workspaces: _containers.RepeatedCompositeFieldContainer[_common_pb2.Workspace]
    def __init__(self, workspaces: _Optional[_Iterable[_Union[_common_pb2.Workspace, _Mapping]]] = ...) -> None: ...

class ResolveWorkspaceRequest(_message.Message):
    __slots__ = ("workspace",)
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    def __init__(self, workspace: _Optional[str] = ...) -> None: ...

class ResolveWorkspaceResponse(_message.Message):
    __slots__ = ("workspace",)
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    workspace: _common_pb2.Workspace
    def __init__(self, workspace: _Optional[_Union[_common_pb2.Workspace, _Mapping]] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ("workspace",)
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    def __init__(self, workspace: _Optional[str] = ...) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("memories", "chunks_pending", "chunks_embedded", "chunks_failed", "embedding_model", "embedding_dimension", "embedder_ready", "embedder_state", "oldest_pending_at", "last_error", "workspace", "lexical_pending", "graph_pending")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_PENDING_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_EMBEDDED_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FAILED_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_MODEL_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_DIMENSION_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_READY_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_STATE_FIELD_NUMBER: _ClassVar[int]
    OLDEST_PENDING_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_PENDING_FIELD_NUMBER: _ClassVar[int]
    GRAPH_PENDING_FIELD_NUMBER: _ClassVar[int]
    memories: int
    chunks_pending: int
    chunks_embedded: int
    chunks_failed: int
    embedding_model: str
    embedding_dimension: int
    embedder_ready: bool
    embedder_state: str
    oldest_pending_at: _timestamp_pb2.Timestamp
    last_error: str
    workspace: _common_pb2.Workspace
    lexical_pending: int
    graph_pending: int
    def __init__(self, memories: _Optional[int] = ..., chunks_pending: _Optional[int] = ..., chunks_embedded: _Optional[int] = ..., chunks_failed: _Optional[int] = ..., embedding_model: _Optional[str] = ..., embedding_dimension: _Optional[int] = ..., embedder_ready: _Optional[bool] = ..., embedder_state: _Optional[str] = ..., oldest_pending_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ..., workspace: _Optional[_Union[_common_pb2.Workspace, _Mapping]] = ..., lexical_pending: _Optional[int] = ..., graph_pending: _Optional[int] = ...) -> None: ...

class GetHistoryRequest(_message.Message):
    __slots__ = ("workspace", "id", "page_size", "page_token")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    page_size: int
    page_token: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class VersionRecord(_message.Message):
    __slots__ = ("version", "title", "content", "content_hash", "author", "recorded_from", "recorded_to")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    RECORDED_FROM_FIELD_NUMBER: _ClassVar[int]
    RECORDED_TO_FIELD_NUMBER: _ClassVar[int]
    version: int
    title: str
    content: str
    content_hash: str
    author: str
    recorded_from: _timestamp_pb2.Timestamp
    recorded_to: _timestamp_pb2.Timestamp
    def __init__(self, version: _Optional[int] = ..., title: _Optional[str] = ..., content: _Optional[str] = ..., content_hash: _Optional[str] = ..., author: _Optional[str] = ..., recorded_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., recorded_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class StateRecord(_message.Message):
    __slots__ = ("status", "reason", "principal", "superseded_by", "valid_from", "valid_to", "recorded_from", "recorded_to")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    RECORDED_FROM_FIELD_NUMBER: _ClassVar[int]
    RECORDED_TO_FIELD_NUMBER: _ClassVar[int]
    status: _common_pb2.MemoryStatus
    reason: str
    principal: str
    superseded_by: str
    valid_from: _timestamp_pb2.Timestamp
    valid_to: _timestamp_pb2.Timestamp
    recorded_from: _timestamp_pb2.Timestamp
    recorded_to: _timestamp_pb2.Timestamp
    def __init__(self, status: _Optional[_Union[_common_pb2.MemoryStatus, str]] = ..., reason: _Optional[str] = ..., principal: _Optional[str] = ..., superseded_by: _Optional[str] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., recorded_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., recorded_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetHistoryResponse(_message.Message):
    __slots__ = ("memory", "versions", "states", "events", "next_page_token")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memory: _common_pb2.Memory
    versions: _containers.RepeatedCompositeFieldContainer[VersionRecord]
    states: _containers.RepeatedCompositeFieldContainer[StateRecord]
    events: _containers.RepeatedCompositeFieldContainer[_common_pb2.AuditEvent]
    next_page_token: str
    def __init__(self, memory: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ..., versions: _Optional[_Iterable[_Union[VersionRecord, _Mapping]]] = ..., states: _Optional[_Iterable[_Union[StateRecord, _Mapping]]] = ..., events: _Optional[_Iterable[_Union[_common_pb2.AuditEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListAuditEventsRequest(_message.Message):
    __slots__ = ("workspace", "memory_id", "page_size", "page_token")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    memory_id: str
    page_size: int
    page_token: str
    def __init__(self, workspace: _Optional[str] = ..., memory_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAuditEventsResponse(_message.Message):
    __slots__ = ("events", "next_page_token")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_common_pb2.AuditEvent]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[_common_pb2.AuditEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class VerifyAuditRequest(_message.Message):
    __slots__ = ("workspace",)
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    def __init__(self, workspace: _Optional[str] = ...) -> None: ...

class VerifyAuditResponse(_message.Message):
    __slots__ = ("ok", "events_checked", "workspaces_checked", "broken_event_id", "broken_workspace_id", "problem", "anchored")
    OK_FIELD_NUMBER: _ClassVar[int]
    EVENTS_CHECKED_FIELD_NUMBER: _ClassVar[int]
    WORKSPACES_CHECKED_FIELD_NUMBER: _ClassVar[int]
    BROKEN_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    BROKEN_WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    ANCHORED_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    events_checked: int
    workspaces_checked: int
    broken_event_id: int
    broken_workspace_id: str
    problem: str
    anchored: bool
    def __init__(self, ok: _Optional[bool] = ..., events_checked: _Optional[int] = ..., workspaces_checked: _Optional[int] = ..., broken_event_id: _Optional[int] = ..., broken_workspace_id: _Optional[str] = ..., problem: _Optional[str] = ..., anchored: _Optional[bool] = ...) -> None: ...

class AuthenticateRequest(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    def __init__(self, token: _Optional[str] = ...) -> None: ...

class AuthenticateResponse(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: _common_pb2.Token
    def __init__(self, token: _Optional[_Union[_common_pb2.Token, _Mapping]] = ...) -> None: ...

class ListTokensRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTokensResponse(_message.Message):
    __slots__ = ("tokens",)
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedCompositeFieldContainer[_common_pb2.Token]
    def __init__(self, tokens: _Optional[_Iterable[_Union[_common_pb2.Token, _Mapping]]] = ...) -> None: ...

class GetContextRequest(_message.Message):
    __slots__ = ("workspace", "budget", "task", "since")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    budget: int
    task: str
    since: _timestamp_pb2.Timestamp
    def __init__(self, workspace: _Optional[str] = ..., budget: _Optional[int] = ..., task: _Optional[str] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ContextItem(_message.Message):
    __slots__ = ("memory", "text", "truncated", "successor", "line")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    SUCCESSOR_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    memory: _common_pb2.Memory
    text: str
    truncated: bool
    successor: _common_pb2.Memory
    line: str
    def __init__(self, memory: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ..., text: _Optional[str] = ..., truncated: _Optional[bool] = ..., successor: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ..., line: _Optional[str] = ...) -> None: ...

class ContextPart(_message.Message):
    __slots__ = ("section", "heading", "items", "omitted")
    SECTION_FIELD_NUMBER: _ClassVar[int]
    HEADING_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    OMITTED_FIELD_NUMBER: _ClassVar[int]
    section: ContextSection
    heading: str
    items: _containers.RepeatedCompositeFieldContainer[ContextItem]
    omitted: int
    def __init__(self, section: _Optional[_Union[ContextSection, str]] = ..., heading: _Optional[str] = ..., items: _Optional[_Iterable[_Union[ContextItem, _Mapping]]] = ..., omitted: _Optional[int] = ...) -> None: ...

class GetContextResponse(_message.Message):
    __slots__ = ("workspace", "sections", "candidates", "since", "text", "tokens", "budget", "degraded")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    SECTIONS_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    workspace: _common_pb2.Workspace
    sections: _containers.RepeatedCompositeFieldContainer[ContextPart]
    candidates: int
    since: _timestamp_pb2.Timestamp
    text: str
    tokens: int
    budget: int
    degraded: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, workspace: _Optional[_Union[_common_pb2.Workspace, _Mapping]] = ..., sections: _Optional[_Iterable[_Union[ContextPart, _Mapping]]] = ..., candidates: _Optional[int] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., text: _Optional[str] = ..., tokens: _Optional[int] = ..., budget: _Optional[int] = ..., degraded: _Optional[_Iterable[str]] = ...) -> None: ...

class ExportMemoriesRequest(_message.Message):
    __slots__ = ("workspace",)
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    def __init__(self, workspace: _Optional[str] = ...) -> None: ...

class ExportMemoriesResponse(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: str
    def __init__(self, record: _Optional[str] = ...) -> None: ...

class ListProposalsRequest(_message.Message):
    __slots__ = ("workspace", "state", "kind", "memory_id", "limit", "page_token")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    state: _common_pb2.ProposalState
    kind: _common_pb2.ProposalKind
    memory_id: str
    limit: int
    page_token: str
    def __init__(self, workspace: _Optional[str] = ..., state: _Optional[_Union[_common_pb2.ProposalState, str]] = ..., kind: _Optional[_Union[_common_pb2.ProposalKind, str]] = ..., memory_id: _Optional[str] = ..., limit: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListProposalsResponse(_message.Message):
    __slots__ = ("proposals", "next_page_token")
    PROPOSALS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    proposals: _containers.RepeatedCompositeFieldContainer[_common_pb2.Proposal]
    next_page_token: str
    def __init__(self, proposals: _Optional[_Iterable[_Union[_common_pb2.Proposal, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetProposalRequest(_message.Message):
    __slots__ = ("workspace", "id")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class GetProposalResponse(_message.Message):
    __slots__ = ("proposal", "memories")
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    proposal: _common_pb2.Proposal
    memories: _containers.RepeatedCompositeFieldContainer[_common_pb2.Memory]
    def __init__(self, proposal: _Optional[_Union[_common_pb2.Proposal, _Mapping]] = ..., memories: _Optional[_Iterable[_Union[_common_pb2.Memory, _Mapping]]] = ...) -> None: ...
