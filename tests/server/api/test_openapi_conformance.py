"""schemathesis against a real server: every documented operation, generated requests, every check schemathesis
has, as an ordinary user and as the admin. The response checks (no 5xx, documented status codes, content types,
response schemas, headers) and the request checks: a request the schema calls valid is accepted (positive data
acceptance) and one it calls invalid is refused (negative data rejection), so a client generated from
/api/openapi.json is right about what the server takes. Phases: the explicit examples, coverage (each constraint's
boundaries, both sides) and fuzzing, bounded and derandomised. And the document itself: valid OpenAPI 3.1, with a
declared response model for every JSON route."""
from __future__ import annotations

import json
import re

import jsonschema
import pytest
import schemathesis
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import positive_data_acceptance
from schemathesis.specs.openapi.definitions import OPENAPI_31

from coordserver.api.openapi import openapi_document
from coordserver.app import create_app
from coordserver.settings import Settings
from tests.helpers import TOKENS, base_env, default_url, start_server

load_all_checks()

# A schema states what a well-formed request is; it cannot state what exists on this server. A well-formed
# reference to something that does not exist (an identity, a project, a task, a page, a cursor the server never
# gave), a cron expression that never fires, or a webhook host the server may not call is refused with 400, as
# API.md says. Only these refusals count as an acceptance of valid data; any other 400 for a request the schema
# calls valid is a failure. Each pattern is a domain message for a value the schema cannot know.
REFERENCE_REFUSALS = re.compile("|".join([
    r"^Unknown identity(?: for \w+)?: ",                  # domain/swarm.py known_identity, chat members, backupAgent
    r"^\w+ is not a known identity: ",                     # domain/buzz.py wakeAgent / notifyAgent
    r"^Invalid recipient mailbox$",                        # POST /api/mailboxes/{recipient}/messages (API.md §4)
    r"^Unknown projectId: ",                               # a project the caller cannot see
    r"^Unknown task for \w+: ",                            # mustBeDoneAfterTaskId, nextTaskId
    r"^Invalid cursor$",                                   # a cursor of the right shape the server never gave
    r"^Invalid cronExpr: ",                                # five fields that name no time (domain/recurring.py)
    r"^Unknown timezone: ",                                # a name of the right shape that is no IANA zone
    r"^Webhook URL refused: ",                             # netcheck: a host the server must not call
    r"^An agent cannot be its own backup$",
    r"^deadline must be in the future$",                   # POST /api/asks: the server's clock decides
    r"^Unknown option for this ask: ",                     # an answer naming an option the ask does not have
    r"^This ask takes one of its options, not text$",      # a text answer to an options-only ask
    r"^until must be (in the future|within \d+ minutes)$",  # a snooze's end: the server's clock decides
    r"^endsAt must be in the future, within \d+ minutes$",  # a silence's end, likewise
    r"^match\.title is not a regular expression: ",       # /.../ that Python's re does not compile
    r"^runbookPageId is not a notebook page$",             # a page id of the right shape that names no page
]))


def positive_data_acceptance_but_existence(ctx, response, case):
    """positive_data_acceptance, except for the refusals of what no schema can know (above)."""
    if response.status_code == 400 and case.meta is not None and case.meta.generation.mode.is_positive:
        try:
            error = response.json().get("error", "")
        except ValueError:
            error = ""
        if REFERENCE_REFUSALS.search(error):
            return None
    return positive_data_acceptance(ctx, response, case)


EVERY_CHECK = [positive_data_acceptance_but_existence if check is positive_data_acceptance else check
               for check in CHECKS.get_all()]
CHECK_NAMES = {getattr(check, "__name__", type(check).__name__) for check in CHECKS.get_all()}

