"""Typed errors raised by domain code; one handler in app.py turns them into {"error": ...}."""
from __future__ import annotations

import sys


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
