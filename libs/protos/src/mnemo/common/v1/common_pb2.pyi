import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MemoryKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_KIND_UNSPECIFIED: _ClassVar[MemoryKind]
    MEMORY_KIND_NOTE: _ClassVar[MemoryKind]
    MEMORY_KIND_DECISION: _ClassVar[MemoryKind]
    MEMORY_KIND_LESSON: _ClassVar[MemoryKind]
    MEMORY_KIND_SESSION: _ClassVar[MemoryKind]
    MEMORY_KIND_IMPORT: _ClassVar[MemoryKind]

class MemoryStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_STATUS_UNSPECIFIED: _ClassVar[MemoryStatus]
    MEMORY_STATUS_CANDIDATE: _ClassVar[MemoryStatus]
    MEMORY_STATUS_ACTIVE: _ClassVar[MemoryStatus]
    MEMORY_STATUS_CONFIRMED: _ClassVar[MemoryStatus]
    MEMORY_STATUS_SUPERSEDED: _ClassVar[MemoryStatus]
    MEMORY_STATUS_CONTRADICTED: _ClassVar[MemoryStatus]
    MEMORY_STATUS_RETRACTED: _ClassVar[MemoryStatus]
    MEMORY_STATUS_ARCHIVED: _ClassVar[MemoryStatus]

