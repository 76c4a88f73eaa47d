"""Swarm over real HTTP: projects, tasks, the status state table, claims, history and page links."""
from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from coordserver.events import channels
from coordserver.events import log
from coordserver.models import NotebookPage
from coordserver.server import ServerThread
from coordserver.settings import Settings
from coordserver.timeutil import to_db, utcnow
from tests.helpers import backend_url, base_env, client, eventually, ok, start_server

CLAIMERS = [f"u{i}" for i in range(1, 21)]
CLAIMER_TOKENS = {name: f"{name}-token-claim-race-000000" for name in CLAIMERS}
CLAIMER_ENV = {f"SERVICE_TOKEN_{name.upper()}": token for name, token in CLAIMER_TOKENS.items()}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    """One server per backend for the module; every test runs against both."""
    server = start_server(Settings.from_env(base_env(backend_url(request, tmp_path_factory)),
                                            scheduler_interval_seconds=3600))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def alice(srv):
    with client(srv, "alice") as c:
        yield c


@pytest.fixture(scope="module")
def bob(srv):
    with client(srv, "bob") as c:
        yield c


@pytest.fixture(scope="module")
def carol(srv):
    with client(srv, "carol") as c:
        yield c


def new_task(c: httpx.Client, **fields) -> dict:
    return ok(c.post("/api/swarm/tasks", json={"title": "Fix login", **fields}))


def events_of(c: httpx.Client, task_id: str) -> list[dict]:
    return ok(c.get(f"/api/swarm/tasks/{task_id}/events"))["events"]


def logged_events(srv: ServerThread, task_id: str) -> list[tuple[str, dict, bool]]:
    rows = srv.call(lambda: srv.coord.store.read(log.range_after, 0, None, 100000))
    return [(type_, data, to_all) for _, type_, data, to_all, _ in rows if data.get("taskId") == task_id]


class WakeRecorder:
    def __init__(self, srv: ServerThread):
        self.pulses: list[str] = []
        self._lock = threading.Lock()
        self._unsubscribe = srv.call(self._subscribe_on(srv))

    def _subscribe_on(self, srv):
        async def subscribe():
            return srv.coord.bus.subscribe(channels.WAKE, self._record)
        return subscribe

    def _record(self, payload: dict) -> None:
        with self._lock:
            self.pulses.append(payload["identity"])

    def saw(self, identity: str) -> bool:
        """Whether `identity` was pulsed, waiting for it: a pulse from another worker comes by NOTIFY."""
        return identity in eventually(lambda: list(self.pulses), lambda pulses: identity in pulses)

    def close(self) -> None:
        self._unsubscribe()


@pytest.fixture
def wakes(srv):
    recorder = WakeRecorder(srv)
    yield recorder
    recorder.close()


# --- projects --------------------------------------------------------------------------------

def test_project_create_defaults_leads_to_caller_and_validates(alice):
    project = ok(alice.post("/api/swarm/projects", json={"title": "Website", "color": "#3B82F6"}))
    assert project["projectLeadUserId"] == project["developerLeadUserId"] == "alice"
    assert project["color"] == "#3b82f6" and project["workHoursTimezone"] == "America/Chicago"
    assert project["archivedAt"] is None and project["createdAt"].endswith("Z")

    for body, message in [({"title": "x"}, "title and color are required"),
                          ({"color": "#ffffff"}, "title and color are required"),
                          ({"title": "x", "color": "blue"}, "color"),
                          ({"title": "x", "color": "#ffffff", "workHoursStart": 24}, "workHoursStart"),
                          ({"title": "x", "color": "#ffffff", "workHoursEnd": -1}, "workHoursEnd"),
                          ({"title": "x", "color": "#ffffff", "workHoursTimezone": "Mars/Olympus"}, "timezone"),
                          ({"title": "x", "color": "#ffffff", "projectLeadUserId": "nobody"}, "nobody")]:
        response = alice.post("/api/swarm/projects", json=body)
        assert response.status_code == 400, body
        assert message in response.json()["error"]


