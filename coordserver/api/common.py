"""Request parsing shared by every blueprint: the models a view declares (`accepts`), parsed with `body()` and
`query()` (coordserver/schemas), and path ids.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from quart import current_app, request
from werkzeug.routing import BaseConverter

from ..errors import Invalid
from ..schemas import Model, from_body, from_query
from ..schemas.base import INT_MAX


def accepts(body: type[Model] | None = None, *, query: type[Model] | None = None,
            returns: type | Mapping[int, type | None] | None = None, body_required: bool = True,
            media: str | tuple[str, ...] = "application/json", path: dict[str, type] | None = None,
            operation_id: str | None = None):
    """Declares a view's request body, query and 2xx response models (read by /api/openapi.json and the MCP
    tools' output schemas; a response is a Model, or a bare map or array of them), and the type of any path
    parameter that is more than a segment (`path={"identity": Identity}`; the view still checks it). The view
    parses them with `await body()` and `query()` once it has checked who is asking (a 401 comes before a 400).
    `operation_id`: the OpenAPI operationId's stem where it is not the endpoint (a route moved to another
    blueprint keeps its v1 id)."""
    def decorator(view):
        view.__schema__ = {"body": body, "query": query, "body_required": body_required, "media": media, "path": path or {},
                           "returns": returns if isinstance(returns, dict) or returns is None else {200: returns}}
        if operation_id is not None:
            view.__schema__["operation_id"] = operation_id
        return view
    return decorator


def _declared(part: str):
    endpoint = request.endpoint
    assert endpoint is not None  # called by a view: the request was routed
    return getattr(current_app.view_functions[endpoint], "__schema__", {}).get(part)


async def body():
    """The current view's declared body model, parsed from the raw body (through jsonstrict)."""
    # (get_data's defaults, named: its type is bytes only when as_text=False is said)
    raw = await request.get_data(cache=True, as_text=False, parse_form_data=False)
    return from_body(_declared("body"), raw, _declared("body_required"),
                     request.headers.get("Content-Type"))


def query():
    """The current view's declared query model, parsed from the query string."""
    return from_query(_declared("query"), request.args)


def path_int(value: str, what: str = "id") -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise Invalid(f"Invalid {what}") from None
    if number < 0 or number > INT_MAX:  # row ids are PostgreSQL `integer`s: a larger one names no row
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
