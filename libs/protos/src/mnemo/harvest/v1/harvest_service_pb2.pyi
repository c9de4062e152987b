import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from mnemo.common.v1 import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Agent(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AGENT_UNSPECIFIED: _ClassVar[Agent]
    AGENT_CLAUDE_CODE: _ClassVar[Agent]
    AGENT_CODEX: _ClassVar[Agent]
    AGENT_OPENCODE: _ClassVar[Agent]
    AGENT_PI: _ClassVar[Agent]

class SourceState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SOURCE_STATE_UNSPECIFIED: _ClassVar[SourceState]
    SOURCE_STATE_ACTIVE: _ClassVar[SourceState]
    SOURCE_STATE_IDLE: _ClassVar[SourceState]
    SOURCE_STATE_HARVESTED: _ClassVar[SourceState]
    SOURCE_STATE_SKIPPED: _ClassVar[SourceState]
    SOURCE_STATE_FAILED: _ClassVar[SourceState]

class RunOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_OUTCOME_UNSPECIFIED: _ClassVar[RunOutcome]
    RUN_OUTCOME_HARVESTED: _ClassVar[RunOutcome]
    RUN_OUTCOME_NEW_VERSION: _ClassVar[RunOutcome]
    RUN_OUTCOME_UNCHANGED: _ClassVar[RunOutcome]
    RUN_OUTCOME_SKIPPED: _ClassVar[RunOutcome]
    RUN_OUTCOME_FAILED: _ClassVar[RunOutcome]

class SkipReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SKIP_REASON_UNSPECIFIED: _ClassVar[SkipReason]
    SKIP_REASON_STILL_ACTIVE: _ClassVar[SkipReason]
    SKIP_REASON_PAUSED: _ClassVar[SkipReason]
    SKIP_REASON_SELF_CAPTURE: _ClassVar[SkipReason]
    SKIP_REASON_EMPTY: _ClassVar[SkipReason]
    SKIP_REASON_NO_WORKSPACE: _ClassVar[SkipReason]
    SKIP_REASON_TOMBSTONED: _ClassVar[SkipReason]
    SKIP_REASON_TOO_LARGE: _ClassVar[SkipReason]
AGENT_UNSPECIFIED: Agent
AGENT_CLAUDE_CODE: Agent
AGENT_CODEX: Agent
AGENT_OPENCODE: Agent
AGENT_PI: Agent
SOURCE_STATE_UNSPECIFIED: SourceState
SOURCE_STATE_ACTIVE: SourceState
SOURCE_STATE_IDLE: SourceState
SOURCE_STATE_HARVESTED: SourceState
SOURCE_STATE_SKIPPED: SourceState
SOURCE_STATE_FAILED: SourceState
RUN_OUTCOME_UNSPECIFIED: RunOutcome
RUN_OUTCOME_HARVESTED: RunOutcome
RUN_OUTCOME_NEW_VERSION: RunOutcome
RUN_OUTCOME_UNCHANGED: RunOutcome
RUN_OUTCOME_SKIPPED: RunOutcome
RUN_OUTCOME_FAILED: RunOutcome
SKIP_REASON_UNSPECIFIED: SkipReason
SKIP_REASON_STILL_ACTIVE: SkipReason
SKIP_REASON_PAUSED: SkipReason
SKIP_REASON_SELF_CAPTURE: SkipReason
SKIP_REASON_EMPTY: SkipReason
SKIP_REASON_NO_WORKSPACE: SkipReason
SKIP_REASON_TOMBSTONED: SkipReason
SKIP_REASON_TOO_LARGE: SkipReason

class RunRequest(_message.Message):
    __slots__ = ("agent", "ignore_idle", "session")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    IGNORE_IDLE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    agent: str
    ignore_idle: bool
    session: str
    def __init__(self, agent: _Optional[str] = ..., ignore_idle: _Optional[bool] = ..., session: _Optional[str] = ...) -> None: ...

class RunProgress(_message.Message):
    __slots__ = ("agent", "session_id", "outcome", "detail", "index", "total", "done", "harvested", "skipped", "failed", "memory_id", "skip_reason")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    HARVESTED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    SKIP_REASON_FIELD_NUMBER: _ClassVar[int]
    agent: str
    session_id: str
    outcome: str
    detail: str
    index: int
    total: int
    done: bool
    harvested: int
    skipped: int
    failed: int
    memory_id: str
    skip_reason: str
    def __init__(self, agent: _Optional[str] = ..., session_id: _Optional[str] = ..., outcome: _Optional[str] = ..., detail: _Optional[str] = ..., index: _Optional[int] = ..., total: _Optional[int] = ..., done: _Optional[bool] = ..., harvested: _Optional[int] = ..., skipped: _Optional[int] = ..., failed: _Optional[int] = ..., memory_id: _Optional[str] = ..., skip_reason: _Optional[str] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AgentStatus(_message.Message):
    __slots__ = ("agent", "enabled", "roots", "sources_seen", "harvested", "active", "failed", "skipped", "failures", "refused")
    class SkippedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    ROOTS_FIELD_NUMBER: _ClassVar[int]
    SOURCES_SEEN_FIELD_NUMBER: _ClassVar[int]
    HARVESTED_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    agent: str
    enabled: bool
    roots: _containers.RepeatedScalarFieldContainer[str]
    sources_seen: int
    harvested: int
    active: int
    failed: int
    skipped: _containers.ScalarMap[str, int]
    failures: _containers.RepeatedCompositeFieldContainer[Source]
    refused: _containers.RepeatedCompositeFieldContainer[Source]
    def __init__(self, agent: _Optional[str] = ..., enabled: _Optional[bool] = ..., roots: _Optional[_Iterable[str]] = ..., sources_seen: _Optional[int] = ..., harvested: _Optional[int] = ..., active: _Optional[int] = ..., failed: _Optional[int] = ..., skipped: _Optional[_Mapping[str, int]] = ..., failures: _Optional[_Iterable[_Union[Source, _Mapping]]] = ..., refused: _Optional[_Iterable[_Union[Source, _Mapping]]] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("agents", "last_run_at", "interval_s", "idle_s", "unregistered", "archive_bytes", "paused")
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    LAST_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    IDLE_S_FIELD_NUMBER: _ClassVar[int]
    UNREGISTERED_FIELD_NUMBER: _ClassVar[int]
    ARCHIVE_BYTES_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[AgentStatus]
    last_run_at: _timestamp_pb2.Timestamp
    interval_s: float
    idle_s: float
    unregistered: _containers.RepeatedScalarFieldContainer[str]
    archive_bytes: int
    paused: str
    def __init__(self, agents: _Optional[_Iterable[_Union[AgentStatus, _Mapping]]] = ..., last_run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., interval_s: _Optional[float] = ..., idle_s: _Optional[float] = ..., unregistered: _Optional[_Iterable[str]] = ..., archive_bytes: _Optional[int] = ..., paused: _Optional[str] = ...) -> None: ...

class Source(_message.Message):
    __slots__ = ("agent", "session_id", "path", "workspace_id", "state", "detail", "memory_id", "size", "updated_at", "harvested_at", "skip_reason")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    HARVESTED_AT_FIELD_NUMBER: _ClassVar[int]
    SKIP_REASON_FIELD_NUMBER: _ClassVar[int]
    agent: str
    session_id: str
    path: str
    workspace_id: str
    state: str
    detail: str
    memory_id: str
    size: int
    updated_at: _timestamp_pb2.Timestamp
    harvested_at: _timestamp_pb2.Timestamp
    skip_reason: str
    def __init__(self, agent: _Optional[str] = ..., session_id: _Optional[str] = ..., path: _Optional[str] = ..., workspace_id: _Optional[str] = ..., state: _Optional[str] = ..., detail: _Optional[str] = ..., memory_id: _Optional[str] = ..., size: _Optional[int] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., harvested_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., skip_reason: _Optional[str] = ...) -> None: ...

class ListSourcesRequest(_message.Message):
    __slots__ = ("agent", "state", "page_size", "page_token")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    agent: str
    state: str
    page_size: int
    page_token: str
    def __init__(self, agent: _Optional[str] = ..., state: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSourcesResponse(_message.Message):
    __slots__ = ("sources", "next_page_token")
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sources: _containers.RepeatedCompositeFieldContainer[Source]
    next_page_token: str
    def __init__(self, sources: _Optional[_Iterable[_Union[Source, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