def test_project_patch_clears_nullable_fields_and_archive_hides_it(alice, bob):
    project = ok(alice.post("/api/swarm/projects", json={
        "title": "Zeta ops", "color": "#000000", "description": "d", "workHoursStart": 9, "workHoursEnd": 17,
        "workHoursTimezone": "Europe/Berlin", "developerLeadUserId": "bob", "blockingMode": True}))
    assert project["developerLeadUserId"] == "bob" and project["blockingMode"] is True
    patched = ok(bob.patch(f"/api/swarm/projects/{project['id']}",
                           json={"description": None, "workHoursStart": None, "workHoursEnd": None,
                                 "githubUrl": "https://github.com/x/y"}))
    assert patched["description"] is None and patched["workHoursStart"] is None
    assert patched["githubUrl"] == "https://github.com/x/y" and patched["title"] == "Zeta ops"
    assert bob.patch(f"/api/swarm/projects/{project['id']}", json={"color": "#12345"}).status_code == 400
    assert bob.patch(f"/api/swarm/projects/{project['id']}", json={"title": None}).status_code == 400

    archived = ok(alice.post(f"/api/swarm/projects/{project['id']}/archive"))
    assert archived["archivedAt"] is not None
    listed = [p["id"] for p in ok(alice.get("/api/swarm/projects"))["projects"]]
    assert project["id"] not in listed
    everything = ok(alice.get("/api/swarm/projects?includeArchived=true"))["projects"]
    assert project["id"] in [p["id"] for p in everything]
    titles = [p["title"] for p in everything]
    assert titles == sorted(titles)

    missing = alice.patch("/api/swarm/projects/nope", json={"title": "x"})
    assert missing.status_code == 404 and missing.json() == {"error": "Project not found"}
    assert alice.post("/api/swarm/projects/nope/archive").status_code == 404


# --- tasks: create, list, PATCH --------------------------------------------------------------

def test_create_task_defaults_to_ready_logs_event_and_pulses_assignee(srv, alice, wakes):
    task = new_task(alice, assigneeUserId="bob", detail="the form")
    assert task["status"] == "ready" and task["creatorUserId"] == "alice" and task["assigneeUserId"] == "bob"
    assert task["completedAt"] is None and task["linkedNotebookPages"] is None
    assert [e["kind"] for e in events_of(alice, task["id"])] == ["created"]
    logged = logged_events(srv, task["id"])
    assert logged == [("swarm_task_created", {"type": "swarm_task_created", "taskId": task["id"],
                                              "title": "Fix login", "status": "ready", "actor": "alice"}, True)]
    assert wakes.saw("bob")

    queued = new_task(alice, assigneeUserId="carol", status="queued")
    assert queued["status"] == "queued" and "carol" not in wakes.pulses


def test_create_task_refuses_bad_input(alice):
    for body, status, message in [
        ({}, 400, "title is required"),
        ({"title": "   "}, 400, "title is required"),
        ({"title": "x", "status": "done"}, 400, "Unknown status"),
        ({"title": "x", "assigneeUserId": "nobody"}, 400, "nobody"),
        ({"title": "x", "projectId": "no-such-project"}, 404, "Project not found"),
        ({"title": "x", "onOrAfterAt": "yesterday"}, 400, "onOrAfterAt"),
        ({"title": "x", "linkedNotebookPages": "p1"}, 400, "linkedNotebookPages"),
    ]:
        response = alice.post("/api/swarm/tasks", json=body)
        assert response.status_code == status, body
        assert message in response.json()["error"]
    bad = alice.post("/api/swarm/tasks", json={"title": "x", "status": "done"}).json()
    assert bad["allowed"] == list(STATUSES)
    assert alice.post("/api/swarm/tasks", content=b"[1]").status_code == 400


