import datetime

from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from mnemo.common.v1 import common_pb2 as _common_pb2
from mnemo.common.v1 import errors_pb2 as _errors_pb2
from mnemo.common.v1 import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WriteOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WRITE_OUTCOME_UNSPECIFIED: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_CREATED: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_NEW_VERSION: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_UNCHANGED: _ClassVar[WriteOutcome]
    WRITE_OUTCOME_REPLAYED: _ClassVar[WriteOutcome]

class RestoreOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESTORE_OUTCOME_UNSPECIFIED: _ClassVar[RestoreOutcome]
    RESTORE_OUTCOME_RESTORED: _ClassVar[RestoreOutcome]
    RESTORE_OUTCOME_ALREADY_IN: _ClassVar[RestoreOutcome]

class FeedbackVote(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FEEDBACK_VOTE_UNSPECIFIED: _ClassVar[FeedbackVote]
    FEEDBACK_VOTE_USEFUL: _ClassVar[FeedbackVote]
    FEEDBACK_VOTE_NOT_USEFUL: _ClassVar[FeedbackVote]
    FEEDBACK_VOTE_OUTDATED: _ClassVar[FeedbackVote]
    FEEDBACK_VOTE_HARMFUL: _ClassVar[FeedbackVote]
WRITE_OUTCOME_UNSPECIFIED: WriteOutcome
WRITE_OUTCOME_CREATED: WriteOutcome
WRITE_OUTCOME_NEW_VERSION: WriteOutcome
WRITE_OUTCOME_UNCHANGED: WriteOutcome
WRITE_OUTCOME_REPLAYED: WriteOutcome
RESTORE_OUTCOME_UNSPECIFIED: RestoreOutcome
RESTORE_OUTCOME_RESTORED: RestoreOutcome
RESTORE_OUTCOME_ALREADY_IN: RestoreOutcome
FEEDBACK_VOTE_UNSPECIFIED: FeedbackVote
FEEDBACK_VOTE_USEFUL: FeedbackVote
FEEDBACK_VOTE_NOT_USEFUL: FeedbackVote
FEEDBACK_VOTE_OUTDATED: FeedbackVote
FEEDBACK_VOTE_HARMFUL: FeedbackVote

class WriteMemoryRequest(_message.Message):
    __slots__ = ("workspace", "kind", "title", "content", "tags", "metadata", "source_uri", "idempotency_key", "provenance", "valid_from", "valid_to", "derivation", "status", "import_batch")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_TO_FIELD_NUMBER: _ClassVar[int]
    DERIVATION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    IMPORT_BATCH_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    kind: _common_pb2.MemoryKind
    title: str
    content: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    metadata: _struct_pb2.Struct
    source_uri: str
    idempotency_key: str
    provenance: _common_pb2.Provenance
    valid_from: _timestamp_pb2.Timestamp
    valid_to: _timestamp_pb2.Timestamp
    derivation: Derivation
    status: _common_pb2.MemoryStatus
    import_batch: str
    def __init__(self, workspace: _Optional[str] = ..., kind: _Optional[_Union[_common_pb2.MemoryKind, str]] = ..., title: _Optional[str] = ..., content: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., source_uri: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., provenance: _Optional[_Union[_common_pb2.Provenance, str]] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., derivation: _Optional[_Union[Derivation, _Mapping]] = ..., status: _Optional[_Union[_common_pb2.MemoryStatus, str]] = ..., import_batch: _Optional[str] = ...) -> None: ...

class Derivation(_message.Message):
    __slots__ = ("source_fingerprint", "summarizer", "prompt_version")
    SOURCE_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    SUMMARIZER_FIELD_NUMBER: _ClassVar[int]
    PROMPT_VERSION_FIELD_NUMBER: _ClassVar[int]
    source_fingerprint: str
    summarizer: str
    prompt_version: str
    def __init__(self, source_fingerprint: _Optional[str] = ..., summarizer: _Optional[str] = ..., prompt_version: _Optional[str] = ...) -> None: ...

class WriteMemoryResponse(_message.Message):
    __slots__ = ("memory", "outcome")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    memory: _common_pb2.Memory
    outcome: WriteOutcome
    def __init__(self, memory: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ..., outcome: _Optional[_Union[WriteOutcome, str]] = ...) -> None: ...

class WriteMemoriesRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[WriteMemoryRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[WriteMemoryRequest, _Mapping]]] = ...) -> None: ...

class WriteMemoriesResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[WriteResult]
    def __init__(self, results: _Optional[_Iterable[_Union[WriteResult, _Mapping]]] = ...) -> None: ...

