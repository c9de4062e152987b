from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_REASON_UNSPECIFIED: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_ARGUMENT: _ClassVar[ErrorReason]
    ERROR_REASON_UNAUTHENTICATED: _ClassVar[ErrorReason]
    ERROR_REASON_ROLE_TOO_LOW: _ClassVar[ErrorReason]
    ERROR_REASON_OUTSIDE_WORKSPACE: _ClassVar[ErrorReason]
    ERROR_REASON_WORKSPACE_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_MEMORY_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_MEMORY_DELETED: _ClassVar[ErrorReason]
    ERROR_REASON_PURGED: _ClassVar[ErrorReason]
    ERROR_REASON_TOMBSTONED: _ClassVar[ErrorReason]
    ERROR_REASON_SUPERSEDED: _ClassVar[ErrorReason]
    ERROR_REASON_STATUS_FORBIDS: _ClassVar[ErrorReason]
    ERROR_REASON_VERSION_CONFLICT: _ClassVar[ErrorReason]
    ERROR_REASON_IDEMPOTENCY_KEY_REUSED: _ClassVar[ErrorReason]
    ERROR_REASON_ALREADY_EXISTS: _ClassVar[ErrorReason]
    ERROR_REASON_TOO_LARGE: _ClassVar[ErrorReason]
    ERROR_REASON_NOT_MIGRATED: _ClassVar[ErrorReason]
    ERROR_REASON_EMBEDDING_SPACE_MISMATCH: _ClassVar[ErrorReason]
    ERROR_REASON_UNAVAILABLE: _ClassVar[ErrorReason]
    ERROR_REASON_TOKEN_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_FORCE_REQUIRED: _ClassVar[ErrorReason]
    ERROR_REASON_RATE_LIMITED: _ClassVar[ErrorReason]
    ERROR_REASON_SESSION_NOT_FOUND: _ClassVar[ErrorReason]
ERROR_REASON_UNSPECIFIED: ErrorReason
ERROR_REASON_INVALID_ARGUMENT: ErrorReason
ERROR_REASON_UNAUTHENTICATED: ErrorReason
ERROR_REASON_ROLE_TOO_LOW: ErrorReason
ERROR_REASON_OUTSIDE_WORKSPACE: ErrorReason
ERROR_REASON_WORKSPACE_NOT_FOUND: ErrorReason
ERROR_REASON_MEMORY_NOT_FOUND: ErrorReason
ERROR_REASON_MEMORY_DELETED: ErrorReason
ERROR_REASON_PURGED: ErrorReason
ERROR_REASON_TOMBSTONED: ErrorReason
ERROR_REASON_SUPERSEDED: ErrorReason
ERROR_REASON_STATUS_FORBIDS: ErrorReason
ERROR_REASON_VERSION_CONFLICT: ErrorReason
ERROR_REASON_IDEMPOTENCY_KEY_REUSED: ErrorReason
ERROR_REASON_ALREADY_EXISTS: ErrorReason
ERROR_REASON_TOO_LARGE: ErrorReason
ERROR_REASON_NOT_MIGRATED: ErrorReason
ERROR_REASON_EMBEDDING_SPACE_MISMATCH: ErrorReason
ERROR_REASON_UNAVAILABLE: ErrorReason
ERROR_REASON_TOKEN_NOT_FOUND: ErrorReason
ERROR_REASON_FORCE_REQUIRED: ErrorReason
ERROR_REASON_RATE_LIMITED: ErrorReason
ERROR_REASON_SESSION_NOT_FOUND: ErrorReason