def test_task_list_filters_and_order(alice):
    project = ok(alice.post("/api/swarm/projects", json={"title": "Order", "color": "#111111"}))
    pid = project["id"]
    made = {}
    for status in ["complete", "holding", "queued", "ready", "review", "in_progress"]:
        made[status] = new_task(alice, projectId=pid, status=status, assigneeUserId="carol", title=status)
    later = new_task(alice, projectId=pid, status="ready", title="ready-sorted", sortKey=1)
    listed = ok(alice.get(f"/api/swarm/tasks?projectId={pid}"))["tasks"]
    assert [t["title"] for t in listed] == ["in_progress", "review", "ready-sorted", "ready", "queued", "holding"]
    with_done = ok(alice.get(f"/api/swarm/tasks?projectId={pid}&includeCompleted=true"))["tasks"]
    assert with_done[-1]["id"] == made["complete"]["id"] and with_done[-1]["completedAt"] is not None
    picked = ok(alice.get(f"/api/swarm/tasks?projectId={pid}&statuses=review,complete"))["tasks"]
    assert [t["title"] for t in picked] == ["review", "complete"]
    mine = ok(alice.get(f"/api/swarm/tasks?projectId={pid}&assignee=carol"))["tasks"]
    assert later["id"] not in [t["id"] for t in mine] and len(mine) == 5
    bad = alice.get("/api/swarm/tasks?statuses=ready,bogus")
    assert bad.status_code == 400 and "bogus" in bad.json()["error"]


def test_field_patch_ignores_status_clears_and_records_events(srv, alice, bob, wakes):
    task = new_task(alice, detail="d", linkedNotebookPages=["p-1"], issueUrl="https://x/1")
    patched = ok(bob.patch(f"/api/swarm/tasks/{task['id']}",
                           json={"status": "complete", "detail": None, "linkedNotebookPages": [],
                                 "title": "Fix login form", "assigneeUserId": "carol"}))
    assert patched["status"] == "ready" and patched["detail"] is None
    assert patched["linkedNotebookPages"] is None and patched["title"] == "Fix login form"
    assert patched["assigneeUserId"] == "carol" and patched["issueUrl"] == "https://x/1"
    kinds = [e["kind"] for e in events_of(alice, task["id"])]
    assert kinds == ["updated", "assigned", "created"]
    assigned = events_of(alice, task["id"])[1]
    assert assigned["beforeState"] == {"assigneeUserId": None} and assigned["afterState"] == {"assigneeUserId": "carol"}
    assert assigned["actorUserId"] == "bob"
    assert wakes.saw("carol")
    updated = logged_events(srv, task["id"])[-1]
    assert updated[0] == "swarm_task_updated" and "previousStatus" not in updated[1] and updated[1]["actor"] == "bob"

    assert bob.patch("/api/swarm/tasks/nope", json={"title": "x"}).json() == {"error": "Task not found"}
    assert bob.patch(f"/api/swarm/tasks/{task['id']}", json={"assigneeUserId": "ghost"}).status_code == 400
    assert bob.patch(f"/api/swarm/tasks/{task['id']}", json={"title": ""}).status_code == 400


# --- the state table -------------------------------------------------------------------------

# The contract's table, written out (API.md §6 "Status transitions" and, for `closed`, the v1.1 note):
# not derived from the product's TRANSITIONS, so a move added to or dropped from the code fails here.
# Rows are the current status, columns the requested one; "ok" = allowed, "=" = X->X (200, no change),
# "409" = refused. The canonical order is the columns' order (the 409 `allowed` lists follow it).
STATUSES = ("queued", "ready", "in_progress", "holding", "review", "complete", "closed")
STATE_TABLE = """
             queued  ready  in_progress  holding  review  complete  closed
queued       =       ok     409          ok       409     409       ok
ready        409     =      ok           ok       409     409       ok
in_progress  409     409    =            ok       ok      409       ok
holding      409     ok     ok           =        409     409       ok
review       409     409    ok           ok       =       ok        ok
complete     409     ok     409          409      409     =         409
closed       409     ok     409          409      409     409       =
"""


