"""Every JSON route's real answers against the response model it declares, as /api/openapi.json publishes it.

schemathesis (test_openapi_conformance.py) checks the answers its generated requests get, which for most routes
with an id in the path are 404s. Here a scripted tour builds real data (mail, chat, tasks, templates, workflows,
pages, links, buzz, tokens and invites) and calls every JSON operation of the document at least once with a 200,
each answer validated (JSON Schema 2020-12) against the document's schema for it.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import jsonschema
import pytest

from coordserver.settings import Settings
from coordserver.timeutil import FrozenClock
from tests.helpers import TOKENS, backend_url, base_env, start_server


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def tour_server(request, tmp_path_factory):
    clock = FrozenClock()  # moved on so that a backup agent's identity goes stale (a wake item of its own)
    srv = start_server(Settings.from_env(base_env(backend_url(request, tmp_path_factory),
                                                  SERVICE_WEBHOOK_ALLOWED_HOSTS="hooks.internal")), clock)
    srv.tour_clock = clock
    yield srv
    srv.stop()


def success_status(operation: dict) -> str:
    """The operation's one 2xx answer (200, or 201 for a route that makes something)."""
    return next(code for code in operation["responses"] if code.startswith("2"))


class Checked:
    """Validates each 2xx JSON answer against its operation's declared schema; remembers the operations seen."""

    def __init__(self, document: dict):
        self.document = document
        self.seen: set[tuple[str, str]] = set()
        self.operations = sorted(
            ((path, method) for path, item in document["paths"].items() for method, op in item.items()
             if "application/json" in op["responses"][success_status(op)]["content"]),
            key=lambda pm: pm[0].count("{"))

    def _operation(self, method: str, path: str) -> tuple[str, str]:
        for template, verb in self.operations:
            pattern = "^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(template)) + "$"
            if verb == method and re.match(pattern, path):
                return template, verb
        raise AssertionError(f"{method.upper()} {path}: no JSON operation in /api/openapi.json")

    def check(self, response: httpx.Response) -> None:
        response.read()
        template, method = self._operation(response.request.method.lower(), response.request.url.path)
        operation = self.document["paths"][template][method]
        status = success_status(operation)
        assert str(response.status_code) == status, (response.request.url, response.status_code, response.text[:300])
        schema = operation["responses"][status]["content"]["application/json"]["schema"]
        validator = jsonschema.Draft202012Validator({**schema, "components": self.document["components"]})
        error = jsonschema.exceptions.best_match(validator.iter_errors(response.json()))
        assert error is None, f"{method.upper()} {response.request.url.path}: {error.message} at {list(error.path)}"
        self.seen.add((template, method))


@pytest.fixture(scope="module")
def checked(tour_server) -> Checked:
    return Checked(httpx.get(f"{tour_server.url}/api/openapi.json").json())


@pytest.fixture(scope="module")
def as_user(tour_server, checked) -> Iterator:
    clients: list[httpx.Client] = []

    def make(who: str | None, token: str | None = None) -> httpx.Client:
        token = token or (TOKENS[who] if who else None)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx.Client(base_url=tour_server.url, headers=headers, timeout=30,
                            event_hooks={"response": [checked.check]})
        clients.append(http)
        return http
    yield make
    for http in clients:
        http.close()


def test_every_json_operation_answers_as_its_model_says(tour_server, as_user, checked):
    alice, bob, admin, anyone = as_user("alice"), as_user("bob"), as_user("admin"), as_user(None)
    _auth(alice, admin, anyone, as_user)
    _mail(alice, bob)
    _chat(alice, bob)
    task = _swarm(alice, bob)
    _recurring(alice)
    _workflows(alice, task)
    _notebook(alice, task)
    _directory_and_buzz(alice, bob, anyone)
    _asks(alice, bob)
    _alerts(alice, bob, anyone)
    tour_server.tour_clock.advance(hours=2)  # dora, whom alice backs up, has been silent for longer than its 1 h
    wake = admin.get("/api/wake/alice", params={"includeOffHours": "true"}).json()
    assert {item["source"] for item in wake["items"]} == {"message", "message_pending", "swarm", "buzz", "chat",
                                                          "backup", "ask", "ask_result", "alert"}
    for who in (alice, bob):
        who.get("/api/wake")
    alice.get("/api/presence")
    alice.get("/api/doctor")
    admin.get("/api/doctor/admin")
    _guards(admin, anyone, as_user)
    missing = sorted(f"{method.upper()} {path}" for path, method in checked.operations
                     if (path, method) not in checked.seen)
    assert not missing, f"operations the tour never called: {missing}"


