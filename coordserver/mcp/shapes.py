"""A tool's arguments: their JSON Schema (inputSchema) and how they become the route's request.

A tool's schema is its route's: the path parameters (typed in PATH below), the fields of the query model
and the body model the route declares (`@accepts(Body, query=Query)`, coordserver/schemas), by their wire
names; a route that takes no query or body (pending, mark-read, presence) has only its path parameters.
Query arguments are written as a REST client writes them (true/false, lists comma-separated) and checked
here with the route's own parse of its query model; the body goes to the route as given and the route parses
it with its body model: a refusal reads exactly as it does over REST.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, cast

import msgspec

from ..errors import Invalid
from ..jsonstrict import JSONRejected, check_text
from ..schemas import Model, convert, from_query
from ..schemas.base import RowId, wire_names

# The type of each path parameter, by the name the tools' paths give it.
PATH = {"id": Annotated[RowId, msgspec.Meta(description="A mailbox message id")],
        "recipient": Annotated[str, msgspec.Meta(description="The identity to write to")],
        "channelId": Annotated[str, msgspec.Meta(description="A chat channel id (uuid)")],
        "taskId": Annotated[str, msgspec.Meta(description="A task id (uuid)")],
        "pageId": Annotated[str, msgspec.Meta(description="A notebook page id (uuid)")],
        "askId": Annotated[RowId, msgspec.Meta(description="An ask id")],
        "versionId": Annotated[RowId, msgspec.Meta(description="A notebook page version id")],
        "alertId": Annotated[RowId, msgspec.Meta(description="A buzz alert id")],
        "reservationId": Annotated[RowId, msgspec.Meta(description="A reservation id")],
        "guardId": Annotated[RowId, msgspec.Meta(description="A loop guard id")],
        "entryId": Annotated[RowId, msgspec.Meta(description="A directory entry (link) id")]}
_PATH_PARAM = re.compile(r"\{(\w+)\}")


class Refused(Exception):
    """Arguments that cannot make a request; the message is the tool error's text."""


@dataclass(frozen=True)
class Shape:
    path: str  # the route's path template, {name} for each parameter
    view: Any  # the Quart view function of the route
    fixed: tuple[str, ...]  # body fields the tool sets itself
    own: type | None = None  # arguments the tool itself takes (not the route's): a Model, by wire name

    @cached_property
    def declared(self) -> dict:
        return getattr(self.view, "__schema__", {}) or {}

    @cached_property
    def path_model(self) -> type[Model]:
        fields = [(name, PATH[name]) for name in _PATH_PARAM.findall(self.path)]
        return cast(type[Model], msgspec.defstruct("Path", fields, bases=(Model,), kw_only=True))  # a Model: its base

    @cached_property
    def query_model(self) -> type | None:
        return self.declared.get("query")

    @cached_property
    def body_model(self) -> type | None:
        return self.declared.get("body")

    def input_schema(self) -> dict:
        models = [m for m in (self.path_model, self.query_model, self.body_model, self.own) if m is not None]
        _refs, components = msgspec.json.schema_components(models, ref_template="#/$defs/{name}")
        properties: dict[str, Any] = {}
        required: list[str] = []
        for model in models:
            part = components.pop(model.__name__)
            properties.update({k: v for k, v in part.get("properties", {}).items() if k not in self.fixed})
            required += [name for name in part.get("required", ()) if name not in self.fixed]
        schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required,
                                  "additionalProperties": False}
        if components:
            schema["$defs"] = components
        return schema

    def own_arguments(self, given: dict) -> tuple[dict, Any]:
        """The arguments meant for the route, and the tool's own (its `own` model, parsed). Raises Refused."""
        if self.own is None:
            return given, None
        names = wire_names(self.own)
        try:
            own: Any = convert(self.own, {k: v for k, v in given.items() if k in names})
        except Invalid as error:
            raise Refused(error.message) from None
        return {k: v for k, v in given.items() if k not in names}, own

    def request(self, method: str, given: dict) -> tuple[str, dict[str, str], dict | None]:
        """Arguments -> (path, query, body) of the route. Raises Refused."""
        path_names = set(self.path_model.__struct_fields__)
        query_names = wire_names(self.query_model) if self.query_model else frozenset()
        body_names = wire_names(self.body_model) - set(self.fixed) if self.body_model else frozenset()
        unknown = sorted(set(given) - path_names - query_names - body_names)
        if unknown:
            raise Refused(f"Unknown argument(s): {', '.join(unknown)}")
        for name in (path_names | query_names) & set(given):
            _plain_text(name, given[name])
        path = self._path({k: v for k, v in given.items() if k in path_names})
        query = {k: _query_value(v) for k, v in given.items() if k in query_names}
        if self.query_model is not None:
            try:  # the route's own parse of these values, so a refusal comes before any request
                from_query(self.query_model, query)
            except Invalid as error:
                raise Refused(error.message) from None
        if method in ("GET", "DELETE"):
            return path, query, None
        body = {k: v for k, v in given.items() if k in body_names}
        return path, query, body

    def _path(self, values: dict) -> str:
        try:
            typed = msgspec.to_builtins(convert(self.path_model, values))
        except Invalid as error:  # `taskId is required`, `id must be an integer`
            raise Refused(error.message) from None
        path = self.path
        for name, value in typed.items():
            text = str(value)
            if not text or "/" in text or text in (".", ".."):
                raise Refused(f"{name} is not a valid id")
            path = path.replace("{" + name + "}", text)
        return path


def _plain_text(name: str, value: Any) -> None:
    """An argument that becomes part of a path or query must be encodable text (no lone surrogate, no
    NUL), as the REST route's 400 requires: refused here, before it is parsed or any request is made."""
    for item in value if isinstance(value, list) else (value,):
        if isinstance(item, str):
            try:
                check_text(item, name)
            except JSONRejected as error:
                raise Refused(str(error)) from None


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def object_schema(model: type, wrap: str | None = None) -> dict:
    """The JSON Schema of a type as one inline document with an object at the root, as MCP wants for a tool's
    output: a Struct's own definition at the top (the rest under `$defs`); a bare array is put in an
    object under `wrap`."""
    refs, defs = msgspec.json.schema_components([model], ref_template="#/$defs/{name}")
    top = refs[0]
    if wrap is not None:
        top = {"type": "object", "properties": {wrap: top}, "required": [wrap]}
    elif "$ref" in top:
        top = dict(defs.pop(top["$ref"].rsplit("/", 1)[1]))
        top.pop("title", None)
    if top.get("type") != "object":
        raise TypeError(f"{model!r} is no object schema: a bare answer needs the tool's wrap key")
    if defs:
        top["$defs"] = defs
    return top
