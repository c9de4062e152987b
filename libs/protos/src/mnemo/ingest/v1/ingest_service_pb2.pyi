from google.protobuf import struct_pb2 as _struct_pb2
from mnemo.common.v1 import common_pb2 as _common_pb2
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
WRITE_OUTCOME_UNSPECIFIED: WriteOutcome
WRITE_OUTCOME_CREATED: WriteOutcome
WRITE_OUTCOME_NEW_VERSION: WriteOutcome
WRITE_OUTCOME_UNCHANGED: WriteOutcome
WRITE_OUTCOME_REPLAYED: WriteOutcome

class WriteMemoryRequest(_message.Message):
    __slots__ = ("workspace", "kind", "title", "content", "tags", "metadata", "source_uri", "idempotency_key", "provenance")
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SOURCE_URI_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    workspace: str
    kind: _common_pb2.MemoryKind
    title: str
    content: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    metadata: _struct_pb2.Struct
    source_uri: str
    idempotency_key: str
    provenance: _common_pb2.Provenance
    def __init__(self, workspace: _Optional[str] = ..., kind: _Optional[_Union[_common_pb2.MemoryKind, str]] = ..., title: _Optional[str] = ..., content: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., source_uri: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., provenance: _Optional[_Union[_common_pb2.Provenance, str]] = ...) -> None: ...

class WriteMemoryResponse(_message.Message):
    __slots__ = ("memory", "outcome")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    memory: _common_pb2.Memory
    outcome: WriteOutcome
    def __init__(self, memory: _Optional[_Union[_common_pb2.Memory, _Mapping]] = ..., outcome: _Optional[_Union[WriteOutcome, str]] = ...) -> None: ...

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
