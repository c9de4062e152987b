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


# Exceptions that mean "a dependency is down", not "a bug": the error-mapping interceptor
# answers them with UNAVAILABLE, which callers may retry. Libraries add their own types
# (mnemo_store adds asyncpg's connection errors) so that this package needs no driver.
UNAVAILABLE_ERRORS: list[type[BaseException]] = [ConnectionError, TimeoutError]


def treat_as_unavailable(*types: type[BaseException]) -> None:
    """Registers exception types that the error-mapping interceptor reports as UNAVAILABLE."""
    for exc_type in types:
        if exc_type not in UNAVAILABLE_ERRORS:
            UNAVAILABLE_ERRORS.append(exc_type)


# Exceptions that mean "the caller's text cannot be stored" (a NUL byte PostgreSQL refuses): a
# check missed upstream still answers INVALID_ARGUMENT, never INTERNAL. Libraries register theirs.
INVALID_INPUT_ERRORS: list[type[BaseException]] = []


def treat_as_invalid_input(*types: type[BaseException]) -> None:
    """Registers exception types that the error-mapping interceptor reports as INVALID_ARGUMENT."""
    for exc_type in types:
        if exc_type not in INVALID_INPUT_ERRORS:
            INVALID_INPUT_ERRORS.append(exc_type)
