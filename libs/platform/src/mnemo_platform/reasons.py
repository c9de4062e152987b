"""Why a call failed, as a machine reads it: ErrorReason in google.rpc.ErrorInfo, in the status details.

The server side packs a reason into the `grpc-status-details-bin` trailer (the standard place,
which any gRPC client library can read); callers unpack it with `reason_of` and compare it with
the ErrorReason constants, never with status codes or message text.
"""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2, status_pb2

from mnemo.common.v1 import errors_pb2 as reasons_pb

DOMAIN = "mnemo.dev"
DETAILS_KEY = "grpc-status-details-bin"
_PREFIX = "ERROR_REASON_"


def reason_name(reason: int) -> str:
    """ERROR_REASON_TOMBSTONED -> "TOMBSTONED": the name callers see in JSON and ErrorInfo."""
    return reasons_pb.ErrorReason.Name(reason).removeprefix(_PREFIX)


def status_details(code: grpc.StatusCode, message: str, reason: int) -> tuple[tuple[str, bytes], ...]:
    """The trailing metadata that carries a reason with a failed call's status."""
    info = error_details_pb2.ErrorInfo(reason=reason_name(reason), domain=DOMAIN)
    status = status_pb2.Status(code=code.value[0], message=message)
    status.details.add().Pack(info)
    return ((DETAILS_KEY, status.SerializeToString()),)


def reason_of(error: grpc.RpcError) -> int:
    """The ErrorReason a failed call carries; ERROR_REASON_UNSPECIFIED when it carries none."""
    trailers = getattr(error, "trailing_metadata", None)
    for key, value in (trailers() if callable(trailers) else None) or ():
        if key != DETAILS_KEY or not isinstance(value, bytes):
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info) and info.domain == DOMAIN:
                try:
                    return reasons_pb.ErrorReason.Value(_PREFIX + info.reason)
                except ValueError:
                    return reasons_pb.ERROR_REASON_UNSPECIFIED
    return reasons_pb.ERROR_REASON_UNSPECIFIED
