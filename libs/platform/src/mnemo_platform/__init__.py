"""Settings, logging, tracing, errors and the gRPC server runner shared by Mnemo's services."""

from mnemo_platform.channels import open_channel, service_config
from mnemo_platform.context import (
    LOCAL_PRINCIPAL,
    PRINCIPAL_KEY,
    REQUEST_ID_KEY,
    CallContext,
    current_call,
    new_request_id,
    reset_call,
    set_call,
)
from mnemo_platform.enums import enum_label, enum_labels, enum_value
from mnemo_platform.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    MnemoError,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
    treat_as_unavailable,
)
from mnemo_platform.grpc_server import GrpcApp, GrpcServer, Registration
from mnemo_platform.logging import configure_logging
from mnemo_platform.runner import Component, run_until_signalled
from mnemo_platform.settings import SettingsError, env_vars, load
from mnemo_platform.telemetry import configure_tracing, current_trace_id, shutdown_tracing, tracer

__all__ = [
    "LOCAL_PRINCIPAL",
    "PRINCIPAL_KEY",
    "REQUEST_ID_KEY",
    "AlreadyExists",
    "CallContext",
    "Component",
    "FailedPrecondition",
    "GrpcApp",
    "GrpcServer",
    "InvalidArgument",
    "MnemoError",
    "NotFound",
    "PermissionDenied",
    "Registration",
    "SettingsError",
    "Unauthenticated",
    "Unavailable",
    "configure_logging",
    "configure_tracing",
    "current_call",
    "current_trace_id",
    "enum_label",
    "enum_labels",
    "enum_value",
    "env_vars",
    "load",
    "new_request_id",
    "open_channel",
    "reset_call",
    "run_until_signalled",
    "service_config",
    "set_call",
    "shutdown_tracing",
    "tracer",
    "treat_as_unavailable",
]
