"""The OpenAPI 3.1 document, built from the routes the app serves and the models their views declare
(`accepts` in api/common.py): typed path parameters, query parameters, request bodies, 2xx and error responses."""
from __future__ import annotations

import json
import re
from typing import Any, Iterable

import msgspec

from ..schemas.common import Error
from ..schemas.base import INT_MAX, NO_NUL
from .common import RowIdConverter

_PARAM = re.compile(r"<(?:([a-z_]+)(?:\([^)]*\))?:)?([A-Za-z_][A-Za-z0-9_]*)>")  # <id>, <rowid:id>, <other_than(x):id>
_PUBLIC = ("/api/health", "/api/skill", "/api/openapi.json", "/api/docs", "/api/ingest/", "/api/auth/register",
           "/api/metrics")  # metrics: unless COORD_METRICS_TOKEN is set
_REF = "#/components/schemas/{name}"
_ERRORS = {400: "Invalid request: the error names the field and why", 401: "No valid token",
           403: "Not allowed for this caller", 404: "No such route or object", 405: "Method not allowed",
           409: "Conflicts with the current state", 413: "Request body too large",
           415: "A request body that is not application/json",
           429: "Rate limited (Retry-After says when to retry)",
           503: "Database unavailable (stopped, restarting, unreachable, out of connections, read-only) or busy; "
                "nothing was changed: retry after Retry-After seconds",
           507: "The server's storage is full: the write was refused whole, nothing was stored (a route "
                "that only reads never answers it); retry after Retry-After seconds"}
_BODY_ERRORS = (413,)
_JSON_BODY_ERRORS = (415,)  # operations that read a JSON request body
# Any route may answer 503 and 507: every write, and reads whose work writes (GET /api/wake marks buzz
# items delivered); doctor answers both with its report (declared by the view).
_SECURED_ERRORS = (401, 403)
_RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying", "required": True,
                                "schema": {"type": "string", "pattern": "^[0-9]+$"}}}
_RETRIED = (429, 503, 507)


def _path_params(rule: str, converters: dict[str, Any], declared: dict[str, type]) -> list[dict]:
    params = []
    for _converter, name in _PARAM.findall(rule):
        if name in declared:
            schema = msgspec.json.schema(declared[name])
        elif isinstance(converters.get(name), RowIdConverter):
            schema = {"type": "integer", "minimum": 0, "maximum": INT_MAX}  # path_int's range
        else:
            schema = {"type": "string", "minLength": 1, "pattern": "^[^/\\x00]+$"}  # the Gate refuses NUL
        params.append({"name": name, "in": "path", "required": True, "schema": schema})
    return params


def _state_request_text(models, view_functions, rules, components: dict) -> None:
    """What jsonstrict and the Gate refuse in every request, said where a request's text is declared: no string
    holds NUL, and a body's other members (ignored, but parsed) and any-JSON fields are JSON without it."""
    names: set[str] = set()
    for rule in rules:
        declared = getattr(view_functions[rule.endpoint], "__schema__", {})
        names.update(m.__name__ for m in (declared.get("body"), declared.get("query")) if m is not None)
    pending = list(names)
    while pending:  # the structs a request model holds are request text too
        for ref in re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(components[pending.pop()])):
            if ref not in names:
                names.add(ref)
                pending.append(ref)
    for name in names:
        schema = components[name] = _no_nul(components[name])
        if schema.get("type") == "object":
            schema.setdefault("propertyNames", {"pattern": NO_NUL})
            schema.setdefault("additionalProperties", {"$ref": _REF.format(name=_JSON)})
    components[_JSON] = {
        "description": "Any JSON value whose text holds no NUL",
        "anyOf": [{"type": "string", "pattern": NO_NUL}, {"type": ["number", "boolean", "null"]},
                  {"type": "array", "items": {"$ref": _REF.format(name=_JSON)}},
                  {"type": "object", "propertyNames": {"pattern": NO_NUL},
                   "additionalProperties": {"$ref": _REF.format(name=_JSON)}}]}


_JSON = "JsonWithoutNul"
_NESTED = ("items", "additionalProperties", "not", "propertyNames")


def _no_nul(schema: Any) -> Any:
    if not isinstance(schema, dict) or "$ref" in schema:
        return schema
    out = {}
    for key, value in schema.items():
        if key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            value = [_no_nul(item) for item in value]
        elif key in _NESTED:
            value = _no_nul(value)
        elif key == "properties":
            value = {name: _no_nul(item) for name, item in value.items()}
        out[key] = value
    if not set(out) - {"description", "title", "default", "examples"}:  # any JSON value
        return {**out, "$ref": _REF.format(name=_JSON)}
    if out.get("type") == "string" and not {"pattern", "enum", "const", "format"} & set(out):
        out["pattern"] = NO_NUL
    if out.get("type") == "object":  # a map's keys are request text too (labels: {"name": "value"})
        out.setdefault("propertyNames", {"pattern": NO_NUL})
    return out


