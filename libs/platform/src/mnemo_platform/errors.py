"""Domain errors every service raises; one interceptor maps them to gRPC status codes."""

from __future__ import annotations

import grpc


class MnemoError(Exception):
    """An anticipated failure whose message is safe and useful to show the caller."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(MnemoError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(MnemoError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(MnemoError):
    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(MnemoError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Unavailable(MnemoError):
    code = grpc.StatusCode.UNAVAILABLE


class PermissionDenied(MnemoError):
    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(MnemoError):
    code = grpc.StatusCode.UNAUTHENTICATED