def _outcomes() -> dict[tuple[str, str], str]:
    header, *rows = [line.split() for line in STATE_TABLE.strip().splitlines()]
    assert tuple(header) == STATUSES and [row[0] for row in rows] == list(STATUSES)
    return {(row[0], target): cell for row in rows for target, cell in zip(header, row[1:], strict=True)}


OUTCOMES = _outcomes()
PAIRS = list(itertools.product(STATUSES, STATUSES))
assert len(OUTCOMES) == len(PAIRS) == 49


def _allowed(source: str) -> list[str]:
    return [target for target in STATUSES if OUTCOMES[source, target] == "ok"]


def _move_body(target: str) -> dict:
    return {"status": target, "reason": "waiting on vendor"} if target == "holding" else {"status": target}


@pytest.mark.parametrize("source,target", PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_state_table(srv, alice, source, target):
    """Every pair, moved by the assignee: allowed pairs apply, X->X is a no-op, the rest are 409."""
    task = new_task(alice, status=source, assigneeUserId="alice")
    response = alice.patch(f"/api/swarm/tasks/{task['id']}/status", json=_move_body(target))
    history = events_of(alice, task["id"])
    expected = OUTCOMES[source, target]
    if expected == "=":
        assert response.status_code == 200
        assert response.json() == task
        assert [e["kind"] for e in history] == ["created"]
        assert [e[0] for e in logged_events(srv, task["id"])] == ["swarm_task_created"]
    elif expected == "ok":
        moved = ok(response)
        assert moved["status"] == target
        assert (moved["completedAt"] is not None) == (target in ("complete", "closed"))
        last = history[0]
        assert last["kind"] == "status_changed" and last["actorUserId"] == "alice"
        assert last["beforeState"] == {"status": source}
        expected_after = {"status": target}
        if target == "holding":
            expected_after["reason"] = "waiting on vendor"
        assert last["afterState"] == expected_after
        update = logged_events(srv, task["id"])[-1]
        assert update[1] == {"type": "swarm_task_updated", "taskId": task["id"], "title": "Fix login",
                             "status": target, "previousStatus": source, "actor": "alice"}
    else:
        assert expected == "409"
        assert response.status_code == 409
        assert response.json() == {"error": f"Cannot move task from {source} to {target}",
                                   "allowed": _allowed(source)}
        assert [e["kind"] for e in history] == ["created"]
        listed = ok(alice.get(f"/api/swarm/tasks?statuses={source}&assignee=alice"))["tasks"]
        assert [t for t in listed if t["id"] == task["id"]] == [task]  # stored exactly as it was
        assert [e[0] for e in logged_events(srv, task["id"])] == ["swarm_task_created"]


def test_documented_409_example(alice):
    task = new_task(alice, status="queued")
    response = alice.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "complete"})
    assert response.status_code == 409
    assert response.json() == {"error": "Cannot move task from queued to complete", "allowed": ["ready", "holding", "closed"]}


@pytest.mark.parametrize("source,target", [p for p in PAIRS if OUTCOMES[p] == "ok"
                                           and p != ("ready", "in_progress")])
def test_anyone_may_make_the_other_moves(bob, alice, source, target):
    task = new_task(alice, status=source, assigneeUserId="alice")
    moved = ok(bob.patch(f"/api/swarm/tasks/{task['id']}/status", json=_move_body(target)))
    assert moved["status"] == target and moved["assigneeUserId"] == "alice"


def test_start_is_for_the_assignee_only(alice, bob):
    task = new_task(alice, assigneeUserId="alice")
    refused = bob.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress"})
    assert refused.status_code == 403 and "alice" in refused.json()["error"]
    assert events_of(bob, task["id"])[0]["kind"] == "created"
    assert ok(alice.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress"}))[
        "status"] == "in_progress"
    again = bob.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress"})
    assert again.status_code == 409 and "alice" in again.json()["error"]
    assert ok(alice.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress"}))[
        "assigneeUserId"] == "alice"