class WriteResult(_message.Message):
    __slots__ = ("memory", "outcome", "error")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    memory: _common_pb2.Memory
    outcome: WriteOutcome
    error: ItemError
    def __init__(self, memory: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ..., outcome: _Optional[_Union[WriteOutcome, str]] = ..., error: _Optional[_Union[ItemError, _Mapping]] = ...) -> None: ...

class ItemError(_message.Message):
    __slots__ = ("code", "reason", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    reason: _errors_pb2.ErrorReason
    message: str
    def __init__(self, code: _Optional[str] = ..., reason: _Optional[_Union[_errors_pb2.ErrorReason, str]] = ..., message: _Optional[str] = ...) -> None: ...

class UpdateMemoryRequest(_message.Message):
    __slots__ = ("workspace", "id", "content", "title", "tags", "replace_tags", "metadata", "expected_version")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_TAGS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    content: str
    title: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    replace_tags: bool
    metadata: _struct_pb2.Struct
    expected_version: int
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., content: _Optional[str] = ..., title: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., replace_tags: _Optional[bool] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., expected_version: _Optional[int] = ...) -> None: ...

class UpdateMemoryResponse(_message.Message):
    __slots__ = ("memory", "outcome")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    memory: _common_pb2.Memory
    outcome: WriteOutcome
    def __init__(self, memory: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ..., outcome: _Optional[_Union[WriteOutcome, str]] = ...) -> None: ...