def _guards(admin, anyone, as_user) -> None:
    """Two agents ping-pong past the default threshold (40 in 2 minutes): the admin lists the guard and clears it."""
    invite = admin.post("/api/auth/invites", json={"maxUses": 2, "isAgent": True}).json()["invite"]
    bots = [as_user(None, anyone.post("/api/auth/register", json={"code": invite["code"], "identity": name})
                    .json()["token"]) for name in ("bot-a", "bot-b")]
    for n in range(21):
        bots[0].post("/api/mailboxes/bot-b/messages", json={"title": f"ack {n}"})
        bots[1].post("/api/mailboxes/bot-a/messages", json={"title": f"ack ack {n}"})
    admin.get("/api/wake")  # the guard item
    [guard] = admin.get("/api/admin/guards").json()["active"]
    admin.post(f"/api/admin/guards/{guard['id']}/clear")
    admin.get("/api/admin/guards")


def _auth(alice, admin, anyone, as_user) -> None:
    anyone.get("/api/health")
    anyone.get("/api/openapi.json")
    alice.get("/api/auth/verify")
    alice.post("/api/auth/verify")
    invite = admin.post("/api/auth/invites", json={"identityHint": "dora"}).json()["invite"]
    spare = admin.post("/api/auth/invites", json={"maxUses": 2}).json()["invite"]
    admin.get("/api/auth/invites")
    dora = as_user(None, anyone.post("/api/auth/register", json={"code": invite["code"], "identity": "dora",
                                                                  "displayName": "Dora"}).json()["token"])
    anyone.post("/api/auth/register", json={"code": spare["code"], "identity": "erin"})
    admin.delete(f"/api/auth/invites/{spare['id']}")
    dora.post("/api/auth/setup-profile", json={"displayName": "Dora Explorer"})
    tokens = {t["identity"]: t["id"] for t in admin.get("/api/auth/tokens").json()["tokens"]}
    admin.patch(f"/api/auth/tokens/{tokens['dora']}", json={"backupAgent": "alice", "staleTriggerHours": 1})
    dora.post(f"/api/auth/tokens/{tokens['dora']}/rotate")  # the new token keeps alice as backup agent
    admin.post(f"/api/auth/tokens/{tokens['erin']}/revoke")
    alice.post("/api/mailboxes/dora/messages", json={"title": "waiting for dora"})
    alice.post("/api/auth/webhook", json={"url": "http://hooks.internal/alice"})
    alice.get("/api/auth/webhook")
    alice.post("/api/auth/webhook", json={"url": None})
    alice.get("/api/users")
    admin.get("/api/admin/users")
    admin.patch("/api/admin/users/dora", json={"isAgent": True})
    admin.get("/api/admin/user-stats")


def _mail(alice, bob) -> None:
    first = bob.post("/api/mailboxes/alice/messages", json={"title": "Deploy?", "body": "at 3", "urgent": True,
                                                             "metadata": {"job": 17}, "threadId": "t-1"}).json()
    second = bob.post("/api/mailboxes/alice/messages", json={"title": "Second"}).json()
    bob.post("/api/mailboxes/alice/messages", json={"title": "Third"})
    alice.get("/api/mailboxes/me/messages", params={"limit": 1})
    alice.get("/api/mailboxes/me/messages", params={"status": "unread"})
    alice.get("/api/mailboxes/me/messages/search", params={"q": "deploy"})
    alice.post(f"/api/mailboxes/me/messages/{first['id']}/reply", json={"body": "yes"})
    alice.post(f"/api/mailboxes/me/messages/{first['id']}/ack")
    alice.post("/api/mailboxes/me/messages/ack", json={"ids": [second["id"], 987654]})
    alice.post(f"/api/mailboxes/me/messages/{second['id']}/pending")
    alice.delete(f"/api/mailboxes/me/messages/{second['id']}/pending")
    alice.post(f"/api/mailboxes/me/messages/{second['id']}/pending")  # stays pending: a wake item
    alice.get("/api/mailboxes/me/sent")


def _chat(alice, bob) -> None:
    dm = bob.post("/api/chat/channels", json={"type": "dm", "identity": "alice"}).json()["channelId"]
    group = alice.post("/api/chat/channels", json={"type": "group", "name": "ops", "members": ["bob"]}).json()
    bob.post(f"/api/chat/channels/{dm}/messages", json={"body": "hello alice"})
    bob.post(f"/api/chat/channels/{group['channelId']}/messages", json={"body": "hello ops"})
    alice.get("/api/chat/channels")
    alice.get(f"/api/chat/channels/{dm}/messages", params={"limit": 10})
    alice.get("/api/chat/search", params={"q": "hello"})
    alice.post(f"/api/chat/channels/{group['channelId']}/typing")
    alice.post(f"/api/chat/channels/{group['channelId']}/read")
    alice.post(f"/api/chat/channels/{group['channelId']}/archive")
    alice.get("/api/chat/channels", params={"archived": "true"})
    alice.post(f"/api/chat/channels/{group['channelId']}/unarchive")


