"""Request parsing shared by every blueprint: JSON bodies, typed fields and query values.

Each helper raises Invalid with a message naming the field, so handlers stay declarative.
"""
from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any, Mapping

from quart import current_app, request
from werkzeug.routing import BaseConverter

from ..errors import Invalid
from ..domain.swarm import optional_timestamp
from ..schemas import Model, decode_object, from_body, from_query
from ..schemas.base import INT_MAX, QUERY_INT_MAX

_MISSING = object()


def accepts(body: type[Model] | None = None, *, query: type[Model] | None = None,
            returns: type[Model] | dict[int, type[Model] | None] | None = None, body_required: bool = True,
            media: str | tuple[str, ...] = "application/json"):
    """Declares a view's request body, query and 2xx response models (read by /api/openapi.json). The view
    parses them with `await body()` and `query()` once it has checked who is asking (a 401 comes before a 400)."""
    def decorator(view):
        view.__schema__ = {"body": body, "query": query, "body_required": body_required, "media": media,
                           "returns": returns if isinstance(returns, dict) or returns is None else {200: returns}}
        return view
    return decorator


def _declared(part: str):
    return getattr(current_app.view_functions[request.endpoint], "__schema__", {}).get(part)


async def body():
    """The current view's declared body model, parsed from the raw body (through jsonstrict)."""
    return from_body(_declared("body"), await request.get_data(), _declared("body_required"))


def query():
    """The current view's declared query model, parsed from the query string."""
    return from_query(_declared("query"), request.args)


async def json_object(required: bool = True) -> dict:
    return decode_object(await request.get_data(), required)


def text(body: dict, key: str, *, required: bool = False, max_len: int | None = None, cut: bool = False,
         strip: bool = False, default: Any = None, message: str | None = None) -> str | None:
    value = body.get(key, _MISSING)
    if value is _MISSING or value is None:
        if required:
            raise Invalid(message or f"{key} is required")
        return default
    if not isinstance(value, str):
        raise Invalid(f"{key} must be a string")
    if strip:
        value = value.strip()
    if required and not value.strip():
        raise Invalid(message or f"{key} is required")
    if max_len is not None and len(value) > max_len:
        if not cut:
            raise Invalid(f"{key} is longer than {max_len} characters")
        value = value[:max_len]
    return value


def boolean(body: dict, key: str, default: bool | None = None) -> bool | None:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise Invalid(f"{key} must be true or false")
    return value


def integer(body: dict, key: str, default: int | None = None, minimum: int | None = None,
            maximum: int | None = None) -> int | None:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and (not math.isfinite(value) or not value.is_integer())):
        raise Invalid(f"{key} must be an integer")
    value = int(value)
    if abs(value) > INT_MAX:
        raise Invalid(f"{key} is out of range")
    if minimum is not None and value < minimum:
        raise Invalid(f"{key} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise Invalid(f"{key} must be at most {maximum}")
    return value


def timestamp(body: dict, key: str) -> datetime | None:
    return optional_timestamp(body.get(key), key)


def string_list(body: dict, key: str, max_items: int = 100, max_len: int = 100) -> list[str] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Invalid(f"{key} must be an array of strings")
    if len(value) > max_items or any(len(v) > max_len for v in value):
        raise Invalid(f"{key} has too many or too long entries")
    return value


def query_bool(name: str) -> bool:
    """Query booleans are true only for the literal 'true'."""
    return request.args.get(name) == "true"


def query_int(name: str, default: int, minimum: int = 0, maximum: int | None = None,
              args: Mapping[str, str] | None = None) -> int:
    """From `args`, or the current request's query string when not given."""
    raw = (request.args if args is None else args).get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise Invalid(f"{name} must be an integer") from None
    if maximum is None and value > QUERY_INT_MAX:
        raise Invalid(f"{name} is out of range")
    if value < minimum:
        raise Invalid(f"{name} must be at least {minimum}")
    return min(value, maximum) if maximum is not None else value


def query_search(name: str = "q", max_len: int = 500) -> str:
    """A required free-text search parameter."""
    value = request.args.get(name, "")
    if not value.strip():
        raise Invalid(f"{name} is required")
    if len(value) > max_len:
        raise Invalid(f"{name} is longer than {max_len} characters")
    return value


def query_time(name: str) -> datetime | None:
    return optional_timestamp(request.args.get(name) or None, name)


def query_limit(default: int = 50, cap: int = 100, args: Mapping[str, str] | None = None) -> int:
    """limit defaults to 50 and is clamped to 100 (values above are lowered, not refused)."""
    return query_int("limit", default, minimum=1, maximum=cap, args=args)


def path_int(value: str, what: str = "id") -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise Invalid(f"Invalid {what}") from None
    if number < 0 or number > QUERY_INT_MAX:
        raise Invalid(f"Invalid {what}")
    return number


class RowIdConverter(BaseConverter):
    """`<rowid:message_id>`: an integer row id. Any segment matches, so a non-number still reaches the view,
    whose path_int answers `400 Invalid id` (after the 401 for a missing token); the OpenAPI document
    types the parameter as an integer."""
    regex = "[^/]+"


class OtherThan(BaseConverter):
    """A path segment other than the given words, for a `<...>` segment beside literal siblings:
    `/recurring/<other_than(tick):id>` does not match `/recurring/tick`, so OPTIONS (and a 405) on a
    literal path list only the methods its own routes accept."""

    def __init__(self, url_map, *words: str):
        super().__init__(url_map)
        self.regex = "(?!(?:" + "|".join(re.escape(word) for word in words) + ")$)[^/]+"
