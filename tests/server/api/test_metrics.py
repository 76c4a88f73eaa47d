"""GET /api/metrics against a real server, read with prometheus-client's own parser."""
from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest
import websockets
from prometheus_client.parser import text_string_to_metric_families

from coordserver import metrics
from coordserver.api.meta import route_template
from coordserver.domain.doctor import version as package_version
from coordserver.models import ChatMessage, Message, Project, Task, User
from coordserver.settings import Settings
from coordserver.timeutil import FrozenClock
from coordtui.client.api import tls_for
from coordtui.client.notebook import socket_url
from tests.helpers import TOKENS, backend_server, client
from tests.sse_helpers import open_stream, spawn_server
from tests.server.realtime.test_push import Receiver, kick, register

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SEND_ROUTE = "/api/mailboxes/{recipient}/messages"
INBOX_ROUTE = "/api/mailboxes/me/messages"
FAMILIES = {  # family name as the parser gives it (counters lose _total) -> type
    "coord_info": "gauge", "coord_users_total": "gauge", "coord_chat_channels_total": "gauge",
    "coord_chat_messages_total": "gauge", "coord_mailbox_messages_total": "gauge",
    "coord_swarm_projects_total": "gauge", "coord_swarm_tasks_total": "gauge",
    "coord_http_requests": "counter", "coord_http_request_duration_seconds": "histogram",
    "coord_sse_streams": "gauge", "coord_notebook_sockets": "gauge", "coord_events": "counter",
    "coord_push_outbox_pending": "gauge", "coord_push_deliveries": "counter",
    "coord_scheduler_lag_seconds": "gauge", "coord_event_loop_lag_seconds": "gauge",
    "coord_wake_pulses": "counter", "coord_metrics_scrape_duration_seconds": "histogram",
    "process_cpu_seconds": "counter", "process_resident_memory_bytes": "gauge", "python_info": "gauge",
    "python_gc_collections": "counter", "coord_buzz_alerts": "gauge", "coord_buzz_silenced_ingests": "counter",
    "coord_buzz_escalations": "counter", "coord_buzz_alert_time_to_ack_seconds": "histogram",
}