def _swarm(alice, bob) -> str:
    project = alice.post("/api/swarm/projects", json={"title": "Site", "color": "#123456", "workHoursStart": 9,
                                                      "workHoursEnd": 17, "taggedUsers": ["bob"]}).json()
    alice.patch(f"/api/swarm/projects/{project['id']}", json={"description": "the site"})
    spare = alice.post("/api/swarm/projects", json={"title": "Old", "color": "#654321"}).json()
    alice.post(f"/api/swarm/projects/{spare['id']}/archive")
    alice.get("/api/swarm/projects", params={"includeArchived": "true"})
    task = alice.post("/api/swarm/tasks", json={"title": "Fix login", "projectId": project["id"],
                                                "assigneeUserId": "alice", "sortKey": 1.5}).json()
    alice.post("/api/swarm/tasks", json={"title": "Queued one", "status": "queued"})
    alice.patch(f"/api/swarm/tasks/{task['id']}", json={"detail": "the form", "onOrAfterAt": "2020-01-01T00:00:00Z"})
    alice.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress"})
    alice.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "holding", "reason": "vendor"})
    alice.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress"})
    alice.get("/api/swarm/tasks", params={"includeCompleted": "true"})
    alice.get(f"/api/swarm/tasks/{task['id']}/events")
    leased = alice.post("/api/swarm/tasks", json={"title": "Leased"}).json()
    bob.patch(f"/api/swarm/tasks/{leased['id']}/status", json={"status": "in_progress", "leaseSeconds": 86400})
    bob.post(f"/api/swarm/tasks/{leased['id']}/renew", json={"leaseSeconds": 86400})
    held = alice.post("/api/reservations", json={"resource": "src/**", "ttlSeconds": 86400, "reason": "refactor",
                                                 "projectId": project["id"]}).json()
    bob.post("/api/reservations", json={"resource": "lib/app.py", "ttlSeconds": 60, "projectId": project["id"]})
    alice.post(f"/api/reservations/{held['id']}/renew", json={"ttlSeconds": 86400})
    spare_hold = bob.post("/api/reservations", json={"resource": "docs/", "ttlSeconds": 600,
                                                     "exclusive": False}).json()
    bob.get("/api/reservations", params={"resource": "src/a.py"})
    bob.delete(f"/api/reservations/{spare_hold['id']}")
    return task["id"]


def _recurring(alice) -> None:
    template = alice.post("/api/swarm/recurring", json={"title": "Weekly", "cronExpr": "0 9 * * 1",
                                                         "assigneeUserId": "alice"}).json()
    alice.patch(f"/api/swarm/recurring/{template['id']}", json={"enabled": False})
    alice.get("/api/swarm/recurring", params={"includeDisabled": "true"})
    alice.post("/api/swarm/recurring/preview", json={"cronExpr": "*/5 * * * *", "count": 2})
    alice.post("/api/swarm/recurring/tick")
    alice.delete(f"/api/swarm/recurring/{template['id']}")


def _workflows(alice, task: str) -> None:
    workflow = alice.post("/api/swarm/workflows", json={"title": "Release", "document": {"steps": ["tag"]}}).json()
    alice.get(f"/api/swarm/workflows/{workflow['id']}")
    alice.patch(f"/api/swarm/workflows/{workflow['id']}", json={"description": "how we ship"})
    alice.get("/api/swarm/workflows")
    alice.post(f"/api/swarm/tasks/{task}/workflows", json={"workflowId": workflow["id"]})
    alice.get(f"/api/swarm/tasks/{task}/workflows")
    alice.delete(f"/api/swarm/tasks/{task}/workflows/{workflow['id']}")
    alice.delete(f"/api/swarm/workflows/{workflow['id']}")


def _notebook(alice, task: str) -> None:
    page = alice.post("/api/notebook", json={"title": "Runbook", "content": "one", "tags": ["ops"],
                                             "reviewAt": "2030-01-01T00:00:00Z"}).json()["page"]
    alice.get("/api/notebook", params={"q": "run"})
    alice.get(f"/api/notebook/{page['id']}")
    alice.patch(f"/api/notebook/{page['id']}", json={"content": "one two", "locked": True})
    alice.post(f"/api/notebook/{page['id']}/presence")
    checkpoint = alice.post(f"/api/notebook/{page['id']}/versions", json={"label": "before deploy"}).json()
    alice.get(f"/api/notebook/{page['id']}/versions")
    alice.get(f"/api/notebook/{page['id']}/versions/{checkpoint['version']['id']}")
    alice.post(f"/api/notebook/{page['id']}/versions/{checkpoint['version']['id']}/restore")
    alice.post(f"/api/swarm/tasks/{task}/notebook-pages", json={"notebookPageId": page["id"]})
    alice.get(f"/api/swarm/tasks/{task}/notebook-pages")
    alice.request("DELETE", f"/api/swarm/tasks/{task}/notebook-pages", json={"notebookPageId": page["id"]})
    alice.delete(f"/api/notebook/{page['id']}")


