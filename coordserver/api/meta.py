"""Describes the API itself: an OpenAPI 3 document built from the routes the app really serves."""
from __future__ import annotations

import re
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version

from quart import Blueprint, current_app

bp = Blueprint("meta", __name__, url_prefix="/api")

_PARAM = re.compile(r"<(?:[a-z_]+(?:\([^)]*\))?:)?([A-Za-z_][A-Za-z0-9_]*)>")  # <id>, <int:id>, <other_than(x):id>
_PUBLIC = ("/api/health", "/api/skill", "/api/openapi.json", "/api/ingest/", "/api/auth/register",
           "/api/metrics")  # metrics: unless COORD_METRICS_TOKEN is set


@lru_cache(maxsize=512)
def route_template(rule: str) -> str:
    """A Quart rule as API.md writes the path: `/api/chat/channels/<channel_id>/read` ->
    `/api/chat/channels/{id}/read`. The first parameter that is an id (`id`, `<thing>_id`) is `{id}`,
    later ones camelCase (`<workflow_id>` -> `{workflowId}`), names such as `recipient` stay."""
    seen_id = False

    def name(match: re.Match) -> str:
        nonlocal seen_id
        param = match.group(1)
        if (param == "id" or param.endswith("_id")) and not seen_id:
            seen_id = True
            return "{id}"
        head, *rest = param.split("_")
        return "{" + head + "".join(part.title() for part in rest) + "}"
    return _PARAM.sub(name, rule)


def package_version() -> str:
    try:
        return version("coord")
    except PackageNotFoundError:
        return "0.0.0"


def openapi_document(rules, view_functions) -> dict:
    paths: dict[str, dict] = {}
    for rule in rules:
        if not rule.rule.startswith("/api") or getattr(rule, "websocket", False):
            continue
        path = _PARAM.sub(r"{\1}", rule.rule)
        params = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                  for name in _PARAM.findall(rule.rule)]
        doc = (view_functions[rule.endpoint].__doc__ or "").strip().splitlines()
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            operation = {"operationId": f"{rule.endpoint}.{method.lower()}",
                         "summary": doc[0] if doc else rule.endpoint.split(".")[-1].replace("_", " "),
                         "responses": {"200": {"description": "Success"},
                                       "default": {"description": "Error",
                                                   "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}}}
            if params:
                operation["parameters"] = params
            if not path.startswith(_PUBLIC):
                operation["security"] = [{"bearer": []}]
            paths.setdefault(path, {})[method.lower()] = operation
    return {
        "openapi": "3.0.3",
        "info": {"title": "coord API", "version": package_version(),
                 "description": "The coord v1 wire contract. Prose reference: GET /api/skill."},
        "paths": dict(sorted(paths.items())),
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": {"type": "object", "required": ["error"],
                                  "properties": {"error": {"type": "string"}}}},
        },
    }


@bp.get("/openapi.json")
async def openapi():
    """The OpenAPI 3 document of this API."""
    return openapi_document(current_app.url_map.iter_rules(), current_app.view_functions)
