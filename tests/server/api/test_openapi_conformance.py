"""The OpenAPI document and the schemathesis run (conformance.py): the operations no other part takes ("rest"),
called as a user and as the admin; that the run uses every check schemathesis has; and the document itself: valid
OpenAPI 3.1, with a declared response model for every JSON route. The other parts run in
test_openapi_conformance_*.py, each module with its own server, so the test processes run them side by side."""
from __future__ import annotations

import json
import re

import jsonschema
import pytest
from schemathesis.specs.openapi.checks import positive_data_acceptance
from schemathesis.specs.openapi.definitions import OPENAPI_31

from coordserver.api.openapi import openapi_document
from coordserver.app import create_app
from coordserver.settings import Settings
from tests.helpers import base_env
from tests.server.api.conformance import (ANY_PART, CHECK_NAMES, EVERY_CHECK, PARTS, REFERENCE_REFUSALS,
                                          api_schema, conformance_server, conformance_tests)

assert api_schema and conformance_server  # the fixtures this module's tests use, imported so pytest finds them
globals().update(conformance_tests("rest"))


def test_every_check_runs():
    """The checks below are every check schemathesis ships, the two request checks included."""
    assert {"positive_data_acceptance", "negative_data_rejection", "not_a_server_error", "status_code_conformance",
            "response_schema_conformance", "content_type_conformance", "response_headers_conformance"} <= CHECK_NAMES
    assert positive_data_acceptance not in EVERY_CHECK and len(EVERY_CHECK) == len(CHECK_NAMES)


def test_only_existence_refusals_pass_as_acceptance():
    """The exception (conformance.py) cannot hide a shape refusal: "title is required" is no existence refusal."""
    assert REFERENCE_REFUSALS.search("Unknown identity for assigneeUserId: zed")
    for shape in ("title is required", "identity must match ^[a-z][a-z0-9_-]*$", "Unknown status: x",
                  "url must be an http:// or https:// URL with a host"):
        assert not REFERENCE_REFUSALS.search(shape), shape


def test_every_part_holds_operations(app):
    """No part's pattern has gone stale (a part that matched nothing would pass without calling anything), and
    "rest" still holds the operations no part names."""
    paths = openapi_document(app.url_map.iter_rules(), app.view_functions, "1.0.0")["paths"]
    for name, pattern in PARTS.items():
        assert any(re.search(pattern, path) for path in paths), name
    assert any(not re.search(ANY_PART, path) and path != "/api/stream" for path in paths)


def test_every_part_runs_in_exactly_one_module():
    """Each part is a test of exactly one conformance module: none is left out when parts move."""
    import importlib
    import pathlib
    modules = sorted(pathlib.Path(__file__).parent.glob("test_openapi_conformance*.py"))
    names = [name for module in modules for name in vars(importlib.import_module(f"tests.server.api.{module.stem}"))
             if re.fullmatch(r"test_the_\w+_operations_conform", name)]
    expected = [f"test_the_{part}_operations_conform" for part in [*PARTS, "rest"]]
    assert sorted(names) == sorted(expected)


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


def test_building_the_document_leaves_a_process_that_exits_cleanly(tmp_path):
    """msgspec 0.22 frees some nested constrained unions twice when the interpreter exits (a str with a pattern
    beside a list of patterned str aborted every process that built the document): build it in a fresh one."""
    import subprocess
    import sys
    script = ("from coordserver.app import create_app\nfrom coordserver.settings import Settings\n"
              "from coordserver.api.openapi import openapi_document\nfrom tests.conftest import base_env\n"
              f"app = create_app(Settings.from_env(base_env('sqlite:///{tmp_path}/coord.db')))\n"
              "openapi_document(app.url_map.iter_rules(), app.view_functions, '1')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=str(__import__("pathlib").Path(__file__).resolve().parents[3]))
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_object_a_request_holds_names_its_keys_without_nul(app):
    """jsonstrict refuses NUL in a key as in a value, so each object schema a request body or query holds (a
    map of labels included) says its property names hold no NUL."""
    document = openapi_document(app.url_map.iter_rules(), app.view_functions, "1.0.0")
    components = document["components"]["schemas"]
    request_models = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(
        [op.get("requestBody", {}) for item in document["paths"].values() for op in item.values()])))
    unnamed = []

    def walk(schema, where):
        if isinstance(schema, dict):
            if schema.get("type") == "object" and "propertyNames" not in schema:
                unnamed.append(where)
            for key, value in schema.items():
                walk(value, f"{where}.{key}")
        elif isinstance(schema, list):
            for index, value in enumerate(schema):
                walk(value, f"{where}[{index}]")

    pending = list(request_models)
    while pending:  # the structs a request model holds are request text too
        for ref in re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(components[pending.pop()])):
            if ref not in request_models:
                request_models.add(ref)
                pending.append(ref)
    for name in request_models:
        walk(components[name], name)
    assert request_models and not unnamed, unnamed