CONFIG = {
    # Unknown query parameters are ignored, as HTTP APIs customarily do (OpenAPI cannot close a parameter list),
    # so none are generated as "invalid".
    "generation": {"mode": "all", "max-examples": 25, "deterministic": True, "database": "none",
                   "allow-extra-parameters": False},
    "phases": {"examples": {"enabled": True}, "coverage": {"enabled": True}, "fuzzing": {"enabled": True}},
    # 413: a body over the request size limit is refused before it is read (declared on every operation
    # with a body); schemathesis's default list of refusals lacks it.
    "checks": {"negative_data_rejection": {"expected-statuses": [
        "400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]}},
}


def test_every_check_runs():
    """The checks below are every check schemathesis ships, the two request checks included."""
    assert {"positive_data_acceptance", "negative_data_rejection", "not_a_server_error", "status_code_conformance",
            "response_schema_conformance", "content_type_conformance", "response_headers_conformance"} <= CHECK_NAMES
    assert positive_data_acceptance not in EVERY_CHECK and len(EVERY_CHECK) == len(CHECK_NAMES)


def test_only_existence_refusals_pass_as_acceptance():
    """The exception above cannot hide a shape refusal: "title is required" is no existence refusal."""
    assert REFERENCE_REFUSALS.search("Unknown identity for assigneeUserId: zed")
    for shape in ("title is required", "identity must match ^[a-z][a-z0-9_-]*$", "Unknown status: x",
                  "url must be an http:// or https:// URL with a host"):
        assert not REFERENCE_REFUSALS.search(shape), shape


@pytest.fixture(scope="module")
def conformance_server(request, tmp_path_factory):
    srv = start_server(Settings.from_env(base_env(default_url(request, tmp_path_factory.mktemp("conformance")))))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def api_schema(conformance_server):
    return schemathesis.openapi.from_url(f"{conformance_server.url}/api/openapi.json",
                                         config=SchemathesisConfig.from_dict(CONFIG))


# An event stream never ends by itself (each call would wait for the client's timeout): tests/test_stream.py.
schema = schemathesis.pytest.from_fixture("api_schema").exclude(path="/api/stream")

# The operations in parts of about 15 to 30, each its own test (and its own pytest-timeout): all of them in one test
# took 281 s of the 300 on a slow machine. "rest" is every operation no other part takes, so each runs exactly once.
PARTS = {"swarm": r"^/api/swarm(/|$)", "buzz": r"^/api/(buzz|ingest)(/|$)", "auth": r"^/api/auth(/|$)",
         "notebook": r"^/api/notebook(/|$)", "messaging": r"^/api/(mailboxes|chat)(/|$)"}
ANY_PART = "|".join(PARTS.values())
WHO = {"a_user": "alice", "the_admin": "admin"}


def _call(case, server, who: str) -> None:
    case.call_and_validate(base_url=server.url, headers={"Authorization": f"Bearer {TOKENS[who]}"},
                           checks=EVERY_CHECK, timeout=30)


def _part(name: str):
    if name == "rest":
        return schema.exclude(path_regex=ANY_PART)
    return schema.include(path_regex=PARTS[name])


def _conformance_test(name: str, part: str, caller: str):
    def test(case, conformance_server):
        _call(case, conformance_server, WHO[caller])
    test.__doc__ = f"Every {part} operation (PARTS), called as {caller.replace('_', ' ')}, passes every check."
    wrapped = _part(part).parametrize()(test)
    wrapped.__name__ = wrapped.__qualname__ = name
    return wrapped


for _part_name in [*PARTS, "rest"]:
    for _caller in WHO:
        _name = f"test_the_{_part_name}_operations_conform_as_{_caller}"
        globals()[_name] = _conformance_test(_name, _part_name, _caller)


def test_every_part_holds_operations(app):
    """No part's pattern has gone stale (a part that matched nothing would pass without calling anything), and
    "rest" still holds the operations no part names."""
    paths = openapi_document(app.url_map.iter_rules(), app.view_functions, "1.0.0")["paths"]
    for name, pattern in PARTS.items():
        assert any(re.search(pattern, path) for path in paths), name
    assert any(not re.search(ANY_PART, path) and path != "/api/stream" for path in paths)


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
