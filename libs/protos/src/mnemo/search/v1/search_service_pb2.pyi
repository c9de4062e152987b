import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from mnemo.common.v1 import common_pb2 as _common_pb2
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
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_HYBRID: SearchMode
SEARCH_MODE_LEXICAL: SearchMode
SEARCH_MODE_SEMANTIC: SearchMode

class SearchRequest(_message.Message):
    __slots__ = ("workspace", "query", "mode", "limit", "filter", "explain")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    EXPLAIN_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    query: str
    mode: SearchMode
    limit: int
    filter: _common_pb2.MemoryFilter
    explain: bool
    def __init__(self, workspace: _Optional[str] = ..., query: _Optional[str] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., limit: _Optional[int] = ..., filter: _Optional[_Union[_common_pb2.MemoryFilter, _Mapping]] = ..., explain: _Optional[bool] = ...) -> None: ...

class LegExplanation(_message.Message):
    __slots__ = ("rank", "score")
    RANK_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    rank: int
    score: float
    def __init__(self, rank: _Optional[int] = ..., score: _Optional[float] = ...) -> None: ...

class Explanation(_message.Message):
    __slots__ = ("lexical", "semantic", "fused_score", "recency_factor", "lexical_relaxed")
    LEXICAL_FIELD_NUMBER: _ClassVar[int]
    SEMANTIC_FIELD_NUMBER: _ClassVar[int]
    FUSED_SCORE_FIELD_NUMBER: _ClassVar[int]
    RECENCY_FACTOR_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_RELAXED_FIELD_NUMBER: _ClassVar[int]
    lexical: LegExplanation
    semantic: LegExplanation
    fused_score: float
    recency_factor: float
    lexical_relaxed: bool
    def __init__(self, lexical: _Optional[_Union[LegExplanation, _Mapping]] = ..., semantic: _Optional[_Union[LegExplanation, _Mapping]] = ..., fused_score: _Optional[float] = ..., recency_factor: _Optional[float] = ..., lexical_relaxed: _Optional[bool] = ...) -> None: ...

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
    __slots__ = ("hits", "degraded", "lexical_relaxed", "workspace")
    HITS_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_RELAXED_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    degraded: _containers.RepeatedScalarFieldContainer[str]
    lexical_relaxed: bool
    workspace: _common_pb2.Workspace
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., degraded: _Optional[_Iterable[str]] = ..., lexical_relaxed: _Optional[bool] = ..., workspace: _Optional[_Union[_common_pb2.Workspace, _Mapping]] = ...) -> None: ...

class GetMemoryRequest(_message.Message):
    __slots__ = ("workspace", "id")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class GetMemoryResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _common_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ...) -> None: ...

class ListMemoriesRequest(_message.Message):
    __slots__ = ("workspace", "page_size", "page_token", "filter")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    page_size: int
    page_token: str
    filter: _common_pb2.MemoryFilter
    def __init__(self, workspace: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., filter: _Optional[_Union[_common_pb2.MemoryFilter, _Mapping]] = ...) -> None: ...

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
    __slots__ = ("memories", "chunks_pending", "chunks_embedded", "chunks_failed", "embedding_model", "embedding_dimension", "embedder_ready", "embedder_state", "oldest_pending_at", "last_error", "workspace")
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
    def __init__(self, memories: _Optional[int] = ..., chunks_pending: _Optional[int] = ..., chunks_embedded: _Optional[int] = ..., chunks_failed: _Optional[int] = ..., embedding_model: _Optional[str] = ..., embedding_dimension: _Optional[int] = ..., embedder_ready: _Optional[bool] = ..., embedder_state: _Optional[str] = ..., oldest_pending_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[str] = ..., workspace: _Optional[_Union[_common_pb2.Workspace, _Mapping]] = ...) -> None: ...
