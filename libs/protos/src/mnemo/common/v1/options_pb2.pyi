from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_HARVESTER: _ClassVar[Role]
    ROLE_AGENT: _ClassVar[Role]
    ROLE_REVIEWER: _ClassVar[Role]
    ROLE_ADMIN: _ClassVar[Role]
ROLE_UNSPECIFIED: Role
ROLE_HARVESTER: Role
ROLE_AGENT: Role
ROLE_REVIEWER: Role
ROLE_ADMIN: Role
LEAST_ROLE_FIELD_NUMBER: _ClassVar[int]
least_role: _descriptor.FieldDescriptor
ACTION_FIELD_NUMBER: _ClassVar[int]
action: _descriptor.FieldDescriptor
LABEL_FIELD_NUMBER: _ClassVar[int]
label: _descriptor.FieldDescriptor