def test_claiming_an_unassigned_ready_task(alice, bob, wakes):
    task = new_task(alice)
    claimed = ok(bob.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress"}))
    assert claimed["assigneeUserId"] == "bob" and claimed["status"] == "in_progress"
    event = events_of(alice, task["id"])[0]
    assert event["beforeState"] == {"status": "ready", "assigneeUserId": None}
    assert event["afterState"] == {"status": "in_progress", "assigneeUserId": "bob"}
    ok(alice.post("/api/mailboxes/carol/messages", json={"title": "a marker pulse after the claim"}))
    assert wakes.saw("carol") and "bob" not in wakes.pulses  # its own claim never wakes it (issue 28)


def test_review_handoff_reassigns_and_send_back(alice, bob, carol, wakes):
    task = new_task(alice, assigneeUserId="bob")
    ok(bob.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress"}))
    review = ok(bob.patch(f"/api/swarm/tasks/{task['id']}/status",
                          json={"status": "review", "assigneeUserId": "carol"}))
    assert review["assigneeUserId"] == "carol" and wakes.saw("carol")
    back = ok(carol.patch(f"/api/swarm/tasks/{task['id']}/status",
                          json={"status": "in_progress", "assigneeUserId": "bob", "reason": "tests missing"}))
    assert back["assigneeUserId"] == "bob" and back["status"] == "in_progress"
    assert events_of(alice, task["id"])[0]["afterState"] == {
        "status": "in_progress", "reason": "tests missing", "assigneeUserId": "bob"}
    ok(bob.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "review"}))
    done = ok(carol.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "complete"}))
    assert done["completedAt"] is not None
    reopened = ok(alice.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "ready"}))
    assert reopened["completedAt"] is None
    unknown = bob.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress", "assigneeUserId": "x1"})
    assert unknown.status_code == 400
    kinds = [e["kind"] for e in events_of(alice, task["id"])]
    assert kinds == ["status_changed"] * 6 + ["created"]
    limited = ok(alice.get(f"/api/swarm/tasks/{task['id']}/events?limit=2"))["events"]
    assert [e["afterState"]["status"] for e in limited] == ["ready", "complete"]


def test_status_body_errors(alice):
    task = new_task(alice)
    path = f"/api/swarm/tasks/{task['id']}/status"
    assert alice.patch(path, json={}).json() == {"error": "status required"}
    unknown = alice.patch(path, json={"status": "done"})
    assert unknown.status_code == 400 and unknown.json()["allowed"] == list(STATUSES)
    for reason in [None, "", "   ", 42]:
        body = {"status": "holding"} if reason is None else {"status": "holding", "reason": reason}
        response = alice.patch(path, json=body)
        assert response.status_code == 400, reason
    assert alice.patch("/api/swarm/tasks/nope/status", json={"status": "ready"}).json() == {"error": "Task not found"}
    assert alice.get("/api/swarm/tasks/nope/events").status_code == 404
    assert events_of(alice, task["id"])[0]["kind"] == "created"


def test_claim_race_has_exactly_one_winner(make_server, database_url):
    """On PostgreSQL the four writer threads really run the claims side by side."""
    srv = make_server(env=CLAIMER_ENV, database_url=database_url, scheduler_interval_seconds=3600)
    with client(srv, "alice") as alice:
        for _ in range(3):
            _claim_race(srv, alice)


def _claim_race(srv, alice):
    task = new_task(alice)
    barrier = threading.Barrier(len(CLAIMERS))

    def claim(name: str) -> httpx.Response:
        with client(srv, token=CLAIMER_TOKENS[name]) as c:
            barrier.wait()
            return c.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress"})

    with ThreadPoolExecutor(len(CLAIMERS)) as pool:
        responses = list(pool.map(claim, CLAIMERS))
    winners = [name for name, r in zip(CLAIMERS, responses) if r.status_code == 200]
    assert len(winners) == 1, [r.status_code for r in responses]
    losers = [r for r in responses if r.status_code != 200]
    assert all(r.status_code in (403, 409) and r.json()["error"] for r in losers)
    final = [t for t in ok(alice.get("/api/swarm/tasks?statuses=in_progress"))["tasks"] if t["id"] == task["id"]]
    assert final[0]["assigneeUserId"] == winners[0]
    history = events_of(alice, task["id"])
    assert [e["kind"] for e in history] == ["status_changed", "created"]
    assert history[0]["actorUserId"] == winners[0]


