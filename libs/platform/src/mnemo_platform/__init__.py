"""Settings, logging, tracing, errors and the gRPC server runner shared by Mnemo's services.

The names below load on first use (PEP 562), so a command that needs only the settings (the
CLI talking to a running Mnemo) does not pay for importing gRPC and OpenTelemetry.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mnemo_platform.channels import open_channel, service_config
    from mnemo_platform.context import (
        ALL_WORKSPACES,
        LOCAL_PRINCIPAL,
        PRINCIPAL_KEY,
        REQUEST_ID_KEY,
        ROLES,
        CallContext,
        auth_required,
        configure_auth,
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
    from mnemo_platform.reasons import reason_name, reason_of
    from mnemo_platform.runner import Component, run_until_signalled
    from mnemo_platform.settings import SettingsError, env_vars, load, load_all
    from mnemo_platform.telemetry import configure_tracing, current_trace_id, shutdown_tracing, tracer

_EXPORTS = {
    "ALL_WORKSPACES": "mnemo_platform.context",
    "ROLES": "mnemo_platform.context",
    "auth_required": "mnemo_platform.context",
    "configure_auth": "mnemo_platform.context",
    "AlreadyExists": "mnemo_platform.errors",
    "CallContext": "mnemo_platform.context",
    "Component": "mnemo_platform.runner",
    "FailedPrecondition": "mnemo_platform.errors",
    "GrpcApp": "mnemo_platform.grpc_server",
    "GrpcServer": "mnemo_platform.grpc_server",
    "InvalidArgument": "mnemo_platform.errors",
    "LOCAL_PRINCIPAL": "mnemo_platform.context",
    "MnemoError": "mnemo_platform.errors",
    "NotFound": "mnemo_platform.errors",
    "PRINCIPAL_KEY": "mnemo_platform.context",
    "PermissionDenied": "mnemo_platform.errors",
    "REQUEST_ID_KEY": "mnemo_platform.context",
    "Registration": "mnemo_platform.grpc_server",
    "SettingsError": "mnemo_platform.settings",
    "Unauthenticated": "mnemo_platform.errors",
    "Unavailable": "mnemo_platform.errors",
    "configure_logging": "mnemo_platform.logging",
    "configure_tracing": "mnemo_platform.telemetry",
    "current_call": "mnemo_platform.context",
    "current_trace_id": "mnemo_platform.telemetry",
    "enum_label": "mnemo_platform.enums",
    "enum_labels": "mnemo_platform.enums",
    "enum_value": "mnemo_platform.enums",
    "env_vars": "mnemo_platform.settings",
    "load": "mnemo_platform.settings",
    "load_all": "mnemo_platform.settings",
    "new_request_id": "mnemo_platform.context",
    "open_channel": "mnemo_platform.channels",
    "reset_call": "mnemo_platform.context",
    "reason_name": "mnemo_platform.reasons",
    "reason_of": "mnemo_platform.reasons",
    "run_until_signalled": "mnemo_platform.runner",
    "service_config": "mnemo_platform.channels",
    "set_call": "mnemo_platform.context",
    "shutdown_tracing": "mnemo_platform.telemetry",
    "tracer": "mnemo_platform.telemetry",
    "treat_as_unavailable": "mnemo_platform.errors",
}

__all__ = [
    "ALL_WORKSPACES",
    "LOCAL_PRINCIPAL",
    "PRINCIPAL_KEY",
    "REQUEST_ID_KEY",
    "ROLES",
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
    "auth_required",
    "configure_auth",
    "configure_logging",
    "configure_tracing",
    "current_call",
    "current_trace_id",
    "enum_label",
    "enum_labels",
    "enum_value",
    "env_vars",
    "load",
    "load_all",
    "new_request_id",
    "open_channel",
    "reason_name",
    "reason_of",
    "reset_call",
    "run_until_signalled",
    "service_config",
    "set_call",
    "shutdown_tracing",
    "tracer",
    "treat_as_unavailable",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mnemo_platform' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