def _query_params(model, components: dict) -> list[dict]:
    schema = components[model.__name__]
    required = set(schema.get("required", ()))
    return [{"name": name, "in": "query", "required": name in required, "schema": _without_null(prop)}
            for name, prop in schema.get("properties", {}).items()]


def _without_null(schema: dict) -> dict:
    """Query values are never null; `x | None` fields are simply optional there."""
    options = [s for s in schema.get("anyOf", ()) if s.get("type") != "null"]
    if len(options) == 1:
        return {**options[0], **{k: v for k, v in schema.items() if k not in ("anyOf", "default")}}
    return {k: v for k, v in schema.items() if k != "default"}


def _content(schema: dict | None, media: str | tuple[str, ...] = "application/json") -> dict:
    if media != "application/json":
        schema = None  # text: markdown, Prometheus exposition, server-sent events, HTML
    return {kind: {"schema": schema or {}} for kind in ((media,) if isinstance(media, str) else media)}


def _responses(declared: dict | None, has_body: bool, secured: bool, media: str, schemas: dict,
               json_body: bool = False) -> dict:
    """Declared answers (2xx, and any error status a view answers with a model of its own: doctor's report
    on 503/507), then the errors every route may answer with {"error"}."""
    responses = {}
    for status, model in (declared or {200: None}).items():
        text = "Success" if status < 400 else _ERRORS[status] + ("" if model is Error else " (the body is the report)")
        responses[str(status)] = _response(status, text, _content(schemas.get(model), media))
    for status, text in _ERRORS.items():
        skip = ((status in _BODY_ERRORS and not has_body) or (status in _SECURED_ERRORS and not secured)
                or (status in _JSON_BODY_ERRORS and not json_body))
        if not skip and str(status) not in responses:
            responses[str(status)] = _response(status, text, _content(schemas[Error]))
    return responses


def _response(status: int, text: str, content: dict) -> dict:
    response = {"description": text, "content": content}
    if status in _RETRIED:
        response["headers"] = _RETRY_AFTER
    return response


def _models(views: Iterable) -> list:
    """Every declared type: Structs, and the few bare answers (a map by identity, an array) built of them."""
    found = {Error}
    for view in views:
        schema = getattr(view, "__schema__", {})
        found.update(m for m in (schema.get("body"), schema.get("query"), *(schema.get("returns") or {}).values())
                     if m is not None)
    return sorted(found, key=lambda m: getattr(m, "__name__", repr(m)))


def openapi_document(rules, view_functions, version: str) -> dict:
    rules = [r for r in rules if r.rule.startswith("/api") and not getattr(r, "websocket", False)]
    models = _models(view_functions[r.endpoint] for r in rules)
    refs, components = msgspec.json.schema_components(models, ref_template=_REF)
    for model in models:  # what a model states beyond its fields (which fields one variant needs)
        if getattr(model, "__schema_extra__", None):
            components[model.__name__].update(model.__schema_extra__)
        for field, stated in getattr(model, "__field_schemas__", {}).items():
            components[model.__name__]["properties"][field] = stated
    _state_request_text(models, view_functions, rules, components)
    schemas = dict(zip(models, refs))
    paths: dict[str, dict] = {}
    for rule in rules:
        view = view_functions[rule.endpoint]
        schema = getattr(view, "__schema__", {})
        path = _PARAM.sub(r"{\2}", rule.rule)
        params = _path_params(rule.rule, rule._converters, schema.get("path") or {})
        if schema.get("query") is not None:
            params += _query_params(schema["query"], components)
        secured = not path.startswith(_PUBLIC)
        doc = (view.__doc__ or "").strip().splitlines()
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            operation: dict[str, Any] = {
                "operationId": f"{schema.get('operation_id') or rule.endpoint}.{method.lower()}",
                "summary": doc[0] if doc else rule.endpoint.split(".")[-1].replace("_", " "),
                "responses": _responses(schema.get("returns"), method in ("POST", "PUT", "PATCH", "DELETE"),
                                        secured, schema.get("media", "application/json"), schemas,
                                        json_body=schema.get("body") is not None)}
            if params:
                operation["parameters"] = params
            if schema.get("body") is not None:
                operation["requestBody"] = {"required": schema.get("body_required", True),
                                            "content": _content(schemas[schema["body"]])}
            if secured:
                operation["security"] = [{"bearer": []}]
            paths.setdefault(path, {})[method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "coord API", "version": version,
                 "description": "The coord v1 wire contract. Prose reference: GET /api/skill. "
                                "Browsable: GET /api/docs."},
        "paths": dict(sorted(paths.items())),
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
                       "schemas": components},
    }