def test_concurrent_moves_never_both_apply(make_server, database_url):
    """Two anyone-moves from one state race (in_progress -> review and -> holding): each applies
    only from the state it was decided on, so history stays a chain."""
    srv = make_server(database_url=database_url, scheduler_interval_seconds=3600)
    alice = client(srv, "alice")
    for _ in range(5):
        task = new_task(alice, status="in_progress", assigneeUserId="alice")
        barrier = threading.Barrier(2)

        def move(body):
            with client(srv, "bob") as c:
                barrier.wait()
                return c.patch(f"/api/swarm/tasks/{task['id']}/status", json=body)

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(move, [{"status": "review"}, {"status": "holding", "reason": "blocked"}]))
        codes = sorted(r.status_code for r in results)
        changes = [e for e in events_of(alice, task["id"]) if e["kind"] == "status_changed"]
        # The loser either saw the new state (409: not reachable) or, if reachable, applied after it.
        if codes == [200, 409]:
            assert len(changes) == 1
        else:
            assert codes == [200, 200] and len(changes) == 2
            assert changes[1]["afterState"]["status"] == changes[0]["beforeState"]["status"]
    alice.close()


# --- notebook-page links ---------------------------------------------------------------------

def _make_page(srv: ServerThread, title: str, created_by: str, tagged: list[str] | None) -> str:
    def create():
        now = to_db(utcnow())
        return NotebookPage.create(title=title, content="", created_by=created_by, tagged_users=tagged,
                                   created_at=now, updated_at=now).id
    return srv.call(lambda: srv.coord.store.write(create))


def test_notebook_page_links(srv, alice, bob):
    task = new_task(alice)
    public = _make_page(srv, "Runbook", "alice", None)
    private = _make_page(srv, "Secrets", "alice", ["carol"])
    path = f"/api/swarm/tasks/{task['id']}/notebook-pages"
    assert ok(alice.post(path, json={"notebookPageId": public})) == {"ok": True}
    assert ok(alice.post(path, json={"notebookPageId": public})) == {"ok": True}
    assert ok(alice.post(path, json={"notebookPageId": private})) == {"ok": True}
    mine = ok(alice.get(path))["pages"]
    assert {p["pageTitle"] for p in mine} == {"Runbook", "Secrets"}
    link = next(p for p in mine if p["notebookPageId"] == public)
    assert link["taskId"] == task["id"] and link["pageCreatedBy"] == "alice" and link["pageUpdatedAt"].endswith("Z")
    assert [p["pageTitle"] for p in ok(bob.get(path))["pages"]] == ["Runbook"]
    assert bob.post(path, json={"notebookPageId": private}).status_code == 404

    assert alice.post(path, json={}).json() == {"error": "notebookPageId required"}
    assert alice.post(path, json={"notebookPageId": "missing"}).status_code == 404
    assert alice.post("/api/swarm/tasks/nope/notebook-pages", json={"notebookPageId": public}).status_code == 404
    assert alice.get("/api/swarm/tasks/nope/notebook-pages").status_code == 404

    assert ok(alice.request("DELETE", path, json={"notebookPageId": public})) == {"ok": True}
    assert [p["pageTitle"] for p in ok(alice.get(path))["pages"]] == ["Secrets"]
    assert alice.request("DELETE", path, json={}).status_code == 400
    assert alice.request("DELETE", path, json={"notebookPageId": "missing"}).status_code == 404


def test_unauthenticated_requests_are_refused(srv):
    with client(srv) as anonymous:
        assert anonymous.get("/api/swarm/tasks").status_code == 401
        assert anonymous.post("/api/swarm/projects", json={"title": "x", "color": "#000000"}).status_code == 401
        assert anonymous.get("/api/swarm/recurring").status_code == 401
