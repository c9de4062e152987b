"""Domain errors every service raises; one interceptor maps them to gRPC status codes and reasons.

The status code says how a generic client should react (retry, fix the input, re-authenticate);
the reason (an ErrorReason of mnemo/common/v1/errors.proto, sent as google.rpc.ErrorInfo) says
what exactly went wrong, for callers that act on it. A class's default reason fits most raises;
a raise that means something narrower names its own.
"""

from __future__ import annotations

import grpc

from mnemo.common.v1 import errors_pb2 as reasons_pb


class MnemoError(Exception):
    """An anticipated failure whose message is safe and useful to show the caller."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN
    default_reason: int = reasons_pb.ERROR_REASON_UNSPECIFIED

    def __init__(self, message: str, reason: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reason = self.default_reason if reason is None else reason


class Internal(MnemoError):
    """An unanticipated failure, reported without its details (they are in the server log)."""

    code = grpc.StatusCode.INTERNAL


class InvalidArgument(MnemoError):
    code = grpc.StatusCode.INVALID_ARGUMENT
    default_reason = reasons_pb.ERROR_REASON_INVALID_ARGUMENT


class NotFound(MnemoError):
    code = grpc.StatusCode.NOT_FOUND
    default_reason = reasons_pb.ERROR_REASON_MEMORY_NOT_FOUND


class AlreadyExists(MnemoError):
    code = grpc.StatusCode.ALREADY_EXISTS
    default_reason = reasons_pb.ERROR_REASON_ALREADY_EXISTS


class FailedPrecondition(MnemoError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    default_reason = reasons_pb.ERROR_REASON_STATUS_FORBIDS


class Unavailable(MnemoError):
    code = grpc.StatusCode.UNAVAILABLE
    default_reason = reasons_pb.ERROR_REASON_UNAVAILABLE


class ResourceExhausted(MnemoError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    default_reason = reasons_pb.ERROR_REASON_UNAVAILABLE


class PermissionDenied(MnemoError):
    code = grpc.StatusCode.PERMISSION_DENIED
    default_reason = reasons_pb.ERROR_REASON_OUTSIDE_WORKSPACE


class Unauthenticated(MnemoError):
    code = grpc.StatusCode.UNAUTHENTICATED
    default_reason = reasons_pb.ERROR_REASON_UNAUTHENTICATED


# Exceptions that mean "a dependency is down", not "a bug": the error-mapping interceptor
# answers them with UNAVAILABLE, which callers may retry. Libraries add their own types
# (mnemo_store adds asyncpg's connection errors) so that this package needs no driver.
UNAVAILABLE_ERRORS: list[type[BaseException]] = [ConnectionError, TimeoutError]


def treat_as_unavailable(*types: type[BaseException]) -> None:
    """Registers exception types that the error-mapping interceptor reports as UNAVAILABLE."""
    for exc_type in types:
        if exc_type not in UNAVAILABLE_ERRORS:
            UNAVAILABLE_ERRORS.append(exc_type)


# Exceptions that mean "a dependency ran out of something" (a full disk, memory): RESOURCE_EXHAUSTED,
# retried once an operator frees it. Checked after UNAVAILABLE_ERRORS (running out of connections is
# an outage to retry, not a resource to free).
RESOURCE_EXHAUSTED_ERRORS: list[type[BaseException]] = []


def treat_as_resource_exhausted(*types: type[BaseException]) -> None:
    """Registers exception types that the error-mapping interceptor reports as RESOURCE_EXHAUSTED."""
    for exc_type in types:
        if exc_type not in RESOURCE_EXHAUSTED_ERRORS:
            RESOURCE_EXHAUSTED_ERRORS.append(exc_type)


# Exceptions that mean "the caller's text cannot be stored" (a NUL byte PostgreSQL refuses): a
# check missed upstream still answers INVALID_ARGUMENT, never INTERNAL. Libraries register theirs.
INVALID_INPUT_ERRORS: list[type[BaseException]] = []


def invalid_input() -> InvalidArgument:
    """The refusal for text a check upstream missed and the store cannot keep."""
    return InvalidArgument("a text field holds a character the store cannot keep (a NUL byte?)")


def treat_as_invalid_input(*types: type[BaseException]) -> None:
    """Registers exception types that the error-mapping interceptor reports as INVALID_ARGUMENT."""
    for exc_type in types:
        if exc_type not in INVALID_INPUT_ERRORS:
            INVALID_INPUT_ERRORS.append(exc_type)


def describe_error(exc: BaseException) -> str:
    """An exception as a log line or a client-visible note may carry it: its class and the first
    line of its message. A database error's further lines (DETAIL, HINT, CONTEXT) can quote the
    row it tripped on, and nothing users stored belongs in logs or in another caller's answer."""
    lines = str(exc).splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
