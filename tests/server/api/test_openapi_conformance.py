"""schemathesis against a real server: every documented operation, generated requests, every response
checked against /api/openapi.json (no 5xx, documented status codes, content types, response schemas, headers),
as an ordinary user and as the admin. Bounded: a few examples per operation. And the document itself: valid
OpenAPI 3.1, with a declared response model for every JSON route."""
from __future__ import annotations

import json
import re

import jsonschema
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.definitions import OPENAPI_31
from schemathesis.specs.openapi.checks import (content_type_conformance, response_headers_conformance,
                                                response_schema_conformance, status_code_conformance)

from coordserver.api.openapi import openapi_document
from coordserver.app import create_app
from coordserver.settings import Settings
from tests.helpers import TOKENS, base_env, default_url, start_server

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          response_headers_conformance]


@pytest.fixture(scope="module")
def conformance_server(request, tmp_path_factory):
    srv = start_server(Settings.from_env(base_env(default_url(request, tmp_path_factory.mktemp("conformance")))))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def api_schema(conformance_server):
    return schemathesis.openapi.from_url(f"{conformance_server.url}/api/openapi.json")


# An event stream never ends by itself (each call would wait for the client's timeout): tests/test_stream.py.
schema = schemathesis.pytest.from_fixture("api_schema").exclude(path="/api/stream")


BOUNDS = settings(max_examples=2, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck))


def _call(case, server, who: str) -> None:
    case.call_and_validate(base_url=server.url, headers={"Authorization": f"Bearer {TOKENS[who]}"}, checks=CHECKS)


@schema.parametrize()
@BOUNDS
def test_every_operation_conforms_as_a_user(case, conformance_server):
    _call(case, conformance_server, "alice")


@schema.parametrize()
@BOUNDS
def test_every_operation_conforms_as_the_admin(case, conformance_server):
    _call(case, conformance_server, "admin")


def test_docs_page_renders_the_document(conformance_server):
    import httpx
    response = httpx.get(f"{conformance_server.url}/api/docs")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert '"/api/openapi.json"' in response.text and "<script src=" not in response.text


# Routes whose 200 is not JSON, so no response model describes it. Nothing else may go without one.
NOT_JSON = {
    "stream.stream": "text/event-stream: an SSE stream of frames, each `data` its own JSON (API.md §15)",
    "skills.overview": "text/markdown: the skill overview for agents",
    "skills.page": "text/markdown (and text/plain for /api/skill/script)",
    "metrics.scrape": "text/plain: the Prometheus exposition format",
    "meta.docs": "text/html: the API reference page for people",
    "notebook.notebook_socket": "a WebSocket upgrade; its frames are JSON text described in API.md §11",
}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    directory = tmp_path_factory.mktemp("routes")
    return create_app(Settings.from_env(base_env(f"sqlite:///{directory}/coord.db")))


def _api_rules(app):
    return [rule for rule in app.url_map.iter_rules() if rule.rule.startswith("/api")]


def test_every_json_route_declares_its_response_model(app):
    missing = []
    for rule in _api_rules(app):
        if rule.endpoint in NOT_JSON:
            continue
        declared = getattr(app.view_functions[rule.endpoint], "__schema__", {})
        returns = declared.get("returns") or {}
        if declared.get("media", "application/json") != "application/json" or not any(
                200 <= status < 300 and model is not None for status, model in returns.items()):
            missing.append(f"{sorted(rule.methods - {'HEAD', 'OPTIONS'})} {rule.rule} ({rule.endpoint})")
    assert not missing, "JSON routes without a response model (@accepts(returns=...)):\n" + "\n".join(missing)


def test_the_exceptions_are_the_routes_that_answer_something_else(app):
    """Each listed exception still exists and really is not JSON (a declared media type, or a WebSocket)."""
    rules = {rule.endpoint: rule for rule in _api_rules(app)}
    for endpoint in NOT_JSON:
        declared = getattr(app.view_functions[endpoint], "__schema__", {})
        assert endpoint in rules and (getattr(rules[endpoint], "websocket", False)
                                      or declared.get("media", "application/json") != "application/json"), endpoint


def test_the_document_is_valid_openapi_3_1_with_every_reference_resolved(app):
    document = openapi_document(app.url_map.iter_rules(), app.view_functions, "1.0.0")
    jsonschema.Draft202012Validator(OPENAPI_31).validate(document)
    components = document["components"]["schemas"]
    for schema in components.values():
        jsonschema.Draft202012Validator.check_schema(schema)
    referenced = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(document)))
    assert referenced and referenced <= set(components), referenced - set(components)


def test_every_operation_declares_the_database_faults(app):
    """Any route may answer 503 (database unavailable) and 507 (storage full: every write, and GET
    /api/wake, which marks buzz items delivered), each with Retry-After: the document says so for every
    operation, the stream and doctor (whose body is then its report) included."""
    document = openapi_document(app.url_map.iter_rules(), app.view_functions, "1.0.0")
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for status in ("503", "507"):
                declared = operation["responses"].get(status)
                assert declared is not None, f"{method.upper()} {path}: no {status}"
                assert declared["headers"]["Retry-After"]["required"] is True, f"{method.upper()} {path} {status}"
                schema = declared["content"]["application/json"]["schema"]
                model = "DoctorReport" if path.startswith("/api/doctor") else "Error"
                assert schema == {"$ref": f"#/components/schemas/{model}"}, f"{method.upper()} {path} {status}"