class Provenance(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROVENANCE_UNSPECIFIED: _ClassVar[Provenance]
    PROVENANCE_AGENT: _ClassVar[Provenance]
    PROVENANCE_HUMAN: _ClassVar[Provenance]
    PROVENANCE_HARVESTED_SUMMARY: _ClassVar[Provenance]
    PROVENANCE_HARVESTED_TRANSCRIPT: _ClassVar[Provenance]
    PROVENANCE_EXTRACTED: _ClassVar[Provenance]
    PROVENANCE_IMPORTED: _ClassVar[Provenance]
    PROVENANCE_CONSOLIDATED: _ClassVar[Provenance]

class EmbeddingState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EMBEDDING_STATE_UNSPECIFIED: _ClassVar[EmbeddingState]
    EMBEDDING_STATE_PENDING: _ClassVar[EmbeddingState]
    EMBEDDING_STATE_EMBEDDED: _ClassVar[EmbeddingState]
    EMBEDDING_STATE_FAILED: _ClassVar[EmbeddingState]

class ProposalKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROPOSAL_KIND_UNSPECIFIED: _ClassVar[ProposalKind]
    PROPOSAL_KIND_CONFIRM: _ClassVar[ProposalKind]
    PROPOSAL_KIND_MERGE: _ClassVar[ProposalKind]
    PROPOSAL_KIND_SUPERSEDE: _ClassVar[ProposalKind]
    PROPOSAL_KIND_RETRACT: _ClassVar[ProposalKind]
    PROPOSAL_KIND_PROMOTE: _ClassVar[ProposalKind]
    PROPOSAL_KIND_RESTORE: _ClassVar[ProposalKind]
    PROPOSAL_KIND_ACCEPT_BATCH: _ClassVar[ProposalKind]

class ProposalState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROPOSAL_STATE_UNSPECIFIED: _ClassVar[ProposalState]
    PROPOSAL_STATE_OPEN: _ClassVar[ProposalState]
    PROPOSAL_STATE_APPLIED: _ClassVar[ProposalState]
    PROPOSAL_STATE_REJECTED: _ClassVar[ProposalState]
    PROPOSAL_STATE_REVERSED: _ClassVar[ProposalState]

class ProposalSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROPOSAL_SOURCE_UNSPECIFIED: _ClassVar[ProposalSource]
    PROPOSAL_SOURCE_AGENT: _ClassVar[ProposalSource]
    PROPOSAL_SOURCE_HUMAN: _ClassVar[ProposalSource]
    PROPOSAL_SOURCE_HARVEST: _ClassVar[ProposalSource]
    PROPOSAL_SOURCE_SCREENING: _ClassVar[ProposalSource]
    PROPOSAL_SOURCE_CONSOLIDATION: _ClassVar[ProposalSource]
    PROPOSAL_SOURCE_FEEDBACK: _ClassVar[ProposalSource]
    PROPOSAL_SOURCE_IMPORT: _ClassVar[ProposalSource]
MEMORY_KIND_UNSPECIFIED: MemoryKind
MEMORY_KIND_NOTE: MemoryKind
MEMORY_KIND_DECISION: MemoryKind
MEMORY_KIND_LESSON: MemoryKind
MEMORY_KIND_SESSION: MemoryKind
MEMORY_KIND_IMPORT: MemoryKind
MEMORY_STATUS_UNSPECIFIED: MemoryStatus
MEMORY_STATUS_CANDIDATE: MemoryStatus
MEMORY_STATUS_ACTIVE: MemoryStatus
MEMORY_STATUS_CONFIRMED: MemoryStatus
MEMORY_STATUS_SUPERSEDED: MemoryStatus
MEMORY_STATUS_CONTRADICTED: MemoryStatus
MEMORY_STATUS_RETRACTED: MemoryStatus
MEMORY_STATUS_ARCHIVED: MemoryStatus
PROVENANCE_UNSPECIFIED: Provenance
PROVENANCE_AGENT: Provenance
PROVENANCE_HUMAN: Provenance
PROVENANCE_HARVESTED_SUMMARY: Provenance
PROVENANCE_HARVESTED_TRANSCRIPT: Provenance
PROVENANCE_EXTRACTED: Provenance
PROVENANCE_IMPORTED: Provenance
PROVENANCE_CONSOLIDATED: Provenance
EMBEDDING_STATE_UNSPECIFIED: EmbeddingState
EMBEDDING_STATE_PENDING: EmbeddingState
EMBEDDING_STATE_EMBEDDED: EmbeddingState
EMBEDDING_STATE_FAILED: EmbeddingState
PROPOSAL_KIND_UNSPECIFIED: ProposalKind
PROPOSAL_KIND_CONFIRM: ProposalKind
PROPOSAL_KIND_MERGE: ProposalKind
PROPOSAL_KIND_SUPERSEDE: ProposalKind
PROPOSAL_KIND_RETRACT: ProposalKind
PROPOSAL_KIND_PROMOTE: ProposalKind
PROPOSAL_KIND_RESTORE: ProposalKind
PROPOSAL_KIND_ACCEPT_BATCH: ProposalKind
PROPOSAL_STATE_UNSPECIFIED: ProposalState
PROPOSAL_STATE_OPEN: ProposalState
PROPOSAL_STATE_APPLIED: ProposalState
PROPOSAL_STATE_REJECTED: ProposalState
PROPOSAL_STATE_REVERSED: ProposalState
PROPOSAL_SOURCE_UNSPECIFIED: ProposalSource
PROPOSAL_SOURCE_AGENT: ProposalSource
PROPOSAL_SOURCE_HUMAN: ProposalSource
PROPOSAL_SOURCE_HARVEST: ProposalSource
PROPOSAL_SOURCE_SCREENING: ProposalSource
PROPOSAL_SOURCE_CONSOLIDATION: ProposalSource
PROPOSAL_SOURCE_FEEDBACK: ProposalSource
PROPOSAL_SOURCE_IMPORT: ProposalSource

class Workspace(_message.Message):
    __slots__ = ("id", "name", "root_path", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROOT_PATH_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    root_path: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., root_path: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Token(_message.Message):
    __slots__ = ("id", "principal", "role", "workspaces", "label", "created_at", "last_used_at", "revoked_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    WORKSPACES_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_AT_FIELD_NUMBER: _ClassVar[int]
    REVOKED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    principal: str
    role: str
    workspaces: _containers.RepeatedScalarFieldContainer[str]
    label: str
    created_at: _timestamp_pb2.Timestamp
    last_used_at: _timestamp_pb2.Timestamp
    revoked_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., principal: _Optional[str] = ..., role: _Optional[str] = ..., workspaces: _Optional[_Iterable[str]] = ..., label: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_used_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoked_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Memory(_message.Message):
    __slots__ = ("id", "workspace_id", "kind", "title", "content", "tags", "metadata", "source_uri", "status", "provenance", "author", "version", "content_hash", "created_at", "updated_at", "embedding_state", "superseded_by", "valid_from", "valid_to", "status_reason", "trust", "suspicious")
    ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_STATE_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    TRUST_FIELD_NUMBER: _ClassVar[int]
    SUSPICIOUS_FIELD_NUMBER: _ClassVar[int]
    id: str
    workspace_id: str
    kind: MemoryKind
    title: str
    content: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    metadata: _struct_pb2.Struct
    source_uri: str
    status: MemoryStatus
    provenance: Provenance
    author: str
    version: int
    content_hash: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    embedding_state: EmbeddingState
    superseded_by: str
    valid_from: _timestamp_pb2.Timestamp
    valid_to: _timestamp_pb2.Timestamp
    status_reason: str
    trust: float
    suspicious: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., kind: _Optional[_Union[MemoryKind, str]] = ..., title: _Optional[str] = ..., content: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., source_uri: _Optional[str] = ..., status: _Optional[_Union[MemoryStatus, str]] = ..., provenance: _Optional[_Union[Provenance, str]] = ..., author: _Optional[str] = ..., version: _Optional[int] = ..., content_hash: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., embedding_state: _Optional[_Union[EmbeddingState, str]] = ..., superseded_by: _Optional[str] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status_reason: _Optional[str] = ..., trust: _Optional[float] = ..., suspicious: _Optional[_Iterable[str]] = ...) -> None: ...

class MemoryFilter(_message.Message):
    __slots__ = ("kinds", "tags", "created_after", "created_before", "updated_after", "updated_before")
    KINDS_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    UPDATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    kinds: _containers.RepeatedScalarFieldContainer[MemoryKind]
    tags: _containers.RepeatedScalarFieldContainer[str]
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    updated_after: _timestamp_pb2.Timestamp
    updated_before: _timestamp_pb2.Timestamp
    def __init__(self, kinds: _Optional[_Iterable[_Union[MemoryKind, str]]] = ..., tags: _Optional[_Iterable[str]] = ..., created_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ReadOptions(_message.Message):
    __slots__ = ("include_history", "as_of", "valid_at")
    INCLUDE_HISTORY_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    VALID_AT_FIELD_NUMBER: _ClassVar[int]
    include_history: bool
    as_of: _timestamp_pb2.Timestamp
    valid_at: _timestamp_pb2.Timestamp
    def __init__(self, include_history: _Optional[bool] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AuditEvent(_message.Message):
    __slots__ = ("id", "at", "principal", "workspace_id", "action", "memory_id", "version", "before_hash", "after_hash", "request_id", "trace_id", "prev_hash", "hash", "details")
    ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    BEFORE_HASH_FIELD_NUMBER: _ClassVar[int]
    AFTER_HASH_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    PREV_HASH_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    id: int
    at: _timestamp_pb2.Timestamp
    principal: str
    workspace_id: str
    action: str
    memory_id: str
    version: int
    before_hash: str
    after_hash: str
    request_id: str
    trace_id: str
    prev_hash: str
    hash: str
    details: _struct_pb2.Struct
    def __init__(self, id: _Optional[int] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., principal: _Optional[str] = ..., workspace_id: _Optional[str] = ..., action: _Optional[str] = ..., memory_id: _Optional[str] = ..., version: _Optional[int] = ..., before_hash: _Optional[str] = ..., after_hash: _Optional[str] = ..., request_id: _Optional[str] = ..., trace_id: _Optional[str] = ..., prev_hash: _Optional[str] = ..., hash: _Optional[str] = ..., details: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Proposal(_message.Message):
    __slots__ = ("id", "workspace_id", "kind", "memory_ids", "change", "reason", "proposed_by", "source", "state", "created_at", "decided_by", "decided_at", "decision_reason", "applied", "reversed_by", "reversed_at", "reverse_reason", "stale")
    ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_BY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_FIELD_NUMBER: _ClassVar[int]
    DECISION_REASON_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    REVERSED_BY_FIELD_NUMBER: _ClassVar[int]
    REVERSED_AT_FIELD_NUMBER: _ClassVar[int]
    REVERSE_REASON_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    id: str
    workspace_id: str
    kind: ProposalKind
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    change: _struct_pb2.Struct
    reason: str
    proposed_by: str
    source: ProposalSource
    state: ProposalState
    created_at: _timestamp_pb2.Timestamp
    decided_by: str
    decided_at: _timestamp_pb2.Timestamp
    decision_reason: str
    applied: _struct_pb2.Struct
    reversed_by: str
    reversed_at: _timestamp_pb2.Timestamp
    reverse_reason: str
    stale: bool
    def __init__(self, id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., kind: _Optional[_Union[ProposalKind, str]] = ..., memory_ids: _Optional[_Iterable[str]] = ..., change: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., reason: _Optional[str] = ..., proposed_by: _Optional[str] = ..., source: _Optional[_Union[ProposalSource, str]] = ..., state: _Optional[_Union[ProposalState, str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., decided_by: _Optional[str] = ..., decided_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., decision_reason: _Optional[str] = ..., applied: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., reversed_by: _Optional[str] = ..., reversed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reverse_reason: _Optional[str] = ..., stale: _Optional[bool] = ...) -> None: ...