def scrape_text(url: str, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(f"{url}/api/metrics", headers=headers, timeout=30, verify=tls_for(url))


def scrape(url: str, token: str | None = None) -> dict:
    """Every sample of one scrape: {(sample name, sorted labels): value}."""
    response = scrape_text(url, token)
    assert response.status_code == 200, response.text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def requests_of(samples: dict, method: str, route: str, status: str) -> float:
    return value(samples, "coord_http_requests_total", method=method, route=route, status=status)


def wait_sample(url: str, name: str, expected: float, timeout: float = 10, **labels) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(url)
        if value(samples, name, **labels) == expected or time.monotonic() > deadline:
            assert value(samples, name, **labels) == expected, (name, labels)
            return samples
        time.sleep(0.05)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    with backend_server(request, tmp_path_factory, env={"SERVICE_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"},
                        clock=FrozenClock()) as server:
        yield server


def test_scrape_is_prometheus_text_with_every_family(srv):
    response = scrape_text(srv.url)
    assert response.status_code == 200
    assert response.headers["content-type"] == CONTENT_TYPE
    families = {f.name: f.type for f in text_string_to_metric_families(response.text)}
    missing = {name: kind for name, kind in FAMILIES.items() if families.get(name) != kind}
    assert not missing, missing
    samples = scrape(srv.url)
    assert value(samples, "coord_info", version=package_version()) == 1
    assert all(name.startswith(("coord_", "process_", "python_")) for name, _ in samples)


def test_requests_count_by_route_template_and_status_class_hot_paths_included(srv):
    task_id = str(uuid.uuid4())
    before = scrape(srv.url)
    with client(srv, "alice") as alice, client(srv) as anonymous:
        assert alice.post("/api/mailboxes/bob/messages", json={"title": "one"}).status_code == 200
        assert alice.post("/api/mailboxes/bob/messages", json={"title": "two"}).status_code == 200
        assert alice.post("/api/mailboxes/nobody-here/messages", json={"title": "x"}).status_code == 400
        # Without Content-Length (chunked) a send goes through Quart instead: the same label.
        chunked = alice.post("/api/mailboxes/bob/messages", content=iter([b'{"title":', b'"three"}']),
                             headers={"Content-Type": "application/json"})
        assert chunked.status_code == 200 and "content-length" not in chunked.request.headers
        assert alice.get("/api/mailboxes/me/messages").status_code == 200
        assert anonymous.get("/api/mailboxes/me/messages").status_code == 401
        assert alice.get(f"/api/swarm/tasks/{task_id}/events").status_code == 404
        assert alice.put(f"/api/swarm/tasks/{task_id}").status_code == 405
        assert alice.get("/api/no/such/path").status_code == 404
        assert anonymous.get(f"/api/no/{task_id}").status_code == 404
    after = scrape(srv.url)

    def delta(method, route, status):
        return requests_of(after, method, route, status) - requests_of(before, method, route, status)

    assert delta("POST", SEND_ROUTE, "2xx") == 3
    assert delta("POST", SEND_ROUTE, "4xx") == 1
    assert delta("GET", INBOX_ROUTE, "2xx") == 1
    assert delta("GET", INBOX_ROUTE, "4xx") == 1
    assert delta("GET", "/api/swarm/tasks/{id}/events", "4xx") == 1
    assert delta("PUT", "/api/swarm/tasks/{id}", "4xx") == 1
    assert delta("GET", "other", "4xx") == 2
    assert not any(task_id in labels_value for (_name, labels) in after for _k, labels_value in labels)
    durations = ("coord_http_request_duration_seconds_count", {"route": SEND_ROUTE})
    assert value(after, durations[0], **durations[1]) - value(before, durations[0], **durations[1]) == 4
    assert value(after, "coord_events_total", type="message") - value(before, "coord_events_total",
                                                                       type="message") == 3


@pytest.mark.single_process  # counts one process's requests
def test_metrics_has_no_rate_limit_and_is_counted_itself(make_server):
    server = make_server({"COORD_RATE_LIMITS": "on"})
    for _ in range(70):  # the "other" class allows 60 per window
        response = scrape_text(server.url)
        assert response.status_code == 200 and "x-ratelimit-limit" not in response.headers
    assert requests_of(scrape(server.url), "GET", "/api/metrics", "2xx") >= 70


def test_route_templates_are_written_as_in_the_api_document(srv):
    assert route_template("/api/chat/channels/<channel_id>/messages") == "/api/chat/channels/{id}/messages"
    assert route_template("/api/mailboxes/<other_than(me):recipient>/messages") == SEND_ROUTE
    assert route_template("/api/swarm/tasks/<id>/workflows/<workflow_id>") == \
        "/api/swarm/tasks/{id}/workflows/{workflowId}"
    assert route_template("/api/ingest/<appName>/<token>") == "/api/ingest/{appName}/{token}"
    for rule in srv.app.url_map.iter_rules():
        template = route_template(rule.rule)
        assert "<" not in template and "_" not in template.replace("notebook-pages", ""), template


def _counts(samples: dict) -> dict:
    names = ["coord_users_total", "coord_chat_channels_total", "coord_chat_messages_total",
             "coord_mailbox_messages_total", "coord_swarm_projects_total", "coord_push_outbox_pending"]
    counts = {name: value(samples, name) for name in names}
    counts.update({f"tasks:{status}": value(samples, "coord_swarm_tasks_total", status=status)
                   for status in ("queued", "ready", "in_progress", "holding", "review", "complete")})
    return counts


def _database_counts(server) -> dict:
    def read():
        return {"coord_users_total": User.select().count(), "coord_chat_messages_total": ChatMessage.select().count(),
                "coord_mailbox_messages_total": Message.select().count(),
                "coord_swarm_projects_total": Project.select().where(Project.archived_at.is_null()).count(),
                "tasks:in_progress": Task.select().where(Task.status == "in_progress").count()}
    return server.call(lambda: server.coord.store.read(read))


def _make_rows(server) -> None:
    """Two mails, a user, a channel with two messages, two projects (one archived), three tasks (one started)."""
    name = f"u{uuid.uuid4().hex[:8]}"
    with client(server, "alice") as alice, client(server, "admin") as admin, client(server) as anonymous:
        for title in ("a", "b"):
            assert alice.post("/api/mailboxes/bob/messages", json={"title": title}).status_code == 200
        code = admin.post("/api/auth/invites", json={}).json()["invite"]["code"]
        assert anonymous.post("/api/auth/register", json={"code": code, "identity": name}).status_code == 200
        channel = alice.post("/api/chat/channels", json={"type": "group", "name": "m", "members": ["bob"]})
        assert channel.status_code == 200, channel.text
        channel_id = channel.json()["channelId"]
        for body in ("hi", "there"):
            assert alice.post(f"/api/chat/channels/{channel_id}/messages", json={"body": body}).status_code == 200
        project_ids = [alice.post("/api/swarm/projects", json={"title": f"p{i}", "color": "#3b82f6"}).json()["id"]
                       for i in range(2)]
        assert alice.post(f"/api/swarm/projects/{project_ids[1]}/archive").status_code == 200
        tasks = [alice.post("/api/swarm/tasks", json={"title": f"t{i}", "projectId": project_ids[0]}).json()
                 for i in range(3)]
        started = alice.patch(f"/api/swarm/tasks/{tasks[0]['id']}/status",
                              json={"status": "in_progress"})
        assert started.status_code == 200, started.text


def wait_row_queries(service, expected: int, timeout: float = 10) -> None:
    """Until the background read a scrape started has finished."""
    deadline = time.monotonic() + timeout
    while service.row_queries < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    assert service.row_queries == expected


def test_row_counts_are_correct_at_most_two_seconds_old_and_refreshed_in_the_background(srv):
    service = srv.coord.services.metrics
    for who in TOKENS:  # presence writes a users row for an identity's first request: get that done first
        with client(srv, who) as http:
            assert http.get("/api/mailboxes/me/messages").status_code == 200
    srv.call(lambda: srv.coord.services.presence.flush())
    srv.clock.advance(seconds=5)  # whatever an earlier scrape cached is too old now: this scrape waits
    before = _counts(scrape(srv.url))
    queries = service.row_queries
    _make_rows(srv)
    srv.clock.advance(seconds=0.9)
    assert _counts(scrape(srv.url)) == before and service.row_queries == queries  # cached, under 1 s old
    srv.clock.advance(seconds=0.1)
    assert _counts(scrape(srv.url)) == before  # 1 s old: answered from the cache at once...
    wait_row_queries(service, queries + 1)  # ...while it is read again in the background
    after = _counts(scrape(srv.url))  # the same instant: the background read's figures, no new query
    assert service.row_queries == queries + 1
    changes = {name: after[name] - before[name] for name in after if after[name] != before[name]}
    assert changes == {"coord_users_total": 1, "coord_chat_channels_total": 1, "coord_chat_messages_total": 2,
                       "coord_mailbox_messages_total": 2, "coord_swarm_projects_total": 1, "tasks:ready": 2,
                       "tasks:in_progress": 1}
    assert {name: after[name] for name in _database_counts(srv)} == _database_counts(srv)

    with client(srv, "alice") as alice:
        assert alice.post("/api/mailboxes/bob/messages", json={"title": "one more"}).status_code == 200
    srv.clock.advance(seconds=2)  # never served 2 s old: this scrape waits for a read
    latest = _counts(scrape(srv.url))
    assert service.row_queries == queries + 2
    assert latest["coord_mailbox_messages_total"] == after["coord_mailbox_messages_total"] + 1


def test_scrape_times_itself(srv):
    before = scrape(srv.url)
    count = value(before, "coord_metrics_scrape_duration_seconds_count")
    samples = scrape(srv.url)
    assert value(samples, "coord_metrics_scrape_duration_seconds_count") == count + 1  # the one before
    assert value(samples, "coord_metrics_scrape_duration_seconds_bucket", le="+Inf") == count + 1
    assert 0 < value(samples, "coord_metrics_scrape_duration_seconds_sum") - \
        value(before, "coord_metrics_scrape_duration_seconds_sum") < 5
    assert "0.02" in {labels[0][1] for name, labels in samples if name == "coord_metrics_scrape_duration_seconds_bucket"}


def test_push_outcomes_and_outbox_backlog(srv):
    receiver = Receiver([500, 200, 404])
    try:
        register(srv, "carol", receiver.url)
        before = scrape(srv.url)
        with client(srv, "alice") as alice:
            assert alice.post("/api/mailboxes/carol/messages", json={"title": "push me"}).status_code == 200
            receiver.wait_calls(1)
            after_retry = wait_sample(srv.url, "coord_push_deliveries_total",
                                      value(before, "coord_push_deliveries_total", result="retry") + 1,
                                      result="retry")
            srv.clock.advance(seconds=2)
            assert value(scrape(srv.url), "coord_push_outbox_pending") == 1  # waiting for its retry
            srv.clock.advance(seconds=11)
            kick(srv)
            receiver.wait_calls(2)
            wait_sample(srv.url, "coord_push_deliveries_total",
                        value(after_retry, "coord_push_deliveries_total", result="ok") + 1, result="ok")
            assert alice.post("/api/mailboxes/carol/messages", json={"title": "refused"}).status_code == 200
            receiver.wait_calls(3)
            after = wait_sample(srv.url, "coord_push_deliveries_total",
                                value(before, "coord_push_deliveries_total", result="failed") + 1, result="failed")
        srv.clock.advance(seconds=2)
        assert value(scrape(srv.url), "coord_push_outbox_pending") == 0
        assert value(after, "coord_push_deliveries_total", result="retry") == \
            value(before, "coord_push_deliveries_total", result="retry") + 1
    finally:
        with client(srv, "carol") as carol:
            carol.post("/api/auth/webhook", json={"url": None})
        receiver.close()


async def test_open_streams_sockets_and_wake_pulses(srv):
    before = scrape(srv.url)
    async with open_stream(srv, "bob"):
        during = wait_sample(srv.url, "coord_wake_pulses_total", value(before, "coord_wake_pulses_total") + 1)
        assert value(during, "coord_sse_streams") == value(before, "coord_sse_streams") + 1
    wait_sample(srv.url, "coord_sse_streams", value(before, "coord_sse_streams"))

    async with httpx.AsyncClient(base_url=srv.url, headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as http:
        page_id = (await http.post("/api/notebook", json={"title": "metrics"})).json()["page"]["id"]
    async with websockets.connect(socket_url(srv.url, page_id, TOKENS["alice"])) as socket:
        await asyncio.wait_for(socket.recv(), 10)
        await asyncio.to_thread(wait_sample, srv.url, "coord_notebook_sockets",
                                value(before, "coord_notebook_sockets") + 1)
    await asyncio.to_thread(wait_sample, srv.url, "coord_notebook_sockets", value(before, "coord_notebook_sockets"))


def test_scheduler_and_event_loop_lag_as_admin_doctor_reports_them(srv):
    with client(srv, "admin") as admin:
        probes = {p["id"]: p for p in admin.get("/api/doctor/admin").json()["probes"]}
    samples = scrape(srv.url)
    doctor_lag = probes["scheduler"]["details"]["lagSeconds"]
    assert value(samples, "coord_scheduler_lag_seconds") == max(0.0, doctor_lag)
    loop_lag = value(samples, "coord_event_loop_lag_seconds")
    assert loop_lag * 1000 >= probes["loop"]["details"]["maxMs"] - 0.05 and loop_lag < 2
    srv.clock.advance(seconds=srv.coord.settings.scheduler_interval_seconds + 30)  # the scheduler is overdue
    overdue = value(scrape(srv.url), "coord_scheduler_lag_seconds")
    assert overdue >= 30


def test_metrics_token_is_required_when_set(make_server, caplog):
    server = make_server({"COORD_METRICS_TOKEN": "scrape-secret-123"})
    for token in (None, "wrong", TOKENS["admin"]):
        response = scrape_text(server.url, token)
        assert response.status_code == 401 and isinstance(response.json()["error"], str)
    response = scrape_text(server.url, "scrape-secret-123")
    assert response.status_code == 200 and response.headers["content-type"] == CONTENT_TYPE
    assert "scrape-secret-123" not in caplog.text


def test_metrics_off_is_404(make_server):
    server = make_server({"COORD_METRICS": "off"})
    response = scrape_text(server.url)
    assert response.status_code == 404 and response.json() == {"error": "Not found"}


def test_two_processes_sharing_a_metrics_dir_add_up(tmp_path, database_url):
    directory = str(tmp_path / "metrics")
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "counter_1.db").write_bytes(b"stale")  # a previous run's file
    metrics.prepare_dir(directory)
    assert list((tmp_path / "metrics").iterdir()) == []
    a, url_a = spawn_server(database_url, COORD_METRICS_DIR=directory)
    b, url_b = spawn_server(database_url, COORD_METRICS_DIR=directory)
    try:
        for url, count in ((url_a, 3), (url_b, 2)):
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as alice:
                for i in range(count):
                    assert alice.post("/api/mailboxes/bob/messages", json={"title": f"m{i}"}).status_code == 200
        with httpx.Client(base_url=url_b, headers={"Authorization": f"Bearer {TOKENS['bob']}"}, timeout=30) as bob:
            with bob.stream("GET", "/api/stream") as stream:
                lines = stream.iter_lines()  # kept: a dropped iterator closes the response
                assert next(lines) == "event: connected"
                samples = scrape(url_a)
                assert requests_of(samples, "POST", SEND_ROUTE, "2xx") == 5
                assert value(samples, "coord_events_total", type="message") == 5
                assert value(samples, "coord_sse_streams") == 1  # open on B, seen from A
                assert value(samples, "coord_mailbox_messages_total") == 5
                b.kill()  # dies with its stream open: its files still say 1
                b.wait(15)
        assert value(scrape(url_a), "coord_sse_streams") == 1
        metrics.mark_process_dead(b.pid)  # what the --workers supervisor does
        samples = scrape(url_a)
        assert value(samples, "coord_sse_streams") == 0
        assert requests_of(samples, "POST", SEND_ROUTE, "2xx") == 5  # B's counts stay in the totals
    finally:
        for process in (a, b):
            process.terminate()
            process.wait(15)


def test_settings_read_the_metrics_variables():
    settings = Settings.from_env({"COORD_METRICS": "off", "COORD_METRICS_TOKEN": "  s3cret  "})
    assert settings.metrics_enabled is False and settings.metrics_token == "s3cret"
    assert "s3cret" not in repr(settings)
    defaults = Settings.from_env({})
    assert defaults.metrics_enabled is True and defaults.metrics_token is None
    from coordserver.settings import metrics_dir
    assert metrics_dir({"COORD_METRICS_DIR": "/tmp/m"}) == "/tmp/m" and metrics_dir({}) is None


@pytest.mark.parametrize("imported_first", [False, True])
def test_multiprocess_mode_holds_whatever_imported_prometheus_client_first(tmp_path, imported_first):
    """COORD_METRICS_DIR set before start, or only after prometheus_client was imported (a worker forked
    from a process that had imported it): either way the values land in the shared directory."""
    import subprocess
    import sys
    script = ("import os, prometheus_client\n" if imported_first else "import os\n") + (
        f"os.environ['COORD_METRICS_DIR'] = {str(tmp_path)!r}\n"
        "from coordserver.metrics import process_metrics\n"
        "process_metrics().wake_pulses.inc()\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    kinds = {p.name.rsplit("_", 1)[0] for p in tmp_path.iterdir()}
    assert {"counter", "gauge_livesum", "gauge_livemax"} <= kinds, kinds


def test_alerts_by_state_time_to_ack_and_silenced_ingests(srv):
    alice = client(srv, "alice")
    before = scrape(srv.url)
    hook = alice.post("/api/buzz/webhooks", json={"appName": "metrics-a", "title": "T", "wakeAgent": "alice"}).json()
    ingest = f"/api/ingest/metrics-a/{hook['token']}"
    first = client(srv).post(ingest, json={"title": "one", "groupKey": "m1"}).json()
    client(srv).post(ingest, json={"title": "two", "groupKey": "m2"})
    srv.clock.advance(minutes=2)
    assert alice.post(f"/api/buzz/alerts/{first['alertId']}/ack").status_code == 200
    assert alice.post("/api/buzz/silences", json={"webhookId": hook["id"], "match": {"title": "quiet"},
                                                  "minutes": 5}).status_code == 200
    assert "silencedBy" in client(srv).post(ingest, json={"title": "quiet please"}).json()
    opened = value(before, "coord_buzz_alerts", state="open")
    acked = value(before, "coord_buzz_alerts", state="acked")
    samples = wait_sample(srv.url, "coord_buzz_alerts", opened + 2, state="open")  # "two" and the silenced one
    assert value(samples, "coord_buzz_alerts", state="acked") == acked + 1
    assert value(samples, "coord_buzz_silenced_ingests_total") == value(before, "coord_buzz_silenced_ingests_total") + 1
    counted = value(samples, "coord_buzz_alert_time_to_ack_seconds_count")
    assert counted == value(before, "coord_buzz_alert_time_to_ack_seconds_count") + 1
    assert value(samples, "coord_buzz_alert_time_to_ack_seconds_bucket", le="120.0") - \
        value(before, "coord_buzz_alert_time_to_ack_seconds_bucket", le="120.0") == 1  # two minutes to ack
    assert value(samples, "coord_buzz_alert_time_to_ack_seconds_bucket", le="60.0") == \
        value(before, "coord_buzz_alert_time_to_ack_seconds_bucket", le="60.0")
