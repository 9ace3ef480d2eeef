"""The exceptions of the ps package: ps.Error, and one subclass per gRPC
status code, named after it, that a failed call raises with the servers'
message (the package re-exports them: ps.Unavailable is
ps.errors.Unavailable)."""

from __future__ import annotations

from typing import Mapping, Type


class Error(Exception):
    """A call to the parameter servers failed; the subclass names the gRPC status."""

    code: int = 2  # UNKNOWN


# One class per gRPC status code (absl::StatusCode's values), named after it.
class Cancelled(Error):
    """The call was cancelled: interrupted (Ctrl-C), or its client closed."""

    code = 1


class Unknown(Error):
    """The servers answered Unknown."""

    code = 2


class InvalidArgument(Error):
    """The servers answered InvalidArgument: a request they cannot take."""

    code = 3


class DeadlineExceeded(Error):
    """The servers answered DeadlineExceeded, or did not answer in time."""

    code = 4


class NotFound(Error):
    """The servers answered NotFound."""

    code = 5


class AlreadyExists(Error):
    """The servers answered AlreadyExists."""

    code = 6


class PermissionDenied(Error):
    """The servers answered PermissionDenied: this identity may not make the call."""

    code = 7


class ResourceExhausted(Error):
    """The servers answered ResourceExhausted."""

    code = 8


class FailedPrecondition(Error):
    """The servers answered FailedPrecondition: not now, or not with this model."""

    code = 9


class Aborted(Error):
    """The servers answered Aborted."""

    code = 10


class OutOfRange(Error):
    """The servers answered OutOfRange."""

    code = 11


class Unimplemented(Error):
    """The servers answered Unimplemented."""

    code = 12


class Internal(Error):
    """The servers answered Internal."""

    code = 13


class Unavailable(Error):
    """The servers answered Unavailable, or could not be reached."""

    code = 14


class DataLoss(Error):
    """The servers answered DataLoss."""

    code = 15


class Unauthenticated(Error):
    """The servers answered Unauthenticated: no valid credentials."""

    code = 16


# Status code -> class, which the extension raises for it.
BY_CODE: Mapping[int, Type[Error]] = {c.code: c for c in (
    Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
    PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange, Unimplemented,
    Internal, Unavailable, DataLoss, Unauthenticated)}
