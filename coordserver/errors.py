"""Typed errors raised by domain code, and `render_error`: the one rendering of a failed request
(status, {"error": ...} body, headers, and for a 500 the redacted log line), used by both doors, the
Quart error handler in app.py and the ASGI hot paths in hotpaths.py."""
from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from typing import Protocol

from werkzeug.exceptions import HTTPException

from .redaction import redact
from .settings import MAX_BODY_BYTES

log = logging.getLogger("coord")


class RefusalCounter(Protocol):
    """What a DatabaseFault tells of each request answered with it (dbfaults.Outage)."""

    def count_refusal(self) -> None: ...


class ApiError(Exception):
    status = 400

    def __init__(self, message: str, **extra):
        super().__init__(message)
        self.message = message
        self.extra = extra
        self.headers: dict[str, str] = {}

    def body(self) -> dict:
        return {"error": self.message, **self.extra}


class Invalid(ApiError):
    status = 400


class Unauthorized(ApiError):
    status = 401


class Forbidden(ApiError):
    status = 403


class NotFound(ApiError):
    status = 404


class Conflict(ApiError):
    status = 409


class UnsupportedMediaType(ApiError):
    status = 415


class RateLimited(ApiError):
    status = 429

    def __init__(self, retry_after: int, message: str | None = None):
        super().__init__(message or f"Too many requests; retry in {retry_after} s")
        self.headers["Retry-After"] = str(retry_after)


class DatabaseFault(ApiError):
    """The database, not the request, failed: it cannot be reached or used (Unavailable) or its storage
    is full (StorageFull). Raised by the Store (dbfaults.classify); `outage` is the store's Outage, which
    logs the fault once and counts each request answered with it (render_error)."""
    status = 503

    def __init__(self, message: str, retry_after: int = 1):
        super().__init__(message)
        self.headers["Retry-After"] = str(retry_after)
        self.outage: RefusalCounter | None = None

    def refused(self) -> None:
        """One request was answered with this fault."""
        if self.outage is not None:
            self.outage.count_refusal()


class Unavailable(DatabaseFault):
    """The database cannot be reached or used now (PostgreSQL stopped or restarting, connections lost,
    too many connections, read-only after a failover, SQLite locked elsewhere); the next attempt reconnects."""
    status = 503

    def __init__(self, message: str = "Database unavailable; retry shortly", retry_after: int = 1):
        super().__init__(message, retry_after)


class StorageFull(DatabaseFault):
    """The database's storage is full (SQLite `database or disk is full`, PostgreSQL 53100): writes are
    refused, whole, until an operator frees space."""
    status = 507

    def __init__(self, message: str = "The server's storage is full; retry later", retry_after: int = 30):
        super().__init__(message, retry_after)


def log_background_failure(logger, message: str, *args) -> None:
    """For the except block of a background loop that will retry: a database fault the store has already
    logged (once per outage) adds nothing; another one is a warning line; anything else keeps its traceback."""
    error = sys.exc_info()[1]
    if isinstance(error, DatabaseFault):
        if error.outage is None:
            logger.warning(message + " (%s)", *args, error.message)
        else:
            logger.debug(message + " (%s)", *args, error.message)
    else:
        logger.exception(message, *args)


_HTTP_MESSAGES = {
    400: "Bad request", 401: "Authentication required", 403: "Forbidden", 404: "Not found",
    405: "Method not allowed", 413: f"Request body larger than {MAX_BODY_BYTES} bytes",
    415: "Unsupported media type", 429: "Too many requests",
}


@dataclass(frozen=True)
class ErrorAnswer:
    status: int
    body: dict
    headers: dict[str, str] = field(default_factory=dict)


def render_error(error: BaseException, method: str, path: str) -> ErrorAnswer:
    """What a request that raised `error` answers. `path` is logged redacted (tokens travel in paths)."""
    if isinstance(error, DatabaseFault):
        error.refused()
    if isinstance(error, ApiError):
        return ErrorAnswer(error.status, error.body(), dict(error.headers))
    if isinstance(error, HTTPException):
        status = error.code or 500
        message = _HTTP_MESSAGES.get(status) or (error.description if status < 500 else "Internal server error")
        allowed = getattr(error, "valid_methods", None)
        return ErrorAnswer(status, {"error": message},
                           {"Allow": ", ".join(allowed)} if status == 405 and allowed else {})
    log.error("unhandled error on %s %s", method, redact(path), exc_info=error)
    return ErrorAnswer(500, {"error": "Internal server error"})
