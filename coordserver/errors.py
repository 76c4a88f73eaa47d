"""Typed errors raised by domain code, and `render_error`: the one rendering of a failed request
(status, {"error": ...} body, headers, and for a 500 the redacted log line), used by both doors, the
Quart error handler in app.py and the ASGI hot paths in hotpaths.py."""
from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field

from werkzeug.exceptions import HTTPException

from .redaction import redact
from .settings import MAX_BODY_BYTES

log = logging.getLogger("coord")


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


class Unavailable(ApiError):
    """The database connection was lost (e.g. PostgreSQL restarted); the next attempt reconnects."""
    status = 503

    def __init__(self, message: str = "Database unavailable; retry shortly", retry_after: int = 1):
        super().__init__(message)
        self.headers["Retry-After"] = str(retry_after)


def log_background_failure(logger, message: str, *args) -> None:
    """For the except block of a background loop that will retry: a database outage is one warning
    line per attempt; anything else keeps its traceback."""
    if isinstance(sys.exc_info()[1], Unavailable):
        logger.warning(message + " (database unavailable)", *args)
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