def _asks(alice, bob) -> None:
    """Asks (alice's wake keeps one put to her and the unread outcome of one she made)."""
    bob.post("/api/asks", json={"to": ["alice", "carol"], "question": "Ship it?", "options": ["Yes", "No"],
                                "allowText": True, "deadline": "2099-01-01T00:00:00Z", "defaultOption": 2,
                                "context": {"taskId": "t-1"}})
    asked = alice.post("/api/asks", json={"to": "bob", "question": "Which fix?", "options": ["A", "B", "C"]}).json()
    bob.get(f"/api/asks/{asked['id']}")
    bob.post(f"/api/asks/{asked['id']}/answer", json={"option": "B"})
    withdrawn = alice.post("/api/asks", json={"to": "bob", "question": "Lunch?", "allowText": True}).json()
    alice.post(f"/api/asks/{withdrawn['id']}/cancel")
    alice.get("/api/asks", params={"role": "sent"})


def _alerts(alice, bob, anyone) -> None:
    """Alerts (alice's wake keeps one open alert; the other goes through every state)."""
    hook = alice.post("/api/buzz/webhooks", json={"appName": "prom", "title": "Prometheus", "wakeAgent": "alice",
                                                  "forUsers": "bob", "runbookUrl": "https://runbooks.example.com/p",
                                                  "escalateAfterMinutes": 30, "escalateTo": ["carol"]}).json()
    handled = anyone.post(f"/api/ingest/prom/{hook['token']}", json={"title": "Disk full", "groupKey": "db"}).json()
    anyone.post(f"/api/ingest/prom/{hook['token']}", json={"title": "Latency", "groupKey": "web"})
    alert = f"/api/buzz/alerts/{handled['alertId']}"
    bob.post(f"{alert}/ack")
    bob.post(f"{alert}/unack")
    snoozed = bob.post(f"{alert}/snooze", json={"minutes": 30}).json()
    bob.post(f"{alert}/snooze", json={"until": snoozed["snoozedUntil"]})  # (the tour's clock: 30 min ahead)
    alice.post(f"{alert}/resolve")
    quiet = bob.post("/api/buzz/silences", json={"appName": "prom", "match": {"title": "Latency",
                                                                            "labels": {"severity": "page"}},
                                                 "minutes": 30, "comment": "looking"}).json()
    anyone.post(f"/api/ingest/prom/{hook['token']}", json={"title": "Latency", "groupKey": "web",
                                                           "labels": {"severity": "page"}})
    bob.post("/api/buzz/silences/preview", json={"webhookId": hook["id"], "match": {"title": "Latency"}})
    bob.post("/api/buzz/silences", json={"webhookId": hook["id"], "match": {"title": "/x+/"},
                                         "endsAt": snoozed["snoozedUntil"]})
    bob.delete(f"/api/buzz/silences/{quiet['id']}")
    bob.get("/api/buzz/silences")
    bob.get(alert)
    bob.get("/api/buzz/alerts", params={"state": "resolved", "appName": "prom"})


def _directory_and_buzz(alice, bob, anyone) -> None:
    entry = alice.post("/api/directory", json={"title": "Docs", "url": "https://docs.example.com"}).json()
    alice.get("/api/directory")
    alice.patch(f"/api/directory/{entry['id']}", json={"description": "The handbook", "taggedUsers": ["bob"]})
    alice.delete(f"/api/directory/{entry['id']}")
    for prefix in ("/api/broadcast", "/api/buzz"):
        hook = alice.post(f"{prefix}/webhooks", json={"appName": "ci", "title": "CI", "wakeAgent": "alice",
                                                      "notifyAgent": "bob"}).json()
        alice.patch(f"{prefix}/webhooks/{hook['id']}", json={"forUsers": ["alice", "bob"]})
        alice.get(f"{prefix}/webhooks")
        anyone.post(f"/api/ingest/ci/{hook['token']}", json={"title": "Build failed", "body": "main is red",
                                                             "dedupKey": "build-1"})
        anyone.post(f"/api/ingest/ci/{hook['token']}", json={"title": "Build failed", "dedupKey": "build-1"})
        bob.get(f"{prefix}/events", params={"appName": "ci"})
        alice.delete(f"{prefix}/webhooks/{hook['id']}")
