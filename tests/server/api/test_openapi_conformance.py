"""schemathesis against a real server: every documented operation, generated requests, every response
checked against /api/openapi.json (no 5xx, documented status codes, content types, response schemas, headers),
as an ordinary user and as the admin. Bounded: a few examples per operation."""
from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (content_type_conformance, response_headers_conformance,
                                                response_schema_conformance, status_code_conformance)

from coordserver.settings import Settings
from tests.conftest import TOKENS, base_env, default_url, start_server

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
