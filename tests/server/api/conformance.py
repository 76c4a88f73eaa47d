"""The schemathesis run the conformance modules share (test_openapi_conformance*.py): every documented operation
against a real server, generated requests, every check schemathesis has. The response checks (no 5xx, documented
status codes, content types, response schemas, headers) and the request checks: a request the schema calls valid
is accepted (positive data acceptance) and one it calls invalid is refused (negative data rejection), so a client
generated from /api/openapi.json is right about what the server takes. Phases: the explicit examples, coverage
(each constraint's boundaries, both sides) and fuzzing, bounded and derandomised.

The operations are in parts (PARTS), each part one test that calls every case as each caller; the parts are spread
over several modules, each with its own server, so that the test processes run them side by side."""
from __future__ import annotations

import re

import pytest
import schemathesis
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import positive_data_acceptance

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


@pytest.fixture(scope="module")
def conformance_server(request, tmp_path_factory):
    """One server for each module that imports it."""
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


def _conformance_test(name: str, part: str):
    def test(case, conformance_server):
        # Both callers in one test: the generated cases are the same for both, and generating them is most of
        # the run's time (calling each case twice in one test took 90 s here against 154 s as two tests).
        for who in WHO.values():
            try:
                _call(case, conformance_server, who)
            except Exception as failure:
                failure.add_note(f"called as {who}")
                raise
    test.__doc__ = f"Every {part} operation (PARTS), called as a user and as the admin, passes every check."
    wrapped = _part(part).parametrize()(test)
    wrapped.__name__ = wrapped.__qualname__ = name
    return wrapped


def conformance_tests(*parts: str) -> dict:
    """The tests of these parts, one per part, by name: a module puts them in its globals()."""
    return {f"test_the_{part}_operations_conform": _conformance_test(f"test_the_{part}_operations_conform", part)
            for part in parts}
