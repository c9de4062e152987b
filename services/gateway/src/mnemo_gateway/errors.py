"""The gateway's one error type, its one JSON error body and the one gRPC status -> HTTP table.

Every failure a caller sees, REST or MCP, from a service or from the gateway itself, says the
same three things: `code` (the gRPC status name: how a generic client should react), `reason`
(an ErrorReason name of mnemo/common/v1/errors.proto: what exactly went wrong, for callers that
act on it) and `message` (for a person).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
from fastapi.responses import JSONResponse

from mnemo.common.v1 import errors_pb2 as reasons_pb
from mnemo_platform import MnemoError, reason_name, reason_of

HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.DATA_LOSS: 500,
}


def error_body(code: grpc.StatusCode, reason: int, message: str, **extra: Any) -> dict[str, dict[str, Any]]:
    """The one JSON error body: {"error": {"code": "NOT_FOUND", "reason": "WORKSPACE_NOT_FOUND", "message": ...}}."""
    return {"error": {"code": code.name, "reason": reason_name(reason), "message": message, **extra}}


def error_response(
    code: grpc.StatusCode,
    reason: int,
    message: str,
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    """An HTTP error response with the one body; its status is the table's unless HTTP needs a finer one
    (413 for a body too large, 405 for a method a route lacks, 421 for a misdirected Host)."""
    return JSONResponse(
        error_body(code, reason, message, **extra),
        status_code=status or HTTP_STATUS.get(code, 500),
        headers=headers,
    )


# How grpc words a message over its size limit, sent or received ("Received message larger than
# max (… vs. …)", "Sent message larger than max …").
_MESSAGE_TOO_LARGE = "message larger than max"


class CallError(Exception):
    """A failed operation: the gRPC status it failed with, its ErrorReason, and a message for the caller."""

    def __init__(self, code: grpc.StatusCode, message: str, reason: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason

    @classmethod
    def invalid(cls, message: str) -> CallError:
        """Input the gateway refuses before any service sees it."""
        return cls(grpc.StatusCode.INVALID_ARGUMENT, message, reasons_pb.ERROR_REASON_INVALID_ARGUMENT)

    @classmethod
    def of(cls, exc: MnemoError) -> CallError:
        """A platform error raised in the gateway itself (a label no enum has, say)."""
        return cls(exc.code, exc.message, exc.reason)

    @classmethod
    def of_rpc(cls, exc: grpc.aio.AioRpcError, service: str = "") -> CallError:
        """A failed gRPC call, with the reason the service sent; an unavailable one names `service`
        (`search`) when given, so the caller knows which part of Mnemo is down."""
        code = exc.code()
        message = exc.details() or code.name
        reason = reason_of(exc)
        # The gateway cancels its own calls only by cancelling their task (CancelledError, never
        # this error): a CANCELLED call was ended by the service, which stopped mid-call (a pod
        # deleted, its grace over). Nothing was committed that a retry with the same key would
        # repeat, and another replica answers one: it is UNAVAILABLE, retried like any other.
        if code == grpc.StatusCode.CANCELLED:
            code, message = grpc.StatusCode.UNAVAILABLE, f"stopped before answering ({message})"
        # The channel reports these itself when no service answered, so no reason came with them.
        if code == grpc.StatusCode.UNAVAILABLE:
            what = f"the Mnemo {service} service" if service else "a Mnemo service"
            message = f"{what} is unavailable: {message}"
            reason = reason or reasons_pb.ERROR_REASON_UNAVAILABLE
        elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
            message = "a Mnemo service did not answer in time"
        elif code == grpc.StatusCode.RESOURCE_EXHAUSTED and _MESSAGE_TOO_LARGE in message.lower():
            # gRPC's own limit on one message, not the caller's rate nor the database's space:
            # retrying after a wait would meet it again, so it is no 429.
            return cls(
                grpc.StatusCode.INTERNAL,
                "the answer is too large to pass between Mnemo's services; ask for it in smaller pages",
                reasons_pb.ERROR_REASON_UNSPECIFIED,
            )
        return cls(code, message, reason)

    @property
    def http_status(self) -> int:
        return HTTP_STATUS.get(self.code, 500)

    @property
    def reason_name(self) -> str:
        return reason_name(self.reason)

    def body(self) -> dict[str, dict[str, Any]]:
        """The one JSON error body, for an error answered inside a larger reply (one item of a batch)."""
        return error_body(self.code, self.reason, self.message)

    def response(self, headers: Mapping[str, str] | None = None, **extra: Any) -> JSONResponse:
        return error_response(self.code, self.reason, self.message, headers=headers, **extra)

    def text(self) -> str:
        """The error as one line for a model to read (MCP tool errors): code, message, then the reason."""
        if self.reason == reasons_pb.ERROR_REASON_UNSPECIFIED:
            return f"{self.code.name}: {self.message}"
        return f"{self.code.name}: {self.message} (reason: {self.reason_name})"