class AddWorkspaceRequest(_message.Message):
    __slots__ = ("root_path", "name")
    ROOT_PATH_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    root_path: str
    name: str
    def __init__(self, root_path: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class AddWorkspaceResponse(_message.Message):
    __slots__ = ("workspace", "created")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    workspace: _common_pb2.Workspace
    created: bool
    def __init__(self, workspace: _Optional[_Union[_common_pb2.Workspace, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class SupersedeMemoryRequest(_message.Message):
    __slots__ = ("workspace", "id", "successor", "reason")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SUCCESSOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    successor: WriteMemoryRequest
    reason: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., successor: _Optional[_Union[WriteMemoryRequest, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class SupersedeMemoryResponse(_message.Message):
    __slots__ = ("superseded", "successor")
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    SUCCESSOR_FIELD_NUMBER: _ClassVar[int]
    superseded: _common_pb2.Memory
    successor: _common_pb2.Memory
    def __init__(self, superseded: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ..., successor: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ...) -> None: ...

class RetractMemoryRequest(_message.Message):
    __slots__ = ("workspace", "id", "reason")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    reason: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RetractMemoryResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _common_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ...) -> None: ...

class ConfirmMemoryRequest(_message.Message):
    __slots__ = ("workspace", "id", "reason")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    reason: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ConfirmMemoryResponse(_message.Message):
    __slots__ = ("memory", "outcome")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    memory: _common_pb2.Memory
    outcome: WriteOutcome
    def __init__(self, memory: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ..., outcome: _Optional[_Union[WriteOutcome, str]] = ...) -> None: ...

class Tombstone(_message.Message):
    __slots__ = ("workspace_id", "memory_id", "source_uri", "source_fingerprint", "reason", "principal", "deleted_at", "restored_at", "purged_at")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    DELETED_AT_FIELD_NUMBER: _ClassVar[int]
    RESTORED_AT_FIELD_NUMBER: _ClassVar[int]
    PURGED_AT_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    memory_id: str
    source_uri: str
    source_fingerprint: str
    reason: str
    principal: str
    deleted_at: _timestamp_pb2.Timestamp
    restored_at: _timestamp_pb2.Timestamp
    purged_at: _timestamp_pb2.Timestamp
    def __init__(self, workspace_id: _Optional[str] = ..., memory_id: _Optional[str] = ..., source_uri: _Optional[str] = ..., source_fingerprint: _Optional[str] = ..., reason: _Optional[str] = ..., principal: _Optional[str] = ..., deleted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., restored_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., purged_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DeleteMemoryRequest(_message.Message):
    __slots__ = ("workspace", "id", "reason")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    reason: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DeleteMemoryResponse(_message.Message):
    __slots__ = ("tombstone",)
    TOMBSTONE_FIELD_NUMBER: _ClassVar[int]
    tombstone: Tombstone
    def __init__(self, tombstone: _Optional[_Union[Tombstone, _Mapping]] = ...) -> None: ...

class RestoreMemoryRequest(_message.Message):
    __slots__ = ("workspace", "id")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class RestoreMemoryResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _common_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ...) -> None: ...

class PurgeMemoryRequest(_message.Message):
    __slots__ = ("workspace", "id", "reason", "force")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    reason: str
    force: bool
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., reason: _Optional[str] = ..., force: _Optional[bool] = ...) -> None: ...

class PurgeMemoryResponse(_message.Message):
    __slots__ = ("tombstone",)
    TOMBSTONE_FIELD_NUMBER: _ClassVar[int]
    tombstone: Tombstone
    def __init__(self, tombstone: _Optional[_Union[Tombstone, _Mapping]] = ...) -> None: ...

class RescanRedactionsRequest(_message.Message):
    __slots__ = ("workspace", "dry_run")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    dry_run: bool
    def __init__(self, workspace: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class RescanProgress(_message.Message):
    __slots__ = ("memory_id", "workspace_id", "kinds", "new_version", "versions_scrubbed", "index", "total", "done", "changed", "findings")
    class FindingsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    NEW_VERSION_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_SCRUBBED_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    FINDINGS_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    workspace_id: str
    kinds: _containers.RepeatedScalarFieldContainer[str]
    new_version: int
    versions_scrubbed: int
    index: int
    total: int
    done: bool
    changed: int
    findings: _containers.ScalarMap[str, int]
    def __init__(self, memory_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., kinds: _Optional[_Iterable[str]] = ..., new_version: _Optional[int] = ..., versions_scrubbed: _Optional[int] = ..., index: _Optional[int] = ..., total: _Optional[int] = ..., done: _Optional[bool] = ..., changed: _Optional[int] = ..., findings: _Optional[_Mapping[str, int]] = ...) -> None: ...

class CreateTokenRequest(_message.Message):
    __slots__ = ("principal", "role", "workspaces", "label")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    WORKSPACES_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    principal: str
    role: str
    workspaces: _containers.RepeatedScalarFieldContainer[str]
    label: str
    def __init__(self, principal: _Optional[str] = ..., role: _Optional[str] = ..., workspaces: _Optional[_Iterable[str]] = ..., label: _Optional[str] = ...) -> None: ...

class CreateTokenResponse(_message.Message):
    __slots__ = ("token", "secret")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    token: _common_pb2.Token
    secret: str
    def __init__(self, token: _Optional[_Union[_common_pb2.Token, _Mapping]] = ..., secret: _Optional[str] = ...) -> None: ...

class RevokeTokenRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeTokenResponse(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: _common_pb2.Token
    def __init__(self, token: _Optional[_Union[_common_pb2.Token, _Mapping]] = ...) -> None: ...

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

class PromoteMemoryRequest(_message.Message):
    __slots__ = ("workspace", "id", "reason")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    reason: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class PromoteMemoryResponse(_message.Message):
    __slots__ = ("promoted", "original")
    PROMOTED_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_FIELD_NUMBER: _ClassVar[int]
    promoted: _common_pb2.Memory
    original: _common_pb2.Memory
    def __init__(self, promoted: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ..., original: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ...) -> None: ...

class RestoreMemoriesRequest(_message.Message):
    __slots__ = ("header", "records")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    header: str
    records: _containers.RepeatedCompositeFieldContainer[ExportRecord]
    def __init__(self, header: _Optional[str] = ..., records: _Optional[_Iterable[_Union[ExportRecord, _Mapping]]] = ...) -> None: ...

class ExportRecord(_message.Message):
    __slots__ = ("line", "record")
    LINE_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    line: int
    record: str
    def __init__(self, line: _Optional[int] = ..., record: _Optional[str] = ...) -> None: ...

class RestoreMemoriesResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RestoreResult]
    def __init__(self, results: _Optional[_Iterable[_Union[RestoreResult, _Mapping]]] = ...) -> None: ...

class RestoreResult(_message.Message):
    __slots__ = ("line", "type", "id", "outcome", "error")
    LINE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    line: int
    type: str
    id: str
    outcome: RestoreOutcome
    error: ItemError
    def __init__(self, line: _Optional[int] = ..., type: _Optional[str] = ..., id: _Optional[str] = ..., outcome: _Optional[_Union[RestoreOutcome, str]] = ..., error: _Optional[_Union[ItemError, _Mapping]] = ...) -> None: ...

class ImportBatch(_message.Message):
    __slots__ = ("id", "workspace_id", "source", "origin", "staged", "state", "created_by", "created_at", "decided_by", "decided_at", "memories")
    class MemoriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    STAGED_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    id: str
    workspace_id: str
    source: str
    origin: str
    staged: bool
    state: str
    created_by: str
    created_at: _timestamp_pb2.Timestamp
    decided_by: str
    decided_at: _timestamp_pb2.Timestamp
    memories: _containers.ScalarMap[str, int]
    def __init__(self, id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., source: _Optional[str] = ..., origin: _Optional[str] = ..., staged: _Optional[bool] = ..., state: _Optional[str] = ..., created_by: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., decided_by: _Optional[str] = ..., decided_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., memories: _Optional[_Mapping[str, int]] = ...) -> None: ...

class StartImportBatchRequest(_message.Message):
    __slots__ = ("workspace", "source", "origin", "staged")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    STAGED_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    source: str
    origin: str
    staged: bool
    def __init__(self, workspace: _Optional[str] = ..., source: _Optional[str] = ..., origin: _Optional[str] = ..., staged: _Optional[bool] = ...) -> None: ...

class StartImportBatchResponse(_message.Message):
    __slots__ = ("batch",)
    BATCH_FIELD_NUMBER: _ClassVar[int]
    batch: ImportBatch
    def __init__(self, batch: _Optional[_Union[ImportBatch, _Mapping]] = ...) -> None: ...

class AcceptImportBatchRequest(_message.Message):
    __slots__ = ("workspace", "id", "reason")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    reason: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class AcceptImportBatchResponse(_message.Message):
    __slots__ = ("batch", "accepted", "held")
    BATCH_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    batch: ImportBatch
    accepted: int
    held: int
    def __init__(self, batch: _Optional[_Union[ImportBatch, _Mapping]] = ..., accepted: _Optional[int] = ..., held: _Optional[int] = ...) -> None: ...

class RollbackImportBatchRequest(_message.Message):
    __slots__ = ("workspace", "id", "reason")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    reason: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RollbackImportBatchResponse(_message.Message):
    __slots__ = ("batch", "removed")
    BATCH_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    batch: ImportBatch
    removed: int
    def __init__(self, batch: _Optional[_Union[ImportBatch, _Mapping]] = ..., removed: _Optional[int] = ...) -> None: ...

class ProposeChangeRequest(_message.Message):
    __slots__ = ("workspace", "kind", "memory_ids", "change", "reason", "source", "dedupe_key")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DEDUPE_KEY_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    kind: _common_pb2.ProposalKind
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    change: _struct_pb2.Struct
    reason: str
    source: _common_pb2.ProposalSource
    dedupe_key: str
    def __init__(self, workspace: _Optional[str] = ..., kind: _Optional[_Union[_common_pb2.ProposalKind, str]] = ..., memory_ids: _Optional[_Iterable[str]] = ..., change: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., reason: _Optional[str] = ..., source: _Optional[_Union[_common_pb2.ProposalSource, str]] = ..., dedupe_key: _Optional[str] = ...) -> None: ...

class ProposeChangeResponse(_message.Message):
    __slots__ = ("proposal", "created")
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    proposal: _common_pb2.Proposal
    created: bool
    def __init__(self, proposal: _Optional[_Union[_common_pb2.Proposal, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class AcceptProposalRequest(_message.Message):
    __slots__ = ("workspace", "id", "reason")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    reason: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class AcceptProposalResponse(_message.Message):
    __slots__ = ("proposal", "memories")
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    proposal: _common_pb2.Proposal
    memories: _containers.RepeatedCompositeFieldContainer[_common_pb2.Memory]
    def __init__(self, proposal: _Optional[_Union[_common_pb2.Proposal, _Mapping]] = ..., memories: _Optional[_Iterable[_Union[_common_pb2.Memory, _Mapping]]] = ...) -> None: ...

class RejectProposalRequest(_message.Message):
    __slots__ = ("workspace", "id", "reason")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    reason: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RejectProposalResponse(_message.Message):
    __slots__ = ("proposal",)
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    proposal: _common_pb2.Proposal
    def __init__(self, proposal: _Optional[_Union[_common_pb2.Proposal, _Mapping]] = ...) -> None: ...

class ReverseProposalRequest(_message.Message):
    __slots__ = ("workspace", "id", "reason")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    reason: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ReverseProposalResponse(_message.Message):
    __slots__ = ("proposal", "memories")
    PROPOSAL_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    proposal: _common_pb2.Proposal
    memories: _containers.RepeatedCompositeFieldContainer[_common_pb2.Memory]
    def __init__(self, proposal: _Optional[_Union[_common_pb2.Proposal, _Mapping]] = ..., memories: _Optional[_Iterable[_Union[_common_pb2.Memory, _Mapping]]] = ...) -> None: ...

class RetryEmbeddingsRequest(_message.Message):
    __slots__ = ("workspace",)
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    def __init__(self, workspace: _Optional[str] = ...) -> None: ...

class RetryEmbeddingsResponse(_message.Message):
    __slots__ = ("requeued",)
    REQUEUED_FIELD_NUMBER: _ClassVar[int]
    requeued: int
    def __init__(self, requeued: _Optional[int] = ...) -> None: ...

class RecordFeedbackRequest(_message.Message):
    __slots__ = ("workspace", "id", "vote", "note", "successor_id")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    VOTE_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    SUCCESSOR_ID_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    id: str
    vote: FeedbackVote
    note: str
    successor_id: str
    def __init__(self, workspace: _Optional[str] = ..., id: _Optional[str] = ..., vote: _Optional[_Union[FeedbackVote, str]] = ..., note: _Optional[str] = ..., successor_id: _Optional[str] = ...) -> None: ...

class Feedback(_message.Message):
    __slots__ = ("memory_id", "workspace_id", "principal", "vote", "note", "created_at", "updated_at")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    VOTE_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    workspace_id: str
    principal: str
    vote: FeedbackVote
    note: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, memory_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., principal: _Optional[str] = ..., vote: _Optional[_Union[FeedbackVote, str]] = ..., note: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RecordFeedbackResponse(_message.Message):
    __slots__ = ("feedback", "replaced", "feedback_factor", "voters", "memory", "proposal_id", "proposal_created", "unchanged")
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    REPLACED_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FACTOR_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    PROPOSAL_ID_FIELD_NUMBER: _ClassVar[int]
    PROPOSAL_CREATED_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    feedback: Feedback
    replaced: FeedbackVote
    feedback_factor: float
    voters: int
    memory: _common_pb2.Memory
    proposal_id: str
    proposal_created: bool
    unchanged: bool
    def __init__(self, feedback: _Optional[_Union[Feedback, _Mapping]] = ..., replaced: _Optional[_Union[FeedbackVote, str]] = ..., feedback_factor: _Optional[float] = ..., voters: _Optional[int] = ..., memory: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ..., proposal_id: _Optional[str] = ..., proposal_created: _Optional[bool] = ..., unchanged: _Optional[bool] = ...) -> None: ...

class ConsolidateRequest(_message.Message):
    __slots__ = ("workspace", "dry_run", "full")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    FULL_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    dry_run: bool
    full: bool
    def __init__(self, workspace: _Optional[str] = ..., dry_run: _Optional[bool] = ..., full: _Optional[bool] = ...) -> None: ...

class ConsolidateResponse(_message.Message):
    __slots__ = ("passes",)
    PASSES_FIELD_NUMBER: _ClassVar[int]
    passes: _containers.RepeatedCompositeFieldContainer[ConsolidationPass]
    def __init__(self, passes: _Optional[_Iterable[_Union[ConsolidationPass, _Mapping]]] = ...) -> None: ...

class ConsolidationPass(_message.Message):
    __slots__ = ("workspace_id", "compared", "pairs", "merges", "full", "dry_run", "seconds")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    COMPARED_FIELD_NUMBER: _ClassVar[int]
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    MERGES_FIELD_NUMBER: _ClassVar[int]
    FULL_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    compared: int
    pairs: int
    merges: _containers.RepeatedCompositeFieldContainer[ConsolidationMerge]
    full: bool
    dry_run: bool
    seconds: float
    def __init__(self, workspace_id: _Optional[str] = ..., compared: _Optional[int] = ..., pairs: _Optional[int] = ..., merges: _Optional[_Iterable[_Union[ConsolidationMerge, _Mapping]]] = ..., full: _Optional[bool] = ..., dry_run: _Optional[bool] = ..., seconds: _Optional[float] = ...) -> None: ...

class ConsolidationMerge(_message.Message):
    __slots__ = ("proposal_id", "created", "memory_ids", "reason", "pairs", "merged_text")
    PROPOSAL_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    MERGED_TEXT_FIELD_NUMBER: _ClassVar[int]
    proposal_id: str
    created: bool
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    pairs: _containers.RepeatedCompositeFieldContainer[ConsolidationPair]
    merged_text: str
    def __init__(self, proposal_id: _Optional[str] = ..., created: _Optional[bool] = ..., memory_ids: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ..., pairs: _Optional[_Iterable[_Union[ConsolidationPair, _Mapping]]] = ..., merged_text: _Optional[str] = ...) -> None: ...

class ConsolidationPair(_message.Message):
    __slots__ = ("a", "b", "cosine", "jaccard")
    A_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    COSINE_FIELD_NUMBER: _ClassVar[int]
    JACCARD_FIELD_NUMBER: _ClassVar[int]
    a: str
    b: str
    cosine: float
    jaccard: float
    def __init__(self, a: _Optional[str] = ..., b: _Optional[str] = ..., cosine: _Optional[float] = ..., jaccard: _Optional[float] = ...) -> None: ...
